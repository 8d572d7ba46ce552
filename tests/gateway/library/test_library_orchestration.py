"""File ingestion, scoped search and the document lifecycle in the
gateway, driven with fake clients: per-file failures do not lose the batch,
collections and filters reach every retriever, deletions reach every store
and a failing store fails the call."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import DownstreamError, InvalidArgument, NotFound
from services.common.filters import parse_filter
from services.gateway.downstream.guard import Deadline
from services.gateway.search.scope import Scope
from tests import file_makers as mk
from tests.fakes import FakeRetriever
from tests.gateway.test_orchestration import mesh

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


def files() -> list[gateway_pb2.IngestFile]:
    return [
        gateway_pb2.IngestFile(name="手册/办法.pdf", content=mk.pdf_bytes(1)),
        gateway_pb2.IngestFile(name="手册/秘密.pdf", content=mk.encrypted_pdf_bytes()),
        gateway_pb2.IngestFile(name="手册/办法.docx", content=mk.docx_bytes(), metadata={"dept": "财务"}),
        gateway_pb2.IngestFile(name="手册/坏.docx", content=b"PK not a zip"),
        gateway_pb2.IngestFile(name="手册/制度.txt", content=mk.text_gb18030()),
        gateway_pb2.IngestFile(name="手册/说明.md", content=mk.markdown_text().encode()),
        gateway_pb2.IngestFile(name="手册/页面.html", content=mk.html_text().encode()),
    ]


async def test_files_are_stored_and_bad_ones_fail_alone():
    pg, graph = FakeRetriever("retriever_pg"), FakeRetriever("retriever_graph")
    use = mesh(pg=pg, graph=graph)
    reply = await use.files.ingest(files(), Deadline(30), collection="hr")
    status = {o.name: (gateway_pb2.FileStatus.Name(o.status), o.reason) for o in reply.files}
    assert status["手册/秘密.pdf"] == ("FILE_STATUS_FAILED", "encrypted PDF: needs a password")
    assert status["手册/坏.docx"][0] == "FILE_STATUS_FAILED" and "not a valid .docx" in status["手册/坏.docx"][1]
    stored = [n for n, (s, _) in status.items() if s == "FILE_STATUS_STORED"]
    assert stored == ["手册/办法.pdf", "手册/办法.docx", "手册/制度.txt", "手册/说明.md", "手册/页面.html"]
    assert (reply.received, reply.stored, len(reply.failures)) == (7, 5, 2)
    assert [f.index for f in reply.failures] == [1, 3]
    assert pg.stored == graph.stored == stored  # document ids = file names
    sent = next(r for rpc, r in pg.calls if rpc == "ingest_documents").documents
    assert {d.document.collection for d in sent} == {"hr"}
    docx = next(d for d in sent if d.document.id == "手册/办法.docx")
    assert docx.document.metadata["dept"] == "财务" and docx.document.source == "手册/办法.docx"
    pdf = next(d for d in sent if d.document.id == "手册/办法.pdf")
    assert pdf.chunks[0].heading_path == [mk.TITLE, mk.CHAPTER_1] and pdf.chunks[0].metadata["page"] == "1"
    outcome = next(o for o in reply.files if o.name == "手册/办法.pdf")
    assert outcome.pages == 3 and outcome.chunks == len(pdf.chunks)


async def test_a_file_without_a_name_fails_alone_and_its_reason_says_which_file():
    pg = FakeRetriever("retriever_pg")
    reply = await mesh(pg=pg).files.ingest([gateway_pb2.IngestFile(name="", content=b"text"),
                                            gateway_pb2.IngestFile(name="a.txt", content="第一条 内容。".encode())],
                                           Deadline(30), collection="hr")
    [failure] = reply.failures
    assert failure.index == 0 and failure.reason.startswith("files[0] (no name): document id must be")
    assert pg.stored == ["a.txt"]


async def test_file_names_a_rest_name_cannot_reach_or_that_hide_their_text_fail_alone():
    pg = FakeRetriever("retriever_pg")
    names = ["../../etc/passwd.txt", "/etc/shadow.txt", "a//b.txt", "手册/./c.txt", "\u202egnp.txt", "零宽\u200b.txt",
             "手册/../d.txt", "..\\..\\win.txt", "手册\\.\\e.txt", "手册/子目录/正常.txt", "v1.2/说明.txt", "a\\b.txt"]
    reply = await mesh(pg=pg).files.ingest([gateway_pb2.IngestFile(name=n, content="第一条 内容。".encode()) for n in names],
                                           Deadline(30), collection="hr")
    assert sorted(pg.stored) == ["a\\b.txt", "v1.2/说明.txt", "手册/子目录/正常.txt"]
    reasons = {f.index: f.reason for f in reply.failures}
    assert sorted(reasons) == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert 'path segment' in reasons[0] and "formatting character" in reasons[4] and "formatting character" in reasons[5]


async def test_a_retriever_refusing_one_file_fails_only_that_file():
    class Refusing(FakeRetriever):
        async def ingest_documents(self, request, timeout):
            self.calls.append(("ingest_documents", request))
            from graphmesh.retriever.v1 import retriever_pb2
            return retriever_pb2.IngestDocumentsResponse(stored=len(request.documents) - 1, failures=[
                types_pb2.IngestFailure(index=0, id=request.documents[0].document.id, reason="stored in collection 'a'")])

    use = mesh(pg=Refusing("retriever_pg"))
    reply = await use.files.ingest(files()[:1] + files()[2:3], Deadline(30))
    assert [gateway_pb2.FileStatus.Name(o.status) for o in reply.files] == ["FILE_STATUS_FAILED", "FILE_STATUS_STORED"]
    assert "stored in collection 'a'" in reply.files[0].reason


async def test_scope_reaches_every_retriever_and_expansions():
    pg, graph = FakeRetriever("retriever_pg"), FakeRetriever("retriever_graph")
    use = mesh(pg=pg, graph=graph)
    scope = Scope(("hr", "laws"), tuple(parse_filter('status = "现行有效"')))
    await use.search.search("工资", 5, None, Deadline(5), scope=scope)
    for fake in (pg, graph):
        request = next(r for rpc, r in fake.calls if rpc == "retrieve")
        assert list(request.collections) == ["hr", "laws"]
        assert [(f.key, f.equals) for f in request.filters] == [("status", "现行有效")]
    await use.answerer.answer("工资", 5, None, Deadline(5), scope)
    assert all(list(r.collections) == ["hr", "laws"] for rpc, r in pg.calls if rpc == "retrieve")


async def test_get_list_and_pages():
    pg = FakeRetriever("retriever_pg")
    pg.documents = [types_pb2.StoredDocument(id=f"d{i}", collection="hr", title=f"t{i}") for i in range(5)]
    use = mesh(pg=pg)
    got = await use.lifecycle.get("collections/hr/documents/d3", Deadline(5))
    assert (got.document.name, got.document.title) == ("collections/hr/documents/d3", "t3")
    with pytest.raises(NotFound):
        await use.lifecycle.get("collections/other/documents/d3", Deadline(5))
    first = await use.lifecycle.list("collections/hr", 2, "", "", Deadline(5))
    assert [d.id for d in first.documents] == ["d0", "d1"] and first.next_page_token
    second = await use.lifecycle.list("collections/hr", 2, first.next_page_token, "", Deadline(5))
    assert [d.id for d in second.documents] == ["d2", "d3"]
    last = await use.lifecycle.list("collections/hr", 2, second.next_page_token, "", Deadline(5))
    assert [d.id for d in last.documents] == ["d4"] and not last.next_page_token
    with pytest.raises(InvalidArgument) as err:
        await use.lifecycle.list("collections/hr", 2, first.next_page_token, 'status = "x"', Deadline(5))
    assert err.value.field == "page_token"
    with pytest.raises(InvalidArgument) as err:
        await use.lifecycle.list("collections/hr", 0, "", "status ~ 1", Deadline(5))
    assert err.value.field == "filter"


async def test_delete_reaches_every_store_and_a_failing_store_fails_the_call():
    pg, graph = FakeRetriever("retriever_pg"), FakeRetriever("retriever_graph")
    pg.collections = [types_pb2.CollectionInfo(name="hr", documents=2)]
    use = mesh(pg=pg, graph=graph)
    reply = await use.lifecycle.delete("collections/hr", ["collections/hr/documents/a", "collections/-/documents/b"], "",
                                       Deadline(5))
    assert list(reply.document_ids) == ["a", "b"] and reply.deleted_documents == 2
    assert set(reply.by_store) == {"retriever_pg", "retriever_graph"} and reply.by_store["retriever_pg"].chunks == 4
    sent = next(r for rpc, r in graph.calls if rpc == "delete_documents")
    assert (sorted(sent.ids), list(sent.collections)) == (["a", "b"], ["hr"])
    by_filter = await use.lifecycle.delete("collections/hr", [], 'status = "已废止"', Deadline(5))
    sent = [r for rpc, r in pg.calls if rpc == "delete_documents"][-1]
    assert (list(sent.ids), list(sent.collections), sent.filters[0].equals) == ([], ["hr"], "已废止")
    assert by_filter.deleted_documents == 0
    with pytest.raises(InvalidArgument) as err:
        await use.lifecycle.delete("collections/hr", ["collections/other/documents/a"], "", Deadline(5))
    assert err.value.field == "names[0]"
    with pytest.raises(InvalidArgument):
        await use.lifecycle.delete("collections/hr", [], "", Deadline(5))
    broken = mesh(pg=pg, graph=FakeRetriever("retriever_graph", fail=grpc.StatusCode.UNAVAILABLE))
    with pytest.raises(DownstreamError) as down:
        await broken.lifecycle.delete("collections/hr", ["collections/hr/documents/a"], "", Deadline(5))
    assert down.value.code == grpc.StatusCode.UNAVAILABLE


async def test_collections_merge_counts_across_stores():
    pg, graph = FakeRetriever("retriever_pg"), FakeRetriever("retriever_graph")
    pg.collections = [types_pb2.CollectionInfo(name="hr", documents=3, chunks=9, entities=0)]
    graph.collections = [types_pb2.CollectionInfo(name="hr", documents=3, chunks=9, entities=4),
                         types_pb2.CollectionInfo(name="med", entities=7)]
    use = mesh(pg=pg, graph=graph)
    listed = await use.lifecycle.list_collections(Deadline(5))
    assert [(c.name, c.documents, c.chunks, c.entities) for c in listed.collections] == [("hr", 3, 9, 4), ("med", 0, 0, 7)]
    deleted = await use.lifecycle.delete_collection("collections/hr", Deadline(5))
    assert set(deleted.by_store) == {"retriever_pg", "retriever_graph"}


async def test_a_missing_collection_is_not_found_for_list_and_delete_but_the_default_lists_empty():
    pg, graph = FakeRetriever("retriever_pg"), FakeRetriever("retriever_graph")
    pg.collections = [types_pb2.CollectionInfo(name="hr", documents=1)]
    graph.collections = []
    use = mesh(pg=pg, graph=graph)
    for call in (lambda: use.lifecycle.list("collections/nosuch", 0, "", "", Deadline(5)),
                 lambda: use.lifecycle.delete_collection("collections/nosuch", Deadline(5)),
                 # a trial's DeleteDocuments under a misspelt collection answered OK, zero deleted
                 lambda: use.lifecycle.delete("collections/nosuch", ["collections/nosuch/documents/a"], "", Deadline(5)),
                 lambda: use.lifecycle.delete("collections/-", ["collections/nosuch/documents/a"], "", Deadline(5)),
                 lambda: use.lifecycle.delete("collections/nosuch", [], 'status = "x"', Deadline(5))):
        with pytest.raises(NotFound) as err:
            await call()
        assert "'nosuch' does not exist" in str(err.value) and "looks like" not in str(err.value)
    with pytest.raises(NotFound) as err:  # a fresh user's misspelling
        await use.lifecycle.list("collections/hrr", 0, "", "", Deadline(5))
    assert "it looks like 'hr'" in str(err.value)
    with pytest.raises(NotFound) as err:  # a delete names no look-alike: a trial's hint pointed it at the real collection
        await use.lifecycle.delete_collection("collections/Hr", Deadline(5))
    assert "'Hr' does not exist: nothing was deleted" in str(err.value) and "looks like" not in str(err.value)
    assert not pg.calls or all(c[0] not in ("list_documents", "delete_collection", "delete_documents") for c in pg.calls)
    assert not (await use.lifecycle.list("collections/default", 0, "", "", Deadline(5))).documents
    assert not (await use.lifecycle.list("collections/hr", 0, "", "", Deadline(5))).documents  # exists, lists what it holds
    # a collection another gateway created after this one's last read is found by a fresh read, not refused
    pg.collections.append(types_pb2.CollectionInfo(name="new", documents=1))
    await use.lifecycle.list("collections/new", 0, "", "", Deadline(5))
