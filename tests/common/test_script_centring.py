"""Cosines with each writing system's centroid removed (services.common.script_centring)."""
from __future__ import annotations

import math

import pytest

from services.common.script_centring import centred_cosines, spans_scripts

pytestmark = pytest.mark.unit


def test_a_passage_is_scored_against_its_own_systems_centroid():
    # q = (1, 0); a Chinese passage (0.8, 0.6) against the Chinese centroid (0.7, 0.7): (0.1, -0.1);
    # an English one (0.6, 0.8) against the English centroid (0.5, 0.5): (0.1, 0.3)
    scores = centred_cosines([1.0, 0.0], [[0.8, 0.6], [0.6, 0.8]], ["cjk", "latin"],
                             {"cjk": [0.7, 0.7], "latin": [0.5, 0.5]})
    assert scores == pytest.approx([0.1 / math.hypot(0.1, 0.1), 0.1 / math.hypot(0.1, 0.3)])
    assert scores[0] > scores[1]


def test_centring_lets_the_other_languages_passage_overtake_the_questions_own():
    query = [0.9, 0.3]
    passages = [[0.95, 0.31], [0.3, 0.95]]  # raw cosine: the first (same language) far ahead
    centroids = {"cjk": [0.99, 0.1], "latin": [0.1, 0.99]}
    plain = [sum(q * p for q, p in zip(query, v)) / math.hypot(*query) / math.hypot(*v) for v in passages]
    centred = centred_cosines(query, passages, ["cjk", "latin"], centroids)
    assert plain[0] > plain[1] and centred[1] > centred[0]


def test_a_passage_without_a_centroid_keeps_its_cosine_and_one_equal_to_its_centroid_scores_zero():
    scores = centred_cosines([3.0, 4.0], [[1.0, 0.0], [0.6, 0.8]], ["", "latin"], {"latin": [0.6, 0.8]})
    assert scores == pytest.approx([0.6, 0.0])
    assert centred_cosines([1.0, 0.0], [], [], {}) == []


@pytest.mark.parametrize(("query", "vectors", "scripts", "centroids", "message"), [
    ([1.0, 0.0], [[1.0, 0.0]], [], {}, "writing systems"),
    ([0.0, 0.0], [[1.0, 0.0]], ["cjk"], {}, "all zeros"),
    ([1.0, 0.0], [[1.0, 0.0, 0.0]], ["cjk"], {}, "shape"),
    ([1.0, 0.0], [[1.0, 0.0]], ["cjk"], {"cjk": [1.0]}, "centroid"),
])
def test_mismatched_shapes_are_refused(query, vectors, scripts, centroids, message):
    with pytest.raises(ValueError, match=message):
        centred_cosines(query, vectors, scripts, centroids)


def test_spans_scripts_needs_two_systems_with_a_centroid():
    centroids = {"cjk": [1.0], "latin": [0.0]}
    assert spans_scripts(["cjk", "latin", "cjk"], centroids)
    assert not spans_scripts(["cjk", "cjk"], centroids)
    assert not spans_scripts(["cjk", ""], centroids)
    assert not spans_scripts(["cjk", "latin"], {"cjk": [1.0]})
