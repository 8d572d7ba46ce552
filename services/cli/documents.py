"""``graphmesh ingest files``, ``graphmesh documents`` and ``graphmesh
collections``: files in, and the document lifecycle, over the gateway at
GRAPHMESH_GATEWAY_ADDR.

  graphmesh ingest files PATH... [--collection C] [--id-prefix P] [--meta k=v]
      files, folders (recursive) and globs ("docs/**/*.pdf"); .txt .md .html
      .pdf .docx .csv .tsv go to Ingest as files (a call per 16 MiB or 64 files),
      .jsonl/.jsonl.gz as JSONL records; a progress bar; one line per file:
      stored / unchanged / failed (with the reason).
  graphmesh documents list [--collection C] [--filter F] [--page-size N] [--page-token T] [--all] [--json]
  graphmesh documents get ID [--collection C] [--chunks] [--json]
      --chunks: its chunks too, in reading order (what was parsed from the
      file and how it was cut: GetDocument view DOCUMENT_VIEW_FULL).
  graphmesh documents delete [ID...] [--collection C] [--filter F]
  graphmesh collections list [--json] | delete NAME
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

import grpc

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.client import SHOWN_FAILURES, _report_rpc_error, gateway_channel, ingest_file, proto_json
from services.common.filters import DEFAULT_COLLECTION, KEY_PATTERN

BATCH_BYTES = 16 * 1024 * 1024
BATCH_FILES = 64
FILE_SUFFIXES = (".txt", ".text", ".md", ".markdown", ".html", ".htm", ".xhtml", ".pdf", ".docx", ".csv", ".tsv")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
_STATUS = {gateway_pb2.FILE_STATUS_STORED: "stored", gateway_pb2.FILE_STATUS_UNCHANGED: "unchanged",
           gateway_pb2.FILE_STATUS_FAILED: "failed"}


def _stub(ch: grpc.Channel) -> gateway_pb2_grpc.GatewayServiceStub:
    return gateway_pb2_grpc.GatewayServiceStub(ch)


def _channel() -> grpc.Channel:
    """The gateway channel every command uses (TLS and the API key: ``gateway_channel``), for messages of up
    to 64 MiB."""
    return gateway_channel(options=[("grpc.max_send_message_length", 64 << 20),
                                    ("grpc.max_receive_message_length", 64 << 20)])


def _error(err: grpc.RpcError) -> int:
    return _report_rpc_error(err)


def expand_paths(paths: list[str], id_prefix: str = "") -> tuple[list[tuple[Path, str]], list[str]]:
    """(file, document id) of every supported file the arguments name, in
    order, each once, and the arguments that name nothing. A folder is read
    recursively (its files' ids are "<folder name>/<relative path>"); a glob
    is expanded (** recursive); a file's id is its path relative to the
    current directory (its name when outside it). Hidden files and folders
    inside a folder (.git, a .env.md) are passed over; a hidden file named
    on its own is read. ``id_prefix`` is put before every id."""
    found: dict[Path, str] = {}
    missing = []

    def own_id(path: Path) -> str:
        rel = os.path.relpath(path)
        return Path(rel).as_posix() if not rel.startswith("..") else path.name

    for arg in paths:
        path = Path(arg)
        if path.is_dir():
            root = path.resolve()
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                if _supported(file) and _within(file, root) and not _hidden(file, path):
                    found.setdefault(file, (Path(path.resolve().name) / file.relative_to(path)).as_posix())
        elif path.is_file():
            found.setdefault(path, own_id(path))
        else:
            matches = _glob_files(arg)
            if not matches:
                missing.append(arg)
            base = glob_base(arg).resolve()
            for file in matches:
                if _within(file, base):
                    found.setdefault(file, own_id(file))
    return [(f, id_prefix + i) for f, i in found.items()], missing


def links_outside(paths: list[str]) -> list[Path]:
    """Files inside the folders ``paths`` name, or matched by its globs, that
    are links (or lie under linked folders) resolving outside that folder (a
    glob's: ``glob_base``): ``expand_paths`` leaves them out, so that
    ingesting a folder never reads a file elsewhere on the machine (a link
    to /etc/passwd dropped into a shared folder)."""
    out: list[Path] = []
    for arg in paths:
        folder = Path(arg)
        if folder.is_dir():
            root = folder.resolve()
            out.extend(p for p in sorted(folder.rglob("*")) if p.is_file() and not _within(p, root))
        elif not folder.is_file():
            base = glob_base(arg).resolve()
            out.extend(p for p in _glob_files(arg) if not _within(p, base))
    return out


_GLOB_MAGIC = re.compile(r"[*?[]")


def glob_base(pattern: str) -> Path:
    """The folder a glob searches: its leading path parts up to the first
    one holding a wildcard ("docs/**/*.md" -> docs; "*.md" -> the current
    folder)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if _GLOB_MAGIC.search(part)), len(parts) - 1)
    return Path(*parts[:fixed]) if fixed else Path(".")


