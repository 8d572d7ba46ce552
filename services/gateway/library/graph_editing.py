"""Knowledge-graph editing through the gateway: GetEntity, UpdateEntity,
DeleteEntity, MergeEntities, CreateRelation, DeleteRelation and
ExportEntities over every entity store.

Reads ask the graph retriever (it holds facts and attributes; the first
entity store when there is none). Writes go to every entity store in turn
(one answering UNIMPLEMENTED is skipped, as retriever_pg for facts). The
pure rules are ``entity_merge``'s. An entity rewrite bumps the library
version, so the expander's index (which polls it) follows.

A merge runs: delete the merged entities everywhere (with every edge they
touched), rewrite the survivor and the re-parented children (replace), then
store the re-pointed facts. Each step is idempotent, so a merge that failed
half-way is finished by calling it again while the survivor's fields
already hold the merged names (the aliases).
"""
from __future__ import annotations

from collections.abc import Sequence

import grpc

from graphmesh.common.v1 import entity_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common.errors import DownstreamError, InvalidArgument, NotFound
from services.gateway.downstream.guard import Deadline
from services.gateway.downstream.interfaces import Retriever
from services.gateway.library import entity_merge
from services.gateway.library.entity_ingest import EntityIngest
from services.gateway.search.collection_packs import CollectionPacks
from services.gateway.library.resource_names import (decode_page_token, encode_page_token, entity_name, parse_collection_name,
                                                     parse_entity_name)
from services.ingest.jsonl_entities import MAX_NAME_CHARS, entity_line, triple_line

#: The store entities and facts are read from.
READER = "retriever_graph"
#: Seconds one call to a store may take at most.
CALL_SECONDS = 120.0
MAX_MERGED = 100
DEFAULT_EXPORT_PAGE = 1_000
MAX_EXPORT_PAGE = 10_000
MAX_PREDICATE_CHARS = 64


