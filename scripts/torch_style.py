#!/usr/bin/env python3
"""Encoder graphs written the way ``torch.onnx.export`` writes them — test
inputs for hush's graph runtime (``hush_onnx::graph``) that hush's own
MiniLM script does not make.

No torch wheel installs on these machines without a multi-GB CUDA stack,
so this script reproduces the exporter's node patterns with ``onnx.helper``
(node for node as torch 2.x writes them for a Hugging Face-style module at
the given opset):

* ``prenorm_block`` (opset 13): a one-block **pre-norm** encoder. Token and
  position embeddings (``Gather`` on the ids; the ``position_ids`` buffer
  sliced by ``Shape``/``Gather``/``Unsqueeze``/``Slice``), LayerNorm
  **decomposed** (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add),
  Q/K/V as ``MatMul`` with transposed weight initializers named
  ``onnx::MatMul_N`` plus ``Add`` bias, the heads split by
  ``Shape``/``Gather``/``Unsqueeze``/``Concat``/``Reshape`` and
  ``Transpose``, scores ``Div`` by √d, the **attention-mask arithmetic**
  torch emits (``Unsqueeze``/``Cast``/``Sub``/``Mul`` by float32's minimum),
  Softmax, the FFN with **Erf GeLU** (Div √2, Erf, Add 1, Mul x, Mul ½), two
  residuals, and a final LayerNorm.
* ``bert_classifier`` (opset 17): a two-layer **post-norm** BERT-style
  classifier: word + position + token-type embeddings, **fused**
  ``LayerNormalization``, scores ``Mul`` by 1/√d, a ``masked_fill`` mask
  (``Equal``/``Where`` with float32's minimum), **tanh GeLU** (Pow 3, Mul,
  Add, Mul √(2/π), Tanh, Add 1, Mul ½x), a **pooler** (``Gather`` of the
  first token, ``Gemm`` with ``transB``, ``Tanh``) and a classification head
  (``Gemm``).

Weights are random (fixed seed), at the magnitudes of a trained BERT layer.

    .venv/bin/python scripts/torch_style.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32_MIN = float(np.finfo(np.float32).min)


class G:
    """A graph under construction, naming values as torch does."""

    def __init__(self, seed: int):
        self.nodes = []
        self.inits = []
        self.n = 0
        self.rng = np.random.default_rng(seed)

    def name(self, op: str) -> str:
        self.n += 1
        return f"/{op}_{self.n}_output_0"

    def op(self, op: str, ins, outs=1, **attrs):
        names = [self.name(op) for _ in range(outs)]
        self.nodes.append(helper.make_node(op, list(ins), names, name=f"/{op}_{self.n}", **attrs))
        return names[0] if outs == 1 else names

    def const(self, value, dtype=np.float32) -> str:
        out = self.name("Constant")
        t = numpy_helper.from_array(np.array(value, dtype=dtype), name="")
        self.nodes.append(helper.make_node("Constant", [], [out], name=f"/Constant_{self.n}", value=t))
        return out

    def init(self, name: str, arr) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name=name))
        return name

    def weight(self, name: str, shape, scale=None) -> str:
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return self.init(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def dim(self, x: str, i: int) -> str:
        """Shape(x)[i] as a 1-D tensor, as torch writes size lookups."""
        s = self.op("Shape", [x])
        g = self.op("Gather", [s, self.const(i, np.int64)], axis=0)
        return self.op("Unsqueeze", [g, self.const([0], np.int64)])

    # ---- blocks ---------------------------------------------------------------

    def linear(self, x: str, w: str, b: str) -> str:
        return self.op("Add", [b, self.op("MatMul", [x, w])])

    def layernorm_decomposed(self, x: str, gamma: str, beta: str, eps=1e-5) -> str:
        m = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = self.op("Sub", [x, m])
        p = self.op("Pow", [d, self.const(2.0)])
        v = self.op("ReduceMean", [p], axes=[-1], keepdims=1)
        e = self.op("Add", [v, self.const(eps)])
        s = self.op("Sqrt", [e])
        n = self.op("Div", [d, s])
        y = self.op("Mul", [n, gamma])
        return self.op("Add", [y, beta])

    def gelu_erf(self, x: str) -> str:
        a = self.op("Div", [x, self.const(1.4142135381698608)])
        r = self.op("Erf", [a])
        q = self.op("Add", [r, self.const(1.0)])
        u = self.op("Mul", [x, q])
        return self.op("Mul", [u, self.const(0.5)])

    def gelu_tanh(self, x: str) -> str:
        h = self.op("Mul", [self.const(0.5), x])
        p = self.op("Pow", [x, self.const(3.0)])
        k = self.op("Mul", [self.const(0.044715), p])
        v = self.op("Add", [x, k])
        w = self.op("Mul", [self.const(0.7978845608028654), v])
        t = self.op("Tanh", [w])
        q = self.op("Add", [self.const(1.0), t])
        return self.op("Mul", [h, q])

    def heads(self, x: str, nh: int, dh: int) -> str:
        """[B, S, H] -> [B, nh, S, dh] with the exporter's shape subgraph."""
        b, s = self.dim(x, 0), self.dim(x, 1)
        shape = self.op("Concat", [b, s, self.const([nh], np.int64), self.const([dh], np.int64)], axis=0)
        r = self.op("Reshape", [x, shape])
        return self.op("Transpose", [r], perm=[0, 2, 1, 3])

    def merge(self, x: str, h: int) -> str:
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        b, s = self.dim(t, 0), self.dim(t, 1)
        shape = self.op("Concat", [b, s, self.const([h], np.int64)], axis=0)
        return self.op("Reshape", [t, shape])

    def attention(self, x, p, h, nh, mask_term, scale_mul: bool):
        dh = h // nh
        q = self.linear(x, self.weight(f"onnx::MatMul_{p}q", (h, h)), self.weight(f"{p}.q.bias", (h,), 0.02))
        k = self.linear(x, self.weight(f"onnx::MatMul_{p}k", (h, h)), self.weight(f"{p}.k.bias", (h,), 0.02))
        v = self.linear(x, self.weight(f"onnx::MatMul_{p}v", (h, h)), self.weight(f"{p}.v.bias", (h,), 0.02))
        qh, kh, vh = self.heads(q, nh, dh), self.heads(k, nh, dh), self.heads(v, nh, dh)
        kt = self.op("Transpose", [kh], perm=[0, 1, 3, 2])
        sc = self.op("MatMul", [qh, kt])
        if scale_mul:
            sc = self.op("Mul", [sc, self.const(1.0 / np.sqrt(dh))])
        else:
            sc = self.op("Div", [sc, self.const(float(np.sqrt(dh)))])
        sc = mask_term(sc)
        pr = self.op("Softmax", [sc], axis=-1)
        ctx = self.op("MatMul", [pr, vh])
        m = self.merge(ctx, h)
        return self.linear(m, self.weight(f"onnx::MatMul_{p}o", (h, h)), self.weight(f"{p}.o.bias", (h,), 0.02))

    def model(self, inputs, outputs, opset: int, name: str) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch", producer_version="2.5.1")
        m.ir_version = 8  # what torch 2.x writes; onnxruntime 1.22 reads up to 10
        onnx.checker.check_model(m)
        return m


