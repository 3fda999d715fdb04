"""The must-have of "ready for users": in a fresh virtual environment
outside the repository, ``pip install <repo>`` gives the ``hush`` and
``hush-tee-module`` commands and the package, and ``hush demo``, ``hush run
--model some.onnx`` and ``import hush`` work with no other environment
active (no VIRTUAL_ENV, no HUSH_* variables, a PATH without the repository's
builds).

Part of the test command. pip builds the extension with maturin in an
isolated build environment; ``CARGO_TARGET_DIR`` points at the repository's
``target/`` (unless the caller set it), so after ``scripts/setup.sh`` only
the PyO3 crates and ``hush-py`` recompile (about a minute in all, with the
downloads of maturin, numpy and onnx from PyPI). Deselect it with
``-m "not slow"`` while iterating.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.slow]


def _clean_env(venv):
    env = {k: v for k, v in os.environ.items() if not (k.startswith("HUSH_") or k in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"))}
    env["PATH"] = os.pathsep.join([os.path.join(venv, "bin"), os.path.dirname(shutil.which("cargo") or "/usr/bin/cargo"), "/usr/local/bin", "/usr/bin", "/bin"])
    # the build cache only (what pip installs is still built from the path):
    # an incremental build instead of the whole workspace from scratch
    env.setdefault("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    # never wait for input (CI runs with no stdin)
    env["PIP_NO_INPUT"] = "1"
    return env


def _run(cmd, env, cwd, timeout):
    r = subprocess.run(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    return r


def test_pip_install_in_a_fresh_venv():
    base = sys.base_prefix
    py = os.path.join(base, "bin", "python3")
    if not os.path.isfile(py):
        py = shutil.which("python3")
    with tempfile.TemporaryDirectory(prefix="hush-pip-") as tmp:
        tmp = os.path.realpath(tmp)
        assert not tmp.startswith(os.path.realpath(ROOT) + os.sep), "the fresh environment must be outside the repository"
        venv = os.path.join(tmp, "venv")
        subprocess.run([py, "-m", "venv", venv], check=True, timeout=120)
        env = _clean_env(venv)
        # pip itself only (PyPI: maturin as the build backend, numpy, onnx)
        _run([os.path.join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "-q", ROOT], env, tmp, 3600)
        for exe in ("hush", "hush-tee-module"):
            assert os.access(os.path.join(venv, "bin", exe), os.X_OK), exe
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        # python -c "import hush; print(hush.__all__)"
        r = _run([os.path.join(venv, "bin", "python"), "-c", "import hush; print(hush.__all__)"], env, work, 120)
        assert "'run'" in r.stdout and "'Server'" in r.stdout, r.stdout
        # ... and it is the installed copy, not the checkout's python/ folder
        r = _run([os.path.join(venv, "bin", "python"), "-c", "import hush; print(hush.__file__)"], env, work, 120)
        assert os.path.realpath(r.stdout.strip()).startswith(os.path.realpath(venv) + os.sep), r.stdout
        assert shutil.which("hush", path=env["PATH"]) == os.path.join(venv, "bin", "hush")
        # hush demo: the bundled model and samples
        r = _run(["hush", "demo"], env, work, 600)
        assert "5/5 private predictions equal the true label" in r.stdout, r.stdout
        # hush run --model some.onnx: the importer built into the extension (no Python involved)
        shutil.copy(os.path.join(ROOT, "models", "mnist_cnn.onnx"), os.path.join(work, "some.onnx"))
        shutil.copy(os.path.join(ROOT, "models", "samples", "mnist_8000_label4.npy"), os.path.join(work, "x.npy"))
        r = _run(["hush", "run", "--model", "some.onnx", "--input", "x.npy", "--out", "y.npy"], env, work, 600)
        assert "prediction: class 4" in r.stdout, r.stdout
        # the out-of-process module through the hush-tee-module entry point
        r = _run(["hush", "run", "--model", "some.onnx", "--input", "x.npy", "--out", "y.npy", "--tee", "out-of-process"], env, work, 600)
        assert "prediction: class 4" in r.stdout and "hush-tee-module" in r.stderr, r.stdout + r.stderr
        # a closed port: the retry line, then connection refused
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        addr = "127.0.0.1:%d" % s.getsockname()[1]
        s.close()
        r = subprocess.run(["hush", "infer", "--connect", addr, "--connect-timeout", "1", "--pin", "sha256:" + "ab" * 32,
                            "--input", "x.npy", "--out", "z.npy"], env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        assert f"waiting for {addr}: connection refused, retrying" in r.stderr
        assert f"could not connect to {addr}: connection refused" in r.stderr
