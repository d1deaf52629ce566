"""`adapterfleet prune`: rank a registered fusion's adapters by their mean fusion weight, train and
register the smaller fusion with its lineage, and report accuracy and speed per size."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from adapterfleet.config import ConfigError
from adapterfleet.orchestration.predict import predict_file
from adapterfleet.orchestration.prune import prune_fusion, rank_adapters, sizes_to_keep
from adapterfleet.registry import ensure_experiment, fusion_model_name, get_version
from adapterfleet.results.prune_report import y_limits

ROOT = Path(__file__).resolve().parents[2]


def test_ranking_is_the_mean_weight_over_layers_largest_first():
    weights = torch.tensor([[0.1, 0.6, 0.3], [0.3, 0.2, 0.5]])  # mean: 0.2, 0.4, 0.4
    ranking = rank_adapters(weights, ["a", "b", "c"])
    assert [t for t, _ in ranking] == ["b", "c", "a"]  # the tie keeps the given order
    assert [w for _, w in ranking] == pytest.approx([0.4, 0.4, 0.2])
    with pytest.raises(ValueError, match="3 weight columns for 2 adapters"):
        rank_adapters(weights, ["a", "b"])


def test_sizes_halve_by_default_or_follow_keep_or_threshold():
    ranking = [(f"t{i}", w) for i, w in enumerate([0.4, 0.25, 0.15, 0.1, 0.1])]
    assert sizes_to_keep(ranking) == [3, 2, 1]
    assert sizes_to_keep([(f"t{i}", 1 / 16) for i in range(16)]) == [8, 4, 2, 1]
    assert sizes_to_keep(ranking, keep=[1, 4, 1]) == [4, 1]
    assert sizes_to_keep(ranking, threshold=0.15) == [3]


def test_the_plot_axes_start_at_zero_so_small_differences_look_small():
    """prune.png drew accuracies of 0.900 and 0.910 from the bottom to the top of the panel."""
    low, high = y_limits([0.91, 0.905, 0.90])
    assert low == 0.0 and 0.91 < high < 1.0
    assert y_limits([-0.2, 0.4])[0] == -0.2  # a correlation under zero stays in view
    assert y_limits([0.0]) == (0.0, 0.08)


@pytest.mark.parametrize(
    ("keep", "threshold", "message"),
    [
        ([5], None, "prune --keep: 5 would drop none; keep at most 3 (the fusion has 4 adapters"),
        ([0], None, "prune --keep: 0 keeps no adapter; keep at least 1 (the fusion has 4"),
        ([2], 0.2, "give --keep or --threshold, not both"),
        (None, 1.5, "prune --threshold: 1.5 is not between 0 and 1"),
        (None, 0.5, "no adapter has a mean weight of 0.5 or more (the largest is 0.400)"),
        (None, 0.05, "every adapter has a mean weight of 0.05 or more"),
    ],
)
def test_bad_sizes_are_refused_naming_the_option(keep, threshold, message):
    ranking = [(f"t{i}", w) for i, w in enumerate([0.4, 0.3, 0.2, 0.1])]
    with pytest.raises(ConfigError, match=re.escape(message)):
        sizes_to_keep(ranking, keep=keep, threshold=threshold)


def test_prune_trains_registers_with_lineage_and_reports(world, tmp_path):
    config, uri = world.config, world.uri
    name = fusion_model_name(config.registry_prefix, "fruit")
    source = get_version(uri, name, alias="best")
    experiment = ensure_experiment(uri, config.name)
    said: list[str] = []
    report = prune_fusion(config, "fruit", uri, experiment, say=said.append)

    # The ranking is the fusion stage's own heatmap data, averaged over layers.
    logged = json.loads((world.fusion_run / "run" / "fusion_weights.json").read_text())
    means = torch.tensor(logged["weights"]).mean(0).tolist()
    expected = dict(zip(logged["adapters"], means, strict=True))
    assert dict(report.ranking) == pytest.approx(expected, abs=1e-4)
    assert report.ranking[0][1] >= report.ranking[1][1]
    top = report.ranking[0][0]

    source_point, pruned_point = report.points
    assert set(source_point.kept) == {"fruit", "water"} and not source_point.trained
    assert pruned_point.kept == (top,) and pruned_point.trained
    assert pruned_point.examples_per_second > 0
    assert pruned_point.dev_metrics["accuracy"] >= 0.75  # one keyword task: the fusion learns it

    # Registered beside the source under pruned-1, naming what it kept and where it came from;
    # `best` did not move.
    pruned = get_version(uri, name, alias="pruned-1")
    assert pruned.version == pruned_point.version != source.version
    registered = f"prune fruit: registered {name} v{pruned.version} (@pruned-1, accuracy "
    assert sum(line.startswith(registered) for line in said) == 1, said  # said nothing before
    assert get_version(uri, name, alias="best").version == source.version
    adapters = {k: v for k, v in pruned.tags.items() if k.startswith("adapter.")}
    assert adapters == {f"adapter.{top}": source.tags[f"adapter.{top}"]}
    assert pruned.tags["adapterfleet.pruned_from"] == f"v{source.version}"
    assert pruned.tags["adapterfleet.kept"] == top
    assert float(pruned.tags["dev_accuracy"]) == pytest.approx(  # a tag: 4 decimals
        pruned_point.dev_metrics["accuracy"], abs=5e-5 + 1e-6
    )

    # Its run and version say it is pruned: in the MLflow UI they read as the pipeline's fusion
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    pruned_run = client.get_run(pruned.run_id)
    assert pruned_run.info.run_name.startswith("fusion-fruit-pruned1-s")
    said_pruned = f"Pruned from v{source.version} of the fusion for `fruit` by `adapterfleet prune`"
    assert pruned_run.data.tags["mlflow.note.content"].startswith(said_pruned)
    assert client.get_model_version(name, pruned.version).description.startswith(said_pruned)
    assert not client.get_model_version(name, source.version).description.startswith("Pruned")

    # It predicts like any registered fusion (only its kept adapter is pulled): over the dev
    # file, its predictions score the accuracy the report gives.
    dev = config.tasks["fruit"].dev.path
    predict_file(config, "fruit", dev, tmp_path / "out.jsonl", version=pruned.version, say=print)
    predicted = [json.loads(line)["prediction"] for line in (tmp_path / "out.jsonl").open()]
    labels = [line.split("\t")[1].strip() for line in dev.read_text().splitlines()[1:]]
    hits = sum(p == y for p, y in zip(predicted, labels, strict=True))
    assert hits / len(labels) == pytest.approx(pruned_point.dev_metrics["accuracy"], abs=1e-9)

    # The report: table, raw figures and plot on disk and in the MLflow run of kind `prune`.
    folder = report.folder / "report"
    table = (folder / "prune.md").read_text()
    assert f"| 1 | {top} | v{pruned.version} (pruned-1) |" in table
    assert json.loads((folder / "prune.json").read_text())["points"][1]["kept"] == [top]
    assert (folder / "prune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (run,) = client.search_runs([experiment], "tags.`adapterfleet.kind` = 'prune'")
    assert run.info.status == "FINISHED"
    steps = client.get_metric_history(run.info.run_id, "examples_per_second")
    assert sorted(m.step for m in steps) == [1, 2]  # adapters kept: the source has 2
    assert {a.path for a in client.list_artifacts(run.info.run_id, "prune")} == {
        "prune/prune.md",
        "prune/prune.json",
        "prune/prune.png",
    }

    # Again: the pruned fusion is found by its lineage, not trained twice.
    again = prune_fusion(config, "fruit", uri, experiment, say=said.append)
    assert again.points[1].version == pruned.version and not again.points[1].trained
    assert get_version(uri, name).version == pruned.version  # no newer version appeared

    # `adapters` lists it beside the fusion `best` is on (it listed `best` alone)
    from typer.testing import CliRunner

    from adapterfleet.cli.app import app

    listed = CliRunner().invoke(app, ["adapters", "-c", str(world.config_path)])
    assert listed.exit_code == 0, listed.output
    fusion_rows = [line for line in listed.output.splitlines() if line.startswith("| fusion")]
    versions = [row.split("|")[4].strip() for row in fusion_rows]
    assert versions == [f"v{pruned.version} @pruned-1", f"v{source.version} @best"]

    # Its run purged by `mlflow gc`: it was found all the same, and pruned-1 kept on a version
    # that cannot be pulled. Now it is trained and registered anew, and said so.
    from tuning_support import mlflow_gc

    mlflow_gc(uri, [pruned.run_id])
    said.clear()
    anew = prune_fusion(config, "fruit", uri, experiment, say=said.append)
    assert anew.points[1].trained and anew.points[1].version > pruned.version
    assert get_version(uri, name, alias="pruned-1").version == anew.points[1].version
    assert (
        f"prune fruit: {top} registered before as v{pruned.version}, but its run "
        f"{pruned.run_id} is no longer in the tracking store"
    ) in "\n".join(said)


def test_cli_prune_reports_and_refuses_a_bad_keep(world):
    command = [sys.executable, "-m", "adapterfleet.cli.app", "prune", "fruit"]
    command += ["-c", str(world.config_path)]
    done = subprocess.run(
        [*command, "--keep", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "prune.md, prune.json, prune.png" in done.stdout
    assert "examples/s" in done.stdout

    failed = subprocess.run(
        [*command, "--keep", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines()[-1] == (
        "error: prune --keep: 2 would drop none; keep at most 1 (the fusion has 2 adapters, "
        "and pruning drops at least one)"
    )
    assert "Traceback" not in failed.stderr
    assert "ranking" not in failed.stderr  # refused before the dev set is read and ranked

    water = [sys.executable, "-m", "adapterfleet.cli.app", "prune", "water"]
    water += ["-c", str(world.config_path)]
    none = subprocess.run(water, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert none.returncode == 2
    line = none.stderr.strip().splitlines()[-1]
    assert line.startswith("error: no registered fusion ") and "--adapter" not in line
    assert line.endswith("prune works on a registered fusion (fusion targets: fruit); check "
                         "--alias/--version")  # fmt: skip


def test_a_second_prune_of_the_target_is_refused_and_ctrl_c_says_what_is_kept(world):
    """Two prunes of one target at once replaced each other's pulled copies under
    `prune/<target>/`: the one that lost said the registry's files were gone. Ctrl-C said only
    `interrupted`."""
    import os
    import signal

    from adapterfleet._locks import sole_lock

    command = [sys.executable, "-m", "adapterfleet.cli.app", "prune", "fruit", "--keep", "1"]
    command += ["-c", str(world.config_path)]
    lock = Path(world.config.storage).resolve() / "prune" / "fruit" / ".prune.lock"
    with sole_lock(lock, "4242"):  # as a prune running in another process holds it
        held = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert held.returncode == 2, held.stderr
    assert held.stderr.strip().splitlines()[-1] == (
        "error: prune fruit: another adapterfleet prune of fruit is running on this storage (pid "
        "4242); wait for it to end, then run this one again (what it trains is kept)"
    )
    stopped = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert stopped.stderr is not None
    for line in stopped.stderr:
        if line.startswith("prune fruit: ranking"):
            os.kill(stopped.pid, signal.SIGINT)
            break
    rest = stopped.stderr.read()
    assert stopped.wait(timeout=120) == 130, rest
    assert rest.strip().splitlines()[-1] == (
        "interrupted: the pruned fusions registered so far stay registered, and the finished "
        "epochs of the one training are kept; the same command goes on from there"
    ), rest


def test_a_prune_reports_the_sizes_an_earlier_prune_of_the_source_registered(world):
    """`prune --keep 2` then `--keep 1`: the second report (on disk and in MLflow) listed v1 and
    pruned-1 only, though pruned-2 was still registered from the same source."""
    from adapterfleet.orchestration.prune import _adapter_versions, _fusions, _PruneJob

    config, uri = world.config, world.uri
    experiment = ensure_experiment(uri, config.name)
    prune_fusion(config, "fruit", uri, experiment, keep=[1], say=print)  # registered before
    name = fusion_model_name(config.registry_prefix, "fruit")
    source, pruned = get_version(uri, name, alias="best"), get_version(uri, name, alias="pruned-1")
    order = list(source.fused)
    job = _PruneJob(config, "fruit", uri, experiment, Path(config.storage) / "p", print)
    versions = _adapter_versions(config, uri, source)
    fusions = _fusions(job, source, order, order, [], versions)  # this prune: no size of its own
    assert [(info.version, alias, trained) for info, alias, trained in fusions] == [
        (source.version, "best", False),
        (pruned.version, "pruned-1", False),
    ]


def test_a_keep_of_every_adapter_says_what_is_allowed():
    """`--keep 3` of a fusion of 2 said `3 is not between 1 and 1`."""
    from adapterfleet.orchestration.prune import check_prune_options

    with pytest.raises(ConfigError) as refused:
        check_prune_options(2, keep=[3])
    assert str(refused.value) == (
        "prune --keep: 3 would drop none; keep at most 1 (the fusion has 2 adapters, and pruning "
        "drops at least one)"
    )
