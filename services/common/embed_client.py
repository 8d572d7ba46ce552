"""Vectors from the expander's Embed RPC, for services that score with the
mesh's one embedding model without loading it themselves (the reranker's
bi-encoder scorer, the graph retriever's dense lookups)."""
from __future__ import annotations

from collections.abc import Callable

import grpc
import numpy as np

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from services.common.clients import channel

#: Most texts per Embed call (expander.proto's limit).
EMBED_BATCH = 512


class EmbedUnavailable(RuntimeError):
    """The expander could not embed (unreachable, refused, timed out)."""


class EmbedClient:
    """Query- or passage-side unit vectors of texts, from the expander.

    Args:
        expander_addr: "host:port" (or a resolver target) of the expander,
            or a function returning it, called when the first call opens
            the channel (for a mesh whose expander starts later).
        timeout: seconds per Embed call.
    """

    def __init__(self, expander_addr: str | Callable[[], str], timeout: float = 10.0) -> None:
        self.expander_addr = expander_addr
        self.timeout = timeout
        self.model = ""
        self._channel: grpc.aio.Channel | None = None
        self._stub: expander_pb2_grpc.ExpanderServiceStub | None = None

    def _expander(self) -> expander_pb2_grpc.ExpanderServiceStub:
        if self._stub is None:
            if isinstance(self.expander_addr, str):
                address = self.expander_addr
            else:
                try:
                    address = self.expander_addr()
                except Exception as exc:  # noqa: BLE001 - whatever the function raises, no address yet
                    raise EmbedUnavailable(f"the expander's address is not known yet: {exc!r}") from exc
                if not isinstance(address, str) or not address:
                    raise EmbedUnavailable(f"the expander's address is not known yet: {address!r}")
            self._channel = channel(address)
            self._stub = expander_pb2_grpc.ExpanderServiceStub(self._channel)
        return self._stub

    async def embed(self, texts: list[str], *, query: bool, timeout: float | None = None) -> np.ndarray:
        """float32 array (len(texts), dimension), rows as the expander
        returns them (unit-norm); ``EMBED_BATCH`` texts a call, each call
        bounded by ``timeout`` seconds (default the client's). ``model``
        holds the name the expander reported. No texts: a (0, 0) array and
        no call.

        Raises:
            EmbedUnavailable: an Embed call failed (code and details in the
                message), or the address function found no address yet.
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        seconds = self.timeout if timeout is None else timeout
        kind = expander_pb2.EMBED_KIND_QUERY if query else expander_pb2.EMBED_KIND_PASSAGE
        rows: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            try:
                reply = await self._expander().Embed(
                    expander_pb2.EmbedRequest(texts=texts[start:start + EMBED_BATCH], kind=kind), timeout=seconds)
            except grpc.aio.AioRpcError as err:
                raise EmbedUnavailable(f"expander Embed failed: {err.code().name}: {err.details()}") from err
            self.model = reply.model
            rows.extend(list(v.values) for v in reply.vectors)
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)

    async def close(self) -> None:
        """Closes the channel (a later ``embed`` opens a new one)."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
