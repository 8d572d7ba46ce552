"""A store that cannot be reached is UNAVAILABLE (retryable, reason
STORE_UNAVAILABLE), not INTERNAL: services.common.server maps the exception
types a service names in ``unavailable_errors``; other failures stay
INTERNAL. Regression of the fault matrix (issue 16): with PostgreSQL or Neo4j
stopped, the retrievers answered INTERNAL."""
from __future__ import annotations

import asyncpg
import grpc
import pytest
from grpc_status import rpc_status
from google.rpc import error_details_pb2

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from neo4j.exceptions import ServiceUnavailable
from services.common.server import Service, create_server

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


class Failing(retriever_pb2_grpc.RetrieverServiceServicer):
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def Retrieve(self, request, context):
        raise self.error


async def status_of(error: Exception, unavailable) -> tuple[grpc.StatusCode, str]:
    service = Service(name="retriever", full_names=["graphmesh.retriever.v1.RetrieverService"],
                      register=lambda s: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(Failing(error), s),
                      unavailable_errors=unavailable)
    server, port, _ = await create_server(service)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await retriever_pb2_grpc.RetrieverServiceStub(ch).Retrieve(retriever_pb2.RetrieveRequest(query="q"), timeout=10)
    finally:
        await server.stop(0)
    info = error_details_pb2.ErrorInfo()
    rpc_status.from_call(err.value).details[0].Unpack(info)
    return err.value.code(), info.reason


@pytest.mark.parametrize("error", [ConnectionRefusedError(111, "refused"), FileNotFoundError(2, "no socket"),
                                   asyncpg.exceptions.ConnectionDoesNotExistError("closed in the middle"),
                                   asyncpg.exceptions.CannotConnectNowError("starting up")])
async def test_postgres_outages_are_unavailable(error):
    from services.retriever_pg.server import STORE_UNAVAILABLE_ERRORS

    assert await status_of(error, STORE_UNAVAILABLE_ERRORS) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")


async def test_neo4j_outage_is_unavailable():
    from services.retriever_graph.server import STORE_UNAVAILABLE_ERRORS

    assert await status_of(ServiceUnavailable("no route"), STORE_UNAVAILABLE_ERRORS) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")


async def test_other_failures_stay_internal():
    assert await status_of(RuntimeError("bug"), (ServiceUnavailable, OSError)) == (grpc.StatusCode.INTERNAL, "INTERNAL")
