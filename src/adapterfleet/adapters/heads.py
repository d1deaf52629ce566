"""Task heads and the model that carries an encoder, its adapters and one head per task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from torch import nn

from adapterfleet.adapters.architectures import (
    base_encoder,
    default_pooling,
    first_token_on_decoder,
    is_decoder,
)
from adapterfleet.adapters.attention import register, use_packed_attention
from adapterfleet.adapters.config import HEAD_DROPOUT, POOLINGS
from adapterfleet.adapters.dropout import PackedDropout, pack_dropout
from adapterfleet.adapters.first_token import last_layer_at_first_token
from adapterfleet.adapters.inputs import choices_of, encoder_kwargs, unknown_arguments
from adapterfleet.adapters.lean_backward import keep_less_for_backward
from adapterfleet.adapters.model import check_name, trainable_dtype

HEAD_TYPES = ("classification", "multiple_choice", "regression")


@dataclass(frozen=True)
class HeadConfig:
    """A two-layer tanh head, as in the reference implementation, on a pooled token: the first
    (`cls`), the mean of the real tokens (`mean`) or the last real token (`last`, for decoders).
    `pooling` None (the default): what the base model's family pools (`default_pooling`: the
    first token for encoders, the last real token for decoders), resolved by `add_head`, so a
    head in a model (and its saved file) records the pooling it uses.

    A regression head has one output. With `value_range` [low, high] its last layer learns on
    that range mapped to [0, 1] and the head gives `low + (high - low) * output`: numbers in the
    labels' own units, the loss taken on the [0, 1] scale (`regression_scale`)."""

    head_type: str = "classification"
    num_labels: int = 2
    label_names: list[str] = field(default_factory=list)
    dropout: float = HEAD_DROPOUT
    pooling: str | None = None  # None: the family's default, resolved by add_head
    value_range: list[float] | None = None  # regression only: [low, high] of the labels

    def __post_init__(self) -> None:
        if self.head_type not in HEAD_TYPES:
            raise ValueError(f"head_type {self.head_type!r} is unknown; use one of {HEAD_TYPES}")
        if self.pooling is not None and self.pooling not in POOLINGS:
            raise ValueError(f"pooling {self.pooling!r} is unknown; use one of {POOLINGS}")
        if not _is_int(self.num_labels) or self.num_labels < 1:
            raise ValueError(f"num_labels must be a positive integer, got {self.num_labels!r}")
        if not _is_number(self.dropout) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be a number in [0, 1), got {self.dropout!r}")
        if self.head_type == "classification" and self.num_labels < 2:
            raise ValueError(f"num_labels must be >= 2 for classification, got {self.num_labels}")
        if self.head_type == "regression" and self.num_labels != 1:
            raise ValueError(f"num_labels must be 1 for regression, got {self.num_labels}")
        _check_value_range(self.head_type, self.value_range)
        if self.label_names and len(self.label_names) != self.num_labels:
            raise ValueError(
                f"label_names has {len(self.label_names)} names but num_labels is {self.num_labels}"
            )

    @property
    def out_features(self) -> int:
        return 1 if self.head_type == "multiple_choice" else self.num_labels

    @property
    def regression_scale(self) -> tuple[float, float]:
        """(low, width) of a regression head's outputs: output = low + width * last layer."""
        low, high = self.value_range or (0.0, 1.0)
        return float(low), float(high) - float(low)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.value_range is None:
            del out["value_range"]  # the files of classification heads stay as they were
        return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_value_range(head_type: str, value_range: list[float] | None) -> None:
    if value_range is None:
        return
    if head_type != "regression":
        raise ValueError(f"value_range is for regression heads only, not {head_type!r}")
    ok = isinstance(value_range, list | tuple) and len(value_range) == 2
    if not ok or not all(isinstance(v, int | float) for v in value_range):
        raise ValueError(f"value_range must be [low, high], got {value_range!r}")
    if not value_range[0] < value_range[1]:
        raise ValueError(f"value_range must have low < high, got {list(value_range)}")


class Head(nn.Module):
    def __init__(self, hidden_size: int, config: HeadConfig):
        super().__init__()
        self.config = config
        self.layers = nn.Sequential(
            PackedDropout(config.dropout),
            nn.Linear(hidden_size, hidden_size),
            nn.Tanh(),
            PackedDropout(config.dropout),
            nn.Linear(hidden_size, config.out_features),
        )

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        out = self.layers(pooled)
        if self.config.head_type == "regression" and self.config.value_range is not None:
            low, width = self.config.regression_scale
            out = low + width * out
        return out


