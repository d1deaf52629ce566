"""How long-running work talks to the person who started it: one line at a time."""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]  # prints (or logs) one line of progress
