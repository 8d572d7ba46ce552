"""``graphmesh reranker train`` (argument parsing for
services.cli.reranker_training) and ``graphmesh reranker export-onnx``
(services.reranker.onnx_export)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub) -> None:
    """Adds the ``reranker`` command to the graphmesh subparsers."""
    parent = sub.add_parser("reranker", help="fine-tune the cross-encoder reranker on your own corpus; export it to ONNX")
    actions = parent.add_subparsers(dest="action", required=True)
    export = actions.add_parser("export-onnx", help="export a CrossEncoder directory to DIR/onnx/ for ONNX Runtime "
                                                     "(needs the models extra once; serving then needs no torch)")
    export.add_argument("model_dir", help="CrossEncoder directory (GRAPHMESH_RERANKER_MODEL_DIR)")
    export.add_argument("--opset", type=int, default=17)
    rr = actions.add_parser("train", help="fine-tune a cross-encoder on your own corpus")
    rr.add_argument("--no-onnx", action="store_true", help="do not export the trained model to ONNX")
    rr.add_argument("--base", required=True, help="base encoder directory (e.g. `graphmesh models fetch m3e-small`)")
    rr.add_argument("--out", required=True, help="model directory to write (GRAPHMESH_RERANKER_MODEL_DIR)")
    rr.add_argument("--documents", action="append", default=[], help="documents JSONL (.gz accepted); repeatable")
    rr.add_argument("--entities", action="append", default=[], help="entities JSONL (.gz accepted); repeatable")
    rr.add_argument("--exclude-queries", action="append", default=None, metavar="FILE",
                    help="evaluation query JSONL never to train on; repeatable (default: every queries-*.jsonl under ../shared/data)")
    rr.add_argument("--gateway", default="", help="gateway address for hard negatives (Search, rerank off); default: BM25 in-process")
    rr.add_argument("--max-pairs", type=int, default=20000)
    rr.add_argument("--max-steps", type=int, default=0, help="0 = one pass over the pairs")
    rr.add_argument("--max-minutes", type=float, default=0.0, help="training wall-clock budget (0 = none)")
    rr.add_argument("--batch-size", type=int, default=16)
    rr.add_argument("--max-length", type=int, default=256)
    rr.add_argument("--negatives", type=int, default=3, help="hard negatives per query")
    rr.add_argument("--entity-share", type=float, default=0.4, help="share of queries from entities when both inputs are given")
    rr.add_argument("--doc2query", type=int, default=0, help="passages given an LLM pseudo-query (needs --llm-base-url)")
    rr.add_argument("--llm-base-url", default="")
    rr.add_argument("--llm-model", default="")
    rr.add_argument("--seed", type=int, default=13)


def run(args: argparse.Namespace) -> int:
    """Runs the action; prints its card (training or export) as JSON. Exit 2 on bad input."""
    if args.action == "export-onnx":
        return _export(Path(args.model_dir), args.opset)
    return _train(args)


def _export(model_dir: Path, opset: int = 17) -> int:
    from services.reranker.onnx_export import ExportError, export_onnx

    try:
        card = export_onnx(model_dir, opset)
    except (ExportError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(card, ensure_ascii=False))
    return 0


def _train(args: argparse.Namespace) -> int:
    from services.cli.reranker_training import TrainConfig, default_exclude_files, train

    exclude = [Path(p) for p in args.exclude_queries] if args.exclude_queries is not None else default_exclude_files()
    if not args.documents and not args.entities:
        print("error: give --documents and/or --entities", file=sys.stderr)
        return 2
    if not exclude:
        print("warning: no evaluation query files found to exclude (--exclude-queries)", file=sys.stderr)
    cfg = TrainConfig(
        base_model=Path(args.base), out=Path(args.out), documents=[Path(p) for p in args.documents],
        entities=[Path(p) for p in args.entities], exclude_queries=exclude, gateway=args.gateway,
        max_pairs=args.max_pairs, max_steps=args.max_steps, max_minutes=args.max_minutes, batch_size=args.batch_size,
        max_length=args.max_length, negatives=args.negatives, entity_share=args.entity_share, doc2query=args.doc2query,
        llm_base_url=args.llm_base_url, llm_model=args.llm_model, seed=args.seed,
    )
    try:
        card = train(cfg, progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (ValueError, FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not args.no_onnx:
        from services.reranker.onnx_export import ExportError, export_onnx

        try:
            card["onnx"] = export_onnx(args.out)
        except ExportError as err:  # the model still serves with runtime "torch"
            print(f"warning: ONNX export failed: {err}", file=sys.stderr)
            card["onnx"] = {"error": str(err)}
    print(json.dumps(card, ensure_ascii=False))
    return 0