def _glob_files(pattern: str) -> list[Path]:
    """Supported files matched by ``pattern`` (** recursive), sorted."""
    return sorted(Path(m) for m in glob.glob(pattern, recursive=True) if Path(m).is_file() and _supported(Path(m)))


def _within(file: Path, root: Path) -> bool:
    """Whether ``file`` resolves inside ``root`` (a resolved folder): not a link leading out of it."""
    return file.resolve().is_relative_to(root)


def missing_message(arg: str) -> str:
    """Why ``arg`` (an argument ``expand_paths`` found nothing at) names no file."""
    path = Path(arg)
    if path.is_symlink() and not path.exists():
        return f"{arg} is a broken link"
    if path.exists():
        return f"no supported file at {arg}: supported types are {', '.join(FILE_SUFFIXES + JSONL_SUFFIXES)}"
    if any(c in arg for c in "*?["):
        return f"no supported file matches {arg}"
    return f"no such file or folder: {arg}"


def unsupported_files(paths: list[str]) -> list[Path]:
    """Files inside the folders ``paths`` name that ``expand_paths`` leaves
    out because their type is not read (a .doc, a .xlsx), so that a folder
    ingest says what it skipped; hidden files and folders (.git, .DS_Store)
    are not listed."""
    out: list[Path] = []
    for arg in paths:
        folder = Path(arg)
        if folder.is_dir():
            root = folder.resolve()
            out.extend(p for p in sorted(folder.rglob("*")) if p.is_file() and not _supported(p) and _within(p, root)
                       and not _hidden(p, folder))
    return out


def _hidden(path: Path, folder: Path) -> bool:
    """Whether ``path`` (inside ``folder``) is a hidden file or lies in a hidden folder below ``folder``."""
    return any(part.startswith(".") for part in path.relative_to(folder).parts)


def skipped_files(paths: list[str]) -> list[tuple[Path, str]]:
    """(file, why) of every file inside the folders ``paths`` name that a
    folder ingest does not read: links leading out of the folder
    (``links_outside``), then files of a type no parser reads
    (``unsupported_files``); the ingest prints each and counts them all in
    its "skipped" total."""
    supported = ", ".join(FILE_SUFFIXES + JSONL_SUFFIXES)
    return ([(p, f"a link to {p.resolve()}, outside the folder") for p in links_outside(paths)]
            + [(p, f"unsupported file type {p.suffix.lower() or '(none)'!r}; supported: {supported}")
               for p in unsupported_files(paths)])


