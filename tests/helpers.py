"""Tiny random encoders of every supported family, for fast tests; where the shared GLUE data is."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    BertConfig,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    ElectraConfig,
    ElectraModel,
    RobertaConfig,
    RobertaModel,
    XLMRobertaConfig,
    XLMRobertaModel,
)

GLUE_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"

TINY = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "vocab_size": 100,
    "max_position_embeddings": 64,
}


def tiny_encoder(family: str = "bert", seed: int = 0, **overrides: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    kw = {**TINY, **overrides}
    if family == "distilbert":
        config = DistilBertConfig(
            dim=kw["hidden_size"],
            n_layers=kw["num_hidden_layers"],
            n_heads=kw["num_attention_heads"],
            hidden_dim=kw["intermediate_size"],
            vocab_size=kw["vocab_size"],
            max_position_embeddings=kw["max_position_embeddings"],
        )
        return DistilBertModel(config).eval()
    classes = {
        "bert": (BertConfig, BertModel),
        "roberta": (RobertaConfig, RobertaModel),
        "xlm-roberta": (XLMRobertaConfig, XLMRobertaModel),
        "electra": (ElectraConfig, ElectraModel),
    }
    config_cls, model_cls = classes[family]
    if family == "electra":
        kw["embedding_size"] = kw["hidden_size"]
    return (
        model_cls(config_cls(**kw), add_pooling_layer=False).eval()
        if family in ("bert", "roberta", "xlm-roberta")
        else model_cls(config_cls(**kw)).eval()
    )


def batch(seed: int = 1, size: int = 3, length: int = 7) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (size, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, -2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def hidden(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def perturb(parameters: list[torch.nn.Parameter], seed: int = 3, scale: float = 0.5) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in parameters:
            p.add_(torch.randn(p.shape, generator=generator) * scale)
