"""Every load error is one `TaskError` line naming the task, the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapterfleet.data import TaskError, TaskSpec, load_task, load_tasks_config

SPEC = {
    "train": "train.tsv",
    "dev": "dev.tsv",
    "text_fields": ["sentence1", "sentence2"],
    "label_names": ["entailment", "not_entailment"],
}
GOOD = (
    "index\tsentence1\tsentence2\tlabel\n"
    "0\tA cat.\tAn animal.\tentailment\n"
    "1\tA dog.\tA fish.\tnot_entailment\n"
)


def _load_error(tmp_path: Path, write_config, spec: dict, train: str | bytes = GOOD) -> str:
    target = tmp_path / "train.tsv"
    target.write_bytes(train if isinstance(train, bytes) else train.encode())
    (tmp_path / "dev.tsv").write_text(GOOD)
    specs = load_tasks_config(write_config({"rte": spec}))
    with pytest.raises(TaskError) as info:
        load_task(specs["rte"])
    message = str(info.value)
    assert "\n" not in message and message.startswith("task 'rte', ")
    assert isinstance(info.value, ValueError) and info.value.task == "rte"
    return message


def test_missing_file_gives_the_path(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, {**SPEC, "dev": "nowhere/dev.tsv"})
    assert "dev.path: file not found" in message
    assert str(tmp_path / "nowhere" / "dev.tsv") in message
    # a path typed relative to the working folder was read from the YAML's: the rule is said
    assert "relative ones are read from the folder of the YAML file that declares the task" in (
        message
    )


def test_missing_column_lists_the_columns(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, {**SPEC, "text_fields": ["sentence1", "s2"]})
    assert "train column 's2' (text_fields): not found in" in message
    assert "columns there: index, sentence1, sentence2, label" in message


def test_a_column_named_in_other_case_is_pointed_at(tmp_path: Path, write_config) -> None:
    """'Sentence1' declared over a file's 'sentence1' was only 'not found' (a tester's Review)."""
    message = _load_error(tmp_path, write_config, {**SPEC, "text_fields": ["Sentence1"]})
    assert "train column 'Sentence1' (text_fields): not found in" in message
    assert "('sentence1' there differs only in case; names match exactly)" in message


def test_missing_label_column(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, {**SPEC, "label_field": "gold"})
    assert "column 'gold' (label_field)" in message and "label" in message


def test_unknown_label_value_lists_label_names(tmp_path: Path, write_config) -> None:
    bad = GOOD + "1\tB.\tC.\tneutral\n"
    message = _load_error(tmp_path, write_config, SPEC, bad)
    assert "train 'label': unknown label value 'neutral'" in message
    assert "['entailment', 'not_entailment']" in message


def test_label_index_out_of_range(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, SPEC, GOOD + "1\tB.\tC.\t2\n")
    assert "unknown label value '2'" in message and "indices 0..1" in message


def test_empty_split(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, SPEC, "index\tsentence1\tsentence2\tlabel\n")
    assert "task 'rte', train: split is empty" in message and "train.tsv" in message


def test_split_empty_after_skipping_malformed_rows(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, SPEC, GOOD.splitlines()[0] + "\nonly\tthree\tf\n")
    assert "train: split is empty" in message and "1 row skipped" in message


def test_rename_of_absent_column(tmp_path: Path, write_config) -> None:
    spec = {**SPEC, "train": {"path": "train.tsv", "rename": {"text_a": "sentence1"}}}
    message = _load_error(tmp_path, write_config, spec)
    assert "train.rename: column 'text_a' not found" in message and "sentence1" in message


def test_an_encoding_whose_codec_refuses_the_file_is_one_line(tmp_path: Path, write_config) -> None:
    spec = {**SPEC, "train": {"path": "train.tsv", "encoding": "utf-16"}}  # no UTF-16 BOM
    message = _load_error(tmp_path, write_config, spec)
    assert "train.encoding: " in message and "is not utf-16" in message


def test_a_symlink_loop_is_one_line(tmp_path: Path, write_config) -> None:
    (tmp_path / "loop.tsv").symlink_to(tmp_path / "loop.tsv")
    spec = {**SPEC, "train": {"path": str(tmp_path / "loop.tsv")}}  # absolute: read, not resolved
    message = _load_error(tmp_path, write_config, spec)
    assert "train.path: cannot read" in message and "symbolic links" in message


def test_a_byte_order_mark_is_never_part_of_a_column_name(tmp_path: Path, write_config) -> None:
    (tmp_path / "train.tsv").write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    (tmp_path / "dev.tsv").write_text(GOOD)
    spec = {**SPEC, "train": {"path": "train.tsv", "encoding": "utf-8"}}  # said, not the default
    task = load_task(load_tasks_config(write_config({"rte": spec}))["rte"])
    assert len(task.train) == 2


def test_wrong_encoding(tmp_path: Path, write_config) -> None:
    spec = {**SPEC, "train": {"path": "train.tsv", "encoding": "ascii"}}
    message = _load_error(tmp_path, write_config, spec, GOOD.replace("A cat", "Ä cat").encode())
    assert "train.encoding" in message and "ascii" in message


def test_a_file_in_another_encoding_names_the_byte_its_line_and_encodings_to_try(
    tmp_path: Path, write_config
) -> None:
    """The default is UTF-8 (read as utf-8-sig, which the user never wrote); the position is the
    file's own line, wherever the reader's chunk began."""
    latin = GOOD + "".join(f"{i}\tRow {i}.\tSame.\tentailment\n" for i in range(2, 3000))
    latin += "3000\tCaf\u00e9.\tA place.\tentailment\n"
    message = _load_error(tmp_path, write_config, SPEC, latin.encode("latin-1"))
    path = tmp_path / "train.tsv"
    assert message.endswith(
        f"train.encoding: {path} is not UTF-8: byte 0xe9 on line 3002 (invalid continuation "
        "byte); set train.encoding to the file's, e.g. latin-1, cp1252 or utf-16"
    )
    message = _load_error(tmp_path, write_config, SPEC, GOOD.encode("utf-16"))
    assert (
        f"train.encoding: {path} is not UTF-8: it starts with a UTF-16 byte-order mark" in message
    )


def test_json_lines_named_json_says_set_format_jsonl(tmp_path: Path, write_config) -> None:
    """pandas' to_json(orient='records', lines=True) saved as .json was `is not valid JSON
    (Extra data: line 2 column 1 (char 89))`, with no fix named."""
    import json

    records = [{"sentence1": "A.", "sentence2": "B.", "label": "entailment"}] * 3
    (tmp_path / "t.json").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    message = _load_error(tmp_path, write_config, {**SPEC, "train": "t.json"})
    assert message.endswith(
        f"train.format: {tmp_path / 't.json'} holds JSON lines (one record a line), not one JSON "
        "document; set train.format: jsonl"
    )


@pytest.mark.parametrize("indent", [None, 2])
def test_one_json_document_named_jsonl_says_set_format_json(
    indent: int | None, tmp_path: Path, write_config
) -> None:
    """A list of records saved as .jsonl, or records over several lines: every line was
    'malformed' and the error said the columns there were '(none)'."""
    import json

    records = [{"sentence1": "A.", "sentence2": "B.", "label": "entailment"}] * 3
    (tmp_path / "t.jsonl").write_text(json.dumps(records, indent=indent))
    message = _load_error(tmp_path, write_config, {**SPEC, "train": "t.jsonl"})
    assert message.endswith(
        f"train.format: {tmp_path / 't.jsonl'} is one JSON document, not JSON lines (one record "
        "a line); set train.format: json"
    )
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r, indent=indent) for r in records))
    if indent:  # one record after another, each over several lines
        message = _load_error(tmp_path, write_config, {**SPEC, "train": "t.jsonl"})
        assert message.endswith(
            f"train.format: {tmp_path / 't.jsonl'} holds records written over several lines, not "
            "one record a line; write each record on one line (json.dumps without indent)"
        )


def test_pandas_column_oriented_json_says_save_records(tmp_path: Path, write_config) -> None:
    """pandas' default `to_json` writes {column: {row: value}}: read as an object of records, it
    gave 'records' named after the columns and a column per row number."""
    import json

    columns = {
        "sentence1": {"0": "A.", "1": "C."},
        "sentence2": {"0": "B.", "1": "D."},
        "label": {"0": "entailment", "1": "not_entailment"},
    }
    (tmp_path / "t.json").write_text(json.dumps(columns))
    message = _load_error(tmp_path, write_config, {**SPEC, "train": "t.json"})
    assert message.endswith(
        f"train.path: {tmp_path / 't.json'} holds columns of values ({{column: {{row: value}}}}), "
        "not records; save it with one record per row, e.g. pandas' to_json(orient='records')"
    )
    records = {"0": {"sentence1": "A.", "sentence2": "B.", "label": "entailment"}}
    records["1"] = {"sentence1": "C.", "sentence2": "D.", "label": "not_entailment"}
    (tmp_path / "t.json").write_text(json.dumps(records))  # an object of records still reads
    (tmp_path / "dev.tsv").write_text(GOOD)
    task = load_task(load_tasks_config(write_config({"rte": {**SPEC, "train": "t.json"}}))["rte"])
    assert task.train["text_a"] == ["A.", "C."]


def test_invalid_json(tmp_path: Path, write_config) -> None:
    (tmp_path / "t.json").write_text('{"0": {"a": 1}')
    message = _load_error(tmp_path, write_config, {**SPEC, "train": "t.json"})
    assert "train.path" in message and "not valid JSON" in message


def test_hub_split_missing_lists_splits(tmp_path: Path, write_config) -> None:
    import datasets

    table = datasets.Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "label": [0]})
    datasets.DatasetDict({"train": table}).save_to_disk(tmp_path / "saved")
    spec = {**SPEC, "hub": "saved", "train": "train", "dev": "validation"}
    message = _load_error(tmp_path, write_config, spec)
    assert "dev.split: split 'validation' not in" in message and "splits there: train" in message


def _labelled(tmp_path: Path, write_config, values: list, names: list, **spec) -> TaskSpec:
    """A JSON-lines task whose rows carry `values` as labels, with `names` as label_names."""
    lines = [json.dumps({"text": f"row {i}", "label": v}) for i, v in enumerate(values)]
    (tmp_path / "all.jsonl").write_text("\n".join(lines) + "\n")
    tasks = {"t": {"train": "all.jsonl", "dev": "all.jsonl", "text_fields": ["text"]}}
    tasks["t"] |= {"label_names": names, **spec}
    return load_tasks_config(write_config(tasks))["t"]


def test_a_column_read_half_by_name_half_by_index_is_refused(tmp_path: Path, write_config) -> None:
    """label_names [1, 2, 3] over a file of 0, 1, 2: by name 1 is the first label, by index
    the second; the old reading mapped 0 and 1 both to the first label and never used '3'."""
    spec = _labelled(tmp_path, write_config, [0, 1, 2, 0, 1, 2], [1, 2, 3])
    with pytest.raises(TaskError) as info:
        load_task(spec)
    message = str(info.value)
    assert "mixes label names (1, 2) with indices (0)" in message
    assert "1 is label 0 by name, label 1 by index" in message
    assert message.endswith("e.g. ['0', '1', '2']")
    # read one way, each is fine: all names, all indices, or names and indices that agree
    by_name = load_task(_labelled(tmp_path, write_config, [1, 2, 3, 1], [1, 2, 3]))
    assert by_name.train["label"] == [0, 1, 2, 0]
    by_index = load_task(_labelled(tmp_path, write_config, [0, 2, 1, 2], ["a", "b", "c"]))
    assert by_index.train["label"] == [0, 2, 1, 2]
    agreeing = load_task(_labelled(tmp_path, write_config, ["0", 1, 1], ["0", "1"]))
    assert agreeing.train["label"] == [0, 1, 1]


@pytest.mark.parametrize("names", [["false", "true"], ["False", "True"]])
def test_json_booleans_are_read_as_the_names_true_and_false(
    tmp_path: Path, write_config, names: list[str]
) -> None:
    task = load_task(_labelled(tmp_path, write_config, [True, False, False, True], names))
    assert task.train["label"] == [1, 0, 0, 1]


def test_label_names_yaml_reads_as_booleans_are_refused_with_a_quote_fix(
    tmp_path: Path, write_config
) -> None:
    (tmp_path / "t.tsv").write_text("text\tlabel\na\tno\nb\tyes\n")
    tasks = {"t": {"train": "t.tsv", "dev": "t.tsv", "text_fields": ["text"]}}
    tasks["t"]["label_names"] = [False, True]  # what YAML makes of an unquoted [no, yes]
    with pytest.raises(TaskError) as info:
        load_tasks_config(write_config(tasks))
    assert "label_names: YAML read [False, True] as booleans" in str(info.value)
    assert 'quote the names, e.g. ["no", "yes"]' in str(info.value)


def test_two_columns_renamed_to_one_name_are_refused(tmp_path: Path, write_config) -> None:
    rename = {"sentence1": "text", "sentence2": "text"}
    spec = {**SPEC, "train": {"path": "train.tsv", "rename": rename}}
    with pytest.raises(TaskError, match="train.rename: more than one column renamed to 'text'"):
        load_tasks_config(write_config({"rte": spec}))


@pytest.mark.parametrize("codec", ["rot13", "base64", "hex"])
def test_a_codec_that_is_not_a_text_encoding_is_refused(
    tmp_path: Path, write_config, codec: str
) -> None:
    spec = {**SPEC, "train": {"path": "train.tsv", "encoding": codec}}
    with pytest.raises(TaskError, match=f"train.encoding: '{codec}' is not a text encoding"):
        load_tasks_config(write_config({"rte": spec}))


BIG = "1" + "0" * 5000  # past Python's 4,300-digit limit for reading an integer
DEEP = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit


def _records(tmp_path: Path, fmt: str, unused: str) -> str:
    """Ten RTE records as JSON lines or one JSON list; record 5 holds `unused` in a field the
    task does not read."""
    labels = SPEC["label_names"]
    records = [
        json.dumps({"sentence1": f"A cat {i}.", "sentence2": "An animal.", "label": labels[i % 2]})
        for i in range(10)
    ]
    records[4] = records[4][:-1] + f', "unused": {unused}}}'
    text = "\n".join(records) + "\n" if fmt == "jsonl" else "[" + ",\n".join(records) + "]"
    (tmp_path / f"t.{fmt}").write_text(text)
    return f"t.{fmt}"


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_an_integer_of_over_4300_digits_makes_its_record_malformed(
    tmp_path: Path, write_config, fmt: str
) -> None:
    spec = {**SPEC, "train": _records(tmp_path, fmt, BIG)}
    (tmp_path / "dev.tsv").write_text(GOOD)
    task = load_task(load_tasks_config(write_config({"rte": spec}))["rte"])
    assert task.skipped_by_split == {"train": 1, "dev": 0} and len(task.train) == 9
    message = _load_error(tmp_path, write_config, {**spec, "max_skipped_fraction": 0})
    assert f"1 of 10 records of {tmp_path / spec['train']} (10%) were skipped" in message
    assert f"(malformed at {'line' if fmt == 'jsonl' else 'record'} 5)" in message


def test_json_nested_past_the_recursion_limit_is_malformed(tmp_path: Path, write_config) -> None:
    spec = {**SPEC, "train": _records(tmp_path, "jsonl", DEEP), "max_skipped_fraction": 0}
    assert "(malformed at line 5)" in _load_error(tmp_path, write_config, spec)
    spec["train"] = _records(tmp_path, "json", DEEP)
    message = _load_error(tmp_path, write_config, spec)
    assert "train.path: " in message and "is not valid JSON (nested deeper than Python" in message


def test_a_label_of_over_4300_digits_is_an_unknown_label(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, SPEC, GOOD + f"2\tA.\tB.\t{BIG}\n")
    assert "train 'label': unknown label value '10000" in message and "(record 3 of" in message


LABELS = ("entailment", "not_entailment")


def test_a_quote_left_open_in_a_csv_counts_every_line_it_swallows(
    tmp_path: Path, write_config
) -> None:
    """The record opening the quote took every line to the end of the file with it; that was
    one skipped row of 20 (under the 10% limit), so 10 rows were lost without a refusal."""
    lines = ["index,sentence1,sentence2,label"]
    lines += [f"{i},A cat {i}.,An animal.,{LABELS[i % 2]}" for i in range(20)]
    lines[11] = '10,"A cat left open.,An animal.,entailment'  # line 12 of the file
    spec = {**SPEC, "train": "train.csv"}
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "dev.tsv").write_text(GOOD)
    with pytest.raises(TaskError) as info:
        load_task(load_tasks_config(write_config({"rte": spec}))["rte"])
    assert "10 of 20 records of" in str(info.value)
    assert "(malformed at lines 12" in str(info.value) and "quotes" in str(info.value)
    lines[11] = '10,"A cat closed later.,An animal.,entailment'
    lines[13] = '12,A cat.",An animal.'  # closes it: lines 12-14 are one bad record of 3 lines
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n")
    spec["max_skipped_fraction"] = 0.2
    loaded = load_task(load_tasks_config(write_config({"rte": spec}))["rte"])
    assert (len(loaded.train), loaded.skipped_by_split["train"]) == (17, 3)


def test_dev_reading_the_train_records_is_said(tmp_path: Path, write_config, caplog) -> None:
    """`dev: train.tsv` loaded silently: every dev metric (best epoch, the adapter registered)
    was a training score. Said once, not refused: a smoke test may read one file twice."""
    spec = _labelled(tmp_path, write_config, ["yes", "no"] * 4, ["no", "yes"])
    with caplog.at_level("WARNING", logger="adapterfleet.data.loading"):
        load_task(spec)
    said = [r.getMessage() for r in caplog.records if "same records" in r.getMessage()]
    assert said == [
        f"task 't': dev reads the same records as train ({tmp_path / 'all.jsonl'}): its dev "
        "metric measures training data; give dev its own file or split, or disjoint rows: slices"
    ]
    caplog.clear()
    (tmp_path / "train.tsv").write_text(GOOD)
    (tmp_path / "dev.tsv").write_text(GOOD)
    with caplog.at_level("WARNING", logger="adapterfleet.data.loading"):
        load_task(load_tasks_config(write_config({"rte": SPEC}))["rte"])
    assert not [r for r in caplog.records if "same records" in r.getMessage()]


def test_an_empty_file_is_named_empty(tmp_path: Path, write_config) -> None:
    """A 0-byte file said `column 'sentence1' (text_fields): not found ...; columns there:
    (none)`, as if a column name were wrong."""
    message = _load_error(tmp_path, write_config, SPEC, b"")
    assert message == (
        f"task 'rte', train.path: {tmp_path / 'train.tsv'} is empty (0 bytes); give it its rows"
    )


@pytest.mark.parametrize("suffix", ["tsv", "csv", "jsonl", "json"])
@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\n\n\n", "only blank lines"),
        (b" \t\r\n\n", "only blank lines"),
        (b"\xef\xbb\xbf", "only a byte-order mark"),
        (b"\xef\xbb\xbf\n\n", "only a byte-order mark and blank lines"),
    ],
)
def test_a_file_of_blank_lines_or_a_byte_order_mark_is_named_empty(
    tmp_path: Path, write_config, suffix: str, content: bytes, said: str
) -> None:
    """Such a file said `column 'sentence1' (text_fields): not found ...; columns there:
    (none)` (a .json one: `is not valid JSON`), where a 0-byte one says it is empty."""
    (tmp_path / f"train.{suffix}").write_bytes(content)
    (tmp_path / "dev.tsv").write_text(GOOD)
    spec = load_tasks_config(write_config({"rte": {**SPEC, "train": f"train.{suffix}"}}))["rte"]
    with pytest.raises(TaskError) as info:
        load_task(spec)
    path = tmp_path / f"train.{suffix}"
    assert str(info.value) == f"task 'rte', train.path: {path} is empty ({said}); give it its rows"


def test_a_file_of_another_separator_says_so(tmp_path: Path, write_config) -> None:
    """A semicolon (or comma) file read as TSV has one column; the error listed it as the
    columns there, without a word on the separator."""
    semicolons = GOOD.replace("\t", ";")
    message = _load_error(tmp_path, write_config, SPEC, semicolons)
    assert message.endswith(
        "columns there: index;sentence1;sentence2;label; fix text_fields or train.rename (the "
        "header is one column: the file is separated by semicolons; set train.format: tsv for "
        "tabs or csv for commas, or save it with one of those)"
    )
    commas = _load_error(tmp_path, write_config, SPEC, GOOD.replace("\t", ","))
    assert "the file is separated by commas; set train.format: tsv" in commas
    assert "separated by" not in _load_error(
        tmp_path, write_config, {**SPEC, "text_fields": ["s1"]}
    )


def test_a_label_no_training_row_has_is_said(tmp_path: Path, write_config, caplog) -> None:
    """`label_names: [a, b, c]` with `c` in dev only trained a head that can never give `c`,
    without a word."""
    (tmp_path / "train.tsv").write_text(GOOD)
    (tmp_path / "dev.tsv").write_text(GOOD + "2\tA.\tB.\tneutral\n")
    spec = {**SPEC, "label_names": ["entailment", "neutral", "not_entailment"]}
    with caplog.at_level("WARNING", logger="adapterfleet.data.loading"):
        load_task(load_tasks_config(write_config({"rte": spec}))["rte"])
    said = [r.getMessage() for r in caplog.records if "no training row" in r.getMessage()]
    assert said == [
        "task 'rte': no training row has the label(s) 'neutral' (1 dev row does); the head never "
        "learns to give them: add training rows for them, or drop them from label_names and "
        "remove those dev rows"
    ]
    # dropped from label_names, the dev row was refused with "fix label_names" alone: the two
    # messages sent a user round in a loop, neither naming the dev row as what to remove
    spec = {**SPEC, "label_names": ["entailment", "not_entailment"]}
    config = load_tasks_config(write_config({"rte": spec}))["rte"]
    with pytest.raises(TaskError) as refused:
        load_task(config)
    assert str(refused.value).endswith(
        "unknown label value 'neutral' (record 3 of "
        f"{tmp_path / 'dev.tsv'}); label_names are ['entailment', 'not_entailment'] (or indices "
        "0..1); fix label_names, or remove the dev rows with it (no training row can teach it)"
    )
