"""The extractive answer replayed offline on saved contexts (issue 24 item 3).

A dump holds, per question, the packed context the gateway answered from and
the answer it gave. Two ways to make one:

- bench/docs_chunk_sweep.py saves the documents dev set's (in-process mesh);
- ``dump`` asks a running stack (``graphmesh up``) for the Answer of each
  question of a law dev set (no LLM configured: extractive):

      python bench/extractive_probe.py dump --set scenario [--limit N]

``replay`` runs today's ``extractive.extractive_answer`` on the same contexts
and compares it per question with the saved answer, or with the extractive
answer of another version of the module (``--baseline FILE``: a file that
defines ``extractive_answer``, e.g. ``git show
REV:services/gateway/answer/extractive.py``, or grounding.py before
2026-12-03, when it held the extractive answer), paired bootstrap 95%
interval and sign-flip p:

      python bench/extractive_probe.py replay bench/results/docs_chunk_256.json [MORE.json ...] [--baseline F] [--show-misses]

Metrics: questions with a gold passage given as text (the documents set):
whether the answer quotes it (``services.cli.evaluate`` rules: the squeezed
gold text inside the squeezed answer), with the ceilings (the gold passage in
the context, in its first three sources). Questions with a reference answer
(the law sets): character ROUGE-L F1 and number agreement with it
(``services.judge.text_rules.reference_parts``).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

from services.cli.evaluate import _squeeze, gold_passages, load_dataset, reference_of  # noqa: E402
from services.cli.significance import paired_delta  # noqa: E402
from services.common.packed_context import split_blocks  # noqa: E402
from services.gateway.answer import extractive, grounding  # noqa: E402
from services.judge import text_rules  # noqa: E402

DOCS = REPO / "tests" / "quality" / "data" / "queries-docs-dev.jsonl"
#: The own-documents sets made in users' trials: <name>/queries.jsonl.
DOCUMENT_SETS = REPO / "tests" / "quality" / "data"
SHARED_DATA = REPO.parent / "shared" / "data"


#: More folders holding own-document sets laid out the same way (``replay --set-folders``: sets kept back).
SET_FOLDERS: list[Path] = []


def dataset_path(name: str) -> Path:
    """The questions of a dump's set: docs, company_docs, english_docs (bench/docs_chunk_sweep.py), a set in one
    of SET_FOLDERS, or a law dev set."""
    if name == "docs":
        return DOCS
    for folder in (DOCUMENT_SETS, *SET_FOLDERS):
        if (folder / name / "queries.jsonl").is_file():
            return folder / name / "queries.jsonl"
    return SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl"


def context_texts(context: str) -> list[str]:
    """The packed sources of a context in citation order (headers [1]..[n])."""
    return grounding.packed_texts(context, len(split_blocks(context))) or []


async def dump(args) -> Path:
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.cli.stack import use_local_mesh_token
    from services.common.clients import channel
    from services.common.settings import MeshAddresses

    use_local_mesh_token()
    answers = {}
    async with channel(MeshAddresses().gateway_addr) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for row in load_dataset(dataset_path(args.set), args.limit or None):
            try:
                reply = await stub.Answer(gateway_pb2.AnswerRequest(query=row["query"], top_k=10), timeout=120)
            except grpc.aio.AioRpcError as err:
                print(f"{row['id']}: {err.code().name}", flush=True)
                continue
            answers[str(row["id"])] = {"context": reply.search.context, "answer": reply.answer,
                                       "mode": gateway_pb2.AnswerMode.Name(reply.mode)}
    out = args.out or REPO / "bench" / "results" / f"extractive_{args.set}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"set": args.set, "answers": answers}, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"{len(answers)} answers saved to {out}")
    return out


def load_grounding(path: Path):
    spec = importlib.util.spec_from_file_location("grounding_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def replay(args) -> None:
    """Each dump's replay, then, for several dumps, every metric pooled over their questions."""
    SET_FOLDERS[:] = getattr(args, "set_folders", []) or []
    pooled: dict[str, tuple[list[float], list[float]]] = {}
    for dump in args.dump:
        for metric, (before, after) in replay_one(dump, args).items():
            pooled.setdefault(metric, ([], []))[0].extend(before)
            pooled[metric][1].extend(after)
    if len(args.dump) > 1:
        print(f"pooled over {len(args.dump)} dumps:")
        for metric, (before_values, after_values) in pooled.items():
            d = paired_delta(before_values, after_values)
            print(f"  {metric} (n={d.n}): {d.a:.3f} -> {d.b:.3f}, delta {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}] p {d.p_value:.3f}")


