"""Cosine to the query with each writing system's mean removed: dense scores
that compare a Chinese passage with an English one.

Why: the bi-encoder (multilingual-e5-small) puts every passage near the
other passages of its own language, so a question's cosine to any passage in
its language is higher than to the passage in the other language that
answers it (a Chinese question's answering English chunk was first by cosine
among all chunks for 17 of 84 trial questions, first among the English chunks
alone for 64). Subtracting each language's mean vector before the cosine
removes that shared component: the "language-neutral" centring of
multilingual encoders (Libovický, Rosa and Fraser 2020, "On the Language
Neutrality of Pre-trained Multilingual Representations", section 3: centring
each language's representations by its mean). Measured on the own-document
sets in docs/benchmarks.md, "Dense scores centred by writing system".

The query is left as it is: its own language's mean is a passage-side mean
(the corpus holds no questions), and removing it did worse on the trial sets.
Pure functions, tested directly (tests/common/test_script_centring.py).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

#: Below this norm a centred passage vector is the centroid itself (a one-chunk writing system): its
#: direction means nothing, and it scores 0.
_MIN_NORM = 1e-6


def centred_cosines(query: Sequence[float], vectors: Sequence[Sequence[float]], scripts: Sequence[str],
                    centroids: Mapping[str, Sequence[float]]) -> list[float]:
    """For each passage vector, the cosine between ``query`` and the passage
    vector minus the centroid of its writing system:
    (q . (p - c_s)) / (|q| |p - c_s|), in [-1, 1].

    Args:
        query: the question's embedding, shape (d,), any non-zero norm.
        vectors: passage (chunk or sentence) embeddings, shape (n, d).
        scripts: each passage's writing system ("cjk", "latin"; "" unknown).
        centroids: {writing system: mean passage embedding of that system in
            the collections searched, shape (d,)}.

    Returns:
        n scores; a passage whose system has no centroid keeps its plain
        cosine (nothing to centre it by); one equal to its centroid gets 0.

    Raises:
        ValueError: lengths of ``vectors`` and ``scripts`` differ, a
            dimension differs from the query's, or the query is all zeros.
    """
    if len(vectors) != len(scripts):
        raise ValueError(f"{len(scripts)} writing systems for {len(vectors)} vectors")
    if not len(vectors):
        return []
    q = np.asarray(query, dtype=np.float64)
    q_norm = float(np.linalg.norm(q))
    if q_norm == 0.0:
        raise ValueError("query vector is all zeros")
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != q.shape[0]:
        raise ValueError(f"vectors of shape {matrix.shape} for a query of dimension {q.shape[0]}")
    means = {s: np.asarray(c, dtype=np.float64) for s, c in centroids.items()}
    if any(m.shape != q.shape for m in means.values()):
        raise ValueError(f"a centroid's dimension differs from the query's ({q.shape[0]})")
    centred = np.stack([row - means[s] if s in means else row for row, s in zip(matrix, scripts)])
    norms = np.linalg.norm(centred, axis=1)
    safe = np.where(norms < _MIN_NORM, 1.0, norms)
    scores = (centred @ q) / (safe * q_norm)
    return [0.0 if n < _MIN_NORM else float(s) for s, n in zip(scores, norms)]


def spans_scripts(scripts: Sequence[str], centroids: Mapping[str, Sequence[float]]) -> bool:
    """Whether the passages are in at least two writing systems that have a
    centroid: only then does centring change how they compare."""
    return len({s for s in scripts if s in centroids}) >= 2
