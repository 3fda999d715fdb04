"""Graphs exported by torch and optimum themselves (not by hush's scripts):
``tests/fixtures/torch`` (see its README). Each imports and runs privately and
matches onnxruntime within the fixed-point bound: in one process (tee), and
served across two processes on TCP + TLS with pins in tee, dealer and
interactive mode."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_graph_runtime as G  # noqa: E402

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "torch"
MODELS = ["prenorm_block_op13", "bert_classifier_tf4_op17", "bert_classifier_tf5_op17", "optimum_classifier_op14"]

pytestmark = pytest.mark.skipif(not os.path.exists(G.HUSH), reason="target/release/hush not built")


def inputs_for(path, seed=3):
    sess = ort.InferenceSession(str(path))
    names = [i.name for i in sess.get_inputs()]
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 200, (2, 9)).astype(np.int64)
    mask = np.ones((2, 9), np.int64)
    mask[1, 6:] = 0  # the second sentence is padded
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in names:
        tt = np.zeros_like(ids)
        tt[:, 4:] = 1
        feed["token_type_ids"] = tt
    assert set(names) == set(feed), names
    return feed, sess.run(None, feed)[0]


def err_on_real_tokens(out, ref, mask):
    d = np.abs(out - ref)
    return float(d[mask.astype(bool)].max() if out.ndim == 3 else d.max())


@pytest.mark.parametrize("name", MODELS)
def test_export_runs_privately_and_matches_onnxruntime(tmp_path, name):
    path = FIX / f"{name}.onnx"
    feed, ref = inputs_for(path)
    p = G.run_embed(tmp_path, path, feed)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    out = np.load(tmp_path / "out.npy")
    assert out.shape == ref.shape
    err = err_on_real_tokens(out, ref, feed["attention_mask"])
    print(name, "max |hush - onnxruntime|", err)
    assert err <= G.TOL, err
    ops = {o["op"] for o in rec["ops"]}
    assert {"embed", "linear", "layernorm", "gelu", "softmax", "matmul", "mask"} <= ops, ops


@pytest.mark.parametrize("name,mode", [(m, mode) for m in ("prenorm_block_op13", "bert_classifier_tf5_op17") for mode in ("tee", "dealer", "interactive")]
                         + [("bert_classifier_tf4_op17", "dealer"), ("optimum_classifier_op14", "interactive"), ("bert_classifier_tf5_op17", "silent")])
def test_export_served_across_processes(tmp_path, name, mode):
    path = FIX / f"{name}.onnx"
    feed, ref = inputs_for(path, seed=4)
    procs = []
    try:
        flags = [] if mode == "tee" else ["--mode", mode]
        if mode == "dealer":
            daddr = G.free_addr()
            dealer = G.Listening(["dealer", "--listen", daddr], daddr, tmp_path)
            procs.append(dealer)
            flags += ["--dealer", daddr, "--dealer-pin", dealer.fp]
        saddr = G.free_addr()
        srv = G.Listening(["serve", "--model", str(path), "--listen", saddr] + flags, saddr, tmp_path)
        procs.append(srv)
        p = G.remote_embed(tmp_path, saddr, feed, ["--pin", srv.fp] + flags)
        assert p.returncode == 0, p.stderr
        rec = json.loads(p.stdout)
        assert rec["mode"] == mode
        out = np.load(tmp_path / "remote.npy")
        err = err_on_real_tokens(out, ref, feed["attention_mask"])
        print(name, mode, "max |hush - onnxruntime|", err)
        assert err <= G.TOL, err
    finally:
        for pr in reversed(procs):
            pr.stop()