def replay_one(dump: Path, args) -> dict[str, tuple[list[float], list[float]]]:
    """Replays one dump and prints its figures; returns {metric: (before, after) per question}."""
    saved = json.loads(dump.read_text(encoding="utf-8"))
    name = saved.get("set", "docs")
    answers = saved["answers"]
    baseline = load_grounding(args.baseline) if args.baseline else None
    rows = [r for r in load_dataset(dataset_path(name)) if str(r.get("id")) in answers]
    metrics: dict[str, tuple[list[float], list[float]]] = {}
    ceilings = {"gold in the context": [], "gold in its first three sources": []}

    def add(metric: str, before: float | None, after: float | None) -> None:
        if before is not None and after is not None:
            metrics.setdefault(metric, ([], []))[0].append(before)
            metrics[metric][1].append(after)

    for row in rows:
        entry = answers[str(row["id"])]
        texts = context_texts(entry["context"])
        if not texts or (entry.get("mode") == "ANSWER_MODE_ABSTAINED" and not args.include_abstained):
            continue
        after = extractive.extractive_answer(texts, row["query"])
        before = baseline.extractive_answer(texts, row["query"]) if baseline else entry["answer"]
        golds = [_squeeze(g) for g in gold_passages(row)]
        if golds:
            quoted = [float(any(g in _squeeze(a) for g in golds)) for a in (before, after)]
            add("quotes the gold passage", *quoted)
            ceilings["gold in the context"].append(float(any(g in _squeeze(t) for t in texts for g in golds)))
            ceilings["gold in its first three sources"].append(float(any(g in _squeeze(t) for t in texts[:3] for g in golds)))
            if args.show_misses and not quoted[1] and ceilings["gold in its first three sources"][-1]:
                print(f"--- {row['id']} {row['query']}\n  gold: {row['gold_text']}\n  answer: {after}\n")
        reference = reference_of(row)
        if reference:
            parts = [text_rules.reference_parts(a, reference) for a in (before, after)]
            for part in ("rouge_l", "numbers"):
                add(f"{part} vs the reference answer", parts[0][part], parts[1][part])
    print(f"{len(rows)} questions of {name} from {dump.name}; before = "
          f"{'the extractive answer of ' + str(args.baseline) if baseline else 'the saved answer'}, after = today's")
    for label, values in ceilings.items():
        if values:
            print(f"  {label}: {sum(values):.0f} of {len(values)}")
    for metric, (before_values, after_values) in metrics.items():
        d = paired_delta(before_values, after_values)
        print(f"  {metric} (n={d.n}): {d.a:.3f} -> {d.b:.3f}, delta {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}] p {d.p_value:.3f}")
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="save each Answer's context from a running stack")
    d.add_argument("--set", default="scenario", help="docs, scenario, consult or facts")
    d.add_argument("--limit", type=int, default=0)
    d.add_argument("--out", type=Path)
    r = sub.add_parser("replay", help="today's extractive answer on a dump's contexts against the saved answer or --baseline")
    r.add_argument("dump", type=Path, nargs="+", help="one or more dumps (several: also pooled)")
    r.add_argument("--baseline", type=Path, help="another module defining extractive_answer to compare with")
    r.add_argument("--show-misses", action="store_true", help="print the gold passages today's answer misses")
    r.add_argument("--set-folders", type=Path, nargs="*", default=[],
                   help="folders holding own-document sets kept outside the repository (<folder>/<set>/queries.jsonl)")
    r.add_argument("--include-abstained", action="store_true",
                   help="also replay the questions the saved Answer abstained on (the extractive answer they would get)")
    args = parser.parse_args(argv)
    if args.command == "dump":
        asyncio.run(dump(args))
    else:
        replay(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