def pool(hidden: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """(batch, tokens, d) → (batch, d): the first token, the mean of the real tokens, or the last
    real token (wherever the padding is, left or right)."""
    if how == "cls" or (mask is None and how == "mean"):
        return hidden[:, 0] if how == "cls" else hidden.mean(1)
    if mask is None:
        return hidden[:, -1]
    if how == "mean":
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
    positions = torch.arange(mask.shape[1], device=mask.device)
    last = (positions * (mask != 0)).argmax(-1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


class AdapterModel(nn.Module):
    """An encoder with named adapters, fusions and task heads; `forward` returns logits.

    A multiple-choice head takes (batch, choices, tokens) and gives logits (batch, choices).
    """

    def __init__(self, encoder_model: nn.Module):
        super().__init__()
        pack_dropout(encoder_model)  # CPU masks from packed random bits (adapters/dropout.py)
        use_packed_attention(encoder_model)  # and for the attention probabilities (attention.py)
        keep_less_for_backward(encoder_model)  # RMSNorms, gated MLPs (lean_backward.py)
        self.encoder_model = encoder_model
        self.heads = nn.ModuleDict()
        self.active_head: str | None = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        register()  # a process that unpickles the model knows its attention's name

    @property
    def config(self) -> Any:
        return self.encoder_model.config

    def add_head(self, name: str, config: HeadConfig) -> Head:
        """Add head `name`; its pooling, when not given, is the base family's default. A head
        pooling the first token (`cls`) of a decoder is refused: every input would get one
        prediction."""
        check_name("head", name)
        if name in self.heads:
            raise ValueError(f"head {name!r} already exists in this model")
        config = self._resolved(name, config)
        head = Head(int(self.config.hidden_size), config)
        ref = next(self.encoder_model.parameters())
        self.heads[name] = head.to(device=ref.device, dtype=trainable_dtype(ref)).train(
            self.training
        )
        if self.active_head is None:
            self.active_head = name
        return head

    def _resolved(self, name: str, config: HeadConfig) -> HeadConfig:
        if config.pooling is None:
            return replace(config, pooling=default_pooling(self))
        if config.pooling == "cls" and is_decoder(self):
            model_type = getattr(base_encoder(self).config, "model_type", None)
            raise ValueError(first_token_on_decoder(f"head {name!r}, ", model_type))
        return config

    def head(self, name: str) -> Head:
        """Head `name`; a KeyError naming the heads present when it is absent."""
        if name not in self.heads:
            known = ", ".join(self.heads) or "none"
            raise KeyError(f"head {name!r} is not in this model (heads present: {known})")
        return self.heads[name]

    def select_head(self, name: str) -> list[nn.Parameter]:
        """Make `name` the active head; returns its parameters."""
        parameters = list(self.head(name).parameters())
        self.active_head = name
        return parameters

    def forward(
        self,
        input_ids: torch.Tensor | Mapping[str, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        **unknown: Any,
    ) -> torch.Tensor:
        """The active head's logits. Takes the inputs as keywords or one mapping of them (a
        tokenizer's BatchEncoding; a training batch, whose other keys, such as `labels`, are
        not read); any other keyword is refused (`adapters/inputs.py`). `position_ids` go to
        the base; without them a decoder with absolute positions (GPT-2) counts them from the
        mask, so either padding side works."""
        if unknown:
            raise TypeError(unknown_arguments(list(unknown)))
        if isinstance(input_ids, Mapping):
            batch = input_ids
            return self.forward(
                batch["input_ids"],
                batch.get("attention_mask"),
                batch.get("token_type_ids"),
                batch.get("position_ids"),
            )
        if self.active_head is None:
            raise RuntimeError(
                "the model has no head; add one with add_head(name, HeadConfig(...))"
            )
        head = self.heads[self.active_head]
        choices = choices_of(input_ids, self.active_head, head.config.head_type)
        flat = [
            t.flatten(0, 1) if t is not None and choices else t
            for t in (input_ids, attention_mask, token_type_ids, position_ids)
        ]
        kwargs = encoder_kwargs(self.encoder_model, *flat)
        with last_layer_at_first_token(self, head.config.pooling):
            hidden = self.encoder_model(**kwargs).last_hidden_state
        pooled = pool(hidden, flat[1], head.config.pooling)
        logits = head(pooled.to(head.layers[1].weight.dtype))
        return logits.view(-1, choices) if choices else logits
