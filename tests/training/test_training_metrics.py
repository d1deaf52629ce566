"""The dev metrics on known cases: accuracy, F1 (binary, macro, micro), Matthews, Pearson,
Spearman and MSE, by hand and against scipy / scikit-learn where they are installed."""

from __future__ import annotations

import pytest
import torch

from adapterfleet.training import accuracy, compute_metrics, f1
from adapterfleet.training.metrics import (
    DEFAULT_METRIC,
    f1_macro,
    f1_micro,
    matthews,
    metric_direction,
    mse,
    pearson,
    spearman,
)


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


# -- the metrics of issue #21: macro / micro F1, Matthews, and the regression metrics --------

CLASSES_3 = ([0, 2, 1, 0, 0, 1], [0, 1, 2, 0, 1, 2])  # preds, labels (sklearn's example)


def test_f1_on_more_than_two_classes_is_macro_f1():
    preds, labels = CLASSES_3
    # class 0: tp 2, fp 1, fn 0 -> 0.8; classes 1 and 2: no true positive -> 0.0
    assert f1_macro(preds, labels) == pytest.approx(0.8 / 3)
    assert f1(preds, labels) == pytest.approx(0.8 / 3)
    assert f1_micro(preds, labels) == pytest.approx(2 / 6) == accuracy(preds, labels)


def test_matthews_binary_and_multiclass_by_hand():
    # binary: tp 2, fp 1, tn 2, fn 0 -> (2*2 - 1*0) / sqrt(3 * 2 * 3 * 2)
    assert matthews([1, 1, 0, 0, 1], [1, 0, 0, 0, 1]) == pytest.approx(4 / 6)
    # three classes: true sums [2, 1, 3], predicted sums [3, 0, 3], 4 of 6 right
    expected = (4 * 6 - (3 * 2 + 0 * 1 + 3 * 3)) / ((36 - 18) * (36 - 14)) ** 0.5
    assert matthews([0, 0, 2, 2, 0, 2], [2, 0, 2, 2, 0, 1]) == pytest.approx(expected)
    assert matthews([1, 1, 1], [0, 1, 0]) == 0.0  # one predicted class: defined as 0


def test_pearson_spearman_and_mse_by_hand():
    # deviations (-1.5, -0.5, 0.5, 1.5) and (-3, -1, 0, 4): 11 / sqrt(5 * 26)
    assert pearson([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 9.0]) == pytest.approx(11 / 130**0.5)
    # ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5)
    assert spearman([1.0, 2.0, 2.0, 3.0], [10.0, 20.0, 30.0, 40.0]) == pytest.approx(
        4.5 / 22.5**0.5
    )
    assert spearman([1.0, 5.0, 9.0], [0.0, 0.1, 7.0]) == pytest.approx(1.0)  # monotone
    assert mse([1.0, 2.0], [2.0, 4.0]) == pytest.approx(2.5)
    assert pearson([3.0, 3.0, 3.0], [1.0, 2.0, 3.0]) == 0.0  # constant predictions


def test_metrics_agree_with_scipy_and_sklearn_on_random_data():
    stats = pytest.importorskip("scipy.stats")
    sk = pytest.importorskip("sklearn.metrics")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(200, generator=generator)
    y = (x + torch.randn(200, generator=generator)).round(decimals=1)  # ties in y
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x.numpy(), y.numpy())[0])
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x.numpy(), y.numpy())[0])
    preds = torch.randint(0, 4, (300,), generator=generator)
    labels = torch.where(torch.rand(300, generator=generator) < 0.5, preds, 3 - preds)
    p, t = preds.numpy(), labels.numpy()
    assert matthews(preds, labels) == pytest.approx(sk.matthews_corrcoef(t, p))
    assert f1_macro(preds, labels) == pytest.approx(sk.f1_score(t, p, average="macro"))
    assert f1_micro(preds, labels) == pytest.approx(sk.f1_score(t, p, average="micro"))


def test_compute_metrics_refuses_a_metric_of_the_other_kind():
    values = compute_metrics(torch.tensor([1.0, 2.0, 4.0]), [1.0, 2.0, 3.0], ["pearson", "mse"])
    assert values["mse"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match=r"\['accuracy'\] do not fit regression.*pearson"):
        compute_metrics(torch.tensor([0.5]), [1.0], ["accuracy"])
    with pytest.raises(ValueError, match=r"\['mse'\] do not fit classification.*matthews"):
        compute_metrics([1, 0], [1, 1], ["mse"])


def test_directions_and_defaults_per_task_type():
    assert DEFAULT_METRIC == {
        "classification": "accuracy",
        "multiple_choice": "accuracy",
        "regression": "pearson",
    }
    assert [metric_direction(m) for m in ("accuracy", "pearson", "mse")] == ["max", "max", "min"]
