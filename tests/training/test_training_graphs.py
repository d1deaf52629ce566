"""Training steps as CUDA graphs (`TrainConfig.cuda_graphs`): refused where they cannot run; on a
GPU, the replayed steps train what eager steps train."""

from __future__ import annotations

import contextlib
import dataclasses
import warnings

import pytest
import torch
from helpers import ALL_FAMILIES

from adapterfleet.training import TrainConfig, fit
from adapterfleet.training.graphs import shape_key

CUDA = torch.cuda.is_available()


def test_cuda_graphs_is_refused_where_it_cannot_run(make_model, task):
    with pytest.raises(ValueError, match="cuda_graphs must be auto, true or false, got 'yes'"):
        TrainConfig(cuda_graphs="yes")
    with pytest.raises(ValueError, match="cuda_graphs must be auto, true or false, got 1"):
        TrainConfig(cuda_graphs=1)
    with pytest.raises(ValueError, match="needs a CUDA device .*got device: cpu; set cuda_graphs"):
        TrainConfig(cuda_graphs=True, device="cpu")
    with pytest.raises(ValueError, match="got precision: fp16"):
        TrainConfig(cuda_graphs=True, precision="fp16")
    assert TrainConfig().cuda_graphs == "auto"
    for same in ("auto", False):  # hashes of earlier sweeps (written with false) stand
        assert "cuda_graphs" not in TrainConfig(cuda_graphs=same).hash_dict()
    assert TrainConfig(cuda_graphs=True).hash_dict()["cuda_graphs"] is True
    # auto where steps cannot be graphs is no error: on a CPU, with fp16
    TrainConfig(device="cpu")
    TrainConfig(precision="fp16")
    if not CUDA:  # device auto resolves to the CPU here
        model = make_model()
        config = TrainConfig(max_epochs=1, cuda_graphs=True)
        with pytest.raises(ValueError, match="cuda_graphs: training runs on cpu; set device"):
            fit(model, model.trainable(), task["train"], task["dev"], config)


def test_auto_trains_eagerly_where_graphs_cannot_run(make_model, task):
    """`cuda_graphs: auto` (the default) on a CPU or with fp16: eager steps, no warning, no
    `cuda_graph_replays` in the history (on a GPU, auto replays: the CUDA fit test below)."""
    cases = [{"device": "cpu"}] + ([{"device": "cuda", "precision": "fp16"}] if CUDA else [])
    for case in cases:
        model = make_model()
        config = TrainConfig(learning_rate=0.05, max_epochs=2, **case)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            result = fit(model, model.trainable(), task["train"], task["dev"], config)
        assert result.best_metric > 0.9
        assert all("cuda_graph_replays" not in h for h in result.history)


def test_a_captured_step_is_keyed_by_every_shape_dtype_and_plain_value():
    ids = torch.zeros(4, 16, dtype=torch.long)
    key = shape_key({"input_ids": ids, "labels": torch.zeros(4, dtype=torch.long)})
    assert key == shape_key({"labels": torch.ones(4, dtype=torch.long), "input_ids": ids + 1})
    assert key != shape_key({"input_ids": ids[:, :8], "labels": torch.zeros(4, dtype=torch.long)})
    assert key != shape_key({"input_ids": ids, "labels": torch.zeros(4)})
    assert shape_key({"task": "a", "x": ids}) != shape_key({"task": "b", "x": ids})


def _fusion_model(seed: int):
    from helpers import tiny_encoder

    from adapterfleet.adapters import AdapterConfig, AdapterModel, HeadConfig, add_adapter
    from adapterfleet.fusion import FusionConfig, add_fusion, train_fusion

    encoder = tiny_encoder(seed=0, hidden_dropout_prob=0, attention_probs_dropout_prob=0)
    model = AdapterModel(encoder)  # no dropout: the same numbers on both sides
    names = ["a", "b", "c"]
    torch.manual_seed(seed)
    for index, name in enumerate(names):  # widths 8, 8, 4: the stacked form's general case
        add_adapter(model, name, AdapterConfig("pfeiffer", 8 if index == 2 else 4))
    add_fusion(model, "f", names, FusionConfig())
    model.add_head("f", HeadConfig(num_labels=2))
    return model, train_fusion(model, "f")


