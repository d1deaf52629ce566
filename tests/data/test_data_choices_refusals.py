"""Bad multiple-choice input is one line naming the field and the fix, at config validation or
when the data is first read (both before any trial): a choice column that does not exist,
choices of different counts, an answer that is not among the labels, a layout that cannot be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_data_choices import (
    COSMOS,
    COSMOS_ROWS,
    CSQA,
    CSQA_ROWS,
    HELLASWAG,
    HELLASWAG_ROWS,
    SIQA,
    SIQA_ROWS,
    WINOGRANDE,
    WINOGRANDE_ROWS,
    mc_task,
)

from adapterfleet.data import TaskError, TaskSpec, load_task, load_tasks_config


def refused(tmp_path: Path, write_config, rows: list, declaration: dict) -> str:
    with pytest.raises(TaskError) as error:
        mc_task(tmp_path, write_config, "mc", rows, declaration)
    message = str(error.value)
    assert "\n" not in message and message.startswith("task 'mc', ")
    return message


def test_a_list_column_that_does_not_exist(tmp_path: Path, write_config) -> None:
    declaration = {**HELLASWAG, "choices": {"context": ["ctx"], "list": "ending"}}
    message = refused(tmp_path, write_config, HELLASWAG_ROWS, declaration)
    assert "train column 'ending' (choices.list): not found in" in message
    assert "columns there: ind, activity_label, ctx, endings, label" in message


def test_a_nested_key_that_does_not_exist_names_the_keys_there(
    tmp_path: Path, write_config
) -> None:
    declaration = {**CSQA, "choices": {**CSQA["choices"], "list": "choices.texts"}}
    message = refused(tmp_path, write_config, CSQA_ROWS, declaration)
    assert "column 'choices.texts' (choices.list)" in message
    assert "'choices' in" in message and "has no 'texts' (it holds label, text)" in message


def test_one_column_per_choice_that_does_not_exist(tmp_path: Path, write_config) -> None:
    layout = {"context": ["context", "question"], "fields": ["answerA", "answerB", "answerD"]}
    message = refused(tmp_path, write_config, SIQA_ROWS, {**SIQA, "choices": layout})
    assert "train column 'answerD' (choices.fields): not found" in message
    assert "fix choices.fields or train.rename" in message


def test_choices_of_different_counts_are_refused_with_the_reason(
    tmp_path: Path, write_config
) -> None:
    short = {**HELLASWAG_ROWS[1], "endings": HELLASWAG_ROWS[1]["endings"][:3]}
    message = refused(tmp_path, write_config, [HELLASWAG_ROWS[0], short], HELLASWAG)
    assert "train choices: 3 choices, the task has 4" in message and "(record 2 of" in message
    assert "rows with another number of choices are refused, not padded" in message


def test_an_answer_key_not_among_the_rows_labels(tmp_path: Path, write_config) -> None:
    rows = [CSQA_ROWS[0], {**CSQA_ROWS[1], "answerKey": "F"}]
    message = refused(tmp_path, write_config, rows, CSQA)
    assert "train 'answerKey'" not in message  # the key is named plainly
    assert "train answerKey: answer 'F' is not among the row's labels" in message
    assert "(record 2 of" in message


def test_an_answer_that_is_nothing_the_task_knows(tmp_path: Path, write_config) -> None:
    rows = [{**COSMOS_ROWS[0], "label": 4}]
    message = refused(tmp_path, write_config, rows, COSMOS)
    assert "answer 4 is not a label name" in message and "an index 0..3" in message
    assert "labels counting from 1 need label_names" in message


def test_winogrande_answers_count_from_one(tmp_path: Path, write_config) -> None:
    """Without label_names [1, 2], Winogrande's answer "2" is no index of two choices."""
    declaration = {k: v for k, v in WINOGRANDE.items() if k != "label_names"}
    message = refused(tmp_path, write_config, WINOGRANDE_ROWS, declaration)
    assert "answer '2'" in message and "(record 2 of" in message


