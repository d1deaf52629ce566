"""Packed training without padding: a batch's examples as one sequence, attention per example.

The examples of a batch are concatenated into a single row of T tokens (no padding at all),
positions restart at 0 for each, and attention runs within each example's span, given by
the cumulative lengths `cu` (0, n₁, n₁+n₂, …, T): on a CUDA device through PyTorch's
variable-length FlashAttention (`torch.nn.attention.varlen.varlen_attn`), elsewhere one
scaled-dot-product attention per span (exact, slow; for checking the plumbing). The encoder is
switched to it with `use_varlen(encoder)`; transformers passes the `cu_seq_lens_*` and
`max_length_*` keywords of the forward call through to it.

torch's varlen attention has no dropout, so training with it draws no attention-probability
masks; the benchmark compares it with models that draw none either.
"""

from __future__ import annotations

from typing import Any

import torch

NAME = "adapterfleet_varlen"


def why_not(device: torch.device | str) -> str | None:
    """Why variable-length attention cannot train on `device`, None when it can."""
    device = torch.device(device)
    if device.type != "cuda":
        return f"varlen_attn runs on CUDA devices only, not on {device.type}"
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:
        return f"torch {torch.__version__} has no torch.nn.attention.varlen"
    return None


def _spans_one_by_one(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor,
                      scale: float | None) -> torch.Tensor:  # fmt: skip
    """(T, H, D) attention within each span of `cu`, one SDPA call per span."""
    out = torch.empty_like(q)
    bounds = cu.tolist()
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        span = [t[start:end].transpose(0, 1) for t in (q, k, v)]  # (H, n, D)
        attended = torch.nn.functional.scaled_dot_product_attention(*span, scale=scale)
        out[start:end] = attended.transpose(0, 1)
    return out


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: (1, H, T, D) in, (1, T, H, D) out."""
    if query.shape[0] != 1 or "cu_seq_lens_q" not in kwargs:
        raise ValueError("varlen attention takes one packed row and cu_seq_lens_q/_k")
    cu, longest = kwargs["cu_seq_lens_q"], int(kwargs["max_length_q"])
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # (T, H, D)
    if q.device.type == "cuda":
        from torch.nn.attention.varlen import varlen_attn

        half = q.dtype if q.dtype in (torch.float16, torch.bfloat16) else torch.bfloat16
        default = scaling is None or abs(scaling - q.shape[-1] ** -0.5) < 1e-9
        options = {} if default else {"scale": scaling}  # torch < 2.10 takes no scale
        out = varlen_attn(q.to(half), k.to(half), v.to(half), cu, cu, longest, longest,
                          **options).to(q.dtype)  # fmt: skip
    else:
        out = _spans_one_by_one(q, k, v, cu, scaling)
    return out.unsqueeze(0), None


def use_varlen(encoder: torch.nn.Module) -> None:
    """Switch a transformers encoder's attention to `varlen_attention` (registered once)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, varlen_attention)
    AttentionMaskInterface.register(NAME, lambda *args, **kwargs: None)  # the spans are the mask
    encoder.set_attn_implementation(NAME)


def collate_varlen(split: Any, indices: list[int]) -> dict[str, Any]:
    """The examples `indices` of `split` as one row: ids, token types, restarting positions,
    the cumulative lengths `cu` (int32), the longest length, each example's start, labels."""
    lengths = [split.lengths[i] for i in indices]
    cu = torch.zeros(len(indices) + 1, dtype=torch.int32)
    cu[1:] = torch.tensor(lengths).cumsum(0)
    ids = torch.tensor([t for i in indices for t in split.input_ids[i]]).unsqueeze(0)
    types = torch.zeros_like(ids)
    if split.token_type_ids is not None:
        types = torch.tensor([t for i in indices for t in split.token_type_ids[i]]).unsqueeze(0)
    positions = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
    labels = torch.tensor([split.labels[i] for i in indices])
    return {"input_ids": ids, "token_type_ids": types, "position_ids": positions, "cu": cu,
            "longest": max(lengths), "starts": cu[:-1].long(), "labels": labels}  # fmt: skip


def varlen_logits(model: Any, batch: dict[str, Any]) -> torch.Tensor:
    """The head's logits of each example of a `collate_varlen` batch (the model's encoder
    switched with `use_varlen`), each example pooled at its first token."""
    cu, longest = batch["cu"], batch["longest"]
    hidden = model.encoder_model(
        input_ids=batch["input_ids"],
        token_type_ids=batch["token_type_ids"],
        position_ids=batch["position_ids"],
        cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=longest, max_length_k=longest,
    ).last_hidden_state  # fmt: skip
    return model.heads[model.active_head](hidden[0, batch["starts"]])
