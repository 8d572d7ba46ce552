"""Storing in every retriever (services/gateway/library/store_everywhere.py),
through document ingest: a new document one store refuses is withdrawn from
the others, one held before is not, and a store that ran out of time is
reported as perhaps holding the document."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.gateway.downstream.guard import Deadline
from tests.fakes import FakeRetriever, downstream_error
from tests.gateway.library.test_document_ingest import INLINE, Unchanged, payload
from tests.gateway.test_orchestration import mesh

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


class Refusing(Unchanged):
    """Stores what it is sent except the ids in ``refuse``, which it reports failed, as a store that cannot
    index a document does."""

    def __init__(self, name: str, refuse: set[str]) -> None:
        super().__init__(name)
        self.refuse = refuse

    async def ingest_documents(self, request, timeout):
        failures = [types_pb2.IngestFailure(index=i, id=d.document.id, reason="property value is too large to index")
                    for i, d in enumerate(request.documents) if d.document.id in self.refuse]
        self.calls.append(("ingest_documents", request))
        self.hashes.update({d.document.id: d.content_hash for d in request.documents if d.document.id not in self.refuse})
        return retriever_pb2.IngestDocumentsResponse(stored=len(request.documents) - len(failures), failures=failures)


def deletions(retriever: FakeRetriever) -> list[list[str]]:
    return [list(r.ids) for rpc, r in retriever.calls if rpc == "delete_documents"]


async def test_a_new_document_one_store_refuses_is_withdrawn_from_the_others():
    """A trial's document was reported failed while PostgreSQL held it and Search found it."""
    pg, graph = Unchanged("retriever_pg"), Refusing("retriever_graph", {"a"})
    reply, _ = await mesh(pg=pg, graph=graph, ingest=INLINE).documents.ingest(payload(), Deadline(10))
    assert reply.stored == 1 and [(f.id, f.reason) for f in reply.failures] == [
        ("a", "retriever_graph: property value is too large to index")]
    assert deletions(pg) == [["a"]] and deletions(graph) == []


async def test_a_document_stored_before_is_not_withdrawn_when_a_store_refuses_its_new_version():
    """Withdrawing it would lose the version every store held."""
    pg, graph = Unchanged("retriever_pg"), Refusing("retriever_graph", set())
    m = mesh(pg=pg, graph=graph, ingest=INLINE)
    await m.documents.ingest(payload(), Deadline(10))
    graph.refuse = {"a"}
    changed = payload().replace("按时支付工资".encode(), "足额支付工资".encode())
    reply, _ = await m.documents.ingest(changed, Deadline(10))
    assert [f.id for f in reply.failures] == ["a"] and reply.unchanged == 1
    assert deletions(pg) == [] and deletions(graph) == []


class TimesOut(Unchanged):
    """Answers hashes, and runs out of time storing."""

    async def ingest_documents(self, request, timeout):
        raise downstream_error(self.name, grpc.StatusCode.DEADLINE_EXCEEDED)


async def test_a_store_that_ran_out_of_time_is_reported_as_maybe_holding_the_document():
    """A store that did not answer may have stored it (a trial's 1.2 M-character record was stored after
    its DEADLINE_EXCEEDED): the reason says so and how to finish it; nothing is withdrawn."""
    pg, graph = Unchanged("retriever_pg"), TimesOut("retriever_graph")
    reply, _ = await mesh(pg=pg, graph=graph, ingest=INLINE).documents.ingest(payload(), Deadline(10))
    assert reply.stored == 0 and len(reply.failures) == 2
    reason = reply.failures[0].reason
    assert reason.startswith("retriever_graph: DEADLINE_EXCEEDED") and "deadlines.default, 30 s" in reason
    assert "may be stored in part: ingest it again" in reason and "ImportDocuments" in reason
    assert deletions(pg) == []
