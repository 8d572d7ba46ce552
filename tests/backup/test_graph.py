"""Property values of a graph backup (unit)."""
from __future__ import annotations

import datetime
import json

import pytest

from services.backup.graph import decode_properties, encode_properties
from services.backup.manifest import BackupError

pytestmark = pytest.mark.unit


def test_values_survive_json():
    props = {"s": "劳动者", "i": 2**62, "f": 1.0, "b": False, "l": ["a", "b"], "n": [1.5, 2.5], "raw": b"\x00\xff",
             "meta.page": "3"}
    encoded = encode_properties(props, "node Chunk #1")
    assert encoded["raw"] == {"bytes": "AP8="}
    back = decode_properties(json.loads(json.dumps(encoded)))
    assert back == props and isinstance(back["f"], float) and isinstance(back["i"], int)


def test_an_unsupported_value_names_node_and_property():
    with pytest.raises(BackupError, match=r"node Document #7 property 'when' has a value of type datetime"):
        encode_properties({"when": datetime.datetime(2026, 1, 1)}, "node Document #7")
    with pytest.raises(BackupError, match="property 'days'"):
        encode_properties({"days": [datetime.date(2026, 1, 1)]}, "node X #1")
