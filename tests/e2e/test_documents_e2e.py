"""Files in, collections, metadata filters and the document lifecycle end
to end: real files of each format through the gateway's Ingest over gRPC,
searches scoped to a collection and filtered on metadata, GetDocument /
ListDocuments / DeleteDocuments / DeleteCollection over REST, and both
stores checked directly after a deletion."""
from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.parse
import urllib.request

import asyncpg
import grpc
import pytest
import pytest_asyncio
from neo4j import AsyncGraphDatabase

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.filters import parse_filter, to_proto
from tests import file_makers as mk

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]
PDF = "手册/差旅办法.pdf"
FILES = {
    PDF: mk.pdf_bytes(1),
    "手册/差旅办法.docx": mk.docx_bytes(),
    "手册/制度.txt": mk.text_gb18030(),
    "手册/说明.md": mk.markdown_text().encode(),
    "手册/页面.html": mk.html_text().encode(),
    "手册/加密.pdf": mk.encrypted_pdf_bytes(),
}
OPS_TEXT = f"# 运维值班手册\n\n## 住宿\n\n{mk.PARAGRAPH_3}\n\n夜间值班人员的住宿由运维部统一安排。\n"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stub(mesh):
    channel = grpc.aio.insecure_channel(mesh.gateway, options=[("grpc.max_send_message_length", 64 << 20)])
    yield gateway_pb2_grpc.GatewayServiceStub(channel)
    await channel.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ingested(stub):
    files = [gateway_pb2.IngestFile(name=n, content=c) for n, c in FILES.items()]
    hr = await stub.Ingest(gateway_pb2.IngestRequest(files=files, collection="hr"), timeout=600)
    ops = await stub.Ingest(gateway_pb2.IngestRequest(
        files=[gateway_pb2.IngestFile(name="运维/值班.md", content=OPS_TEXT.encode())], collection="ops"), timeout=600)
    records = [{"id": f"old-{i}", "law": "大气污染防治法", "chapter": "第七章 法律责任", "article": f"第{i}条", "status": "已废止",
                "text": f"违反本法规定超标排放大气污染物的，责令改正，处以罚款；超标排放情节严重的，责令停业。旧{i}"} for i in range(12)]
    records += [{"id": f"new-{i}", "law": "大气污染防治法", "chapter": "第七章 法律责任", "article": f"第{i}条之一",
                 "status": "现行有效", "text": f"超标排放的，处以罚款。新{i}"} for i in range(8)]
    laws = await stub.Ingest(gateway_pb2.IngestRequest(
        jsonl="\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode(), collection="laws"), timeout=600)
    return hr, ops, laws


def _http(mesh, method: str, path: str, body: object | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
    url = mesh.rest_url + urllib.parse.quote(path, safe="/:?=&%")
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def http(mesh, method: str, path: str, body: object | None = None) -> tuple[int, dict]:
    return await asyncio.to_thread(_http, mesh, method, path, body)


async def test_every_file_reports_its_outcome_and_reingest_is_unchanged(stub, ingested):
    hr, ops, laws = ingested
    outcome = {f.name: (gateway_pb2.FileStatus.Name(f.status), f.reason) for f in hr.files}
    assert outcome["手册/加密.pdf"] == ("FILE_STATUS_FAILED", "encrypted PDF: needs a password")
    assert [n for n, (s, _) in outcome.items() if s == "FILE_STATUS_STORED"] == list(FILES)[:-1]
    assert (hr.stored, ops.stored, laws.stored) == (5, 1, 20)
    again = await stub.Ingest(gateway_pb2.IngestRequest(
        files=[gateway_pb2.IngestFile(name=PDF, content=FILES[PDF])], collection="hr"), timeout=300)
    assert [gateway_pb2.FileStatus.Name(f.status) for f in again.files] == ["FILE_STATUS_UNCHANGED"]


async def test_collections_with_overlapping_text_return_only_their_own(stub, ingested):
    for collections, expected in ((["hr"], {"hr"}), (["ops"], {"ops"}), (["hr", "ops"], {"hr", "ops"})):
        reply = await stub.Search(gateway_pb2.SearchRequest(query="住宿费超出标准的部分由谁承担？", top_k=10,
                                                            collections=collections), timeout=120)
        assert reply.results, collections
        assert {c.collection for c in reply.results} == expected
    default = await stub.Search(gateway_pb2.SearchRequest(query="住宿费超出标准的部分由谁承担？", top_k=10), timeout=120)
    assert not default.results  # nothing was ingested into "default"


async def test_a_status_filter_returns_only_matching_documents_and_still_top_k(stub, ingested):
    query = "超标排放大气污染物如何处罚？"
    unfiltered = await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=5, collections=["laws"]), timeout=120)
    assert any(c.metadata["status"] == "已废止" for c in unfiltered.results)
    filtered = await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=5, collections=["laws"],
                                                           filters=to_proto(parse_filter('status = "现行有效"'))), timeout=120)
    assert len(filtered.results) == 5
    assert {c.metadata["status"] for c in filtered.results} == {"现行有效"}
    assert all(c.document_id.startswith("new-") for c in filtered.results)
    answer = await stub.Answer(gateway_pb2.AnswerRequest(query=query, top_k=5, collections=["laws"],
                                                         filters=to_proto(parse_filter('status = "现行有效"'))), timeout=120)
    assert {c.document_id[:4] for c in answer.citations} <= {"new-"}


