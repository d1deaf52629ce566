"""Attention whose probability dropout uses the packed masks of `dropout.py` on a CPU.

transformers runs an encoder's attention through `scaled_dot_product_attention` (SDPA). On a CPU
in training, with dropout on the attention probabilities, SDPA takes its math path and draws that
dropout's mask with `bernoulli_`, one generator call per element: on BERT-base at 8×128 that is
twelve masks of 1.6 M elements a step, 172 ms of the step (RESULTS.md, the fusion profile).

`packed_attention` computes the same math (softmax of the scaled scores plus the mask, dropout,
times V) with `keep_mask`'s packed draws. Everywhere else (eval, p = 0, CUDA, softcaps, position
biases, caches) it hands the call to transformers' own SDPA function unchanged, so decoders with
`attention_dropout: 0.0` and every inference keep SDPA's fused kernels.

`use_packed_attention` switches an encoder loaded with SDPA to it, under the name
`adapterfleet_sdpa`, registered in transformers' attention and mask interfaces (the mask is
SDPA's); `AdapterModel` does so when it is built or unpickled. Encoders loaded as eager, flash or
DeBERTa's own attention are left as they are.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from adapterfleet.adapters.dropout import LEVELS, keep_mask

NAME = "adapterfleet_sdpa"


def packed_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """An `AttentionInterface` function: (batch, heads, tokens, head_dim) in, SDPA's layout out."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    dropped = round(dropout * LEVELS)
    special = any(kwargs.get(k) is not None for k in ("softcap", "position_bias", "cache", "s_aux"))
    if special or query.device.type != "cpu" or not 0 < dropped < LEVELS:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(-1, -2)).mul_(scale)
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    if attention_mask is None and causal and query.shape[2] > 1:
        attention_mask = _causal_mask(query.shape[2], key.shape[2], query.device)
    if attention_mask is not None:
        scores = _masked(scores, attention_mask)
    probs = torch.softmax(scores, dim=-1)
    kept = _Kept.apply(probs, keep_mask(probs.shape, dropout, probs.device))
    # the survivors' scale 1 / (1 − p′), applied to the (tokens × head_dim) product, not to L × L
    output = torch.matmul(kept, value).mul_(LEVELS / (LEVELS - dropped))
    return output.transpose(1, 2).contiguous(), None


class _Kept(torch.autograd.Function):
    """`probs · keep`, keeping only its output for the backward (SDPA's math path keeps a mask).

    Where the output is 0, the element was dropped or its probability is 0; the softmax's gradient
    is 0 at a probability of 0 whatever flows into it, so passing the gradient where the output is
    non-zero is exact. The output is what the product with V keeps anyway: no memory is added.
    """

    @staticmethod
    def forward(ctx: Any, probs: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        kept = probs.mul(keep)
        ctx.save_for_backward(kept)
        return kept

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (kept,) = ctx.saved_tensors
        return grad.mul(kept != 0), None


def _causal_mask(queries: int, keys: int, device: torch.device) -> torch.Tensor:
    rows = torch.arange(queries, device=device)[:, None] + (keys - queries)
    return rows >= torch.arange(keys, device=device)[None, :]


def _masked(scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """SDPA's mask semantics: a boolean mask keeps True, a float mask is added to the scores."""
    attention_mask = attention_mask[..., : scores.shape[-1]]
    if attention_mask.dtype == torch.bool:
        return scores.masked_fill_(~attention_mask, torch.finfo(scores.dtype).min)
    return scores.add_(attention_mask)


def register() -> None:
    """Make `NAME` known to transformers (idempotent; the mask function is SDPA's)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, packed_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_packed_attention(encoder: nn.Module) -> bool:
    """Switch `encoder` (a transformers model) from SDPA to `packed_attention`; False, leaving
    it as it is, when it does not run SDPA."""
    config = getattr(encoder, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    register()
    encoder.set_attn_implementation(NAME)
    return encoder.config._attn_implementation == NAME
