"""A compressed data file (gzip, zip, bzip2, xz, zstd) is named as compressed, with the command
that decompresses it, wherever a file is read: a task's split and `predict`'s input
(`data/compressed.py`)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
from pathlib import Path

import pytest

from adapterfleet.data import TaskError, load_task, load_tasks_config
from adapterfleet.data.prediction_input import read_input
from adapterfleet.data.tasks import TaskSpec

CSV = "id,review,sentiment\nr0,a fine film,pos\nr1,a dull film,neg\n"
TASK = {"text_fields": ["review"], "label_field": "sentiment", "label_names": ["neg", "pos"]}


def _zipped(text: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("train.csv", text)
    return out.getvalue()


def _refusal(tmp_path: Path, write_config, name: str, data: bytes, **split) -> str:
    (tmp_path / name).write_bytes(data)
    (tmp_path / "dev.csv").write_text(CSV)
    task = {**TASK, "train": {"path": name, "format": "csv", **split}, "dev": "dev.csv"}
    spec = load_tasks_config(write_config({"senti": task}))["senti"]
    with pytest.raises(TaskError) as info:
        load_task(spec)
    return str(info.value)


@pytest.mark.parametrize("split", [{}, {"encoding": "latin-1"}])
def test_a_gzip_csv_is_named_compressed_with_the_command(
    tmp_path: Path, write_config, split: dict
) -> None:
    """`format: csv` on a .csv.gz said `is not UTF-8: byte 0x8b ...; set train.encoding`, and
    with `encoding: latin-1` `column 'review' not found; columns there: á`."""
    path = tmp_path / "train.csv.gz"
    message = _refusal(tmp_path, write_config, path.name, gzip.compress(CSV.encode()), **split)
    assert message == (
        f"task 'senti', train.path: {path} is gzip-compressed; decompress it (gunzip -k {path}) "
        "and point the config at the result"
    )


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        (
            "train.csv.bz2",
            bz2.compress(CSV.encode()),
            "bzip2-compressed; decompress it (bunzip2 -k",
        ),
        ("train.csv.xz", lzma.compress(CSV.encode()), "xz-compressed; decompress it (unxz -k"),
        ("train.zip", _zipped(CSV), "zip-compressed; decompress it (unzip"),
        ("train.csv.zst", b"\x28\xb5\x2f\xfd" + bytes(8), "zstd-compressed; decompress it (unzstd"),
        ("train.csv", gzip.compress(CSV.encode()), "gzip-compressed; decompress it (gunzip -c"),
    ],
    # named, not by their bytes: a gzip stream holds the time it was made, and the test
    # workers (pytest-xdist) must each collect the same ids
    ids=["bzip2", "xz", "zip", "zstd", "gzip-named-csv"],
)
def test_other_compressions_are_named_too(
    tmp_path: Path, write_config, name: str, data: bytes, said: str
) -> None:
    message = _refusal(tmp_path, write_config, name, data)
    assert f"{tmp_path / name} is {said}" in message
    if name == "train.csv":  # gunzip -k keeps only a .gz name: another goes to a new file
        assert message.endswith(f"> {tmp_path / 'train-decompressed.csv'}) and point the config "
                                "at the result")  # fmt: skip


def test_a_text_file_that_begins_like_bzip2_is_read(tmp_path: Path, write_config) -> None:
    (tmp_path / "train.csv").write_text("BZh1,review,sentiment\nr0,a fine film,pos\nr1,dull,neg\n")
    (tmp_path / "dev.csv").write_text(CSV)
    task = {**TASK, "train": "train.csv", "dev": "dev.csv"}
    assert len(load_task(load_tasks_config(write_config({"senti": task}))["senti"]).train) == 2


def test_a_compressed_predict_input_says_to_pass_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .csv.gz given to predict was `no format known (its suffix '.gz')`, and with --format
    csv `not text in utf-8; save it as UTF-8`."""
    spec = TaskSpec.from_mapping("senti", {**TASK, "train": "t.csv", "dev": "d.csv"}, tmp_path)
    path = tmp_path / "in.csv.gz"
    path.write_bytes(gzip.compress(CSV.encode()))
    expected = (
        f"task 'senti', input: {path} is gzip-compressed; decompress it (gunzip -k {path}) and "
        "pass the result as --input"
    )
    for fmt in (None, "csv"):
        with pytest.raises(TaskError) as caught:
            read_input(spec, path, fmt=fmt)
        assert str(caught.value) == expected
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    with pytest.raises(TaskError) as caught:
        read_input(spec, Path("-"), fmt="csv")
    assert str(caught.value) == (
        "task 'senti', input: standard input is gzip-compressed; decompress it (gunzip -c FILE "
        "| adapterfleet predict ... --input -)"
    )


def test_a_compressed_suffix_without_format_says_to_decompress(
    tmp_path: Path, write_config
) -> None:
    """`train: train.csv.gz` said `no format known for '.gz'; set train.format to one of ...`,
    and with a format set the file was then read as text."""
    task = {**TASK, "train": "train.csv.gz", "dev": "dev.csv"}
    with pytest.raises(TaskError) as info:
        load_tasks_config(write_config({"senti": task}))
    path = tmp_path / "train.csv.gz"
    assert str(info.value).endswith(
        f"train.format: no format known for '.gz' (train.csv.gz); decompress it (gunzip -k "
        f"{path}) and point the config at the result"
    )
