"""Tiny random encoders of every supported family, for fast tests; where the shared GLUE data is."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers
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


# Families beyond the BERT five, each as (config class, extra settings) on the TINY shape.
_DECODER = {"num_key_value_heads": 2, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
NEW_FAMILIES = {
    "albert": ("AlbertConfig", {"embedding_size": 16}),
    "deberta": ("DebertaConfig", {}),
    "deberta-v2": ("DebertaV2Config", {}),
    "modernbert": (
        "ModernBertConfig",
        {"global_attn_every_n_layers": 2, "local_attention": 16, "pad_token_id": 0,
         "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2},
    ),
    "gpt2": ("GPT2Config", {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}),
    "llama": ("LlamaConfig", _DECODER),
    "mistral": ("MistralConfig", _DECODER),
    "qwen2": ("Qwen2Config", _DECODER),
    "qwen3": ("Qwen3Config", {**_DECODER, "head_dim": 8}),
    "gemma2": ("Gemma2Config", {**_DECODER, "head_dim": 8}),
    "gemma3_text": ("Gemma3TextConfig", {**_DECODER, "head_dim": 8}),
}  # fmt: skip
ALL_FAMILIES = ("bert", "roberta", "xlm-roberta", "electra", "distilbert", *NEW_FAMILIES)
DECODERS = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text")


def _new_family(family: str, kw: dict) -> torch.nn.Module:
    class_name, extra = NEW_FAMILIES[family]
    if family == "gpt2":
        names = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer",
                 "num_attention_heads": "n_head", "intermediate_size": "n_inner",
                 "max_position_embeddings": "n_positions"}  # fmt: skip
        kw = {names.get(key, key): value for key, value in kw.items()}
    config = getattr(transformers, class_name)(**kw, **extra)
    config._attn_implementation = "eager"
    return transformers.AutoModel.from_config(config).eval()


def tiny_encoder(family: str = "bert", seed: int = 0, **overrides: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    kw = {**TINY, **overrides}
    if family in NEW_FAMILIES:
        return _new_family(family, kw)
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
