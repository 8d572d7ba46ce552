"""Entity-library ingestion through the gateway: entities (with an embedding
of each surface: name and aliases) and knowledge-graph triples, stored in
every retriever that offers the entity RPCs (a retriever answering
UNIMPLEMENTED is skipped)."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import grpc

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.errors import DownstreamError
from services.gateway.downstream.interfaces import Expander, Retriever
from services.gateway.config import GatewaySettings
from services.gateway.library.document_ingest import failure_proto
from services.gateway.library.store_everywhere import BULK_CALL_SECONDS
from services.gateway.downstream.guard import Deadline, Trace
from services.ingest.jsonl_entities import parse_entities, parse_triples

ENTITY_BATCH = 5_000
TRIPLE_BATCH = 50_000
# Surfaces embedded per entity (name + aliases); retriever_pg stores at most 16.
SURFACES_PER_ENTITY = 16


class EntityIngest:
    """Ingest of INGEST_KIND_ENTITIES and INGEST_KIND_TRIPLES.

    Args:
        settings: which retrievers hold entities, the embedding batch size.
        expander: embeds the entities' surfaces.
        retrievers: every retriever (filtered by ``entity_retrievers``).
    """

    def __init__(self, settings: GatewaySettings, expander: Expander, retrievers: Sequence[Retriever]) -> None:
        self.settings = settings
        self.expander = expander
        self.retrievers = [r for r in retrievers if r.name in settings.entity_retrievers]

    async def ingest(self, payload: bytes, kind: int, deadline: Deadline,
                     collection: str = "default") -> tuple[gateway_pb2.IngestResponse, list]:
        """Parses entities or triples (``kind``) and stores them in ``collection``.

        Returns:
            the response and the records that could not be read.
        Raises:
            DownstreamError: a retriever failed (other than UNIMPLEMENTED).
        """
        trace = Trace()
        started = time.perf_counter()
        if kind == gateway_pb2.INGEST_KIND_ENTITIES:
            records, failures, line_of = parse_entities(payload)
        else:
            records, failures, line_of = parse_triples(payload)
        response = gateway_pb2.IngestResponse(received=len(records) + len(failures))
        response.failures.extend(failure_proto(f) for f in failures)
        trace.record(names.STAGE_PARSE, started)
        if not records:
            return response, failures
        if kind == gateway_pb2.INGEST_KIND_ENTITIES:
            surfaces = await self._surface_embeddings(records, deadline, trace)
            batch_size, make = ENTITY_BATCH, _entity_batches(records, surfaces, collection)
        else:
            batch_size, make = TRIPLE_BATCH, lambda start: retriever_pb2.IngestTriplesRequest(
                triples=records[start : start + TRIPLE_BATCH], collection=collection)
        rpc = "ingest_entities" if kind == gateway_pb2.INGEST_KIND_ENTITIES else "ingest_triples"
        started = time.perf_counter()
        stored_by: dict[str, int] = {}
        unchanged_by: dict[str, int] = {}
        for retriever in self.retrievers:
            total = same = 0
            try:
                for start in range(0, len(records), batch_size):
                    reply = await getattr(retriever, rpc)(make(start), deadline.left(BULK_CALL_SECONDS))
                    total += reply.stored
                    same += getattr(reply, "unchanged", 0)
                    response.failures.extend(
                        types_pb2.IngestFailure(index=line_of[f.index + start], id=f.id, reason=f"{retriever.name}: {f.reason}")
                        for f in reply.failures)
            except DownstreamError as err:
                if err.code == grpc.StatusCode.UNIMPLEMENTED:
                    continue
                raise
            stored_by[retriever.name], unchanged_by[retriever.name] = total, same
        # A record counts as unchanged only where every store left it alone.
        response.unchanged = min(unchanged_by.values(), default=0)
        response.stored = max((stored_by[n] + unchanged_by[n] - response.unchanged for n in stored_by), default=0)
        trace.record(names.STAGE_STORE, started)
        response.timings.extend(trace.timings)
        return response, failures

    async def store(self, records: Sequence, deadline: Deadline, collection: str, replace: bool = False,
                    triples: bool = False) -> list[types_pb2.IngestFailure]:
        """Stores entity (or, with ``triples``, Triple) protos in every entity
        store that takes them, entities with their surface embeddings and,
        with ``replace``, as IngestEntitiesRequest.replace. Returns the
        stores' failures (index into ``records``).

        Raises:
            DownstreamError: a store failed (other than UNIMPLEMENTED).
        """
        if not records:
            return []
        if triples:
            make = lambda start: retriever_pb2.IngestTriplesRequest(triples=records[start : start + TRIPLE_BATCH], collection=collection)
            rpc, size = "ingest_triples", TRIPLE_BATCH
        else:
            make = _entity_batches(records, await self._surface_embeddings(records, deadline, Trace()), collection, replace)
            rpc, size = "ingest_entities", ENTITY_BATCH
        failures: list[types_pb2.IngestFailure] = []
        for retriever in self.retrievers:
            try:
                for start in range(0, len(records), size):
                    reply = await getattr(retriever, rpc)(make(start), deadline.left(BULK_CALL_SECONDS))
                    failures.extend(types_pb2.IngestFailure(index=f.index + start, id=f.id, reason=f"{retriever.name}: {f.reason}")
                                    for f in reply.failures)
            except DownstreamError as err:
                if err.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise
        return failures

    async def _surface_embeddings(self, records, deadline: Deadline, trace: Trace) -> list[list[list[float]]]:
        """Per entity, the embeddings of its surfaces (name, then distinct
        aliases, at most SURFACES_PER_ENTITY), for retrievers with an entity
        vector channel. Empty (keyword channels only) when the expander
        fails: stage "embed" DEGRADED."""
        started = time.perf_counter()
        per_entity = [list(dict.fromkeys([r.name] + [a for a in r.aliases if a.strip()]))[:SURFACES_PER_ENTITY] for r in records]
        texts = [t for ts in per_entity for t in ts]
        vectors: list[list[float]] = []
        size = self.settings.ingest.embed_batch
        try:
            for start in range(0, len(texts), size):
                request = expander_pb2.EmbedRequest(texts=texts[start : start + size], kind=expander_pb2.EMBED_KIND_PASSAGE)
                reply = await self.expander.embed(request, deadline.left(BULK_CALL_SECONDS))
                vectors.extend(list(v.values) for v in reply.vectors)
        except DownstreamError as err:
            trace.degrade("expander", names.STAGE_EMBED, started, err.describe())
            return []
        trace.record(names.STAGE_EMBED, started)
        out, at = [], 0
        for ts in per_entity:
            out.append(vectors[at : at + len(ts)])
            at += len(ts)
        return out


def _entity_batches(records, surfaces: list[list[list[float]]], collection: str,
                    replace: bool = False) -> Callable[[int], retriever_pb2.IngestEntitiesRequest]:
    """The IngestEntitiesRequest of the batch starting at a record index."""
    def make(start: int) -> retriever_pb2.IngestEntitiesRequest:
        return retriever_pb2.IngestEntitiesRequest(entities=records[start : start + ENTITY_BATCH], collection=collection,
                                                   replace=replace, surface_embeddings=[
            retriever_pb2.EntitySurfaceEmbeddings(surfaces=[retriever_pb2.EntityEmbedding(values=v) for v in vs])
            for vs in surfaces[start : start + ENTITY_BATCH]
        ])
    return make
