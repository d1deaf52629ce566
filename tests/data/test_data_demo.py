"""The generated demo task suite: deterministic, balanced, small, loadable, shared vocabulary."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from adapterfleet.data import demo_suite_specs, generate_demo_suite, load_task, load_tasks_config

SIZES = {
    "demo_sentiment": (1500, 300),
    "demo_aspect": (1500, 300),
    "demo_negation": (1500, 300),
    "demo_delivery": (300, 300),
}


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_suite_is_deterministic_small_and_in_several_formats(tmp_path: Path) -> None:
    specs = generate_demo_suite(tmp_path / "a", seed=0)
    generate_demo_suite(tmp_path / "b", seed=0)
    generate_demo_suite(tmp_path / "c", seed=1)
    first = _files(tmp_path / "a")
    assert first == _files(tmp_path / "b")
    assert first["sentiment_train.tsv"] != _files(tmp_path / "c")["sentiment_train.tsv"]
    assert sum(len(data) for data in first.values()) < 1_000_000
    assert sorted(specs) == sorted(SIZES)
    formats = {s.train.format for s in specs.values()}
    assert formats == {"tsv", "jsonl", "csv", "json"}
    assert specs["demo_negation"].train.header is False
    assert specs == load_tasks_config(tmp_path / "a" / "tasks.yaml")


def test_tasks_load_balanced_without_repeats(tmp_path: Path) -> None:
    for name, spec in generate_demo_suite(tmp_path).items():
        task = load_task(spec)
        assert (len(task.train), len(task.dev)) == SIZES[name]
        assert task.skipped == 0
        for split in (task.train, task.dev):
            counts = Counter(split.to_dict()["label"])
            assert len(counts) == task.num_labels and max(counts.values()) == min(counts.values())
        texts = task.train.to_dict()["text_a"] + task.dev.to_dict()["text_a"]
        assert len(set(texts)) == len(texts), name


def test_target_is_built_from_what_the_sources_teach(tmp_path: Path) -> None:
    tasks = {name: load_task(spec) for name, spec in generate_demo_suite(tmp_path).items()}

    def words(name: str) -> set[str]:
        text = " ".join(tasks[name].train.to_dict()["text_a"]).lower()
        return set(re.findall(r"[a-z']+", text))

    sources = words("demo_sentiment") | words("demo_aspect") | words("demo_negation")
    assert words("demo_delivery") <= sources
    target = tasks["demo_delivery"].dev.to_dict()
    negated = [re.search(r"\b(not|never|n't)\b|n't", t) is not None for t in target["text_a"]]
    assert 0.3 < sum(negated) / len(negated) < 0.9  # negation matters, but not everywhere
    several_aspects = [t.count(",") + t.count(".") >= 2 for t in target["text_a"]]
    assert sum(several_aspects) / len(several_aspects) > 0.8
    aspect = tasks["demo_aspect"]
    assert aspect.label_names == ("delivery", "product", "price", "service")


def test_demo_specs_write_nothing_until_a_task_is_loaded(tmp_path: Path) -> None:
    """`demo_tasks: true` in a config: its specs are made without a file (read-only commands
    write nothing); the first `load_task` writes the whole suite, the same bytes as
    `generate_demo_suite`, and the specs are those it gives (config hashes unchanged)."""
    lazy = demo_suite_specs(tmp_path / "lazy", seed=0)
    assert not (tmp_path / "lazy").exists()
    written = generate_demo_suite(tmp_path / "eager", seed=0)
    eager_files = _files(tmp_path / "eager")
    for name, spec in lazy.items():
        assert spec.demo_seed == 0 and written[name].demo_seed is None
        moved = str(spec.to_mapping()).replace(str(tmp_path / "lazy"), str(tmp_path / "eager"))
        assert moved == str(written[name].to_mapping())
    task = load_task(lazy["demo_aspect"])
    assert _files(tmp_path / "lazy") == eager_files
    assert (len(task.train), len(task.dev)) == SIZES["demo_aspect"]
