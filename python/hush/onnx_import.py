"""ONNX -> hush model file (``.hushm``).

hush's inference engine (``crates/hush-inference``) executes a small model
description instead of ONNX itself. This module reads an ONNX model with the
``onnx`` package, checks that every operator is supported, folds
BatchNormalization into the preceding Conv/Gemm, computes every shape (batch
size 1) and writes the description.

Supported ONNX operators: Conv (any stride and padding, dilation 1, groups 1),
Gemm (transA = 0, constant B), MatMul with a constant right operand, Add (two
activations of the same shape = residual; an activation and a constant =
bias, folded into the preceding Conv/Gemm when possible), Relu, MaxPool,
AveragePool, GlobalAveragePool, BatchNormalization (folded, else a
per-channel scale-and-shift layer), Flatten, Reshape (constant shape),
Concat, and a final Softmax or ArgMax. The final Softmax/ArgMax is **not**
computed securely: the secure run reveals the logits to the client only, and
the client applies Softmax/ArgMax to them in the clear (the model file records
which). Identity and Dropout (inference mode) are accepted as no-ops.
Anything else is refused with an :class:`UnsupportedModel` error that names the
operator and the node.

File format (version 1), all little endian::

    b"HUSHMDL1"  magic (8 bytes)
    u32          length H of the JSON header
    H bytes      JSON header (UTF-8): input, output, nodes, tensors
    ...          tensor data: float32 values, each tensor at the byte offset
                 (relative to the end of the header) given in the header

Shapes in the file exclude the batch dimension (the engine runs one input at
a time). Weights stay float32; the engine encodes them in fixed point at load
time with the ring and fraction bits chosen for the run.

Command line: ``python -m hush.onnx_import in.onnx out.hushm``.
"""

from __future__ import annotations

import json
import struct
import sys
from typing import Dict, List, Optional

import numpy as np

MAGIC = b"HUSHMDL1"
FORMAT_VERSION = 1

SUPPORTED = (
    "Conv Gemm MatMul Add Relu MaxPool AveragePool GlobalAveragePool BatchNormalization "
    "Flatten Reshape Concat Softmax ArgMax Identity Dropout Constant"
).split()


class UnsupportedModel(ValueError):
    """The ONNX model uses an operator or a form hush does not support."""


def _fail(node, msg: str):
    raise UnsupportedModel(f"node '{node.name or '<unnamed>'}' (operator {node.op_type}): {msg}")


class _Builder:
    def __init__(self):
        self.nodes: List[dict] = []
        self.tensors: List[dict] = []
        self.data: List[bytes] = []
        self.offset = 0
        self.shapes: Dict[str, List[int]] = {}
        self.producer: Dict[str, dict] = {}

    def tensor(self, name: str, arr: np.ndarray) -> int:
        a = np.ascontiguousarray(arr, dtype="<f4")
        if not np.all(np.isfinite(a)):
            raise UnsupportedModel(f"tensor '{name}' has non-finite values")
        self.tensors.append({"name": name, "shape": list(a.shape), "offset": self.offset, "dtype": "f32"})
        b = a.tobytes()
        self.data.append(b)
        self.offset += len(b)
        return len(self.tensors) - 1

    def tensor_value(self, idx: int) -> np.ndarray:
        t = self.tensors[idx]
        return np.frombuffer(self.data[idx], dtype="<f4").reshape(t["shape"]).copy()

    def replace_tensor(self, idx: int, arr: np.ndarray):
        a = np.ascontiguousarray(arr, dtype="<f4")
        if not np.all(np.isfinite(a)):
            raise UnsupportedModel(f"tensor '{self.tensors[idx]['name']}' has non-finite values after folding")
        old = self.data[idx]
        assert len(old) == len(a.tobytes()) and list(a.shape) == self.tensors[idx]["shape"]
        self.data[idx] = a.tobytes()

    def add(self, node: dict, out_shape: List[int]):
        node["shape"] = [int(d) for d in out_shape]
        self.nodes.append(node)
        self.shapes[node["output"]] = node["shape"]
        self.producer[node["output"]] = node


def _attrs(node) -> dict:
    import onnx.helper

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _pool_out(n: int, k: int, s: int, p0: int, p1: int) -> int:
    return (n + p0 + p1 - k) // s + 1