async def test_a_question_finds_the_sentences_of_ingested_chunks_already_embedded(stub, ingested):
    # The gateway embeds them in the background once no ingest has run for
    # a while (ingest.sentence_vectors_mode); no question may embed them first.
    from prometheus_client import REGISTRY

    for _ in range(600):
        if REGISTRY.get_sample_value("graphmesh_sentence_backfill_pending") == 0:
            break
        await asyncio.sleep(0.1)
    assert REGISTRY.get_sample_value("graphmesh_sentence_backfill_pending") == 0
    reply = await stub.Search(gateway_pb2.SearchRequest(query="夜间值班人员的住宿由谁安排？", top_k=5, collections=["ops"]), timeout=60)
    stage = next(t for t in reply.timings if t.stage == "sentence.maxsim")
    sentences, cached = (int(part.split()[0]) for part in stage.detail.split(", "))
    assert stage.status == types_pb2.STAGE_STATUS_OK and sentences >= 2 and cached == sentences, stage.detail


async def test_documents_listed_and_fetched_over_rest(mesh, ingested):
    status, body = await http(mesh, "GET", f"/v1/collections/hr/documents/{PDF}")
    assert status == 200 and body["document"]["name"] == f"collections/hr/documents/{PDF}"
    assert body["document"]["title"] == mk.TITLE and body["document"]["chunkCount"] >= 3
    status, first = await http(mesh, "GET", "/v1/collections/hr/documents?pageSize=2")
    assert status == 200 and len(first["documents"]) == 2 and first["nextPageToken"]
    status, rest = await http(mesh, "GET", f"/v1/collections/hr/documents?pageSize=10&pageToken={first['nextPageToken']}")
    ids = [d["id"] for d in first["documents"] + rest["documents"]]
    assert ids == sorted(n for n in FILES if n != "手册/加密.pdf") and rest["nextPageToken"] == ""
    status, largest = await http(mesh, "GET", "/v1/collections/hr/documents?pageSize=1000")  # the documented maximum
    assert status == 200 and [d["id"] for d in largest["documents"]] == ids, largest
    status, export = await http(mesh, "GET", "/v1/collections/hr/entities:export?pageSize=10000")
    assert status == 200, export
    status, laws = await http(mesh, "GET", "/v1/collections/-/documents?pageSize=100&filter=" +
                              urllib.parse.quote('status = "已废止"'))
    assert status == 200 and sorted(d["id"] for d in laws["documents"]) == sorted(f"old-{i}" for i in range(12))
    status, missing = await http(mesh, "GET", "/v1/collections/ops/documents/" + PDF)
    assert status == 404 and missing["error"]["status"] == "NOT_FOUND"
    status, bad = await http(mesh, "GET", "/v1/collections/hr/documents?filter=status%20~%201")
    assert status == 400 and bad["error"]["details"][-1]["fieldViolations"][0]["field"] == "filter"
    status, listed = await http(mesh, "GET", "/v1/collections")
    counts = {c["name"]: c for c in listed["collections"]}
    assert counts["hr"]["documents"] == 5 and counts["laws"]["documents"] == 20


