"""The expander as a real gRPC server with its default embedder (e5onnx): a
9,000-character case description is expanded, embedded within the model's
window and its cut reported; past 10,000 characters it is INVALID_ARGUMENT
naming the field."""
import grpc
import numpy as np
import pytest
import pytest_asyncio

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from services.common.errors import field_violations
from services.expander.config import ExpanderSettings
from services.expander.server import build
from tests.fixtures.mesh import start_service
from tests.expander.test_query_cut import long_description

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def expander(tmp_path_factory):
    cache = tmp_path_factory.mktemp("emb") / "cache.sqlite"
    service, settings = await build(ExpanderSettings(port=0, embedding={"cache": str(cache)}))
    server, port, tasks = await start_service(service, settings)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield expander_pb2_grpc.ExpanderServiceStub(channel)
    finally:
        await server.stop(0)
        for task in tasks:
            task.cancel()
        await service.on_stop()


async def test_a_9000_character_description_is_cut_and_says_how(expander):
    text = long_description(9000)
    reply = await expander.Expand(expander_pb2.ExpandRequest(query=text, embed=True), timeout=120)
    cut = reply.query_cut
    assert reply.embedding_model == "e5onnx" and len(reply.embedding) == 384
    assert abs(np.linalg.norm(reply.embedding) - 1.0) < 1e-4
    assert cut.method == types_pb2.QUERY_CUT_METHOD_CONTENT_SENTENCES
    assert cut.original_chars == len(reply.normalized_query) >= 8900
    kept = "".join(reply.normalized_query[s.start:s.end] for s in cut.kept_spans)
    assert len(kept) == cut.embedded_chars and 200 < cut.embedded_chars < 1000
    assert "枪支" in kept and "枪支" in reply.keywords

    # the vector is the kept part's: embedding it as a query gives the same
    again = await expander.Embed(expander_pb2.EmbedRequest(texts=[kept], kind=expander_pb2.EMBED_KIND_QUERY), timeout=60)
    assert np.dot(again.vectors[0].values, reply.embedding) > 0.999


async def test_beyond_10000_characters_is_invalid_argument_naming_query(expander):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await expander.Expand(expander_pb2.ExpandRequest(query="盗" * 10_001), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(err.value)] == ["query"]
    reply = await expander.Expand(expander_pb2.ExpandRequest(query="盗" * 10_000), timeout=30)
    assert reply.query_cut.original_chars == 10_000
