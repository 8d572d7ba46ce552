"""Conversions between entity protos (graphmesh.common.v1 entity.proto) and
the plain records of the entity stores and the fuser."""
from __future__ import annotations

from graphmesh.common.v1 import entity_pb2

RELATIONS = {
    "direct": entity_pb2.ENTITY_RELATION_DIRECT,
    "parent": entity_pb2.ENTITY_RELATION_PARENT,
    "same_object": entity_pb2.ENTITY_RELATION_SAME_OBJECT,
    "same_property": entity_pb2.ENTITY_RELATION_SAME_PROPERTY,
    "same_category": entity_pb2.ENTITY_RELATION_SAME_CATEGORY,
    "attribute": entity_pb2.ENTITY_RELATION_ATTRIBUTE,
    "category_member": entity_pb2.ENTITY_RELATION_CATEGORY_MEMBER,
}
RELATION_NAMES = {v: k for k, v in RELATIONS.items()}


def relation_to_proto(name: str) -> int:
    """EntityRelation number of a relation name ("direct", "parent", ...)."""
    return RELATIONS.get(name, entity_pb2.ENTITY_RELATION_UNSPECIFIED)


def relation_name(value: int) -> str:
    """Relation name of an EntityRelation number ("direct" when unset)."""
    return RELATION_NAMES.get(value, "direct")


def hits_to_candidates(hits) -> list[entity_pb2.EntityCandidate]:
    """EntityHit records (one per channel) -> EntityCandidates merged by
    name, first-seen order, every hit kept as evidence."""
    by_name: dict[str, entity_pb2.EntityCandidate] = {}
    for h in hits:
        c = by_name.get(h.name)
        if c is None:
            c = entity_pb2.EntityCandidate(
                name=h.name, category=h.category, definition=h.definition, aliases=h.aliases[:20],
                relation=relation_to_proto(h.relation), degree=h.degree,
            )
            by_name[h.name] = c
        c.evidence.append(entity_pb2.EntityEvidence(
            channel=h.channel, score=h.score, matched=h.matched, relation=relation_to_proto(h.relation)))
    return list(by_name.values())
