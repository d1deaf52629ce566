"""How the read side writes a registered version and a metric, the same way in every command:
`v3 @best`, `0.7867 accuracy`; and its plain-text tables."""

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


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """`rows` (a header first) as lines of left-aligned columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
