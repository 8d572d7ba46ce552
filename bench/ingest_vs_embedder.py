"""Ingest against the raw embedder, same texts, same run (issue 27 item 2;
a benchmark, not a test).

Against a running stack with empty stores and a cold embedding cache (a
fresh GRAPHMESH_HOME and GRAPHMESH_EXPANDER_EMBEDDING__CACHE), for ``--n``
law articles starting at ``--offset``:

1. the raw embedder: e5onnx in this process (2 threads, the expander's
   model and settings), passage side, on exactly the texts the gateway
   embeds for those articles (their chunks' ``embedding_text``, chunked as
   the law pack chunks them), batches of 256 like the gateway's Embed calls;
   the stack is idle meanwhile;
2. ``graphmesh ingest documents --pack law_zh`` of the same articles (the CLI's client:
   batches in flight, the gateway embeds, stores in PostgreSQL and Neo4j,
   then embeds the chunks' sentences when ``ingest.sentence_vectors`` is on:
   before each call returns with ``sentence_vectors_mode=inline``, in the
   background once the ingest is over by default).

Prints articles/s of each and their ratio (ingest / raw; the issue's target
is at least 0.85), and the ratio against the raw embedder on everything the
ingest call embeds (the chunks, then, inline, their sentence units). In the
background mode it then waits until the gateway reports no sentence pending
(``graphmesh_sentence_backfill_pending`` on its metrics port) and prints
when that was, against the raw embedder on chunks and sentences. Use a new
``--offset`` for each run so the cache stays cold::

    GRAPHMESH_HOME=/tmp/gm-ingest GRAPHMESH_EXPANDER_EMBEDDING__CACHE=/tmp/gm-ingest/cache.sqlite graphmesh up --detach
    python bench/ingest_vs_embedder.py --n 3000 --offset 0
    python bench/ingest_vs_embedder.py --n 3000 --offset 3000 --import   # one ImportDocuments operation
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_CORPUS, save  # noqa: E402


def passage_texts(lines: list[str], pack: str) -> tuple[list[str], list[str]]:
    """(chunk texts, sentence units) the gateway embeds for these JSONL
    document lines, chunked as domain pack ``pack`` chunks them: each
    chunk's ``embedding_text``, then (with ``ingest.sentence_vectors``) the
    distinct ``sentence_units`` of the chunks' texts."""
    from services.gateway.config import GatewaySettings
    from services.gateway.library.document_ingest import DocumentIngest
    from services.gateway.search.sentence_maxsim import sentence_units
    from services.ingest.chunking import chunk_document, embedding_text
    from services.ingest.jsonl_documents import parse_jsonl

    docs, failures = parse_jsonl("\n".join(lines).encode())
    assert not failures, failures[:3]
    chunking = DocumentIngest(GatewaySettings(), None, []).chunking_for(pack)
    chunks = [c for d in docs for c in chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, chunking, "default").chunks]
    return [embedding_text(c) for c in chunks], list(dict.fromkeys(s for c in chunks for s in sentence_units(c.text)))


def wait_for_backfill(started: float, timeout: float = 3600.0) -> float:
    """Seconds from ``started`` (perf_counter) until the gateway's metrics
    report no sentence pending for the background worker."""
    import urllib.request

    from services.cli.stack import METRICS_OFFSET
    from services.common.settings import DEFAULT_PORTS

    port = int(os.environ.get("GRAPHMESH_GATEWAY_METRICS_PORT", DEFAULT_PORTS["gateway"] + METRICS_OFFSET))
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            lines = reply.read().decode().splitlines()
        pending = next((float(line.split()[-1]) for line in lines
                        if line.startswith("graphmesh_sentence_backfill_pending ")), 0.0)
        if pending == 0:
            return time.perf_counter() - started
        time.sleep(0.5)
    raise SystemExit("the gateway's background sentence queue did not drain in time")