async def _stores(mesh, doc_id: str) -> dict[str, int]:
    conn = await asyncpg.connect(mesh.pg_dsn)
    try:
        pg = {
            "pg.documents": await conn.fetchval("SELECT count(*) FROM documents WHERE id = $1", doc_id),
            "pg.chunks": await conn.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", doc_id),
            "pg.postings": await conn.fetchval("SELECT count(*) FROM chunk_terms WHERE chunk_id LIKE $1", doc_id + "#%"),
        }
    finally:
        await conn.close()
    driver = AsyncGraphDatabase.driver(mesh.neo4j_uri, auth=None)
    try:
        async def one(query: str, **params) -> int:
            return (await driver.execute_query(query, params)).records[0][0]
        graph = {
            "graph.documents": await one("MATCH (d:Document {id: $id}) RETURN count(d)", id=doc_id),
            "graph.chunks": await one("MATCH (c:Chunk {document_id: $id}) RETURN count(c)", id=doc_id),
            "graph.title_heading": await one("MATCH (h:Heading {collection: 'hr', name: $t}) RETURN count(h)", t=mk.TITLE),
        }
    finally:
        await driver.close()
    return {**pg, **graph}


async def test_a_document_s_chunks_are_shown_in_reading_order_when_asked(mesh, ingested, monkeypatch, capsys):
    """What a file was parsed into and how it was cut: GetDocument's full view over REST, and
    `graphmesh documents get --chunks`; the basic view (the default) carries no text."""
    status, basic = await http(mesh, "GET", f"/v1/collections/hr/documents/{PDF}")
    assert status == 200 and basic["document"]["chunks"] == []
    status, full = await http(mesh, "GET", f"/v1/collections/hr/documents/{PDF}?view=DOCUMENT_VIEW_FULL")
    chunks = full["document"]["chunks"]
    assert status == 200 and len(chunks) == full["document"]["chunkCount"] >= 3
    assert [c.get("ordinal", 0) for c in chunks] == list(range(len(chunks))) and all(c["text"] for c in chunks)
    assert all(c["metadata"]["page"] for c in chunks)  # a PDF's chunks keep their page
    status, bad = await http(mesh, "GET", f"/v1/collections/hr/documents/{PDF}?view=EVERYTHING")
    assert status == 400 and bad["error"]["details"][-1]["fieldViolations"][0]["field"] == "view"
    from services.cli.main import main as cli

    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", mesh.gateway)
    assert await asyncio.to_thread(cli, ["documents", "get", PDF, "--collection", "hr", "--chunks"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("--- chunk ") == len(chunks) and chunks[-1]["text"].splitlines()[0] in printed


async def test_a_deleted_document_cannot_be_found_and_nothing_it_alone_supported_remains(mesh, stub, ingested):
    # Its title heading is shared with the .docx, .md and .html of the same
    # title; deleted together, nothing is left under it.
    before = await _stores(mesh, PDF)
    assert before["pg.documents"] == before["graph.documents"] == 1 and before["pg.postings"] > 0
    queries = ["住宿标准一类城市", "出差申请单", "差旅", "城市类别分级报销住宿费"]
    found_before = set()
    for q in queries:
        reply = await stub.Search(gateway_pb2.SearchRequest(query=q, top_k=20, collections=["hr"]), timeout=120)
        found_before |= {c.document_id for c in reply.results}
    assert PDF in found_before
    status, body = await http(mesh, "POST", "/v1/collections/hr/documents:batchDelete",
                              {"names": ["collections/hr/documents/手册/差旅办法.docx", "collections/hr/documents/手册/说明.md",
                                         "collections/hr/documents/手册/页面.html", f"collections/hr/documents/{PDF}"]})
    assert status == 200 and body["deletedDocuments"] == 4
    assert set(body["byStore"]) == {"retriever_pg", "retriever_graph"}
    assert body["byStore"]["retriever_pg"]["postings"] > 0 and body["byStore"]["retriever_graph"]["graphNodes"] > 3
    for q in queries:
        reply = await stub.Search(gateway_pb2.SearchRequest(query=q, top_k=20, collections=["hr"]), timeout=120)
        channels = {s.channel for c in reply.results for s in c.channel_scores}
        assert PDF not in {c.document_id for c in reply.results}, (q, channels)
    after = await _stores(mesh, PDF)
    assert all(v == 0 for v in after.values()), after
    remaining = await stub.Search(gateway_pb2.SearchRequest(query="制度总则", top_k=5, collections=["hr"]), timeout=120)
    assert {c.document_id for c in remaining.results} == {"手册/制度.txt"}  # the rest of the collection is intact
    status, body = await http(mesh, "POST", "/v1/collections/hr/documents:batchDelete",
                              {"names": [f"collections/hr/documents/{PDF}"]})
    assert status == 200 and body.get("deletedDocuments", 0) == 0  # idempotent
    status, _ = await http(mesh, "GET", f"/v1/collections/hr/documents/{PDF}")
    assert status == 404


async def test_delete_collection_removes_its_documents_and_entities(mesh, stub, ingested):
    entities = '{"name": "差旅补助", "category": "费用", "aliases": ["出差补贴"]}\n'.encode()
    reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=entities, kind=gateway_pb2.INGEST_KIND_ENTITIES, collection="ops"),
                              timeout=120)
    assert reply.stored == 1
    found = await stub.SearchEntities(gateway_pb2.SearchEntitiesRequest(query="出差补贴", top_k=3, collections=["ops"]), timeout=60)
    assert [e.name for e in found.entities][:1] == ["差旅补助"]
    elsewhere = await stub.SearchEntities(gateway_pb2.SearchEntitiesRequest(query="出差补贴", top_k=3, collections=["hr"]), timeout=60)
    assert "差旅补助" not in [e.name for e in elsewhere.entities]
    status, body = await http(mesh, "DELETE", "/v1/collections/ops")
    assert status == 200 and body["byStore"]["retriever_pg"]["documents"] == 1
    assert body["byStore"]["retriever_graph"]["entities"] == 1 and body["byStore"]["retriever_pg"]["entities"] == 1
    gone = await stub.SearchEntities(gateway_pb2.SearchEntitiesRequest(query="出差补贴", top_k=3, collections=["ops"]), timeout=60)
    assert "差旅补助" not in [e.name for e in gone.entities]
    reply = await stub.Search(gateway_pb2.SearchRequest(query="夜间值班人员的住宿", top_k=5, collections=["ops"]), timeout=120)
    assert not reply.results
    status, listed = await http(mesh, "GET", "/v1/collections")
    assert "ops" not in {c["name"] for c in listed["collections"]}


