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


def scope_of(collections: Sequence[str], filters: Sequence[types_pb2.MetadataFilter]) -> Scope:
    """The Scope of a request's ``collections`` and ``filters`` fields.

    Raises:
        InvalidArgument: naming "collections[i]" or "filters[i]...".
    """
    return Scope(tuple(flt.validate_collections(collections)), tuple(flt.from_proto(filters)))
