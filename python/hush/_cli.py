"""Console entry points of the Python package: ``hush`` and ``hush-tee-module``.

``pip install`` puts both commands next to the environment's ``python``.
They run the same Rust code as the ``hush`` and ``hush-tee-module``
binaries of a Cargo build, through the ``hush._native`` extension, so no
separate Rust build is needed. Before handing over, :func:`main` points the
Rust side at what this installation provides (each only if not already set
in the environment):

* ``HUSH_PYTHON`` — this interpreter (``hush bench lr --dataset`` loads
  scikit-learn's data sets with it; ONNX import needs no Python);
* ``HUSH_TEE_MODULE`` — the ``hush-tee-module`` command installed beside
  ``hush`` (``--tee out-of-process``);
* ``HUSH_MODELS`` — the bundled MNIST model and samples (``hush demo``).
"""

import os
import shutil
import signal
import sys
import sysconfig
from typing import List, Optional

from . import _native

__all__ = ["main", "tee_module"]


def _scripts_dirs() -> List[str]:
    dirs = []
    if sys.argv and sys.argv[0]:
        dirs.append(os.path.dirname(os.path.abspath(sys.argv[0])))
    for scheme_path in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        if scheme_path and scheme_path not in dirs:
            dirs.append(scheme_path)
    return dirs


def _tee_module_command() -> Optional[str]:
    for d in _scripts_dirs():
        c = os.path.join(d, "hush-tee-module")
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return shutil.which("hush-tee-module")


def _bundled_models() -> Optional[str]:
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_models")
    return d if os.path.isfile(os.path.join(d, "mnist_cnn.hushm")) else None


def _prepare_env() -> None:
    os.environ.setdefault("HUSH_PYTHON", sys.executable)
    if "HUSH_TEE_MODULE" not in os.environ:
        c = _tee_module_command()
        if c:
            os.environ["HUSH_TEE_MODULE"] = c
    if "HUSH_MODELS" not in os.environ and not os.path.isfile(os.path.join("models", "mnist_cnn.hushm")):
        m = _bundled_models()
        if m:
            os.environ["HUSH_MODELS"] = m


def _default_signals() -> None:
    # Behave like the native binary: Ctrl-C ends the process at once (the
    # Rust side never returns to the interpreter to raise KeyboardInterrupt).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main(argv: Optional[List[str]] = None) -> int:
    """The ``hush`` command (``argv`` defaults to ``sys.argv``, program name
    first); returns its exit status."""
    _prepare_env()
    _default_signals()
    args = list(sys.argv if argv is None else argv)
    if not args:
        args = ["hush"]
    sys.stdout.flush()
    if len(args) > 2 and args[1] == "train" and any(a == "--ray" or a.startswith("--ray=") for a in args[2:]) \
            and not any(a in ("-h", "--help") for a in args[2:]):
        # sharded over Ray actors: Python drives them (hush.ray)
        try:
            from . import ray as _hray
        except ImportError as e:
            print(f"hush: error: --ray: {e}", file=sys.stderr)
            return 1
        return _hray._cli_train(args[2:])
    return int(_native.cli_main(args))


def tee_module(argv: Optional[List[str]] = None) -> int:
    """The ``hush-tee-module`` command: the simulated trusted module serving
    its host on stdin/stdout (``argv`` after the program name defaults to
    ``sys.argv[1:]``); returns its exit status."""
    _default_signals()
    return int(_native.tee_module_main(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
