"""Which domain pack each collection has (domains/), as the stores record it.

A collection names its pack when it is created (IngestRequest.domain_pack)
and keeps it; both retrievers record it (retriever_pg a collections row,
retriever_graph a Collection node) and report it in ListCollections. The
gateway asks the primary retriever (retriever_pg; every retriever when none
is so named) once and caches the answer for
``ttl`` seconds, and remembers the packs of its own ingests at once. Search
passes the packs of the searched collections to the expander, so that only
their question classifiers run; an ingest names the pack on every document,
so that only its fact extractor runs.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence

import domains
from graphmesh.retriever.v1 import retriever_pb2
from services.common.errors import InvalidArgument, NotFound
from services.common.filters import DEFAULT_COLLECTION
from services.common.spelling import closest
from services.gateway.downstream.interfaces import Retriever
from services.gateway.downstream.guard import Deadline

#: The retriever asked first: it stores every document.
PRIMARY = "retriever_pg"
#: Seconds a store's answer is kept.
TTL_SECONDS = 30.0
#: Seconds a ListCollections call may take.
CALL_SECONDS = 2.0


class CollectionPacks:
    """Collection name -> domain pack name, from the retrievers' ListCollections."""

    def __init__(self, retrievers: Sequence[Retriever], ttl: float = TTL_SECONDS) -> None:
        primary = [r for r in retrievers if r.name == PRIMARY]
        self._retrievers = primary or list(retrievers)
        self._ttl = ttl
        self._packs: dict[str, str] = {}
        self._known: set[str] = set()  # every collection a store reported, with or without a pack
        self._listed = False  # whether any store answered ListCollections yet
        self._fetched = float("-inf")
        self._lock = asyncio.Lock()

    async def _refresh(self, deadline: Deadline, fresh: bool = False) -> None:
        """Reads every retriever's collections (one that fails is skipped:
        its collections then get the default pack until the next refresh),
        at most once a ``ttl`` unless ``fresh``."""
        async with self._lock:
            if not fresh and time.monotonic() - self._fetched < self._ttl:
                return
            request = retriever_pb2.ListCollectionsRequest()
            seconds = deadline.left(CALL_SECONDS)
            replies = await asyncio.gather(*(asyncio.wait_for(r.list_collections(request, seconds), seconds)
                                             for r in self._retrievers), return_exceptions=True)
            for reply in replies:
                if isinstance(reply, BaseException):
                    continue
                self._listed = True
                for c in reply.collections:
                    self._known.add(c.name)
                    if c.domain_pack:
                        self._packs[c.name] = c.domain_pack
            self._fetched = time.monotonic()

    async def pack_of(self, collection: str, deadline: Deadline) -> str | None:
        """The recorded pack of ``collection``, None when none is known. A
        collection another gateway created is seen once the cached answer
        is older than ``ttl``."""
        if collection not in self._packs:
            await self._refresh(deadline)
        return self._packs.get(collection)

    async def for_ingest(self, collection: str, requested: str, deadline: Deadline) -> str:
        """The pack an ingest into ``collection`` uses: ``requested``, which
        must be registered and match the collection's recorded pack, or the
        recorded pack, or the default for a new collection.

        Raises:
            InvalidArgument ("domain_pack"): unknown, or another pack than the collection's.
        """
        if requested:
            try:
                domains.get_pack(requested)
            except domains.UnknownPack as err:
                raise InvalidArgument("domain_pack", str(err)) from None
        existing = await self.pack_of(collection, deadline)
        if requested and existing and requested != existing:
            raise InvalidArgument("domain_pack", f"collection {collection!r} uses the {existing!r} pack, not {requested!r}")
        pack = requested or existing or domains.DEFAULT_PACK
        self._packs[collection] = pack
        return pack

    def stored(self, collection: str) -> None:
        """Records that a store now holds documents of ``collection`` (an
        ingest stored or found one there), so that a search right after
        does not call it missing. Not done by ``for_ingest``: an ingest that
        stores nothing (every file failed) creates no collection."""
        self._known.add(collection)

    async def for_search(self, collections: Iterable[str], deadline: Deadline) -> list[str]:
        """The distinct packs of ``collections``, in order; a collection
        without a recorded pack counts as the default pack."""
        packs: list[str] = []
        for collection in collections:
            pack = await self.pack_of(collection, deadline) or domains.DEFAULT_PACK
            if pack not in packs:
                packs.append(pack)
        return packs

    async def not_stored(self, collections: Iterable[str], deadline: Deadline) -> list[str]:
        """The ``collections`` no store reports (a misspelt name, one never
        ingested into), in order, after one fresh read of the stores when
        any is not known (at most one read a ``ttl``); [] when no store has
        answered, since then nothing can be said of any."""
        wanted = list(dict.fromkeys(collections))
        if any(c not in self._known for c in wanted):
            await self._refresh(deadline)
        return [c for c in wanted if c not in self._known] if self._listed else []

    @property
    def known(self) -> frozenset[str]:
        """Every collection a store reported at the last listing (or stored since)."""
        return frozenset(self._known)

    def closest_stored(self, collection: str) -> str:
        """The stored collection whose name ``collection`` looks like a
        misspelling of (at most two edits, case aside), "" when none does; for
        the default collection, the only one stored when there is one (a trial's
        console asked the empty default and was told nothing of its "wuye")."""
        if collection == DEFAULT_COLLECTION:
            others = sorted(self._known - {DEFAULT_COLLECTION})
            return others[0] if len(others) == 1 else ""
        return closest(collection, sorted(self._known), max_edits=2)

    async def require(self, collection: str, deadline: Deadline, deleting: bool = False) -> None:
        """Raises NotFound when no store holds ``collection`` (AIP-132 and
        AIP-135: a List under, a Delete or an export of a missing
        collection, named with the stored one it looks like); the default
        collection is never refused. ``deleting``: the message says nothing
        was deleted and names no look-alike (a trial's delete of a mistyped
        name was pointed at the user's real collection)."""
        if collection != DEFAULT_COLLECTION and not await self.exists(collection, deadline):
            close = "" if deleting else self.closest_stored(collection)
            raise NotFound(f"collection {collection!r} does not exist: "
                           + ("nothing was deleted" if deleting else "nothing was ingested into it")
                           + (f"; it looks like {close!r}" if close else "")
                           + " (graphmesh collections list, GET /v1/collections, names those that exist)")

    async def exists(self, collection: str, deadline: Deadline) -> bool:
        """Whether a store holds ``collection``: known, or reported by a
        fresh read of the stores (another gateway may have just created
        it); True when no store answers, since then nothing can be said."""
        if collection not in self._known:
            await self._refresh(deadline, fresh=True)
        return collection in self._known or not self._listed

    def forget(self, collection: str) -> None:
        """Drops what is known of ``collection`` (after it was deleted): the
        next question about it asks the stores again."""
        self._packs.pop(collection, None)
        self._known.discard(collection)
        self._fetched = float("-inf")