def _batches(widths_and_rows: list[tuple[int, int]], seed: int = 0) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for width, rows in widths_and_rows:
        ids = torch.randint(5, 90, (rows, width), generator=gen)
        mask = torch.ones(rows, width, dtype=torch.long)
        mask[0, width // 2 :] = 0  # padding in one row
        labels = torch.randint(0, 2, (rows,), generator=gen)
        batches.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return batches


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_replayed_fusion_steps_give_the_eager_steps_losses_and_gradients():
    """Shapes that fold and that do not (16 and 256 tokens), repeated: each shape is captured
    once, replayed after, and every step's loss and gradients match an eager twin's."""
    from torch.nn import functional as F

    from adapterfleet.training.graphs import StepGraphs

    cuda = torch.device("cuda")
    models = [_fusion_model(seed=1) for _ in range(2)]
    for model, _ in models:
        model.to(cuda).train()
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0  # the fusion's own dropout

    def step_of(model):
        def step(batch):
            logits = model(batch)
            loss = F.cross_entropy(logits, batch["labels"])
            loss.backward()
            return loss.detach()

        return step

    (eager_model, eager_params), (model, params) = models
    graphs = StepGraphs(step_of(model), params)
    shapes = [(16, 1), (32, 8), (16, 1), (32, 8), (32, 8)]
    for batch in _batches(shapes):
        batch = {k: v.to(cuda) for k, v in batch.items()}
        for p in [*eager_params, *params]:
            if p.grad is not None:
                p.grad.zero_()
        expected = step_of(eager_model)(batch)
        loss = graphs(batch)
        torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
        for mine, theirs in zip(params, eager_params, strict=True):
            if theirs.grad is None:
                assert mine.grad is None or not mine.grad.any()
            else:
                torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-6)
    assert graphs.disabled is None
    assert len(graphs.graphs) == 2 and graphs.replays == 3


