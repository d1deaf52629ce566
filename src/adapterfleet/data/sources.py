"""Where one split's rows come from (`SplitSource`): a local file and how to read it, or a split
of a hub dataset. `tasks.py` validates a split's YAML into one; `readers.py` reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet.data.encodings import DEFAULT_ENCODING

FORMATS = ("tsv", "csv", "jsonl", "json", "parquet")
EXTENSIONS = {
    ".tsv": "tsv",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}

FILE_SPLIT_KEYS = (
    "path",
    "format",
    "header",
    "columns",
    "encoding",
    "quotes",
    "rename",
    "rows",
)
# which formats read quoted fields unless `quotes:` says otherwise: GLUE's TSV files hold bare
# quote characters (an opening quote with no closing one), so a TSV is read without quoting
QUOTED_BY_DEFAULT = {"csv": True, "tsv": False}
HUB_SPLIT_KEYS = ("split", "rename", "rows")
HUB_TASK_KEYS = ("hub", "hub_config")  # beside train/dev, which then name the hub's splits


def hub_under_split(key: str, raw: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(field, problem, fix) for `train: {hub: nyu-mll/glue, ...}`: the hub keys are the task's,
    and the split names the hub's split; None when `raw` holds neither."""
    found = [name for name in HUB_TASK_KEYS if name in raw]
    if not found:
        return None
    split = raw.get("split") or ("train" if key == "train" else "validation")
    shape = f"hub: {raw.get('hub') or '<id or folder>'}, "
    shape += f"hub_config: {raw['hub_config']}, " if "hub_config" in raw else ""
    if len(found) == 2:
        problem, fix = f"hub and hub_config are task keys, not {key} keys", "write them"
    else:
        problem, fix = f"{found[0]} is a task key, not a {key} key", "write it"
    fix += f" beside {key}, which then names the hub's split"
    return f"{key}.{found[0]}", problem, f"{fix}: {{{shape}{key}: {split}}}"


@dataclass(frozen=True)
class SplitSource:
    """Where one split's rows come from: a local file (``path``) or a hub split (``split``).

    ``rename`` maps a column name in this source to the name the task's fields use; ``rows``
    (start, stop) keeps the records start..stop-1 of the source (0-based, stop None: to the end),
    so one file can give a task both its train and its dev rows. ``quotes`` (tsv/csv only; None:
    the format's default, `QUOTED_BY_DEFAULT`) reads "..." as one field, "" as a quote in it.
    """

    path: Path | None = None
    format: str | None = None
    header: bool = True
    columns: tuple[str, ...] | None = None
    encoding: str = DEFAULT_ENCODING
    rename: dict[str, str] = field(default_factory=dict)
    split: str | None = None
    rows: tuple[int, int | None] | None = None
    quotes: bool | None = None

    @property
    def quoted(self) -> bool:
        """Whether the file's fields may be quoted ("..."), as it is read."""
        if self.quotes is not None:
            return self.quotes
        return QUOTED_BY_DEFAULT.get(self.format or "", False)

    def to_mapping(self) -> dict[str, Any]:
        """The YAML form of this source (paths absolute)."""
        sliced = {"rows": list(self.rows)} if self.rows is not None else {}
        if self.split is not None:
            return {"split": self.split, "rename": dict(self.rename), **sliced}
        out: dict[str, Any] = {
            "path": str(self.path),
            "format": self.format,
            "header": self.header,
            "encoding": self.encoding,
            "rename": dict(self.rename),
        }
        if self.columns is not None:
            out["columns"] = list(self.columns)
        if self.quotes is not None:  # only when given: a config's hash stays what it was
            out["quotes"] = self.quotes
        return out | sliced
