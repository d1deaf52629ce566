"""Read-only queries straight on an MLflow SQLite store, for `status` and the registry gate.

Importing MLflow and opening its SQLAlchemy store costs about 4 s on a 2-core machine, which is
most of what `adapterfleet status` took; these queries answer the same questions in tens of
milliseconds with the standard library. They read the tables MLflow 3.x creates (experiments,
experiment_tags, runs, tags, latest_metrics, registered_models, model_versions,
model_version_tags, registered_model_aliases) in the `default` workspace, and raise `Unreadable`
when the schema is not the expected one (another MLflow version, an `MLFLOW_WORKSPACE`), so that
callers fall back to the MLflow client. Nothing is ever written: the file is opened read-only.
`rest_read` asks the same questions of a tracking server.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from adapterfleet.registry.info import ModelVersionInfo

WORKSPACE = "default"
DELETED_VERSION = "Deleted_Internal"  # MLflow's stage for a version being deleted


class Unreadable(Exception):
    """The store is not in the layout these queries know; use the MLflow client instead."""


@contextmanager
def _connect(db: Path) -> Iterator[sqlite3.Connection]:
    if os.environ.get("MLFLOW_WORKSPACE", WORKSPACE) != WORKSPACE:
        raise Unreadable("a workspace other than the default one")
    try:
        connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise Unreadable(str(exc)) from exc
    try:
        yield connection
    except sqlite3.Error as exc:  # a missing table or column: another schema
        raise Unreadable(str(exc)) from exc
    finally:
        connection.close()


def experiment_id(db: Path, name: str) -> str | None:
    """The id of the active experiment `name`, None when absent or deleted."""
    with _connect(db) as c:
        row = c.execute(
            "SELECT experiment_id, lifecycle_stage FROM experiments "
            "WHERE name = ? AND workspace = ?",
            (name, WORKSPACE),
        ).fetchone()
    return None if row is None or row[1] == "deleted" else str(row[0])


def experiment_tags(db: Path, experiment: str) -> dict[str, str]:
    """The tags of experiment `experiment` (an id)."""
    with _connect(db) as c:
        rows = c.execute(
            "SELECT key, value FROM experiment_tags WHERE experiment_id = ?", (int(experiment),)
        ).fetchall()
    return {str(key): str(value) for key, value in rows}


def active_runs(
    db: Path, experiment: str, tag_keys: Sequence[str]
) -> list[tuple[str, str, int, dict[str, str], dict[str, float]]]:
    """(run id, status, start ms, the `tag_keys` tags, latest metrics) of every active run of
    `experiment`, oldest first."""
    marks = ",".join("?" * len(tag_keys))
    with _connect(db) as c:
        runs = c.execute(
            "SELECT run_uuid, status, start_time FROM runs "
            "WHERE experiment_id = ? AND lifecycle_stage = 'active' "
            "ORDER BY start_time ASC, run_uuid ASC",
            (int(experiment),),
        ).fetchall()
        tags: dict[str, dict[str, str]] = {}
        for run, key, value in c.execute(
            f"SELECT t.run_uuid, t.key, t.value FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
            f"WHERE r.experiment_id = ? AND t.key IN ({marks})",
            (int(experiment), *tag_keys),
        ):
            tags.setdefault(run, {})[key] = str(value)
        metrics: dict[str, dict[str, float]] = {}
        for run, key, value, is_nan in c.execute(
            "SELECT m.run_uuid, m.key, m.value, m.is_nan FROM latest_metrics m "
            "JOIN runs r ON r.run_uuid = m.run_uuid WHERE r.experiment_id = ?",
            (int(experiment),),
        ):
            metrics.setdefault(run, {})[key] = float("nan") if is_nan else float(value)
    return [
        (run, str(status), int(start or 0), tags.get(run, {}), metrics.get(run, {}))
        for run, status, start in runs
    ]


def best_values(db: Path, run_ids: Sequence[str], key: str, highest: bool) -> dict[str, float]:
    """The highest (`highest`, else the lowest) value each run of `run_ids` logged for metric
    `key` over its whole history, NaN left out; runs without one are left out."""
    pick = "MAX" if highest else "MIN"
    out: dict[str, float] = {}
    with _connect(db) as c:
        for start in range(0, len(run_ids), 500):  # within SQLite's bound on parameters
            chunk = list(run_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for run, value in c.execute(
                f"SELECT run_uuid, {pick}(value) FROM metrics "
                f"WHERE key = ? AND is_nan = 0 AND run_uuid IN ({marks}) GROUP BY run_uuid",
                (key, *chunk),
            ):
                if value is not None:
                    out[str(run)] = float(value)
    return out


def existing_runs(db: Path, run_ids: Sequence[str]) -> set[str]:
    """The ids among `run_ids` of runs the store holds, in any experiment and lifecycle stage
    (`mlflow gc` removes a purged run's row)."""
    found: set[str] = set()
    with _connect(db) as c:
        for start in range(0, len(run_ids), 500):  # within SQLite's bound on parameters
            chunk = list(run_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            query = f"SELECT run_uuid FROM runs WHERE run_uuid IN ({marks})"
            found |= {str(run) for (run,) in c.execute(query, chunk)}
    return found


def model_versions(db: Path, head: str) -> dict[str, tuple[list[ModelVersionInfo], dict[str, int]]]:
    """For every registered model whose name starts with `head`: its live versions and its
    aliases (alias -> version)."""
    like = head.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    with _connect(db) as c:
        names = [
            name
            for (name,) in c.execute(
                "SELECT name FROM registered_models "
                "WHERE workspace = ? AND name LIKE ? ESCAPE '\\'",
                (WORKSPACE, like),
            )
            if name.startswith(head)
        ]
        out: dict[str, tuple[list[ModelVersionInfo], dict[str, int]]] = {n: ([], {}) for n in names}
        tags: dict[tuple[str, int], dict[str, str]] = {}
        for name, version, key, value in c.execute(
            "SELECT name, version, key, value FROM model_version_tags "
            "WHERE workspace = ? AND name LIKE ? ESCAPE '\\'",
            (WORKSPACE, like),
        ):
            tags.setdefault((name, int(version)), {})[str(key)] = str(value)
        for name, alias, version in c.execute(
            "SELECT name, alias, version FROM registered_model_aliases "
            "WHERE workspace = ? AND name LIKE ? ESCAPE '\\'",
            (WORKSPACE, like),
        ):
            if name in out:
                out[name][1][str(alias)] = int(version)
        for name, version, source, run_id, created in c.execute(
            "SELECT name, version, source, run_id, creation_time FROM model_versions "
            "WHERE workspace = ? AND name LIKE ? ESCAPE '\\' "
            "AND (current_stage IS NULL OR current_stage != ?)",
            (WORKSPACE, like, DELETED_VERSION),
        ):
            if name not in out:
                continue
            number = int(version)
            aliases = tuple(sorted(a for a, v in out[name][1].items() if v == number))
            out[name][0].append(
                ModelVersionInfo(
                    name=name,
                    version=number,
                    source=str(source or ""),
                    run_id=run_id or None,
                    aliases=aliases,
                    tags=tags.get((name, number), {}),
                    created_ms=int(created) if created is not None else None,
                )
            )
    return out
