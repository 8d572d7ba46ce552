"""The sentence-transformers cross-encoder scorer (services.reranker.cross_encoder)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.asyncio(loop_scope="session")


class InterleavingTokenizer:
    """Stands in for a fast tokenizer's Rust object: forwards everything, and
    runs ``interleave`` (another request's prepare) between predict setting
    its padding and truncation and the encoding that relies on them, as a
    thread switch at that point would."""

    def __init__(self, backend, interleave) -> None:
        self._backend, self._interleave, self._busy = backend, interleave, False

    def encode_batch(self, *args, **kwargs):
        if not self._busy:
            self._busy = True
            try:
                self._interleave()
            finally:
                self._busy = False
        return self._backend.encode_batch(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._backend, name)


async def test_a_prepare_between_a_batchs_tokenizer_settings_and_its_encoding_leaves_the_batch_whole(tiny_cross_encoder):
    from services.reranker.cross_encoder import CrossEncoderScorer

    scorer = CrossEncoderScorer(str(tiny_cross_encoder), device="cpu", max_length=64)
    texts = ["发明专利权的期限为二十年。" * n for n in (1, 3, 9)]
    expected = scorer.score_sync([("专利权的期限", t) for t in texts])
    scorer.prepare_sync("专利权的期限", texts)
    model = scorer.load()
    model.tokenizer._tokenizer = InterleavingTokenizer(model.tokenizer._tokenizer,
                                                        lambda: scorer.prepare_sync("专利", ["专利权", texts[2]]))
    assert scorer.score_sync([("专利权的期限", t) for t in texts]) == pytest.approx(expected, abs=1e-5)
