"""--collection and --filter of the query commands, as request fields."""
from __future__ import annotations

import argparse
import re

from services.common.filters import parse_filter, to_proto


def add_scope_arguments(parser: argparse.ArgumentParser, filters: bool = True) -> None:
    """--collection (repeatable) and --filter on a query command."""
    parser.add_argument("--collection", action="append", default=[], metavar="NAME",
                        help="collection to search (repeatable, or several joined by commas; default: default)")
    if filters:
        parser.add_argument("--filter", default="", metavar="FILTER",
                            help='metadata filter, e.g. \'status = "现行有效" AND year >= 2020\'')


def scope(args: argparse.Namespace) -> dict:
    """{"collections": [...], "filters": [...]} request fields of --collection / --filter.

    Raises:
        InvalidArgument: the filter cannot be read.
    """
    # "wh,odd" names two, as the chat endpoint's model graphmesh:wh,odd does (a trial's was refused as one name)
    named = (name for value in getattr(args, "collection", None) or [] for name in re.split(r"[,，、]", value))
    out: dict = {"collections": list(dict.fromkeys(name.strip() for name in named if name.strip()))}
    if getattr(args, "filter", None):
        out["filters"] = to_proto(parse_filter(args.filter, "--filter"))
    return out
