"""What learning nothing scores on a dev split (the majority class, the mean), and the note a
registration line gets at or below it."""

from __future__ import annotations

from adapterfleet.data.baseline import DevMean, Majority, dev_mean, majority


def test_the_majority_is_the_most_common_label_and_the_first_named_on_a_tie() -> None:
    assert majority([1, 0, 1, 1], ["neg", "pos"]) == Majority("pos", 0.75)
    assert majority([1, 0], ["neg", "pos"]) == Majority("neg", 0.5)
    assert majority([2, 2], ["a", "b", "c"]) == Majority("c", 1.0)
    assert majority([], ["neg", "pos"]) is None and majority([0.5, 1.5], []) is None
    assert str(Majority("neg", 0.95)) == "neg (95%)"


def test_an_accuracy_at_or_below_the_majority_share_says_so() -> None:
    """A tester's adapter on 95 % `neg` data registered at dev accuracy 0.9500 and predicted
    `neg` for all 120 dev rows, with nothing said; the MRPC slice did the same at 0.69."""
    found = Majority("neg", 114 / 120)
    assert found.note("accuracy", 0.95) == (
        "; no better than always answering 'neg' (0.9500 of dev)"
    )
    assert found.note("accuracy", 0.9) != "" and found.note("accuracy", 0.9583) == ""
    assert found.note("f1", 0.5) == ""  # no constant answer to hold F1 against: nothing said
    assert found.note("matthews", 0.0) == "; no better than a constant answer (matthews 0)"
    assert found.note("matthews", 0.12) == ""


def test_a_regression_at_or_worse_than_the_dev_mean_says_so() -> None:
    """A tester's STS-B adapter on 300 rows registered at MSE 2.59, worse than always answering
    the dev mean (MSE 2.49), with nothing said."""
    found = dev_mean([1.0, 2.0, 3.0, 6.0])
    assert found == DevMean(3.0, 3.5) and str(found) == "mean 3 (MSE 3.5)"
    assert found.note("mse", 3.5) == (
        "; no better than always answering the dev mean 3 (MSE 3.5000)"
    )
    assert found.note("mse", 3.4) == ""  # lower is better: below the variance learned something
    assert found.note("pearson", -0.05) == "; no better than a constant answer (pearson 0)"
    assert found.note("spearman", 0.0) != "" and found.note("pearson", 0.3) == ""
    assert dev_mean([]) is None
