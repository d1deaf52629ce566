"""One benchmark configuration with the reference (AdapterHub `adapters`), in a fresh process of
its own venv (transformers 4.57). Imports nothing from adapterfleet.

`python -m benchmarks.worker_ref SPEC.json OUT.json`; see `benchmarks/run.py` for the specs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from torch.nn import functional as F

from benchmarks import common
from benchmarks.names import HEAD_NAME, adapter_names, is_reference_added


def _versions() -> dict[str, str]:
    import adapters
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "adapters": adapters.__version__,
    }


def _model(base_dir: str):
    from adapters import BertAdapterModel

    return BertAdapterModel.from_pretrained(base_dir, local_files_only=True)


def _llm_model(spec: dict):
    """A decoder base (the Llama shape of `benchmarks/llm_memory.py`) in the spec's
    `base_dtype`, through the reference's AutoAdapterModel, with activation checkpointing when the
    spec asks for it; what it adds stays float32."""
    from adapters import AutoAdapterModel

    dtype = getattr(torch, spec["base_dtype"])
    model = AutoAdapterModel.from_pretrained(spec["base_dir"], dtype=dtype, local_files_only=True)
    if spec.get("checkpointing"):  # the reference's own override, which keeps adapters' context
        model.gradient_checkpointing_enable()
    return model


def _batch_kwargs(batch: dict, model=None) -> dict:  # noqa: ANN001 - a reference model
    keys = ["input_ids", "attention_mask"]
    if model is None or model.config.model_type == "bert":
        keys.append("token_type_ids")
    return {k: batch[k] for k in keys}


def _with_adapters(spec: dict):
    from adapters import SeqBnConfig
    from adapters.composition import Fuse

    model = _llm_model(spec) if "base_dtype" in spec else _model(spec["base_dir"])
    names = adapter_names(spec["n"])
    for name in names:
        model.add_adapter(
            name, config=SeqBnConfig(reduction_factor=spec.get("reduction_factor", 16))
        )
    if spec["kind"] == "single_train":
        model.add_classification_head(names[0], num_labels=2)
        model.train_adapter(names[0])
        model.set_active_adapters(names[0])
    else:
        fuse = Fuse(*names)
        model.add_adapter_fusion(fuse, config="dynamic")
        model.add_classification_head(HEAD_NAME, num_labels=2)
        model.train_adapter_fusion(fuse)
        model.set_active_adapters(fuse)
    params = [p for p in model.parameters() if p.requires_grad]
    return model, params


def synthetic(spec: dict) -> dict:
    torch.manual_seed(spec["seed"])
    start = time.perf_counter()
    model, params = _with_adapters(spec)
    batch = common.random_batch(spec["seed"], spec["batch"], spec["seq"], model.config.vocab_size)
    model, batch = common.place(spec, model, batch)
    kwargs = _batch_kwargs(batch, model)
    fusion = spec["kind"] != "single_train"
    if spec["kind"] == "fusion_infer":
        model.eval()

        def step() -> None:
            with torch.inference_mode(), common.autocast(spec):
                model(**kwargs)
    else:
        model.train()
        # fused, as the Trainer's default `adamw_torch_fused` (torch >= 2.8) runs it on any device
        optimizer = torch.optim.AdamW(params, lr=spec["lr"], fused=True)

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            with common.autocast(spec):
                logits = model(**kwargs).logits
            loss = F.cross_entropy(logits.float(), batch["labels"])
            if fusion:  # as AdapterTrainer does: the V regulariser is part of the step
                loss = loss + model.base_model.get_fusion_regularization_loss()
            loss.backward()
            optimizer.step()

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
        "checkpointing": bool(getattr(model, "is_gradient_checkpointing", False)),
        "versions": _versions(),
    }


def _rel_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    """max |ours − ref| / max |ref|."""
    return float((ours - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def check(spec: dict) -> dict:
    """Load our randomly drawn weights under the reference's names and compare outputs/gradients."""
    from adapters import SeqBnConfig
    from adapters.composition import Fuse
    from safetensors.torch import load_file

    out = Path(spec["check_dir"])
    weights = load_file(str(out / "weights.safetensors"))
    ours = load_file(str(out / "ours.safetensors"))
    model = _model(spec["base_dir"])
    names = adapter_names(spec["n"])
    for name in names:
        model.add_adapter(name, config=SeqBnConfig(reduction_factor=16))
    fuse = Fuse(*names)
    model.add_adapter_fusion(fuse, config="dynamic")
    model.add_classification_head(HEAD_NAME, num_labels=2)
    own = dict(model.named_parameters())
    unknown = sorted(set(weights) - set(own))
    missing = sorted(n for n in own if is_reference_added(n) and n not in weights)
    shapes = sorted(n for n in weights if n in own and own[n].shape != weights[n].shape)
    if unknown or missing or shapes:
        raise RuntimeError(
            f"name mapping: unknown {unknown[:3]}, missing {missing[:3]}, shape {shapes[:3]}"
        )
    with torch.no_grad():
        for name, tensor in weights.items():
            own[name].copy_(tensor)
    model.eval()
    inputs = {k[len("input.") :]: v for k, v in ours.items() if k.startswith("input.")}
    kwargs = _batch_kwargs(inputs)

    got: dict[str, torch.Tensor] = {}
    model.set_active_adapters(names[0])
    for case in ("single", "fusion"):
        if case == "fusion":
            model.set_active_adapters(fuse)
        with torch.no_grad():
            output = model(**kwargs, head=HEAD_NAME, output_hidden_states=True)
        got[f"{case}.hidden"] = output.hidden_states[-1]
        got[f"{case}.logits"] = output.logits
    model.train_adapter_fusion(fuse)
    model.eval()  # train_adapter_fusion switches to train mode; compare without dropout
    loss = F.cross_entropy(model(**kwargs, head=HEAD_NAME).logits, inputs["labels"])
    (loss + model.base_model.get_fusion_regularization_loss()).backward()
    grads = [k for k in ours if k.startswith("grad.")]
    for key in grads:
        got[key] = own[key[len("grad.") :]].grad

    errors = {k: _rel_error(ours[k], got[k]) for k in got if not k.startswith("grad.")}
    errors["fusion.grads"] = max(_rel_error(ours[k], got[k]) for k in grads)
    effect = {  # how far the adapters move the output: the check would see a misplaced one
        case: _rel_error(ours[f"{case}.hidden"], ours["plain.hidden"])
        for case in ("single", "fusion")
    }
    return {
        "errors": errors,
        "effect": effect,
        "compared_grads": len(grads),
        "loaded_weights": len(weights),
        "versions": _versions(),
        "attn_implementation": model.config._attn_implementation,
    }


