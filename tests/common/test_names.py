"""The channel and stage registry (services.common.names) is the one place
names come from: the protos document every switchable channel, the default
fusion weights cover every document channel, and each retriever packs every
channel it emits."""
from __future__ import annotations

import pytest

from pathlib import Path

from services.common import names
from services.gateway.config import DEFAULT_WEIGHTS
from services.retriever_graph.backend import GraphBackend
from services.retriever_pg.backend import PgBackend

pytestmark = pytest.mark.unit

PROTOS = Path(__file__).resolve().parents[2] / "protos" / "graphmesh"


def test_gateway_proto_documents_every_switchable_stage():
    text = (PROTOS / "gateway" / "v1" / "gateway.proto").read_text(encoding="utf-8")
    missing = [n for n in sorted(names.SWITCHABLE_STAGES) if f'"{n}"' not in text]
    assert missing == []


def test_default_weights_cover_every_document_channel_rerank_and_sentence_maxsim():
    assert set(DEFAULT_WEIGHTS) == {*names.DOCUMENT_CHANNELS, names.RERANK, names.SENTENCE_MAXSIM}


def test_retrievers_pack_exactly_their_channels():
    assert set(PgBackend.source_by_channel) == set(names.PG_CHANNELS)
    assert set(GraphBackend.source_by_channel) == set(names.GRAPH_CHANNELS)


def test_stage_names_of_retrievers_and_strategies():
    assert names.retrieve_stage("retriever_pg") == "retrieve.pg"
    assert names.retrieve_entities_stage("retriever_graph") == "retrieve_entities.graph"
    assert names.strategy_stage("fast_path") == "strategy.fast_path"
