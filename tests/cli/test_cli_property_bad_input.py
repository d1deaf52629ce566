"""Random values thrown at every field of a pipeline config (issue #22): `adapterfleet run` either
refuses the field in one `error:` line, exit status 2, no traceback, or accepts the config and
refuses the Ray address it is given (a closed port, so no Ray starts): the same contract. Either
way nothing is written: no tracking store, no storage folder.

The fields come from the schema's own lists (top-level keys, each stage's keys, every training
setting, a task's keys and a file split's), so a field added later is covered without a change
here."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tuning_support import config_document, write_config
from typer.testing import CliRunner

from adapterfleet.cli.app import app
from adapterfleet.config import TOP_KEYS
from adapterfleet.config.adapter_stage import ADAPTER_KEYS
from adapterfleet.config.stages import BASELINE_KEYS, FUSION_KEYS
from adapterfleet.data.sources import FILE_SPLIT_KEYS
from adapterfleet.data.tasks import TASK_KEYS
from adapterfleet.training import TrainConfig

TRAINING = [f.name for f in dataclasses.fields(TrainConfig)]
TRAININGS = (
    "adapters.training",
    "adapters.task_training.fruit",
    "fusion.training",
    "baselines.training",
    "baselines.system_training.head",
)
# Fields whose random values could make a run write outside its folder (a generated demo suite
# in any storage) or reach out to hosts: given values from `SPECIAL` instead.
SPECIAL = ("storage", "tracking_uri", "demo_tasks", "tasks_file")
FIELDS = sorted(
    {
        *(k for k in TOP_KEYS if k not in SPECIAL),
        *(f"adapters.{k}" for k in ADAPTER_KEYS),
        *(f"fusion.{k}" for k in FUSION_KEYS),
        *(f"baselines.{k}" for k in BASELINE_KEYS),
        "resources.cpu",
        "resources.gpu",
        "adapters.task_grid.fruit.reduction_factors",
        "adapters.task_grid.fruit.learning_rates",
        *(f"{where}.{key}" for where in TRAININGS for key in TRAINING),
        *(f"tasks.fruit.{k}" for k in TASK_KEYS),
        *(f"tasks.fruit.train.{k}" for k in FILE_SPLIT_KEYS),
    }
)


def as_yaml(value: Any) -> str:
    """`value` as the text of a `--set key=value` (YAML flow style, one line)."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n...\n").strip()
    )


SCALARS = st.one_of(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.booleans(),
    st.none(),
)
VALUES = st.one_of(
    SCALARS.map(as_yaml),
    st.lists(SCALARS, max_size=4).map(as_yaml),
    st.dictionaries(st.text(max_size=6), SCALARS, max_size=3).map(as_yaml),
    st.text(max_size=12),  # raw text: often not YAML at all
    st.sampled_from(
        ["[", "{a", "*x", "!!python/object/apply:os.system [ls]", "all", "cuda", "optuna",
         "asha", "-1", "0", "1e-3", ".nan", "-.inf", "[fruit, fruit]", "[]", "{}", "fruit",
         "water", "['fruit', 'ghost']", "\ufeffx", "a\x00b", '"a\\0b"', '"/\\0"', "x" * 300]
    ),
)  # fmt: skip


def special_values(root: Path, closed: int) -> dict[str, st.SearchStrategy[str]]:
    return {
        "storage": st.sampled_from(
            ["runs2", "a b/c", "", "5", "[1]", "{a: 1}", "x" * 300, '"a\\0b"']
        ),
        "tracking_uri": st.sampled_from(
            [
                "", "5", "nonsense", "sqlite:///other/mlflow.db", f"file://{root}/mlruns",
                f"http://127.0.0.1:{closed}", f"http://u:pw@127.0.0.1:{closed}",
                f"postgresql://u:pw@127.0.0.1:{closed}/db", "sqlite://", "[http://a]",
            ]
        ),
        "demo_tasks": st.sampled_from(["false", "null", "0", "yes"]),
        "tasks_file": st.sampled_from(["nowhere.yaml", "", "5", "pipeline.yaml"]),
    }  # fmt: skip


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    root = tmp_path_factory.mktemp("property")
    document = config_document(root, tiny_model)
    document["fusion"] = {"targets": {"fruit": "all"}}
    document["tasks"]["fruit"]["train"] = {"path": document["tasks"]["fruit"]["train"]}
    return write_config(root, document)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_value_of_any_field_keeps_the_one_line_contract(
    pipeline: Path, data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pipeline.parent
    monkeypatch.chdir(root)  # relative storage and store paths land under root
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.setenv(name, "")  # a login moved out of a URI is put back after
    closed = closed_port()
    specials = special_values(root, closed)
    count = data.draw(st.integers(1, 3), label="fields")
    overrides = []
    for _ in range(count):
        field = data.draw(st.sampled_from([*FIELDS, *SPECIAL]), label="field")
        value = data.draw(specials.get(field, VALUES), label="value")
        overrides += ["-o", f"{field}={value}"]
    result = CliRunner().invoke(
        app, ["run", str(pipeline), "--address", f"127.0.0.1:{closed}", "--quiet", *overrides]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{overrides}: {type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code == 2, (overrides, result.output)
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, (overrides, result.output)
    assert "pw@" not in result.output, result.output  # a login is never printed
    assert not list(root.rglob("mlflow.db")), overrides
    assert not any(p.name in ("runs", "runs2", "mlruns", "other") for p in root.iterdir())
