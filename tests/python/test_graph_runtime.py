"""The graph runtime (issue 28) on encoder graphs written as
``torch.onnx.export`` writes them (``scripts/torch_style.py`` reproduces the
exporter's node patterns: no torch wheel installs here): a pre-norm block at
opset 13 (decomposed LayerNorm, Erf GeLU, the mask arithmetic torch emits)
and a BERT-style classifier at opset 17 (fused LayerNormalization, tanh
GeLU, masked_fill, pooler with Tanh, Gemm head). Each runs privately with
``hush embed`` (tee mode, both parties in one process; the trusted module
is simulated — no hardware protection) and is compared with onnxruntime.

The tolerance, 0.03, is the fixed-point bound at f = 12 for these sizes: each
LayerNorm contributes ≤ 3·10⁻³ relative error (``LN_ERR_F12``) times |γ|
and the next layers' gain, GeLU 1.7·10⁻³, Softmax 6·10⁻⁴, tanh 2·10⁻³,
plus one ulp (2.4·10⁻⁴) per truncation; measured: 4.6·10⁻³ and 6.8·10⁻³."""

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("torch_style", ROOT / "scripts" / "torch_style.py")
ts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ts)
HUSH = os.path.join(os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target")), "release", "hush")
TOL = 0.03

pytestmark = pytest.mark.skipif(not os.path.exists(HUSH), reason="target/release/hush not built")


def run_embed(tmp, model_path, inputs, extra=()):
    args = [HUSH, "embed", "--model", str(model_path), "--out", str(tmp / "out.npy"), "--json", "--check"]
    for flag, key in (("--ids", "input_ids"), ("--mask", "attention_mask"), ("--token-types", "token_type_ids")):
        if key in inputs:
            np.save(tmp / f"{key}.npy", inputs[key])
            args += [flag, str(tmp / f"{key}.npy")]
    p = subprocess.run(args + list(extra), capture_output=True, text=True, timeout=300)
    return p


@pytest.mark.parametrize("name,types", [("prenorm_block", False), ("bert_classifier", True)])
def test_torch_style_graph_matches_onnxruntime(tmp_path, name, types):
    model = getattr(ts, name)()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    inputs = ts.sample_inputs(token_types=types)
    ref = ort.InferenceSession(str(path)).run(None, inputs)[0]
    p = run_embed(tmp_path, path, inputs)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    out = np.load(tmp_path / "out.npy")
    assert out.shape == ref.shape
    err = float(np.abs(out - ref).max())
    print(name, "max |hush - onnxruntime|", err, rec)
    assert err <= TOL, err
    # the Rust f64 interpreter of the same graph agrees with onnxruntime too
    assert rec["float_max_abs_diff"] <= TOL
    assert rec["runtime"] == "graph" and "simulated" in rec["tee_note"]
    ops = {o["op"] for o in rec["ops"]}
    assert {"embed", "linear", "layernorm", "gelu", "softmax", "matmul", "mask"} <= ops
    if name == "bert_classifier":
        assert "tanh" in ops


def test_padding_does_not_change_the_real_tokens(tmp_path):
    """The pre-norm block on a short sentence alone and padded to a longer
    batch: the real tokens' outputs agree (the mask works)."""
    model = ts.prenorm_block()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    full = ts.sample_inputs(batch=2, seq=12)
    n = int(full["attention_mask"][1].sum())
    alone = {"input_ids": full["input_ids"][1:, :n], "attention_mask": full["attention_mask"][1:, :n]}
    a = run_embed(tmp_path, path, full)
    assert a.returncode == 0, a.stderr
    padded = np.load(tmp_path / "out.npy")[1, :n]
    b = run_embed(tmp_path, path, alone)
    assert b.returncode == 0, b.stderr
    single = np.load(tmp_path / "out.npy")[0]
    assert np.abs(padded - single).max() <= 2 * TOL


def test_unsupported_node_is_refused_by_name_before_dealing(tmp_path):
    model = ts.prenorm_block()
    # replace the first Erf with Sin: no GeLU pattern, an unsupported operator
    for node in model.graph.node:
        if node.op_type == "Erf":
            node.op_type = "Sin"
            bad_name = node.name
            break
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    p = run_embed(tmp_path, path, ts.sample_inputs())
    assert p.returncode != 0
    assert bad_name in p.stderr and "Sin" in p.stderr and "supported" in p.stderr, p.stderr
    assert "rounds" not in p.stdout


def test_bad_inputs_are_refused(tmp_path):
    model = ts.prenorm_block()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    inputs = ts.sample_inputs()
    inputs["input_ids"][0, 0] = 10_000  # outside the 200-token vocabulary
    p = run_embed(tmp_path, path, inputs)
    assert p.returncode != 0 and "vocabulary" in p.stderr, p.stderr
    inputs = ts.sample_inputs()
    inputs["attention_mask"][0, 0] = 7
    p = run_embed(tmp_path, path, inputs)
    assert p.returncode != 0 and "mask" in p.stderr, p.stderr


# ---- across hosts: two (tee) or three (dealer) processes, TLS with pins ------------------

import socket
import time


def free_addr():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    a = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    return a


class Listening:
    """A listening hush command; its fingerprint from its first line."""

    def __init__(self, args, addr, home):
        self.p = subprocess.Popen([HUSH] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, HOME=str(home)))
        line = self.p.stdout.readline()
        assert line.startswith("fingerprint sha256:"), (args, line, self.p.stderr.read() if self.p.poll() is not None else "")
        self.fp = line.split()[1]
        host, port = addr.rsplit(":", 1)
        t = time.time()
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                assert time.time() - t < 20, f"{args} did not start"
                time.sleep(0.05)

    def stop(self):
        self.p.kill()
        self.p.wait()
        return self.p.stderr.read()


