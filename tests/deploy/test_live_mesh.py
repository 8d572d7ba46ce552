"""Against the real services (in-process mesh: real PostgreSQL, Neo4j,
gRPC servers and the REST transcoder; the LLM is a loopback HTTP server
answering like an OpenAI-compatible endpoint):

- every metric name and label the dashboards and alert rules read
  (deploy/grafana/metrics.json) is exported after real requests, or is on
  the short, explicit list of metrics still to be added;
- every REST route of services/gateway/static/openapi.json answers a request
  valid under its requestBody schema with a body valid under its 200 schema.
"""
from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
import urllib.request
from pathlib import Path

import grpc
import jsonschema
import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import REGISTRY

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.gateway.config import GatewaySettings
from tests.fixtures.mesh import extra_gateway

pytestmark = pytest.mark.asyncio(loop_scope="session")
REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "data" / "law_sample.jsonl"
QUESTION = "什么是实用新型？"
# Metrics the dashboards and alerts read that the services do not export
# yet (issue 14): name -> labels. Remove an entry when its metric lands; the
# test below fails on an entry whose metric is already exported.
TO_BE_ADDED: dict[str, set[str]] = {}
# An LLM answer with a citation to a source that does not exist ([9]) in a
# code fence: the gateway's clean-up removes both and counts them.
LLM_ANSWER = "```\n实用新型是对产品的形状、构造或者其结合所提出的适于实用的新的技术方案[1][9]。\n```"


async def openai_like(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    if not body.get("stream"):
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": LLM_ANSWER}}]})
    reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await reply.prepare(request)
    for piece in (LLM_ANSWER[:20], LLM_ANSWER[20:]):
        await reply.write(f"data: {json.dumps({'choices': [{'delta': {'content': piece}}]}, ensure_ascii=False)}\n\n".encode())
    await reply.write(b"data: [DONE]\n\n")
    return reply


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def llm_url():
    app = web.Application()
    app.router.add_post("/v1/chat/completions", openai_like)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def exported(mesh, llm_url) -> dict[str, list[set[str]]]:
    """Real traffic, then prometheus_client's registry: exposed sample name
    (counter ``..._total``, histogram base name, gauge name) -> label sets."""
    records = b"\n".join(SAMPLE.read_bytes().splitlines()[:3])
    async with grpc.aio.insecure_channel(mesh.gateway) as channel:
        stub = gateway_pb2_grpc.GatewayServiceStub(channel)
        ingested = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=records, domain_pack="law_zh"), timeout=300)
        assert ingested.stored + ingested.unchanged == 3
        assert (await stub.Search(gateway_pb2.SearchRequest(query=QUESTION, top_k=3), timeout=60)).results
        await stub.Answer(gateway_pb2.AnswerRequest(query=QUESTION, top_k=3), timeout=60)
        refused = await stub.Answer(gateway_pb2.AnswerRequest(query="量子计算机的原理是什么？", top_k=3), timeout=60)
        assert refused.mode == gateway_pb2.ANSWER_MODE_ABSTAINED  # the abstention counter is observed too
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.Search(gateway_pb2.SearchRequest(query=" ", top_k=3), timeout=60)  # an error code too
        # The test mesh's reranker has no model: a degraded response.
        reranked = await stub.Search(gateway_pb2.SearchRequest(query=QUESTION, top_k=3, rerank=True), timeout=60)
        assert "reranker" in reranked.degraded
    # Three articles are too few evidence for the abstention rule: this gateway
    # is about the LLM path's metrics, so it always answers.
    settings = GatewaySettings(port=0, rest={"port": -1}, llm={"base_url": llm_url, "max_retries": 0},
                               min_evidence_score=0.0, abstention={"enabled": False})
    async with extra_gateway(mesh, settings) as llm_gateway:
        answer = await llm_gateway.Answer(gateway_pb2.AnswerRequest(query=QUESTION, top_k=3), timeout=60)
    assert answer.mode == gateway_pb2.ANSWER_MODE_LLM and answer.invalid_citations_removed == 1 and answer.fences_removed >= 1
    found: dict[str, list[set[str]]] = {}
    for family in REGISTRY.collect():
        name = f"{family.name}_total" if family.type == "counter" else family.name
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                found.setdefault(name, []).append(set(sample.labels) - {"le"})
    return found


def listed() -> dict[str, dict]:
    return json.loads((REPO / "deploy" / "grafana" / "metrics.json").read_text())["metrics"]


