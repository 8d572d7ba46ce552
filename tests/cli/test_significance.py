"""services.cli.significance: per-query rank metrics, paired bootstrap
intervals and permutation p-values, pooling."""
from __future__ import annotations

import numpy as np
import pytest

from services.cli.significance import compare_ranks, paired_delta, pooled, rank_metric

pytestmark = pytest.mark.unit


def test_rank_metrics():
    assert rank_metric("recall@10", 3) == 1.0 and rank_metric("recall@1", 3) == 0.0
    assert rank_metric("mrr@10", 4) == 0.25 and rank_metric("mrr@10", 11) == 0.0 and rank_metric("mrr@10", None) == 0.0
    with pytest.raises(ValueError):
        rank_metric("ndcg@10", 1)


def test_identical_runs_are_noise():
    a = [1.0, 0.0, 1.0, 0.5] * 50
    d = paired_delta(a, a)
    assert d.delta == 0 and d.low == 0 and d.high == 0 and d.p_value == 1.0 and not d.significant


def test_a_consistent_gain_is_significant_and_a_tiny_one_is_not():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 200).astype(float)
    b = a.copy()
    b[np.flatnonzero(a == 0)[:30]] = 1.0  # 30 of 200 questions fixed, none broken
    big = paired_delta(a, b)
    assert big.delta == pytest.approx(0.15) and big.low > 0 and big.p_value < 0.001 and big.significant
    c = a.copy()
    c[np.flatnonzero(a == 0)[:5]] = 1.0
    c[np.flatnonzero(a == 1)[:3]] = 0.0  # +0.01 net: noise at n=200
    small = paired_delta(a, c)
    assert small.low < 0 < small.high and small.p_value > 0.05 and not small.significant


def test_interval_brackets_the_delta_and_is_reproducible():
    rng = np.random.default_rng(2)
    a, b = rng.random(150), rng.random(150)
    first, second = paired_delta(a, b, seed=7), paired_delta(a, b, seed=7)
    assert first == second and first.low <= first.delta <= first.high


def test_compare_ranks_pairs_shared_questions_and_pooling_prefixes_sets():
    ranks_a = {"q1": 1, "q2": None, "q3": 5}
    ranks_b = {"q1": 1, "q2": 2, "q4": 1}
    out = compare_ranks(ranks_a, ranks_b)
    assert out["recall@10"].n == 2 and out["recall@10"].delta == pytest.approx(0.5)
    assert out["mrr@10"].b == pytest.approx(0.75)
    assert pooled({"scenario": {"1": 3}, "consult": {"1": None}}) == {"scenario/1": 3, "consult/1": None}
    with pytest.raises(ValueError):
        paired_delta([1.0], [1.0, 0.0])
