"""TaskSpec validation and the tasks file (data_root, overrides)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapterfleet.data import TaskError, TaskSpec, load_tasks_config

BASE = {
    "train": "t/train.tsv",
    "dev": "t/dev.tsv",
    "text_fields": ["s1", "s2"],
    "label_names": ["no", "yes"],
}


def _error(mapping: dict, name: str = "rte", root: Path = Path("/data")) -> str:
    with pytest.raises(TaskError) as info:
        TaskSpec.from_mapping(name, mapping, root)
    message = str(info.value)
    assert "\n" not in message
    assert f"task {name!r}" in message
    return message


def test_valid_spec_defaults_and_paths() -> None:
    spec = TaskSpec.from_mapping("rte", BASE, Path("/data"))
    assert spec.train.path == Path("/data/t/train.tsv")
    assert spec.train.format == "tsv" and spec.train.header is True
    assert spec.train.encoding == "utf-8-sig"
    assert spec.label_field == "label" and spec.metrics == ("accuracy",) and spec.seed == 0
    assert spec.is_pair and spec.num_labels == 2 and not spec.is_multiple_choice


def test_unknown_key_names_task_key_and_allowed_keys() -> None:
    message = _error({**BASE, "dev_frac": 0.1})
    assert "dev_frac" in message and "unknown key" in message
    assert "allowed:" in message and "dev_fraction" in message and "label_names" in message


def test_unknown_split_key_is_rejected() -> None:
    message = _error({**BASE, "train": {"path": "a.tsv", "delim": ","}})
    assert "train.delim" in message and "columns" in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"train": {"hub": "nyu-mll/glue", "hub_config": "stsb"}, "dev": "validation"},
            "train.hub: hub and hub_config are task keys, not train keys; write them beside "
            "train, which then names the hub's split: {hub: nyu-mll/glue, hub_config: stsb, "
            "train: train}",
        ),
        (
            {"hub": "nyu-mll/glue", "train": "train", "dev": {"hub_config": "rte"}},
            "dev.hub_config: hub_config is a task key, not a dev key; write it beside dev, which "
            "then names the hub's split: {hub: <id or folder>, hub_config: rte, dev: validation}",
        ),
    ],
)
def test_hub_keys_under_a_split_show_the_task_level_shape(change: dict, expected: str) -> None:
    """`train: {hub: ...}` said `unknown train key; allowed: path, format, ...`, with no word
    that hub and hub_config sit beside train, which names the split."""
    assert _error({**BASE, **change}).endswith(expected)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"label_names": None}, "label_names"),
        ({"text_fields": None}, "text_fields"),
        ({"text_fields": ["a", "b", "c"]}, "text_fields"),
        ({"label_names": ["x"]}, "label_names"),
        ({"dev": None}, "dev"),
        ({"dev_fraction": 0.1}, "dev"),
        ({"dev": None, "dev_fraction": 1.5}, "dev_fraction"),
        ({"train": "t/train.txt"}, "train.format"),
        ({"train": {"path": "t/q.tsv", "header": False}}, "train.columns"),
        ({"train": {"path": "t/q.jsonl", "columns": ["a"]}}, "train.columns"),
        ({"train": {"path": "t/q.tsv", "encoding": "klingon"}}, "train.encoding"),
        ({"max_train_examples": 0}, "max_train_examples"),
        ({"type": "ranking"}, "type"),
        ({"question_field": "q"}, "question_field"),
        ({"hub_config": "rte"}, "hub_config"),
        ({"train": {"path": "t/q.tsv", "quotes": "yes"}}, "train.quotes"),
        ({"train": {"path": "t/q.jsonl", "quotes": True}}, "train.quotes"),
        ({"text_fields": ["s1", "label"]}, "label_field"),
    ],
)
def test_invalid_values_name_the_field(change: dict, field: str) -> None:
    mapping = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    assert f", {field}:" in _error(mapping)


def test_the_label_column_is_never_an_input_of_the_model() -> None:
    """A label column named as a text field, a context or a choice would be learnt from itself
    (and asked of `predict`): refused when the config is read, in every task type."""
    message = _error({**BASE, "text_fields": ["s1", "gold"], "label_field": "gold"})
    assert message.endswith(
        "label_field: 'gold' is the label_field and also an input column of the model; name "
        "the label's column in label_field only"
    )
    choice = {"type": "multiple_choice", "label_field": "a", "label_names": ["a", "b"]}
    flat = {k: v for k, v in BASE.items() if k not in ("text_fields", "label_names")}
    assert ", label_field: 'a' is the label_field" in _error(
        {**flat, **choice, "question_field": "q", "choice_fields": ["a", "b"]}
    )
    layout = {"context": ["q", "a"], "fields": ["x", "y"]}
    assert ", label_field: 'a' is the label_field" in _error({**flat, **choice, "choices": layout})


def test_a_multiple_choice_task_without_choices_is_pointed_at_choices() -> None:
    """`text_fields` on a multiple-choice task said `use question_field` (the older flat form);
    the README teaches `choices: {context: ...}`, and so do these messages now."""
    flat = {k: v for k, v in BASE.items() if k != "label_names"}
    mc = {**flat, "type": "multiple_choice", "label_names": ["a", "b"]}
    layout = "declare the context and the choices under choices:, e.g. {context: [question], "
    assert f", text_fields: not for multiple_choice; {layout}" in _error(mc)
    bare = {k: v for k, v in mc.items() if k != "text_fields"}
    assert f", choices: missing; {layout}" in _error(bare)
    assert ", choice_fields: " in _error({**bare, "question_field": "q"})  # the flat form, half
    assert ", question_field: missing" in _error({**bare, "choice_fields": ["a", "b"]})


def test_first_hour_hints_say_what_to_write() -> None:
    assert _error({**BASE, "dev": None}).endswith(
        "dev: declare exactly one of dev and dev_fraction; give dev: <file or split>, or "
        "dev_fraction: 0.1 to hold out a tenth of train"
    )
    assert ", train.format: no format known for '.txt' (a.txt); set train.format" in _error(
        {**BASE, "train": "a.txt"}
    )
    for name in ("-x", ".."):
        message = _error(BASE, name=name)
        assert f"name: {name!r}: a task name starts with a letter or a digit, then" in message
    # it listed '.', which the config then refuses (it names the registered models' parts)
    assert _error(BASE, name="My Task").endswith(
        "name: 'My Task': a task name starts with a letter or a digit, then letters, digits, "
        "'_' and '-'; rename it, e.g. My_Task"
    )
    assert _error(BASE, name="..").endswith("rename it, e.g. task1")


def test_a_fraction_yaml_reads_as_text_is_read_as_the_number() -> None:
    """PyYAML reads `dev_fraction: 1e-1` as the text '1e-1', which was refused as "'1e-1' is
    not in (0, 1)"; text that is no number, or digits grouped with `_`, still are."""
    spec = TaskSpec.from_mapping("t", {**BASE, "dev": None, "dev_fraction": "1e-1"}, Path("/d"))
    assert spec.dev_fraction == 0.1
    for value in ("a tenth", "0_1", "1e0"):
        message = _error({**BASE, "dev": None, "dev_fraction": value}, name="t")
        assert message.endswith(f"dev_fraction: {value!r} is not a fraction in (0, 1); e.g. 0.1")