async def test_every_metric_the_dashboards_and_alerts_read_is_exported_with_its_labels(exported):
    missing = []
    for name, entry in listed().items():
        if name in TO_BE_ADDED:
            continue
        label_sets = exported.get(name)
        if not label_sets:
            missing.append(f"{name}: not exported (or never observed after real requests)")
        elif not any(set(entry["labels"]) <= labels for labels in label_sets):
            missing.append(f"{name}: exported with labels {sorted(set().union(*label_sets))}, dashboards use {entry['labels']}")
    assert not missing, "\n".join(missing)


async def test_the_to_be_added_list_stays_small_explicit_and_current(exported):
    metrics = listed()
    for name, labels in TO_BE_ADDED.items():
        assert name in metrics, f"{name} is allow-listed but no dashboard or alert reads it: remove it"
        assert set(metrics[name]["labels"]) == labels, f"{name}: dashboards use {metrics[name]['labels']}, allow-list says {labels}"
        assert name not in exported, f"{name} is exported now: remove it from TO_BE_ADDED so its labels are checked"


OPENAPI = REPO / "services" / "gateway" / "static" / "openapi.json"
ENTITIES = "\n".join(json.dumps(e, ensure_ascii=False) for e in (
    {"name": "马铃薯", "category": "蔬菜", "aliases": ["土豆"]}, {"name": "洋芋", "category": "蔬菜"},
    {"name": "番茄", "category": "蔬菜"})).encode()
