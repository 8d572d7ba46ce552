"""Sentence units' passage-side vectors kept in the gateway's memory, so
that ``sentence.maxsim`` asks the expander only for sentences it has not
seen: a question's 20 chunks hold about 60 sentences, and fetching their
vectors from the expander's on-disk cache cost a cold search 3.8 ms of its
p50 (an Embed call through gRPC, most of it the call and its serialisation,
0.6 ms the SQLite lookup; docs/benchmarks.md, "Sentence vectors in the
gateway's memory").

Keyed by the unit's text under one embedding model: a reply naming another
model (the expander restarted with a different one) empties the cache.
Least recently used entries go first once ``max_bytes`` is reached. Not
thread-safe: the gateway's event loop is its only user.
"""
from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

#: Bookkeeping per entry beyond the vector and the key (dict slot, ndarray header), bytes.
_ENTRY_OVERHEAD_BYTES = 200


class SentenceVectorCache:
    """A bounded LRU map of sentence text -> unit vector (float32, shape (d,)).

    Args:
        max_bytes: most bytes of vectors and keys kept (estimated); 0 keeps nothing.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self.model = ""
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._vectors)

    @property
    def size_bytes(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    def get_many(self, texts: Sequence[str], model: str) -> dict[int, np.ndarray]:
        """The vectors held for ``texts`` made by ``model``, by position in
        ``texts``; each one found becomes the most recently used. {} when
        the vectors held are another model's."""
        found: dict[int, np.ndarray] = {}
        if model != self.model:
            return found
        for i, text in enumerate(texts):
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                found[i] = vector
        return found

    def put_many(self, texts: Sequence[str], vectors: np.ndarray, model: str) -> None:
        """Keeps ``vectors`` (shape (len(texts), d)) for ``texts``, made by
        ``model``; a model other than the one held so far empties the cache
        first. Entries beyond ``max_bytes`` are dropped, oldest use first.

        Raises:
            ValueError: ``texts`` and ``vectors`` differ in length.
        """
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts for {len(vectors)} vectors")
        if model != self.model:
            self._vectors.clear()
            self._bytes = 0
            self.model = model
        if not self.max_bytes:
            return
        for text, vector in zip(texts, vectors):
            if text in self._vectors:
                self._vectors.move_to_end(text)
                continue
            row = np.array(vector, dtype=np.float32)  # a copy: a row view would keep the whole batch alive
            self._vectors[text] = row
            self._bytes += _entry_bytes(text, row)
        while self._bytes > self.max_bytes and self._vectors:
            text, row = self._vectors.popitem(last=False)
            self._bytes -= _entry_bytes(text, row)


def _entry_bytes(text: str, row: np.ndarray) -> int:
    return sys.getsizeof(text) + row.nbytes + _ENTRY_OVERHEAD_BYTES
