"""Train the bundled MNIST CNN (development only; needs ../shared/data/mnist).

Only the MNIST *test* split is available here, so the model is trained on
the first 8,000 test images and evaluated on the last 2,000 (never seen in
training). Training is plain numpy (mini-batch SGD with momentum, a few
minutes on 2 cores). Architecture (all supported by hush):

    input 1x28x28 (pixels / 255)
    Conv 8x5x5 stride 2          -> 8x12x12, ReLU
    Conv 16x3x3 stride 2         -> 16x5x5,  ReLU
    Flatten -> Gemm 400x10       -> logits; final ArgMax on the client's revealed logits

Writes, under models/:
    mnist_cnn.onnx         the trained model (ONNX, opset 13)
    mnist_cnn.hushm        the same, converted by hush.onnx_import
    mnist_heldout.npz      the 2,000 held-out images (uint8) and labels
    samples/mnist_<i>_label<d>.npy   a few held-out images as float32 1x1x28x28
    mnist_cnn.json         how it was trained and the measured accuracies

Run from the repository root: .venv/bin/python scripts/train_mnist.py
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "mnist")
OUT = os.path.join(ROOT, "models")


def load_idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        b = f.read()
    magic = int.from_bytes(b[:4], "big")
    nd = magic & 0xFF
    dims = [int.from_bytes(b[4 + 4 * i: 8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def im2col(x, k, s):
    # x: N,C,H,W -> N, OH*OW, C*k*k
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    cols = np.empty((n, c, k, k, oh, ow), dtype=x.dtype)
    for ky in range(k):
        for kx in range(k):
            cols[:, :, ky, kx] = x[:, :, ky: ky + s * oh: s, kx: kx + s * ow: s]
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(n, oh * ow, c * k * k), oh, ow


def col2im(dcols, shape, k, s, oh, ow):
    n, c, h, w = shape
    d = dcols.reshape(n, oh, ow, c, k, k).transpose(0, 3, 4, 5, 1, 2)
    dx = np.zeros(shape, dtype=dcols.dtype)
    for ky in range(k):
        for kx in range(k):
            dx[:, :, ky: ky + s * oh: s, kx: kx + s * ow: s] += d[:, :, ky, kx]
    return dx


class Net:
    def __init__(self, rng):
        def he(shape, fan_in):
            return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

        self.w1 = he((8, 1, 5, 5), 25)
        self.b1 = np.zeros(8, np.float32)
        self.w2 = he((16, 8, 3, 3), 72)
        self.b2 = np.zeros(16, np.float32)
        self.w3 = he((10, 400), 400)
        self.b3 = np.zeros(10, np.float32)

    def params(self):
        return [self.w1, self.b1, self.w2, self.b2, self.w3, self.b3]

    def forward(self, x):
        n = x.shape[0]
        c1, oh1, ow1 = im2col(x, 5, 2)
        z1 = c1 @ self.w1.reshape(8, -1).T + self.b1  # n, 144, 8
        a1 = np.maximum(z1, 0).transpose(0, 2, 1).reshape(n, 8, oh1, ow1)
        c2, oh2, ow2 = im2col(a1, 3, 2)
        z2 = c2 @ self.w2.reshape(16, -1).T + self.b2  # n, 25, 16
        a2 = np.maximum(z2, 0).transpose(0, 2, 1).reshape(n, 400)
        logits = a2 @ self.w3.T + self.b3
        self.cache = (x, c1, z1, a1, c2, z2, a2, oh1, ow1, oh2, ow2)
        return logits

    def backward(self, dlogits):
        x, c1, z1, a1, c2, z2, a2, oh1, ow1, oh2, ow2 = self.cache
        n = x.shape[0]
        gw3 = dlogits.T @ a2
        gb3 = dlogits.sum(0)
        da2 = (dlogits @ self.w3).reshape(n, 16, oh2 * ow2).transpose(0, 2, 1)
        dz2 = da2 * (z2 > 0)
        gw2 = np.einsum("npo,npk->ok", dz2, c2).reshape(self.w2.shape)
        gb2 = dz2.sum((0, 1))
        dc2 = dz2 @ self.w2.reshape(16, -1)
        da1 = col2im(dc2, a1.shape, 3, 2, oh2, ow2)
        dz1 = da1.reshape(n, 8, oh1 * ow1).transpose(0, 2, 1) * (z1 > 0)
        gw1 = np.einsum("npo,npk->ok", dz1, c1).reshape(self.w1.shape)
        gb1 = dz1.sum((0, 1))
        return [gw1, gb1, gw2, gb2, gw3, gb3]


def onnx_model(net):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [
        numpy_helper.from_array(net.w1, "conv1.weight"), numpy_helper.from_array(net.b1, "conv1.bias"),
        numpy_helper.from_array(net.w2, "conv2.weight"), numpy_helper.from_array(net.b2, "conv2.bias"),
        numpy_helper.from_array(net.w3, "fc.weight"), numpy_helper.from_array(net.b3, "fc.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", kernel_shape=[5, 5], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        helper.make_node("ArgMax", ["logits"], ["label"], name="argmax", axis=1, keepdims=1),
    ]
    g = helper.make_graph(
        nodes, "mnist_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [1, 1])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="hush scripts/train_mnist.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    if not os.path.isdir(DATA):
        print(f"train_mnist: {DATA} not found (development data only)", file=sys.stderr)
        return 1
    images = load_idx("t10k-images-idx3-ubyte.gz")
    labels = load_idx("t10k-labels-idx1-ubyte.gz").astype(np.int64)
    assert images.shape == (10000, 28, 28)
    xtr = images[:8000].astype(np.float32)[:, None] / 255.0
    ytr = labels[:8000]
    xte_u8 = images[8000:]
    yte = labels[8000:]
    xte = xte_u8.astype(np.float32)[:, None] / 255.0
    rng = np.random.default_rng(2024)
    net = Net(rng)
    vel = [np.zeros_like(p) for p in net.params()]
    epochs, bs, lr, mom, wd = 12, 64, 0.05, 0.9, 1e-4
    t0 = time.time()
    for ep in range(epochs):
        perm = rng.permutation(len(xtr))
        cur_lr = lr * (0.5 * (1 + np.cos(np.pi * ep / epochs)))
        loss_sum = 0.0
        for i in range(0, len(perm), bs):
            idx = perm[i: i + bs]
            logits = net.forward(xtr[idx])
            logits = logits - logits.max(1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(1, keepdims=True)
            loss_sum += -np.log(p[np.arange(len(idx)), ytr[idx]] + 1e-12).sum()
            d = p
            d[np.arange(len(idx)), ytr[idx]] -= 1
            d /= len(idx)
            grads = net.backward(d.astype(np.float32))
            for prm, g, v in zip(net.params(), grads, vel):
                v *= mom
                v -= cur_lr * (g + wd * prm)
                prm += v
        acc = (net.forward(xte).argmax(1) == yte).mean()
        print(f"epoch {ep + 1}/{epochs}: loss {loss_sum / len(xtr):.4f}, held-out accuracy {acc:.4f} ({time.time() - t0:.0f} s)")
    float_pred = net.forward(xte).argmax(1)
    float_acc = float((float_pred == yte).mean())
    os.makedirs(os.path.join(OUT, "samples"), exist_ok=True)
    import onnx

    sys.path.insert(0, os.path.join(ROOT, "python"))
    from hush.onnx_import import import_onnx

    m = onnx_model(net)
    onnx.save(m, os.path.join(OUT, "mnist_cnn.onnx"))
    import_onnx(os.path.join(OUT, "mnist_cnn.onnx"), os.path.join(OUT, "mnist_cnn.hushm"))
    np.savez_compressed(os.path.join(OUT, "mnist_heldout.npz"), images=xte_u8, labels=yte.astype(np.uint8))
    for f in os.listdir(os.path.join(OUT, "samples")):
        os.remove(os.path.join(OUT, "samples", f))
    for i in range(5):
        np.save(os.path.join(OUT, "samples", f"mnist_{8000 + i}_label{int(yte[i])}.npy"), xte[i: i + 1])
    ort_acc = None
    try:
        import onnxruntime as ort

        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        preds = np.array([int(s.run(None, {"input": xte[i: i + 1]})[0].reshape(-1)[0]) for i in range(len(xte))])
        ort_acc = float((preds == yte).mean())
    except ImportError:
        pass
    info = {
        "model": "mnist_cnn",
        "architecture": "Conv 8x5x5 s2, ReLU, Conv 16x3x3 s2, ReLU, Flatten, Gemm 400x10, ArgMax (on the client's revealed logits)",
        "training": f"numpy SGD (momentum {mom}, cosine lr from {lr}, weight decay {wd}, batch {bs}, {epochs} epochs, seed 2024) "
                    "on MNIST test images 0..7999 (the training split is not available here)",
        "evaluation": "MNIST test images 8000..9999 (held out, never used in training); pixels / 255",
        "heldout_images": int(len(yte)),
        "float_accuracy_numpy": float_acc,
        "float_accuracy_onnxruntime": ort_acc,
        "train_seconds": round(time.time() - t0, 1),
        "fixed_point_accuracy": None,
        "fixed_point": "filled in by tests/python/test_inference_mnist.py::test_record (hush-inference reference, ℓ=37, 12 fraction bits)",
    }
    # fixed-point reference accuracy (hush-inference, default ring ℓ = 37, 12 fraction bits)
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    from _hush_bin import hush_inference_bin

    b = hush_inference_bin()
    if b:
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory() as td:
            np.save(os.path.join(td, "x.npy"), xte)
            subprocess.run([b, "run", "--model", os.path.join(OUT, "mnist_cnn.hushm"), "--input", os.path.join(td, "x.npy"),
                            "--out", os.path.join(td, "y.npy"), "--exec", "reference", "--batch"], check=True)
            ref = np.load(os.path.join(td, "y.npy"))
        info["fixed_point_accuracy"] = float((ref.argmax(1) == yte).mean())
        info["fixed_point"] = ("hush-inference plaintext fixed-point reference (ring 2^37, 12 fraction bits) on the same 2,000 images; "
                               "the secure run equals this reference (tests/python/test_inference_mnist.py)")
    with open(os.path.join(OUT, "mnist_cnn.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
