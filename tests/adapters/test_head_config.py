"""HeadConfig checks its own fields when made: each error names the field and what it takes."""

import pytest

from adapterfleet.adapters import HeadConfig


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dropout": 2.0}, "dropout must be a number in [0, 1), got 2.0"),
        ({"dropout": -0.1}, "dropout must be a number in [0, 1), got -0.1"),
        ({"dropout": "0.1"}, "dropout must be a number in [0, 1), got '0.1'"),
        ({"num_labels": "3"}, "num_labels must be a positive integer, got '3'"),
        ({"num_labels": 2.0}, "num_labels must be a positive integer, got 2.0"),
        (
            {"head_type": "multiple_choice", "num_labels": 0},
            "num_labels must be a positive integer, got 0",
        ),
    ],
)
def test_a_bad_field_is_refused_by_name(settings, message):
    with pytest.raises(ValueError) as caught:
        HeadConfig(**settings)
    assert str(caught.value) == message


def test_good_values_pass():
    assert HeadConfig(dropout=0.0, num_labels=3).dropout == 0.0
    assert HeadConfig("multiple_choice", 4, dropout=0.5).out_features == 1