def _supported(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(FILE_SUFFIXES) or name.endswith(JSONL_SUFFIXES)


def unsendable_names(files: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """The (file, document id) of ``files`` whose id is not valid UTF-8 (a file name written in another
    encoding, kept by Python as lone surrogates): no RPC can carry it, so the ingest reports each such file
    failed and sends the others."""
    bad = []
    for path, doc_id in files:
        try:
            doc_id.encode("utf-8")
        except UnicodeEncodeError:
            bad.append((path, doc_id))
    return bad


def shown_name(path: Path) -> str:
    """``path`` printable whatever its bytes: bytes that are not UTF-8 shown as U+FFFD."""
    return os.fsencode(path).decode("utf-8", "replace")


def cmd_ingest_files(args: argparse.Namespace) -> int:
    """Ingests files into one collection; prints one line per file and the
    totals as JSON; exit 1 when a file failed, 2 on a usage or RPC error."""
    from tqdm import tqdm

    files, missing = expand_paths(args.paths, args.id_prefix or "")
    for arg in missing:
        print(f"error: {missing_message(arg)}", file=sys.stderr)
    skipped = skipped_files(args.paths)
    for path, reason in skipped:
        print(f"skipped   {path.as_posix()}: {reason}", file=sys.stderr)
    if missing and not files:
        return 2
    if getattr(args, "prune", False) and (missing or any(p.name.lower().endswith(JSONL_SUFFIXES) for p, _ in files)):
        print("error: --prune needs every path found and no JSONL file among them: it deletes every stored "
              "document the files read did not produce", file=sys.stderr)
        return 2
    if not files:  # folders holding no file that is read (an empty one, or only skipped ones)
        print(f"error: no supported file in {', '.join(args.paths)}: supported types are "
              f"{', '.join(FILE_SUFFIXES + JSONL_SUFFIXES)}", file=sys.stderr)
        return 2
    try:
        metadata = dict(kv.split("=", 1) for kv in args.meta or [])
    except ValueError:
        print("error: --meta takes key=value", file=sys.stderr)
        return 2
    unnamed = [k for k in metadata if not KEY_PATTERN.match(k)]
    if unnamed:  # a filter could never name it
        print(f"error: --meta key {unnamed[0]!r}: 1 to 64 letters, digits, _, . or - (the keys a --filter can name)",
              file=sys.stderr)
        return 2
    # "records": the documents of JSONL files, counted with the files' own in stored, unchanged and failed
    totals = {"files": len(files), "records": 0, "stored": 0, "unchanged": 0, "failed": 0, "chunks": 0,
              "skipped": len(skipped)}
    jsonl = [f for f in files if f[0].name.lower().endswith(JSONL_SUFFIXES)]
    unsendable = unsendable_names([f for f in files if f not in jsonl])
    for path, _ in unsendable:
        print(f"{'failed':9s} {shown_name(path)}: the file name is not valid UTF-8; rename the file and ingest it again",
              file=sys.stderr)
    totals["failed"] += len(unsendable)
    documents = [f for f in files if f not in jsonl and f not in unsendable]
    lines: list[str] = []
    stored_ids: set[str] = set()  # the ids the files were stored under (another collection's id gets a prefix)
    collection = args.collection or DEFAULT_COLLECTION
    scopes = prune_scopes(args.paths, args.id_prefix or "") if getattr(args, "prune", False) else []
    scopes += [(f"{collection}/{prefix}", recursive) for prefix, recursive in scopes]
    file_ids = {doc_id for _, doc_id in files}

    def pruned_later(doc_id: str) -> bool:  # what --prune deletes once the files are in
        return bool(scopes) and doc_id not in file_ids | stored_ids and _in_scope(doc_id, scopes)
    # disable=None: no bar when stderr is not a terminal (its carriage returns would glue into a log file)
    with _channel() as ch, tqdm(total=sum(f.stat().st_size for f, _ in documents), unit="B", unit_scale=True,
                                desc="ingest files", file=sys.stderr, disable=None) as bar:
        stub = _stub(ch)
        batch: list[gateway_pb2.IngestFile] = []
        size = 0

        def flush() -> None:
            nonlocal batch, size
            if not batch:
                return
            reply = stub.Ingest(gateway_pb2.IngestRequest(files=batch, collection=args.collection or "",
                                                          domain_pack=getattr(args, "pack", "") or ""), timeout=3600)
            for outcome in reply.files:
                status = _STATUS.get(outcome.status, "failed")
                totals[status] += 1
                detail = f": {outcome.reason}" if outcome.reason else (
                    f" ({outcome.chunks} chunk{'' if outcome.chunks == 1 else 's'})" if outcome.chunks else "")
                if outcome.replaced:
                    detail += "; replaced the version stored under this id"
                if outcome.document_id and outcome.document_id != outcome.name:
                    detail += f"; stored as {outcome.document_id!r}: another collection holds {outcome.name!r}"
                stored_ids.add(outcome.document_id or outcome.name)
                if outcome.duplicate_of:
                    detail += f"; same text as {outcome.duplicate_of!r}, stored twice (delete one to keep one copy)"
                # a version the folder no longer holds is pruned below: no advice to delete it (a trial's was both)
                kept = [o for o in outcome.same_title_as if not pruned_later(o)]
                if kept:
                    named = ", ".join(repr(o) for o in kept)
                    detail += (f"; same title as {named}, with other text: two versions? both answer, each with its own "
                               f"figures; delete the one no longer in force (graphmesh documents delete "
                               f"{shlex.quote(kept[0])} --collection {shlex.quote(collection)}, or this one)")
                elif outcome.same_title_as:
                    named = ", ".join(repr(o) for o in outcome.same_title_as)
                    detail += f"; replaces {named}, which --prune deletes (not among the files read)"
                lines.append(f"{status:9s} {outcome.name}{detail}")
                bar.write(lines[-1], file=sys.stderr)
            totals["chunks"] += reply.chunks
            bar.update(size)
            batch, size = [], 0

        try:
            for path, doc_id in documents:
                data = path.read_bytes()
                if batch and (size + len(data) > BATCH_BYTES or len(batch) >= BATCH_FILES):
                    flush()
                batch.append(gateway_pb2.IngestFile(name=doc_id, content=data, document_id=doc_id, metadata=metadata))
                size += len(data)
            flush()
            if getattr(args, "prune", False):
                if totals["failed"]:  # a file that failed may be one whose stored copy is all there is
                    print(f"not pruned: {totals['failed']} files failed", file=sys.stderr)
                else:
                    totals["pruned"] = len(prune_unseen(stub, collection, file_ids | stored_ids, scopes))
        except grpc.RpcError as err:
            return _error(err)
    for path, _ in jsonl:  # a JSONL file of documents: its documents count in the totals, as a file's do
        try:
            inner, failures = ingest_file(path, "documents", 0, args.collection or "", getattr(args, "pack", "") or "")
        except grpc.RpcError as err:
            return _error(err)
        for index, doc_id, reason in failures[:SHOWN_FAILURES]:
            print(f"failed    {path.as_posix()} line {index + 1} id={doc_id or '?'}: {reason}", file=sys.stderr)
        if len(failures) > SHOWN_FAILURES:
            print(f"failed    {path.as_posix()}: ... and {len(failures) - SHOWN_FAILURES} more failed lines", file=sys.stderr)
        print(f"{'jsonl':9s} {path.as_posix()}: {json.dumps(inner, ensure_ascii=False)}", file=sys.stderr)
        totals["records"] += int(inner.get("received", 0))
        for key in ("stored", "unchanged", "failed", "chunks"):
            totals[key] += int(inner.get(key, 0))
    print(json.dumps(totals, ensure_ascii=False))
    return 1 if totals["failed"] else 0


def prune_scopes(paths: list[str], id_prefix: str = "") -> list[tuple[str, bool]]:
    """Where ``ingest files --prune`` may delete, as (id prefix, recursive)
    pairs, one per argument of ``paths``: a folder owns every id under
    "<id_prefix><folder name>/"; a file or a glob owns the ids directly in its
    own folder (recursively for a glob with a wildcard in a folder's place,
    "docs/**/*.md"), "<id_prefix>" alone when
    that folder is the current directory. A document outside every scope (the
    files of another folder, a console upload, a JSONL record) is never pruned."""
    scopes = []
    for arg in paths:
        path = Path(arg)
        if path.is_dir():
            scopes.append((f"{id_prefix}{path.resolve().name}/", True))
            continue
        base = path.parent if path.is_file() else glob_base(arg)
        rel = os.path.relpath(base.resolve())
        folder = "" if rel == "." or rel.startswith("..") else Path(rel).as_posix() + "/"
        scopes.append((id_prefix + folder, path.is_file() is False and glob_base(arg) != path.parent))
    return scopes


def _in_scope(doc_id: str, scopes: list[tuple[str, bool]]) -> bool:
    return any(doc_id.startswith(prefix) and (recursive or "/" not in doc_id[len(prefix):])
               for prefix, recursive in scopes)


def prune_unseen(stub, collection: str, seen: set[str], scopes: list[tuple[str, bool]]) -> list[str]:
    """Deletes the documents of ``collection`` that came from a file, lie in
    one of ``scopes`` (``prune_scopes``) and are not in ``seen`` (the ids an
    ingest of files just sent), printing one "pruned" line each; returns their
    ids. What `ingest files --prune` does after its files are in: a file
    removed from the folder is removed from the collection too (a trial's
    withdrawn policy kept being answered), and nothing the folder never held.

    Raises:
        grpc.RpcError: listing or deleting failed.
    """
    parent, token, stale = f"collections/{collection}", "", []
    while True:
        reply = stub.ListDocuments(gateway_pb2.ListDocumentsRequest(parent=parent, page_size=1000, page_token=token),
                                   timeout=120)
        for doc in reply.documents:
            doc_id = doc.name.split("/documents/", 1)[-1]
            if doc.source and doc_id not in seen and _in_scope(doc_id, scopes):
                stale.append(doc_id)
        token = reply.next_page_token
        if not token:
            break
    for start in range(0, len(stale), 10_000):
        names = [f"{parent}/documents/{i}" for i in stale[start:start + 10_000]]
        stub.DeleteDocuments(gateway_pb2.DeleteDocumentsRequest(parent=parent, names=names), timeout=600)
    for doc_id in stale:
        print(f"{'pruned':9s} {doc_id}: not among the files read", file=sys.stderr)
    return stale


def _parent(args: argparse.Namespace) -> str:
    return f"collections/{args.collection or '-'}"


def cmd_documents(args: argparse.Namespace) -> int:
    """documents list | get | delete."""
    try:
        with _channel() as ch:
            stub = _stub(ch)
            if args.action == "get":
                if len(args.ids) != 1:
                    print("error: documents get takes one ID", file=sys.stderr)
                    return 2
                view = gateway_pb2.DOCUMENT_VIEW_FULL if args.chunks else gateway_pb2.DOCUMENT_VIEW_BASIC
                try:
                    doc = stub.GetDocument(gateway_pb2.GetDocumentRequest(name=f"{_parent(args)}/documents/{args.ids[0]}",
                                                                          view=view), timeout=60).document
                except grpc.RpcError as err:
                    if err.code() == grpc.StatusCode.NOT_FOUND:
                        _suggest_ids(stub, args, args.ids)
                    raise
                print(proto_json(doc) if args.json else _describe(doc, full=True))
                return 0
            if args.action == "delete":
                if not args.ids and not args.filter:
                    print("error: documents delete takes IDs or --filter", file=sys.stderr)
                    return 2
                reply = stub.DeleteDocuments(gateway_pb2.DeleteDocumentsRequest(
                    parent=_parent(args), names=[f"{_parent(args)}/documents/{i}" for i in args.ids], filter=args.filter or ""),
                    timeout=600)
                print(proto_json(reply, indent=None) if args.json else
                      f"deleted {reply.deleted_documents} documents: {', '.join(reply.document_ids) or '-'}\n" +
                      "\n".join(f"  {store}: {proto_json(c, indent=None)}" for store, c in sorted(reply.by_store.items())))
                if not reply.deleted_documents and not args.json:
                    _say_why_none(args)
                missing = [i for i in args.ids if i not in set(reply.document_ids)]
                if missing:  # the others were deleted; a script must still see that a named one was not there
                    print(f"not found in {_parent(args)}: {', '.join(missing)}", file=sys.stderr)
                    _suggest_ids(stub, args, missing)
                    return 1
                return 0
            token, shown = args.page_token or "", 0
            while True:
                reply = stub.ListDocuments(gateway_pb2.ListDocumentsRequest(
                    parent=_parent(args), page_size=args.page_size, page_token=token, filter=args.filter or ""), timeout=60)
                for doc in reply.documents:
                    print(proto_json(doc, indent=None) if args.json else _describe(doc))
                shown += len(reply.documents)
                token = reply.next_page_token
                if not token or not args.all:
                    break
            if token and not args.json:
                print(f"... more: --all, or --page-token {token}", file=sys.stderr)
            if not shown and not args.page_token and not args.json:
                _say_why_none(args)
            return 0
    except grpc.RpcError as err:
        return _error(err)


#: Documents listed at most when looking for the ids a missing one may have meant.
SUGGEST_SCAN = 5000


def id_look_alikes(missing: str, ids: list[str]) -> list[str]:
    """Stored ``ids`` that ``missing`` may have meant: those whose last path part is ``missing`` (a file ingested
    from a folder is stored as 规章/事故应急处置步骤.txt; a trial asked for 事故应急处置步骤.txt), else those it is
    the end of (a collection's own prefix left off)."""
    tail = missing.strip("/")
    named = [i for i in ids if i.rsplit("/", 1)[-1] == tail]
    return named or [i for i in ids if i.endswith("/" + tail)]


def _suggest_ids(stub, args: argparse.Namespace, missing: list[str]) -> None:
    """On stderr, for each id of ``missing``, the stored ids it may have meant (``id_look_alikes``), read from the
    collection's first SUGGEST_SCAN documents."""
    ids: list[str] = []
    token = ""
    try:
        while len(ids) < SUGGEST_SCAN:
            reply = stub.ListDocuments(gateway_pb2.ListDocumentsRequest(parent=_parent(args), page_size=1000,
                                                                        page_token=token), timeout=60)
            ids.extend(doc.name.rsplit("/documents/", 1)[-1] for doc in reply.documents)
            token = reply.next_page_token
            if not token:
                break
    except grpc.RpcError:
        return
    for name in missing:
        meant = id_look_alikes(name, ids)
        if meant:
            print(f"did you mean {' or '.join(repr(m) for m in meant[:3])} (not {name!r})?", file=sys.stderr)


def _say_why_none(args: argparse.Namespace) -> None:
    """On stderr, that a list or delete touched no document and why: none
    matches the filter, or the collection is empty (a collection that does
    not exist is the gateway's NOT_FOUND). A trial's filtered `documents
    list` printed nothing and returned 0, as if the filter were fine."""
    where = f"collection {args.collection!r}" if args.collection else "any collection"
    if args.filter:
        print(f"no document in {where} matches --filter {args.filter!r}", file=sys.stderr)
    elif not args.ids:
        print(f"no documents in {where}", file=sys.stderr)


def _describe(doc, full: bool = False) -> str:
    meta = ", ".join(f"{k}={v}" for k, v in sorted(doc.metadata.items()))
    line = f"{doc.name}  {doc.title}  chunks={doc.chunk_count}" + (f"  [{meta}]" if meta else "")
    if full:
        line += f"\n  source: {doc.source or '-'}\n  headings: {' / '.join(doc.heading_path)}\n  content hash: {doc.content_hash}"
    for chunk in doc.chunks:
        meta = ", ".join(f"{k}={v}" for k, v in sorted(chunk.metadata.items()))
        line += (f"\n\n--- chunk {chunk.ordinal}  {chunk.id}" + (f"  [{meta}]" if meta else "")
                 + (f"\n  headings: {' / '.join(chunk.heading_path)}" if chunk.heading_path else "") + f"\n{chunk.text}")
    return line


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns, a wide
    (CJK) character counting two, so that columns line up under 公司文档."""
    columns = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
    return text + " " * max(0, width - columns)


def confirmed_collection_delete(stub, name: str, answer: Callable[[str], str] = input) -> bool:
    """Whether the user, shown what ``collections delete NAME`` would remove
    (its documents and chunks), typed "y": a trial's mistyped command deleted
    a whole collection without a word. Without a terminal nothing is asked and
    the answer is no (scripts pass --yes). Prints why it refuses on stderr.

    Raises:
        grpc.RpcError: listing the collections failed.
    """
    held = next((c for c in stub.ListCollections(gateway_pb2.ListCollectionsRequest(), timeout=60).collections
                 if c.name == name), None)
    what = (f"collection {name!r}: {held.documents} documents, {held.chunks} chunks, {held.entities} entities"
            if held else f"collection {name!r} (not listed: nothing may be stored under it)")
    if not sys.stdin.isatty():
        print(f"error: deleting {what} needs --yes when no terminal can confirm it", file=sys.stderr)
        return False
    if answer(f"delete {what}? This cannot be undone [y/N] ").strip().lower() in ("y", "yes"):
        return True
    print("not deleted", file=sys.stderr)
    return False


def _suggest_collection(stub, name: str) -> None:
    """On stderr, the stored collection a mistyped ``name`` looks like (``spelling.closest``), as Answer says it: a
    trial's `collections delete wuye-rst` got NOT_FOUND and no word of wuye-rest."""
    from services.common.spelling import closest

    try:
        stored = [c.name for c in stub.ListCollections(gateway_pb2.ListCollectionsRequest(), timeout=60).collections]
    except grpc.RpcError:
        return
    meant = closest(name, stored)
    if meant:
        print(f"did you mean the collection {meant!r} (not {name!r})?", file=sys.stderr)


def cmd_collections(args: argparse.Namespace) -> int:
    """collections list | delete NAME."""
    if args.action == "list" and args.name:  # "collections list hr" read as a filter would list them all
        print(f"error: collections list takes no name (got {args.name!r}); every collection is listed", file=sys.stderr)
        return 2
    try:
        with _channel() as ch:
            stub = _stub(ch)
            if args.action == "delete":
                if not args.name:
                    print("error: collections delete takes NAME", file=sys.stderr)
                    return 2
                if not args.yes and not confirmed_collection_delete(stub, args.name):
                    return 2
                try:
                    reply = stub.DeleteCollection(gateway_pb2.DeleteCollectionRequest(name=f"collections/{args.name}"),
                                                  timeout=600)
                except grpc.RpcError as err:
                    if err.code() == grpc.StatusCode.NOT_FOUND:
                        _suggest_collection(stub, args.name)
                    raise
                print(proto_json(reply, indent=None))
                return 0
            reply = stub.ListCollections(gateway_pb2.ListCollectionsRequest(), timeout=60)
            for c in reply.collections:
                print(proto_json(c, indent=None) if args.json else
                      f"{pad(c.name, 24)} pack={c.domain_pack or '-'} documents={c.documents} chunks={c.chunks} entities={c.entities}")
            if not reply.collections and not args.json:  # said on stderr: stdout stays a list (empty) for scripts
                print("no collections: nothing was ingested yet (graphmesh ingest files DIR --collection NAME)", file=sys.stderr)
            return 0
    except grpc.RpcError as err:
        return _error(err)


def add_parsers(sub) -> None:
    """The documents and collections subcommands (ingest files is added by main)."""
    docs = sub.add_parser("documents", help="list, get or delete stored documents")
    docs.add_argument("action", choices=["list", "get", "delete"])
    docs.add_argument("ids", nargs="*", help="document ids (get: one; delete: any)")
    docs.add_argument("--collection", default="", help="collection (default: any)")
    docs.add_argument("--filter", default="", help='metadata filter, e.g. \'status = "已废止"\'')
    docs.add_argument("--page-size", type=int, default=50)
    docs.add_argument("--all", action="store_true", help="list: every page")
    docs.add_argument("--page-token", default="", help="list: the page after the one that printed this token")
    docs.add_argument("--chunks", action="store_true", help="get: the document's chunks too, in reading order")
    docs.add_argument("--json", action="store_true")
    col = sub.add_parser("collections", help="list or delete collections")
    col.add_argument("action", choices=["list", "delete"])
    col.add_argument("name", nargs="?")
    col.add_argument("--yes", action="store_true", help="delete: without asking (what scripts pass)")
    col.add_argument("--json", action="store_true")

