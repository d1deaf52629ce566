"""The answer of a multiple-choice row: which of its choices `label_field` names.

Resolved per row, first match wins: (1) with the row's own labels of its choices
(`choices.labels`), it must be one of them and nothing else counts; (2) a label name
(`label_names`); (3) an index 0..n-1; (4) a letter A, B, ... (case ignored); (5) the text of
exactly one choice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapterfleet.data.quality import RowRef
    from adapterfleet.data.tasks import TaskSpec

_INT = re.compile(r"^[+-]?\d{1,18}$")  # more digits: no index, and `int` may refuse them


def answer_index(
    spec: TaskSpec,
    answer: Any,
    choices: Sequence[str],
    row_labels: Sequence[str] | None,
    where: RowRef,
) -> int:
    """The position of the right choice (see the module's docstring for the order)."""
    text = answer_text(answer).strip()
    if row_labels is not None:
        if text in row_labels:
            return row_labels.index(text)
        problem = f"answer {answer!r} is not among the row's labels {list(row_labels)}"
        raise where.error(spec.label_field, problem, "fix the row or label_field")
    found = _resolve(text, spec.label_names, choices)
    if found is None:
        same = [i + 1 for i, choice in enumerate(choices) if choice.strip() == text]
        if len(same) > 1:
            problem = f"answer {answer!r} is the text of choices {same} alike, so it names none"
            raise where.error(spec.label_field, problem, "give the answer as an index or a label")
        n = len(choices)
        problem = (
            f"answer {answer!r} is not a label name {list(spec.label_names)}, an index 0..{n - 1},"
            f" a letter A..{chr(ord('A') + n - 1)} or one choice's text"
        )
        fix = "fix label_field; labels counting from 1 need label_names, e.g. [1, 2]"
        raise where.error(spec.label_field, problem, fix)
    return found


def _resolve(text: str, names: Sequence[str], choices: Sequence[str]) -> int | None:
    n = len(choices)
    if text in names:
        return list(names).index(text)
    if _INT.match(text) and 0 <= int(text) < n:
        return int(text)
    if len(text) == 1 and text.isalpha() and 0 <= ord(text.upper()) - ord("A") < n:
        return ord(text.upper()) - ord("A")
    matches = [i for i, choice in enumerate(choices) if choice.strip() == text]
    return matches[0] if len(matches) == 1 else None


def answer_text(value: Any) -> str:
    """An answer or a row's label as text: a whole float as its integer (JSON's 2.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else str(value)