def ln_params(g: G, p: str, h: int):
    gamma = g.init(f"{p}.weight", (1.0 + 0.1 * g.rng.standard_normal(h)).astype(np.float32))
    beta = g.init(f"{p}.bias", (0.05 * g.rng.standard_normal(h)).astype(np.float32))
    return gamma, beta


def prenorm_block(vocab=200, h=64, nh=4, ffn=128, max_pos=64, seed=1) -> onnx.ModelProto:
    g = G(seed)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "sequence_length"])
    word = g.weight("embeddings.word_embeddings.weight", (vocab, h), 0.5)
    pos = g.weight("embeddings.position_embeddings.weight", (max_pos, h), 0.2)
    g.init("embeddings.position_ids", np.arange(max_pos, dtype=np.int64)[None, :])
    s = g.dim("input_ids", 1)
    pid = g.op("Slice", ["embeddings.position_ids", g.const([0], np.int64), s, g.const([1], np.int64)])
    x = g.op("Add", [g.op("Gather", [word, "input_ids"]), g.op("Gather", [pos, pid])])
    # the mask as torch's get_extended_attention_mask writes it
    m1 = g.op("Unsqueeze", ["attention_mask", g.const([1], np.int64)])
    m2 = g.op("Unsqueeze", [m1, g.const([2], np.int64)])
    mc = g.op("Cast", [m2], to=TensorProto.FLOAT)
    inv = g.op("Sub", [g.const(1.0), mc])
    term = g.op("Mul", [inv, g.const(F32_MIN)])
    ln1 = g.layernorm_decomposed(x, *ln_params(g, "layer.0.ln1", h))
    a = g.attention(ln1, "layer.0", h, nh, lambda sc: g.op("Add", [sc, term]), scale_mul=False)
    x = g.op("Add", [x, a])
    ln2 = g.layernorm_decomposed(x, *ln_params(g, "layer.0.ln2", h))
    u = g.linear(ln2, g.weight("onnx::MatMul_ff1", (h, ffn)), g.weight("layer.0.ff1.bias", (ffn,), 0.02))
    d = g.linear(g.gelu_erf(u), g.weight("onnx::MatMul_ff2", (ffn, h)), g.weight("layer.0.ff2.bias", (h,), 0.02))
    x = g.op("Add", [x, d])
    out = g.layernorm_decomposed(x, *ln_params(g, "final_ln", h))
    g.nodes.append(helper.make_node("Identity", [out], ["last_hidden_state"], name="/Identity_out"))
    y = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch_size", "sequence_length", h])
    return g.model([ids, mask], [y], 13, "main_graph")


