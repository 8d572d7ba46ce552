"""The retry policy names only RPCs that exist (a misspelt or removed method
in the service config would silently never be retried), and every
RetrieverService method is either retried or deliberately left out."""
from __future__ import annotations

import pytest

from graphmesh.expander.v1 import expander_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.reranker.v1 import reranker_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common.clients import IDEMPOTENT_RPCS

pytestmark = pytest.mark.unit

SERVICES = {d.full_name: d for module in (expander_pb2, fuser_pb2, reranker_pb2, retriever_pb2)
            for d in module.DESCRIPTOR.services_by_name.values()}


def test_every_retried_rpc_exists():
    for service, methods in IDEMPOTENT_RPCS.items():
        assert service in SERVICES, service
        known = {m.name for m in SERVICES[service].methods}
        assert set(methods) <= known, (service, set(methods) - known)


def test_retriever_methods_are_retried_except_the_deletes():
    retriever = "graphmesh.retriever.v1.RetrieverService"
    left_out = {m.name for m in SERVICES[retriever].methods} - set(IDEMPOTENT_RPCS[retriever])
    assert left_out == {"DeleteDocuments", "DeleteCollection", "DeleteEntities", "DeleteTriples"}
