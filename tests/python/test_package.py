"""Package hygiene: ``__all__``, no leaked modules, docstrings on every
public name, ``py.typed``, the console entry points' module, and the demo
data shipped in the package equal to the repository's."""

import filecmp
import inspect
import os
import subprocess
import sys
import types

import pytest

import hush
import hush._cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.dirname(os.path.abspath(hush.__file__))


def test_all_lists_exactly_the_public_names():
    public = {n for n in dir(hush) if not n.startswith("_")}
    # submodules imported by someone else's test (hush.models, hush.onnx_import) are fine
    public -= {n for n in public if isinstance(getattr(hush, n), types.ModuleType) and n in ("models", "onnx_import")}
    assert public == set(hush.__all__) - {"__version__"}, public ^ set(hush.__all__)
    for leaked in ("json", "np", "os", "sys", "annotations"):
        assert not hasattr(hush, leaked), leaked


def test_every_public_name_has_a_docstring():
    missing = []
    for name in hush.__all__:
        obj = getattr(hush, name)
        if name == "__version__":
            assert isinstance(obj, str) and obj
            continue
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if not (inspect.getdoc(member) or "").strip():
                    missing.append(f"{name}.{attr}")
    for mod in (hush._cli,):
        for name in mod.__all__:
            if not (inspect.getdoc(getattr(mod, name)) or "").strip():
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, missing


def test_typed_package():
    assert os.path.isfile(os.path.join(PKG, "py.typed"))
    assert os.path.isfile(os.path.join(PKG, "_native.pyi"))
    sig = inspect.signature(hush.run)
    assert sig.return_annotation is not inspect.Signature.empty
    assert "connect_timeout" in inspect.signature(hush.Client).parameters


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "models")), reason="not a checkout")
def test_bundled_demo_data_equals_the_repository_models():
    src, dst = os.path.join(ROOT, "models"), os.path.join(ROOT, "python", "hush", "_models")
    names = ["mnist_cnn.hushm", "mnist_cnn.json"] + [
        os.path.join("samples", f) for f in sorted(os.listdir(os.path.join(src, "samples")))
    ]
    for n in names:
        assert filecmp.cmp(os.path.join(src, n), os.path.join(dst, n), shallow=False), n


def test_cli_entry_point_runs_the_rust_cli():
    # the console command's function, in a subprocess (it owns SIGINT)
    r = subprocess.run([sys.executable, "-c", "import sys, hush._cli; sys.exit(hush._cli.main(['hush', '--version']))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"hush {hush.__version__}"
    r = subprocess.run([sys.executable, "-c", "import sys, hush._cli; sys.exit(hush._cli.main(['hush', 'no-such-command']))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no-such-command" in r.stderr


def test_client_connect_refused_names_the_address():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    with pytest.raises(RuntimeError, match="could not connect to .*: connection refused"):
        hush.Client(addr, pin="sha256:" + "ab" * 32, connect_timeout=0.5)
