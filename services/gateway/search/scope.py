"""What a query searches: its collections and metadata conditions, checked
once in the servicer and passed down to every retriever call."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from services.common import filters as flt


@dataclass(frozen=True, slots=True)
class Scope:
    """Collections searched (never empty) and conditions every result's
    document meets."""

    collections: tuple[str, ...] = (flt.DEFAULT_COLLECTION,)
    filters: tuple[flt.Condition, ...] = ()

    def proto_filters(self) -> list[types_pb2.MetadataFilter]:
        """The conditions as protobuf filters."""
        return flt.to_proto(self.filters)


DEFAULT_SCOPE = Scope()


def no_match_note(scope: Scope) -> str:
    """What a search with ``scope``'s filters that found nothing says about
    them (a SKIPPED stage's detail), "" without filters: a filter tests each
    document's own metadata, so a key no document has, or a chunk's page,
    matches nothing, and an empty list alone looks like a miss."""
    if not scope.filters:
        return ""
    keys = ", ".join(dict.fromkeys(repr(c.key) for c in scope.filters))
    return (f"no document of the searched collections matches the filters on {keys}: filters test each document's "
            "own metadata (set at ingest: --meta, a record's metadata, a file's author), not a chunk's page; "
            "graphmesh documents list --collection C shows what each document has")


def scope_of(collections: Sequence[str], filters: Sequence[types_pb2.MetadataFilter]) -> Scope:
    """The Scope of a request's ``collections`` and ``filters`` fields.

    Raises:
        InvalidArgument: naming "collections[i]" or "filters[i]...".
    """
    return Scope(tuple(flt.validate_collections(collections)), tuple(flt.from_proto(filters)))