def bert_classifier(vocab=200, h=64, nh=4, ffn=128, max_pos=64, layers=2, classes=3, seed=2) -> onnx.ModelProto:
    g = G(seed)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "sequence_length"])
    tt = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch_size", "sequence_length"])
    word = g.weight("bert.embeddings.word_embeddings.weight", (vocab, h), 0.5)
    pos = g.weight("bert.embeddings.position_embeddings.weight", (max_pos, h), 0.2)
    typ = g.weight("bert.embeddings.token_type_embeddings.weight", (2, h), 0.2)
    g.init("bert.embeddings.position_ids", np.arange(max_pos, dtype=np.int64)[None, :])
    s = g.dim("input_ids", 1)
    pid = g.op("Slice", ["bert.embeddings.position_ids", g.const([0], np.int64), s, g.const([1], np.int64), g.const([1], np.int64)])
    x = g.op("Add", [g.op("Add", [g.op("Gather", [word, "input_ids"]), g.op("Gather", [typ, "token_type_ids"])]), g.op("Gather", [pos, pid])])
    gamma, beta = ln_params(g, "bert.embeddings.LayerNorm", h)
    x = g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)
    # masked_fill(mask == 0, finfo.min)
    m1 = g.op("Unsqueeze", ["attention_mask", g.const([1, 2], np.int64)])
    eq = g.op("Equal", [m1, g.const(0, np.int64)])

    def masked(sc):
        return g.op("Where", [eq, g.const(F32_MIN), sc])

    for i in range(layers):
        p = f"bert.encoder.layer.{i}"
        a = g.attention(x, p, h, nh, masked, scale_mul=True)
        gamma, beta = ln_params(g, f"{p}.attention.output.LayerNorm", h)
        x = g.op("LayerNormalization", [g.op("Add", [a, x]), gamma, beta], axis=-1, epsilon=1e-12)
        u = g.linear(x, g.weight(f"onnx::MatMul_{p}.ff1", (h, ffn)), g.weight(f"{p}.intermediate.dense.bias", (ffn,), 0.02))
        d = g.linear(g.gelu_tanh(u), g.weight(f"onnx::MatMul_{p}.ff2", (ffn, h)), g.weight(f"{p}.output.dense.bias", (h,), 0.02))
        gamma, beta = ln_params(g, f"{p}.output.LayerNorm", h)
        x = g.op("LayerNormalization", [g.op("Add", [d, x]), gamma, beta], axis=-1, epsilon=1e-12)
    first = g.op("Gather", [x, g.const(0, np.int64)], axis=1)
    pw = g.weight("bert.pooler.dense.weight", (h, h))  # out × in, as nn.Linear stores it
    pooled = g.op("Tanh", [g.op("Gemm", [first, pw, g.weight("bert.pooler.dense.bias", (h,), 0.02)], alpha=1.0, beta=1.0, transB=1)])
    cw = g.weight("classifier.weight", (classes, h))
    g.nodes.append(helper.make_node("Gemm", [pooled, cw, g.weight("classifier.bias", (classes,), 0.02)], ["logits"], name="/classifier/Gemm", alpha=1.0, beta=1.0, transB=1))
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", classes])
    return g.model([ids, mask, tt], [y], 17, "main_graph")


def sample_inputs(batch=2, seq=12, vocab=200, seed=3, token_types=False):
    """Token ids with padding (the second sentence shorter) and its mask."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for b in range(1, batch):
        n = max(2, seq - 3 * b)
        mask[b, n:] = 0
        ids[b, n:] = 0
    out = {"input_ids": ids, "attention_mask": mask}
    if token_types:
        tt = np.zeros((batch, seq), dtype=np.int64)
        tt[:, seq // 2:] = 1
        out["token_type_ids"] = tt * mask
    return out


def bert_base(layers=12) -> onnx.ModelProto:
    """BERT-base's shapes (vocab 30522, hidden 768, 12 heads, FFN 3072,
    512 positions) as the classifier above, random weights: the benchmark
    graph of `hush embed` at seq 128 (about 440 MB)."""
    return bert_classifier(vocab=30522, h=768, nh=12, ffn=3072, max_pos=512, layers=layers, classes=2, seed=5)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--bert-base":
        # --bert-base OUT [--layers N]: BERT-base's shapes with N encoder
        # layers (12 by default; 1 or 2 for profiling)
        out = Path(sys.argv[2])
        layers = 12
        if len(sys.argv) > 3:
            if len(sys.argv) != 5 or sys.argv[3] != "--layers" or not sys.argv[4].isdigit() or int(sys.argv[4]) < 1:
                sys.exit("usage: torch_style.py --bert-base OUT [--layers N]   (N ≥ 1)")
            layers = int(sys.argv[4])
        out.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(bert_base(layers), out)
        print(f"wrote {out} ({layers} layers)")
        return
    if len(sys.argv) > 1 and sys.argv[1].startswith("-"):
        sys.exit("usage: torch_style.py [OUT_DIR] | --bert-base OUT [--layers N]")
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "target/torch_style")
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(prenorm_block(), out / "prenorm_block.onnx")
    onnx.save(bert_classifier(), out / "bert_classifier.onnx")
    print(f"wrote {out}/prenorm_block.onnx and {out}/bert_classifier.onnx")


if __name__ == "__main__":
    main()