async def test_a_blank_collection_name_is_refused_and_the_default_collection_kept(mesh):
    # a trial's DELETE /v1/collections/%20 answered 200 and emptied "default" (its law corpus)
    text = "第一条 空白集合名不得删除默认集合。\n"
    status, body = await http(mesh, "POST", "/v1/documents:ingest", {
        "files": [{"name": "空白测试.txt", "content": base64.b64encode(text.encode()).decode()}]})
    assert status == 200 and body["files"][0]["status"] in ("FILE_STATUS_STORED", "FILE_STATUS_UNCHANGED"), body
    for method, path, body in (("DELETE", "/v1/collections/%20", None), ("GET", "/v1/collections/%20/documents", None),
                               ("POST", "/v1/collections/%20/documents:batchDelete", {"filter": 'status = "x"'}),
                               ("POST", "/v1/collections/-/documents:batchDelete",
                                {"names": ["collections/ /documents/空白测试.txt"]}),
                               ("POST", "/v1/query:search", {"query": "空白集合名", "collections": ["  "]})):
        status, bad = await http(mesh, method, path, body)
        assert status == 400 and "blank" in json.dumps(bad, ensure_ascii=False), (method, path, status, bad)
    status, listed = await http(mesh, "GET", "/v1/collections/default/documents")
    assert status == 200 and "空白测试.txt" in [d["id"] for d in listed["documents"]]