def test_a_sentence_without_its_blank(tmp_path: Path, write_config) -> None:
    rows = [{**WINOGRANDE_ROWS[0], "sentence": "No blank here."}]
    message = refused(tmp_path, write_config, rows, WINOGRANDE)
    assert "train choices.fill: the sentence holds 0 blanks '_', not one" in message


def test_a_list_that_is_not_a_list(tmp_path: Path, write_config) -> None:
    rows = [{**HELLASWAG_ROWS[0], "endings": "one ending"}]
    message = refused(tmp_path, write_config, rows, HELLASWAG)
    assert message.endswith(
        "choices.list: holds text, not a list (record 1 of "
        f'{tmp_path / "mc.jsonl"}); in a CSV/TSV cell write the list as JSON text (["a", "b"]); '
        "for one column per choice use choices.fields"
    )


def test_a_list_cell_in_pythons_form_is_read_as_a_list(tmp_path: Path, write_config) -> None:
    """pandas writes a list column to CSV as Python's repr (single quotes), not JSON; a cell of
    literals is read as the list (nothing in it runs), anything else stays text."""
    rows = [{**row, "endings": repr(row["endings"])} for row in HELLASWAG_ROWS]
    rows[0]["endings"] = "['waits for it to bake.', \"eats the oven's door.\", 'swims', 'sings']"
    task = mc_task(tmp_path, write_config, "mc", rows, HELLASWAG)
    assert task.train["choices"][0] == [
        "waits for it to bake.",
        "eats the oven's door.",
        "swims",
        "sings",
    ]
    rows[0]["endings"] = "[print('hi'), 'b', 'c', 'd']"
    assert "choices.list: holds text, not a list" in refused(
        tmp_path, write_config, rows, HELLASWAG
    )


def test_an_answer_that_is_the_text_of_two_choices_says_so(tmp_path: Path, write_config) -> None:
    row = {**COSMOS_ROWS[0], "answer1": "Because of the rain.", "label": "Because of the rain."}
    message = refused(tmp_path, write_config, [row], COSMOS)
    assert (
        "train label: answer 'Because of the rain.' is the text of choices [2, 3] alike, so"
        in message
    )
    assert message.endswith("give the answer as an index or a label")


@pytest.mark.parametrize("at", [0, 1])
def test_a_mapping_of_choices_written_as_text_is_refused_with_its_record(
    tmp_path: Path, write_config, at: int
) -> None:
    """First (it crashed on a substring test) or later (it was skipped as a missing value)."""
    rows = [dict(row) for row in CSQA_ROWS]
    rows[at]["choices"] = "see text"
    message = refused(tmp_path, write_config, rows, CSQA)
    assert (
        "train column 'choices.text' (choices.list): 'choices' holds text ('see text'), not a "
        f"mapping with 'text' (record {at + 1} of " in message
    )
    assert "a TSV/CSV cell is always text, so nested choices need a JSONL, JSON or" in message


def test_a_tsv_cell_holding_the_choices_as_json_is_refused(tmp_path: Path, write_config) -> None:
    cells = [(r["id"], r["question"], json.dumps(r["choices"]), r["answerKey"]) for r in CSQA_ROWS]
    lines = ["id\tquestion\tchoices\tanswerKey", *("\t".join(cell) for cell in cells)]
    (tmp_path / "mc.tsv").write_text("\n".join(lines) + "\n")
    task = {"type": "multiple_choice", "train": "mc.tsv", "dev": "mc.tsv", **CSQA}
    with pytest.raises(TaskError) as error:
        load_task(load_tasks_config(write_config({"mc": task}))["mc"])
    message = str(error.value)
    assert "\n" not in message and "'choices' holds text ('{\"label\": [" in message
    assert (
        f"not a mapping with 'text' (record 1 of {tmp_path / 'mc.tsv'}); fix the record" in message
    )