def import_documents(jsonl: bytes, pack: str) -> tuple[dict, list]:
    """One ImportDocuments operation of ``jsonl``, waited for: (its counts, its failures)."""
    import grpc
    from google.longrunning import operations_pb2, operations_pb2_grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.common.settings import MeshAddresses

    with grpc.insecure_channel(MeshAddresses().gateway_addr, options=[("grpc.max_send_message_length", 256 << 20)]) as ch:
        name = gateway_pb2_grpc.GatewayServiceStub(ch).ImportDocuments(
            gateway_pb2.IngestRequest(jsonl=jsonl, domain_pack=pack), timeout=60).name
        operations = operations_pb2_grpc.OperationsStub(ch)
        while not (op := operations.GetOperation(operations_pb2.GetOperationRequest(name=name), timeout=30)).done:
            time.sleep(0.2)
    reply = gateway_pb2.IngestResponse()
    assert op.response.Unpack(reply), op.error
    return {"received": reply.received, "stored": reply.stored, "unchanged": reply.unchanged, "chunks": reply.chunks,
            "failed": len(reply.failures)}, list(reply.failures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--label", default="")
    parser.add_argument("--pack", default="law_zh", help="domain pack of the ingest (make demo's: law_zh)")
    parser.add_argument("--import", dest="as_import", action="store_true",
                        help="one ImportDocuments operation (`ingest --async`, REST documents:import) instead of the CLI's Ingest calls")
    args = parser.parse_args()

    with gzip.open(LAW_CORPUS, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for i, line in enumerate(f) if args.offset <= i < args.offset + args.n]
    texts, sentences = passage_texts(lines, args.pack)

    from services.expander.config import ExpanderSettings
    from services.expander.embedding import build_embedder

    expander = ExpanderSettings()
    embedder = build_embedder(expander.embedding.model, threads=expander.embedding.threads)
    embedder.embed(["预热"], query=False)
    started = time.perf_counter()
    for i in range(0, len(texts), 256):
        embedder.embed(texts[i:i + 256], query=False)
    raw_s = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(0, len(sentences), 256):
        embedder.embed(sentences[i:i + 256], query=False)
    raw_sentences_s = time.perf_counter() - started
    sentence_vectors = os.environ.get("GRAPHMESH_GATEWAY_INGEST__SENTENCE_VECTORS", "true").lower() not in ("0", "false", "no", "off")
    inline = os.environ.get("GRAPHMESH_GATEWAY_INGEST__SENTENCE_VECTORS_MODE", "background") == "inline"
    raw_all_s = raw_s + (raw_sentences_s if sentence_vectors and inline else 0.0)

    from services.cli.client import ingest_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "articles.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        started = time.perf_counter()
        if args.as_import:
            totals, failures = import_documents(path.read_bytes(), args.pack)
        else:
            totals, failures = ingest_file(path, "documents", pack=args.pack, progress=False)
        ingest_s = time.perf_counter() - started
        sentences_done_s = (wait_for_backfill(started) if sentence_vectors and not inline else None)
    assert not failures and totals["stored"] == len(lines), (totals, failures[:3])

    figures = {
        "label": args.label, "path": "ImportDocuments" if args.as_import else "Ingest (the CLI)", "articles": len(lines), "offset": args.offset, "passages": len(texts),
        "model": expander.embedding.model, "threads": expander.embedding.threads,
        "raw_embed_s": round(raw_s, 1), "raw_articles_per_s": round(len(lines) / raw_s, 1),
        "ingest_s": round(ingest_s, 1), "ingest_articles_per_s": round(len(lines) / ingest_s, 1),
        "ratio_ingest_to_raw": round(raw_s / ingest_s, 3),
        "sentence_units": len(sentences), "raw_sentences_s": round(raw_sentences_s, 1),
        "ratio_ingest_to_raw_of_all_it_embeds": round(raw_all_s / ingest_s, 3), "ingest_totals": totals,
        "sentence_vectors_env": os.environ.get("GRAPHMESH_GATEWAY_INGEST__SENTENCE_VECTORS", "(default: on)"),
        "sentence_vectors_mode": "inline" if inline else "background",
        "background_sentences_done_s": None if sentences_done_s is None else round(sentences_done_s, 1),
        "ratio_background_done_to_raw_chunks_and_sentences":
            None if sentences_done_s is None else round((raw_s + raw_sentences_s) / sentences_done_s, 3),
    }
    print(json.dumps(figures, ensure_ascii=False), flush=True)
    save("ingest_vs_embedder", figures)


if __name__ == "__main__":
    main()
