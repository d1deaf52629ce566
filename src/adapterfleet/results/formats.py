"""How the read side writes a registered version and a metric, the same way in every command:
`v3 @best`, `0.7867 accuracy`."""

from __future__ import annotations

from collections.abc import Sequence


def version_label(version: int | None, aliases: Sequence[str] = ()) -> str:
    """`v3 @best @pruned-2`; `-` when there is no version."""
    if version is None:
        return "-"
    return f"v{version}" + "".join(f" @{alias}" for alias in aliases)


def metric_label(value: float | None, metric: str) -> str:
    """`0.7867 accuracy`; `-` when there is no value."""
    return "-" if value is None else f"{value:.4f} {metric}"


def number_from_tag(text: str | None) -> float | None:
    """A number stored as a tag (`metric_value`, `dev_accuracy`), None when absent or not one."""
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None
