"""The gateway's memory of sentence vectors (services/gateway/search/sentence_vectors.py):
hits by position, one model at a time, least recently used dropped first."""
from __future__ import annotations

import numpy as np
import pytest

from services.gateway.search.sentence_vectors import SentenceVectorCache

pytestmark = pytest.mark.unit


def _rows(n: int, d: int = 4) -> np.ndarray:
    return np.arange(n * d, dtype=np.float32).reshape(n, d)


def test_vectors_put_are_found_by_position_and_only_under_their_model():
    cache = SentenceVectorCache(1 << 20)
    cache.put_many(["甲句。", "乙句。"], _rows(2), "e5onnx")
    found = cache.get_many(["丙句。", "乙句。", "甲句。"], "e5onnx")
    assert sorted(found) == [1, 2]
    assert np.array_equal(found[1], _rows(2)[1]) and np.array_equal(found[2], _rows(2)[0])
    assert cache.get_many(["甲句。"], "other-model") == {}


def test_vectors_of_another_model_empty_the_cache():
    cache = SentenceVectorCache(1 << 20)
    cache.put_many(["甲句。", "乙句。"], _rows(2), "e5onnx")
    cache.put_many(["丙句。"], _rows(1), "usem3")
    assert len(cache) == 1 and cache.get_many(["甲句。", "丙句。"], "usem3").keys() == {1}


def test_beyond_its_bytes_the_least_recently_used_entries_go_first():
    one = SentenceVectorCache(1 << 20)
    one.put_many(["句0"], _rows(1, 384), "m")
    entry = one.size_bytes
    cache = SentenceVectorCache(3 * entry)
    cache.put_many(["句0", "句1", "句2"], _rows(3, 384), "m")
    cache.get_many(["句0"], "m")  # 句0 used last: 句1 is now the oldest
    cache.put_many(["句3"], _rows(1, 384), "m")
    assert set(cache.get_many(["句0", "句1", "句2", "句3"], "m")) == {0, 2, 3}
    assert cache.size_bytes <= 3 * entry


def test_a_stored_row_is_a_copy_so_the_callers_batch_can_change():
    cache = SentenceVectorCache(1 << 20)
    batch = _rows(2)
    cache.put_many(["甲句。", "乙句。"], batch, "m")
    batch[:] = -1
    assert cache.get_many(["甲句。"], "m")[0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_no_bytes_keeps_nothing_and_mismatched_lengths_are_refused():
    cache = SentenceVectorCache(0)
    cache.put_many(["甲句。"], _rows(1), "m")
    assert len(cache) == 0 and cache.get_many(["甲句。"], "m") == {}
    with pytest.raises(ValueError):
        cache.put_many(["甲句。", "乙句。"], _rows(1), "m")
