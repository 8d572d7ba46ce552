"""services.cli.scope_args: --collection and --filter as request fields."""
import argparse

import pytest

from services.cli.scope_args import add_scope_arguments, scope

pytestmark = pytest.mark.unit


def test_collections_joined_by_commas_are_several_as_repeated_flags_are():
    """A trial's `graphmesh answer … --collection wh,odd` was refused as one name; graphmesh:wh,odd as a chat model
    worked."""
    parser = argparse.ArgumentParser()
    add_scope_arguments(parser)
    args = parser.parse_args(["--collection", "wh,odd", "--collection", "odd", "--collection", "库存，样品"])
    assert scope(args)["collections"] == ["wh", "odd", "库存", "样品"]
    assert scope(parser.parse_args([]))["collections"] == []  # the default collection, as before
