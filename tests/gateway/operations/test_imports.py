"""ImportDocuments end to end over the real gateway (gRPC servers, REST
transcoder, the operations table in a real PostgreSQL): progress after each
batch and a final response equal to Ingest's; a cancel that stops at a batch
boundary with the documents stored whole (a real retriever_pg queried);
a new gateway over the same database reporting a finished operation and
ending an interrupted one ABORTED; an import whose operations database
went away ending with its own outcome once it is back; the REST routes and
their write rules."""
from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import parse_qs, urlsplit

import asyncpg
import grpc
import pytest
from aiohttp import ClientSession
from google.longrunning import operations_pb2
from google.rpc import code_pb2

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.api.auth import new_key
from services.gateway.downstream.grpc_adapters import GrpcRetriever
from tests import file_makers as mk
from tests.fakes import GatedExpander
from tests.fixtures.mesh import start_service
from tests.fixtures.proxy import CuttableProxy

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

#: The gated tests let one Embed call through per batch: the sentence
#: vectors embedded after each batch's store would be a second one.
CHUNK_EMBEDS_ONLY = {"sentence_vectors": False}


def jsonl(n: int, bad_lines: bool = False) -> bytes:
    lines = [json.dumps({"id": f"doc-{i}", "title": "测试法", "text": f"第{i}条 内容{i}。" * 3}, ensure_ascii=False) for i in range(n)]
    if bad_lines:
        lines[1:1] = ["not json", json.dumps({"id": "doc-0", "text": "第零条 后来的版本。"}, ensure_ascii=False)]
    return "\n".join(lines).encode()


async def operation(gw, name: str) -> tuple[operations_pb2.Operation, gateway_pb2.IngestOperationMetadata]:
    op = await gw.operations.GetOperation(operations_pb2.GetOperationRequest(name=name), timeout=10)
    meta = gateway_pb2.IngestOperationMetadata()
    assert op.metadata.Unpack(meta)
    return op, meta


async def until_done(gw, name: str) -> operations_pb2.Operation:
    for _ in range(1000):
        op, _ = await operation(gw, name)
        if op.done:
            return op
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name} not done")


def without_timings(reply: gateway_pb2.IngestResponse) -> gateway_pb2.IngestResponse:
    copy = gateway_pb2.IngestResponse()
    copy.CopyFrom(reply)
    del copy.timings[:]
    return copy


async def test_progress_after_each_batch_and_the_response_of_ingest(fake_gateway, pg_new_database):
    expander = GatedExpander()
    gw = await fake_gateway(expander=expander, ingest=CHUNK_EMBEDS_ONLY, operations={"dsn": await pg_new_database(), "batch_records": 2})
    request = gateway_pb2.IngestRequest(jsonl=jsonl(5, bad_lines=True), collection="hr")
    started = await gw.stub.ImportDocuments(request, timeout=10)
    assert started.name.startswith("operations/import-") and not started.done
    seen = []
    for call in (1, 2, 3):  # 5 distinct ids in batches of 2: 2, 2, 1
        await expander.until_arrived(call)
        _, meta = await operation(gw, started.name)
        seen.append((meta.received, meta.stored, meta.failed))
        expander.gate.release()
    done = await until_done(gw, started.name)
    _, meta = await operation(gw, started.name)
    # 7 lines: one not JSON, doc-0 twice (the first superseded, reported as a file repeating another is): both failed
    # at once, so that received = stored + unchanged + failed
    assert seen == [(2, 0, 2), (4, 2, 2), (6, 4, 2)] and (meta.total, meta.received, meta.stored, meta.failed) == (7, 7, 5, 2)
    imported = gateway_pb2.IngestResponse()
    assert done.response.Unpack(imported)
    expander.open(100)
    direct = await gw.stub.Ingest(request, timeout=10)
    assert without_timings(imported) == without_timings(direct)
    assert {t.stage for t in imported.timings} >= {"parse", "embed", "store"}


