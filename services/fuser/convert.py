"""Conversions between protobuf candidates and the fuser's items."""
from __future__ import annotations

from graphmesh.common.v1 import types_pb2
from services.fuser.core import Item, Scored


def candidate_to_item(c: types_pb2.Candidate) -> Item:
    """Protobuf candidate -> fuser item."""
    return Item(
        id=c.id, document_id=c.document_id, title=c.title, heading_path=list(c.heading_path), text=c.text,
        source=int(c.source) or types_pb2.SOURCE_DOCUMENT_CHUNK, ordinal=c.ordinal,
        scores=[Scored(s.channel, s.score, s.rank, s.evidence) for s in c.channel_scores],
        embedding=list(c.embedding), fused=c.fused_score, context_text=c.context_text, script=c.script,
    )


def item_to_candidate(it: Item, with_embedding: bool = False) -> types_pb2.Candidate:
    """Fuser item -> protobuf candidate (embedding dropped unless asked)."""
    return types_pb2.Candidate(
        id=it.id, document_id=it.document_id, title=it.title, heading_path=it.heading_path, text=it.text,
        source=it.source, ordinal=it.ordinal, fused_score=it.fused,
        channel_scores=[types_pb2.ChannelScore(channel=s.channel, score=s.score, rank=s.rank, evidence=s.evidence) for s in it.scores],
        embedding=it.embedding if with_embedding else [], context_text=it.context_text, script=it.script,
    )