def test_numbers_of_over_4300_digits_are_text_that_is_refused(tmp_path: Path, write_config) -> None:
    """`int` refuses such digits: no index, no JSON list (an answer, a list cell)."""
    digits = "1" + "0" * 5000
    answer = refused(tmp_path, write_config, [{**COSMOS_ROWS[0], "label": digits}], COSMOS)
    assert "answer '10000" in answer and "is not a label name" in answer
    rows = [{**HELLASWAG_ROWS[0], "endings": f"[{digits}]"}]
    assert "choices.list: holds text, not a list" in refused(
        tmp_path, write_config, rows, HELLASWAG
    )


def test_row_labels_of_another_length(tmp_path: Path, write_config) -> None:
    choices = {**CSQA_ROWS[0]["choices"], "label": ["A", "B", "C", "D"]}
    message = refused(tmp_path, write_config, [{**CSQA_ROWS[0], "choices": choices}], CSQA)
    assert "choices.labels: 4 labels for 5 choices" in message


def _config_error(declaration: dict[str, Any]) -> str:
    task = {"type": "multiple_choice", "train": "a.jsonl", "dev": "a.jsonl", **declaration}
    with pytest.raises(TaskError) as error:
        TaskSpec.from_mapping("mc", task, Path("/d"))
    return str(error.value)


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        ({"choices": {"context": ["q"], "list": "c"}}, "label_names: missing: with choices.list"),
        ({"choices": {"context": ["q"]}}, "choices: declare exactly one of list and fields"),
        ({"choices": {"context": ["q"], "list": "c", "fields": ["a", "b"]}}, "exactly one"),
        ({"choices": {"list": "c"}, "label_names": [0, 1]}, "choices.context: missing"),
        ({"choices": {"context": "q", "fields": ["a", "b"], "labels": "l"}}, "only with choices"),
        ({"choices": {"context": "q", "fields": ["a", "b"], "blank": "_"}}, "choices.blank"),
        ({"choices": {"context": "q", "fields": ["a"]}}, "choices.fields: needs at least 2"),
        ({"choices": {"context": "q", "field": ["a", "b"]}}, "choices.field: unknown key (did you"),
        ({"choices": {"context": "q", "fields": ["a", "b"]}, "question_field": "q"}, "given with"),
        ({"choices": {"context": "q", "fields": ["a", "b"]}, "label_names": [1]}, "2 or more"),
        ({"choices": {"context": "q", "fields": ["a", "b"]}, "label_names": [1, 2, 3]}, "one name"),
        ({"choices": ["q", "a"]}, "choices: expected a mapping, got list"),
    ],
)
def test_a_layout_that_cannot_be_is_refused_at_config_validation(
    declaration: dict[str, Any], expected: str
) -> None:
    message = _config_error(declaration)
    assert expected in message and message.startswith("task 'mc', ")


def test_choices_only_for_multiple_choice() -> None:
    task = {"train": "a.tsv", "dev": "a.tsv", "text_fields": ["t"], "label_names": [0, 1]}
    with pytest.raises(TaskError, match="choices: only for type multiple_choice"):
        TaskSpec.from_mapping("c", {**task, "choices": {"context": "q", "list": "l"}}, Path("/d"))


def test_a_prediction_input_needs_the_layouts_columns_not_the_answer(
    tmp_path: Path, write_config
) -> None:
    from test_data_choices import write_jsonl

    from adapterfleet.data.prediction_input import read_input

    spec = mc_task(tmp_path, write_config, "csqa", CSQA_ROWS, CSQA).spec
    unlabelled = [{k: v for k, v in row.items() if k != "answerKey"} for row in CSQA_ROWS]
    for row in unlabelled:
        row["choices"] = {"text": row["choices"]["text"]}  # the row's labels are not needed
    data = read_input(spec, write_jsonl(tmp_path / "in.jsonl", unlabelled))
    assert data.texts[1] == ("What do birds do?", "fly", "swim deep", "read", "drive", "cook")
    renamed = [{"query" if k == "question" else k: v for k, v in r.items()} for r in unlabelled]
    with pytest.raises(TaskError) as error:
        read_input(spec, write_jsonl(tmp_path / "bad.jsonl", renamed))
    assert "input column 'question' (choices.context): not found" in str(error.value)
    assert str(error.value).endswith(
        "give the file a column 'question' (a tsv/csv without a header line: --no-header and "
        "--columns)"
    )
    unlabelled[0]["choices"] = "see text"
    with pytest.raises(TaskError) as error:
        read_input(spec, write_jsonl(tmp_path / "text.jsonl", unlabelled))
    assert "input column 'choices.text' (choices.list): 'choices' holds text" in str(error.value)
    assert "(record 1 of" in str(error.value)


