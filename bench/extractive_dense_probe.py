"""The extractive answer with the question's dense similarity to each piece
added to its word and bigram score, replayed on saved contexts (issue 24
item 3; a probe, not a test).

The lexical score cannot reach a line asked about in other words (增长率阈值
against ``growth_rate_threshold: 0.1 # 如果发现的新信息少于 10%``). Here
each quotable piece of the first three packed texts is embedded passage-side
and the question query-side with the default bi-encoder (e5onnx, in
process), and a piece scores ``lexical + w x s``, s the piece's cosine
min-max scaled over the question's pieces. Sources are still skipped, and
second pieces still left out, on the lexical score alone, so an answer does
not grow by quoting more. Dumps come from bench/extractive_probe.py (law
sets) or bench/docs_chunk_sweep.py (documents).

    python bench/extractive_dense_probe.py bench/results/docs_chunk_256.json bench/results/extractive_scenario.json \\
        --weights 0.1,0.25,0.5,1

Prints, per dump and weight, the documents set's "quotes the gold passage"
or a law set's ROUGE-L against the reference answer, against w = 0 (today),
with a paired bootstrap 95% interval; and the weight chosen by 5-fold
cross-validation over the pooled questions of every dump given, scored on
the held-out folds.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

from bench.extractive_probe import context_texts, dataset_path  # noqa: E402
from services.cli.evaluate import _squeeze, gold_passages, load_dataset, reference_of  # noqa: E402
from services.cli.significance import paired_delta  # noqa: E402
from services.expander.embedding import build_embedder  # noqa: E402
from services.gateway.answer import extractive  # noqa: E402
from services.judge import text_rules  # noqa: E402


def question_similarity(embedder, question: str, texts: list[str]):
    """A function piece text -> min-max scaled cosine to ``question`` over
    the quotable pieces of ``texts``."""
    pieces = sorted({c.text for text in texts for c in extractive.quotable_pieces(text)})
    if not pieces:
        return lambda _text: 0.0
    q = embedder.embed([question], query=True)[0]
    cos = embedder.embed(pieces, query=False) @ q
    low, high = float(cos.min()), float(cos.max())
    scaled = {p: (float(c) - low) / (high - low) if high > low else 0.0 for p, c in zip(pieces, cos)}
    return lambda text: scaled.get(text, 0.0)


def outcome(row: dict, answer: str) -> float:
    """1/0 whether the answer quotes a gold passage (documents), else its
    ROUGE-L against the reference answer (law sets)."""
    golds = [_squeeze(g) for g in gold_passages(row)]
    if golds:
        return float(any(g in _squeeze(answer) for g in golds))
    return text_rules.reference_parts(answer, reference_of(row))["rouge_l"] or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="+", type=Path)
    parser.add_argument("--weights", default="0.1,0.25,0.5,1")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    weights = [0.0] + [float(w) for w in args.weights.split(",")]
    embedder = build_embedder("e5onnx")
    pooled: list[tuple[str, list[float]]] = []  # (set, outcome per weight)
    for dump in args.dumps:
        saved = json.loads(dump.read_text(encoding="utf-8"))
        name = saved.get("set", "docs")
        answers = saved["answers"]
        results: list[list[float]] = []
        for row in load_dataset(dataset_path(name)):
            entry = answers.get(str(row.get("id")))
            if not entry or entry.get("mode") == "ANSWER_MODE_ABSTAINED":
                continue
            texts = context_texts(entry["context"])
            if not texts:
                continue
            similarity = question_similarity(embedder, row["query"], texts[:3])
            results.append([outcome(row, extractive.extractive_answer(texts, row["query"], similarity=similarity,
                                                                      similarity_weight=w)) for w in weights])
        pooled += [(name, r) for r in results]
        print(f"{name} ({len(results)} questions, {dump.name}):")
        for i, w in enumerate(weights[1:], start=1):
            d = paired_delta([r[0] for r in results], [r[i] for r in results])
            print(f"  w={w}: {d.a:.3f} -> {d.b:.3f}, delta {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}] p {d.p_value:.3f}")
    # 5-fold CV over the pooled questions: each fold's weight is the best mean gain on the other folds
    order = list(range(len(pooled)))
    random.Random(7).shuffle(order)
    chosen, held = [], [0.0] * len(pooled)
    for k in range(args.folds):
        test = set(order[k::args.folds])
        train = [pooled[i][1] for i in order if i not in test]
        best = max(range(len(weights)), key=lambda j: np.mean([r[j] - r[0] for r in train]))
        chosen.append(weights[best])
        for i in test:
            held[i] = pooled[i][1][best]
    base = [r[0] for _, r in pooled]
    d = paired_delta(base, held)
    print(f"5-fold CV over {len(pooled)} pooled questions, weights chosen {chosen}: "
          f"{d.a:.3f} -> {d.b:.3f}, delta {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}] p {d.p_value:.3f}")
    for name in dict.fromkeys(n for n, _ in pooled):
        idx = [i for i, (n, _) in enumerate(pooled) if n == name]
        d = paired_delta([base[i] for i in idx], [held[i] for i in idx])
        print(f"  {name}: {d.a:.3f} -> {d.b:.3f}, delta {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")


if __name__ == "__main__":
    main()
