"""The known name a mistyped one looks like (services/common/spelling.py)."""
import pytest

from services.common.spelling import closest

pytestmark = pytest.mark.unit


def test_the_nearest_known_name_within_the_edits_allowed_case_aside():
    assert closest("metdata", ["id", "text", "metadata"]) == "metadata"
    assert closest("Lwas", ["hr", "laws"]) == "laws"
    assert closest("topk", ["query", "top_k"], max_edits=3) == "top_k"
    assert closest("nope", ["hr", "laws"]) == ""  # four edits from laws
    assert closest("x", []) == ""