class _Syncing(torch.nn.Module):
    """A model whose forward asks the GPU for a number: no graph can hold that."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, batch):
        x = batch["x"]
        return self.linear(x) * (2.0 if x.sum().item() > 0 else 1.0)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_a_step_no_graph_can_hold_goes_on_eagerly_with_its_gradients():
    from torch.nn import functional as F

    from adapterfleet.training.graphs import StepGraphs

    model = _Syncing().cuda()
    params = list(model.parameters())

    def step(batch):
        loss = F.cross_entropy(model(batch), batch["labels"])
        loss.backward()
        return loss.detach()

    batch = {"x": torch.ones(3, 4), "labels": torch.zeros(3, dtype=torch.long)}
    batch = {k: v.cuda() for k, v in batch.items()}
    graphs = StepGraphs(step, params)
    with pytest.warns(RuntimeWarning, match="cuda_graphs: the step for batch shape .* could not"):
        first = graphs(batch)
    grads = [p.grad.clone() for p in params]
    assert graphs.disabled is not None and not graphs.graphs
    model.zero_grad()
    torch.testing.assert_close(graphs(batch), first)  # eager from now on
    for param, grad in zip(params, grads, strict=True):
        torch.testing.assert_close(param.grad, grad)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_fit_reports_why_its_steps_went_back_to_eager():
    """With `cuda_graphs: auto` a model no graph can hold trains eagerly, and every epoch's
    report says why (the job's recorder puts it on the MLflow run as a tag)."""
    from adapterfleet.training import Callback

    class Reports(Callback):
        def __init__(self) -> None:
            self.seen: list[tuple[int | None, str | None]] = []

        def on_epoch_end(self, report) -> None:  # noqa: ANN001 - the loop's EpochReport
            self.seen.append((report.cuda_graph_replays, report.cuda_graphs_fallback))

    gen = torch.Generator().manual_seed(0)
    batches = [
        {"x": torch.randn(8, 4, generator=gen), "labels": torch.randint(0, 2, (8,), generator=gen)}
        for _ in range(3)
    ]
    model, reports = _Syncing(), Reports()
    config = TrainConfig(max_epochs=2, device="cuda")  # cuda_graphs: auto
    with pytest.warns(RuntimeWarning, match="could not be captured"):
        fit(model, list(model.parameters()), batches, batches, config, callbacks=[reports])
    reason = reports.seen[0][1]
    assert reason and reports.seen == [(0, reason), (0, reason)]


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_fit_with_cuda_graphs_learns_what_eager_fit_learns(make_model, task):
    """The loop's side: gradients zeroed in place, accumulation over two batches, clipping,
    the last short batch (256 = 10 × 24 + 16) its own shape; bf16 autocast as a GPU run trains."""

    def train(epoch: int) -> list[dict]:
        order = torch.randperm(256, generator=torch.Generator().manual_seed(100 + epoch))
        x, y = task["x_train"][order], task["y_train"][order]
        return [{"x": x[i : i + 24], "labels": y[i : i + 24]} for i in range(0, 256, 24)]

    results = {}
    for graphed in (False, "auto"):  # auto, the default, replays on a GPU
        model = make_model()
        config = TrainConfig(
            learning_rate=0.05, max_epochs=4, device="cuda", precision="bf16",
            grad_accum_steps=2, cuda_graphs=graphed,
        )  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fit(model, model.trainable(), train, task["dev"], config)
        assert not [w for w in caught if "cuda_graphs" in str(w.message)]  # every shape captured
        results[graphed] = (result, [p.detach().cpu() for p in model.trainable()])
    (eager, eager_params), (graphed, graphed_params) = results[False], results["auto"]
    assert graphed.best_metric > 0.9
    # 11 steps an epoch, 2 shapes: from the second epoch on every step is a replay
    assert [h["cuda_graph_replays"] for h in graphed.history] == [9, 11, 11, 11]
    assert "cuda_graph_replays" not in eager.history[0]
    for h_eager, h_graphed in zip(eager.history, graphed.history, strict=True):
        assert h_graphed["train_loss"] == pytest.approx(h_eager["train_loss"], rel=1e-3)
    for mine, theirs in zip(graphed_params, eager_params, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-3, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_graphed_fits_in_one_process_leave_no_gpu_memory_behind(make_model, task):
    """Ray runs the next trial in the same process: a graphed fit leaves nothing allocated on
    the GPU behind it. (A new warm-up stream per batch shape used to: PyTorch keeps a cuBLAS
    workspace for every stream it has seen, ~1 GiB after a run of 15 widths on an H200.)"""
    import gc

    x, y = task["x_train"], task["y_train"]
    batches = [{"x": x[i : i + 24], "labels": y[i : i + 24]} for i in range(0, 256, 24)]

    def one_fit() -> int:
        model = make_model()
        config = TrainConfig(learning_rate=0.05, max_epochs=2, device="cuda", precision="bf16")
        result = fit(model, model.trainable(), batches, task["dev"], config)
        assert sum(h["cuda_graph_replays"] for h in result.history) > 0
        del model, result
        gc.collect()
        return torch.cuda.memory_allocated()

    first = one_fit()  # what a process pays once: the warm-up stream's workspace among it
    for _ in range(2):
        assert abs(one_fit() - first) < 2**20


def _family_model(family: str, checkpointing: bool = False):
    from helpers import DECODERS, tiny_encoder

    from adapterfleet.adapters import (
        AdapterConfig,
        AdapterModel,
        HeadConfig,
        add_adapter,
        train_adapter,
    )
    from adapterfleet.adapters.base_model import enable_checkpointing

    encoder = tiny_encoder(family)
    # the attention from_pretrained picks: sdpa where the family has it (Gemma 2 on 5.23 not)
    with contextlib.suppress(ValueError):
        encoder.set_attn_implementation("sdpa")
    if checkpointing:
        enable_checkpointing(encoder)
    model = AdapterModel(encoder)
    add_adapter(model, "task", AdapterConfig("pfeiffer", 4))
    model.add_head(
        "task", HeadConfig(num_labels=2, pooling="last" if family in DECODERS else "cls")
    )
    return model, train_adapter(model, "task")


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_every_family_trains_the_same_through_cuda_graphs(family):
    """ST-A on each family, with the attention a loaded model has: replayed steps give the eager
    twin's losses and gradients. Every family with sdpa attention replays; an eager-attention
    one may instead say why it cannot be captured and go on eagerly, still equal (transformers
    5.17's eager mask copies a number from the host; later versions do not). Eval mode on both
    sides: no dropout, the same numbers."""
    twins = [_family_model(family) for _ in range(2)]
    for model, _ in twins:
        model.cuda().eval()
    graphs = _replayed_like_eager(twins)
    attention = twins[0][0].encoder_model.config._attn_implementation
    print(f"{family} ({attention}): {graphs.disabled or 'replayed'}")
    assert graphs.disabled is None or attention == "eager", graphs.disabled


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("family", ["bert", "llama"])
def test_a_checkpointed_base_trains_the_same_through_cuda_graphs(family):
    """Activation checkpointing (the big bases' `gradient_checkpointing: true`) recomputes each
    layer in backward, which only runs in train mode: there, with dropout at zero on both sides,
    the replayed steps still give the eager twin's numbers."""
    twins = [_family_model(family, checkpointing=True) for _ in range(2)]
    for model, _ in twins:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        model.cuda().train()
    graphs = _replayed_like_eager(twins)
    print(f"{family} checkpointed: {graphs.disabled or 'replayed'}")
    assert graphs.disabled is None, graphs.disabled


def _replayed_like_eager(twins: list) -> object:
    """Steps of the second twin through StepGraphs against the first's eager steps, batch by
    batch: equal losses and gradients; two replays, or a warning that names the fallback."""
    from torch.nn import functional as F

    from adapterfleet.training.graphs import StepGraphs

    def step_of(model):
        def step(batch):
            loss = F.cross_entropy(model(batch), batch["labels"])
            loss.backward()
            return loss.detach()

        return step

    (eager_model, eager_params), (model, params) = twins
    graphs = StepGraphs(step_of(model), params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in _batches([(16, 4), (24, 4), (16, 4), (24, 4)]):
            batch = {k: v.cuda() for k, v in batch.items()}
            for p in [*eager_params, *params]:
                if p.grad is not None:
                    p.grad.zero_()
            expected = step_of(eager_model)(batch)
            torch.testing.assert_close(graphs(batch), expected, rtol=1e-5, atol=1e-6)
            for mine, theirs in zip(params, eager_params, strict=True):
                torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-6)
    if graphs.disabled is None:
        assert graphs.replays == 2
    else:
        assert any("could not be captured" in str(w.message) for w in caught)
    return graphs


def test_an_epoch_logs_its_replayed_steps_only_with_cuda_graphs():
    from pathlib import Path

    from adapterfleet.training import EpochReport, epoch_metrics

    report = EpochReport(
        epoch=2, global_step=8, train_loss=0.5, learning_rate=1e-4, dev_metrics={"accuracy": 0.9},
        metric="accuracy", best_metric=0.9, best_epoch=2, is_best=True, epoch_seconds=1.0,
        elapsed_seconds=2.0, examples_per_second=10.0, _saver=lambda path: Path(path),
    )  # fmt: skip
    assert "cuda_graph_replays" not in epoch_metrics(report)
    replayed = dataclasses.replace(report, cuda_graph_replays=0)  # an epoch that fell back
    assert epoch_metrics(replayed)["cuda_graph_replays"] == 0.0
