"""The documentation's promises, run as written (issue 32).

* README.md's "first private prediction": its command blocks, verbatim,
  in a temporary HOME from the repository root — `hush demo`, `hush keygen`,
  `hush serve` (in the background), `hush keygen --show`, and the client's
  `hush infer` with the printed fingerprint filled in for `<hex>` — and its
  Python block.
* Every relative link and anchor of README.md and docs/ resolves
  (scripts/check_links.py, also run first by scripts/test.sh).
* docs/python.md's `__all__` is the package's; `hush.samples()`; `~` in an
  identity folder; `python -m hush.models minionn-mnist`.

About 10 s; the serve/infer pair runs over TLS on loopback.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

import hush

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def hush_bin():
    tgt = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    for c in (os.path.join(tgt, "release", "hush"), os.path.join(ROOT, "target", "release", "hush")):
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which("hush")
    if not found:
        pytest.skip("no hush program (run scripts/setup.sh)")
    return found


def code_blocks(path, lang):
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    return re.findall(r"^```" + lang + r"\n(.*?)^```", text, flags=re.S | re.M)


def commands(block):
    """The block's command lines, without comments."""
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def test_links_resolve():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_links.py")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_readme_is_a_front_door():
    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200)"
    first_screen = "\n".join(lines[:60])
    assert "hush demo" in first_screen and "pip install" in first_screen
    assert "bash scripts/demo.sh" in "\n".join(lines) and "bash scripts/test.sh" in "\n".join(lines)
    assert "no hardware protection" in first_screen