def test_format_inferred_and_explicit() -> None:
    spec = TaskSpec.from_mapping(
        "t",
        {**BASE, "train": "a.jsonl", "dev": {"path": "b.data", "format": "parquet"}},
        Path("/d"),
    )
    assert spec.train.format == "jsonl" and spec.dev is not None and spec.dev.format == "parquet"


def test_integer_label_names_become_strings() -> None:
    spec = TaskSpec.from_mapping("t", {**BASE, "label_names": [0, 1]}, Path("/d"))
    assert spec.label_names == ("0", "1")


def test_multiple_choice_spec() -> None:
    spec = TaskSpec.from_mapping(
        "mc",
        {
            "type": "multiple_choice",
            "train": "a.jsonl",
            "dev_fraction": 0.2,
            "question_field": "q",
            "choice_fields": ["e0", "e1", "e2"],
        },
        Path("/d"),
    )
    assert spec.is_multiple_choice and spec.label_names == ("e0", "e1", "e2")
    assert spec.num_labels == 3


def test_to_mapping_round_trips() -> None:
    spec = TaskSpec.from_mapping(
        "t", {**BASE, "train": {"path": "a.tsv", "rename": {"x": "s1"}}}, Path("/d")
    )
    assert TaskSpec.from_mapping("t", spec.to_mapping(), Path("/elsewhere")) == spec


def test_data_root_is_relative_to_the_yaml_folder(tmp_path: Path) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    path = folder / "tasks.yaml"
    path.write_text("data_root: ../data\ntasks:\n  t:\n" + _yaml_task(BASE))
    spec = load_tasks_config(path)["t"]
    assert spec.train.path == (tmp_path / "data" / "t" / "train.tsv").resolve()


def test_overrides_dotted_and_nested(write_config) -> None:
    path = write_config({"a": BASE, "b": BASE})
    specs = load_tasks_config(path, {"tasks.a.max_train_examples": 10, "tasks": {"b": {"seed": 7}}})
    assert specs["a"].max_train_examples == 10 and specs["a"].seed == 0
    assert specs["b"].seed == 7 and specs["b"].max_train_examples is None


def test_override_of_unknown_task_is_an_error(write_config) -> None:
    path = write_config({"a": BASE})
    with pytest.raises(
        TaskError,
        match=r"task 'zz', overrides: no such task to change .*known: \['a'\]; declare a new task "
        r"in the tasks file itself",
    ):
        load_tasks_config(path, {"tasks.zz.seed": 1})


def test_tasks_file_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="file not found"):
        load_tasks_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("data_root: .\ntask: {}\n")
    match = r"task: unknown key \(did you mean 'tasks'\?\); allowed: data_root, tasks"
    with pytest.raises(TaskError, match=match):
        load_tasks_config(bad)
    bad.write_text("data_root: .\ntasks:\n\ta: {}\n")
    with pytest.raises(
        TaskError, match=r"invalid YAML \(.*'\\t'.*\); indent with spaces, not tabs$"
    ):
        load_tasks_config(bad)


def _yaml_task(mapping: dict) -> str:
    import yaml

    text = yaml.safe_dump(mapping)
    return "".join(f"    {line}\n" for line in text.splitlines())
