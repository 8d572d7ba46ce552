"""One-time export of a CrossEncoder directory to ONNX, so that the reranker
serves it with ONNX Runtime and no torch (services/reranker/onnx_cross_encoder.py).

Needs the ``models`` extra (torch, sentence-transformers): run it where the
model was trained (``graphmesh reranker train`` exports at its end) or once
by hand (``graphmesh reranker export-onnx DIR``). It writes, inside the
model directory:

    onnx/model.onnx    inputs input_ids, attention_mask, token_type_ids
                       (int64, [pairs, tokens]); output logits ([pairs, 1])
    onnx/export.json   opset, the activation on the logit ("sigmoid" or
                       "identity"), the largest score difference from
                       sentence-transformers on check pairs, versions

The tokenizer stays the model directory's own tokenizer.json.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from services.reranker.onnx_cross_encoder import EXPORT_CARD, ONNX_DIR, ONNX_FILE, OnnxCrossEncoderScorer


#: Pairs scored by both runtimes after the export, to record (and bound)
#: how far the ONNX scores are from sentence-transformers'.
CHECK_PAIRS = [
    ("什么是实用新型？", "实用新型，是指对产品的形状、构造或者其结合所提出的适于实用的新的技术方案。"),
    ("专利权的期限是多久？", "发明专利权的期限为二十年，实用新型专利权的期限为十年，均自申请日起计算。"),
    ("How long does a patent last?", "中华人民共和国劳动法\n第三十六条 国家实行劳动者每日工作时间不超过八小时的工时制度。"),
    ("醉酒驾驶", "醉酒驾驶机动车的，由公安机关交通管理部门约束至酒醒，吊销机动车驾驶证，依法追究刑事责任。" * 3),
]

#: Largest accepted |ONNX - sentence-transformers| score on CHECK_PAIRS.
MAX_SCORE_DIFFERENCE = 1e-3


class ExportError(RuntimeError):
    """The directory cannot be exported: torch / sentence-transformers
    missing, not a loadable CrossEncoder, or the exported graph scores
    differently from the original."""


def _activation_name(model) -> str:
    fn = getattr(model, "activation_fn", None)
    name = type(fn).__name__.lower() if fn is not None else "sigmoid"
    if name not in ("sigmoid", "identity"):
        raise ExportError(f"unsupported activation {type(fn).__name__}: the ONNX scorer knows Sigmoid and Identity")
    return name


def export_onnx(model_dir: str | Path, opset: int = 17) -> dict:
    """Exports the CrossEncoder at ``model_dir`` to ``model_dir``/onnx/.

    Args:
        model_dir: a CrossEncoder directory with a fast tokenizer
            (tokenizer.json), e.g. written by ``graphmesh reranker train``.
        opset: ONNX opset of the graph.
    Returns:
        the export card (also written to onnx/export.json).
    Raises:
        ExportError: see the class; FileNotFoundError: no such directory.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"cross-encoder directory not found: {model_dir}")
    if not (model_dir / "tokenizer.json").is_file():
        raise ExportError(f"{model_dir} has no tokenizer.json (a fast tokenizer): the ONNX scorer needs one")
    try:
        import torch
        from sentence_transformers import CrossEncoder
    except ImportError as err:
        raise ExportError(f"exporting needs the models extra (pip install '.[models]'): {err}") from err
    started = time.perf_counter()
    try:
        model = CrossEncoder(str(model_dir), num_labels=1, device="cpu", local_files_only=True)
    except (OSError, ValueError) as err:
        raise ExportError(f"cannot load {model_dir}: {err}") from err
    activation = _activation_name(model)
    network = model.model.eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    # traced on a padded batch, so that no all-ones shortcut of the attention mask is baked into the graph
    sample = model.tokenizer(CHECK_PAIRS[:2], padding=True, return_tensors="pt")
    out = model_dir / ONNX_DIR
    out.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        # The TorchScript exporter: the dynamo one needs onnxscript, which
        # the models extra does not carry, and BERT traces cleanly.
        torch.onnx.export(network, tuple(sample[n] for n in names), str(out / ONNX_FILE), input_names=names,
                          output_names=["logits"], opset_version=opset, dynamo=False, external_data=False,
                          dynamic_axes={**{n: {0: "pairs", 1: "tokens"} for n in names}, "logits": {0: "pairs"}})
    card = {"opset": opset, "activation": activation, "max_length": int(getattr(model, "max_seq_length", None) or 512),
            "torch": torch.__version__, "sentence_transformers": __import__("sentence_transformers").__version__,
            "seconds": 0.0, "max_score_difference": None}
    (out / EXPORT_CARD).write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")

    expected = model.predict(CHECK_PAIRS, show_progress_bar=False, convert_to_numpy=True)
    got = OnnxCrossEncoderScorer(str(model_dir), max_length=card["max_length"]).score_sync(CHECK_PAIRS)
    difference = max(abs(float(e) - g) for e, g in zip(expected, got))
    card["max_score_difference"] = round(difference, 8)
    card["seconds"] = round(time.perf_counter() - started, 1)
    if difference > MAX_SCORE_DIFFERENCE:
        (out / EXPORT_CARD).unlink()
        raise ExportError(f"the exported graph scores up to {difference:.4g} away from sentence-transformers "
                          f"(at most {MAX_SCORE_DIFFERENCE} accepted); export removed")
    (out / EXPORT_CARD).write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return card
