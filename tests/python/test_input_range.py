"""A model file may declare its input range and the raw scale of 8-bit data
(issue 32): `hush import --input-range 0,1 --raw-scale 1/255`. Clients then
normalise raw pixels (with a note) or, without a raw scale, refuse them with
a hint — in the CLI (`hush run`) and in Python (`hush.run`)."""

import os
import subprocess

import numpy as np
import pytest

from _hush_bin import ROOT, hush_inference_bin

BIN = hush_inference_bin()
pytestmark = pytest.mark.skipif(BIN is None, reason="hush binary not built")
ONNX = os.path.join(ROOT, "models", "mnist_cnn.onnx")
SAMPLE = os.path.join(ROOT, "models", "samples", "mnist_8001_label9.npy")


def hush(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)


def test_declared_range_normalises_raw_pixels_or_refuses_them(tmp_path):
    x = np.load(SAMPLE).astype(np.float64)
    assert 0.0 <= x.min() and x.max() <= 1.0
    raw = np.round(x * 255.0)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "raw.npy", raw)
    ranged, strict = tmp_path / "ranged.hushm", tmp_path / "strict.hushm"
    r = hush("import", ONNX, str(ranged), "--input-range", "0,1", "--raw-scale", repr(1 / 255))
    assert r.returncode == 0 and "in [0, 1]" in r.stdout, r.stderr
    r = hush("import", ONNX, str(strict), "--input-range", "0,1")
    assert r.returncode == 0, r.stderr
    bad = hush("import", ONNX, str(tmp_path / "bad.hushm"), "--input-range", "1")
    assert bad.returncode != 0 and "LO,HI" in bad.stderr

    def run(model, inp):
        return hush("run", "--model", str(model), "--input", str(tmp_path / inp), "--out", str(tmp_path / "y.npy"), "--transport", "mem")

    ok = run(ranged, "x.npy")
    assert ok.returncode == 0, ok.stderr
    want = int(np.argmax(np.load(tmp_path / "y.npy")))
    assert want == 9
    r = run(ranged, "raw.npy")
    assert r.returncode == 0 and "raw scale" in r.stderr, r.stderr
    assert int(np.argmax(np.load(tmp_path / "y.npy"))) == want
    r = run(strict, "raw.npy")
    assert r.returncode != 0 and "outside the model's declared input range" in r.stderr and "divide by 255" in r.stderr, r.stderr

    import hush as h

    y = h.run(str(ranged), raw)
    assert int(np.argmax(y)) == want
    with pytest.raises(ValueError, match="divide by 255"):
        h.run(str(strict), raw)
