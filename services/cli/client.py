"""Client commands of ``graphmesh``: they talk to the gateway at
GRAPHMESH_GATEWAY_ADDR (default 127.0.0.1:50051) and print what it answers."""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

import grpc
from google.protobuf import json_format

from graphmesh.common.v1 import entity_pb2, types_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common import names
from services.common.clients import blocking_channel
from services.common.errors import field_violations
from services.common.packed_context import source_label
from services.common.settings import MeshAddresses
from services.ingest.jsonl_documents import parse_jsonl
from services.ingest.jsonl_entities import parse_entities, parse_triples


def gateway_channel(options: list | None = None) -> grpc.Channel:
    """A channel to the gateway: TLS per GRAPHMESH_TLS_*, and the API key in
    GRAPHMESH_API_KEY (if set) sent as ``authorization: Bearer KEY``."""
    return blocking_channel(gateway_address(), api_key_metadata() or None, options)


def api_key_metadata() -> list[tuple[str, str]]:
    """``[("authorization", "Bearer KEY")]`` for the key in GRAPHMESH_API_KEY, [] when none is set: every
    command that calls the gateway sends it (a trial's `collections list` and `eval` left it out)."""
    key = os.environ.get("GRAPHMESH_API_KEY", "").strip()
    return [("authorization", f"Bearer {key}")] if key else []


def gateway_address() -> str:
    """The gateway's gRPC address from the environment."""
    return MeshAddresses().gateway_addr


def _stub(ch: grpc.Channel) -> gateway_pb2_grpc.GatewayServiceStub:
    return gateway_pb2_grpc.GatewayServiceStub(ch)


def proto_json(message, indent: int | None = 2) -> str:
    """A reply as the REST routes print it: proto3 JSON (camelCase) with
    every field, zeros and empty lists included, so a script reads the same
    keys from both (a trial's script failed on a pg.centred score of 0.0
    printed without its "score")."""
    return json_format.MessageToJson(message, ensure_ascii=False, indent=indent, always_print_fields_with_no_presence=True)


def open_text(path: Path):
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
    path = Path(args.file)
    if not path.is_file():
        print(f"error: no such file: {path}", file=sys.stderr)
        return 2
    try:
        totals, failures = ingest_file(path, args.kind, args.batch, getattr(args, "collection", "") or "",
                                       getattr(args, "pack", "") or "")
    except grpc.RpcError as err:
        return _report_rpc_error(err)
    for index, doc_id, reason in failures[:SHOWN_FAILURES]:
        print(f"failed line {index + 1} id={doc_id or '?'}: {reason}", file=sys.stderr)
    if len(failures) > SHOWN_FAILURES:
        print(f"... and {len(failures) - SHOWN_FAILURES} more failed lines", file=sys.stderr)
    print(json.dumps(totals, ensure_ascii=False))
    return 0 if not totals["failed"] else 1


#: Ingest calls a documents upload keeps in flight: while the gateway
#: stores one batch it embeds the next (docs/benchmarks.md "Ingestion").
DOCUMENT_CALLS_IN_FLIGHT = 2


