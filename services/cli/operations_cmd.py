"""``graphmesh ingest ... --async`` and ``graphmesh operations``: ingestion
as a long-running operation of the gateway (ImportDocuments, AIP-151).

  graphmesh ingest documents|entities|triples FILE --async   prints the operation name
  graphmesh ingest files PATH... --async                     (at most 64 MiB of files; a JSONL file among
                                                             them is an operation of its own)
  graphmesh operations list [--filter "done = false"] [--page-size N]
  graphmesh operations get NAME                              the operation as JSON
  graphmesh operations cancel NAME                           stops after the batch in progress
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import grpc
from google.longrunning import operations_pb2, operations_pb2_grpc
from google.protobuf import json_format
from google.rpc import code_pb2

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.client import INGEST_KINDS, _report_rpc_error, gateway_channel, open_text
from services.cli.documents import JSONL_SUFFIXES, expand_paths, links_outside, missing_message, unsupported_files

#: Most bytes of one ImportDocuments request (the gateway's message limit).
MAX_REQUEST_BYTES = 64 * 1024 * 1024
_OPTIONS = [("grpc.max_send_message_length", MAX_REQUEST_BYTES), ("grpc.max_receive_message_length", MAX_REQUEST_BYTES)]


def import_requests(args: argparse.Namespace) -> list[gateway_pb2.IngestRequest] | str:
    """The ImportDocuments requests of ``graphmesh ingest KIND PATH... --async``
    (one operation each), or the error message when the input cannot be sent
    whole. ``files``: one request for the files, and one more per JSONL file
    among them (its lines are documents, as without --async), since one
    request holds files or JSONL, not both."""
    common = {"collection": args.collection or "", "domain_pack": getattr(args, "pack", "") or ""}
    if args.kind == "files":
        files, missing = expand_paths(args.paths, args.id_prefix or "")
        if missing:
            return missing_message(missing[0])
        for path in links_outside(args.paths):
            print(f"skipped   {path.as_posix()}: a link to {path.resolve()}, outside the folder", file=sys.stderr)
        for path in unsupported_files(args.paths):
            print(f"skipped   {path.as_posix()}: unsupported file type {path.suffix.lower() or '(none)'!r}", file=sys.stderr)
        metadata = dict(kv.split("=", 1) for kv in args.meta or [] if "=" in kv)
        jsonl = [path for path, _ in files if path.name.lower().endswith(JSONL_SUFFIXES)]
        documents = [(path, doc_id) for path, doc_id in files if path not in jsonl]
        requests = [gateway_pb2.IngestRequest(**common, files=[
            gateway_pb2.IngestFile(name=doc_id, document_id=doc_id, content=path.read_bytes(), metadata=metadata)
            for path, doc_id in documents])] if documents else []
        for path in jsonl:
            with open_text(path) as f:
                requests.append(gateway_pb2.IngestRequest(**common, jsonl=f.read(), kind=INGEST_KINDS["documents"]))
    else:
        if len(args.paths) != 1 or not Path(args.paths[0]).is_file():
            return f"ingest {args.kind} --async takes one JSONL file"
        with open_text(Path(args.paths[0])) as f:
            requests = [gateway_pb2.IngestRequest(**common, jsonl=f.read(), kind=INGEST_KINDS[args.kind])]
    for request in requests:
        if request.ByteSize() > MAX_REQUEST_BYTES - 1024:
            return f"the input is {request.ByteSize() / 1048576:.1f} MiB: one operation takes at most 64 MiB; split it or drop --async"
    return requests


def cmd_ingest_async(args: argparse.Namespace) -> int:
    """Starts ImportDocuments, one operation per request (``import_requests``),
    and prints each operation's name on its own line; 2 on an error."""
    requests = import_requests(args)
    if isinstance(requests, str):
        print(f"error: {requests}", file=sys.stderr)
        return 2
    with gateway_channel(_OPTIONS) as ch:
        for request in requests:
            try:
                operation = gateway_pb2_grpc.GatewayServiceStub(ch).ImportDocuments(request, timeout=300)
            except grpc.RpcError as err:
                return _report_rpc_error(err)
            print(operation.name)
    return 0


def describe(operation: operations_pb2.Operation) -> dict:
    """One operation as a JSON object: name, state, progress. The state of one that ran to its end is
    SUCCEEDED when no record or file failed, PARTIAL when some failed and others were stored or unchanged,
    FAILED when every one failed (the Operation itself carries Ingest's response either way, its failures
    listed, as Ingest answers such a batch OK); one that ended with an error shows that error's code."""
    meta = gateway_pb2.IngestOperationMetadata()
    operation.metadata.Unpack(meta)
    if not operation.done:
        state = "CANCELLING" if meta.cancel_requested else "RUNNING"
    elif operation.HasField("error"):
        state = code_pb2.Code.Name(operation.error.code)
    elif meta.failed and not (meta.stored or meta.unchanged):
        state = "FAILED"
    elif meta.failed:
        state = "PARTIAL"
    else:
        state = "SUCCEEDED"
    out = {"name": operation.name, "state": state, "collection": meta.collection, "total": meta.total,
           "received": meta.received, "stored": meta.stored, "unchanged": meta.unchanged, "failed": meta.failed,
           "updated": meta.update_time.ToJsonString()}
    if operation.HasField("error"):
        out["error"] = operation.error.message
    return out


def cmd_operations(args: argparse.Namespace) -> int:
    """list / get / cancel; 2 on an RPC error."""
    with gateway_channel(_OPTIONS) as ch:
        stub = operations_pb2_grpc.OperationsStub(ch)
        try:
            if args.action == "list":
                reply = stub.ListOperations(operations_pb2.ListOperationsRequest(
                    name="operations", filter=args.filter or "", page_size=args.page_size, page_token=args.page_token or ""), timeout=30)
                for operation in reply.operations:
                    print(json.dumps(describe(operation), ensure_ascii=False))
                if reply.next_page_token:
                    print(f"more: --page-token {reply.next_page_token}", file=sys.stderr)
            elif args.action == "get":
                operation = stub.GetOperation(operations_pb2.GetOperationRequest(name=args.name), timeout=30)
                print(json_format.MessageToJson(operation, ensure_ascii=False))
            else:
                before = stub.GetOperation(operations_pb2.GetOperationRequest(name=args.name), timeout=30)
                if before.done:  # google.longrunning: cancelling a finished operation does nothing
                    print(f"{args.name} had already finished: nothing to cancel")
                else:
                    stub.CancelOperation(operations_pb2.CancelOperationRequest(name=args.name), timeout=30)
                    print(f"cancel requested: {args.name}")
        except grpc.RpcError as err:
            return _report_rpc_error(err)
    return 0


def add_parser(sub) -> None:
    """The ``operations`` subcommand."""
    ops = sub.add_parser("operations", help="list, get or cancel ingest operations (ingest --async)")
    ops.add_argument("action", choices=["list", "get", "cancel"])
    ops.add_argument("name", nargs="?", default="", help="get / cancel: the operation, operations/import-...")
    ops.add_argument("--filter", default="", help='list: "done = true" or "done = false"')
    ops.add_argument("--page-size", type=int, default=0, help="list: operations per page (50 when 0)")
    ops.add_argument("--page-token", default="", help="list: the next page's token")
