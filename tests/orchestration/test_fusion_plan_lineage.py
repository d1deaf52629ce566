"""A fusion's lineage key names what it was trained from: an edited data file of a target whose
own adapter is not fused gives a new key (a fusion trained anew), while a target that fuses its
own adapter keeps the key it had (the adapter's version stands for its data)."""

from __future__ import annotations

from tuning_support import config_document, write_config

from adapterfleet.config import load_config
from adapterfleet.orchestration.fusion_plan import lineage_key
from adapterfleet.registry import ModelVersionInfo

VERSIONS = {"fruit": ModelVersionInfo("tinysweep.adapter.fruit", 2, "runs:/x/adapter", "x")}


def test_the_targets_data_counts_where_no_fused_adapter_stands_for_it(tmp_path, tiny_model):
    document = config_document(tmp_path, tiny_model)
    document["fusion"] = {"targets": {"water": ["fruit"], "fruit": ["fruit"]}}
    path = write_config(tmp_path, document)
    water, fruit = (lineage_key(load_config(path), t, VERSIONS) for t in ("water", "fruit"))
    for name in ("water_train.tsv", "fruit_train.tsv"):
        with open(tmp_path / "data" / name, "a") as handle:
            handle.write("one more row\tno\n")
    config = load_config(path)
    assert lineage_key(config, "water", VERSIONS) != water  # its data: no fused adapter of water
    assert lineage_key(config, "fruit", VERSIONS) == fruit  # fruit's adapter version stands for it
