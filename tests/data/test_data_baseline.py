"""The majority class of a dev split, and the note a registration line gets at or below it."""

from __future__ import annotations

from adapterfleet.data.baseline import Majority, majority


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
    assert found.note("f1", 0.5) == ""  # another metric, another baseline: nothing said
