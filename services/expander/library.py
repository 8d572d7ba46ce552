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
        self._synonyms = [g for f in (synonym_files or []) if f for g in load_synonyms(Path(f))]
        self._refresh = refresh_seconds
        self._driver: AsyncDriver | None = None
        self._index: LibraryIndex | None = None
        self._version = -1
        self._checked = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> LibraryIndex | None:
        """The current index (rebuilt first when the library changed); None
        when no library is configured or loaded yet. Raises the driver's
        error when Neo4j cannot be reached."""
        if not self.uri:
            return None
        async with self._lock:
            if time.monotonic() - self._checked < self._refresh and self._index is not None:
                return self._index
            if self._driver is None:
                self._driver = AsyncGraphDatabase.driver(
                    self.uri, auth=self._auth,
                    notifications_disabled_classifications=[NotificationDisabledClassification.UNRECOGNIZED])
            records = (await self._driver.execute_query(_VERSION, database_=self.database, routing_=RoutingControl.READ)).records
            version = int(records[0]["v"]) if records else 0
            self._checked = time.monotonic()
            if version != self._version or self._index is None:
                rows = (await self._driver.execute_query(_ENTRIES, database_=self.database, routing_=RoutingControl.READ)).records
                entries = [(r["name"], r["category"] or "", list(r["aliases"])) for r in rows]
                started = time.perf_counter()
                self._index = await asyncio.to_thread(LibraryIndex, entries, self._synonyms)
                self._version = version
                log.info("entity library v%s: %d names indexed in %.1f s", version, len(entries), time.perf_counter() - started)
            return self._index

    async def close(self) -> None:
        """Closes the driver."""
        if self._driver is not None:
            await self._driver.close()
            self._driver = None
