"""services.common.llm.yes_probability: the verdict of a yes-or-no
question read from a token's log-probabilities (the reranker's LLM scorer
and the judge's yes-no mode)."""
from __future__ import annotations

import math

import pytest

from services.common.llm import yes_probability

pytestmark = pytest.mark.unit


def test_yes_probability_normalises_yes_against_no_in_either_language():
    alternatives = [("No", math.log(0.5)), ("Yes", math.log(0.3)), (" yes", math.log(0.1)), ("maybe", math.log(0.1))]
    assert yes_probability(alternatives) == pytest.approx(0.4 / 0.9)
    assert yes_probability([("是", math.log(0.6)), ("否", math.log(0.2)), ("不是", math.log(0.2))]) == pytest.approx(0.6)
    assert yes_probability([("maybe", 0.0)]) is None  # no verdict at all, not a "no"
