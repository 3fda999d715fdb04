"""Pins the built-in (Rust) ONNX importer's output, byte for byte.

The digests below are SHA-256 of the ``.hushm`` bytes that hush's earlier
Python importer (retired; it used the ``onnx`` package and numpy) wrote for
every model the tests use: the operator cases of test_inference_import.py
(built from its seeded generator, in its order) and the four benchmark
builders of ``hush.models``. The Rust importer was checked to produce the
same bytes for all of them (and for models/mnist_cnn.onnx, whose committed
.hushm crates/hush-onnx's tests compare against) before the Python one was
retired; a change to the importer's output fails here.
"""

import hashlib

import pytest

pytest.importorskip("onnx")

import test_inference_import as T  # noqa: E402
from hush import models  # noqa: E402
from hush.onnx_import import convert, import_onnx  # noqa: E402

PINNED = {
    "conv": "88c95ea8a5439179342107f5418606e9470e8301f174f74080aaf4fa6774a039",
    "conv+bn(folded)": "d821fb320d1f3ceee0bf32dd75bc8cd615d8449970439239815c57448e5b5d1a",
    "gemm": "af0c3708cd466e39995dc9ce9bd09776640aa24db42b73ace6ffb79ec2c4cb07",
    "matmul+add(bias)": "28a184cf50667425092ab5e8cd28c31186d61eb92a0595e533523d569387051d",
    "add(residual)+relu": "bbeaf077fff873cf595fcee8948bddc015e07510256eb162c513c37a45d5e520",
    "add(const)": "70f290c989da0493652f1edfbe1c307301466435632bb63f862d2a7503956b58",
    "maxpool": "204de7e0436b80a7f31f54a992784016152dc81a767b3a860c4e59f6fc524e5b",
    "avgpool": "bff769b8bfdc3522384b793523b7fa6458ff63543649e1fa3d53764fac03453d",
    "globalavgpool+flatten": "2017844093f90b769270a41360c6a92d22177a85dd18671e3e91412271c3cee8",
    "bn(standalone)": "75629ab1af695e15c259e84ae3da295c50713519917b56d928b918cdff4853da",
    "reshape": "bee154ca56d15f87aa9f901dfb5a4ef0417c81ce9451b36f1d899f5c278fd8e1",
    "concat": "65fb58d36a58eefd5e46957f5b514b34ac32619735bbe0f765f7c06a4c23d9a0",
    "softmax(final)": "a0f2c81465cddc7eeb3d323cee305b33f8341e300ed219ba00d284674c8e5c47",
    "argmax(final)": "5e1d6281fb20afa73f100722bdf568946d1aa3a0c47de6ba107c3c412f605dcc",
    "residual-net": "9ab398658c0b20a5ea4ec313106827b0b6ac729f5706b974052b06245e613b23",
    "concat-net": "c2c55e3075e7704751d3126bcfb9202beaf94163b55fab13a80681c8b11b107c",
    "minionn_mnist": "33cd1b370feb1a4ce5dc46d51db3576455ddeaf23701f4a0a340f4e61042750b",
    "minionn_cifar": "9499076262ce4444cfeebb0b62402cf3f103b5213c3210a4be104f5784da1894",
    "squeezenet": "f3650a1efe2a1036a1b9c03a3c5bab0f154c9bae18ea47a140ce03667f5b650b",
    "resnet50": "f64adbccec8f79cd3b590e76c4e8787ed3ed71de149d9033210b9e17895961c8",
}


@pytest.mark.parametrize("name", list(T.CASES))
def test_operator_case_output_pinned(name):
    m, _ = T.CASES[name]
    assert hashlib.sha256(convert(m)).hexdigest() == PINNED[name]


@pytest.mark.parametrize("name", list(models.BUILDERS))
def test_benchmark_model_output_pinned(name, tmp_path):
    import onnx

    m = models.BUILDERS[name]()
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    # from a file (size-checked, read by Rust) and from a ModelProto: the same bytes
    import_onnx(str(p), str(tmp_path / "m.hushm"))
    got = (tmp_path / "m.hushm").read_bytes()
    assert hashlib.sha256(got).hexdigest() == PINNED[name]
    assert convert(m) == got
