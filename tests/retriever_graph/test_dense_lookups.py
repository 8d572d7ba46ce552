"""How the graph retriever embeds a query's probes for the dense lookups:
within the request's deadline, and never against vectors of another model.
A small fake of our own EmbedClient interface; no Neo4j (the probe step
reads nothing from it)."""
from __future__ import annotations

import numpy as np
import pytest

from services.common.store_deadline import deadline_scope
from services.retriever_graph.doc_channels import DocChannels
from tests.domains.law_zh.test_lookup_index import index

pytestmark = pytest.mark.unit

CASE = "被告人以暴力阻碍民警依法执行职务。\n罪名:妨害公务。"


class FakeEmbed:
    """EmbedClient's interface: records each call's timeout."""

    def __init__(self, model: str = "e5onnx") -> None:
        self.model, self.timeout, self.timeouts = model, 30.0, []

    async def embed(self, texts, *, query, timeout=None):
        self.timeouts.append(timeout)
        return np.tile(np.array([[0.1, 0.2, 0.0, 0.97]], dtype=np.float32), (len(texts), 1))


def channels(embed: FakeEmbed):
    docs = DocChannels(None, embed=embed)
    idx = index()
    idx.attach_vectors(np.eye(4, dtype=np.float32))
    docs._vector_models[id(idx)] = "e5onnx"
    return docs, idx


async def test_probes_are_embedded_within_half_the_deadline_left():
    embed = FakeEmbed()
    docs, idx = channels(embed)
    with deadline_scope(1.0):
        vectors = await docs._probe_vectors(idx, "graph.offence", CASE)
    assert vectors is not None and vectors.shape == (1, 4)
    assert embed.timeouts[0] <= 0.5
    with deadline_scope(0.01):                      # too little left: characters only, no call
        assert await docs._probe_vectors(idx, "graph.offence", CASE) is None
    assert len(embed.timeouts) == 1
    assert await docs._probe_vectors(idx, "graph.offence", CASE) is not None  # no deadline: the client's own
    assert embed.timeouts[-1] == 30.0


async def test_vectors_of_another_model_are_dropped_and_re_embedded():
    embed = FakeEmbed(model="st:/models/other")
    docs, idx = channels(embed)
    assert await docs._probe_vectors(idx, "graph.offence", CASE) is None
    assert not idx.vectors_attached                 # matched by characters until re-embedded
    docs.indexes = {"law_zh": idx}
    assert docs._wanting_vectors() == [idx]
