"""Builds the gateway service: the gRPC adapters of every downstream
service, the use cases wired with only the clients they need, the gRPC API
and the REST transcoder beside it."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from google.longrunning import operations_pb2_grpc

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.llm import LlmClient
from services.common.server import Service
from services.common.settings import MeshAddresses
from services.common.tracing import TraceIdInterceptor
from services.gateway.answer.fallback_chain import FallbackChain
from services.gateway.answer.handlers import Answerer
from services.gateway.api.auth import AuthInterceptor, build_gate
from services.gateway.downstream.breaker import BreakerClient, BreakerConfig, CircuitBreaker
from services.gateway.downstream.interfaces import Expander, Fuser, Llm, Reranker, Retriever
from services.gateway.search.collection_packs import CollectionPacks
from services.gateway.config import GatewaySettings
from services.gateway.search.deep_search import DeepSearcher
from services.gateway.library.document_ingest import DocumentIngest
from services.gateway.library.lifecycle import DocumentLifecycle
from services.gateway.library.entity_ingest import EntityIngest
from services.gateway.search.entity_search import EntitySearch
from services.gateway.library.file_ingest import FileIngest
from services.gateway.library.graph_editing import GraphEditing
from services.gateway.answer.generator import Generator
from services.gateway.downstream.grpc_adapters import GrpcExpander, GrpcFuser, GrpcReranker, GrpcRetriever
from services.gateway.api.rest import RestOptions, run_rest
from services.gateway.search.pipeline import SearchFlow
from services.gateway.api.servicer import GatewayServicer, UseCases
from services.gateway.api.operations_servicer import SERVICE_NAME as OPERATIONS_SERVICE, OperationsServicer
from services.gateway.operations.runner import ImportRunner
from services.gateway.operations.store import OperationsUnavailable, open_store


def use_cases(settings: GatewaySettings, expander: Expander, retrievers: Sequence[Retriever], reranker: Reranker,
              fuser: Fuser, llm: Llm) -> UseCases:
    """Every use case of the gateway, each given only the clients it needs
    (real gRPC adapters in ``build``, fakes in unit tests)."""
    packs = CollectionPacks(retrievers)
    search = SearchFlow(settings, expander, retrievers, reranker, fuser, packs)
    generator = Generator(settings, llm, expander)
    documents = DocumentIngest(settings, expander, retrievers, packs, searches_in_flight=lambda: search.in_flight)
    entity_ingest = EntityIngest(settings, expander, retrievers)
    files = FileIngest(documents, settings.ingest.max_file_bytes)
    return UseCases(
        search=search,
        answerer=Answerer(FallbackChain(settings, search, expander), generator),
        deep=DeepSearcher(settings, search, expander, generator),
        documents=documents,
        entity_ingest=entity_ingest,
        entities=EntitySearch(settings, expander, retrievers, reranker, fuser),
        files=files,
        lifecycle=DocumentLifecycle(retrievers, packs),
        graph=GraphEditing(entity_ingest, packs),
        imports=ImportRunner(settings.operations, open_store(settings.operations.resolved_dsn()), documents, files, entity_ingest),
    )


async def build(settings: GatewaySettings | None = None, addresses: MeshAddresses | None = None) -> tuple[Service, GatewaySettings]:
    """Returns the gateway Service over gRPC adapters of the services at
    ``addresses``, and its settings (both from the environment when not
    given). See ``gateway_service``."""
    settings = settings or GatewaySettings()
    addresses = addresses or MeshAddresses()
    expander = GrpcExpander(addresses.expander_addr)
    retrievers = [GrpcRetriever("retriever_pg", addresses.retriever_pg_addr)]
    if settings.graph_enabled:
        retrievers.append(GrpcRetriever("retriever_graph", addresses.retriever_graph_addr))
    reranker = GrpcReranker(addresses.reranker_addr)
    fuser = GrpcFuser(addresses.fuser_addr)
    llm = LlmClient(settings.llm.config())

    async def close() -> None:
        await llm.close()
        await asyncio.gather(*(client.close() for client in (expander, *retrievers, reranker, fuser)))

    b = with_breakers(settings)
    use = use_cases(settings, b(expander), [b(r) for r in retrievers], b(reranker), b(fuser), b(llm, llm=True))
    service = gateway_service(settings, use, close)
    return service, settings


def with_breakers(settings: GatewaySettings) -> Callable[..., object]:
    """A function wrapping a client in its own circuit breaker
    (services.gateway.downstream.breaker; named after the client's ``name``, "llm" for
    the LLM), or returning it unchanged when ``breaker.enabled`` is off."""
    config = BreakerConfig(failures=settings.breaker.failures, failure_rate=settings.breaker.failure_rate,
                           cool_down=settings.breaker.cool_down)

    def wrap(client, llm: bool = False):
        if not settings.breaker.enabled:
            return client
        return BreakerClient(client, CircuitBreaker("llm" if llm else client.name, config), llm=llm)

    return wrap


def gateway_service(settings: GatewaySettings, use: UseCases, close: Callable[[], Awaitable[None]] | None = None) -> Service:
    """The gateway Service over ``use`` (its use cases, whatever clients
    they hold): the GatewayService API and google.longrunning.Operations
    (ImportDocuments' operations; the runner starts with the service and
    stops with it) with trace ids in the response
    metadata, API-key auth and rate limits when ``auth.enabled``, and the
    REST transcoder beside the gRPC server unless ``rest_port`` is -1 (0
    binds a free port: ``service.endpoints["rest"]`` resolves to it).

    Raises:
        ConfigError: auth is on and its keys cannot be loaded.
    """
    servicer = GatewayServicer(settings, use)
    operations = OperationsServicer(use.imports)

    def register(server) -> None:
        gateway_pb2_grpc.add_GatewayServiceServicer_to_server(servicer, server)
        operations_pb2_grpc.add_OperationsServicer_to_server(operations, server)

    async def stop() -> None:
        await use.imports.shut_down()
        await use.documents.shut_down()
        if close is not None:
            await close()
    gate = build_gate(settings.auth.enabled, settings.auth.api_keys_file, settings.auth.api_keys,
                      settings.rate_limit.per_second, settings.rate_limit.burst)
    extra, endpoints = [], {}
    if settings.rest.port >= 0:
        endpoints["rest"] = asyncio.get_running_loop().create_future()
        rest = RestOptions(cors_origins=settings.rest.cors_origins, max_request_bytes=settings.max_request_bytes, gate=gate,
                           allowed_hosts=settings.rest.allowed_hosts, max_in_flight=settings.rest.max_in_flight,
                           max_queued=settings.rest.max_queued, header_timeout=settings.rest.header_timeout,
                           body_timeout=settings.rest.body_timeout, max_query_chars=settings.max_query_chars)
        extra.append(lambda grpc_port: run_rest(grpc_port, settings.host, settings.rest.port, endpoints["rest"], rest))
    return Service(
        name="gateway",
        full_names=[gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].full_name, OPERATIONS_SERVICE],
        register=register,
        on_start=use.imports.start_up,
        on_stop=stop,
        unavailable_errors=(OperationsUnavailable,),
        extra_tasks=extra,
        endpoints=endpoints,
        interceptors=[TraceIdInterceptor(), *([AuthInterceptor(gate)] if gate else [])],
        public=True,
        max_message_bytes=settings.max_request_bytes,
    )
