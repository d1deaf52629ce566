"""Each task's metric (config/task_metrics.py): the type's default, a given metric checked
against every task it applies to, `f1` on more than two classes as `f1_macro`, and the refusals,
each one line naming the field, the metrics of the task's type and the fix."""

from pathlib import Path

import pytest

from adapterfleet.config import ConfigError, load_config
from adapterfleet.results.status import StatusPlan

MIXED = """name: p
data_root: .
tasks:
  a: {train: c.tsv, dev: c.tsv, text_fields: [sentence], label_names: ["0", "1"]}
  m: {train: m.tsv, dev: m.tsv, text_fields: [sentence], label_names: ["0", "1", "2"]}
  r: {type: regression, train: r.tsv, dev: r.tsv, text_fields: [sentence], range: [0, 5]}
fusion: {targets: {a: all, r: all}}
"""


def _config(tmp_path: Path, extra: str = "", overrides: tuple[str, ...] = ()):
    (tmp_path / "c.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    (tmp_path / "m.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\ne f\t2\n")
    (tmp_path / "r.tsv").write_text("sentence\tlabel\na b\t0.5\nc d\t4.5\n")
    path = tmp_path / "pipe.yaml"
    path.write_text(MIXED + extra)
    return load_config(path, list(overrides))


def _refused(tmp_path: Path, extra: str = "", overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, extra, overrides)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_each_task_gets_its_type_default_and_classification_hashes_stay(tmp_path) -> None:
    config = _config(tmp_path, "baselines: {systems: [head], tasks: [a, r]}\n")
    adapters = config.adapters
    assert [adapters.training_for(t).metric for t in "amr"] == ["accuracy", "accuracy", "pearson"]
    assert adapters.training_for("a") is adapters.training  # unchanged settings, same hash
    assert config.tasks["r"].metrics == ("pearson", "spearman", "mse")
    assert config.fusion.training_for("r").metric == "pearson"
    assert config.fusion.for_target("a").training == config.fusion.training
    assert config.baselines.training_for("head", "r").metric == "pearson"
    assert config.baselines.training_for("head", "a").metric == "accuracy"


def test_a_metric_given_per_task_wins_and_f1_on_three_classes_is_macro(tmp_path) -> None:
    config = _config(
        tmp_path,
        overrides=(
            "adapters.training.metric=f1",
            "adapters.task_training.r.metric=mse",
            "tasks.m.metrics=[accuracy, f1]",
        ),
    )
    metrics = {t: config.adapters.training_for(t).metric for t in "amr"}
    assert metrics == {"a": "f1", "m": "f1_macro", "r": "mse"}
    assert config.tasks["m"].metrics == ("accuracy", "f1_macro")


def test_a_searcher_or_scheduler_takes_tasks_of_different_metrics(tmp_path) -> None:
    config = _config(tmp_path, overrides=("adapters.scheduler=asha",))
    assert config.adapters.training_for("r").metric == "pearson"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ("adapters.training.metric=f1",),
            "adapters.training.metric: task 'r': 'f1' does not fit a regression task; metrics "
            "for regression tasks: pearson, spearman, mse; set adapters.task_training.r.metric "
            "to one of them, or leave adapters.training.metric out (each task then uses its "
            "type's default)",
        ),
        (
            ("adapters.task_training.a.metric=auc",),
            "adapters.task_training.a.metric: task 'a': 'auc' is unknown; metrics for "
            "classification tasks: accuracy, f1, f1_macro, f1_micro, matthews;",
        ),
        (
            ("tasks.r.metrics=[pearson, accuracy]",),
            "tasks.r.metrics: task 'r': 'accuracy' does not fit a regression task; metrics for "
            "regression tasks: pearson, spearman, mse; list metrics of its type",
        ),
        (
            ("fusion.training.metric=accuracy",),
            "fusion.training.metric: task 'r': 'accuracy' does not fit a regression task; "
            "metrics for regression tasks: pearson, spearman, mse; leave "
            "fusion.training.metric out (each task then uses its type's default)",
        ),
        (
            ("baselines.systems=[head]", "baselines.tasks=[r]", "baselines.training.metric=f1"),
            "baselines.training.metric: task 'r': 'f1' does not fit a regression task",
        ),
        (
            ("baselines.systems=[mt-a]", "baselines.tasks=[a]"),
            "baselines.systems: MT-A selects on one metric over the dev sets of every adapter "
            "task pooled, which regression task(s) ['r'] cannot join",
        ),
    ],
)
def test_a_metric_that_does_not_fit_is_refused_before_any_trial(
    tmp_path, overrides, expected
) -> None:
    assert _refused(tmp_path, overrides=overrides).startswith(expected)


def test_a_stage_metric_falls_back_for_a_task_the_stage_does_not_train(tmp_path) -> None:
    config = _config(tmp_path, overrides=("adapters.tasks=[a, m]", "adapters.training.metric=f1"))
    assert config.adapters.training_for("r").metric == "pearson"  # only a fusion target here


def test_the_status_plan_carries_each_tasks_metric(tmp_path) -> None:
    plan = StatusPlan.from_config(_config(tmp_path))
    assert (plan.metric, plan.task_metrics) == ("accuracy", {"r": "pearson"})
    again = StatusPlan.from_tags("p", plan.to_tags(), [])
    assert again.metric_for("r") == "pearson" and again.metric_for("a") == "accuracy"
