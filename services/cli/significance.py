"""Telling a gain from noise: paired bootstrap intervals and paired
permutation (sign-flip) tests over per-query metrics, and the per-query
metrics themselves from a first-gold rank.

With 150-250 questions a dev set's R@10 has a standard error near 0.03, so
a delta of 0.02 says nothing by itself. Both runs answer the same questions,
so the test is paired: resample questions (bootstrap) or flip the sign of
each question's difference (permutation) and look at the mean difference.
References: Efron & Tibshirani, "An Introduction to the Bootstrap" (1993),
ch. 13 (percentile intervals); Smucker, Allan & Carterette, "A Comparison of
Statistical Significance Tests for Information Retrieval Evaluation" (CIKM
2007), which recommends the randomization and bootstrap tests for IR.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

#: Per-query metrics compared by default, computed from the first gold rank.
RANK_METRICS = ("recall@1", "recall@10", "mrr@10")


def rank_metric(name: str, rank: int | None) -> float:
    """One query's ``name`` ("recall@K", "mrr@K") given the 1-based rank of
    its first gold result (None: no gold found)."""
    kind, _, k = name.partition("@")
    cutoff = int(k)
    if rank is None or rank > cutoff:
        return 0.0
    if kind == "recall":
        return 1.0
    if kind == "mrr":
        return 1.0 / rank
    raise ValueError(f"unknown rank metric {name!r}")


@dataclass(frozen=True, slots=True)
class PairedDelta:
    """B minus A over the same questions.

    Attributes:
        n: questions paired.
        a / b: mean metric of each run.
        delta: b - a.
        low / high: the paired bootstrap's 95% percentile interval of delta.
        p_value: two-sided p of the paired sign-flip permutation test.
        significant: the interval excludes 0.
    """

    n: int
    a: float
    b: float
    delta: float
    low: float
    high: float
    p_value: float

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0

    def as_dict(self) -> dict:
        return {**{k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()},
                "significant": self.significant}


def paired_delta(a: Sequence[float], b: Sequence[float], resamples: int = 10_000, seed: int = 0) -> PairedDelta:
    """The mean difference ``b - a`` of paired per-query values with its
    bootstrap 95% interval (``resamples`` resamples of the questions) and its
    permutation p-value (as many random sign flips of the differences).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.size == 0:
        raise ValueError("paired_delta needs two non-empty sequences of the same length")
    diff = y - x
    rng = np.random.default_rng(seed)
    n = diff.size
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):  # bounded memory: 1,000 resamples at a time
        size = min(1000, resamples - start)
        means[start:start + size] = diff[rng.integers(0, n, size=(size, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    observed = abs(diff.mean())
    extreme = 0
    for start in range(0, resamples, 1000):
        size = min(1000, resamples - start)
        signs = rng.choice((-1.0, 1.0), size=(size, n))
        extreme += int((np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12).sum())
    p_value = (extreme + 1) / (resamples + 1)
    return PairedDelta(n, float(x.mean()), float(y.mean()), float(diff.mean()), float(low), float(high), float(p_value))


def compare_ranks(ranks_a: Mapping[str, int | None], ranks_b: Mapping[str, int | None],
                  metrics: Iterable[str] = RANK_METRICS, resamples: int = 10_000, seed: int = 0) -> dict[str, PairedDelta]:
    """``paired_delta`` per metric over the questions both runs hold
    (question id -> first gold rank)."""
    shared = sorted(ranks_a.keys() & ranks_b.keys())
    if not shared:
        return {}
    out = {}
    for metric in metrics:
        a = [rank_metric(metric, ranks_a[q]) for q in shared]
        b = [rank_metric(metric, ranks_b[q]) for q in shared]
        out[metric] = paired_delta(a, b, resamples, seed)
    return out


def pooled(per_set: Mapping[str, Mapping[str, int | None]]) -> dict[str, int | None]:
    """One pooled question set from several dev sets (set name -> question
    id -> rank): ids are prefixed by their set, so every question weighs the
    same in the pooled objective."""
    return {f"{name}/{qid}": rank for name, ranks in per_set.items() for qid, rank in ranks.items()}