def convert(model) -> bytes:
    """Converts a loaded ``onnx.ModelProto`` into the bytes of a .hushm file."""
    import onnx
    import onnx.numpy_helper as nh

    try:
        onnx.checker.check_model(model)
    except Exception as e:  # the checker's own exception types vary between versions
        raise UnsupportedModel(f"invalid ONNX model: {e}") from e
    g = model.graph
    consts: Dict[str, np.ndarray] = {t.name: nh.to_array(t) for t in g.initializer}
    real_inputs = [i for i in g.input if i.name not in consts]
    if len(real_inputs) != 1:
        raise UnsupportedModel(f"the model must have exactly one non-constant input, found {len(real_inputs)}")
    if len(g.output) != 1:
        raise UnsupportedModel(f"the model must have exactly one output, found {len(g.output)}")
    inp = real_inputs[0]
    dims = []
    for d in inp.type.tensor_type.shape.dim:
        dims.append(d.dim_value if d.HasField("dim_value") else 1)
    if len(dims) < 2 or dims[0] != 1:
        raise UnsupportedModel(f"input '{inp.name}' must have a batch dimension of 1, shape {dims}")
    if any(d <= 0 for d in dims[1:]):
        raise UnsupportedModel(f"input '{inp.name}' has a non-fixed shape {dims}")
    b = _Builder()
    b.shapes[inp.name] = [int(d) for d in dims[1:]]
    alias: Dict[str, str] = {}
    uses: Dict[str, int] = {}
    for node in g.node:
        for i in node.input:
            uses[i] = uses.get(i, 0) + 1
    graph_out = g.output[0].name
    post = "none"
    post_axis = None
    final_value: Optional[str] = None

    def act(node, name: str) -> str:
        name = alias.get(name, name)
        if name not in b.shapes:
            if name in consts:
                _fail(node, f"operand '{name}' is a constant where an activation is expected")
            _fail(node, f"operand '{name}' is not produced by an earlier node")
        return name

    for node in g.node:
        op = node.op_type
        a = _attrs(node)
        name = node.name or f"{op}_{len(b.nodes)}"
        if node.domain not in ("", "ai.onnx"):
            _fail(node, f"operator domain '{node.domain}' is not supported")
        if op not in SUPPORTED:
            _fail(node, "operator not supported by hush (supported: " + ", ".join(SUPPORTED) + ")")
        if final_value is not None:
            _fail(node, "Softmax/ArgMax must be the last node of the graph")
        out = node.output[0]
        if op == "Constant":
            consts[out] = nh.to_array(a["value"]) if "value" in a else _fail(node, "only tensor constants")
            continue
        if op in ("Identity", "Dropout"):
            src = node.input[0]
            if src in consts:
                consts[out] = consts[src]
            else:
                alias[out] = act(node, src)
            continue
        if op == "Conv":
            x = act(node, node.input[0])
            if node.input[1] not in consts:
                _fail(node, "the weight must be a constant")
            w = consts[node.input[1]].astype(np.float64)
            if w.ndim != 4:
                _fail(node, "only 2-D convolutions are supported")
            if a.get("group", 1) != 1:
                _fail(node, f"groups = {a.get('group')} (only 1 is supported)")
            if any(d != 1 for d in a.get("dilations", [1, 1])):
                _fail(node, f"dilations {a.get('dilations')} (only 1 is supported)")
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
                _fail(node, f"auto_pad {a.get('auto_pad')} is not supported (give explicit pads)")
            c, h, wd = b.shapes[x] if len(b.shapes[x]) == 3 else _fail(node, f"input shape {b.shapes[x]} is not C×H×W")
            co, ci, kh, kw = w.shape
            if ci != c:
                _fail(node, f"weight has {ci} input channels, activation has {c}")
            st = list(a.get("strides", [1, 1]))
            pd = list(a.get("pads", [0, 0, 0, 0]))
            bias = None
            if len(node.input) > 2 and node.input[2]:
                if node.input[2] not in consts:
                    _fail(node, "the bias must be a constant")
                bias = consts[node.input[2]].astype(np.float64).reshape(-1)
            oh = _pool_out(h, kh, st[0], pd[0], pd[2])
            ow = _pool_out(wd, kw, st[1], pd[1], pd[3])
            if oh <= 0 or ow <= 0:
                _fail(node, "kernel larger than the padded input")
            nd = {"op": "conv", "name": name, "inputs": [x], "output": out, "weight": b.tensor(name + ".weight", w),
                  "stride": st, "pads": pd}
            nd["bias"] = b.tensor(name + ".bias", bias if bias is not None else np.zeros(co))
            b.add(nd, [co, oh, ow])
            continue
        if op in ("Gemm", "MatMul"):
            x = act(node, node.input[0])
            if node.input[1] not in consts:
                _fail(node, "the second operand must be a constant (weights)")
            w = consts[node.input[1]].astype(np.float64)
            xs = b.shapes[x]
            if len(xs) != 1:
                _fail(node, f"the activation must be a vector (shape {xs}); insert Flatten")
            if op == "Gemm":
                if a.get("transA", 0):
                    _fail(node, "transA = 1 is not supported")
                if w.ndim != 2:
                    _fail(node, "B must be a matrix")
                wm = w if a.get("transB", 0) else w.T  # -> [out, in]
                wm = wm * a.get("alpha", 1.0)
                bias = np.zeros(wm.shape[0])
                if len(node.input) > 2 and node.input[2]:
                    if node.input[2] not in consts:
                        _fail(node, "C must be a constant")
                    bias = np.broadcast_to(consts[node.input[2]].astype(np.float64).reshape(-1) * a.get("beta", 1.0),
                                           (wm.shape[0],)).copy()
            else:
                if w.ndim != 2:
                    _fail(node, "the constant operand must be a matrix")
                wm = w.T
                bias = np.zeros(wm.shape[0])
            if wm.shape[1] != xs[0]:
                _fail(node, f"weight expects {wm.shape[1]} inputs, activation has {xs[0]}")
            nd = {"op": "dense", "name": name, "inputs": [x], "output": out,
                  "weight": b.tensor(name + ".weight", wm), "bias": b.tensor(name + ".bias", bias)}
            b.add(nd, [wm.shape[0]])
            continue
        if op == "BatchNormalization":
            x = act(node, node.input[0])
            for i in node.input[1:5]:
                if i not in consts:
                    _fail(node, "scale, bias, mean and variance must be constants")
            gam, bet, mean, var = (consts[i].astype(np.float64).reshape(-1) for i in node.input[1:5])
            eps = a.get("epsilon", 1e-5)
            s = gam / np.sqrt(var + eps)
            t = bet - mean * s
            prod = b.producer.get(x)
            xs = b.shapes[x]
            if xs[0] != len(s):
                _fail(node, f"{len(s)} channels, activation has {xs[0]}")
            if prod is not None and prod["op"] in ("conv", "dense") and uses.get(x, 0) == 1 and x != graph_out:
                wi, bi = prod["weight"], prod["bias"]
                w = b.tensor_value(wi).astype(np.float64)
                bb = b.tensor_value(bi).astype(np.float64)
                b.replace_tensor(wi, w * s.reshape((-1,) + (1,) * (w.ndim - 1)))
                b.replace_tensor(bi, bb * s + t)
                alias[out] = x
                prod["folded"] = prod.get("folded", []) + [name]
                continue
            nd = {"op": "scale", "name": name, "inputs": [x], "output": out,
                  "weight": b.tensor(name + ".scale", s), "bias": b.tensor(name + ".shift", t)}
            b.add(nd, xs)
            continue
        if op == "Add":
            l, r = node.input[0], node.input[1]
            lc, rc = l in consts, r in consts
            if lc and rc:
                consts[out] = consts[l] + consts[r]
                continue
            if not lc and not rc:
                x, y = act(node, l), act(node, r)
                if b.shapes[x] != b.shapes[y]:
                    _fail(node, f"operand shapes {b.shapes[x]} and {b.shapes[y]} differ (broadcasting is not supported)")
                b.add({"op": "add", "name": name, "inputs": [x, y], "output": out}, b.shapes[x])
                continue
            x = act(node, r if lc else l)
            c = consts[l if lc else r].astype(np.float64)
            xs = b.shapes[x]
            try:
                full = np.broadcast_to(c, [1] + xs).reshape(xs)
            except ValueError:
                _fail(node, f"constant of shape {list(c.shape)} does not broadcast to {xs}")
            prod = b.producer.get(x)
            if prod is not None and prod["op"] in ("conv", "dense") and uses.get(x, 0) == 1 and x != graph_out:
                per_ch = full.reshape(xs[0], -1)
                if np.all(per_ch == per_ch[:, :1]):
                    bi = prod["bias"]
                    b.replace_tensor(bi, b.tensor_value(bi).astype(np.float64) + per_ch[:, 0])
                    alias[out] = x
                    continue
            b.add({"op": "add_const", "name": name, "inputs": [x], "output": out,
                   "weight": b.tensor(name + ".const", full)}, xs)
            continue
        if op == "Relu":
            x = act(node, node.input[0])
            b.add({"op": "relu", "name": name, "inputs": [x], "output": out}, b.shapes[x])
            continue
        if op in ("MaxPool", "AveragePool"):
            x = act(node, node.input[0])
            xs = b.shapes[x]
            if len(xs) != 3:
                _fail(node, f"input shape {xs} is not C×H×W")
            if len(node.output) > 1 and node.output[1]:
                _fail(node, "the Indices output is not supported")
            k = list(a["kernel_shape"])
            if len(k) != 2:
                _fail(node, "only 2-D pooling is supported")
            st = list(a.get("strides", [1, 1]))
            pd = list(a.get("pads", [0, 0, 0, 0]))
            if a.get("ceil_mode", 0):
                _fail(node, "ceil_mode = 1 is not supported")
            if any(d != 1 for d in a.get("dilations", [1, 1])):
                _fail(node, "dilations are not supported")
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
                _fail(node, f"auto_pad {a.get('auto_pad')} is not supported (give explicit pads)")
            if any(p >= kk for p, kk in zip(pd, k + k)):
                _fail(node, "padding must be smaller than the kernel")
            oh = _pool_out(xs[1], k[0], st[0], pd[0], pd[2])
            ow = _pool_out(xs[2], k[1], st[1], pd[1], pd[3])
            if oh <= 0 or ow <= 0:
                _fail(node, "kernel larger than the padded input")
            nd = {"op": "maxpool" if op == "MaxPool" else "avgpool", "name": name, "inputs": [x], "output": out,
                  "kernel": k, "stride": st, "pads": pd}
            if op == "AveragePool":
                nd["count_include_pad"] = bool(a.get("count_include_pad", 0))
            b.add(nd, [xs[0], oh, ow])
            continue
        if op == "GlobalAveragePool":
            x = act(node, node.input[0])
            xs = b.shapes[x]
            if len(xs) != 3:
                _fail(node, f"input shape {xs} is not C×H×W")
            b.add({"op": "avgpool", "name": name, "inputs": [x], "output": out, "kernel": [xs[1], xs[2]],
                   "stride": [1, 1], "pads": [0, 0, 0, 0], "count_include_pad": True}, [xs[0], 1, 1])
            continue
        if op in ("Flatten", "Reshape"):
            x = act(node, node.input[0])
            xs = b.shapes[x]
            n = int(np.prod(xs))
            if op == "Flatten":
                ax = a.get("axis", 1)
                if ax not in (0, 1):
                    _fail(node, f"axis {ax} is not supported (only 1: flatten everything after the batch)")
                shape = [n]
            else:
                if len(node.input) < 2 or node.input[1] not in consts:
                    _fail(node, "the target shape must be a constant")
                tgt = [int(v) for v in consts[node.input[1]].reshape(-1)]
                full = [1] + xs
                res = []
                for i, d in enumerate(tgt):
                    if d == 0 and not a.get("allowzero", 0):
                        d = full[i] if i < len(full) else _fail(node, "0 in the shape beyond the input rank")
                    res.append(d)
                if res.count(-1) > 1:
                    _fail(node, "more than one -1 in the target shape")
                if -1 in res:
                    known = int(np.prod([d for d in res if d != -1]))
                    if known == 0 or n % known:
                        _fail(node, f"cannot reshape {xs} to {tgt}")
                    res[res.index(-1)] = n // known
                if not res or res[0] != 1:
                    _fail(node, f"target shape {tgt} changes the batch dimension")
                shape = res[1:]
                if int(np.prod(shape)) != n:
                    _fail(node, f"cannot reshape {xs} ({n} elements) to {tgt}")
            b.add({"op": "reshape", "name": name, "inputs": [x], "output": out}, shape)
            continue
        if op == "Concat":
            xs_names = []
            for i in node.input:
                if i in consts:
                    _fail(node, "constant operands are not supported")
                xs_names.append(act(node, i))
            shapes = [b.shapes[x] for x in xs_names]
            rank = len(shapes[0]) + 1
            ax = a["axis"]
            if ax < 0:
                ax += rank
            if ax == 0 or ax >= rank:
                _fail(node, f"axis {a['axis']} is not supported (the batch axis or out of range)")
            ax -= 1
            for s in shapes:
                if len(s) != len(shapes[0]) or any(s[d] != shapes[0][d] for d in range(len(s)) if d != ax):
                    _fail(node, f"operand shapes {shapes} do not agree outside axis {a['axis']}")
            shape = list(shapes[0])
            shape[ax] = sum(s[ax] for s in shapes)
            b.add({"op": "concat", "name": name, "inputs": xs_names, "output": out, "axis": ax}, shape)
            continue
        if op in ("Softmax", "ArgMax"):
            if out != graph_out:
                _fail(node, f"{op} is only supported as the final node (on the client's revealed logits)")
            x = act(node, node.input[0])
            xs = b.shapes[x]
            ax = a.get("axis", -1 if op == "Softmax" else 0)
            if ax < 0:
                ax += len(xs) + 1
            if len(xs) != 1 or ax != 1:
                _fail(node, f"axis {a.get('axis')} on shape {[1] + xs} is not supported (only axis 1 of a vector)")
            if op == "ArgMax" and (a.get("select_last_index", 0)):
                _fail(node, "select_last_index is not supported")
            post = op.lower()
            post_axis = a.get("keepdims", 1) if op == "ArgMax" else None
            final_value = x
            continue
        _fail(node, "operator not supported by hush")  # pragma: no cover - SUPPORTED covers the list

    logits = final_value if final_value is not None else alias.get(graph_out, graph_out)
    if logits not in b.shapes or logits == inp.name:
        raise UnsupportedModel(f"graph output '{graph_out}' is not computed by a supported node")
    header = {
        "format": "hush-model",
        "version": FORMAT_VERSION,
        "name": g.name or "model",
        "input": {"name": inp.name, "shape": b.shapes[inp.name]},
        "output": {"name": logits, "shape": b.shapes[logits]},
        "postprocess": post,
        "nodes": b.nodes,
        "tensors": b.tensors,
    }
    if post == "argmax":
        header["argmax_keepdims"] = int(post_axis or 0)
    hj = json.dumps(header, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(hj)) + hj + b"".join(b.data)