async def test_a_collection_named_in_chinese_over_rest(mesh):
    text = "# 公司文档\n\n## 年假\n\n员工入职满一年后享有五天带薪年假，满十年后享有十天。\n"
    status, body = await http(mesh, "POST", "/v1/documents:ingest", {
        "collection": "公司文档", "files": [{"name": "制度/年假.md", "content": base64.b64encode(text.encode()).decode()}]})
    assert status == 200 and body["files"][0]["status"] == "FILE_STATUS_STORED", body
    status, found = await http(mesh, "POST", "/v1/query:search", {"query": "年假有几天", "topK": 3, "collections": ["公司文档"]})
    assert status == 200 and found["results"][0]["collection"] == "公司文档"
    status, listed = await http(mesh, "GET", "/v1/collections/公司文档/documents")
    assert status == 200 and [d["id"] for d in listed["documents"]] == ["制度/年假.md"]
    status, deleted = await http(mesh, "DELETE", "/v1/collections/公司文档")
    assert status == 200 and deleted["byStore"]["retriever_pg"]["documents"] == 1
    status, bad = await http(mesh, "POST", "/v1/query:search", {"query": "年假", "collections": ["公司 文档"]})
    assert status == 400 and "collections[0]" in json.dumps(bad, ensure_ascii=False)
    status, bad = await http(mesh, "POST", "/v1/query:search",
                             {"query": "年假", "filters": [{"key": "encoding", "anyOf": "utf-8"}]})
    violation = bad["error"]["details"][-1]["fieldViolations"][0]
    assert status == 400 and violation["field"] == "filters[0].any_of" and "JSON object" in violation["description"]


async def test_a_failure_of_the_first_file_shows_its_index_0_over_rest(mesh):
    files = [{"name": "空.txt", "content": ""},
             {"name": "好.md", "content": base64.b64encode("# 值班\n\n夜间值班每周轮换一次。\n".encode()).decode()}]
    status, body = await http(mesh, "POST", "/v1/documents:ingest", {"collection": "索引零", "files": files})
    assert status == 200 and [f["status"] for f in body["files"]] == ["FILE_STATUS_FAILED", "FILE_STATUS_STORED"], body
    assert [(f["index"], f["id"]) for f in body["failures"]] == [(0, "空.txt")], body  # proto3 JSON left a plain 0 out
    # content that is not base64 (json_format would skip the odd characters and store "hello world") is a 400
    # naming the file, and the document stored before is untouched
    files = [{"name": "好.md", "content": base64.b64encode("# 值班\n\n夜间值班每两周轮换。\n".encode()).decode()},
             {"name": "坏.txt", "content": "aGVsbG8g*d29y!bGQ="}]
    status, bad = await http(mesh, "POST", "/v1/documents:ingest", {"collection": "索引零", "files": files})
    violation = bad["error"]["details"][-1]["fieldViolations"][0]
    assert status == 400 and violation["field"] == "files[1].content" and "'*'" in violation["description"], bad
    status, listed = await http(mesh, "GET", "/v1/collections/索引零/documents")
    assert [d["id"] for d in listed["documents"]] == ["好.md"]
    status, found = await http(mesh, "POST", "/v1/query:search", {"query": "值班轮换", "topK": 1, "collections": ["索引零"]})
    assert "每周轮换" in found["results"][0]["text"]
    await http(mesh, "DELETE", "/v1/collections/索引零")


async def test_bad_scope_is_invalid_argument(stub):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query="x", collections=["bad name"]), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "collections[0]" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query="x", filters=[types_pb2.MetadataFilter(key="k'; --", equals="x")]),
                          timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "filters[0].key" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Ingest(gateway_pb2.IngestRequest(jsonl=b'{"id": 1, "text": "x"}', files=[gateway_pb2.IngestFile(name="a.txt")]),
                          timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT



async def test_the_cli_lists_documents_page_by_page_with_the_token_it_prints(mesh, stub, monkeypatch, capsys):
    from services.cli.main import main as cli
    records = [{"id": f"分页/{i}", "text": f"第{i}份说明：值班安排。"} for i in range(5)]
    reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl="\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode(),
                                                        collection="分页"), timeout=600)
    assert reply.stored == 5
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", mesh.gateway)
    assert await asyncio.to_thread(cli, ["documents", "list", "--collection", "分页", "--page-size", "2"]) == 0
    first = capsys.readouterr()
    token = first.err.strip().rsplit("--page-token ", 1)[1]
    assert await asyncio.to_thread(cli, ["documents", "list", "--collection", "分页", "--page-size", "2", "--page-token", token]) == 0
    second = capsys.readouterr()
    shown = [line for line in (first.out + second.out).splitlines() if line.strip()]
    assert len(shown) == 4 and len({line.split()[0] for line in shown}) == 4  # two pages, no document twice
    # a named id that is not there: the others are deleted, and the exit status says one was missing
    assert await asyncio.to_thread(cli, ["documents", "delete", "分页/9", "分页/4", "--collection", "分页"]) == 1
    out = capsys.readouterr()
    assert "not found in collections/分页: 分页/9" in out.err and "deleted 1 documents: 分页/4" in out.out


