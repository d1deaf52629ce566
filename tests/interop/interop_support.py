"""Shared checks of the interop tests (imported as `interop_support`, like the other *_support)."""

from __future__ import annotations

import torch

FAMILIES = ("bert", "roberta", "distilbert", "electra", "xlm-roberta")
# The families the reference has besides those (Qwen, Gemma, ModernBERT: not in adapters 1.3).
REF_FAMILIES = ("albert", "deberta", "deberta-v2", "gpt2", "llama", "mistral")
TOLERANCE = 1e-5  # max |ours - reference| / max |reference|
MIN_EFFECT = 1e-2  # how far the adapters must move the output for a comparison to mean something


def rel_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return float((ours - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def assert_same_output(
    ours: torch.Tensor, ref: torch.Tensor, plain: torch.Tensor | None = None
) -> None:
    """`ours` equals the reference's output `ref`, which differs visibly from the plain base's
    output `plain` (when given)."""
    assert ours.shape == ref.shape
    if plain is not None:
        assert rel_error(ref, plain) > MIN_EFFECT, "the modules barely change the output"
    error = rel_error(ours, ref)
    assert error < TOLERANCE, f"relative error {error:.2e} against the reference"


def last_hidden(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(**inputs).last_hidden_state
