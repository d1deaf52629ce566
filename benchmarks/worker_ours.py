"""One benchmark configuration with adapterfleet, in a fresh process of the project's venv.

`python -m benchmarks.worker_ours SPEC.json OUT.json`; see `benchmarks/run.py` for the specs.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from benchmarks import common
from benchmarks.names import FUSION_NAME, HEAD_NAME, adapter_names, to_reference


def _versions() -> dict[str, str]:
    import transformers

    import adapterfleet

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "adapterfleet": getattr(adapterfleet, "__version__", "editable"),
    }


def _model(spec: dict):
    """The BERT base the reference also loads; with `base_dtype` in the spec, any family through
    the project's own `load_encoder` (its dtype and activation checkpointing, as a run does)."""
    from transformers import BertModel

    from adapterfleet.adapters import AdapterModel
    from adapterfleet.adapters.base_model import load_encoder
    from adapterfleet.adapters.config import BaseModelSpec

    if "base_dtype" in spec:
        base = BaseModelSpec(
            spec["base_dir"],
            dtype=spec["base_dtype"],
            gradient_checkpointing=bool(spec.get("checkpointing")),
        )
        return AdapterModel(load_encoder(base))
    encoder = BertModel.from_pretrained(
        spec["base_dir"], add_pooling_layer=False, local_files_only=True
    )
    return AdapterModel(encoder)


def _with_adapters(spec: dict):
    """The model of a synthetic configuration, its trainable parameters, and whether it trains."""
    from adapterfleet.adapters import AdapterConfig, HeadConfig, add_adapter, train_adapter
    from adapterfleet.fusion import FusionConfig, add_fusion, train_fusion

    model = _model(spec)
    if spec["kind"] == "base_train":  # the floor: the frozen base's forward and backward alone
        model.encoder_model.requires_grad_(False)
        model.encoder_model.get_input_embeddings().register_forward_hook(
            lambda module, args, output: output.requires_grad_()
        )
        return model, list(model.add_head("head", HeadConfig(num_labels=2)).parameters())
    names = adapter_names(spec["n"])
    for name in names:
        add_adapter(model, name, AdapterConfig("pfeiffer", spec.get("reduction_factor", 16)))
    head = HeadConfig(num_labels=2, pooling=spec.get("pooling", "cls"))
    if spec["kind"] == "single_train":
        model.add_head(names[0], head)
        return model, train_adapter(model, names[0])
    add_fusion(model, FUSION_NAME, names, FusionConfig())
    model.add_head(FUSION_NAME, head)
    return model, train_fusion(model, FUSION_NAME)


def step_of(spec: dict) -> tuple[Callable[[], None], Any, list]:
    """The configuration's model on its device and one step of it, unsynced: a training step
    (forward, cross-entropy, the V regulariser for a fusion, backward, the project's AdamW) or a
    forward under inference mode. Returns (step, model, trainable parameters)."""
    from adapterfleet.fusion import fusion_regularization_loss
    from adapterfleet.training import build_optimizer

    torch.manual_seed(spec["seed"])
    model, params = _with_adapters(spec)
    vocab = int(model.config.vocab_size)
    batch = common.random_batch(spec["seed"], spec["batch"], spec["seq"], vocab)
    model, batch = common.place(spec, model, batch)
    fusion = spec["kind"] in ("fusion_train", "fusion_infer")
    if spec["kind"] == "fusion_infer":
        model.eval()
        if spec.get("cuda_graphs"):  # as `predict` on a GPU with training.cuda_graphs auto
            from adapterfleet.training.predict import forward_of

            forward = forward_of(model, torch.device("cuda"), True)

            def graphed_step() -> None:
                with torch.no_grad(), common.autocast(spec, cache=False):
                    forward(batch)

            return graphed_step, model, params

        def step() -> None:
            with torch.inference_mode(), common.autocast(spec):
                model(batch)

        return step, model, params
    model.train()
    optimizer = build_optimizer(params, spec["lr"], weight_decay=0.01)  # fused on a GPU
    graphed = bool(spec.get("cuda_graphs"))  # as `fit` with training.cuda_graphs: true

    def forward_backward(batch: dict) -> torch.Tensor:
        with common.autocast(spec, cache=not graphed):
            logits = model(batch)
        loss = F.cross_entropy(logits.float(), batch["labels"])
        if fusion:
            loss = loss + fusion_regularization_loss(model, FUSION_NAME)
        loss.backward()
        return loss.detach()

    if graphed:
        from adapterfleet.training.graphs import StepGraphs

        graphs = StepGraphs(forward_backward, params)

        def graphed_step() -> None:
            graphs(batch)
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)  # the graph adds into these gradients

        return graphed_step, model, params

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        forward_backward(batch)
        if spec.get("malloc_trim"):  # read at each call: benchmarks/malloc_trim.py toggles it
            common.malloc_trim()
        optimizer.step()

    return train_step, model, params


