"""The prebuilt wheel (issue 32): ``scripts/wheel.sh`` builds it once
(``scripts/test.sh`` does, and passes its path in ``HUSH_WHEEL``; without
it this test runs the script itself); here it installs into a fresh virtual
environment outside the repository with **no Rust on the PATH** (no cargo,
no rustc) and no HUSH_* variables, and ``hush demo`` runs from it.

The wheel carries its GMP (``hush.libs/``, from maturin's ``--auditwheel
repair``): the installed extension must load it from there, not from the
system. The install time is printed (``pytest -s``) and written to
``target/wheel-install.json`` as a record line (``HUSH_WHEEL_COLD=1``: with
no pip cache); it is not asserted (no timing assertions in
tests). pip fetches numpy and onnx from PyPI (or its cache).
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.slow]


def _wheel() -> str:
    w = os.environ.get("HUSH_WHEEL")
    if w:
        assert os.path.isfile(w), f"HUSH_WHEEL={w} does not exist"
        return os.path.abspath(w)
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "wheel.sh")], capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-3000:]
    found = glob.glob(os.path.join(ROOT, "target", "wheels", "hush-*.whl"))
    assert len(found) == 1, found
    return found[0]


def _no_rust_path(venv: str) -> str:
    dirs = [os.path.join(venv, "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
    dirs = [d for d in dirs if not any(os.path.exists(os.path.join(d, x)) for x in ("cargo", "rustc"))]
    return os.pathsep.join(dirs)


def _run(cmd, env, cwd, timeout):
    r = subprocess.run(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    return r


def test_wheel_installs_without_rust_and_runs_the_demo():
    wheel = _wheel()
    name = os.path.basename(wheel)
    assert name.startswith("hush-") and "-cp38-abi3-" in name, name
    assert "manylinux_2_34_x86_64" in name, f"{name}: expected the manylinux tag scripts/wheel.sh asks for"
    py = os.path.join(sys.base_prefix, "bin", "python3")
    if not os.path.isfile(py):
        py = shutil.which("python3")
    with tempfile.TemporaryDirectory(prefix="hush-wheel-") as tmp:
        tmp = os.path.realpath(tmp)
        assert not tmp.startswith(os.path.realpath(ROOT) + os.sep), "the fresh environment must be outside the repository"
        venv = os.path.join(tmp, "venv")
        subprocess.run([py, "-m", "venv", venv], check=True, timeout=120)
        env = {k: v for k, v in os.environ.items()
               if not (k.startswith("HUSH_") or k.startswith("CARGO") or k.startswith("RUST") or k in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"))}
        env["PATH"] = _no_rust_path(venv)
        env["PIP_NO_INPUT"] = "1"
        cold = os.environ.get("HUSH_WHEEL_COLD") == "1"  # measure with no pip cache (numpy, onnx from PyPI)
        if cold:
            env["PIP_NO_CACHE_DIR"] = "1"
        for tool in ("cargo", "rustc"):
            assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is on the test's PATH"
        load0 = os.getloadavg()[0]
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        t0 = time.monotonic()
        _run([os.path.join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "-q", "--only-binary", ":all:", wheel],
             env, tmp, 600)
        install_s = time.monotonic() - t0
        print(f"\nwheel install into a fresh venv: {install_s:.1f} s ({name})")
        os.makedirs(os.path.join(ROOT, "target"), exist_ok=True)
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
        rec = {"bench": "wheel-install", "wheel": name, "wall_s": round(install_s, 2), "pip_cache": not cold,
               "what": "pip install of the wheel into a fresh venv (numpy, onnx from PyPI), no cargo/rustc on the PATH",
               "cpu": cpu, "cores": os.cpu_count(), "date": started, "load": f"{load0:.2f} → {os.getloadavg()[0]:.2f}",
               "command": "pytest tests/python/test_wheel.py" + (" (HUSH_WHEEL_COLD=1)" if cold else ""), "commit": commit}
        # a record line in bench/records' format (committed by hand when quoted)
        with open(os.path.join(ROOT, "target", "wheel-install.json"), "w") as f:
            f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        assert shutil.which("hush", path=env["PATH"]) == os.path.join(venv, "bin", "hush")
        # the extension loads the GMP shipped in the wheel, not the system's
        r = _run([os.path.join(venv, "bin", "python"), "-c", "import hush._native as n; print(n.__file__)"], env, work, 120)
        so = r.stdout.strip()
        assert os.path.realpath(so).startswith(os.path.realpath(venv) + os.sep), so
        ldd = shutil.which("ldd")
        if ldd:
            deps = _run([ldd, so], env, work, 60).stdout
            gmp = [l for l in deps.splitlines() if "libgmp" in l]
            assert gmp and all("hush.libs" in l for l in gmp), deps
        r = _run(["hush", "demo"], env, work, 600)
        assert "5/5 private predictions equal the true label" in r.stdout, r.stdout
        r = _run(["hush", "embed", "--help"], env, work, 60)
        assert "--text" in r.stdout and "--tokenizer" in r.stdout


def test_wheel_pins_ray_for_the_ray_extra():
    """`pip install 'hush[ray]'` (or `.[ray]` from a checkout) brings one
    pinned Ray: the wheel's metadata names it as the extra's requirement."""
    import zipfile

    wheel = _wheel()
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    assert "Provides-Extra: ray" in text, text
    reqs = [l for l in text.splitlines() if l.startswith("Requires-Dist: ray")]
    assert len(reqs) == 1 and "ray==" in reqs[0].replace(" ", ""), reqs
    assert re.search(r"extra\s*==\s*[\"']ray[\"']", reqs[0]), reqs
    with open(os.path.join(ROOT, "requirements-dev.txt")) as f:
        pins = [l.strip() for l in f if l.startswith("ray==")]
    assert pins and pins[0] in reqs[0].replace(" ", ""), (pins, reqs)