class GraphEditing:
    """The editing RPCs over the entity stores of ``ingest`` (which also
    embeds rewritten entities' surfaces)."""

    def __init__(self, ingest: EntityIngest, packs: CollectionPacks | None = None) -> None:
        self.ingest = ingest
        self.packs = packs

    @property
    def stores(self) -> list[Retriever]:
        return self.ingest.retrievers

    def _reader(self) -> Retriever:
        if not self.stores:
            raise DownstreamError("retrievers", grpc.StatusCode.UNAVAILABLE, "no entity store configured")
        return next((r for r in self.stores if r.name == READER), self.stores[0])

    async def _read(self, collection: str, names: Sequence[str], deadline: Deadline,
                    with_links: bool = True) -> retriever_pb2.ExportEntitiesResponse:
        request = retriever_pb2.ExportEntitiesRequest(collection=collection, names=list(names), with_links=with_links)
        return await self._reader().export_entities(request, deadline.left(CALL_SECONDS))

    async def _everywhere(self, rpc: str, request, deadline: Deadline) -> dict[str, object]:
        """{store: reply} of ``rpc`` on every entity store that offers it."""
        replies = {}
        for store in self.stores:
            try:
                replies[store.name] = await getattr(store, rpc)(request, deadline.left(CALL_SECONDS))
            except DownstreamError as err:
                if err.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise
        return replies

    async def _entity(self, collection: str, name: str, deadline: Deadline) -> gateway_pb2.LibraryEntity:
        found = await self._read(collection, [name], deadline)
        if not found.entities:
            raise NotFound(f"entity {entity_name(collection, name)!r} does not exist")
        return gateway_pb2.LibraryEntity(name=entity_name(collection, name), entity=found.entities[0], relations=found.triples)

    async def get(self, name: str, deadline: Deadline) -> gateway_pb2.GetEntityResponse:
        """The entity ``name`` with the facts from and to it.

        Raises:
            InvalidArgument ("name"); NotFound.
        """
        collection, entity = parse_entity_name(name)
        return gateway_pb2.GetEntityResponse(entity=await self._entity(collection, entity, deadline))

    async def update(self, name: str, patch: entity_pb2.Entity, paths: Sequence[str],
                     deadline: Deadline) -> gateway_pb2.UpdateEntityResponse:
        """Rewrites the entity with the masked fields of ``patch``.

        Raises:
            InvalidArgument ("name", "entity.name", "update_mask.paths[i]"); NotFound.
        """
        collection, entity = parse_entity_name(name)
        current = await self._entity(collection, entity, deadline)
        changed = entity_merge.apply_mask(current.entity, patch, list(paths))
        await self._check_failures(await self.ingest.store([changed], deadline, collection, replace=True), "entity")
        return gateway_pb2.UpdateEntityResponse(entity=await self._entity(collection, entity, deadline))

    async def delete(self, name: str, deadline: Deadline) -> gateway_pb2.DeleteEntityResponse:
        """Deletes the entity from every store, with every edge touching it.

        Raises:
            InvalidArgument ("name"); NotFound.
        """
        collection, entity = parse_entity_name(name)
        await self._entity(collection, entity, deadline)
        replies = await self._everywhere("delete_entities", retriever_pb2.DeleteEntitiesRequest(
            collection=collection, names=[entity]), deadline)
        return gateway_pb2.DeleteEntityResponse(by_store={store: reply.deleted for store, reply in replies.items()})

    async def merge(self, name: str, merged_names: Sequence[str], deadline: Deadline) -> gateway_pb2.MergeEntitiesResponse:
        """Merges the entities ``merged_names`` (resource names) into ``name``.

        Raises:
            InvalidArgument ("name", "entities", "entities[i]"); NotFound.
        """
        collection, survivor = parse_entity_name(name)
        if len(merged_names) > MAX_MERGED:
            raise InvalidArgument("entities", f"at most {MAX_MERGED} entities per merge")
        merged = []
        for i, other in enumerate(merged_names):
            other_collection, other_entity = parse_entity_name(other, f"entities[{i}]")
            if other_collection != collection:
                raise InvalidArgument(f"entities[{i}]", f"is in collection {other_collection!r}, the survivor in {collection!r}")
            merged.append(other_entity)
        merged = entity_merge.merge_targets(survivor, merged)
        found = await self._read(collection, [survivor, *merged], deadline)
        by_name = {e.name: e for e in found.entities}
        for i, missing in enumerate([survivor, *merged]):
            if missing not in by_name:
                raise NotFound(f"entity {entity_name(collection, missing)!r} does not exist"
                               + ("" if i == 0 else f" (entities[{i - 1}])"))
        combined = entity_merge.merge_fields(by_name[survivor], [by_name[m] for m in merged])
        kept = [t for t in ((t.subject, t.predicate, t.object) for t in found.triples) if merged_set_free(t, merged)]
        moved = entity_merge.repoint_triples(((t.subject, t.predicate, t.object) for t in found.triples), survivor, merged, kept)
        children = entity_merge.repoint_children(found.children, survivor, merged)
        await self._everywhere("delete_entities", retriever_pb2.DeleteEntitiesRequest(collection=collection, names=merged), deadline)
        await self._check_failures(await self.ingest.store([combined, *children], deadline, collection, replace=True), "entities")
        facts = [entity_pb2.Triple(subject=s, predicate=p, object=o) for s, p, o in moved]
        await self._check_failures(await self.ingest.store(facts, deadline, collection, triples=True), "entities")
        return gateway_pb2.MergeEntitiesResponse(entity=await self._entity(collection, survivor, deadline), relations_moved=len(moved))

    async def create_relation(self, parent: str, relation: entity_pb2.Triple,
                              deadline: Deadline) -> gateway_pb2.CreateRelationResponse:
        """Stores one fact.

        Raises:
            InvalidArgument ("parent", "relation.*"); NotFound: unknown subject.
        """
        collection = parse_collection_name(parent, "parent")
        fact = _checked(relation)
        if not (await self._read(collection, [fact.subject], deadline, with_links=False)).entities:
            raise NotFound(f"entity {entity_name(collection, fact.subject)!r} (relation.subject) does not exist")
        failures = await self.ingest.store([fact], deadline, collection, triples=True)
        if failures:
            raise InvalidArgument("relation.predicate", failures[0].reason)
        return gateway_pb2.CreateRelationResponse(relation=fact)

    async def delete_relation(self, parent: str, relation: entity_pb2.Triple,
                              deadline: Deadline) -> gateway_pb2.DeleteRelationResponse:
        """Deletes one fact.

        Raises:
            InvalidArgument ("parent", "relation.*"); NotFound: no such fact.
        """
        collection = parse_collection_name(parent, "parent")
        fact = _checked(relation)
        replies = await self._everywhere("delete_triples", retriever_pb2.DeleteTriplesRequest(
            collection=collection, triples=[fact]), deadline)
        deleted = max((reply.deleted for reply in replies.values()), default=0)
        if not deleted:
            raise NotFound(f"{parent!r} holds no fact {fact.subject!r} -[{fact.predicate}]-> {fact.object!r}")
        return gateway_pb2.DeleteRelationResponse(deleted=deleted)

    async def export(self, parent: str, page_size: int, page_token: str, deadline: Deadline) -> gateway_pb2.ExportEntitiesResponse:
        """One page of the collection's entities and their facts as JSONL.

        Raises:
            InvalidArgument ("parent", "page_size", "page_token"); NotFound: no store holds the collection
            (CollectionPacks.require), as a listing of its documents says.
        """
        collection = parse_collection_name(parent, "parent")
        if self.packs is not None:
            await self.packs.require(collection, deadline)
        if not 0 <= page_size <= MAX_EXPORT_PAGE:
            raise InvalidArgument("page_size", f"must be between 0 and {MAX_EXPORT_PAGE}")
        size = page_size or DEFAULT_EXPORT_PAGE
        after = decode_page_token(page_token, parent, "export")
        request = retriever_pb2.ExportEntitiesRequest(collection=collection, page_size=size + 1, after_name=after)
        found = await self._reader().export_entities(request, deadline.left(CALL_SECONDS))
        page = list(found.entities[:size])
        names = {e.name for e in page}
        lines = [entity_line(e) for e in page]
        facts = [triple_line(t) for t in found.triples if t.subject in names]
        token = encode_page_token(page[-1].name, parent, "export") if len(found.entities) > size else ""
        return gateway_pb2.ExportEntitiesResponse(entities_jsonl="".join(line + "\n" for line in lines),
                                                  triples_jsonl="".join(line + "\n" for line in facts), next_page_token=token)

    @staticmethod
    async def _check_failures(failures: list, field: str) -> None:
        if failures:
            raise InvalidArgument(field, failures[0].reason)


def merged_set_free(triple: tuple[str, str, str], merged: Sequence[str]) -> bool:
    """Whether a fact names none of the merged entities (it stays as it is)."""
    return triple[0] not in merged and triple[2] not in merged


def _checked(relation: entity_pb2.Triple) -> entity_pb2.Triple:
    """The fact with its fields stripped.

    Raises:
        InvalidArgument: "relation.subject" / "relation.predicate" /
            "relation.object" blank or too long.
    """
    fact = entity_pb2.Triple(subject=relation.subject.strip(), predicate=relation.predicate.strip(), object=relation.object.strip())
    for f in ("subject", "predicate", "object"):
        if not getattr(fact, f):
            raise InvalidArgument(f"relation.{f}", "must not be blank")
    if len(fact.predicate) > MAX_PREDICATE_CHARS:
        raise InvalidArgument("relation.predicate", f"at most {MAX_PREDICATE_CHARS} characters")
    if len(fact.subject) > MAX_NAME_CHARS:
        raise InvalidArgument("relation.subject", f"at most {MAX_NAME_CHARS} characters")
    return fact