def real(spec: dict) -> dict:
    """ST-A on a real task as the reference's examples do it: pad to max_length, random batches,
    AdamW with linear decay and gradient clipping at 1.0 (the Trainer's defaults)."""
    from adapters import AutoAdapterModel
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    start = time.perf_counter()
    rows = json.loads(Path(spec["examples"]).read_text())
    tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"], local_files_only=True)
    second = rows["text_b"] if rows.get("text_b") else None
    enc = tokenizer(
        rows["text_a"],
        second,
        padding="max_length",
        truncation=True,
        max_length=spec["max_length"],
        return_tensors="pt",
    )
    labels = torch.tensor(rows["label"], dtype=torch.long)
    data = torch.utils.data.TensorDataset(
        enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], labels
    )
    gen = torch.Generator().manual_seed(0)
    loader = torch.utils.data.DataLoader(
        data, batch_size=spec["batch"], shuffle=True, generator=gen
    )
    model = AutoAdapterModel.from_pretrained(spec["model_dir"], local_files_only=True)
    task = spec["task"]
    model.add_adapter(task, config="seq_bn")
    model.add_classification_head(task, num_labels=2)
    model.train_adapter(task)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=spec["lr"], fused=True)  # the Trainer's default
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, spec["epochs"] * len(loader))
    setup_s = time.perf_counter() - start
    throughputs = []
    for _ in range(spec["epochs"]):
        model.train()
        begin, seen = time.perf_counter(), 0
        for ids, mask, types, y in loader:
            logits = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
            F.cross_entropy(logits, y).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            seen += len(y)
        throughputs.append(seen / (time.perf_counter() - begin))
    return {
        "throughputs": throughputs,
        "examples": len(labels),
        "setup_s": setup_s,
        "mean_length": float(enc["attention_mask"].sum(1).float().mean()),
        "mean_padded_length": float(enc["input_ids"].shape[1]),
        "trainable_params": sum(p.numel() for p in params),
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
