"""A query adapter for lay legal questions (issue 23; not a test).

People asking about their own situation use words no statute uses, so the
question's e5 vector lands far from the article that answers it. A query
adapter is a small learned map on the question's vector only,

    q' = normalise(q + (q W) Uᵀ)        W, U: 384 x rank

trained so that q' is close to the stored vectors of the gold articles
(passage vectors and the corpus stay as they are: nothing is re-embedded).
The gateway then runs one more dense channel, ``pg.adapted``, with q' for
the questions the law pack reads as lay consultations
(domains/law_zh/query_adapter.py). Steps:

    graphmesh up                       # the law corpus in (make demo)
    python bench/ltr_study.py dump     # today's fused lists (bench/results/ltr)
    python bench/query_adapter_study.py vectors   # corpus and question vectors, once
    python bench/query_adapter_study.py extra-vectors --extra domains/law_zh/query_adapter_questions.jsonl
    python bench/query_adapter_study.py study --with-extra [--rank 16 --steps 200]
    python bench/query_adapter_study.py train --with-extra --out domains/law_zh/query_adapter.npz

Training questions beyond the dev sets (JSON lines of {"id", "query",
"gold": [corpus ids]}: lay questions written from corpus articles, never an
evaluation question; the pack's are domains/law_zh/query_adapter_questions.jsonl)
join every fold's training set with ``--with-extra`` and are never scored.
``extra-vectors --extra FILE...`` embeds them once, after dropping any that
equals, contains or is contained in an evaluation question (the dev sets and
``--eval-files``; services.cli.reranker_pairs.EvalQueryFilter).

``study`` trains one adapter per fold (5 folds by question, seed 23, over
the three law dev sets pooled; training questions: those the law pack
classifies as lay consultations, with their gold articles' vectors as
positives, the question's 50 nearest non-gold chunks and 200 random ones as
negatives), adapts each held-out lay question, and re-ranks today's fused
list with ``pg.adapted`` added as the fuser adds a channel: its top
``--channel-k`` chunks, min-max scaled within them, times the weight. The
weight is chosen on the other four folds (nested) from WEIGHTS. R@1 / R@10 /
MRR@10 per set with paired bootstrap intervals (services/cli/significance.py),
and the consult questions split by whether their gold article was a
training question's gold (how much of the gain is the prior of often-asked
articles). ``train`` fits the shipped adapter on every lay dev question.

Needs torch (the ``models`` extra) for training; serving needs numpy only.
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import pickle
import sys
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np  # noqa: E402

from _common import RESULTS, SHARED_DATA, first_gold_rank, stack_dsn  # noqa: E402

LTR_DUMPS = RESULTS / "ltr"
VECTORS = RESULTS / "query_adapter_vectors.pkl"
EXTRA_VECTORS = RESULTS / "query_adapter_extra_vectors.pkl"
SETS = ("scenario", "consult", "facts")
LAY = "QUESTION_TYPE_LAY_CONSULTATION"
#: The question types the adapter is fitted on and applied to (``--types``; lay consultations by default).
TYPES: tuple[str, ...] = (LAY,)
WEIGHTS = (1.0, 2.0, 3.0, 4.0, 6.0)
FOLDS, FOLD_SEED = 5, 23


def load_lists() -> list[dict]:
    """Every dev question's dumped fused list (ltr_study dump), in set order."""
    out = []
    for name in SETS:
        with gzip.open(LTR_DUMPS / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            out.extend(json.loads(line) for line in f)
    return out


async def _vectors(questions: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    from naive_hybrid import load_chunks, query_vectors

    from services.cli.stack import use_local_mesh_token
    from services.common.settings import MeshAddresses

    use_local_mesh_token()
    docs, _, chunk_vectors = await load_chunks(stack_dsn(""))
    return docs, chunk_vectors, await query_vectors(MeshAddresses().expander_addr, questions)


def vectors() -> None:
    """Stored chunk vectors (document id per chunk) and each dev question's query-side vector, to VECTORS."""
    questions = [rec["query"] for rec in load_lists()]
    docs, chunk_vectors, query_vectors = asyncio.run(_vectors(questions))
    VECTORS.write_bytes(pickle.dumps({"docs": docs, "chunks": chunk_vectors, "queries": query_vectors}))
    print(f"{len(docs)} chunks, {len(questions)} questions -> {VECTORS}")


def extra_vectors(files: list[Path], eval_files: list[Path]) -> None:
    """Query-side vectors of the extra training questions in ``files`` that are not too close to an evaluation
    question (the dev sets and ``eval_files``), to EXTRA_VECTORS."""
    from naive_hybrid import query_vectors

    from services.cli.reranker_pairs import EvalQueryFilter
    from services.cli.stack import use_local_mesh_token
    from services.common.settings import MeshAddresses

    evaluation = EvalQueryFilter.from_files([SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl" for name in SETS]
                                            + list(eval_files))
    rows = [json.loads(line) for path in files for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = [r for r in rows if not evaluation.excluded(r["query"])]
    use_local_mesh_token()
    vectors = asyncio.run(query_vectors(MeshAddresses().expander_addr, [r["query"] for r in kept]))
    EXTRA_VECTORS.write_bytes(pickle.dumps({"rows": kept, "queries": vectors}))
    print(f"{len(kept)} extra questions ({len(rows) - len(kept)} dropped as too close to an evaluation question) "
          f"-> {EXTRA_VECTORS}")


class Data:
    """The dumped lists with their vectors: ``recs`` (one per question), ``docs`` (document id per chunk row),
    ``chunks`` (unit vectors), ``gold_rows`` (chunk rows of each question's gold documents). With ``extra``,
    the extra training questions (EXTRA_VECTORS) follow the ``n_dev`` dev questions in ``recs``, in no fold
    (fold -1): every fold trains on them, none scores them."""

    def __init__(self, extra: bool = False) -> None:
        self.recs = load_lists()
        self.n_dev = len(self.recs)
        saved = pickle.loads(VECTORS.read_bytes())
        self.docs, self.chunks = saved["docs"], saved["chunks"].astype(np.float32)
        for rec, vector in zip(self.recs, saved["queries"]):
            rec["vector"] = np.asarray(vector, dtype=np.float32)
        if extra:
            added = pickle.loads(EXTRA_VECTORS.read_bytes())
            self.recs += [{"id": str(r["id"]), "set": "extra", "query": r["query"], "gold": [str(g) for g in r["gold"]],
                           "question_type": TYPES[0], "vector": np.asarray(v, dtype=np.float32)}
                          for r, v in zip(added["rows"], added["queries"])]
        rows = defaultdict(list)
        for i, d in enumerate(self.docs):
            rows[d].append(i)
        self.rows_of = rows
        self.gold_rows = [[r for g in rec["gold"] for r in rows.get(str(g), [])] for rec in self.recs]
        self.folds = np.concatenate([np.random.default_rng(FOLD_SEED).integers(0, FOLDS, self.n_dev),
                                     np.full(len(self.recs) - self.n_dev, -1)])

    def targeted(self, i: int) -> bool:
        """Whether question ``i`` is of a type the adapter is for (TYPES)."""
        return self.recs[i]["question_type"] in TYPES


def train(data: Data, idx: list[int], rank: int = 16, steps: int = 100, lr: float = 1e-2, l2: float = 1e-2,
          temperature: float = 0.05, hard: int = 50, random_negatives: int = 200, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(W, U), each (384, rank), fitted on questions ``idx`` (module doc); deterministic for a seed."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    chunks = torch.tensor(data.chunks)
    idx = [i for i in idx if data.gold_rows[i]]
    queries = torch.tensor(np.stack([data.recs[i]["vector"] for i in idx]))
    with torch.no_grad():
        nearest = torch.topk(queries @ chunks.T, hard + 10).indices.tolist()
    negatives = [[j for j in near if j not in set(data.gold_rows[i])][:hard] for near, i in zip(nearest, idx)]
    dim = queries.shape[1]
    w = (torch.randn(dim, rank, generator=torch.Generator().manual_seed(seed)) * 0.01).requires_grad_(True)
    u = torch.zeros(dim, rank, requires_grad=True)
    optimiser = torch.optim.Adam([w, u], lr=lr)
    for _ in range(steps):
        batch = rng.choice(len(idx), min(64, len(idx)), replace=False)
        q = queries[batch]
        adapted = q + (q @ w) @ u.T
        adapted = adapted / adapted.norm(dim=1, keepdim=True)
        loss = 0.0
        for k, b in enumerate(batch):
            rows = data.gold_rows[idx[b]][:1] + negatives[b] + rng.integers(0, len(data.docs), random_negatives).tolist()
            logits = (chunks[torch.tensor(rows)] @ adapted[k]) / temperature
            loss = loss + torch.nn.functional.cross_entropy(logits[None], torch.tensor([0]))
        loss = loss / len(batch) + l2 * (w.pow(2).sum() + u.pow(2).sum())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return w.detach().numpy(), u.detach().numpy()


def adapt(vector: np.ndarray, w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``vector`` mapped as the gateway maps it (``domains.pack.QueryAdapter.adapt``, down = w, up = u)."""
    from domains.pack import QueryAdapter

    return np.asarray(QueryAdapter("e5onnx", (LAY,), w, u).adapt(vector), dtype=np.float32)


def reranked(data: Data, i: int, adapted: np.ndarray | None, weight: float, channel_k: int) -> list[str]:
    """Document order of question ``i``'s fused list with ``pg.adapted`` added (module doc)."""
    rec = data.recs[i]
    score: dict[str, float] = {}
    for c in rec["candidates"]:
        score.setdefault(c["document_id"], c["fused_score"])
    if adapted is not None and weight > 0:
        cosines = data.chunks @ adapted
        top = np.argsort(-cosines)[:channel_k]
        low, high = float(cosines[top[-1]]), float(cosines[top[0]])
        best: dict[str, float] = {}
        for j in top:
            best[data.docs[j]] = max(best.get(data.docs[j], 0.0), (float(cosines[j]) - low) / (high - low or 1.0))
        for d, s in best.items():
            score[d] = score.get(d, 0.0) + weight * s
    return sorted(score, key=lambda d: -score[d])


def first_gold(order: list[str], gold: list) -> int | None:
    gold = {str(g) for g in gold}
    return next((r for r, d in enumerate(order[:10], start=1) if d in gold), None)


def study(rank: int, steps: int, lr: float, l2: float, channel_k: int, extra: bool = False,
          weights: tuple[float, ...] = WEIGHTS) -> dict:
    from services.cli.significance import compare_ranks

    data = Data(extra)
    n = data.n_dev
    adapted: dict[int, np.ndarray] = {}
    for fold in range(FOLDS):
        training = [i for i in range(len(data.recs)) if data.folds[i] != fold and data.targeted(i)]
        w, u = train(data, training, rank, steps, lr, l2)
        for i in range(n):
            if data.folds[i] == fold and data.targeted(i):
                adapted[i] = adapt(data.recs[i]["vector"], w, u)
    ranks = {wt: [first_gold(reranked(data, i, adapted.get(i), wt, channel_k), data.recs[i]["gold"]) for i in range(n)]
             for wt in (0.0, *weights)}
    mrr = lambda r: 1.0 / r if r else 0.0  # noqa: E731
    nested = [None] * n
    chosen = []
    for fold in range(FOLDS):
        others = [i for i in range(n) if data.folds[i] != fold]
        best = max(weights, key=lambda wt: np.mean([mrr(ranks[wt][i]) for i in others]))
        chosen.append(best)
        for i in range(n):
            if data.folds[i] == fold:
                nested[i] = ranks[best][i]
    report = {"params": {"rank": rank, "steps": steps, "lr": lr, "l2": l2, "channel_k": channel_k}, "weights_chosen": chosen}
    print(f"rank {rank}, steps {steps}, lr {lr}, l2 {l2}, channel top {channel_k}; weight chosen per fold: {chosen}")
    for name in (*SETS, "pooled"):
        ix = [i for i in range(n) if name == "pooled" or data.recs[i]["set"] == name]
        base = {str(i): ranks[0.0][i] for i in ix}
        new = {str(i): nested[i] for i in ix}
        table = compare_ranks(base, new)
        report[name] = {m: asdict(d) for m, d in table.items()}
        line = ", ".join(f"{m} {d.a:.3f} -> {d.b:.3f} ({d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}])" for m, d in table.items())
        print(f"  {name} ({len(ix)}): {line}")
    golds = [{str(g) for g in rec["gold"]} for rec in data.recs]
    for seen in (True, False):
        ix = [i for i in range(n) if data.recs[i]["set"] == "consult"
              and bool(golds[i] & set().union(*(golds[j] for j in range(len(data.recs)) if data.folds[j] != data.folds[i] and data.targeted(j)))) == seen]
        print(f"  consult, gold article {'among' if seen else 'not among'} the training golds ({len(ix)}): "
              f"R@10 {sum(bool(ranks[0.0][i]) for i in ix)} -> {sum(bool(nested[i]) for i in ix)}, MRR@10 "
              f"{np.mean([mrr(ranks[0.0][i]) for i in ix]):.3f} -> {np.mean([mrr(nested[i]) for i in ix]):.3f}")
    return report


def save_adapter(out: Path, w: np.ndarray, u: np.ndarray, meta: dict) -> None:
    """The adapter in domains.pack.load_query_adapter's form."""
    meta = {"embedding_model": "e5onnx", "question_types": list(TYPES), **meta}
    np.savez(out, down=w.astype(np.float32), up=u.astype(np.float32), meta=json.dumps(meta, ensure_ascii=False))


def train_all(out: Path, rank: int, steps: int, lr: float, l2: float, extra: bool = False) -> None:
    """The shipped adapter: fitted on every lay dev question (and the extra training questions)."""
    data = Data(extra)
    training = [i for i in range(len(data.recs)) if data.targeted(i)]
    w, u = train(data, training, rank, steps, lr, l2)
    meta = {"rank": rank, "steps": steps, "lr": lr, "l2": l2, "training_questions": len([i for i in training if data.gold_rows[i]]),
            "extra_questions": len(data.recs) - data.n_dev,
            "command": f"python bench/query_adapter_study.py train --rank {rank} --steps {steps} --lr {lr} --l2 {l2}"
                       + (" --with-extra" if extra else "")}
    save_adapter(out, w, u, meta)
    print(f"{meta['training_questions']} lay questions -> {out}")


def folds(out_dir: Path, rank: int, steps: int, lr: float, l2: float, extra: bool = False) -> None:
    """One adapter per fold, fitted on the other folds' lay questions (and the extra training questions;
    ``fold<k>.npz``), and the fold of every dev question (``folds.json``: {set/id: fold}), for the end-to-end
    check (``e2e``)."""
    data = Data(extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    for fold in range(FOLDS):
        training = [i for i in range(len(data.recs)) if data.folds[i] != fold and data.targeted(i)]
        w, u = train(data, training, rank, steps, lr, l2)
        save_adapter(out_dir / f"fold{fold}.npz", w, u, {"fold": fold, "rank": rank, "steps": steps, "lr": lr, "l2": l2})
    assignment = {f"{rec['set']}/{rec['id']}": int(f) for rec, f in zip(data.recs[:data.n_dev], data.folds)}
    (out_dir / "folds.json").write_text(json.dumps(assignment))
    print(f"{FOLDS} fold adapters -> {out_dir}")


async def _fold_ranks(address: str, rows: list[dict]) -> tuple[dict, dict, list[float], list[float]]:
    """Each row's first gold rank (top 10) through ``address``'s Search with the adapter and with pg.adapted
    switched off, and the latency of each call (ms)."""
    import time

    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    import uuid

    on, off, on_ms, off_ms = {}, {}, [], []
    async with grpc.aio.insecure_channel(address) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for n, row in enumerate(rows):
            key = f"{row['set']}/{row['id']}"
            for ranks, disabled in ((on, []), (off, ["pg.adapted"])):
                reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=10, disabled_stages=disabled),
                                          timeout=60)
                ranks[key] = first_gold_rank([r.document_id for r in reply.results], {str(g) for g in row["gold"]})
            if reply.query_info.question_type not in TYPES:
                continue  # pg.adapted runs for the adapter's question types only: their latency is the cost
            # latency apart: each side cold (a fresh prefix, so no cached query embedding), the order alternating
            sides = [(on_ms, []), (off_ms, ["pg.adapted"])]
            for times, disabled in (sides if n % 2 else sides[::-1]):
                started = time.perf_counter()
                await stub.Search(gateway_pb2.SearchRequest(query=f"{uuid.uuid4().hex[:6]} {row['query']}", top_k=10,
                                                            disabled_stages=disabled), timeout=60)
                times.append((time.perf_counter() - started) * 1000)
    return on, off, on_ms, off_ms


def e2e(fold_dir: Path) -> None:
    """Nested cross-validation end to end: for each fold, a second gateway over the running stack's services with
    that fold's adapter (GRAPHMESH_GATEWAY_QUERY_ADAPTER_FILE), asked that fold's questions with pg.adapted on
    and off; per set and pooled, R@1 / R@10 / MRR@10 with paired intervals, and Search p50 either way."""
    import time

    from mesh_ab import OFF, spawn

    from services.cli.evaluate import load_dataset
    from services.cli.significance import compare_ranks
    from services.cli.stack import StackConfig, check_health, service_env, state_dir, use_local_mesh_token

    use_local_mesh_token()
    assignment = json.loads((fold_dir / "folds.json").read_text())
    rows = [{**row, "set": name} for name in SETS
            for row in load_dataset(SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl")]
    base_env = service_env(StackConfig(), stack_dsn(), f"bolt://127.0.0.1:{StackConfig().neo4j_bolt_port}")
    on, off, on_ms, off_ms = {}, {}, [], []
    for fold in range(FOLDS):
        env = {**base_env, "GRAPHMESH_GATEWAY_QUERY_ADAPTER_FILE": str(fold_dir / f"fold{fold}.npz"),
               "GRAPHMESH_GATEWAY_PORT": OFF.rsplit(":", 1)[1], "GRAPHMESH_GATEWAY_METRICS_PORT": "61151",
               "GRAPHMESH_GATEWAY_REST__PORT": "-1"}
        proc = spawn("services.gateway", env, state_dir() / "logs" / f"query-adapter-fold{fold}-gateway.log")
        try:
            deadline = time.monotonic() + 120
            while not check_health(OFF):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"fold {fold}'s gateway did not start: see its log under {state_dir() / 'logs'}")
                time.sleep(0.5)
            mine = [r for r in rows if assignment[f"{r['set']}/{r['id']}"] == fold]
            a, b, a_ms, b_ms = asyncio.run(_fold_ranks(OFF, mine))
            on.update(a), off.update(b), on_ms.extend(a_ms), off_ms.extend(b_ms)
            print(f"fold {fold}: {len(mine)} questions", flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    report = {}
    for name in (*SETS, "pooled"):
        keys = [k for k in on if name == "pooled" or k.startswith(name + "/")]
        table = compare_ranks({k: off[k] for k in keys}, {k: on[k] for k in keys})
        report[name] = {m: asdict(d) for m, d in table.items()}
        print(f"  {name} ({len(keys)}): " + ", ".join(f"{m} {d.a:.3f} -> {d.b:.3f} ({d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}])"
                                                     for m, d in table.items()))
    report["lay_search_ms"] = {"questions": len(on_ms), "p50_with": float(np.median(on_ms)), "p50_without": float(np.median(off_ms)),
                               "p95_with": float(np.percentile(on_ms, 95)), "p95_without": float(np.percentile(off_ms, 95))}
    print(f"  Search of the {len(on_ms)} lay questions, cold, p50 / p95: {np.median(on_ms):.1f} / "
          f"{np.percentile(on_ms, 95):.1f} ms with pg.adapted, {np.median(off_ms):.1f} / {np.percentile(off_ms, 95):.1f} ms without")
    report["ranks"] = {"with": on, "without": off}  # set/id -> first gold rank, to pair with other runs
    (RESULTS / "query_adapter_e2e.json").write_text(json.dumps(report, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["vectors", "extra-vectors", "study", "train", "folds", "e2e"])
    parser.add_argument("--extra", type=Path, nargs="*", default=[],
                        help="extra-vectors: the extra training questions (JSON lines)")
    parser.add_argument("--with-extra", action="store_true",
                        help="study/train/folds: train on the extra questions too (embedded by extra-vectors)")
    parser.add_argument("--eval-files", type=Path, nargs="*", default=[],
                        help="extra-vectors: more evaluation questions the extra ones must not be close to")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--l2", type=float, default=1e-2)
    parser.add_argument("--weights", type=float, nargs="+", default=list(WEIGHTS),
                        help="study: the pg.adapted weights the nested folds choose from (one: that weight)")
    parser.add_argument("--types", default=LAY,
                        help="comma-separated question types the adapter is fitted on and applied to")
    parser.add_argument("--channel-k", type=int, default=20, help="pg.adapted's candidates (the profile's retrieve_top_k)")
    parser.add_argument("--out", type=Path, default=Path("domains/law_zh/query_adapter.npz"),
                        help="train: the adapter file; folds: a directory")
    args = parser.parse_args()
    global TYPES
    TYPES = tuple(t.strip() for t in args.types.split(",") if t.strip())
    extra = args.with_extra
    if args.command == "vectors":
        vectors()
    elif args.command == "extra-vectors":
        extra_vectors(args.extra, args.eval_files)
    elif args.command == "study":
        study(args.rank, args.steps, args.lr, args.l2, args.channel_k, extra, tuple(args.weights))
    elif args.command == "folds":
        folds(args.out, args.rank, args.steps, args.lr, args.l2, extra)
    elif args.command == "e2e":
        e2e(args.out)
    else:
        train_all(args.out, args.rank, args.steps, args.lr, args.l2, extra)


if __name__ == "__main__":
    main()