def remote_embed(tmp, addr, inputs, extra):
    args = [HUSH, "embed", "--connect", addr, "--out", str(tmp / "remote.npy"), "--json"]
    for flag, key in (("--ids", "input_ids"), ("--mask", "attention_mask"), ("--token-types", "token_type_ids")):
        if key in inputs:
            np.save(tmp / f"r_{key}.npy", inputs[key])
            args += [flag, str(tmp / f"r_{key}.npy")]
    return subprocess.run(args + extra, capture_output=True, text=True, timeout=300, env=dict(os.environ, HOME=str(tmp)))


@pytest.mark.parametrize("mode", ["tee", "dealer"])
def test_served_across_processes_matches_onnxruntime(tmp_path, mode):
    model = ts.bert_classifier()
    path = tmp_path / "bert_classifier.onnx"
    onnx.save(model, path)
    inputs = ts.sample_inputs(token_types=True)
    ref = ort.InferenceSession(str(path)).run(None, inputs)[0]
    procs = []
    try:
        mode_flags = []
        if mode == "dealer":
            daddr = free_addr()
            dealer = Listening(["dealer", "--listen", daddr], daddr, tmp_path)
            procs.append(dealer)
            mode_flags = ["--mode", "dealer", "--dealer", daddr, "--dealer-pin", dealer.fp]
        saddr = free_addr()
        srv = Listening(["serve", "--model", str(path), "--listen", saddr] + mode_flags, saddr, tmp_path)
        procs.append(srv)
        p = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp] + mode_flags)
        assert p.returncode == 0, p.stderr
        rec = json.loads(p.stdout)
        out = np.load(tmp_path / "remote.npy")
        err = float(np.abs(out - ref).max())
        print(mode, "max |hush - onnxruntime|", err, rec)
        assert err <= TOL, err
        assert rec["mode"] == mode
        assert rec["plan"]["linear"] == ("module" if mode == "tee" else "triples")
        # a client of the other mode is refused at the hello, naming both; the server keeps serving
        other = [] if mode == "dealer" else ["--mode", "dealer", "--dealer", "127.0.0.1:9", "--dealer-pin", "sha256:" + "ab" * 32]
        q = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp] + other)
        assert q.returncode != 0 and "mode mismatch" in q.stderr and "--mode tee" in q.stderr and "--mode dealer" in q.stderr, q.stderr
        # a wrong pin: refused before anything is sent
        q = remote_embed(tmp_path, saddr, inputs, ["--pin", "sha256:" + "cd" * 32] + mode_flags)
        assert q.returncode != 0
        # a client whose input breaks mid-session (a token outside the vocabulary: the
        # client stops after the set-up), and one asking for an oversized input: both
        # fail with a clear error; the server keeps serving
        bad = {k: v.copy() for k, v in inputs.items()}
        bad["input_ids"][0, 1] = 10_000
        q = remote_embed(tmp_path, saddr, bad, ["--pin", srv.fp] + mode_flags)
        assert q.returncode != 0 and "vocabulary" in q.stderr, q.stderr
        huge = {k: np.zeros((1, 20000), dtype=np.int64) for k in inputs}
        q = remote_embed(tmp_path, saddr, huge, ["--pin", srv.fp] + mode_flags)
        assert q.returncode != 0 and "20000" in q.stderr, q.stderr
        p2 = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp] + mode_flags)
        assert p2.returncode == 0, p2.stderr
        assert np.array_equal(np.load(tmp_path / "remote.npy").shape, ref.shape)
    finally:
        logs = [pr.stop() for pr in reversed(procs)]
    print(logs)