async def test_a_cli_list_or_delete_whose_filter_matches_nothing_says_so(mesh, ingested, monkeypatch, capsys):
    """A trial's filtered `documents list` printed nothing and returned 0, as if the filter were fine."""
    from services.cli.main import main as cli
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", mesh.gateway)
    nothing = 'status = "尚未施行"'
    assert await asyncio.to_thread(cli, ["documents", "list", "--collection", "laws", "--filter", nothing]) == 0
    out, err = capsys.readouterr()
    assert out == "" and f"no document in collection 'laws' matches --filter '{nothing}'" in err
    assert await asyncio.to_thread(cli, ["documents", "delete", "--collection", "laws", "--filter", nothing]) == 0
    assert "matches --filter" in capsys.readouterr().err
    assert await asyncio.to_thread(cli, ["documents", "list", "--collection", "laws", "--filter", 'status = "现行有效"']) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 8 and "matches" not in err


async def test_a_file_whose_text_is_already_stored_is_stored_with_a_notice(stub):
    """The same text under another name (a copy, a download twice) is stored under its own id and
    says which document holds it already: stored before, or an earlier file of the same call."""
    def md(name: str, body: str) -> gateway_pb2.IngestFile:
        return gateway_pb2.IngestFile(name=name, content=f"# 门禁卡办理\n\n{body}\n".encode())

    card = "新员工入职当天到行政前台领取门禁卡，遗失补办收费二十元。"
    first = await stub.Ingest(gateway_pb2.IngestRequest(files=[md("门禁.md", card)], collection="dups"), timeout=600)
    assert first.files[0].status == gateway_pb2.FILE_STATUS_STORED and first.files[0].duplicate_of == ""
    parking = "访客车辆在地下二层停放，前两小时免费。"
    again = await stub.Ingest(gateway_pb2.IngestRequest(files=[
        md("门禁(1).md", card), md("门禁.md", card), md("停车.md", parking), md("停车-副本.md", parking),
        md("其他.md", "会议室须提前一天预订。")], collection="dups"), timeout=600)
    outcome = {f.name: (gateway_pb2.FileStatus.Name(f.status), f.duplicate_of) for f in again.files}
    assert outcome == {"门禁(1).md": ("FILE_STATUS_STORED", "门禁.md"), "门禁.md": ("FILE_STATUS_UNCHANGED", ""),
                       "停车.md": ("FILE_STATUS_STORED", ""), "停车-副本.md": ("FILE_STATUS_STORED", "停车.md"),
                       "其他.md": ("FILE_STATUS_STORED", "")}
    elsewhere = await stub.Ingest(gateway_pb2.IngestRequest(files=[md("门禁-分部.md", card)], collection="dups2"), timeout=600)
    assert (elsewhere.files[0].status, elsewhere.files[0].duplicate_of) == (gateway_pb2.FILE_STATUS_STORED, "")  # another collection