def _document_id(line: bytes) -> object:
    """The "id" of a JSONL document line, or None (not JSON: the gateway
    reports it)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("id") if isinstance(record, dict) else None


def unreadable_batch(err: grpc.RpcError, batch: list[bytes], origin: list[int],
                     kind: str) -> list[tuple[int, str, str]] | None:
    """The failures of a batch the gateway refused whole because none of its
    records could be read (INVALID_ARGUMENT naming "jsonl[i]"): each
    record's input line (from 0), id and reason, read with the gateway's own
    parser, so that the file goes on past the batch (a trial's file lost its
    later good records behind a batch of bad ones). None for any other error,
    or when the parser reads a record the gateway did not."""
    if err.code() != grpc.StatusCode.INVALID_ARGUMENT or not (err.details() or "").startswith("jsonl["):
        return None
    parse = {"documents": parse_jsonl, "entities": parse_entities, "triples": parse_triples}[kind]
    failed = parse(b"\n".join(batch))[1]
    if len(failed) != len(batch):
        return None
    return [(origin[f.index] if 0 <= f.index < len(origin) else origin[0], f.id, f"{f.field + ': ' if f.field else ''}{f.reason}")
            for f in failed]


def _batches(lines, size: int):
    """Consecutive (lines, input line numbers) of at most ``size``."""
    batch: list[bytes] = []
    origin: list[int] = []
    for number, line in lines:
        batch.append(line.rstrip(b"\n"))
        origin.append(number)
        if len(batch) >= size:
            yield batch, origin
            batch, origin = [], []
    if batch:
        yield batch, origin


def ingest_file(path: Path, kind: str, batch_size: int = 0, collection: str = "", pack: str = "",
                progress: bool = True) -> tuple[dict[str, int], list[tuple[int, str, str]]]:
    """Sends the JSONL(.gz) file ``path`` to the gateway's Ingest RPC,
    ``batch_size`` records per call (0: DEFAULT_BATCH[kind]), with a tqdm bar
    on stderr unless ``progress`` is False. Documents go with
    DOCUMENT_CALLS_IN_FLIGHT calls at once, except that a batch holding an
    id of a batch still in flight waits for it, so the later record of an
    id is still the one kept; entities and triples one call at a time.

    Returns:
        (totals: received / stored / unchanged / chunks / failed counts,
        failures: (input line number from 0, id, reason) each, in input order).
    A batch none of whose records could be read is reported record by
    record and the file goes on (``unreadable_batch``).

    Raises:
        grpc.RpcError: a call failed (the batches before it are stored;
            those in flight beside it may be too).
    """
    from concurrent.futures import ThreadPoolExecutor
    from collections import deque

    from tqdm import tqdm

    with open_text(path) as f:
        total = sum(1 for line in f if line.strip())
    totals = {"received": 0, "stored": 0, "unchanged": 0, "chunks": 0, "failed": 0}
    failures: list[tuple[int, str, str]] = []
    in_flight = DOCUMENT_CALLS_IN_FLIGHT if kind == "documents" else 1
    with gateway_channel(options=[("grpc.max_send_message_length", 64 << 20)]) as ch, \
            open_text(path) as f, tqdm(total=total, unit="doc", desc=f"ingest {kind}", file=sys.stderr,
                                       disable=not progress) as bar, ThreadPoolExecutor(in_flight) as pool:
        stub = _stub(ch)
        pending: deque = deque()  # (future, origin, ids, batch) in input order

        def send(batch: list[bytes]):
            return stub.Ingest(gateway_pb2.IngestRequest(jsonl=b"\n".join(batch), kind=INGEST_KINDS[kind],
                                                         collection=collection, domain_pack=pack), timeout=1800)

        def settle() -> None:
            future, origin, _, batch = pending.popleft()
            try:
                reply = future.result()
            except grpc.RpcError as err:
                unreadable = unreadable_batch(err, batch, origin, kind)
                if unreadable is None:
                    raise
                totals["received"] += len(batch)
                totals["failed"] += len(unreadable)
                failures.extend(unreadable)
                bar.update(len(batch))
                return
            for key in ("received", "stored", "unchanged", "chunks"):
                totals[key] += getattr(reply, key)
            totals["failed"] += len(reply.failures)
            failures.extend((origin[fl.index] if 0 <= fl.index < len(origin) else origin[0] + fl.index, fl.id, fl.reason)
                            for fl in reply.failures)
            bar.update(reply.received)

        lines = ((number, ln) for number, ln in enumerate(f) if ln.strip())  # numbered as the file's lines, blanks counted
        if kind == "triples":
            # Group by predicate so each call carries few relation types (the
            # graph store writes one statement per type); failures still name
            # the input line. Lines that are not JSON sort first.
            lines = sorted(lines, key=lambda pair: _predicate_of(pair[1]))
        try:
            for batch, origin in _batches(lines, batch_size or DEFAULT_BATCH[kind]):
                ids = {_document_id(line) for line in batch} - {None} if in_flight > 1 else set()
                while pending and (len(pending) >= in_flight or any(ids & other for _, _, other, _ in pending)):
                    settle()
                pending.append((pool.submit(send, batch), origin, ids, batch))
            while pending:
                settle()
        finally:
            for future, _, _, _ in pending:
                future.cancel()
    return totals, failures


#: Failed lines an ingest prints one by one; it says how many more there were.
SHOWN_FAILURES = 20


def _print_search(reply: gateway_pb2.SearchResponse) -> None:
    for rank, cand in enumerate(reply.results, start=1):
        channels = ", ".join(f"{s.channel}#{s.rank}" for s in cand.channel_scores)
        label = source_label(cand)
        shown = "  ".join(f"{k}={cand.metadata[k]}" for k in ("status", "page") if k in cand.metadata)
        print(f"{rank:2d}. [{cand.document_id}] {label}  fused={cand.fused_score:.4f}  ({channels})" + (f"  {shown}" if shown else ""))
        print(f"    {cand.text[:120].replace(chr(10), ' ')}")
    timings = "  ".join(
        f"{t.stage}={t.duration_ms:.0f}ms"
        + ("" if t.status == types_pb2.STAGE_STATUS_OK else f"({types_pb2.StageStatus.Name(t.status).removeprefix('STAGE_STATUS_').lower()})")
        for t in reply.timings
    )
    print(f"stages: {timings}")
    notes = _scope_notes(reply.timings)
    if not reply.results and not notes:
        print("no results")
    for note in notes:
        print(f"note: {note}")
    if reply.degraded:
        print(f"degraded: {', '.join(reply.degraded)}")


def cmd_search(args: argparse.Namespace, answer: bool = False) -> int:
    """Prints ranked evidence (and the answer) for one question."""
    from services.cli.scope_args import scope

    try:
        where = scope(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with gateway_channel() as ch:
        stub = _stub(ch)
        try:
            if answer:
                reply = stub.Answer(gateway_pb2.AnswerRequest(query=args.query, top_k=args.top_k, **where), timeout=args.timeout)
            else:
                reply = stub.Search(gateway_pb2.SearchRequest(query=args.query, top_k=args.top_k, **where), timeout=args.timeout)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    if where.get("filters") and not args.json:
        print(f"filter: {args.filter}  collections: {', '.join(where['collections']) or 'default'}")
    if args.json:
        print(proto_json(reply))
        return 0
    if answer:  # the answer first, the evidence it was made from after it (a trial scrolled past ten results)
        print(f"answer ({gateway_pb2.AnswerMode.Name(reply.mode).removeprefix('ANSWER_MODE_').lower()}):\n{reply.answer}")
        _print_answer_notes(reply)
        passed = [f"{gateway_pb2.FallbackStrategy.Name(a.strategy).removeprefix('FALLBACK_STRATEGY_').lower()}: {a.reason}"
                  for a in reply.attempts if not a.answered]
        print(f"strategy: {gateway_pb2.FallbackStrategy.Name(reply.strategy).removeprefix('FALLBACK_STRATEGY_').lower()}"
              + (f" (passed over: {'; '.join(passed)})" if passed else ""))
        print("\nevidence:")
        _print_search(reply.search)
    else:
        _print_search(reply)
    return 0


def _scope_notes(timings) -> list[str]:
    """The details of stages skipped for a reason the user can act on (a
    collection no store holds, filters nothing matches)."""
    return [t.detail for t in timings if t.stage in names.SCOPE_NOTE_STAGES and t.detail]


def _abstained_because(reply: gateway_pb2.AnswerResponse) -> str:
    """Why an answer abstained: the reason its deciding attempt gives (the answerability under the threshold, or
    the rule that refused: a code or name no source holds, words no dictionary knows), else the answerability
    against the threshold. A trial's refusal by a rule printed "answerability 0.997 < 0.500"."""
    if reply.attempts and reply.attempts[-1].reason:
        return reply.attempts[-1].reason
    return f"answerability {reply.answerability:.3f} < {reply.answerability_threshold:.3f}"


