"""A fusion mixes adapters of one base model: the plan refuses a registered adapter that its tags
say was trained on another base, before any training."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tuning_support import config_document, write_config

from adapterfleet.config import ConfigError, load_config
from adapterfleet.orchestration.fusion_plan import check_one_base
from adapterfleet.registry import ModelVersionInfo


def _version(task: str, base: str | None) -> ModelVersionInfo:
    tags = {} if base is None else {"base_model": base}
    return ModelVersionInfo(f"tinysweep.adapter.{task}", 3, "runs:/x/adapter", "x", tags=tags)


@pytest.fixture
def config(tmp_path: Path, tiny_model: Path):
    document = config_document(tmp_path, tiny_model)
    document["fusion"] = {"targets": {"fruit": "all"}}
    return load_config(write_config(tmp_path, document))


def test_adapters_of_this_base_or_without_the_tag_pass(config):
    same = str(Path(config.base_model).resolve())
    check_one_base(
        config, "fruit", {"fruit": _version("fruit", same), "water": _version("water", None)}
    )


def test_an_adapter_of_another_base_is_refused_naming_it_and_the_fix(config, tmp_path):
    other = tmp_path / "other-model"
    other.mkdir()
    versions = {
        "fruit": _version("fruit", config.base_model),
        "water": _version("water", str(other)),
    }
    with pytest.raises(
        ConfigError,
        match=r"fusion.targets.fruit: adapter water v3 was trained on "
        r"base_model '.*other-model', this pipeline's is .*registry_prefix",
    ):
        check_one_base(config, "fruit", versions)


def test_two_hub_names_that_differ_are_refused_and_an_unknown_folder_is_left_to_the_load(config):
    on_hub = replace(config, base_model="bert-base-uncased")
    with pytest.raises(ConfigError, match="'microsoft/deberta-v3-base'"):
        check_one_base(on_hub, "fruit", {"fruit": _version("fruit", "microsoft/deberta-v3-base")})
    check_one_base(on_hub, "fruit", {"fruit": _version("fruit", "/elsewhere/model")})
