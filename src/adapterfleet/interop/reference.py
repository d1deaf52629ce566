"""What AdapterHub `adapters` 1.x (the reference) calls things: file names, config keys and their
defaults, parameter names per encoder family. The one place in adapterfleet that knows them.

Facts read from `adapters` 1.3.0: `utils.py` (file names), `configuration/adapter_config.py`
(`BnConfig`, `SeqBnConfig`, `DoubleSeqBnConfig`), `configuration/adapter_fusion_config.py`,
`heads/base.py` (`ClassificationHead`, `MultipleChoiceHead`), the model classes' `head_types`, the
model mixins (where each family's adapters sit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapterfleet.adapters.files import WeightsFileError

REFERENCE_VERSION = "1.3.0"
VERSION_TAG = f"adapters.{REFERENCE_VERSION}"  # a config without "version" is read as legacy


class InteropError(WeightsFileError):
    """A reference directory (or an export) uses something adapterfleet does not implement."""


@dataclass(frozen=True)
class Files:
    """A saved module: its JSON config, and its weights as safetensors or as a torch pickle."""

    config: str
    safetensors: str
    torch_bin: str


ADAPTER_FILES = Files("adapter_config.json", "adapter.safetensors", "pytorch_adapter.bin")
HEAD_FILES = Files("head_config.json", "model_head.safetensors", "pytorch_model_head.bin")
FUSION_FILES = Files(
    "adapter_fusion_config.json",
    "model_adapter_fusion.safetensors",
    "pytorch_model_adapter_fusion.bin",
)


@dataclass(frozen=True)
class Layout:
    """Where one family's reference model keeps its adapters.

    `prefix` is the base model's attribute in the reference's `*AdapterModel`; `layers` the
    layer list inside it; `mh_adapter` / `output_adapter` the module of a layer that holds the
    attention / feed-forward adapters (the fusion layers sit with the feed-forward ones);
    `multiple_choice` whether the model class has a multiple-choice head (decoders' have none).
    """

    prefix: str
    model_class: str
    layers: str
    mh_adapter: str
    output_adapter: str
    multiple_choice: bool = True


def _bert_like(prefix: str, model_class: str) -> Layout:
    return Layout(prefix, model_class, "encoder.layer", "attention.output", "output")


def _decoder(prefix: str, model_class: str, layers: str) -> Layout:
    return Layout(prefix, model_class, layers, "attention_adapters", "output_adapters", False)


LAYOUTS: dict[str, Layout] = {
    "bert": _bert_like("bert", "BertAdapterModel"),
    "roberta": _bert_like("roberta", "RobertaAdapterModel"),
    "xlm-roberta": _bert_like("roberta", "XLMRobertaAdapterModel"),
    "electra": _bert_like("electra", "ElectraAdapterModel"),
    "distilbert": Layout(
        "distilbert",
        "DistilBertAdapterModel",
        "transformer.layer",
        "attention_adapters",
        "output_adapters",
    ),
    "deberta": _bert_like("deberta", "DebertaAdapterModel"),
    "deberta-v2": _bert_like("deberta", "DebertaV2AdapterModel"),
    "albert": Layout(
        "albert",
        "AlbertAdapterModel",
        "encoder.albert_layer_groups.0.albert_layers",
        "attention.attention_adapters",
        "output_adapters",
    ),
    "gpt2": _decoder("transformer", "GPT2AdapterModel", "h"),
    "llama": _decoder("model", "LlamaAdapterModel", "layers"),
    "mistral": _decoder("model", "MistralAdapterModel", "layers"),
}


def layout_for(model_type: object, where: str) -> Layout:
    """The reference's layout of `model_type`: adapterfleet's families that AdapterHub has too
    (adapterfleet trains more: ModernBERT, Qwen, Gemma, which AdapterHub 1.3 lacks)."""
    if model_type not in LAYOUTS:
        raise InteropError(
            f"{where}: AdapterHub adapters {REFERENCE_VERSION} has no model type "
            f"{model_type!r} (of adapterfleet's families it has {', '.join(sorted(LAYOUTS))}); "
            "adapters on this base are used in adapterfleet's own format, not converted"
        )
    return LAYOUTS[str(model_type)]


# --- parameter names -------------------------------------------------------------------------

# The reference's down projection is `Sequential(Linear, activation)`: its Linear is `.0`.
_MODULES = {"adapter_down": "adapter_down.0", "adapter_up": "adapter_up"}
# Weight names of adapter-transformers before 2.0, which the reference still renames on load.
LEGACY_NAMES = {
    "attention_text_task_adapters": "adapters",
    "attention_text_lang_adapters": "adapters",
    "layer_text_task_adapters": "adapters",
    "layer_text_lang_adapters": "adapters",
}


def adapter_key(layout: Layout, layer: int, position: str, adapter: str, param: str) -> str:
    """The reference's name for `param` (e.g. `adapter_down.weight`) of adapter `adapter` at
    `position` (`mh_adapter` or `output_adapter`) of layer `layer`."""
    module, _, kind = param.rpartition(".")
    where = f"{layout.prefix}.{layout.layers}.{layer}.{getattr(layout, position)}"
    return f"{where}.adapters.{adapter}.{_MODULES[module]}.{kind}"


def fusion_key(layout: Layout, layer: int, fusion: str, param: str) -> str:
    """`param` is `query.weight`, `key.bias`, `value.weight`, ... of the fusion layer `fusion`."""
    where = f"{layout.prefix}.{layout.layers}.{layer}.{layout.output_adapter}"
    return f"{where}.adapter_fusion_layer.{fusion}.{param}"


def head_key(head: str, param: str) -> str:
    """`param` is `<index in the head's Sequential>.<weight|bias>`."""
    return f"heads.{head}.{param}"


def fusion_name(adapter_names: list[str]) -> str:
    """The reference names a fusion (and its `Fuse` block) after its adapters, comma-joined."""
    return ",".join(adapter_names)


def normalized_key(key: str, layout: Layout) -> str:
    """A saved key as the reference's `*AdapterModel` names it: legacy module names renamed and
    the base-model prefix added (a plain model with `adapters.init` saves without it)."""
    for old, new in LEGACY_NAMES.items():
        key = key.replace(old, new)
    if key.startswith("heads.") or key.startswith(f"{layout.prefix}."):
        return key
    return f"{layout.prefix}.{key}"


def layers_in(keys: list[str], layout: Layout) -> int:
    """How many encoder layers the saved keys cover (the highest layer index + 1)."""
    marker = f"{layout.prefix}.{layout.layers}."
    found = [k[len(marker) :].split(".", 1)[0] for k in keys if k.startswith(marker)]
    return max((int(i) + 1 for i in found if i.isdigit()), default=0)


# --- config keys -----------------------------------------------------------------------------

# `BnConfig`'s defaults for its optional fields; a saved dict that lacks one means this value.
BN_DEFAULTS: dict[str, Any] = {
    "original_ln_before": False,
    "original_ln_after": True,
    "ln_before": False,
    "ln_after": False,
    "init_weights": "bert",
    "init_weights_seed": None,
    "is_parallel": False,
    "scaling": 1.0,
    "use_gating": False,
    "residual_before_ln": True,
    "adapter_residual_before_ln": False,
    "inv_adapter": None,
    "inv_adapter_reduction_factor": None,
    "cross_adapter": False,
    "leave_out": [],
    "dropout": 0.0,
    "phm_layer": False,
    "phm_dim": 4,
    "factorized_phm_W": True,
    "shared_W_phm": False,
    "shared_phm_rule": True,
    "factorized_phm_rule": False,
    "phm_c_init": "normal",
    "phm_init_range": 0.0001,
    "learn_phm": True,
    "hypercomplex_nonlinearity": "glorot-uniform",
    "phm_rank": 1,
    "phm_bias": True,
    "stochastic_depth": 0.0,
}
BN_REQUIRED = ("mh_adapter", "output_adapter", "reduction_factor", "non_linearity")
# The two bottleneck configs adapterfleet implements, by the reference's names, and ours.
BN_PRESETS: dict[str, dict[str, Any]] = {
    "seq_bn": {
        "mh_adapter": False,
        "output_adapter": True,
        "original_ln_before": True,
        "reduction_factor": 16,
        "non_linearity": "relu",
    },
    "double_seq_bn": {
        "mh_adapter": True,
        "output_adapter": True,
        "original_ln_before": False,
        "reduction_factor": 16,
        "non_linearity": "swish",
    },
}
# The reference's old names for its presets, which are also our architecture names.
BN_ALIASES = {"pfeiffer": "seq_bn", "houlsby": "double_seq_bn"}
PLACEMENT_OF_PRESET = {preset: ours for ours, preset in BN_ALIASES.items()}
# Fields that only shape initialisation, or only matter when a switch we refuse is on.
BN_IRRELEVANT = frozenset(
    {"init_weights", "init_weights_seed", "inv_adapter_reduction_factor"}
    | {k for k in BN_DEFAULTS if k.startswith("phm_") and k != "phm_layer"}
    | {"factorized_phm_W", "shared_W_phm", "shared_phm_rule", "factorized_phm_rule"}
    | {"learn_phm", "hypercomplex_nonlinearity"}
)
# The reference's activation names (transformers' ACT2FN, lower-cased) that are one of ours.
ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish", "gelu": "gelu", "tanh": "tanh"}
# What a config without "version" means by these activation names (the reference renames them).
LEGACY_ACTIVATIONS = {"gelu": "gelu_new", "gelu_orig": "gelu"}

FUSION_FIELDS = (
    "key",
    "query",
    "value",
    "query_before_ln",
    "regularization",
    "residual_before",
    "temperature",
    "value_before_softmax",
    "value_initialized",
    "dropout_prob",
)
FUSION_PRESETS: dict[str, dict[str, Any]] = {
    "dynamic": {
        "key": True,
        "query": True,
        "value": True,
        "regularization": True,
        "value_initialized": True,
    },
    "static": {
        "key": True,
        "query": True,
        "value": False,
        "regularization": False,
        "value_initialized": False,
    },
}
FUSION_COMMON = {
    "query_before_ln": False,
    "residual_before": False,
    "temperature": False,
    "value_before_softmax": True,
    "dropout_prob": None,
}
FUSION_LAMBDA = 0.01  # the reference's fixed weight of ‖I − V‖² (`get_fusion_regularization_loss`)

CLASSIFICATION_HEAD: dict[str, Any] = {
    "head_type": "classification",
    "layers": 2,
    "activation_function": "tanh",
    "use_pooler": False,
    "bias": True,
}
# `MultipleChoiceHead`: one score per choice (`num_choices`); it takes no `bias` (always on).
MULTIPLE_CHOICE_HEAD: dict[str, Any] = {
    "head_type": "multiple_choice",
    "layers": 2,
    "activation_function": "tanh",
    "use_pooler": False,
}
