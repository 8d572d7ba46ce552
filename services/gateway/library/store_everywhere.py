"""One batch of documents stored in every retriever, and what a partial
store comes to: a new document one retriever refused is withdrawn from the
others, so a failure is stored nowhere; a retriever that did not answer is
reported as perhaps holding the documents. Used by document ingest (JSONL
records, files and ImportDocuments alike)."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence

from graphmesh.retriever.v1 import retriever_pb2
from services.common.errors import DownstreamError
from services.gateway.downstream.guard import Deadline
from services.gateway.downstream.interfaces import Retriever

#: Seconds one bulk call (embed a batch, store a batch) may take at most.
BULK_CALL_SECONDS = 600.0


async def store_in_every_retriever(retrievers: Sequence[Retriever], batch: retriever_pb2.IngestDocumentsRequest,
                                   deadline: Deadline, known: set[str], default_deadline: float) -> dict[str, str]:
    """Stores ``batch`` in every retriever, in parallel; returns {document id:
    reason} of the documents some retriever did not store (the first reason
    wins).

    A document no retriever held before (not in ``known``) that one
    retriever refused is withdrawn from those that stored it, so a failed
    new document is stored nowhere (a trial's over-long title: PostgreSQL
    stored it, Neo4j refused it, and Search found the "failed" document). A
    document held before keeps what each store has: withdrawing it would
    lose the earlier version. A retriever that could not be reached may
    hold it in part; its reason says to ingest it again
    (``unreached_reason``; ``default_deadline``: the gateway's
    deadlines.default, seconds).

    Raises:
        Any error of a retriever that is not a DownstreamError.
    """
    docs = list(batch.documents)
    results = await asyncio.gather(
        *(r.ingest_documents(batch, deadline.left(BULK_CALL_SECONDS)) for r in retrievers), return_exceptions=True)
    failed: dict[str, str] = {}
    answered: list[tuple[Retriever, set[str]]] = []  # each retriever that answered, with the ids it refused
    for retriever, result in zip(retrievers, results):
        if isinstance(result, DownstreamError):
            for doc in docs:
                failed.setdefault(doc.document.id, unreached_reason(result, default_deadline))
        elif isinstance(result, BaseException):
            raise result
        else:
            refused = {f.id or docs[f.index].document.id for f in result.failures}
            for f in result.failures:
                failed.setdefault(f.id or docs[f.index].document.id, f"{retriever.name}: {f.reason}")
            answered.append((retriever, refused))
    withdraw = {i for _, refused in answered for i in refused} - known
    if withdraw:
        await _withdraw(withdraw, answered, failed, deadline)
    return failed


async def _withdraw(ids: set[str], answered: list[tuple[Retriever, set[str]]], failed: dict[str, str],
                    deadline: Deadline) -> None:
    """Deletes ``ids`` (new documents some retriever refused) from each
    retriever in ``answered`` that stored them; one that cannot is named in
    the documents' reasons."""
    for retriever, refused in answered:
        stored_here = sorted(ids - refused)
        if not stored_here:
            continue
        try:
            await retriever.delete_documents(retriever_pb2.DeleteDocumentsRequest(ids=stored_here), deadline.left(30))
        except DownstreamError as err:
            for doc_id in stored_here:
                failed[doc_id] += f"; {retriever.name} stored it and could not withdraw it ({err}): delete it or ingest it again"


def unreached_reason(err: DownstreamError, default_deadline: float) -> str:
    """The failure reason of the documents a retriever was sent but did not
    answer for (``default_deadline``: deadlines.default, seconds): it may
    have stored them, in part or whole."""
    if err.code.name == "DEADLINE_EXCEEDED":
        return (f"{err} (the call's deadline passed while storing: the gateway's deadlines.default, {default_deadline:g} s, "
                "when the caller sets none); it may be stored in part: ingest it again with a longer deadline, what is "
                "stored already is skipped, or import it with ImportDocuments")
    return f"{err}; it may be stored in part: ingest it again once the store answers (what is stored already is skipped)"