def import_onnx(src, dst: str) -> dict:
    """Converts an ONNX model (a path or an ``onnx.ModelProto``) into the
    hush model file ``dst``; returns the JSON header."""
    import onnx

    if isinstance(src, (str, bytes)) or hasattr(src, "__fspath__"):
        try:
            model = onnx.load(src)
        except Exception as e:
            raise UnsupportedModel(f"cannot parse ONNX file {src!r}: {e}") from e
    else:
        model = src
    data = convert(model)
    with open(dst, "wb") as f:
        f.write(data)
    return read_header(data)


def read_header(data: bytes) -> dict:
    """The JSON header of a .hushm file's bytes."""
    if data[:8] != MAGIC or len(data) < 12:
        raise ValueError("not a hush model file (bad magic)")
    (h,) = struct.unpack("<I", data[8:12])
    return json.loads(data[12:12 + h])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m hush.onnx_import IN.onnx OUT.hushm", file=sys.stderr)
        return 2
    try:
        h = import_onnx(argv[0], argv[1])
    except UnsupportedModel as e:
        print(f"hush.onnx_import: {e}", file=sys.stderr)
        return 1
    print(f"{argv[1]}: {len(h['nodes'])} layers, input {h['input']['shape']}, output {h['output']['shape']}"
          f", postprocess {h['postprocess']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
