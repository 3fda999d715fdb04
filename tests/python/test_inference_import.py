"""ONNX import: every supported operator, a residual net and a Concat net,
checked against onnxruntime (float) and through hush's executors:

* ``--exec float`` (f64) must match onnxruntime to 1e-4 (float32 rounding);
* ``--exec reference`` (fixed point, ℓ = 37, 12 fraction bits) must match to
  0.02 absolute: a few truncations of 2^-12 each plus weight rounding;
* ``--exec secure`` (fss family) must equal the reference exactly.

Unsupported operators, malformed files and wrong input shapes must give
clear errors.
"""

import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hush.onnx_import import UnsupportedModel, import_onnx  # noqa: E402

from _hush_bin import hush_inference_bin  # noqa: E402

BIN = hush_inference_bin()
needs_bin = pytest.mark.skipif(BIN is None, reason="hush-inference binary not built (run scripts/setup.sh)")
RNG = np.random.default_rng(7)


def W(*shape, scale=None):
    fan = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    s = scale if scale is not None else 1.0 / np.sqrt(fan)
    return (RNG.uniform(-1, 1, shape) * s).astype(np.float32)


def make(nodes, inits, in_shape, out_name="y", out_type=TensorProto.FLOAT):
    g = helper.make_graph(
        nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info(out_name, out_type, ["n", "m"])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def run_bin(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


def hush_exec(tmp, m, x, exe, proto="fss"):
    onnx.save(m, tmp / "m.onnx")
    import_onnx(str(tmp / "m.onnx"), str(tmp / "m.hushm"))
    np.save(tmp / "x.npy", x)
    r = run_bin("run", "--model", str(tmp / "m.hushm"), "--input", str(tmp / "x.npy"), "--out", str(tmp / "y.npy"),
                "--exec", exe, "--proto", proto, "--transport", "mem")
    assert r.returncode == 0, r.stderr
    return np.load(tmp / "y.npy").reshape(-1)


def bn(name, c):
    return {f"{name}.s": (1 + 0.3 * RNG.standard_normal(c)).astype(np.float32),
            f"{name}.b": (0.1 * RNG.standard_normal(c)).astype(np.float32),
            f"{name}.m": (0.1 * RNG.standard_normal(c)).astype(np.float32),
            f"{name}.v": RNG.uniform(0.5, 1.5, c).astype(np.float32)}


def bn_node(name, x, y):
    return helper.make_node("BatchNormalization", [x, f"{name}.s", f"{name}.b", f"{name}.m", f"{name}.v"], [y], name=name)


def cases():
    c = {}
    c["conv"] = (make([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                      {"w": W(4, 2, 3, 3), "b": W(4, scale=0.1)}, [1, 2, 7, 7]), [1, 2, 7, 7])
    c["conv+bn(folded)"] = (make([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 0, 1, 0]), bn_node("bn", "c", "y")],
                                 {"w": W(3, 2, 3, 3), **bn("bn", 3)}, [1, 2, 5, 6]), [1, 2, 5, 6])
    c["gemm"] = (make([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1, alpha=0.5, beta=2.0)],
                      {"w": W(5, 12), "b": W(5, scale=0.1)}, [1, 12]), [1, 12])
    c["matmul+add(bias)"] = (make([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["y"], name="bias")],
                                  {"w": W(12, 6), "b": W(6, scale=0.1)}, [1, 12]), [1, 12])
    c["add(residual)+relu"] = (make([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
                                     helper.make_node("Add", ["c", "x"], ["s"], name="res"), helper.make_node("Relu", ["s"], ["y"], name="relu")],
                                    {"w": W(2, 2, 1, 1)}, [1, 2, 4, 4]), [1, 2, 4, 4])
    c["add(const)"] = (make([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "k"], ["y"], name="addk")],
                            {"k": W(2, 1, 1, scale=1.0)}, [1, 2, 3, 3]), [1, 2, 3, 3])
    c["maxpool"] = (make([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])], {}, [1, 2, 7, 7]), [1, 2, 7, 7])
    c["avgpool"] = (make([helper.make_node("AveragePool", ["x"], ["a"], name="ap", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                          helper.make_node("AveragePool", ["a"], ["y"], name="ap2", kernel_shape=[2, 2], pads=[1, 1, 0, 0], count_include_pad=1)],
                         {}, [1, 2, 6, 6]), [1, 2, 6, 6])
    c["globalavgpool+flatten"] = (make([helper.make_node("GlobalAveragePool", ["x"], ["g"], name="gap"), helper.make_node("Flatten", ["g"], ["y"], name="flat")],
                                       {}, [1, 3, 5, 5]), [1, 3, 5, 5])
    c["bn(standalone)"] = (make([helper.make_node("Relu", ["x"], ["r"], name="relu"), bn_node("bn", "r", "y")], bn("bn", 2), [1, 2, 3, 3]), [1, 2, 3, 3])
    c["reshape"] = (make([helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"), helper.make_node("Relu", ["r"], ["y"], name="relu")],
                         {"shape": np.array([1, -1, 6], dtype=np.int64)}, [1, 2, 3, 3]), [1, 2, 3, 3])
    c["concat"] = (make([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Concat", ["x", "r"], ["y"], name="cat", axis=1)],
                        {}, [1, 2, 3, 3]), [1, 2, 3, 3])
    c["softmax(final)"] = (make([helper.make_node("Gemm", ["x", "w"], ["l"], name="fc", transB=1), helper.make_node("Softmax", ["l"], ["y"], name="sm", axis=1)],
                                {"w": W(4, 8)}, [1, 8]), [1, 8])
    c["argmax(final)"] = (make([helper.make_node("Gemm", ["x", "w"], ["l"], name="fc", transB=1), helper.make_node("ArgMax", ["l"], ["y"], name="am", axis=1)],
                               {"w": W(4, 8)}, [1, 8], out_type=TensorProto.INT64), [1, 8])
    # a small residual network and a small Concat (fire-module) network
    c["residual-net"] = (make([
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="c0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]), bn_node("bn0", "c0", "n0"),
        helper.make_node("Relu", ["n0"], ["r0"], name="r0"),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], name="c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]), bn_node("bn1", "c1", "n1"),
        helper.make_node("Add", ["n1", "r0"], ["s"], name="skip"), helper.make_node("Relu", ["s"], ["r1"], name="r1"),
        helper.make_node("MaxPool", ["r1"], ["p"], name="mp", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"), helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)],
        {"w0": W(4, 3, 3, 3), "b0": W(4, scale=0.1), **bn("bn0", 4), "w1": W(4, 4, 3, 3), **bn("bn1", 4), "wf": W(5, 4), "bf": W(5, scale=0.1)},
        [1, 3, 8, 8]), [1, 3, 8, 8])
    c["concat-net"] = (make([
        helper.make_node("Conv", ["x", "w0"], ["c0"], name="c0", kernel_shape=[3, 3], strides=[2, 2]), helper.make_node("Relu", ["c0"], ["r0"], name="r0"),
        helper.make_node("Conv", ["r0", "ws"], ["sq"], name="squeeze", kernel_shape=[1, 1]), helper.make_node("Relu", ["sq"], ["rs"], name="rs"),
        helper.make_node("Conv", ["rs", "we1"], ["e1"], name="e1", kernel_shape=[1, 1]), helper.make_node("Relu", ["e1"], ["re1"], name="re1"),
        helper.make_node("Conv", ["rs", "we3"], ["e3"], name="e3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["e3"], ["re3"], name="re3"),
        helper.make_node("Concat", ["re1", "re3"], ["cat"], name="cat", axis=1),
        helper.make_node("AveragePool", ["cat"], ["ap"], name="ap", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["ap"], ["f"], name="flat"), helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1)],
        {"w0": W(6, 3, 3, 3), "ws": W(3, 6, 1, 1), "we1": W(4, 3, 1, 1), "we3": W(4, 3, 3, 3), "wf": W(3, 32)}, [1, 3, 9, 9]), [1, 3, 9, 9])
    return c


CASES = cases()


@needs_bin
@pytest.mark.parametrize("name", list(CASES))
def test_operator_against_onnxruntime_and_reference(name, tmp_path):
    m, shape = CASES[name]
    x = RNG.uniform(-2, 2, shape).astype(np.float32)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = s.run(None, {"x": x})[0].reshape(-1)
    flt = hush_exec(tmp_path, m, x, "float")
    ref = hush_exec(tmp_path, m, x, "reference")
    sec = hush_exec(tmp_path, m, x, "secure")
    np.testing.assert_array_equal(sec, ref)  # secure == plaintext fixed-point reference, exactly
    if name.startswith("argmax"):
        assert int(np.argmax(flt)) == int(want[0]) == int(np.argmax(ref))
        return
    if name.startswith("softmax"):  # hush reveals the logits; the client applies Softmax in the clear
        flt, ref = (np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (flt, ref))
    np.testing.assert_allclose(flt, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ref, want, atol=0.02)


@needs_bin
def test_tami_family_within_faithful_truncation_bound(tmp_path):
    m, shape = CASES["residual-net"]
    x = RNG.uniform(-2, 2, shape).astype(np.float32)
    ref = hush_exec(tmp_path, m, x, "reference")
    sec = hush_exec(tmp_path, m, x, "secure", proto="tami")
    assert np.abs(sec - ref).max() <= 16 / 4096  # ≤ 1 ulp per truncation, propagated through 4 layers


def test_unsupported_operator_named(tmp_path):
    m = make([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Sigmoid", ["r"], ["y"], name="my_sigmoid")], {}, [1, 4])
    with pytest.raises(UnsupportedModel, match="my_sigmoid.*Sigmoid"):
        import_onnx(m, str(tmp_path / "m.hushm"))
    m = make([helper.make_node("Conv", ["x", "w"], ["y"], name="grouped", kernel_shape=[1, 1], group=2)], {"w": W(2, 1, 1, 1)}, [1, 2, 3, 3])
    with pytest.raises(UnsupportedModel, match="grouped.*groups"):
        import_onnx(m, str(tmp_path / "m.hushm"))


def test_malformed_onnx_file(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\x08\x07garbage that is not a model" * 3)
    with pytest.raises(UnsupportedModel):
        import_onnx(str(p), str(tmp_path / "m.hushm"))


@needs_bin
def test_malformed_model_and_wrong_shape_errors(tmp_path):
    (tmp_path / "bad.hushm").write_bytes(b"HUSHMDL1" + b"\xff\xff\x00\x00{}")
    np.save(tmp_path / "x.npy", np.zeros((1, 4), np.float32))
    r = run_bin("run", "--model", str(tmp_path / "bad.hushm"), "--input", str(tmp_path / "x.npy"), "--out", str(tmp_path / "y.npy"))
    assert r.returncode != 0 and "model" in r.stderr
    m, _ = CASES["gemm"]
    onnx.save(m, tmp_path / "m.onnx")
    import_onnx(str(tmp_path / "m.onnx"), str(tmp_path / "m.hushm"))
    np.save(tmp_path / "x.npy", np.zeros((1, 13), np.float32))
    r = run_bin("run", "--model", str(tmp_path / "m.hushm"), "--input", str(tmp_path / "x.npy"), "--out", str(tmp_path / "y.npy"))
    assert r.returncode != 0 and "shape [1, 13]" in r.stderr and "[12]" in r.stderr


def test_cli_entry_point(tmp_path):
    m, _ = CASES["conv"]
    onnx.save(m, tmp_path / "m.onnx")
    import sys
    r = subprocess.run([sys.executable, "-m", "hush.onnx_import", str(tmp_path / "m.onnx"), str(tmp_path / "m.hushm")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.hushm").read_bytes()[:8] == b"HUSHMDL1"
