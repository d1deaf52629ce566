"""One setting of the big-base benchmark (`benchmarks/llm_memory.py`) in a fresh process.

`python -m benchmarks.worker_llm SPEC.json OUT.json`: an ST-A or fusion training step on a base
loaded by the project's `load_encoder` in the spec's dtype, with or without activation
checkpointing. Besides the step times it reports the dtypes the model was built with, the first
step's loss and how many trainable tensors got a nonzero gradient, the peak RSS of the training
steps alone, and writes a probe (last hidden states and logits before training, a fixed sample of
the first step's gradients) for the comparison of the settings.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
from torch.nn import functional as F

from adapterfleet.adapters.base_model import checkpointing_on
from benchmarks import common
from benchmarks.names import FUSION_NAME
from benchmarks.worker_ours import _versions, _with_adapters

GRAD_SAMPLE = 4096  # the first elements of each trainable tensor's gradient, for the comparison


def reset_peak_rss() -> bool:
    """Set this process's peak RSS (VmHWM) back to its current RSS (Linux ≥ 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


ADDED = re.compile(r"\.(adapters|fusions)\.")  # what the project adds inside the encoder


def base_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The base model's own weights: the encoder's, less the adapters and fusions in it."""
    return [p for n, p in model.encoder_model.named_parameters() if not ADDED.search(n)]


def built_dtypes(model: torch.nn.Module, params: list[torch.nn.Parameter]) -> dict:
    """The dtypes the model holds: the base's weights, the added modules', the trainable ones."""
    base = {id(p) for p in base_parameters(model)}
    return {
        "base": sorted({str(p.dtype) for p in base_parameters(model)}),
        "added": sorted({str(p.dtype) for p in model.parameters() if id(p) not in base}),
        "trainable": sorted({str(p.dtype) for p in params}),
    }


def probe_outputs(model: torch.nn.Module, spec: dict) -> dict[str, torch.Tensor]:
    """Last hidden states and logits on a seeded probe batch (eval mode, no gradient)."""
    vocab = int(model.config.vocab_size)
    batch = common.random_batch(spec["seed"] + 1, 2, spec["seq"], vocab)
    captured: dict[str, torch.Tensor] = {}

    def keep(_module, _inputs, output) -> None:  # noqa: ANN001 - a forward hook
        captured["hidden"] = output.last_hidden_state

    handle = model.encoder_model.register_forward_hook(keep)
    model.eval()
    try:
        with torch.no_grad():
            logits = model(batch)
    finally:
        handle.remove()
        model.train()
    return {"hidden": captured["hidden"].float(), "logits": logits.float()}


def _loss(model: torch.nn.Module, batch: dict, fusion: bool) -> torch.Tensor:
    from adapterfleet.fusion import fusion_regularization_loss

    loss = F.cross_entropy(model(batch), batch["labels"])
    return loss + fusion_regularization_loss(model, FUSION_NAME) if fusion else loss


def first_step(model, params, optimizer, batch: dict, fusion: bool) -> tuple[dict, torch.Tensor]:
    """The untimed warm-up step, checked: its loss, the gradients it gave, and a fixed sample
    of them (the first GRAD_SAMPLE elements of each trainable tensor)."""
    optimizer.zero_grad(set_to_none=True)
    loss = _loss(model, batch, fusion)
    loss.backward()
    grads = [p.grad for p in params]
    zero = {id(p) for p, g in zip(params, grads, strict=True) if g is None or not g.any()}
    present = [g.float() for g in grads if g is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in present]))
    sample = torch.cat([g.flatten()[:GRAD_SAMPLE] for g in present])
    optimizer.step()
    value = float(loss.detach())
    stats = {
        "first_loss": value,
        "loss_finite": math.isfinite(value),
        "grad_tensors": len(params),
        "nonzero_grad_tensors": len(params) - len(zero),
        "zero_grad_tensors": [n for n, p in model.named_parameters() if id(p) in zero],
        "grad_norm": float(norm),
    }
    return stats, sample


def run(spec: dict) -> dict:
    from safetensors.torch import save_file

    torch.manual_seed(spec["seed"])
    model, params = _with_adapters(spec)
    probe = probe_outputs(model, spec)
    batch = common.random_batch(
        spec["seed"], spec["batch"], spec["seq"], int(model.config.vocab_size)
    )
    fusion = spec["kind"] == "fusion_train"
    optimizer = torch.optim.AdamW(params, lr=spec["lr"])
    rss_setup = common.rss_mb()
    peak_reset = reset_peak_rss()
    stats, probe["grad_sample"] = first_step(model, params, optimizer, batch, fusion)
    losses: list[float] = []

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = _loss(model, batch, fusion)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    times, cpu_times = common.time_steps(step, 0, spec.get("reps"), spec["budget_s"])
    save_file({k: v.contiguous() for k, v in probe.items()}, spec["probe_path"])
    return {
        **stats,
        "times": times,
        "cpu_times": cpu_times,
        "losses": losses,
        "all_losses_finite": all(math.isfinite(x) for x in losses),
        "rss_after_setup_mb": rss_setup,
        "training_peak_rss_mb": peak_rss_mb() if peak_reset else None,
        "dtypes": built_dtypes(model, params),
        "checkpointing": checkpointing_on(model.encoder_model),
        "trainable_params": sum(p.numel() for p in params),
        "base_params": sum(p.numel() for p in base_parameters(model)),
        "attn_implementation": model.config._attn_implementation,
        "versions": _versions(),
    }


if __name__ == "__main__":
    common.main(run)
