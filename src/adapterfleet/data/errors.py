"""The one error type of the data layer."""

from __future__ import annotations

import re

from adapterfleet.errors import UserError


class TaskError(UserError, ValueError):
    """A task cannot be configured or loaded; the message is one line naming task, field and fix.

    ``task`` is None for errors about the tasks file as a whole (then ``field`` names the place).
    """

    def __init__(self, task: str | None, field: str, problem: str, fix: str = "") -> None:
        self.task = task
        self.field = field
        self.problem = problem
        self.fix = fix
        text = f"{field}: {problem}" if task is None else f"task {task!r}, {field}: {problem}"
        if fix:
            text += f"; {fix}"
        super().__init__(re.sub(r"\s*[\r\n]+\s*", " ", text))