def synthetic(spec: dict) -> dict:
    start = time.perf_counter()
    step, model, params = step_of(spec)
    setup_s = time.perf_counter() - start
    rss_setup = common.rss_mb()
    times, cpu_times = common.time_steps(
        common.synced(spec, step), spec["warmup"], spec.get("reps"), spec["budget_s"]
    )
    return {
        "times": times,
        "cpu_times": cpu_times,
        "gpu_peak_mb": common.gpu_peak_mb(spec),
        "setup_s": setup_s,
        "rss_after_setup_mb": rss_setup,
        "trainable_params": sum(p.numel() for p in params) if spec["kind"] != "fusion_infer" else 0,
        "attn_implementation": model.config._attn_implementation,
        "checkpointing": _checkpointing(model),
        "versions": _versions(),
    }


def _checkpointing(model: torch.nn.Module) -> bool:
    from adapterfleet.adapters.base_model import checkpointing_on

    return checkpointing_on(getattr(model, "encoder_model", None))


def _randomize_added(model: torch.nn.Module, names: list[str], seed: int) -> None:
    """Adapters, fusion Q/K and head at random; V = I + noise. Scales keep the fusion softmax
    neither uniform nor one-hot on a 384-wide model."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            ref = to_reference(name, names)
            if ref is None:
                continue
            noise = torch.randn(param.shape, generator=gen)
            if ref.endswith("value.weight"):
                param.copy_(torch.eye(param.shape[0]) + 0.02 * noise)
            elif "adapter_fusion_layer" in ref:
                param.copy_(0.03 * noise)
            else:
                param.copy_(0.05 * noise)


def check(spec: dict) -> dict:
    """Outputs and gradients of a single adapter and of a fusion, for the reference to match.

    Every adapter, fusion and head weight is drawn at random (away from its near-identity init, so
    that a wrong placement shows); they are saved under the reference's names.
    """
    from safetensors.torch import save_file

    from adapterfleet.adapters import AdapterConfig, HeadConfig, add_adapter, set_active_adapter
    from adapterfleet.fusion import (
        FusionConfig,
        add_fusion,
        fusion_parameters,
        fusion_regularization_loss,
        set_active_fusion,
    )

    out = Path(spec["check_dir"])
    model = _model(spec)
    names = adapter_names(spec["n"])
    for name in names:
        add_adapter(model, name, AdapterConfig("pfeiffer", 16))
    add_fusion(model, FUSION_NAME, names, FusionConfig())
    model.add_head(HEAD_NAME, HeadConfig(num_labels=2))
    _randomize_added(model, names, spec["seed"])
    model.eval()

    weights = {}
    for name, param in model.named_parameters():
        ref = to_reference(name, names)
        if ref is not None:
            weights[ref] = param.detach().clone().contiguous()
    save_file(weights, str(out / "weights.safetensors"))

    vocab = int(model.config.vocab_size)
    inputs = common.random_batch(spec["seed"] + 1, spec["batch"], spec["seq"], vocab)
    inputs["attention_mask"][1:, spec["seq"] // 2 :] = 0  # padding in all rows but the first
    results = {f"input.{k}": v for k, v in inputs.items()}
    encoder_kwargs = {k: inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids")}

    set_active_adapter(model, None)
    with torch.no_grad():
        results["plain.hidden"] = model.encoder_model(**encoder_kwargs).last_hidden_state
    set_active_adapter(model, names[0])
    with torch.no_grad():
        results["single.hidden"] = model.encoder_model(**encoder_kwargs).last_hidden_state
        results["single.logits"] = model(inputs)
    set_active_fusion(model, FUSION_NAME)
    with torch.no_grad():
        results["fusion.hidden"] = model.encoder_model(**encoder_kwargs).last_hidden_state
        results["fusion.logits"] = model(inputs)
    params = fusion_parameters(model, FUSION_NAME)
    for param in params:
        param.requires_grad_(True)
    loss = F.cross_entropy(model(inputs), inputs["labels"])
    (loss + fusion_regularization_loss(model, FUSION_NAME)).backward()
    for name, param in model.named_parameters():
        ref = to_reference(name, names)
        if ref is not None and param.grad is not None and "adapter_fusion_layer" in ref:
            results[f"grad.{ref}"] = param.grad.detach().clone()
    save_file({k: v.contiguous() for k, v in results.items()}, str(out / "ours.safetensors"))
    return {"versions": _versions(), "attn_implementation": model.config._attn_implementation}


def real(spec: dict) -> dict:
    """ST-A on a real task with the project's own pipeline: cached tokenisation, length-grouped
    batches with dynamic padding, `train_single` (one `fit`); throughput of each epoch."""
    from adapterfleet.adapters import load_tokenizer
    from adapterfleet.data import load_task, load_tasks_config, padding_fraction, tokenize_task
    from adapterfleet.data.batching import LengthGroupedBatchSampler
    from adapterfleet.training import Callback, TrainConfig
    from adapterfleet.training.modes import train_single

    class Throughput(Callback):
        def __init__(self) -> None:
            self.per_epoch: list[float] = []

        def on_epoch_end(self, report):  # noqa: ANN001 - the fit loop's EpochReport
            self.per_epoch.append(report.examples_per_second)

    start = time.perf_counter()
    task_spec = load_tasks_config(spec["tasks_config"], spec["overrides"])[spec["task"]]
    tokenizer = load_tokenizer("minilm-l6")
    config = TrainConfig(
        learning_rate=spec["lr"], max_epochs=spec["epochs"], batch_size=spec["batch"], seed=0
    )
    with tempfile.TemporaryDirectory() as tmp:
        tokenized = tokenize_task(load_task(task_spec), tokenizer, spec["max_length"], tmp)
        setup_s = time.perf_counter() - start
        recorder = Throughput()
        run = train_single(
            "st-a", tokenized, "minilm-l6", config, Path(tmp) / "run", callbacks=[recorder]
        )
    lengths = tokenized.train.lengths
    sampler = LengthGroupedBatchSampler(lengths, spec["batch"], shuffle=True, seed=0, epoch=1)
    batches = sampler.batches()
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return {
        "throughputs": recorder.per_epoch,
        "examples": len(tokenized.train),
        "setup_s": setup_s,
        "mean_length": sum(lengths) / len(lengths),
        "mean_padded_length": padded / len(lengths),
        "padding_fraction": padding_fraction(lengths, batches),
        "dev_accuracy": run.dev_metrics.get("accuracy"),
        "trainable_params": run.trainable_parameters,
        "versions": _versions(),
    }


def run(spec: dict) -> dict:
    if spec["kind"] == "check":
        return check(spec)
    if spec["kind"] == "real":
        return real(spec)
    return synthetic(spec)


if __name__ == "__main__":
    common.main(run)
