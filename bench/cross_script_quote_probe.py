"""Dense similarity in the extractive answer for questions in another
script than their sources (issue 24 item 3; a benchmark, not a test).

An English question over Chinese documents, or a Chinese one over English
documents, shares no word and no character bigram with the sentence that
answers it, so the extractive answer's word scoring quotes a source's
first sentences. This replays ``extractive.extractive_answer`` offline on
saved sources, with and without each quotable piece's e5onnx cosine to the
question (``similarity``), and counts the answers that quote the gold line.

Sources, only the questions whose script differs from their top three
results' (``services.common.text.latin_script``):
- fit: bench/results/generic_abstention_cross_en.jsonl (bench/data/cross_fit's
  60 English questions over Chinese documents) and
  bench/results/generic_abstention_cross.jsonl (bench/data/english_fit's 60
  Chinese questions over English documents): the search results' texts in
  order (``bench/generic_abstention.py`` dumps);
- held out: the packed contexts of ``bench/docs_chunk_sweep.py``'s runs of
  the own-document sets (bench/results/<set>_chunk_384.json).

    PYTHONPATH=.:gen/python python bench/cross_script_quote_probe.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

from bench.extractive_probe import context_texts  # noqa: E402
from services.cli.evaluate import _squeeze, gold_passages, load_dataset  # noqa: E402
from services.cli.significance import paired_delta  # noqa: E402
from services.common.text import latin_script  # noqa: E402
from services.gateway.answer import extractive  # noqa: E402

RESULTS = REPO / "bench" / "results"
DATA = REPO / "bench" / "data"
QUALITY = REPO / "tests" / "quality" / "data"
FIT = {"cross_en": (RESULTS / "generic_abstention_cross_en.jsonl", DATA / "cross_fit" / "queries_en.jsonl"),
       "cross_zh": (RESULTS / "generic_abstention_cross.jsonl", DATA / "english_fit" / "queries_zh.jsonl")}
HELD_OUT = ("handbook_docs", "english_docs", "orbit_docs", "company_docs", "docs")


def cross_script(question: str, texts: list[str]) -> bool:
    """Whether ``question`` is in another script than its first three sources."""
    return bool(texts) and latin_script(question) != latin_script(" ".join(texts[:3]))


def fit_rows() -> dict[str, list[tuple[str, list[str], list[str]]]]:
    out = {}
    for name, (evidence, questions) in FIT.items():
        gold = {row["id"]: gold_passages(row) for row in load_dataset(questions)}
        rows = []
        for line in evidence.open(encoding="utf-8"):
            record = json.loads(line)
            qid = record["id"].split(":", 1)[1]
            texts = [r.get("text", "") for r in record["results"]]
            if qid in gold and cross_script(record["query"], texts):
                rows.append((record["query"], texts, gold[qid]))
        out[name] = rows
    return out


def held_out_rows() -> dict[str, list[tuple[str, list[str], list[str]]]]:
    out = {}
    for name in HELD_OUT:
        dump = RESULTS / f"{name}_chunk_384.json"
        if not dump.is_file():
            continue
        answers = json.loads(dump.read_text(encoding="utf-8"))["answers"]
        path = QUALITY / "queries-docs-dev.jsonl" if name == "docs" else QUALITY / name / "queries.jsonl"
        rows = []
        for row in load_dataset(path):
            saved = answers.get(str(row["id"]))
            if not saved or saved["mode"] == "ANSWER_MODE_ABSTAINED":
                continue
            texts = context_texts(saved["context"])
            if cross_script(row["query"], texts):
                rows.append((row["query"], texts, gold_passages(row)))
        out[name] = rows
    return out


def main() -> None:
    from services.expander.e5_onnx import E5OnnxEmbedder

    embedder = E5OnnxEmbedder(threads=1)
    sets = {**fit_rows(), **held_out_rows()}
    pooled = {"fit": ([], []), "held out": ([], [])}
    for name, rows in sets.items():
        before, after = [], []
        for question, texts, golds in rows:
            pieces = extractive.pieces_to_embed(texts)
            vectors = embedder.embed(pieces, query=False)
            query = embedder.embed([question], query=True)[0]
            similarity = dict(zip(pieces, (vectors @ query).tolist()))
            plain = extractive.extractive_answer(texts, question)
            dense = extractive.extractive_answer(texts, question, similarity=similarity)
            before.append(float(any(_squeeze(g) in _squeeze(plain) for g in golds)))
            after.append(float(any(_squeeze(g) in _squeeze(dense) for g in golds)))
        group = "fit" if name in FIT else "held out"
        pooled[group][0].extend(before)
        pooled[group][1].extend(after)
        if rows:
            d = paired_delta(before, after)
            print(f"{name:14s} n={len(rows):3d} quotes gold {sum(before):3.0f} -> {sum(after):3.0f}  "
                  f"({d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}])")
    for group, (before, after) in pooled.items():
        if before:
            d = paired_delta(before, after)
            print(f"{group:14s} n={len(before):3d} quotes gold {sum(before):3.0f} -> {sum(after):3.0f}  "
                  f"({d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}], p {d.p_value:.3f})")


if __name__ == "__main__":
    main()