def test_readme_first_prediction_runs_verbatim(tmp_path):
    exe = hush_bin()
    sh = [b for b in code_blocks("README.md", "sh") if "hush keygen" in b or "hush infer" in b]
    assert len(sh) == 2, sh
    first, client = commands(sh[0]), commands(sh[1])
    assert [c.split()[1] for c in first] == ["demo", "keygen", "serve"], first
    assert len(client) == 1 and client[0].startswith("hush infer"), client
    port = free_port()
    env = dict(os.environ, HOME=str(tmp_path))

    def argv(cmd):
        # the shell's work: ~ expansion; this test's: a free port for 7000
        cmd = cmd.replace("127.0.0.1:7000", f"127.0.0.1:{port}")
        return [exe] + [str(tmp_path) + a[1:] if a.startswith("~/") else a for a in cmd.split()[1:]]

    demo = subprocess.run(argv(first[0]), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    assert "private prediction" in demo.stdout
    keygen = subprocess.run(argv(first[1]), cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert keygen.returncode == 0, keygen.stderr
    fp = re.search(r"sha256:[0-9a-f]{64}", keygen.stdout).group(0)
    show = subprocess.run([exe, "keygen", "--show", str(tmp_path / ".hush" / "server")], capture_output=True, text=True)
    assert fp in show.stdout, show.stdout + show.stderr
    serve = subprocess.Popen(argv(first[2]), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = serve.stdout.readline()
        assert fp in line, line
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        infer = subprocess.run(argv(client[0].replace("sha256:<hex>", fp)), cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
        assert infer.returncode == 0, infer.stderr
        assert "class 4" in infer.stdout, infer.stdout
    finally:
        serve.kill()
        serve.wait()
        y = os.path.join(ROOT, "y.npy")
        if os.path.exists(y):
            os.remove(y)


def test_readme_python_block_runs_verbatim(tmp_path):
    blocks = code_blocks("README.md", "python")
    assert len(blocks) == 1
    r = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "4", r.stdout


def test_samples():
    d = hush.samples()
    assert (d / "mnist_cnn.hushm").is_file()
    files = sorted(p.name for p in (d / "samples").glob("*.npy"))
    assert files and all(re.fullmatch(r"mnist_\d+_label\d\.npy", f) for f in files), files
    assert "samples" in hush.__all__


def test_python_md_lists_the_real_all():
    text = open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8").read()
    m = re.search(r"print\(hush\.__all__\)\s*#\s*(\[.*?\])", text)
    assert m, "docs/python.md no longer shows __all__"
    assert eval(m.group(1)) == hush.__all__  # a literal list of strings


def test_identity_folder_with_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    made = subprocess.run([hush_bin(), "keygen", "--out", str(tmp_path / ".hush" / "server")], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    fp = re.search(r"sha256:[0-9a-f]{64}", made.stdout).group(0)
    with hush.Server(hush.samples() / "mnist_cnn.hushm", identity="~/.hush/server") as srv:
        assert srv.fingerprint == fp


def test_models_accepts_the_cli_spelling(tmp_path):
    pytest.importorskip("onnx")
    out = tmp_path / "m.onnx"
    r = subprocess.run([sys.executable, "-m", "hush.models", "minionn-mnist", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
    bad = subprocess.run([sys.executable, "-m", "hush.models", "lenet", str(out)], capture_output=True, text=True)
    assert bad.returncode == 2 and "minionn_mnist" in bad.stderr


def test_client_session_survives_a_rejected_input():
    d = hush.samples()
    import numpy as np
    x = np.load(d / "samples" / "mnist_8000_label4.npy")
    with hush.Server(d / "mnist_cnn.hushm") as srv:
        with hush.Client(srv.addr, pin=srv.fingerprint) as c:
            with pytest.raises(ValueError, match="expects"):
                c.infer(np.zeros((3, 3)))
            bad = np.array(x, dtype=np.float64)
            bad.flat[0] = np.nan
            with pytest.raises(ValueError, match="NaN"):
                c.infer(bad)
            assert int(np.argmax(c.infer(x))) == 4


def test_typed_exceptions_speak_python():
    import numpy as np
    d = hush.samples()
    m, x = d / "mnist_cnn.hushm", np.load(d / "samples" / "mnist_8000_label4.npy")
    with pytest.raises(hush.InvalidArgument, match='proto="tami" does not run in mode="interactive"') as e:
        hush.run(m, x, mode="interactive", proto="tami")
    assert isinstance(e.value, ValueError) and "--" not in str(e.value)
    with pytest.raises(hush.ConnectionRefused) as e:
        hush.Client("127.0.0.1:1", pin="sha256:" + "ab" * 32, connect_timeout=1)
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ConnectionError)
    with hush.Server(m) as srv:
        with pytest.raises(hush.PinMismatch, match="pin= expects|pin expects") as e:
            hush.Client(srv.addr, pin="sha256:" + "00" * 32)
        assert "--pin" not in str(e.value)
        with pytest.raises(hush.ModeMismatch, match='mode="tee"') as e:
            hush.Client(srv.addr, pin=srv.fingerprint, mode="dealer", dealer="127.0.0.1:1",
                        dealer_pin="sha256:" + "00" * 32, connect_timeout=1).infer(x)
        assert "--mode" not in str(e.value)
    for cls in (hush.PinMismatch, hush.ModeMismatch, hush.SettingMismatch, hush.ServerAborted, hush.PeerSilent):
        assert issubclass(cls, hush.ProtocolError) and issubclass(cls, RuntimeError) and issubclass(cls, hush.HushError)


def test_pythonic_messages():
    from hush._errors import pythonic
    assert pythonic("the client asks for --proto tami, this server runs --proto fss") == \
        'the client asks for proto="tami", this server runs proto="fss"'
    assert pythonic("--mac-s 8: choose 32") == "mac_s=8: choose 32"
    assert pythonic("when --dealer is omitted") == "when dealer is omitted"
    assert pythonic("needs --dealer ADDR and --dealer-pin sha256:<hex>") == 'needs dealer="ADDR" and dealer_pin="sha256:<hex>"'
    assert pythonic("started with --insecure (plaintext)") == "started with insecure=True (plaintext)"
    assert pythonic("this client expects --bits 40") == "this client expects bits=40"


def sh_blocks(path):
    """(marker, block) for every sh/bash block of a Markdown file; marker is
    the `<!-- docs-test: ... -->` line just before it, or None."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if re.match(r"^```(sh|bash)\s*$", lines[i]):
            m = re.match(r"^<!-- docs-test: (.*) -->$", lines[i - 1]) if i else None
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            out.append((m.group(1) if m else None, "\n".join(lines[i + 1:j])))
            i = j
        i += 1
    return out


def test_every_command_block_is_run_or_marked():
    """Each shell block in README.md and docs/ says whether a test runs it
    verbatim (`run: TEST`) or why not (`skip: REASON`)."""
    files = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    this = open(__file__, encoding="utf-8").read()
    for f in files:
        for marker, block in sh_blocks(f):
            assert marker, f"{f}: a shell block without a <!-- docs-test: run|skip --> marker:\n{block}"
            kind, _, why = marker.partition(":")
            assert kind in ("run", "skip") and why.strip(), f"{f}: marker {marker!r}"
            if kind == "run":
                test = why.strip().split("::")[-1]
                assert f"def {test}(" in this, f"{f}: {marker!r} names no test in {__file__}"


def commands_of(block):
    """The block's commands: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return commands(joined)


def test_deploy_walkthrough_on_one_host(tmp_path):
    """docs/deploy.md sections 1-3 (identities, two-host inference, three
    hosts in dealer mode), verbatim, on loopback: the test fills in the
    addresses (SERVER, DEALER, 0.0.0.0 → 127.0.0.1 on free ports), the
    fingerprints the parties print, the model and input files."""
    exe = hush_bin()
    runs = [b for m, b in sh_blocks("docs/deploy.md") if m and m.startswith("run:")]
    assert len(runs) == 6, runs
    p_server, p_dealer = free_port(), free_port()
    x = os.path.join(ROOT, "models", "samples", "mnist_8000_label4.npy")
    fps, procs = {}, []

    def fill(cmd):
        cmd = (cmd.replace("0.0.0.0:7000", f"127.0.0.1:{p_server}").replace("SERVER:7000", f"127.0.0.1:{p_server}")
               .replace("0.0.0.0:7100", f"127.0.0.1:{p_dealer}").replace("DEALER:7100", f"127.0.0.1:{p_dealer}")
               .replace("model.hushm", os.path.join(ROOT, "models", "mnist_cnn.hushm"))
               .replace("x.npy", x).replace("y.npy", str(tmp_path / "y.npy")))
        for who, fp in fps.items():
            cmd = cmd.replace(f"sha256:<{who}'s>", fp)
        assert "<" not in cmd, f"unfilled placeholder in {cmd}"
        args = cmd.split()
        assert args[0] == "hush", cmd
        return [exe] + [str(tmp_path) + a[1:] if a.startswith("~/") else a for a in args[1:]]

    def start(argv, who, port):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, HOME=str(tmp_path)))
        procs.append(p)
        line = p.stdout.readline()
        m = re.search(r"sha256:[0-9a-f]{64}", line)
        assert m, f"{who} printed {line!r}: {p.stderr.read() if p.poll() is not None else ''}"
        fps[who] = m.group(0)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return p
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"{who} does not listen")

    try:
        for block in runs:
            for cmd in commands_of(block):
                argv = fill(cmd)
                sub = argv[1]
                if sub == "serve":
                    for p in [q for q in procs if "serve" in q.args]:  # section 3's server replaces section 2's
                        p.kill()
                        p.wait()
                        procs.remove(p)
                    start(argv, "server", p_server)
                elif sub == "dealer":
                    start(argv, "dealer", p_dealer)
                else:
                    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=dict(os.environ, HOME=str(tmp_path)))
                    assert r.returncode == 0, f"{cmd}\n{r.stderr}"
                    if sub == "infer":
                        assert "class 4" in r.stdout, r.stdout
        assert set(fps) == {"server", "dealer"}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_raw_integer_input_is_flagged():
    """uint8 pixels (0..255) are computed on as given: a warning says so
    (the model file declares no input range; see the issue's closing note)."""
    import warnings
    import numpy as np
    d = hush.samples()
    x = np.load(d / "samples" / "mnist_8000_label4.npy")
    raw = np.round(x * 255).astype(np.uint8)
    with pytest.warns(UserWarning, match="normalise"):
        hush.run(d / "mnist_cnn.hushm", raw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert int(np.argmax(hush.run(d / "mnist_cnn.hushm", x))) == 4
    with hush.Server(d / "mnist_cnn.hushm") as srv, hush.Client(srv.addr, pin=srv.fingerprint) as c:
        with pytest.warns(UserWarning, match="whole numbers up to 255"):
            c.infer(raw)


def test_lr_projection_table_is_current():
    """docs/lr-ray.md's 10^8 projection is what scripts/lr_projection.py
    computes from bench/records/lr-ray.jsonl."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "lr_projection.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_peers_page_is_current():
    """docs/peers.md is what scripts/peers_page.py generates from
    bench/records (every ratio on it computed from the records)."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "peers_page.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