def test_python_embed_remote(tmp_path):
    """hush.embed_remote against a served graph (tee), with the classifier."""
    import hush

    model = ts.bert_classifier()
    path = tmp_path / "c.onnx"
    onnx.save(model, path)
    inputs = ts.sample_inputs(token_types=True)
    ref = ort.InferenceSession(str(path)).run(None, inputs)[0]
    saddr = free_addr()
    srv = Listening(["serve", "--model", str(path), "--listen", saddr], saddr, tmp_path)
    try:
        out, rep = hush.embed_remote(saddr, inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"], pin=srv.fp, report=True)
        assert out.shape == ref.shape and float(np.abs(out - ref).max()) <= TOL
        assert rep["mode"] == "tee" and rep["plan"]["linear"] == "module"
        with pytest.raises(RuntimeError, match="mode mismatch"):
            hush.embed_remote(saddr, inputs["input_ids"], inputs["attention_mask"], pin=srv.fp, mode="dealer",
                              dealer="127.0.0.1:9", dealer_pin="sha256:" + "ab" * 32)
        with pytest.raises(ValueError):
            hush.embed_remote(saddr, inputs["input_ids"], inputs["attention_mask"][:, :3], pin=srv.fp)
    finally:
        srv.stop()


def test_hush_plan_chooses_per_layer_and_dealer_mode_has_one_sound_backend(tmp_path):
    model = ts.bert_classifier()
    path = tmp_path / "c.onnx"
    onnx.save(model, path)
    p = subprocess.run([HUSH, "plan", str(path), "--seq", "8", "--net", "wan", "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    weight_steps = [s for s in rep["steps"] if s["choice"]]
    assert weight_steps and all(s["choice"] in ("module", "triples") and "beats" in s["why"] for s in weight_steps)
    assert {f["preset"] for f in rep["fixed"]} == {"module", "triples"}
    assert rep["cpu"] and "simulated" in rep["note"]
    d = subprocess.run([HUSH, "plan", str(path), "--seq", "8", "--mode", "dealer", "--json"], capture_output=True, text=True, timeout=300)
    assert d.returncode == 0, d.stderr
    rd = json.loads(d.stdout)
    assert all(s["choice"] == "triples" for s in rd["steps"] if s["choice"]) and [f["preset"] for f in rd["fixed"]] == ["triples"]
    # interactive: HE is the preset's one backend (a fixed choice)
    i = subprocess.run([HUSH, "plan", str(path), "--seq", "8", "--mode", "interactive", "--json"], capture_output=True, text=True, timeout=300)
    assert i.returncode == 0, i.stderr
    ri = json.loads(i.stdout)
    assert all(s["choice"] == "he" for s in ri["steps"] if s["choice"]) and [f["preset"] for f in ri["fixed"]] == ["he"]
    assert "no module and no dealer" in ri["note"]
    # silent: the interactive plan on SilentFlow COTs, and it says the modules are simulated
    s = subprocess.run([HUSH, "plan", str(path), "--seq", "8", "--mode", "silent", "--json"], capture_output=True, text=True, timeout=300)
    assert s.returncode == 0, s.stderr
    rs = json.loads(s.stdout)
    assert [f["preset"] for f in rs["fixed"]] == ["he"] and "simulated" in rs["note"] and "no hardware protection" in rs["note"]
    bad = subprocess.run([HUSH, "plan", str(path), "--mode", "malicious-client"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "malicious-client" in bad.stderr


@pytest.mark.parametrize("mode", ["interactive", "silent"])
def test_embed_interactive_matches_onnxruntime_with_no_module_and_no_dealer(tmp_path, mode):
    """hush embed --mode interactive|silent (both parties in this process):
    Cheetah HE linear layers, cf2 and every correlation on Ferret COTs
    (interactive) or on SilentFlow COTs (silent); logits within the tee
    preset's bound of onnxruntime's and of the fixed-point reference."""
    model = ts.bert_classifier()
    path = tmp_path / "c.onnx"
    onnx.save(model, path)
    inputs = ts.sample_inputs(token_types=True)
    ref = ort.InferenceSession(str(path)).run(None, inputs)[0]
    for k in ("input_ids", "attention_mask", "token_type_ids"):
        np.save(tmp_path / f"{k}.npy", inputs[k])
    out = tmp_path / "out.npy"
    p = subprocess.run([HUSH, "embed", "--model", str(path), "--ids", str(tmp_path / "input_ids.npy"), "--mask", str(tmp_path / "attention_mask.npy"),
                        "--token-types", str(tmp_path / "token_type_ids.npy"), "--out", str(out), "--mode", mode, "--check", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    assert rec["mode"] == mode and rec["plan"]["linear"] == "he"
    if mode == "interactive":
        assert "no module and no dealer" in rec["tee_note"]
    else:
        assert "SilentFlow" in rec["tee_note"] and "no hardware protection" in rec["tee_note"]
    assert rec["reference_max_abs_diff"] < 0.01
    assert np.abs(np.load(out) - ref).max() < 0.02


def test_served_plans_mixed_auto_and_mismatched(tmp_path):
    """hush serve --plan FILE (a per-operator mix) and --plan auto over two
    processes: a client with the same plan file, or with --plan auto, runs
    and matches onnxruntime; a client expecting the preset is refused at the
    hello naming both plans; a plan file with a bad entry is refused at the
    session, naming the entry."""
    model = ts.bert_classifier()
    path = tmp_path / "c.onnx"
    onnx.save(model, path)
    inputs = ts.sample_inputs(token_types=True)
    ref = ort.InferenceSession(str(path)).run(None, inputs)[0]
    plan = tmp_path / "mix.toml"
    plan.write_text('linear = "module"\n[ops]\nlinear = "triples"\n')
    saddr = free_addr()
    srv = Listening(["serve", "--model", str(path), "--listen", saddr, "--plan", str(plan)], saddr, tmp_path)
    try:
        p = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp, "--plan", str(plan)])
        assert p.returncode == 0, p.stderr
        rec = json.loads(p.stdout)
        assert rec["plan"]["linear"] == "module" and rec["plan"]["overrides"], rec["plan"]
        assert all(o["linear"] == "triples" for o in rec["plan"]["overrides"])
        assert float(np.abs(np.load(tmp_path / "remote.npy") - ref).max()) <= TOL
        q = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp])
        assert q.returncode != 0 and "plan mismatch" in q.stderr and "the server runs" in q.stderr and "preset" in q.stderr, q.stderr
        a = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp, "--plan", "auto"])
        assert a.returncode == 0, a.stderr
        # the same from Python: the plan file, auto, and the preset refused
        import hush

        out, rep = hush.embed_remote(saddr, inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"],
                                     pin=srv.fp, plan=plan, report=True)
        assert float(np.abs(out - ref).max()) <= TOL and rep["plan"]["overrides"] and rep["by_op"]["linear"]["rounds"] > 0
        hush.embed_remote(saddr, inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"], pin=srv.fp, plan="auto")
        with pytest.raises(RuntimeError, match="plan mismatch"):
            hush.embed_remote(saddr, inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"], pin=srv.fp)
    finally:
        srv.stop()
    saddr = free_addr()
    srv = Listening(["serve", "--model", str(path), "--listen", saddr, "--plan", "auto", "--net", "wan"], saddr, tmp_path)
    try:
        a = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp, "--plan", "auto", "--net", "wan"])
        assert a.returncode == 0, a.stderr
        assert float(np.abs(np.load(tmp_path / "remote.npy") - ref).max()) <= TOL
    finally:
        srv.stop()
    bad = tmp_path / "bad.toml"
    bad.write_text('[ops]\nsoftmax = "triples"\n')
    saddr = free_addr()
    srv = Listening(["serve", "--model", str(path), "--listen", saddr, "--plan", str(bad)], saddr, tmp_path)
    try:
        q = remote_embed(tmp_path, saddr, inputs, ["--pin", srv.fp, "--plan", str(bad)])
        assert q.returncode != 0 and "ops.softmax" in q.stderr, q.stderr
    finally:
        srv.stop()


def test_bench_infer_runs_encoder_graphs_with_the_plan_in_the_record(tmp_path):
    """hush bench infer --model FILE.onnx: tee in one process with --plan auto
    (predicted beside measured), and dealer over loopback TCP + TLS."""
    model = ts.bert_classifier()
    path = tmp_path / "c.onnx"
    onnx.save(model, path)
    p = subprocess.run([HUSH, "bench", "infer", "--model", str(path), "--seq", "8", "--transport", "mem", "--plan", "auto", "--json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, HOME=str(tmp_path)))
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["runtime"] == "graph" and r["plan"]["linear"] == "module" and r["predicted_s"] > 0 and r["total_s"] > 0
    assert "simulated" in r["tee_note"]
    d = subprocess.run([HUSH, "bench", "infer", "--model", str(path), "--seq", "8", "--mode", "dealer", "--transport", "tcp", "--json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, HOME=str(tmp_path)))
    assert d.returncode == 0, d.stderr
    rd = json.loads(d.stdout)
    assert rd["tls"] and rd["plan"]["linear"] == "triples" and rd["plan"]["public_bound"]["softmax"] > 0 and rd["rounds"] > 0
    bad = subprocess.run([HUSH, "bench", "infer", "--model", str(path), "--seq", "8", "--mode", "dealer", "--transport", "mem"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--transport tcp" in bad.stderr


def test_hush_plan_client_budget_for_encoder_graphs(tmp_path):
    """`hush plan --max-mem / --client-profile` on an encoder graph: the
    client's heap peak is measured per step (the hush binary's counting
    allocator); every chosen backend is within the budget, the report names
    each candidate's memory, and a budget no step can meet is refused naming
    the step."""
    model = ts.bert_classifier()
    path = tmp_path / "c.onnx"
    onnx.save(model, path)
    p = subprocess.run([HUSH, "plan", str(path), "--seq", "8", "--max-mem", "1GiB", "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["max_mem"] == 1 << 30 and rep["client_mem_method"]
    chosen = [s for s in rep["steps"] if s["choice"]]
    assert chosen and all(isinstance(s["client_mem_bytes"], int) and 0 < s["client_mem_bytes"] <= 1 << 30 for s in chosen)
    for s in chosen:
        mine = [c for c in s["candidates"] if c["backend"] == s["choice"]]
        assert len(mine) == 1 and mine[0]["within_budget"]
    assert 0 < rep["auto"]["client_peak_bytes"] <= 1 << 30
    assert all(f["client_peak_bytes"] > 0 for f in rep["fixed"])
    # the weak client's profile: its 512 MiB budget and its CPU share
    w = subprocess.run([HUSH, "plan", str(path), "--seq", "8", "--client-profile", "weak", "--json"], capture_output=True, text=True, timeout=300)
    assert w.returncode == 0, w.stderr
    rw = json.loads(w.stdout)
    assert rw["client_profile"] == "weak" and rw["max_mem"] == 512 << 20
    # a budget below what any step needs: refused, naming a step
    q = subprocess.run([HUSH, "plan", str(path), "--seq", "8", "--max-mem", "4KiB"], capture_output=True, text=True, timeout=300)
    assert q.returncode != 0 and "step " in q.stderr and "MiB at the client" in q.stderr and "--max-mem" in q.stderr, q.stderr
    bad = subprocess.run([HUSH, "plan", str(path), "--client-profile", "fast"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--client-profile fast" in bad.stderr
