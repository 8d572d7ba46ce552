"""Re-judging the retrieval defaults (issue 23, item 1), not a test: each
non-core stage the gateway runs by default for law_zh collections is
switched off in turn, every law dev set is searched with and without it, and
the pooled (all dev questions, each weighing the same) paired bootstrap 95%
interval and permutation p-value of default minus ablated MRR@10 / R@10 /
R@1 is reported, with each set's own and the latency cost.

Rule (issue 23): a stage, weight or channel is on by default only when its
pooled gain has an interval above zero.

    graphmesh up   # law corpus in, collection "default" as law_zh
    python bench/rejudge_defaults.py run --tag old            # every row below
    python bench/rejudge_defaults.py run --tag old --configs default,-graph.term
    python bench/rejudge_defaults.py run --tag old --sets article   # the article-number set, reported apart
    # profiles vs the default profile: restart the gateway with every
    # question on the default profile, then run that one row
    GRAPHMESH_GATEWAY_PROFILE_MIN_CONFIDENCE=9 graphmesh up --detach   # after stopping the gateway
    python bench/rejudge_defaults.py run --tag old --configs no-profiles
    python bench/rejudge_defaults.py report --tag old         # the table
    python bench/rejudge_defaults.py versus --a old/default --b new/default  # two runs, pooled

Runs are saved per question (first gold rank, latency, profile, question
type) under bench/results/rejudge/<tag>/<config>.json, so a report needs no
stack and an interrupted run resumes with the configs it lacks.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import RESULTS, SHARED_DATA, machine  # noqa: E402

from services.cli.evaluate import git_state, load_dataset, run_queries  # noqa: E402
from services.cli.significance import compare_ranks, paired_delta, pooled, rank_metric  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common import names  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402

OUT = RESULTS / "rejudge"
SETS = ("scenario", "consult", "facts")
#: Sets reported beside the pooled dev sets, never pooled with them: the
#: article-number questions (bench/article_lookup_set.py, seed 11, 100
#: articles in force), the only questions that name an article, so the only
#: ones graph.article and the article-lookup profile can change.
EXTRA_SETS = {"article": OUT / "queries-article-dev.jsonl"}
METRICS = ("mrr@10", "recall@10", "recall@1")
#: label -> (stages switched off, stages switched on). "no-profiles" runs
#: with the defaults and needs a gateway started with
#: GRAPHMESH_GATEWAY_PROFILE_MIN_CONFIDENCE above 1 (every question on the
#: default profile).
CONFIGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    f"-{names.GRAPH_ARTICLE}": ((names.GRAPH_ARTICLE,), ()),
    f"-{names.GRAPH_TERM}": ((names.GRAPH_TERM,), ()),
    f"-{names.GRAPH_OFFENCE}": ((names.GRAPH_OFFENCE,), ()),
    f"-{names.PG_FULLTEXT}": ((names.PG_FULLTEXT,), ()),
    f"-{names.PG_TRIGRAM}": ((names.PG_TRIGRAM,), ()),
    f"-{names.PG_BOOST}": ((names.PG_BOOST,), ()),
    "no-profiles": ((), ()),
}


def _path(tag: str, config: str) -> Path:
    return OUT / tag / f"{config.replace('/', '_')}.json"


def run(tag: str, configs: list[str], sets: list[str], concurrency: int, top_k: int, limit: int | None, force: bool) -> None:
    use_local_mesh_token()
    address = MeshAddresses().gateway_addr
    datasets = {s: load_dataset(EXTRA_SETS.get(s) or SHARED_DATA / "law-zh" / f"queries-{s}-dev.jsonl", limit)
                for s in sets}
    # One untimed pass so caches (query embeddings, understanding) are warm for every row.
    for s, data in datasets.items():
        asyncio.run(run_queries(address, data, top_k, concurrency, 120.0))
    for config in configs:
        path = _path(tag, config)
        disabled, enabled = CONFIGS[config]
        record = {"config": config, "disabled": list(disabled), "enabled": list(enabled), "top_k": top_k,
                  "git": git_state(), "machine": machine(), "sets": {}}
        if path.exists():
            record["sets"] = json.loads(path.read_text())["sets"]
        for s, data in datasets.items():
            if s in record["sets"] and not force:
                print(f"{config} {s}: kept {path}", flush=True)
                continue
            started = time.perf_counter()
            rows = asyncio.run(run_queries(address, data, top_k, concurrency, 120.0,
                                           disabled_stages=disabled, enabled_stages=enabled))
            record["sets"][s] = {r.id: {"rank": r.first_gold_rank, "ms": round(r.latency_ms, 1), "profile": r.profile,
                                        "type": r.question_type, "error": r.error,
                                        "graph_ms": r.stages_ms.get("retrieve.graph")} for r in rows}
            errors = sum(1 for r in rows if r.error)
            mrr = statistics.fmean(rank_metric("mrr@10", r.first_gold_rank) for r in rows)
            r10 = statistics.fmean(rank_metric("recall@10", r.first_gold_rank) for r in rows)
            print(f"{config:16s} {s:9s} n={len(rows)} MRR@10 {mrr:.4f} R@10 {r10:.4f} errors {errors} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, ensure_ascii=False, indent=1))


def load(ref: str) -> dict:
    """A saved run: "tag/config"."""
    tag, _, config = ref.partition("/")
    return json.loads(_path(tag, config).read_text())


def ranks(run_record: dict, sets=SETS) -> dict[str, dict[str, int | None]]:
    """Question id -> first gold rank per set, of ``sets`` (default: the
    pooled dev sets)."""
    return {s: {q: v["rank"] for q, v in rows.items()} for s, rows in run_record["sets"].items() if s in sets}


def p50(run_record: dict) -> float:
    """Median Search latency over the pooled dev questions (ms)."""
    values = sorted(v["ms"] for s, rows in run_record["sets"].items() if s in SETS
                    for v in rows.values() if not v["error"])
    return values[len(values) // 2] if values else float("nan")


def graph_p50(run_record: dict) -> float:
    """Median of the gateway's retrieve.graph stage over the pooled dev
    questions (ms; nan when the run did not record it)."""
    values = sorted(v["graph_ms"] for s, rows in run_record["sets"].items() if s in SETS
                    for v in rows.values() if v.get("graph_ms") is not None)
    return values[len(values) // 2] if values else float("nan")


def deltas(a: dict, b: dict, metrics=METRICS) -> dict[str, dict]:
    """B minus A, per set and pooled: {scope: {metric: PairedDelta dict}}."""
    ra, rb = ranks(a), ranks(b)
    out = {s: {m: d.as_dict() for m, d in compare_ranks(ra[s], rb[s], metrics).items()} for s in ra if s in rb}
    out["pooled"] = {m: d.as_dict() for m, d in compare_ranks(pooled(ra), pooled(rb), metrics).items()}
    ea, eb = ranks(a, tuple(EXTRA_SETS)), ranks(b, tuple(EXTRA_SETS))
    out.update({s: {m: d.as_dict() for m, d in compare_ranks(ea[s], eb[s], metrics).items()} for s in ea if s in eb})
    return out


def by_profile(default: dict, ablated: dict) -> dict[str, dict]:
    """Each question-type profile's own pooled gain: default minus ablated
    (every question on the default profile) over all pooled questions, with
    the difference kept only on the questions the default run sent to that
    profile (elsewhere both runs are the same configuration)."""
    rd, ra = pooled(ranks(default)), pooled(ranks(ablated))
    profile = {f"{s}/{q}": v["profile"] for s, rows in default["sets"].items() if s in SETS for q, v in rows.items()}
    out = {}
    for name in sorted(set(profile.values()) - {"default", ""}):
        shared = sorted(rd.keys() & ra.keys())
        entry = {"questions": sum(1 for q in shared if profile.get(q) == name)}
        for m in METRICS:
            base = [rank_metric(m, ra[q]) for q in shared]
            mixed = [rank_metric(m, rd[q]) if profile.get(q) == name else rank_metric(m, ra[q]) for q in shared]
            entry[m] = paired_delta(base, mixed).as_dict()
        out[name] = entry
    return out


def _cell(d: dict) -> str:
    return f"{d['delta']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}] p={d['p_value']:.4f}"


def report(tag: str) -> dict:
    default = load(f"{tag}/default")
    rows = {}
    print(f"default: p50 {p50(default):.1f} ms; pooled n={sum(len(r) for s, r in default['sets'].items() if s in SETS)}")
    print("| stage off | pooled MRR@10 gain of the default [95% CI] p | pooled R@10 gain [95% CI] p | "
          "scenario / consult / facts MRR@10 gain | p50 ms default / off | verdict |")
    print("|---|---|---|---|---|---|")
    for config in CONFIGS:
        if config == "default" or not _path(tag, config).exists():
            continue
        ablated = load(f"{tag}/{config}")
        d = deltas(ablated, default)  # default minus ablated
        verdict = "keep (interval above 0)" if d["pooled"]["mrr@10"]["low"] > 0 else "fails the rule"
        per_set = " / ".join(f"{d[s]['mrr@10']['delta']:+.3f} [{d[s]['mrr@10']['low']:+.3f}, {d[s]['mrr@10']['high']:+.3f}]"
                             for s in SETS if s in d)
        extra = "; ".join(f"{s} MRR@10 {_cell(d[s]['mrr@10'])}" for s in EXTRA_SETS if s in d)
        rows[config] = {"deltas": d, "p50_default": p50(default), "p50_off": p50(ablated), "verdict": verdict}
        if config == "no-profiles":
            rows[config]["by_profile"] = by_profile(default, ablated)
        print(f"| {config} | {_cell(d['pooled']['mrr@10'])} | {_cell(d['pooled']['recall@10'])} | {per_set} | "
              f"{p50(default):.0f} / {p50(ablated):.0f} | {verdict} |" + (f"  ({extra})" if extra else ""), flush=True)
    if "no-profiles" in rows:
        for name, entry in rows["no-profiles"]["by_profile"].items():
            print(f"  profile {name} ({entry['questions']} questions): MRR@10 {_cell(entry['mrr@10'])}; "
                  f"R@10 {_cell(entry['recall@10'])}")
    path = OUT / tag / "report.json"
    path.write_text(json.dumps(rows, ensure_ascii=False, indent=1))
    print(f"saved to {path}")
    return rows


def versus(a: str, b: str) -> dict:
    ra, rb = load(a), load(b)
    d = deltas(ra, rb)
    print(f"B = {b} minus A = {a}; Search p50 {p50(ra):.1f} -> {p50(rb):.1f} ms, "
          f"retrieve.graph p50 {graph_p50(ra):.1f} -> {graph_p50(rb):.1f} ms")
    for scope, entry in d.items():
        for m in METRICS:
            print(f"  {scope:9s} {m:9s} {entry[m]['a']:.4f} -> {entry[m]['b']:.4f}  {_cell(entry[m])}")
    return d


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tag", required=True)
    r.add_argument("--configs", default=",".join(c for c in CONFIGS if c != "no-profiles"))
    r.add_argument("--sets", default=",".join(SETS))
    r.add_argument("--concurrency", type=int, default=4)
    r.add_argument("--top-k", type=int, default=30)
    r.add_argument("--limit", type=int, default=0)
    r.add_argument("--force", action="store_true", help="rerun configs already saved")
    rep = sub.add_parser("report")
    rep.add_argument("--tag", required=True)
    v = sub.add_parser("versus")
    v.add_argument("--a", required=True)
    v.add_argument("--b", required=True)
    args = parser.parse_args()
    if args.command == "run":
        run(args.tag, args.configs.split(","), args.sets.split(","), args.concurrency, args.top_k, args.limit or None, args.force)
    elif args.command == "report":
        report(args.tag)
    else:
        versus(args.a, args.b)


if __name__ == "__main__":
    main()
