"""The AdapterFusion layer of one transformer layer, computed in an exact, cheaper form.

Straightforward form (Pfeiffer et al., 2021; the reference's details): with query `q`, adapter
outputs `z_n = U_n f(D_n q + d_n) + c_n`,
    s = softmax_n((Q q + b_Q) · (K z_n + b_K) / T),    o = Σ_n s_n V z_n.
Rewrite used here, exact up to rounding: with `u = Kᵀ (Q q + b_Q)` the scores are
`(U_nᵀ u) · a_n + u · c_n` (the `b_K` term is the same for every n and cancels in the softmax), and
`o = V (U_cat (s ⊙ a_cat) + C s)`. The N adapters of a layer become three matrix products over the
stacked bottleneck (width Σ m_n); the N full-width outputs `z_n` are never formed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from adapterfleet.adapters.dropout import PackedDropout
from adapterfleet.adapters.lean_backward import formed_again
from adapterfleet.adapters.modules import Bottleneck
from adapterfleet.fusion.config import FusionConfig
from adapterfleet.fusion.weighted_up import weight_slices, weighted_up


class Stacked:
    """The frozen weights of N adapters laid side by side (rebuilt when any of them changes)."""

    def __init__(self, adapters: Sequence[Bottleneck]):
        self.widths = [a.adapter_down.out_features for a in adapters]
        self.down_w = torch.cat([a.adapter_down.weight for a in adapters], 0)  # (M, d)
        self.down_b = torch.cat([a.adapter_down.bias for a in adapters], 0)  # (M,)
        # up-projections and their biases side by side, as the folded form takes them
        self.up = torch.cat(
            [
                *(a.adapter_up.weight for a in adapters),
                *(a.adapter_up.bias[:, None] for a in adapters),
            ],
            1,
        )  # (d, M + N)
        m = self.down_w.shape[0]
        self.up_w, self.up_b = self.up[:, :m], self.up[:, m:]  # (d, M), (d, N): views
        self.activations = [a.non_linearity for a in adapters]
        self.uniform = len(set(self.widths)) == 1 and len(set(self.activations)) == 1
        # mixed widths as a tensor on the weights' device, filled there: no copy from the host,
        # which a CUDA graph capture cannot hold (a stack is rebuilt per call when adapters train)
        device = self.down_w.device
        self.repeats = (
            None
            if self.uniform
            else torch.cat(
                [torch.full((1,), w, dtype=torch.long, device=device) for w in self.widths]
            )
        )

    def share_storage(self, adapters: Sequence[Bottleneck]) -> None:
        """Point the frozen adapters' parameters at their slices of the stacked tensors, so the
        fused copy is the only copy in memory (N adapters × layers would otherwise be held twice).

        The parameters stay the same objects (state dicts, saving and hashing see no change); an
        in-place change through one of them bumps its version, and the layer restacks.
        """
        start = 0
        for index, (adapter, width) in enumerate(zip(adapters, self.widths, strict=True)):
            rows = slice(start, start + width)
            adapter.adapter_down.weight.data = self.down_w[rows]
            adapter.adapter_down.bias.data = self.down_b[rows]
            adapter.adapter_up.weight.data = self.up_w[:, rows]
            adapter.adapter_up.bias.data = self.up_b[:, index]
            start += width

    def activate(self, pre: torch.Tensor, adapters: Sequence[Bottleneck]) -> torch.Tensor:
        if self.uniform:
            return adapters[0].activation(pre)
        parts = pre.split(self.widths, dim=-1)
        return torch.cat([a.activation(p) for a, p in zip(adapters, parts, strict=True)], -1)

    def group_sum(self, x: torch.Tensor) -> torch.Tensor:
        """Sum each adapter's slice of the last axis: (..., M) → (..., N)."""
        if self.uniform:
            return x.unflatten(-1, (len(self.widths), self.widths[0])).sum(-1)
        return torch.stack([p.sum(-1) for p in x.split(self.widths, dim=-1)], -1)

    def scale(self, a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Each adapter's slice of `a` (..., M) times its weight in `s` (..., N): a broadcast
        with equal widths (`weight_slices`), mixed widths repeat each weight over its slice."""
        if self.uniform:
            return weight_slices(a, s)
        return s.repeat_interleave(self.repeats, dim=-1, output_size=sum(self.widths)) * a


def _folded_products(
    up: torch.Tensor,
    query_w: torch.Tensor | None,
    query_b: torch.Tensor | None,
    key_w: torch.Tensor | None,
    value_w: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The scores' matrix (M + N, d) and bias (M + N,) and the output's matrix (d, M + N) of
    `Folded`, from the stacked `up` (d, M + N) and the fusion's query, key and value weights
    (None where the config has none)."""
    d = up.shape[0]
    g_w = query_w.T if query_w is not None else torch.eye(d, dtype=up.dtype, device=up.device)
    g_b = query_b if query_b is not None else up.new_zeros(d)
    if key_w is not None:
        g_w, g_b = g_w @ key_w, g_b @ key_w
    out_w = value_w @ up if value_w is not None else up
    return (g_w @ up).T, g_b @ up, out_w


def _signature(modules: Sequence[nn.Module]) -> tuple:
    """What changes when a parameter does: its version counter (an in-place update), its storage
    (`vector_to_parameters` and `p.data = ...` put a new tensor in), its device and dtype."""
    return tuple(
        (id(p), p._version, p.data_ptr(), p.device, p.dtype)
        for m in modules
        for p in m.parameters()
    )


class Folded:
    """A fusion layer with what the per-token products keep apart multiplied out per call.

    With `u = q G + g` (G = Q_wᵀ K_w, g = b_Q K_w) the scores' two products `u U_cat` and
    `u C` become `q (G U_cat) + g U_cat` and `q (G C) + g C`, and the output
    `V (U_cat (s ⊙ a) + C s)` is one product with `V [U_cat, C]` (d × (M + N)). Per token that is
    three products of width about M instead of six (no d × d query, key or value product left),
    for a few d × d × (M + N) products per call.

    For inference (`joined`) it is built once without gradients, the scores' product joined to
    the adapters' down projection (one product of width 2M + N), and rebuilt when any weight of
    the layer or its adapters changes. In training it is built in every forward, with gradients
    to Q, K and V; the down projection stays apart so that no gradient is formed for the frozen
    adapters. Under autocast the products are formed again in each layer's backward
    (`formed_again`) rather than kept for it with the bf16 copies of the weights they were
    formed from (per layer about 2·d² + 3·d·(M + N) numbers fewer held at a step's peak, for
    2·d²·(M + N) + d³ multiply-adds more); in float32 the weights themselves serve the
    backward, and nothing is formed again.

    It pays when a batch has well over M + N tokens (`FusionLayer.folds`). With
    gradients and adapters of equal width the output product is `weighted_up`'s, whose backward
    keeps `a` and the weights rather than the product's (..., M + N) input.
    """

    def __init__(self, layer: FusionLayer, stacked: Stacked, joined: bool) -> None:
        query, key, value = layer.query, layer.key, layer.value
        parts = (
            stacked.up,
            None if query is None else query.weight,
            None if query is None else query.bias,
            None if key is None else key.weight,
            None if value is None else value.weight,
        )
        recording = torch.is_grad_enabled() and not joined
        if recording and torch.is_autocast_enabled(stacked.up.device.type):
            self.score_w, self.score_b, self.out_w = formed_again(_folded_products, *parts)
        else:
            self.score_w, self.score_b, self.out_w = _folded_products(*parts)
        self.split = [sum(stacked.widths), len(stacked.widths)]
        self.joined = joined
        if joined:
            self.in_w = torch.cat([stacked.down_w, self.score_w], 0)  # (2M + N, d)
            self.in_b = torch.cat([stacked.down_b, self.score_b], 0)

    def scores_and_activations(
        self, q: torch.Tensor, stacked: Stacked, adapters: Sequence[Bottleneck]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.joined:
            joined = F.linear(q, self.in_w, self.in_b)
            pre, towards = joined.split([self.split[0], sum(self.split)], -1)
        else:
            pre = F.linear(q, stacked.down_w, stacked.down_b)
            towards = F.linear(q, self.score_w, self.score_b)
        towards_up, towards_bias = towards.split(self.split, -1)
        a = stacked.activate(pre, adapters)
        return stacked.group_sum(towards_up * a) + towards_bias, a

    def output(self, weights: torch.Tensor, a: torch.Tensor, stacked: Stacked) -> torch.Tensor:
        if stacked.uniform and torch.is_grad_enabled():  # keeps a and the weights, not x
            return weighted_up(a, weights, self.out_w)
        return F.linear(torch.cat([stacked.scale(a, weights), weights], -1), self.out_w)


class FusionLayer(nn.Module):
    def __init__(
        self, hidden_size: int, adapter_names: Sequence[str], config: FusionConfig, dropout: float
    ):
        super().__init__()
        self.adapter_names = list(adapter_names)
        self.config = config
        self.temperature = config.temperature
        self.dropout = PackedDropout(dropout if config.dropout is None else config.dropout)
        self.query = nn.Linear(hidden_size, hidden_size) if config.query else None
        self.key = nn.Linear(hidden_size, hidden_size) if config.key else None
        self.value = nn.Linear(hidden_size, hidden_size, bias=False) if config.value else None
        for linear in (self.query, self.key):
            if linear is not None:
                nn.init.normal_(linear.weight, std=0.02)
                nn.init.zeros_(linear.bias)
        if self.value is not None:
            with torch.no_grad():
                self.value.weight.fill_(1e-6).fill_diagonal_(1.0)
        self.record = False
        self.last_weights: torch.Tensor | None = None
        self._stacked: tuple[tuple, Stacked] | None = None
        self._folded: tuple[tuple, Folded] | None = None

    def train(self, mode: bool = True) -> FusionLayer:
        """Set the mode, dropping the cached stacked and folded forms (rebuilt at the next call
        that needs them). Their signatures see an in-place update only through its version
        counter, which some updates leave as it was: torch's own fused AdamW (2.13; the Hugging
        Face Trainer's default, where a user trains this model with it), a write through
        `.data`. So an evaluation after training steps (`evaluate` and the Trainer switch to eval
        mode) never meets the weights of an earlier one; nor does one in eval mode throughout,
        since every forward that records gradients drops them too (`_forget`). Only an in-place
        write through `.data` between two evaluations is unseen: call `model.eval()` after it."""
        self._forget(adapters_too=True)
        return super().train(mode)

    def _forget(self, adapters_too: bool) -> None:
        self._folded = None
        if adapters_too:
            self._stacked = None

    def _stack(self, adapters: Sequence[Bottleneck], trainable: bool | None = None) -> Stacked:
        """The adapters stacked: per call where gradients reach them (they train too), else
        cached until one changes, also without gradients for adapters that take them (a loaded
        model predicting: its parameters keep `requires_grad`), which keep their own storage.
        `trainable`: whether any adapter parameter takes gradients, where the caller knows."""
        if trainable is None:
            trainable = any(p.requires_grad for a in adapters for p in a.parameters())
        if trainable and torch.is_grad_enabled():
            return Stacked(adapters)
        if self._stacked is None or self._stacked[0] != _signature(adapters):
            with torch.no_grad():
                stacked = Stacked(adapters)
                if not trainable:
                    stacked.share_storage(adapters)  # their storage moves: signed after it
                self._stacked = (_signature(adapters), stacked)
        return self._stacked[1]

    def query_vector(self, q: torch.Tensor) -> torch.Tensor:
        """u = Kᵀ (Q q + b_Q): the key projection folded into the query."""
        u = self.query(q) if self.query is not None else q
        return u @ self.key.weight if self.key is not None else u

    def folded(self, stacked: Stacked, adapters: Sequence[Bottleneck]) -> Folded:
        """The inference form for the current weights (built again when one changed), in the
        weights' float32 whatever autocast is on: a form cached under a bf16 evaluation serves a
        float32 forward after it (autocast casts it at use)."""
        signature = (_signature([self, *adapters]), id(stacked))
        if self._folded is None or self._folded[0] != signature:
            device = stacked.up_w.device.type
            with torch.no_grad(), torch.autocast(device, enabled=False):
                self._folded = (signature, Folded(self, stacked, joined=True))
        return self._folded[1]

    @staticmethod
    def folds(q: torch.Tensor, stacked: Stacked) -> bool:
        """Whether to fold in this training call: from M + N tokens. Folding adds about
        7·d²·(M + N) multiply-adds per layer and call and saves 7·d² per token, so it breaks even
        near M + N tokens. Measured (BERT-base, N = 16, M + N = 784, whole steps alternating in
        one process on a 2-core AMD EPYC): 1.3 % slower at 768 tokens, 1.5 % faster at 896 and
        4 % at 1,024; 13 % faster at 4,096 on an earlier host, where 1,024 was even."""
        return q.shape[:-1].numel() > sum(stacked.widths) + len(stacked.widths)

    def forward(self, q: torch.Tensor, adapters: Sequence[Bottleneck]) -> torch.Tensor:
        """The fused adapter contribution for query `q` (..., d); the caller adds the residual.
        In eval mode without gradients through the cached folded form; in training folded per
        call when the batch is large enough (`folds`), else through the rewrite's products."""
        trainable = any(p.requires_grad for a in adapters for p in a.parameters())
        if torch.is_grad_enabled():  # a step may follow that the version counters miss
            self._forget(adapters_too=trainable)
        stacked = self._stack(adapters, trainable)
        folded = None
        if not self.training and not torch.is_grad_enabled():
            folded = self.folded(stacked, adapters)
        elif self.folds(q, stacked):
            folded = Folded(self, stacked, joined=False)
        if folded is not None:
            scores, a = folded.scores_and_activations(q, stacked, adapters)
            return folded.output(self._weights(scores), a, stacked)
        a = stacked.activate(F.linear(q, stacked.down_w, stacked.down_b), adapters)  # (..., M)
        u = self.query_vector(q)
        scores = stacked.group_sum((u @ stacked.up_w) * a) + u @ stacked.up_b  # (..., N)
        weights = self._weights(scores)
        mixed = F.linear(stacked.scale(a, weights), stacked.up_w) + weights @ stacked.up_b.T
        return self.value(mixed) if self.value is not None else mixed

    def _weights(self, scores: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.dropout(scores) / self.temperature, dim=-1)
        if self.record:
            self.last_weights = weights.detach()
        return weights

    def regularization_loss(self) -> torch.Tensor | None:
        """λ · ‖I − V‖²_F, or None when the config has no V regulariser."""
        if not self.config.regularization or self.value is None:
            return None
        weight = self.value.weight
        identity = torch.eye(weight.shape[0], device=weight.device, dtype=weight.dtype)
        return self.config.regularization_lambda * (identity - weight).pow(2).sum()


def reference_fusion(
    layer: FusionLayer, q: torch.Tensor, adapters: Sequence[Bottleneck]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The straightforward formula, N key and N value projections per token; for tests.

    Returns (output, weights). Dropout is not applied: call with the layer in eval mode.
    """
    z = torch.stack([adapter.delta(q) for adapter in adapters], dim=-2)  # (..., N, d)
    query = layer.query(q) if layer.query is not None else q
    keys = layer.key(z) if layer.key is not None else z
    values = layer.value(z) if layer.value is not None else z
    scores = (keys @ query.unsqueeze(-1)).squeeze(-1)  # (..., N)
    weights = torch.softmax(scores / layer.temperature, dim=-1)
    return (weights.unsqueeze(-1) * values).sum(-2), weights
