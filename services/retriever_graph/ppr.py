"""Personalised PageRank over a small undirected weighted graph, as HippoRAG 2
runs it over its passage-phrase graph (OSU-NLP-Group/HippoRAG,
``HippoRAG.run_ppr``: igraph ``personalized_pagerank`` with damping 0.5,
undirected, edge weights, the reset vector = phrase weights + passage
weights scaled by ``passage_node_weight`` 0.05). Pure numpy; the graph is a
neighbourhood of a few hundred nodes read from Neo4j per query.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

import numpy as np

#: HippoRAG 2 defaults (RetrievalConfig.damping, passage_node_weight).
DAMPING = 0.5
PASSAGE_NODE_WEIGHT = 0.05


def personalized_pagerank(edges: Iterable[tuple[Hashable, Hashable, float]], reset: Mapping[Hashable, float],
                          damping: float = DAMPING, iterations: int = 50, tolerance: float = 1e-8) -> dict[Hashable, float]:
    """PPR scores of every node of an undirected weighted graph.

    Args:
        edges: (a, b, weight) with weight > 0; parallel edges add up; self
            loops are ignored.
        reset: restart weight per node (nodes not in any edge are added);
            negative or NaN weights count as 0. Normalised to sum 1.
        damping: probability of following an edge at each step (0.5 in
            HippoRAG 2; the rest restarts from ``reset``).
        iterations / tolerance: power-iteration limits (L1 change).

    Returns:
        {node: score}, scores summing to 1; {} when ``reset`` has no
        positive weight. A node without edges returns its restart mass to
        the reset distribution (as igraph does for dangling nodes).
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError("damping must be in [0, 1)")
    index: dict[Hashable, int] = {}
    rows, cols, weights = [], [], []
    for a, b, w in edges:
        if a == b or not w or w <= 0:
            continue
        i, j = index.setdefault(a, len(index)), index.setdefault(b, len(index))
        rows += [i, j]
        cols += [j, i]
        weights += [float(w), float(w)]
    for node in reset:
        index.setdefault(node, len(index))
    n = len(index)
    p = np.zeros(n)
    for node, w in reset.items():
        if w is not None and w == w and w > 0:
            p[index[node]] += float(w)
    if n == 0 or p.sum() <= 0:
        return {}
    p /= p.sum()
    strength = np.zeros(n)
    np.add.at(strength, rows, weights)
    r_idx, c_idx = np.asarray(rows, dtype=int), np.asarray(cols, dtype=int)
    w_arr = np.asarray(weights, dtype=float)
    # Transition from i to j: w_ij / strength_i.
    share = w_arr / strength[r_idx] if len(w_arr) else w_arr
    dangling = strength == 0
    scores = p.copy()
    for _ in range(iterations):
        moved = np.zeros(n)
        np.add.at(moved, c_idx, scores[r_idx] * share)
        lost = scores[dangling].sum()
        new = (1.0 - damping) * p + damping * (moved + lost * p)
        done = np.abs(new - scores).sum() < tolerance
        scores = new
        if done:
            break
    nodes = list(index)
    return {nodes[i]: float(scores[i]) for i in range(n)}