def test_a_row_whose_labels_name_a_choice_twice_is_refused(tmp_path: Path, write_config) -> None:
    """Labels [A, A, C, D, E] with answer A loaded, the answer silently the first choice."""
    rows = json.loads(json.dumps(CSQA_ROWS))
    rows[1]["choices"]["label"] = ["A", "A", "C", "D", "E"]
    message = refused(tmp_path, write_config, rows, CSQA)
    assert (
        "train choices.labels: the row's labels ['A', 'A', 'C', 'D', 'E'] name a choice " in message
    )
    assert "twice (record 2 of " in message and message.endswith("give each choice its own label")


def test_row_labels_that_are_not_the_label_names_are_refused_in_training(
    tmp_path: Path, write_config
) -> None:
    """Labels 1..5 where label_names are A..E trained (the answer resolved among the row's
    labels) into a model whose `predict` then refused the same rows: no prob_1 column."""
    rows = json.loads(json.dumps(CSQA_ROWS))
    rows[1]["choices"]["label"] = ["1", "2", "3", "4", "5"]
    rows[1]["answerKey"] = "2"
    message = refused(tmp_path, write_config, rows, CSQA)
    assert (
        "train choices.labels: the row's labels ['1', '2', '3', '4', '5'] are not the task's "
        "label_names ['A', 'B', 'C', 'D', 'E'] (record 2 of " in message
    )
    assert message.endswith("or list the labels the rows use in label_names"), message


def test_a_prediction_input_reads_each_rows_own_labels_and_refuses_as_training_does(
    tmp_path: Path, write_config
) -> None:
    """predict names a row's choices by its own labels (`PredictionInput.labels`), so it takes
    no row training would refuse for them (one named twice), none missing them where other rows
    have them, and none whose labels are not label_names (no prob_<label> column to write)."""
    from test_data_choices import write_jsonl

    from adapterfleet.data.prediction_input import read_input

    spec = mc_task(tmp_path, write_config, "csqa", CSQA_ROWS, CSQA).spec
    rows = json.loads(json.dumps(CSQA_ROWS))
    rows[1]["choices"]["label"] = ["E", "D", "C", "B", "A"]
    data = read_input(spec, write_jsonl(tmp_path / "in.jsonl", rows))
    assert data.labels == [("A", "B", "C", "D", "E"), ("E", "D", "C", "B", "A")]
    cases = {
        "twice": (["A", "A", "C", "D", "E"], "input choices.labels: the row's labels ['A', 'A', "
                  "'C', 'D', 'E'] name a choice twice (record 2 of ", "give each choice its own "
                  "label"),
        "others": (["1", "2", "3", "4", "5"], "input choices.labels: the row's labels ['1', '2', "
                   "'3', '4', '5'] are not the task's label_names ['A', 'B', 'C', 'D', 'E'] "
                   "(record 2 of ", "give each row the labels label_names lists (in any order), or "
                   "list the labels the rows use in label_names"),
        "missing": (None, "input row 2: no value for 'choices.label' (choices.labels) in ",
                    "which other rows have; fill it in or remove the row"),
    }  # fmt: skip
    for name, (labels, start, end) in cases.items():
        rows[1]["choices"] = {"text": rows[1]["choices"]["text"]}
        if labels is not None:
            rows[1]["choices"]["label"] = labels
        with pytest.raises(TaskError) as error:
            read_input(spec, write_jsonl(tmp_path / f"{name}.jsonl", rows))
        message = str(error.value)
        assert message.startswith(f"task 'csqa', {start}") and message.endswith(end), message
