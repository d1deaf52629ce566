"""Accuracy and binary F1 on known cases."""

from __future__ import annotations

import pytest
import torch

from adapterfleet.training import accuracy, compute_metrics, f1


def test_accuracy_on_lists_and_tensors():
    assert accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    assert accuracy(torch.tensor([2, 0, 1]), torch.tensor([2, 0, 1])) == 1.0


@pytest.mark.parametrize(
    ("preds", "labels", "expected"),
    [
        ([1, 1, 0, 0], [1, 0, 1, 0], 0.5),  # tp 1, fp 1, fn 1
        ([1, 1, 1, 0], [1, 1, 0, 0], 0.8),  # tp 2, fp 1, fn 0
        ([0, 0, 0, 1], [1, 1, 0, 0], 0.0),  # no true positive
        ([0, 0], [0, 0], 0.0),  # no positive anywhere
        ([1, 0, 1], [1, 0, 1], 1.0),
    ],
)
def test_f1_of_the_positive_class(preds, labels, expected):
    assert f1(preds, labels) == pytest.approx(expected)
    assert f1(torch.tensor(preds), torch.tensor(labels)) == pytest.approx(expected)


def test_compute_metrics_returns_the_named_metrics():
    out = compute_metrics(torch.tensor([1, 1, 1, 0]), [1, 1, 0, 0], ["f1", "accuracy"])
    assert out == pytest.approx({"f1": 0.8, "accuracy": 0.75})


def test_unknown_metric_and_length_mismatch_are_clear_errors():
    with pytest.raises(ValueError, match=r"unknown metric\(s\) \['auroc'\].*accuracy.*f1"):
        compute_metrics([1], [1], ["auroc"])
    with pytest.raises(ValueError, match="differ in length: 2 vs 3"):
        accuracy([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="zero examples"):
        f1([], [])
