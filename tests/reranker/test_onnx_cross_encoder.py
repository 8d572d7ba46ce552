"""The cross-encoder on ONNX Runtime (services.reranker.onnx_cross_encoder)
and its one-time export (services.reranker.onnx_export): the exported
graph scores as sentence-transformers does, it is served without torch,
and "auto" picks it only on CPU and only where an export exists."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.cli.main import main
from services.reranker.config import RerankerSettings
from services.reranker.onnx_cross_encoder import EXPORT_CARD, ONNX_DIR, ONNX_FILE, exported_model
from services.reranker.server import cross_encoder_runtime

REPO = Path(__file__).resolve().parents[2]

LONG = "中华人民共和国专利法 第四十二条\n" + "发明专利权的期限为二十年，实用新型专利权的期限为十年。" * 8
PAIRS = [("专利权的期限是多久？", LONG), ("专利权的期限是多久？", "商标注册人享有商标专用权。"),
         ("What is a utility model?", "实用新型，是指对产品的形状、构造或者其结合所提出的适于实用的新的技术方案。")]


def fake_model_dir(root: Path, exported: bool) -> Path:
    """A directory that looks exported (or not) to exported_model; holds no real model."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tokenizer.json").write_text("{}", encoding="utf-8")
    if exported:
        (root / ONNX_DIR).mkdir(exist_ok=True)
        (root / ONNX_DIR / ONNX_FILE).write_bytes(b"")
        (root / ONNX_DIR / EXPORT_CARD).write_text("{}", encoding="utf-8")
    return root


@pytest.mark.unit
def test_auto_runtime_is_onnx_on_cpu_where_an_export_exists(tmp_path):
    exported = str(fake_model_dir(tmp_path / "exported", True))
    plain = str(fake_model_dir(tmp_path / "plain", False))
    assert cross_encoder_runtime(RerankerSettings(model_dir=exported, device="cpu")) == "onnx"
    assert cross_encoder_runtime(RerankerSettings(model_dir=plain, device="cpu")) == "torch"
    # a GPU named, or asked for: torch, export or not
    assert cross_encoder_runtime(RerankerSettings(model_dir=exported, device="cuda:0")) == "torch"
    # an explicit choice is kept
    assert cross_encoder_runtime(RerankerSettings(model_dir=exported, device="cpu", runtime="torch")) == "torch"
    assert cross_encoder_runtime(RerankerSettings(model_dir=plain, runtime="onnx")) == "onnx"
    # half an export (no card) is no export
    (Path(exported) / ONNX_DIR / EXPORT_CARD).unlink()
    assert exported_model(exported) is None


@pytest.mark.unit
def test_export_of_a_directory_without_a_fast_tokenizer_exits_2_and_says_why(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    assert main(["reranker", "export-onnx", str(tmp_path)]) == 2
    assert "tokenizer.json" in capsys.readouterr().err
    assert main(["reranker", "export-onnx", str(tmp_path / "missing")]) == 2
    assert not (tmp_path / ONNX_DIR).exists()


@pytest.mark.asyncio(loop_scope="session")
async def test_training_exports_a_graph_that_scores_as_sentence_transformers_does(tiny_cross_encoder):
    from sentence_transformers import CrossEncoder

    from services.reranker.cross_encoder import CrossEncoderScorer
    from services.reranker.onnx_cross_encoder import OnnxCrossEncoderScorer

    card = json.loads((tiny_cross_encoder / ONNX_DIR / EXPORT_CARD).read_text(encoding="utf-8"))
    assert card["activation"] == "sigmoid" and card["max_score_difference"] <= 1e-3
    assert json.loads((tiny_cross_encoder / "training_card.json").read_text(encoding="utf-8"))["steps"] == 3

    onnx = OnnxCrossEncoderScorer(str(tiny_cross_encoder), max_length=64)
    torch_scorer = CrossEncoderScorer(str(tiny_cross_encoder), device="cpu", max_length=64)
    # the same tokenizer cuts the same passages to the same window
    prepared_onnx = onnx.prepare_sync(PAIRS[0][0], [p for _, p in PAIRS])
    prepared_torch = torch_scorer.prepare_sync(PAIRS[0][0], [p for _, p in PAIRS])
    assert prepared_onnx == prepared_torch and prepared_onnx.truncated == 1
    # and the scores agree, cut pairs and pairs over the window alike
    expected = CrossEncoder(str(tiny_cross_encoder), num_labels=1, max_length=64, device="cpu",
                            local_files_only=True).predict(PAIRS, show_progress_bar=False)
    got = onnx.score_sync(PAIRS)
    assert got == pytest.approx([float(s) for s in expected], abs=1e-4)
    assert all(0.0 <= s <= 1.0 for s in got)
    assert onnx.score_sync([]) == []


@pytest.mark.asyncio(loop_scope="session")
async def test_the_exported_model_is_served_without_torch(tiny_cross_encoder):
    """build_scorer with the defaults picks ONNX Runtime for the exported
    directory and scores with torch and sentence-transformers unimportable."""
    script = f"""
import importlib.abc, json, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "sentence_transformers", "transformers"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, NoTorch())
from services.reranker.config import RerankerSettings
from services.reranker.server import build_scorer
scorer = build_scorer(RerankerSettings(model_dir={str(tiny_cross_encoder)!r}, max_length=64))
prepared = scorer.prepare_sync("专利权的期限是多久？", [{LONG!r}, "商标注册人享有商标专用权。"])
scores = scorer.score_sync([(prepared.query, p) for p in prepared.passages])
print(json.dumps({{"kind": type(scorer).__name__, "scores": scores, "truncated": prepared.truncated,
                  "torch": "torch" in sys.modules}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{REPO}:{REPO / 'gen' / 'python'}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["kind"] == "OnnxCrossEncoderScorer" and not result["torch"]
    assert result["truncated"] == 1 and len(result["scores"]) == 2
    assert all(0.0 <= s <= 1.0 for s in result["scores"])
