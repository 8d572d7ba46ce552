"""The extractive answer replayed offline on saved contexts (issue 24 item 3).

bench/docs_chunk_sweep.py saves, for each question of the documents dev set,
the packed context the gateway answered from and the extractive answer it
gave. This probe runs today's ``grounding.extractive_answer`` on the same
contexts and compares, per question, whether the answer quotes the gold
passage (``services.cli.evaluate`` rules: the squeezed gold text inside the
squeezed answer), with a paired bootstrap interval and sign-flip p:

    python bench/extractive_probe.py bench/results/docs_chunk_256.json [--show-misses]

Also prints the ceilings: the share of contexts that hold the gold passage
at all, and in their first three sources (what the answer quotes from).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

from services.cli.evaluate import _squeeze, gold_passages, load_dataset  # noqa: E402
from services.cli.significance import paired_delta  # noqa: E402
from services.gateway.answer import grounding  # noqa: E402

DATASET = REPO / "tests" / "quality" / "data" / "queries-docs-dev.jsonl"


def context_texts(context: str) -> list[str]:
    """The packed sources of a context in citation order (headers [1]..[n])."""
    n = 0
    for line in context.splitlines():
        match = grounding._HEADER.match(line)
        if match and int(match.group(1)) == n + 1:
            n += 1
    return grounding.packed_texts(context, n) or []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", type=Path, help="a bench/results/docs_chunk_<n>.json with answers")
    parser.add_argument("--show-misses", action="store_true", help="print the questions today's answer misses")
    args = parser.parse_args(argv)
    dump = json.loads(args.dump.read_text(encoding="utf-8"))["answers"]
    rows = [r for r in load_dataset(DATASET) if str(r.get("id")) in dump]
    before, after, in_context, in_top3 = [], [], [], []
    for row in rows:
        saved = dump[str(row["id"])]
        golds = [_squeeze(g) for g in gold_passages(row)]
        texts = context_texts(saved["context"])
        answer = grounding.extractive_answer(texts, row["query"]) if texts else saved["answer"]
        before.append(float(saved["quotes"]))
        after.append(float(any(g in _squeeze(answer) for g in golds)))
        in_context.append(float(any(g in _squeeze(t) for t in texts for g in golds)))
        in_top3.append(float(any(g in _squeeze(t) for t in texts[:3] for g in golds)))
        if args.show_misses and not after[-1] and in_top3[-1]:
            print(f"--- {row['id']} {row['query']}\n  gold: {row['gold_text']}\n  answer: {answer}\n")
    n = len(rows)
    delta = paired_delta(before, after)
    print(f"{n} questions from {args.dump.name}")
    print(f"gold passage in the context {sum(in_context):.0f}, in its first three sources {sum(in_top3):.0f}")
    print(f"answer quotes it: saved {sum(before):.0f} ({sum(before) / n:.3f}), replayed {sum(after):.0f} "
          f"({sum(after) / n:.3f}); delta {delta.delta:+.3f} [{delta.low:+.3f}, {delta.high:+.3f}] p {delta.p_value:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
