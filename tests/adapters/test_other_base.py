"""Weights saved on one base and loaded onto another of the same type, width and depth load
with a UserWarning naming both bases (a moved folder is legitimate, so it is not refused)."""

import warnings

import pytest
from helpers import tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    add_adapter,
    load_adapter,
    load_encoder,
    load_head,
    save_adapter,
    save_head,
)
from adapterfleet.fusion import add_fusion, load_fusion, save_fusion


@pytest.fixture
def bases(tmp_path):
    for seed, name in enumerate(("base-a", "base-b")):
        tiny_encoder("bert", seed=seed).save_pretrained(tmp_path / name)
    return tmp_path / "base-a", tmp_path / "base-b"


@pytest.fixture
def saved(bases, tmp_path):
    model = AdapterModel(load_encoder(str(bases[0])))
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    add_fusion(model, "f", ["a"])
    model.add_head("f", HeadConfig())
    save_adapter(model, "a", tmp_path / "adapter")
    save_fusion(model, "f", tmp_path / "fusion")
    save_head(model, "f", tmp_path / "head")
    return tmp_path


def _load_all(base, saved):
    model = AdapterModel(load_encoder(str(base)))
    load_adapter(model, saved / "adapter")
    load_fusion(model, saved / "fusion")
    load_head(model, saved / "head")


def test_loading_onto_another_base_warns_naming_both(bases, saved):
    with pytest.warns(UserWarning) as caught:
        _load_all(bases[1], saved)
    messages = [str(w.message) for w in caught if "was trained on the base" in str(w.message)]
    assert len(messages) == 3  # the adapter, the fusion and the head
    assert all(str(bases[0]) in m and str(bases[1]) in m for m in messages)
    assert caught[0].filename == __file__  # the warning points at the caller's line


def test_loading_onto_the_same_base_says_nothing(bases, saved):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _load_all(bases[0], saved)


def test_loading_leaves_the_processs_progress_bars_as_they_were(bases) -> None:
    """`load_encoder` switched transformers' and the hub's progress bars off for the whole
    process: a notebook's own downloads after it showed none. Off during our load only."""
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()  # a fresh process's state
    load_encoder(str(bases[0]))
    assert hf_logging.is_progress_bar_enabled() and not are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # a caller's own choice stays too
    try:
        load_encoder(str(bases[0]))
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.enable_progress_bar()


def test_set_active_routes_the_layers_through_what_was_loaded(bases, saved) -> None:
    """`load_adapter(..., set_active=True)` and `load_fusion(..., set_active=True)`, AdapterHub's
    keyword: a notebook that loaded a fusion without activating it predicted with the base."""

    def active(model: AdapterModel, attribute: str) -> set[object]:
        return {getattr(m, attribute) for m in model.modules() if hasattr(m, attribute)}

    model = AdapterModel(load_encoder(str(bases[0])))
    load_adapter(model, saved / "adapter")
    assert active(model, "active_adapter") == {None}  # AdapterHub's default
    load_adapter(model, saved / "adapter", name="b", set_active=True)
    assert active(model, "active_adapter") == {"b"}
    load_fusion(model, saved / "fusion", set_active=True)
    assert active(model, "active_fusion") == {"f"}