async def test_a_revised_file_stored_under_a_new_name_names_the_old_one_with_its_title(stub):
    """Three trials' revised rules saved as a new file answered beside the old ones, 1500元 and 1800元 together,
    and nothing said so."""
    def md(name: str, body: str) -> gateway_pb2.IngestFile:
        return gateway_pb2.IngestFile(name=name, content=f"# 公积金提取办法\n\n{body}\n".encode())

    old = "未提供租赁备案证明的，每人每月提取额度不超过1500元。"
    first = await stub.Ingest(gateway_pb2.IngestRequest(files=[md("提取办法2024.md", old)], collection="revisions"),
                              timeout=600)
    assert list(first.files[0].same_title_as) == []
    revised = await stub.Ingest(gateway_pb2.IngestRequest(files=[
        md("提取办法2026.md", old.replace("1500", "1800")), md("提取办法2024-副本.md", old), md("提取办法2024.md", old)],
        collection="revisions"), timeout=600)
    outcome = {f.name: (gateway_pb2.FileStatus.Name(f.status), f.duplicate_of, list(f.same_title_as)) for f in revised.files}
    assert outcome == {
        "提取办法2026.md": ("FILE_STATUS_STORED", "", ["提取办法2024.md"]),
        # the same text is a copy, said once as such; the 2026 file of this call has the same title and other text
        "提取办法2024-副本.md": ("FILE_STATUS_STORED", "提取办法2024.md", ["提取办法2026.md"]),
        "提取办法2024.md": ("FILE_STATUS_UNCHANGED", "", [])}  # nothing new stored: no notice
    elsewhere = await stub.Ingest(gateway_pb2.IngestRequest(files=[md("提取办法2025.md", "另一个城市的办法。")],
                                                            collection="revisions2"), timeout=600)
    assert list(elsewhere.files[0].same_title_as) == []  # another collection


async def test_a_revision_whose_name_differs_by_its_year_or_quarter_names_the_old_one(stub):
    """Two trials' revised rate sheets saved as carrier_rates_2027Q1.csv beside carrier_rates_2026Q4.csv, and
    维修配件价格表2027.csv beside 维修配件价格表.csv, got no notice: a CSV's title is its file name."""
    def csv(name: str, price: str) -> gateway_pb2.IngestFile:
        return gateway_pb2.IngestFile(name=name, content=f"carrier,service,usd_per_kg\nUPS,air,{price}\n".encode())

    first = await stub.Ingest(gateway_pb2.IngestRequest(files=[csv("carrier_rates_2026Q4.csv", "6.80"),
                                                               csv("carrier_rates_eu.csv", "9.10")],
                                                        collection="rates"), timeout=600)
    assert [list(f.same_title_as) for f in first.files] == [[], []]  # another sheet, not a version
    revised = await stub.Ingest(gateway_pb2.IngestRequest(files=[csv("carrier_rates_2027Q1.csv", "7.90")],
                                                          collection="rates"), timeout=600)
    assert list(revised.files[0].same_title_as) == ["carrier_rates_2026Q4.csv"]


async def test_a_revision_for_another_term_names_the_old_one(stub):
    """A trial's kindergarten put its 2026 autumn fee sheet beside the 2027 spring one (titles 2026年秋季学期… and
    2027年春季学期…) and got no notice; the answer quoted the old fee."""
    def md(title: str, fee: str) -> gateway_pb2.IngestFile:
        return gateway_pb2.IngestFile(name=f"{title}.md", content=f"# {title}\n\n保育教育费每月{fee}元。\n".encode())

    await stub.Ingest(gateway_pb2.IngestRequest(files=[md("2026年秋季学期收费与退费标准", "1600")], collection="terms"),
                      timeout=600)
    revised = await stub.Ingest(gateway_pb2.IngestRequest(files=[md("2027年春季学期收费与退费标准", "1800")],
                                                          collection="terms"), timeout=600)
    assert list(revised.files[0].same_title_as) == ["2026年秋季学期收费与退费标准.md"]