async def test_file_batches_give_the_outcomes_of_ingest(fake_gateway):
    gw = await fake_gateway(operations={"batch_files": 2})  # in memory
    files = [gateway_pb2.IngestFile(name="a.md", content=mk.markdown_text().encode()),
             gateway_pb2.IngestFile(name="b.pdf", content=mk.encrypted_pdf_bytes()),
             gateway_pb2.IngestFile(name="c.txt", content=mk.text_gb18030()),
             gateway_pb2.IngestFile(name="d.html", content=mk.html_text().encode(), document_id="a.md")]
    request = gateway_pb2.IngestRequest(files=files)
    done = await until_done(gw, (await gw.stub.ImportDocuments(request, timeout=10)).name)
    imported = gateway_pb2.IngestResponse()
    assert done.response.Unpack(imported)
    direct = await gw.stub.Ingest(request, timeout=10)
    # the same files again: each stored one replaced what the import stored (the fake store keeps no hashes)
    assert [f.replaced for f in direct.files if f.status == gateway_pb2.FILE_STATUS_STORED] == [True, True]
    for outcome in direct.files:
        outcome.replaced = False
    assert without_timings(imported) == without_timings(direct)
    assert [f.index for f in imported.failures] == [1, 3] and "repeats file 0" in imported.failures[1].reason


