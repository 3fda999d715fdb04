"""The benchmark model builders produce valid ONNX that hush imports, with
the expected shapes, and onnxruntime agrees with hush's float executor on
the small ones."""

import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from hush import models  # noqa: E402
from hush.onnx_import import import_onnx  # noqa: E402

from _hush_bin import hush_inference_bin  # noqa: E402

BIN = hush_inference_bin()


@pytest.mark.parametrize("name,in_shape,n_out", [("minionn_mnist", [1, 28, 28], 10), ("minionn_cifar", [3, 32, 32], 10),
                                                  ("squeezenet", [3, 224, 224], 1000), ("resnet50", [3, 224, 224], 1000)])
def test_builder_imports(name, in_shape, n_out, tmp_path):
    m = models.BUILDERS[name]()
    h = import_onnx(m, str(tmp_path / "m.hushm"))
    assert h["input"]["shape"] == in_shape and h["output"]["shape"] == [n_out]
    if name == "resnet50":  # every BatchNormalization folded into its convolution
        assert not any(n["op"] == "scale" for n in h["nodes"])
        assert sum(n["op"] == "conv" for n in h["nodes"]) == 53


@pytest.mark.skipif(BIN is None, reason="hush-inference binary not built")
@pytest.mark.parametrize("name", ["minionn_mnist", "minionn_cifar"])
def test_small_benchmarks_float_matches_onnxruntime(name, tmp_path):
    m = models.BUILDERS[name]()
    import_onnx(m, str(tmp_path / "m.hushm"))
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0].reshape(-1)
    for exe, tol in (("float", 1e-4), ("reference", 0.05)):
        r = subprocess.run([BIN, "run", "--model", str(tmp_path / "m.hushm"), "--input", str(tmp_path / "x.npy"), "--out", str(tmp_path / "y.npy"),
                            "--exec", exe], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(np.load(tmp_path / "y.npy").reshape(-1), want, rtol=tol, atol=tol)
