"""retriever_pg refuses query embeddings it cannot search with, naming the
field (INVALID_ARGUMENT), instead of failing in the store (INTERNAL).
Regression of the real-mesh fuzzing (issue 16)."""
from __future__ import annotations

import pytest

from services.common.errors import InvalidArgument
from services.retriever_pg.backend import check_vector

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("vector", [[0.1, 0.2, 0.3], [float("nan")] * 4, [float("inf")] * 4, [1e300] * 4, [0.0] * 4])
def test_unusable_vectors_are_invalid_arguments(vector):
    with pytest.raises(InvalidArgument) as err:
        check_vector("hyde_embedding", vector, 4)
    assert err.value.field == "hyde_embedding"


def test_a_usable_vector_passes():
    check_vector("query_embedding", [0.5, -0.5, 3e38, 0.0], 4)