async def test_a_bad_request_is_refused_before_an_operation_exists(fake_gateway):
    gw = await fake_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gw.stub.ImportDocuments(gateway_pb2.IngestRequest(collection="bad name"), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "collection" in err.value.details()
    listed = await gw.operations.ListOperations(operations_pb2.ListOperationsRequest(name="operations"), timeout=10)
    assert not listed.operations
    done = await until_done(gw, (await gw.stub.ImportDocuments(gateway_pb2.IngestRequest(jsonl=b"not json\n{}"), timeout=10)).name)
    assert done.error.code == code_pb2.INVALID_ARGUMENT and "jsonl[0]" in done.error.message
    meta = gateway_pb2.IngestOperationMetadata()  # a second trial's failed import said received 0, failed 0
    assert done.metadata.Unpack(meta) and (meta.received, meta.failed) == (2, 2)


@pytest.fixture
async def real_pg_retriever(pg_new_database):
    from services.retriever_pg.config import RetrieverPgSettings
    from services.retriever_pg.server import build

    dsn = await pg_new_database()
    service, settings = await build(RetrieverPgSettings(port=0, dsn=dsn, embedding_dim=2))
    server, port, _ = await start_service(service, settings)
    retriever = GrpcRetriever("retriever_pg", f"127.0.0.1:{port}")
    yield retriever, dsn
    await retriever.close()
    await server.stop(0)
    await service.on_stop()


async def test_cancel_stops_at_a_batch_boundary_with_whole_documents_stored(fake_gateway, pg_new_database, real_pg_retriever):
    retriever, store_dsn = real_pg_retriever
    expander = GatedExpander()
    gw = await fake_gateway(expander=expander, ingest=CHUNK_EMBEDS_ONLY, retrievers=[retriever], operations={"dsn": await pg_new_database(), "batch_records": 3})
    name = (await gw.stub.ImportDocuments(gateway_pb2.IngestRequest(jsonl=jsonl(9)), timeout=10)).name
    await expander.until_arrived(1)
    expander.gate.release()  # batch 1 stored
    await expander.until_arrived(2)  # batch 2 embedding
    await gw.operations.CancelOperation(operations_pb2.CancelOperationRequest(name=name), timeout=10)
    _, meta = await operation(gw, name)
    assert meta.cancel_requested and meta.stored == 3
    expander.gate.release()  # batch 2 finishes; batch 3 never starts
    done = await until_done(gw, name)
    _, meta = await operation(gw, name)
    assert done.error.code == code_pb2.CANCELLED and (meta.received, meta.stored, meta.total) == (6, 6, 9)
    assert expander.arrived == 2
    conn = await asyncpg.connect(store_dsn)
    try:
        rows = await conn.fetch("SELECT d.id, count(c.id) AS chunks, count(c.embedding) AS embedded FROM documents d "
                                "LEFT JOIN chunks c ON c.document_id = d.id GROUP BY d.id ORDER BY d.id")
    finally:
        await conn.close()
    assert [r["id"] for r in rows] == [f"doc-{i}" for i in range(6)]
    assert all(r["chunks"] >= 1 and r["embedded"] == r["chunks"] for r in rows)
    # Running it again stores only what is missing.
    expander.open(100)
    again = await until_done(gw, (await gw.stub.ImportDocuments(gateway_pb2.IngestRequest(jsonl=jsonl(9)), timeout=10)).name)
    reply = gateway_pb2.IngestResponse()
    assert again.response.Unpack(reply) and (reply.unchanged, reply.stored) == (6, 3)


async def test_a_new_gateway_reports_finished_operations_and_aborts_interrupted_ones(fake_gateway, pg_new_database):
    dsn = await pg_new_database()
    expander = GatedExpander()
    first = await fake_gateway(expander=expander, ingest=CHUNK_EMBEDS_ONLY, operations={"dsn": dsn, "batch_records": 2})
    expander.open(100)
    finished = await until_done(first, (await first.stub.ImportDocuments(gateway_pb2.IngestRequest(jsonl=jsonl(3)), timeout=10)).name)
    expander.gate = asyncio.Semaphore(0)
    interrupted = (await first.stub.ImportDocuments(gateway_pb2.IngestRequest(jsonl=jsonl(4)), timeout=10)).name
    await expander.until_arrived(3)  # stuck in its first batch, as if the process died here
    second = await fake_gateway(operations={"dsn": dsn})  # same host: the running operation was the previous process's
    op = await until_done(second, finished.name)
    assert op == finished
    op, meta = await operation(second, interrupted)
    assert op.done and op.error.code == code_pb2.ABORTED and "skips" in op.error.message and meta.total == 4
    listed = await second.operations.ListOperations(operations_pb2.ListOperationsRequest(filter="done = true", page_size=1), timeout=10)
    assert [o.name for o in listed.operations] == [interrupted] and listed.next_page_token
    rest = await second.operations.ListOperations(operations_pb2.ListOperationsRequest(page_token=listed.next_page_token), timeout=10)
    assert [o.name for o in rest.operations] == [finished.name] and not rest.next_page_token
    expander.open(100)  # the old runner wakes up: it finds its operation ended and leaves it so
    await asyncio.sleep(0.2)
    assert (await operation(second, interrupted))[0].error.code == code_pb2.ABORTED
    await second.operations.DeleteOperation(operations_pb2.DeleteOperationRequest(name=finished.name), timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await operation(second, finished.name)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def proxied(dsn: str) -> tuple[CuttableProxy, str]:
    """A CuttableProxy in front of the server of ``dsn`` and the DSN through it."""
    parts = urlsplit(dsn)
    query = parse_qs(parts.query)
    if "host" in query:  # the embedded server: a unix socket
        proxy = CuttableProxy(unix_path=f"{query['host'][0]}/.s.PGSQL.{query.get('port', ['5432'])[0]}")
    else:
        proxy = CuttableProxy(parts.hostname, parts.port or 5432)
    port = await proxy.start()
    return proxy, f"postgresql://{parts.netloc.rsplit('@', 1)[0]}@127.0.0.1:{port}{parts.path}"


async def test_an_import_whose_database_went_away_ends_unavailable_once_it_is_back(fake_gateway, pg_new_database):
    # Regression (crash workloads, PostgreSQL killed during an import): the
    # outcome was saved once; it failed, the operation stayed running with
    # no heartbeat and ended ABORTED ("the gateway restarted") a lease later.
    proxy, dsn = await proxied(await pg_new_database())
    try:
        expander = GatedExpander()
        gw = await fake_gateway(expander=expander, ingest=CHUNK_EMBEDS_ONLY, operations={"dsn": dsn, "batch_records": 2})
        name = (await gw.stub.ImportDocuments(gateway_pb2.IngestRequest(jsonl=jsonl(4)), timeout=10)).name
        await expander.until_arrived(1)
        proxy.cut()  # the database goes away while batch 1 is stored
        accepted = proxy.accepted
        expander.open(100)
        for _ in range(1000):  # batch 1's progress and then the outcome could not be saved
            if proxy.accepted > accepted:
                break
            await asyncio.sleep(0.01)
        assert proxy.accepted > accepted
        proxy.heal()
        done = await until_done(gw, name)
        assert done.error.code == code_pb2.UNAVAILABLE and "operations database unavailable" in done.error.message
        assert "running the same import again skips" in done.error.message
    finally:
        await proxy.close()


async def test_rest_routes_and_their_write_rules(fake_gateway):
    key, record = new_key("ops")
    expander = GatedExpander()
    gw = await fake_gateway(expander=expander, ingest=CHUNK_EMBEDS_ONLY, auth={"enabled": True, "api_keys": record.line()}, operations={"batch_records": 1})
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    async with ClientSession() as http:
        body = json.dumps({"jsonl": base64.b64encode(jsonl(2)).decode()})
        async with http.post(gw.rest_url + "/v1/documents:import", data=body, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 401
        async with http.post(gw.rest_url + "/v1/documents:import", data=body, headers=auth) as r:
            assert r.status == 200
            name = (await r.json())["name"]
        await expander.until_arrived(1)
        async with http.get(gw.rest_url + "/v1/operations", params={"filter": "done = false"}, headers=auth) as r:
            listed = await r.json()
            assert r.status == 200 and [o["name"] for o in listed["operations"]] == [name]
            assert listed["operations"][0]["metadata"]["@type"].endswith("graphmesh.gateway.v1.IngestOperationMetadata")
        cancel = gw.rest_url + f"/v1/{name}:cancel"
        async with http.post(cancel, data="{}", headers={"Content-Type": "application/json"}) as r:
            assert r.status == 401
        async with http.post(cancel, data="{}", headers={**auth, "Origin": "https://evil.example"}) as r:
            assert r.status == 403
        async with http.delete(gw.rest_url + f"/v1/{name}", headers=auth) as r:
            assert r.status == 400 and (await r.json())["error"]["status"] == "FAILED_PRECONDITION"
        async with http.post(cancel, data="{}", headers=auth) as r:
            assert r.status == 200
        expander.open(10)
        for _ in range(500):
            async with http.get(gw.rest_url + f"/v1/{name}", headers=auth) as r:
                op = await r.json()
            if op.get("done"):
                break
            await asyncio.sleep(0.01)
        assert op["done"] and op["error"]["code"] == code_pb2.CANCELLED and op["metadata"]["cancelRequested"] is True
        async with http.get(gw.rest_url + "/v1/operations/nope", headers=auth) as r:
            assert r.status == 404
        async with http.get(gw.rest_url + "/v1/operations", params={"filter": "collection = 'a'"}, headers=auth) as r:
            assert r.status == 400 and (await r.json())["error"]["details"][-1]["fieldViolations"][0]["field"] == "filter"


async def test_a_collection_cannot_be_deleted_while_an_import_into_it_runs(fake_gateway, pg_new_database):
    expander = GatedExpander()
    gw = await fake_gateway(expander=expander, ingest=CHUNK_EMBEDS_ONLY, operations={"dsn": await pg_new_database(), "batch_records": 3})
    name = (await gw.stub.ImportDocuments(gateway_pb2.IngestRequest(jsonl=jsonl(6), collection="导入中"), timeout=10)).name
    await expander.until_arrived(1)  # the first batch is being embedded
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gw.stub.DeleteCollection(gateway_pb2.DeleteCollectionRequest(name="collections/导入中"), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and name in err.value.details()
    await gw.operations.CancelOperation(operations_pb2.CancelOperationRequest(name=name), timeout=10)
    expander.open(100)
    assert (await until_done(gw, name)).error.code == code_pb2.CANCELLED
    await gw.stub.DeleteCollection(gateway_pb2.DeleteCollectionRequest(name="collections/导入中"), timeout=10)  # once ended
