"""Multiple choice in the shapes data comes in (data/choices.py): each shape read from a tiny
file of its real layout, resolved to (context, choices, answer) and tokenised to one sequence per
choice; length-grouped batches over the flattened choices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapterfleet.data import load_task, load_tasks_config, make_dataloader, tokenize_task

# (shape, records as the data set ships them, the task's declaration, expected rows)
CSQA_ROWS = [
    {
        "id": "a1",
        "question": "Where do you keep milk cold?",
        "question_concept": "milk",
        "choices": {
            "label": ["A", "B", "C", "D", "E"],
            "text": ["oven", "fridge", "garden", "roof", "car"],
        },
        "answerKey": "B",
    },
    {
        "id": "a2",
        "question": "What do birds do?",
        "question_concept": "birds",
        "choices": {
            "label": ["A", "B", "C", "D", "E"],
            "text": ["fly", "swim deep", "read", "drive", "cook"],
        },
        "answerKey": "A",
    },
]
CSQA = {
    "choices": {"context": ["question"], "list": "choices.text", "labels": "choices.label"},
    "label_field": "answerKey",
    "label_names": ["A", "B", "C", "D", "E"],
}
HELLASWAG_ROWS = [
    {
        "ind": 4,
        "activity_label": "Baking",
        "ctx": "A woman puts a tray in the oven. She",
        "endings": ["waits for it to bake.", "eats the oven.", "swims away.", "sings a tree."],
        "label": "0",
    },
    {
        "ind": 9,
        "activity_label": "Running",
        "ctx": "A man ties his shoes. Then he",
        "endings": ["paints the road.", "starts to run.", "melts.", "becomes a shoe."],
        "label": "1",
    },
]
HELLASWAG = {
    "choices": {"context": ["ctx"], "list": "endings"},
    "label_field": "label",
    "label_names": [0, 1, 2, 3],
}
SIQA_ROWS = [
    {
        "context": "Tracy gave Bailey a gift.",
        "question": "How would Bailey feel?",
        "answerA": "upset",
        "answerB": "thankful",
        "answerC": "tired",
        "label": "2",
    },
    {
        "context": "Jan ran to the shop.",
        "question": "Why did Jan run?",
        "answerA": "to buy bread before closing",
        "answerB": "to sleep",
        "answerC": "to swim",
        "label": "1",
    },
]
SIQA = {
    "choices": {"context": ["context", "question"], "fields": ["answerA", "answerB", "answerC"]},
    "label_field": "label",
    "label_names": [1, 2, 3],  # SocialIQA's labels count from 1
}
COSMOS_ROWS = [
    {
        "id": "c1",
        "context": "It rained all day, so we stayed in.",
        "question": "Why did they stay inside?",
        "answer0": "It was sunny.",
        "answer1": "They were bored.",
        "answer2": "Because of the rain.",
        "answer3": "None of the above choices.",
        "label": 2,
    },
    {
        "id": "c2",
        "context": "The cake burned in the oven.",
        "question": "What went wrong?",
        "answer0": "It baked too long.",
        "answer1": "It was frozen.",
        "answer2": "It was eaten.",
        "answer3": "None of the above choices.",
        "label": 0,
    },
]
COSMOS = {
    "choices": {
        "context": ["context", "question"],
        "fields": ["answer0", "answer1", "answer2", "answer3"],
    },
    "label_field": "label",
}
WINOGRANDE_ROWS = [
    {
        "sentence": "The trophy does not fit in the suitcase because _ is too big.",
        "option1": "the trophy",
        "option2": "the suitcase",
        "answer": "1",
    },
    {
        "sentence": "The trophy does not fit in the suitcase because _ is too small.",
        "option1": "the trophy",
        "option2": "the suitcase",
        "answer": "2",
    },
]
WINOGRANDE = {
    "choices": {"fill": "sentence", "fields": ["option1", "option2"]},
    "label_field": "answer",
    "label_names": [1, 2],
}

SHAPES: dict[str, tuple[list[dict[str, Any]], dict[str, Any], list[tuple[str, list, int]]]] = {
    "csqa": (
        CSQA_ROWS,
        CSQA,
        [
            ("Where do you keep milk cold?", ["oven", "fridge", "garden", "roof", "car"], 1),
            ("What do birds do?", ["fly", "swim deep", "read", "drive", "cook"], 0),
        ],
    ),
    "hellaswag": (
        HELLASWAG_ROWS,
        HELLASWAG,
        [(r["ctx"], r["endings"], i) for i, r in enumerate(HELLASWAG_ROWS)],
    ),
    "siqa": (
        SIQA_ROWS,
        SIQA,
        [
            (
                "Tracy gave Bailey a gift. How would Bailey feel?",
                ["upset", "thankful", "tired"],
                1,
            ),
            (
                "Jan ran to the shop. Why did Jan run?",
                ["to buy bread before closing", "to sleep", "to swim"],
                0,
            ),
        ],
    ),
    "cosmosqa": (
        COSMOS_ROWS,
        COSMOS,
        [
            (
                f"{r['context']} {r['question']}",
                [r[f"answer{i}"] for i in range(4)],
                r["label"],
            )
            for r in COSMOS_ROWS
        ],
    ),
    "winogrande": (
        WINOGRANDE_ROWS,
        WINOGRANDE,
        [
            (
                "The trophy does not fit in the suitcase because",
                ["the trophy is too big.", "the suitcase is too big."],
                0,
            ),
            (
                "The trophy does not fit in the suitcase because",
                ["the trophy is too small.", "the suitcase is too small."],
                1,
            ),
        ],
    ),
}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def mc_task(tmp_path: Path, write_config, name: str, rows: list, declaration: dict) -> Any:
    write_jsonl(tmp_path / f"{name}.jsonl", rows)
    spec = {"type": "multiple_choice", "train": f"{name}.jsonl", "dev": f"{name}.jsonl"}
    return load_task(load_tasks_config(write_config({name: {**spec, **declaration}}))[name])


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_reads_to_context_choices_and_answer(
    shape: str, tmp_path: Path, write_config
) -> None:
    rows, declaration, expected = SHAPES[shape]
    task = mc_task(tmp_path, write_config, shape, rows, declaration)
    assert task.is_multiple_choice and task.num_labels == len(expected[0][1])
    got = list(zip(task.train["question"], task.train["choices"], task.train["label"], strict=True))
    assert got == [(q, list(c), y) for q, c, y in expected]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_tokenises_one_pair_per_choice(
    shape: str, tmp_path: Path, write_config, tokenizer
) -> None:
    rows, declaration, expected = SHAPES[shape]
    task = mc_task(tmp_path, write_config, shape, rows, declaration)
    out = tokenize_task(task, tokenizer, 48, tmp_path / "tokens")
    for index, (context, choices, label) in enumerate(expected):
        assert out.train.input_ids[index] == [
            tokenizer(context, choice, truncation="longest_first", max_length=48)["input_ids"]
            for choice in choices
        ]
        assert out.train.labels[index] == label
        assert out.train.lengths[index] == max(len(s) for s in out.train.input_ids[index])


def test_length_grouped_batches_pad_the_flattened_choices(
    tmp_path: Path, write_config, tokenizer
) -> None:
    rows = [
        {"ctx": "word " * (1 + i % 13), "endings": [f"end {i}", "x " * (1 + i % 7), "y", "z z"]}
        | {"label": i % 4}
        for i in range(40)
    ]
    task = mc_task(tmp_path, write_config, "hs", rows, HELLASWAG)
    split = tokenize_task(task, tokenizer, 64, tmp_path / "tokens").train
    loader = make_dataloader(split, 8, shuffle=True, seed=0, pad_token_id=0)
    seen = []
    for batch in loader:
        b, c, t = batch["input_ids"].shape
        assert c == 4 and batch["attention_mask"].shape == (b, c, t)
        assert batch["attention_mask"].sum(-1).max() == t  # padded to the batch's longest choice
        seen += batch["labels"].tolist()
    assert sorted(seen) == sorted(i % 4 for i in range(40))
    lengths = [split.lengths[i] for i in loader.batch_sampler.batches()[0]]
    assert lengths == sorted(lengths, reverse=True)  # grouped by the longest choice of a row


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("B", 1), ("b", 1), (2, 2), ("2", 2), ("hot", 1), ("c1", 1), (" wet ", 2)],
)
def test_the_answer_may_be_a_name_an_index_a_letter_or_the_text(
    answer: Any, expected: int, tmp_path: Path, write_config
) -> None:
    rows = [{"q": "Fire is", "c0": "cold", "c1": "hot", "c2": "wet", "y": answer}]
    declaration = {"question_field": "q", "choice_fields": ["c0", "c1", "c2"], "label_field": "y"}
    task = mc_task(tmp_path, write_config, "flat", rows, declaration)
    assert task.train["label"] == [expected]


def test_a_list_written_as_json_text_in_a_csv_cell(tmp_path: Path, write_config) -> None:
    lines = ["ctx,endings,label", '"He opens the door and","[""walks in."", ""flies.""]",0']
    (tmp_path / "hs.csv").write_text("\n".join(lines) + "\n")
    spec = {"type": "multiple_choice", "train": "hs.csv", "dev": "hs.csv"}
    spec |= {"choices": {"context": "ctx", "list": "endings"}, "label_names": ["0", "1"]}
    task = load_task(load_tasks_config(write_config({"hs": spec}))["hs"])
    assert task.train["choices"] == [["walks in.", "flies."]]


def test_a_row_with_a_missing_choice_is_skipped_and_counted(tmp_path: Path, write_config) -> None:
    rows = [*COSMOS_ROWS, {**COSMOS_ROWS[0], "answer3": None}]
    lenient = {**COSMOS, "max_skipped_fraction": 0.5}  # 1 of 3 is more than the default 0.1
    task = mc_task(tmp_path, write_config, "cosmos", rows, lenient)
    assert len(task.train) == 2 and task.skipped_by_split == {"train": 1, "dev": 1}


@pytest.mark.parametrize("empty", ["", "   "])
def test_an_empty_choice_cell_of_a_csv_skips_its_row_as_json_null_does(
    tmp_path: Path, write_config, empty: str
) -> None:
    """A CSV leaves a missing choice as an empty cell, where JSON holds null: the row was
    trained on with the choice "" (and `predict` scored it), the same row in JSON skipped."""
    lines = [
        "q,a,b,c,y",
        "Fire is,cold,hot,wet,b",
        f"Ice is,cold,{empty},wet,a",
        "Sky is,blue,red,,a",
    ]
    (tmp_path / "flat.csv").write_text("\n".join(lines) + "\n")
    spec = {"type": "multiple_choice", "train": "flat.csv", "dev": "flat.csv"}
    spec |= {"question_field": "q", "choice_fields": ["a", "b", "c"], "label_field": "y"}
    spec |= {"label_names": ["a", "b", "c"], "max_skipped_fraction": 0.7}
    task = load_task(load_tasks_config(write_config({"flat": spec}))["flat"])
    assert task.train["choices"] == [["cold", "hot", "wet"]]
    assert task.skipped_by_split == {"train": 2, "dev": 2}
    # predict writes a row per input row: it refuses the row, as it does an empty text field
    from adapterfleet.data import TaskError
    from adapterfleet.data.prediction_input import read_input

    (tmp_path / "in.csv").write_text("\n".join(lines[:3]) + "\n")
    with pytest.raises(TaskError, match=r"input row 2: a value of .* is missing or empty; fill"):
        read_input(task.spec, tmp_path / "in.csv")


def test_the_layout_round_trips_through_its_mapping(tmp_path: Path, write_config) -> None:
    from adapterfleet.data import TaskSpec

    for name, (rows, declaration, _) in SHAPES.items():
        spec = mc_task(tmp_path, write_config, name, rows, declaration).spec
        assert TaskSpec.from_mapping(name, spec.to_mapping(), tmp_path) == spec
