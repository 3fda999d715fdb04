"""ONNX -> hush model file (``.hushm``): a thin wrapper over the built-in importer.

The importer itself is Rust (the ``hush-onnx`` crate), the same code the
``hush`` command runs for ``hush import`` and for ``--model x.onnx``; this
module calls it through the ``hush._native`` extension, so it does not need
the ``onnx`` package (an ``onnx.ModelProto`` is accepted too and serialized
first). See ``docs/model-format.md`` for the supported operators and the
file format.

An unsupported operator or form is refused with :class:`UnsupportedModel`,
whose message names the node and the operator.

Command line: ``python -m hush.onnx_import in.onnx out.hushm`` (the same as
``hush import in.onnx out.hushm``).
"""

from __future__ import annotations

import json
import os
import struct
import sys
from typing import Any, Dict, List, Optional, Union

from . import _native

__all__ = ["MAGIC", "FORMAT_VERSION", "SUPPORTED", "UnsupportedModel", "convert", "import_onnx", "read_header", "main"]

MAGIC = b"HUSHMDL1"
FORMAT_VERSION = 1

SUPPORTED = (
    "Conv Gemm MatMul Add Relu MaxPool AveragePool GlobalAveragePool BatchNormalization "
    "Flatten Reshape Concat Softmax ArgMax Identity Dropout Constant"
).split()


class UnsupportedModel(ValueError):
    """The ONNX model uses an operator or a form hush does not support (or is not a valid ONNX file)."""


def _native_convert(onnx_bytes: bytes) -> bytes:
    try:
        return _native.onnx_to_hushm(onnx_bytes)
    except ValueError as e:
        raise UnsupportedModel(str(e)) from None


def convert(model: Any) -> bytes:
    """Converts an ONNX model (an ``onnx.ModelProto`` or its serialized
    bytes) into the bytes of a .hushm file."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _native_convert(bytes(model))
    if hasattr(model, "SerializeToString"):
        return _native_convert(model.SerializeToString())
    raise TypeError(f"expected an onnx.ModelProto or bytes, got {type(model).__name__}")


def import_onnx(src: Any, dst: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """Converts an ONNX model (a path, serialized bytes or an
    ``onnx.ModelProto``) into the hush model file ``dst``; returns the JSON
    header."""
    if isinstance(src, str) or hasattr(src, "__fspath__"):
        path = os.fspath(src)
        try:
            data = _native.onnx_file_to_hushm(path)
        except ValueError as e:
            raise UnsupportedModel(str(e)) from None
    else:
        data = convert(src)
    with open(dst, "wb") as f:
        f.write(data)
    return read_header(data)


def read_header(data: bytes) -> Dict[str, Any]:
    """The JSON header of a .hushm file's bytes."""
    if data[:8] != MAGIC or len(data) < 12:
        raise ValueError("not a hush model file (bad magic)")
    (h,) = struct.unpack("<I", data[8:12])
    return json.loads(data[12:12 + h])


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m hush.onnx_import IN.onnx OUT.hushm``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m hush.onnx_import IN.onnx OUT.hushm", file=sys.stderr)
        return 2
    try:
        h = import_onnx(argv[0], argv[1])
    except (UnsupportedModel, OSError) as e:
        print(f"hush.onnx_import: {e}", file=sys.stderr)
        return 1
    print(f"{argv[1]}: {len(h['nodes'])} layers, input {h['input']['shape']}, output {h['output']['shape']}"
          f", postprocess {h['postprocess']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
