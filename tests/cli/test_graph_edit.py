"""`graphmesh entity update`: the options given become the update mask."""
from __future__ import annotations

import pytest

from services.cli.main import build_parser
from services.cli.graph_edit import _update_request

pytestmark = pytest.mark.unit


def test_only_the_options_given_are_in_the_mask():
    args = build_parser().parse_args(["entity", "update", "布洛芬片", "--aliases", "芬必得, 布洛芬", "--attribute", "unit=mg",
                                      "--collection", "med"])
    request = _update_request(args)
    assert request.name == "collections/med/entities/布洛芬片"
    assert list(request.update_mask.paths) == ["aliases", "attributes"]
    assert list(request.entity.aliases) == ["芬必得", "布洛芬"] and dict(request.entity.attributes) == {"unit": "mg"}


def test_an_empty_category_is_a_change_and_no_option_is_an_error():
    request = _update_request(build_parser().parse_args(["entity", "update", "x", "--category", ""]))
    assert list(request.update_mask.paths) == ["category"] and request.entity.category == ""
    assert "at least one" in _update_request(build_parser().parse_args(["entity", "update", "x"]))
    assert "K=V" in _update_request(build_parser().parse_args(["entity", "update", "x", "--attribute", "novalue"]))
