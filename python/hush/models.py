"""Benchmark models as ONNX, built with ``onnx.helper`` and random weights
(timing only; nothing is downloaded):

* ``minionn_mnist`` — MiniONN's MNIST CNN (CRISP benchmark A);
* ``minionn_cifar`` — MiniONN's 7-convolution CIFAR-10 CNN (CRISP benchmark B);
* ``squeezenet`` — SqueezeNet 1.1 at 3×224×224;
* ``resnet50`` — ResNet-50 at 3×224×224, with BatchNormalization layers
  (hush's importer folds them into the convolutions).

The same architectures are built directly in Rust for ``hush bench infer``
(``crates/hush-inference/src/zoo.rs``). Command line::

    python -m hush.models NAME OUT.onnx      # NAME: minionn_mnist, minionn_cifar, squeezenet, resnet50
"""

from __future__ import annotations

import sys

import numpy as np


class _G:
    def __init__(self, name, in_shape, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.name = name
        self.in_shape = in_shape
        self.n = 0

    def _id(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def const(self, arr, p="w"):
        from onnx import numpy_helper

        n = self._id(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float32), n))
        return n

    def node(self, op, inputs, **attrs):
        from onnx import helper

        out = self._id(op.lower() + "_")
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, ci, co, k, s=1, p=0, bn=False):
        lim = np.sqrt(6.0 / (ci * k * k))
        w = self.const(self.rng.uniform(-lim, lim, (co, ci, k, k)))
        ins = [x, w] if bn else [x, w, self.const(self.rng.uniform(-0.05, 0.05, co), "b")]
        y = self.node("Conv", ins, kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
        if bn:
            prm = [self.const(self.rng.uniform(0.5, 1.5, co), "g"), self.const(self.rng.uniform(-0.1, 0.1, co), "be"),
                   self.const(self.rng.uniform(-0.1, 0.1, co), "mu"), self.const(self.rng.uniform(0.5, 1.5, co), "var")]
            y = self.node("BatchNormalization", [y] + prm)
        return y

    def relu(self, x):
        return self.node("Relu", [x])

    def gemm(self, x, ni, no):
        lim = np.sqrt(6.0 / ni)
        return self.node("Gemm", [x, self.const(self.rng.uniform(-lim, lim, (no, ni))), self.const(self.rng.uniform(-0.05, 0.05, no), "b")], transB=1)

    def model(self, out):
        import onnx
        from onnx import TensorProto, helper

        g = helper.make_graph(self.nodes, self.name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1] + self.in_shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["n", "k"])], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="hush.models")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def minionn_mnist(seed=1):
    g = _G("minionn-mnist", [1, 28, 28], seed)
    h = g.relu(g.conv("input", 1, 16, 5))
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.relu(g.conv(h, 16, 16, 5))
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.node("Flatten", [h], axis=1)
    h = g.relu(g.gemm(h, 256, 100))
    return g.model(g.gemm(h, 100, 10))


def minionn_cifar(seed=2):
    g = _G("minionn-cifar", [3, 32, 32], seed)
    h = g.relu(g.conv("input", 3, 64, 3, p=1))
    h = g.relu(g.conv(h, 64, 64, 3, p=1))
    h = g.node("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.relu(g.conv(h, 64, 64, 3, p=1))
    h = g.relu(g.conv(h, 64, 64, 3, p=1))
    h = g.node("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.relu(g.conv(h, 64, 64, 3, p=1))
    h = g.relu(g.conv(h, 64, 64, 1))
    h = g.relu(g.conv(h, 64, 16, 1))
    h = g.node("Flatten", [h], axis=1)
    return g.model(g.gemm(h, 1024, 10))


def squeezenet(seed=3):
    g = _G("squeezenet1.1", [3, 224, 224], seed)

    def fire(x, ci, s, e):
        sq = g.relu(g.conv(x, ci, s, 1))
        return g.node("Concat", [g.relu(g.conv(sq, s, e, 1)), g.relu(g.conv(sq, s, e, 3, p=1))], axis=1)

    h = g.relu(g.conv("input", 3, 64, 3, s=2))
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2])
    h = fire(fire(h, 64, 16, 64), 128, 16, 64)
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2])
    h = fire(fire(h, 128, 32, 128), 256, 32, 128)
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2])
    h = fire(fire(fire(fire(h, 256, 48, 192), 384, 48, 192), 384, 64, 256), 512, 64, 256)
    h = g.relu(g.conv(h, 512, 1000, 1))
    h = g.node("GlobalAveragePool", [h])
    return g.model(g.node("Flatten", [h], axis=1))


def resnet50(seed=4):
    g = _G("resnet50", [3, 224, 224], seed)
    h = g.relu(g.conv("input", 3, 64, 7, s=2, p=3, bn=True))
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    ci = 64
    for i, (blocks, w) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        for j in range(blocks):
            s = 2 if (j == 0 and i > 0) else 1
            a = g.relu(g.conv(h, ci, w, 1, bn=True))
            a = g.relu(g.conv(a, w, w, 3, s=s, p=1, bn=True))
            a = g.conv(a, w, 4 * w, 1, bn=True)
            skip = g.conv(h, ci, 4 * w, 1, s=s, bn=True) if (s != 1 or ci != 4 * w) else h
            h = g.relu(g.node("Add", [a, skip]))
            ci = 4 * w
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])], axis=1)
    return g.model(g.gemm(h, 2048, 1000))


BUILDERS = {"minionn_mnist": minionn_mnist, "minionn_cifar": minionn_cifar, "squeezenet": squeezenet, "resnet50": resnet50}


def main(argv=None) -> int:
    import onnx

    argv = sys.argv[1:] if argv is None else argv
    if argv:
        # the CLI spells the names with dashes (`hush bench infer --model minionn-mnist`): accept both
        argv = [argv[0].replace("-", "_")] + list(argv[1:])
    if len(argv) != 2 or argv[0] not in BUILDERS:
        print(f"usage: python -m hush.models {{{','.join(BUILDERS)}}} OUT.onnx", file=sys.stderr)
        return 2
    onnx.save(BUILDERS[argv[0]](), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
