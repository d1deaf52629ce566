"""`benchmarks/gpu_fit.py` on the CPU, on a slice of real RTE: the runs a GPU measures (ST-A
through `train_single`, a fusion of saved adapters through `train_fusion_run`) train and report
what the benchmark prints."""

from __future__ import annotations

import pytest

from benchmarks import gpu_fit, packing
from benchmarks.run import make_base


def test_gpu_fit_runs_st_a_and_a_fusion_of_saved_adapters(tmp_path):
    if not packing.GLUE.is_dir():
        pytest.skip(f"{packing.GLUE} is absent: the benchmark reads RTE from there")
    task = gpu_fit.tokenized_task("rte", None)
    assert len(task.dev) == gpu_fit.DEV_ROWS and len(task.train) == 2490 - gpu_fit.DEV_ROWS
    for split, rows in ((task.train, 64), (task.dev, 32)):
        for field in ("input_ids", "token_type_ids", "labels", "lengths"):
            setattr(split, field, getattr(split, field)[:rows])
    base = make_base("minilm", tmp_path)
    adapters = gpu_fit.saved_adapters(base, 2, tmp_path)
    assert [path.name for path in adapters] == ["adapter-0", "adapter-1"]
    for kind in ("st-a", "fusion-n2"):
        # fp32: bf16 matrix products on this CPU run at < 1 example/s (the GPU's is bf16)
        row = gpu_fit.run(kind, task, base, adapters, 1, False, tmp_path / kind, "cpu", "fp32")
        assert row["replays"] == [None]  # eager on a CPU: no cuda_graph_replays logged
        assert row["examples_per_s"][0] > 0 and row["train_loss"][0] > 0
        assert 0 <= row["dev_accuracy"] <= 1
        assert (tmp_path / kind / "run.json").is_file()