async def test_a_file_another_collection_holds_is_stored_under_its_collections_name(stub):
    """Three trials ingested one folder into a second collection and every file failed: "document id
    'docs/…' is stored in collection 'jiaowu'; delete it there first or give another id"."""
    def txt(text: str) -> gateway_pb2.IngestFile:
        return gateway_pb2.IngestFile(name="docs/作息.txt", content=text.encode())

    first = await stub.Ingest(gateway_pb2.IngestRequest(files=[txt("高一早读7:20开始。")], collection="grade10"), timeout=600)
    second = await stub.Ingest(gateway_pb2.IngestRequest(files=[txt("高二早读7:10开始。")], collection="grade11"), timeout=600)
    assert [(gateway_pb2.FileStatus.Name(f.status), f.document_id) for f in (*first.files, *second.files)] == [
        ("FILE_STATUS_STORED", "docs/作息.txt"), ("FILE_STATUS_STORED", "grade11/docs/作息.txt")]
    again = await stub.Ingest(gateway_pb2.IngestRequest(files=[txt("高二早读7:10开始。")], collection="grade11"), timeout=600)
    assert [(gateway_pb2.FileStatus.Name(f.status), f.document_id) for f in again.files] == [
        ("FILE_STATUS_UNCHANGED", "grade11/docs/作息.txt")]
    # an edited file replaces its stored version, and says so (two trials saw "stored" and could not tell)
    edited = await stub.Ingest(gateway_pb2.IngestRequest(files=[txt("高二早读7:00开始。")], collection="grade11"), timeout=600)
    assert [(gateway_pb2.FileStatus.Name(f.status), f.document_id, f.replaced) for f in edited.files] == [
        ("FILE_STATUS_STORED", "grade11/docs/作息.txt", True)]
    assert not first.files[0].replaced and not second.files[0].replaced  # new ids replace nothing
    found = await stub.Search(gateway_pb2.SearchRequest(query="早读几点开始", collections=["grade10"]), timeout=60)
    assert {c.document_id for c in found.results} == {"docs/作息.txt"}  # each collection keeps its own text


async def test_a_file_ingested_again_without_metadata_keeps_what_it_had(stub):
    """Two trials' folder re-syncs, without the --meta of their first ingest, emptied every year and team filter."""
    def call(text: str, **metadata: str):
        return stub.Ingest(gateway_pb2.IngestRequest(collection="元数据", files=[gateway_pb2.IngestFile(
            name="运维/发布规范.md", content=f"# 发布规范\n\n{text}\n".encode(), metadata=metadata)]), timeout=600)

    async def stored_metadata() -> dict[str, str]:
        reply = await stub.GetDocument(gateway_pb2.GetDocumentRequest(name="collections/元数据/documents/运维/发布规范.md"))
        return dict(reply.document.metadata)

    assert (await call("周五全天禁止发布。", team="sre", year="2025")).files[0].status == gateway_pb2.FILE_STATUS_STORED
    again = await call("周五全天禁止发布。")  # the same text, no metadata: unchanged, and its metadata kept
    assert again.files[0].status == gateway_pb2.FILE_STATUS_UNCHANGED
    assert (await stored_metadata())["team"] == "sre"
    edited = await call("周五全天禁止发布，紧急修复须负责人审批。")  # new text, no metadata: stored with the old metadata
    assert edited.files[0].status == gateway_pb2.FILE_STATUS_STORED and (await stored_metadata())["year"] == "2025"
    hits = await stub.Search(gateway_pb2.SearchRequest(query="周五能发布吗", top_k=3, collections=["元数据"],
                                                       filters=[types_pb2.MetadataFilter(key="team", equals="sre")]))
    assert hits.results and "紧急修复" in hits.results[0].text
    await call("周五全天禁止发布，紧急修复须负责人审批。", team="dba")  # given metadata replaces it
    assert (await stored_metadata()).get("team") == "dba" and "year" not in await stored_metadata()


async def test_a_new_version_whose_old_one_prune_deletes_is_not_told_to_delete_it(mesh, tmp_path, monkeypatch, capsys):
    """A trial replaced 物业服务收费标准2026.md by its 2027 file and ran `ingest files --prune`: the 2027 line
    advised deleting the 2026 document "no longer in force", and the next line pruned it."""
    from services.cli.main import main

    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", mesh.gateway)
    folder = tmp_path / "物业资料"
    folder.mkdir()
    (folder / "收费标准2026.md").write_text("# 物业服务收费标准\n\n高层住宅每月每平方米2.6元。\n", "utf-8")
    assert await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "prune_versions"]) == 0
    (folder / "收费标准2026.md").unlink()
    (folder / "收费标准2027.md").write_text("# 物业服务收费标准\n\n高层住宅每月每平方米2.8元。\n", "utf-8")
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "prune_versions", "--prune"]) == 0
    err = capsys.readouterr().err
    new = next(line for line in err.splitlines() if "收费标准2027.md" in line)
    assert new.endswith("; replaces '物业资料/收费标准2026.md', which --prune deletes (not among the files read)"), new
    assert "no longer in force" not in err and "pruned    物业资料/收费标准2026.md" in err
