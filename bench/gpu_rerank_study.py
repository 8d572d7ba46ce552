"""The cross-encoder and a fine-tuned bi-encoder trained on a GPU (issue 23
item 5; a benchmark, not a test). Three steps:

    # here (CPU), with the stack up and bench/ltr_study.py dump run:
    python bench/gpu_rerank_study.py prep            # writes .gpu/ (carried to the GPU machine)
    # on the GPU machine (torch + transformers only; nothing of GraphMesh imported):
    python bench/gpu_rerank_study.py train --data .gpu --out $OUT   # .gpu carried
    # here again:
    python bench/gpu_rerank_study.py report DIR      # paired bootstrap intervals per set

``prep`` packs what the GPU run needs: the base encoder (m3e-small, 4
layers, hidden 512) in fp16 safetensors; training pairs made from the law
corpus by ``graphmesh reranker train``'s builder (inverse-cloze and heading
queries, BM25 hard negatives; every query close to an evaluation query
dropped); today's fused candidate lists of every dev question (the
default pipeline through the gateway, from ``ltr_study.py dump``); and the
corpus for dense retrieval.

``train`` runs every model below as its own process, all at once on the
one GPU (``part`` runs one; a small model leaves the GPU mostly idle and
tokenising bounds each loop, so 17 processes on 16 cores finish in about
five minutes), each from the same base:
- "ce.corpus": the cross-encoder trained on the corpus pairs alone,
  scoring the fused top 30 of every dev question (all held out);
- "ce.cv": trained on the corpus pairs plus the dev questions of four folds
  (gold = positive, the fused top 30's other candidates = negatives),
  scoring the fifth (5 folds by question, pooled over the three law sets);
- "ce.cvdev": the same folds, dev questions only (no corpus pairs);
- the bi-encoder (mean pooling, in-batch and hard negatives) before any
  training ("bi.base"), trained on the corpus pairs ("bi.corpus"), and
  under the same 5 folds ("bi.cv"), each retrieving from the whole corpus.
It merges, per question, the rank of the first gold article under each
order (fused; cross-encoder alone over the top 30; blends of min-max
normalised cross-encoder and fused scores; the cross-encoder's scores
themselves, for learning to rank here) into ranks.json, with the recipe
and timings.

``report`` prints R@1 / R@10 / MRR@10 per set and pooled with paired
bootstrap 95% intervals against the fused order (services/cli/significance.py).
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETS = ("scenario", "consult", "facts")
TOP_N = 30
ALPHAS = (0.3, 0.5, 0.7)
FOLDS = 5


# ---------------------------------------------------------------- prep (CPU)

def prep(out: Path, max_pairs: int, negatives: int) -> None:
    """Writes ``out``/{model,pairs.jsonl.gz,dev.jsonl.gz,corpus.jsonl.gz}."""
    sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]
    import torch
    from safetensors.torch import save_file

    from services.cli.reranker_training import TrainConfig, build_pairs, default_exclude_files

    out.mkdir(parents=True, exist_ok=True)
    corpus = Path.home() / ".cache/graphmesh/datasets/law-zh/corpus.jsonl.gz"
    base = Path.home() / ".cache/graphmesh/models/m3e-small"
    model_dir = out / "model"
    model_dir.mkdir(exist_ok=True)
    state = torch.load(base / "pytorch_model.bin", map_location="cpu")
    save_file({k: v.half().contiguous() for k, v in state.items()}, model_dir / "model.safetensors")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (model_dir / name).write_bytes((base / name).read_bytes())

    cfg = TrainConfig(base_model=base, out=out / "unused", documents=[corpus], exclude_queries=default_exclude_files(),
                      max_pairs=max_pairs, negatives=negatives)
    pairs, facts = build_pairs(cfg, progress=lambda m: print(m, flush=True))
    groups: dict[str, dict] = {}
    for p in pairs:
        g = groups.setdefault(p.query, {"query": p.query, "positives": [], "negatives": []})
        (g["positives"] if p.label else g["negatives"]).append(p.passage)
    with gzip.open(out / "pairs.jsonl.gz", "wt") as f:
        for g in groups.values():
            if g["positives"] and g["negatives"]:
                f.write(json.dumps(g, ensure_ascii=False) + "\n")
    (out / "pairs_facts.json").write_text(json.dumps(facts, ensure_ascii=False, indent=1))

    with gzip.open(out / "dev.jsonl.gz", "wt") as f:
        for name in SETS:
            with gzip.open(REPO / "bench/results/ltr" / f"{name}.jsonl.gz", "rt") as src:
                for line in src:
                    q = json.loads(line)
                    cands = [{"id": c["document_id"], "text": "\n".join([" ".join(c["heading_path"]), c["text"]]),
                              "fused": c["fused_score"]} for c in q["candidates"]]
                    f.write(json.dumps({"id": q["id"], "set": name, "query": q["query"], "gold": q["gold"],
                                        "candidates": cands}, ensure_ascii=False) + "\n")
    (out / "corpus.jsonl.gz").write_bytes(corpus.read_bytes())
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{len(groups)} training queries, {len(pairs)} pairs; {size / 2**20:.1f} MiB in {out}")


# --------------------------------------------------------------- train (GPU)

def _read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def _first_gold_rank(ids: list[str], gold: set[str]) -> int | None:
    for rank, i in enumerate(ids, start=1):
        if i in gold:
            return rank
    return None


def _minmax(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [0.0 if hi == lo else (v - lo) / (hi - lo) for v in values]


ARMS = ("ce.corpus", "ce.cv", "ce.cvdev", "bi.base", "bi.corpus", "bi.cv")
CV_ARMS = ("ce.cv", "ce.cvdev", "bi.cv")


def _fold_of(dev: list[dict]) -> dict[str, int]:
    order = list(range(len(dev)))
    random.Random(0).shuffle(order)
    return {dev[i]["set"] + "/" + dev[i]["id"]: n % FOLDS for n, i in enumerate(order)}


def train_part(data: Path, out_file: Path, arm: str, fold: int, ce_steps: int, cvdev_steps: int, bi_steps: int,
               batch: int, group: int, max_length: int, seed: int, limit: int = 0) -> None:
    """Trains one model of ``arm`` (``fold`` for a cross-validated arm) from the
    base and writes the dev questions it scores to ``out_file`` as JSON:
    ``{"arm", "fold", "seconds", "results": {"set/id": row}}``. A cross-encoder
    row holds the first gold rank under each order and the cross-encoder
    scores of the fused top 30 (for learning to rank on the CPU); a
    bi-encoder row the first gold rank of dense retrieval over the corpus.
    ``limit`` > 0 keeps that many dev questions and 50x as many corpus
    articles (a smoke run on a CPU)."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    started = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = AutoTokenizer.from_pretrained(data / "model")
    query_chars = max_length // 2  # a long case description leaves room for the passage (one token per character)
    corpus_groups = _read_jsonl_gz(data / "pairs.jsonl.gz")
    dev = _read_jsonl_gz(data / "dev.jsonl.gz")
    if limit:
        dev = random.Random(0).sample(dev, limit)
    fold_of = _fold_of(dev)
    if arm in CV_ARMS:
        train_q = [q for q in dev if fold_of[q["set"] + "/" + q["id"]] != fold]
        test_q = [q for q in dev if fold_of[q["set"] + "/" + q["id"]] == fold]
    else:
        train_q, test_q = [], dev

    def dev_groups(questions: list[dict]) -> list[dict]:
        """A training group per gold candidate of each question: the gold
        text against the question's other fused candidates."""
        out_groups = []
        for q in questions:
            gold = set(q["gold"])
            cands = q["candidates"][:TOP_N]
            neg = [c["text"] for c in cands if c["id"] not in gold]
            for c in cands:
                if c["id"] in gold and neg:
                    out_groups.append({"query": q["query"], "positives": [c["text"]], "negatives": neg})
        return out_groups

    def sample_group(g: dict) -> list[str]:
        negs = rng.sample(g["negatives"], min(group - 1, len(g["negatives"])))
        while len(negs) < group - 1:
            negs.append(rng.choice(g["negatives"]))
        return [rng.choice(g["positives"])] + negs

    def schedule(opt, steps):
        warm = max(1, steps // 10)
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm)))

    def train_ce(groups: list[dict], steps: int):
        model = AutoModelForSequenceClassification.from_pretrained(data / "model", num_labels=1).float().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
        sched = schedule(opt, steps)
        model.train()
        for _ in range(steps):
            chosen = [groups[rng.randrange(len(groups))] for _ in range(batch)]
            queries, passages = [], []
            for g in chosen:
                texts = sample_group(g)
                queries += [g["query"][:query_chars]] * len(texts)
                passages += texts
            enc = tok(queries, passages, truncation="only_second", max_length=max_length, padding=True, return_tensors="pt").to(device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
                logits = model(**enc).logits.view(batch, group).float()
            loss = F.cross_entropy(logits, torch.zeros(batch, dtype=torch.long, device=device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
        model.eval()
        return model

    @torch.no_grad()
    def ce_scores(model, pairs: list[tuple[str, str]]) -> list[float]:
        scores: list[float] = []
        for i in range(0, len(pairs), 512):
            part = pairs[i:i + 512]
            enc = tok([q[:query_chars] for q, _ in part], [t for _, t in part], truncation="only_second",
                      max_length=max_length, padding=True, return_tensors="pt").to(device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
                scores += model(**enc).logits.view(-1).float().tolist()
        return scores

    def rerank_ranks(model, questions: list[dict]) -> dict[str, dict]:
        pairs = [(q["query"], c["text"]) for q in questions for c in q["candidates"][:TOP_N]]
        flat = iter(ce_scores(model, pairs))
        out_ranks = {}
        for q in questions:
            gold = set(q["gold"])
            cands = q["candidates"]
            head = cands[:TOP_N]
            ce = [next(flat) for _ in head]
            if not head:
                out_ranks[f"{q['set']}/{q['id']}"] = {"fused": None, "ce": None, **{f"blend{a}": None for a in ALPHAS}, "scores": []}
                continue
            fused = _minmax([c["fused"] for c in head])
            cen = _minmax(ce)
            tail = [c["id"] for c in cands[TOP_N:]]
            row = {"fused": _first_gold_rank([c["id"] for c in cands], gold)}
            orders = {"ce": ce, **{f"blend{a}": [a * x + (1 - a) * y for x, y in zip(cen, fused)] for a in ALPHAS}}
            for name, scores in orders.items():
                ranked = [c["id"] for _, c in sorted(zip(scores, head), key=lambda t: -t[0])]
                row[name] = _first_gold_rank(ranked + tail, gold)
            row["scores"] = [round(x, 4) for x in ce]
            out_ranks[f"{q['set']}/{q['id']}"] = row
        return out_ranks

    def encode(model, batch_texts: list[str]) -> "torch.Tensor":
        enc = tok(batch_texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            hidden = model(**enc).last_hidden_state.float()
        mask = enc["attention_mask"].unsqueeze(-1).float()
        return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1), dim=-1)

    @torch.no_grad()
    def dense_ranks(model, questions: list[dict]) -> dict[str, dict]:
        corpus = _read_jsonl_gz(data / "corpus.jsonl.gz")
        if limit:
            corpus = corpus[: limit * 50]
        ids = [str(r["id"]) for r in corpus]
        texts = [" ".join(p for p in (r.get("law"), r.get("chapter"), r.get("section"), r.get("article")) if p) + "\n" + r["text"]
                 for r in corpus]
        model.eval()
        matrix = torch.cat([encode(model, texts[i:i + 512]) for i in range(0, len(texts), 512)])
        out_ranks = {}
        for i in range(0, len(questions), 256):
            part = questions[i:i + 256]
            qv = encode(model, [q["query"] for q in part])
            top = (qv @ matrix.T).topk(min(100, len(ids)), dim=1).indices.tolist()
            for q, row in zip(part, top):
                out_ranks[f"{q['set']}/{q['id']}"] = {"dense": _first_gold_rank([ids[j] for j in row], set(q["gold"]))}
        return out_ranks

    def train_bi(groups: list[dict], steps: int):
        model = AutoModel.from_pretrained(data / "model").float().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
        sched = schedule(opt, steps)
        for _ in range(steps):
            model.train()
            chosen = [groups[rng.randrange(len(groups))] for _ in range(batch)]
            qv = encode(model, [g["query"] for g in chosen])
            passages = []
            for g in chosen:
                passages += sample_group(g)[:2]  # the positive and one hard negative
            pv = encode(model, passages)
            logits = qv @ pv.T / 0.05
            loss = F.cross_entropy(logits, torch.arange(batch, device=device) * 2)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
        return model

    if arm == "ce.corpus":
        results = rerank_ranks(train_ce(corpus_groups, ce_steps), test_q)
    elif arm == "ce.cv":
        results = rerank_ranks(train_ce(corpus_groups + dev_groups(train_q) * 3, ce_steps), test_q)
    elif arm == "ce.cvdev":
        results = rerank_ranks(train_ce(dev_groups(train_q), cvdev_steps), test_q)
    elif arm == "bi.base":
        results = dense_ranks(AutoModel.from_pretrained(data / "model").float().to(device), test_q)
    elif arm == "bi.corpus":
        results = dense_ranks(train_bi(corpus_groups, bi_steps), test_q)
    elif arm == "bi.cv":
        results = dense_ranks(train_bi(corpus_groups + dev_groups(train_q) * 3, bi_steps), test_q)
    else:
        raise ValueError(f"unknown arm {arm!r}; one of {ARMS}")
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(json.dumps({"arm": arm, "fold": fold, "device": device, "seconds": round(time.time() - started, 1),
                                    "results": results}, ensure_ascii=False))
    print(f"{arm} fold {fold}: {len(results)} questions in {time.time() - started:.0f} s", flush=True)


def train(data: Path, out: Path, arms: list[str], deadline: float, part_args: list[str]) -> None:
    """Runs every (arm, fold) part as its own process, all at once on the one
    GPU (a small model leaves it mostly idle, and tokenising bounds each
    loop on the CPU, so parallel processes use the machine's cores); stops
    any part still running after ``deadline`` seconds; merges what finished
    into ``out``/ranks.json with the recipe and timings."""
    import os
    import subprocess

    started = time.time()
    parts_dir = out / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    jobs = []
    for arm in arms:
        for fold in (range(FOLDS) if arm in CV_ARMS else [0]):
            target = parts_dir / f"{arm}-{fold}.json"
            cmd = [sys.executable, __file__, "part", "--data", str(data), "--arm", arm, "--fold", str(fold),
                   "--part-out", str(target), *part_args]
            jobs.append((arm, fold, target, subprocess.Popen(cmd, env=env)))
    while any(p.poll() is None for *_, p in jobs) and time.time() - started < deadline:
        time.sleep(2)
    for *_, p in jobs:
        if p.poll() is None:
            p.kill()
    dev = _read_jsonl_gz(data / "dev.jsonl.gz")
    results: dict[str, dict] = {"fused": {f"{q['set']}/{q['id']}": {"fused": _first_gold_rank([c["id"] for c in q["candidates"]], set(q["gold"]))}
                                          for q in dev}}
    log = {"recipe": {"base": "m3e-small (uer/chinese_roberta_L-4_H-512 + m3e), fp16 weights trained in fp32 with bf16 autocast",
                      "part_args": part_args, "folds": FOLDS, "top_n": TOP_N,
                      "optimizer": "AdamW lr 3e-5 (ce) / 2e-5 (bi), warmup 10%, linear decay",
                      "ce_loss": "listwise softmax cross-entropy over 1 positive + (group-1) negatives",
                      "bi_loss": "InfoNCE, temperature 0.05, in-batch + hard negatives, mean pooling"},
           "parts": {}, "seconds": {}}
    for arm, fold, target, p in jobs:
        if target.exists():
            part = json.loads(target.read_text())
            results.setdefault(arm, {}).update(part["results"])
            log["parts"][f"{arm}-{fold}"] = {"seconds": part["seconds"], "device": part["device"], "questions": len(part["results"])}
        else:
            log["parts"][f"{arm}-{fold}"] = {"missing": True, "returncode": p.returncode}
    log["seconds"]["total"] = round(time.time() - started, 1)
    (out / "ranks.json").write_text(json.dumps({"log": log, "results": results}, ensure_ascii=False))
    print(json.dumps(log, indent=1), flush=True)


# -------------------------------------------------------------- report (CPU)

def report(path: Path) -> None:
    """Per set and pooled: each order's R@1 / R@10 / MRR@10 beside today's
    fused order, with the paired bootstrap interval and permutation p."""
    sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]
    from services.cli.significance import compare_ranks

    run = json.loads(path.read_text())
    results = run["results"]
    print(json.dumps(run["log"], ensure_ascii=False, indent=1))
    fused = {k: v["fused"] for k, v in results.get("fused", results.get("ce.corpus", {})).items()}
    arms = [(f"{regime}: {order}", {k: v[order] for k, v in results[regime].items()})
            for regime in ("ce.corpus", "ce.cv", "ce.cvdev") if regime in results for order in ("ce", *(f"blend{a}" for a in ALPHAS))]
    arms += [(f"{regime}: dense alone", {k: v["dense"] for k, v in results[regime].items()})
             for regime in ("bi.base", "bi.corpus", "bi.cv") if regime in results]
    for scope in (*SETS, "pooled"):
        base = {k: r for k, r in fused.items() if scope == "pooled" or k.startswith(scope + "/")}
        print(f"\n{scope} ({len(base)} questions): b - fused [95% CI], p")
        print("| order | R@1 | R@10 | MRR@10 |\n|---|---|---|---|")
        first = compare_ranks(base, base)
        print("| fused (default) | " + " | ".join(f"{d.a:.3f}" for d in first.values()) + " |")
        for name, ranks in arms:
            deltas = compare_ranks({k: base[k] for k in base if k in ranks}, ranks)  # a run cut short: its questions only
            print(f"| {name} | " + " | ".join(f"{d.b:.3f} ({d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}], p {d.p_value:.3f})"
                                               for d in deltas.values()) + " |")


def ltr_with_cross_encoder(path: Path) -> None:
    """LambdaMART (services/cli/ltr_training.py) over today's dumped lists
    with and without each cross-validated cross-encoder's scores as one
    more channel ("ce": raw score, relative score, rank in the top 30),
    under the cross-encoder's own 5 folds, so that no question is ranked by
    a cross-encoder or a ranker that saw it. Prints the deltas against the
    fused order and against LTR without the cross-encoder."""
    sys.path[:0] = [str(REPO), str(REPO / "gen" / "python"), str(REPO / "bench")]
    from ltr_study import SETS as DUMP_SETS, load_dump
    from services.cli import ltr_training as ltr
    from services.cli.significance import compare_ranks
    from services.reranker.ltr import DEFAULT_CHANNELS, FeatureSpec

    results = json.loads(path.read_text())["results"]
    questions = [q for name in DUMP_SETS for q in load_dump(name)]
    fold_of = _fold_of(questions)

    def with_scores(q: dict, arm: str) -> dict:
        scores = results[arm][ltr.question_key(q)]["scores"]
        rank = {i: r for r, i in enumerate(sorted(range(len(scores)), key=lambda i: -scores[i]), start=1)}
        cands = [dict(c, channels=[*c["channels"], *([["ce", scores[i], rank[i]]] if i < len(scores) else [])])
                 for i, c in enumerate(q["candidates"])]
        return dict(q, candidates=cands)

    fused = {ltr.question_key(q): ltr.first_gold(q) for q in questions}
    plain: dict[str, int | None] = {}
    for arm in ("none", *(a for a in ("ce.cv", "ce.cvdev") if a in results)):
        spec = FeatureSpec() if arm == "none" else FeatureSpec((*DEFAULT_CHANNELS, "ce"))
        data = questions if arm == "none" else [with_scores(q, arm) for q in questions]
        ranks: dict[str, int | None] = {}
        for fold in range(FOLDS):
            booster = ltr.train([q for q in data if fold_of[ltr.question_key(q)] != fold], spec=spec)
            for q in data:
                if fold_of[ltr.question_key(q)] == fold:
                    ranks[ltr.question_key(q)] = ltr.first_gold(q, ltr.ltr_order(booster, q, spec))
        if arm == "none":
            plain = ranks
        for against, ref in (("fused", fused), ("LTR without ce", plain)):
            deltas = compare_ranks(ref, ranks)
            print(f"LTR + {arm} - {against}: " + " | ".join(
                f"{m} {d.b:.3f} ({d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}])" for m, d in deltas.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--out", type=Path, default=REPO / ".gpu")
    p.add_argument("--max-pairs", type=int, default=30000)
    p.add_argument("--negatives", type=int, default=7)
    t = sub.add_parser("train", help="every part at once, merged into OUT/ranks.json")
    t.add_argument("--data", type=Path, default=REPO / ".gpu")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--arms", default=",".join(ARMS))
    t.add_argument("--deadline", type=float, default=480, help="seconds before unfinished parts are stopped")
    one = sub.add_parser("part", help="one model: an arm (and fold)")
    one.add_argument("--data", type=Path, default=REPO / ".gpu")
    one.add_argument("--arm", choices=ARMS, required=True)
    one.add_argument("--fold", type=int, default=0)
    one.add_argument("--part-out", type=Path, required=True)
    for q in (t, one):
        q.add_argument("--ce-steps", type=int, default=600)
        q.add_argument("--cvdev-steps", type=int, default=250)
        q.add_argument("--bi-steps", type=int, default=400)
        q.add_argument("--batch", type=int, default=32)
        q.add_argument("--group", type=int, default=8)
        q.add_argument("--max-length", type=int, default=320)
        q.add_argument("--seed", type=int, default=7)
        q.add_argument("--limit", type=int, default=0, help="smoke run: this many dev questions")
    r = sub.add_parser("report")
    r.add_argument("ranks", type=Path)
    lt = sub.add_parser("ltr", help="the cross-encoder's scores as a learning-to-rank feature (CPU)")
    lt.add_argument("ranks", type=Path)
    args = parser.parse_args()
    if args.command == "prep":
        prep(args.out, args.max_pairs, args.negatives)
    elif args.command in ("train", "part"):
        knobs = ["--ce-steps", args.ce_steps, "--cvdev-steps", args.cvdev_steps, "--bi-steps", args.bi_steps, "--batch", args.batch,
                 "--group", args.group, "--max-length", args.max_length, "--seed", args.seed, "--limit", args.limit]
        if args.command == "train":
            train(args.data, args.out, args.arms.split(","), args.deadline, [str(k) for k in knobs])
        else:
            train_part(args.data, args.part_out, args.arm, args.fold, args.ce_steps, args.cvdev_steps, args.bi_steps, args.batch,
                       args.group, args.max_length, args.seed, args.limit)
    elif args.command == "ltr":
        ltr_with_cross_encoder(args.ranks)
    else:
        report(args.ranks)


if __name__ == "__main__":
    main()