def _cited(citation: gateway_pb2.Citation) -> str:
    """A source's line after its number: label, caveat (a repealed law's 【已废止】) and document id."""
    caveat = f" 【{citation.caveat}】" if citation.caveat else ""
    return f"{citation.label}{caveat} (document {citation.document_id})"


def _print_answer_notes(reply: gateway_pb2.AnswerResponse) -> None:
    """Citations, or the nearest sources of a no-answer, and the sentences
    the citation check found unsupported."""
    for c in reply.citations:
        print(f"  [{c.number}] {_cited(c)}")
    if reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and reply.insufficient_sources:
        print(f"nearest sources (not sufficient to answer; {_abstained_because(reply)}):")
        for c in reply.insufficient_sources:
            print(f"  {c.number}. {_cited(c)}")
    for note in _scope_notes(reply.search.timings):
        print(f"note: {note}")
    for u in reply.unsupported_sentences:
        print(f"  unsupported: {u.sentence} ({u.reason})")


def cmd_entities(args: argparse.Namespace) -> int:
    """Prints library entities for one query with evidence and relation."""
    with gateway_channel() as ch:
        try:
            reply = _stub(ch).SearchEntities(gateway_pb2.SearchEntitiesRequest(
                query=args.query, top_k=args.top_k, collections=getattr(args, "collection", None) or []), timeout=args.timeout)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    if args.json:
        print(proto_json(reply))
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


def cmd_answer_stream(args: argparse.Namespace) -> int:
    """Prints stage events as they happen, then the answer tokens."""
    with gateway_channel() as ch:
        try:
            from services.cli.scope_args import scope

            request = gateway_pb2.AnswerStreamRequest(query=args.query, top_k=args.top_k, **scope(args))
            for event in _stub(ch).AnswerStream(request, timeout=args.timeout):
                kind = event.WhichOneof("event")
                if kind == "stage":
                    print(f"[{event.stage.stage} {event.stage.duration_ms:.0f}ms {event.stage.detail}]", file=sys.stderr, flush=True)
                elif kind == "token":
                    print(event.token, end="", flush=True)
                elif kind == "done":
                    print(f"\n\nverified answer:\n{event.done.answer}")
                    _print_answer_notes(event.done)
                    name = gateway_pb2.FallbackStrategy.Name(event.done.strategy).removeprefix("FALLBACK_STRATEGY_").lower()
                    print(f"strategy: {name}", file=sys.stderr)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    return 0


def cmd_deep(args: argparse.Namespace) -> int:
    """Runs DeepSearch and prints each iteration and the synthesis."""
    with gateway_channel() as ch:
        try:
            from services.cli.scope_args import scope

            reply = _stub(ch).DeepSearch(gateway_pb2.DeepSearchRequest(query=args.query, top_k=args.top_k, **scope(args)),
                                         timeout=args.timeout)
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    if args.json:
        print(proto_json(reply))
        return 0
    for it in reply.iterations:
        print(f"iteration {it.number}: queries={list(it.queries)} new={len(it.new_chunk_ids)} growth={it.growth_rate:.3f}")
    print(f"stopped: {reply.stop_reason}\n\n{reply.answer.answer}")
    for c in reply.answer.citations:
        print(f"  [{c.number}] {_cited(c)}")
    return 0