REST_BODIES = {  # one valid request per documented route (proto3 JSON names)
    "/v1/documents:ingest": {"jsonl": base64.b64encode(b"\n".join(SAMPLE.read_bytes().splitlines()[3:5])).decode(), "kind": "INGEST_KIND_DOCUMENTS"},
    "/v1/documents:import": {"jsonl": base64.b64encode(b"\n".join(SAMPLE.read_bytes().splitlines()[3:5])).decode()},
    "/v1/operations/{operation}:cancel": {},
    "/v1/query:search": {"query": QUESTION, "topK": 3, "disabledStages": ["mmr"]},
    "/v1/query:answer": {"query": QUESTION, "topK": 3},
    "/v1/query:answerStream": {"query": QUESTION, "topK": 3},
    "/v1/query:deepSearch": {"query": QUESTION, "topK": 3, "maxIterations": 1, "subQueries": 1},
    "/v1/entities:search": {"query": "实用新型", "topK": 3},
    "/v1/collections/{collection}/documents:batchDelete": {"names": ["collections/default/documents/never-stored"]},
    # the editing routes work on the entities ENTITIES puts in collection "liveedit"
    "/v1/collections/{collection}/entities/{entity}:merge": {"entities": ["collections/liveedit/entities/洋芋"]},
    "/v1/collections/{collection}/relations": {"relation": {"subject": "马铃薯", "predicate": "富含", "object": "淀粉"}},
    "/v1/collections/{collection}/relations:delete": {"relation": {"subject": "马铃薯", "predicate": "富含", "object": "淀粉"}},
    "/v1/collections/{collection}/entities/{entity}": {"entity": {"definition": "茄科植物的块茎"}, "updateMask": "definition"},
    "/v1/chat/completions": {"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}]},
}
# The concrete URL of each templated route, and of the routes without a body
# (the sample's lines 3..4, ids 4 and 5, are ingested by the first call).
REST_URLS = {
    ("get", "/v1/collections/{collection}/documents/{document}"): "/v1/collections/default/documents/4",
    ("delete", "/v1/collections/{collection}"): "/v1/collections/scratch",
    ("get", "/v1/collections/{collection}/documents"): "/v1/collections/-/documents?pageSize=1",
    ("post", "/v1/collections/{collection}/documents:batchDelete"): "/v1/collections/default/documents:batchDelete",
    ("post", "/v1/collections/{collection}/entities/{entity}:merge"): "/v1/collections/liveedit/entities/马铃薯:merge",
    ("post", "/v1/collections/{collection}/relations"): "/v1/collections/liveedit/relations",
    ("post", "/v1/collections/{collection}/relations:delete"): "/v1/collections/liveedit/relations:delete",
    ("get", "/v1/collections/{collection}/entities/{entity}"): "/v1/collections/liveedit/entities/马铃薯",
    ("patch", "/v1/collections/{collection}/entities/{entity}"): "/v1/collections/liveedit/entities/马铃薯",
    ("delete", "/v1/collections/{collection}/entities/{entity}"): "/v1/collections/liveedit/entities/番茄",
    ("get", "/v1/collections/{collection}/entities:export"): "/v1/collections/liveedit/entities:export?pageSize=10",
    # {operation}: the one POST /v1/documents:import started (filled in by the test)
    ("post", "/v1/operations/{operation}:cancel"): "/v1/{operation}:cancel",
    ("get", "/v1/operations"): "/v1/operations?pageSize=5",
    ("get", "/v1/operations/{operation}"): "/v1/{operation}",
    ("get", "/v1/models/{model}"): "/v1/models/graphmesh:liveedit",
    ("delete", "/v1/operations/{operation}"): "/v1/{operation}",
    ("get", "/v1/collections"): "/v1/collections",
    ("get", "/v1/domainPacks"): "/v1/domainPacks",
    ("get", "/v1/models"): "/v1/models",
}


def strict(schema):
    """``schema`` with additionalProperties false on every object that lists
    properties: a reply field the document does not describe is an error."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


async def _until_done(url: str, seconds: float = 60.0) -> None:
    """Polls GET ``url`` (an operation) until it is done."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        _, _, raw = await asyncio.to_thread(_post, url, None, "GET")
        if json.loads(raw).get("done"):
            return
        assert asyncio.get_running_loop().time() < deadline, raw[:300]
        await asyncio.sleep(0.2)


def _post(url: str, body: dict | None, method: str = "POST") -> tuple[int, str, bytes]:
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        return reply.status, reply.headers.get("Content-Type", ""), reply.read()


async def test_every_documented_rest_route_answers_as_its_schema_says(mesh, exported):
    doc = json.loads(OPENAPI.read_text())
    components = strict(doc["components"])
    routes = [(verb, path) for path, item in doc["paths"].items() for verb in item]
    assert {p for v, p in routes if v in ("post", "patch")} == set(REST_BODIES), "add a request for each new route to REST_BODIES"
    async with grpc.aio.insecure_channel(mesh.gateway) as ch:
        stored = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(gateway_pb2.IngestRequest(
            jsonl=ENTITIES, kind=gateway_pb2.INGEST_KIND_ENTITIES, collection="liveedit"), timeout=120)
        assert stored.stored + stored.unchanged == 3
        # DeleteCollection of a collection no store holds is NOT_FOUND: give the route one to delete
        scratch = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(gateway_pb2.IngestRequest(
            jsonl=json.dumps({"id": "scratch-1", "title": "草稿", "text": "待删除的草稿文本。"}, ensure_ascii=False).encode(),
            collection="scratch"), timeout=120)
        assert scratch.stored + scratch.unchanged == 1
    assert {r for r in routes if r[0] != "post" or "{" in r[1]} == set(REST_URLS), "add each new templated route to REST_URLS"
    operation_name, operation_done = "", False
    for verb, path in sorted(routes, key=lambda r: (r[0] != "post", "{" in r[1])):  # ingest and import first
        operation = doc["paths"][path][verb]
        body = REST_BODIES.get(path) if verb in ("post", "patch") else None
        if body is not None:
            request_schema = {**operation["requestBody"]["content"]["application/json"]["schema"], "components": components}
            jsonschema.Draft4Validator(request_schema).validate(body)
        if verb != "post" and path.startswith("/v1/operations/") and not operation_done:
            await _until_done(mesh.rest_url + "/v1/" + operation_name)  # DeleteOperation wants it finished
            operation_done = True
        target = REST_URLS.get((verb, path), path).replace("{operation}", operation_name)
        url = mesh.rest_url + urllib.parse.quote(target, safe="/:?=&-")
        status, content_type, raw = await asyncio.to_thread(_post, url, body, verb.upper())
        assert status == 200, (path, raw[:300])
        if path == "/v1/documents:import":
            operation_name = json.loads(raw)["name"]
        media = content_type.split(";")[0]
        assert media in operation["responses"]["200"]["content"], (path, media)
        reply_schema = {**operation["responses"]["200"]["content"][media]["schema"], "components": components}
        documents = [json.loads(line) for line in raw.decode().splitlines() if line.strip()] if media == "application/x-ndjson" else [json.loads(raw)]
        assert documents, path
        for document in documents:
            errors = list(jsonschema.Draft4Validator(reply_schema).iter_errors(document))
            assert not errors, f"{path}: {errors[0].json_path}: {errors[0].message}"
        if reply_schema.get("properties") or "$ref" in reply_schema:  # google.protobuf.Empty is a bare object
            assert list(jsonschema.Draft4Validator(reply_schema).iter_errors({**documents[0], "undocumentedField": 1}))  # strict
