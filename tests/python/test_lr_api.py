"""hush.train_vertical: one party of a vertical LR training from Python
(two parties here in two threads of one process, over pinned TLS)."""

import json
import os
import re
import socket
import subprocess
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import hush

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HUSH = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "hush")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_train_vertical_two_parties(tmp_path):
    assert os.path.exists(HUSH), f"{HUSH} is not built (run scripts/setup.sh)"
    kg = subprocess.run([HUSH, "keygen", "--out", str(tmp_path / "id")], capture_output=True, text=True)
    assert kg.returncode == 0, kg.stderr
    fp = re.search(r"sha256:[0-9a-f]{64}", kg.stdout).group(0)
    rng = np.random.default_rng(3)
    n, w_star = 200, np.array([2.0, -1.5, 1.0, -2.0, 1.5, -1.0])
    X = rng.uniform(-1, 1, size=(n, 6))
    X[rng.uniform(size=X.shape) < 0.3] = 0.0  # some sparsity
    y = (X @ w_star > 0).astype(int)
    addr = f"127.0.0.1:{_free_port()}"
    hyper = dict(epochs=3, batch=32, lr=1.0, sigmoid="linear", reveal=True)
    res = {}

    def labels_party():
        try:
            res["l"] = hush.train_vertical("labels", X[:, :3], y, listen=addr, identity=tmp_path / "id",
                                           out=tmp_path / "l.json", **hyper)
        except Exception as e:  # noqa: BLE001
            res["l"] = e

    t = threading.Thread(target=labels_party)
    t.start()
    f = hush.train_vertical("features", sp.csr_matrix(X[:, 3:]), peer=addr, pin=fp, out=tmp_path / "f.json",
                            **hyper)
    t.join()
    lab = res["l"]
    assert not isinstance(lab, Exception), lab
    assert lab["role"] == "labels" and f["role"] == "features"
    assert lab["bytes"] > 0 and lab["rounds"] > 0 and lab["epochs"] == 3
    # both parties opened the same model: 3 weights + intercept, then 3
    assert lab["weights_labels_party"] == f["weights_labels_party"] and len(f["weights_labels_party"]) == 4
    assert lab["intercept"] is True
    w = np.array(f["weights_labels_party"][:3] + f["weights_features_party"])
    assert (np.sign(w) == np.sign(w_star)).all(), w
    acc = ((X @ w + f["weights_labels_party"][3] > 0) == y).mean()
    assert acc > 0.9, acc
    # the model files are the CLI's (hush predict reads them)
    m = json.loads((tmp_path / "f.json").read_text())
    assert m["role"] == "features" and len(m["own_share"]) == 3 and len(m["peer_share"]) == 4


def test_train_vertical_argument_errors(tmp_path):
    X = np.eye(4)
    with pytest.raises(ValueError, match="labels or features"):
        hush.train_vertical("boss", X, [0, 1, 0, 1], listen="127.0.0.1:0", out=tmp_path / "m.json")
    with pytest.raises(ValueError, match="exactly one of listen"):
        hush.train_vertical("labels", X, [0, 1, 0, 1], out=tmp_path / "m.json")
    with pytest.raises(ValueError, match="model would be lost"):
        hush.train_vertical("labels", X, [0, 1, 0, 1], listen="127.0.0.1:0")
    with pytest.raises(ValueError, match="labels for 4 rows"):
        hush.train_vertical("labels", X, [0, 1], listen="127.0.0.1:0", out=tmp_path / "m.json")
    with pytest.raises(ValueError, match="label 2"):
        hush.train_vertical("labels", X, [0, 1, 2, 1], listen="127.0.0.1:0", out=tmp_path / "m.json")
    with pytest.raises(ValueError, match="labels party only"):
        hush.train_vertical("features", X, [0, 1, 0, 1], peer="127.0.0.1:1", out=tmp_path / "m.json")
    with pytest.raises(ValueError, match="not finite"):
        hush.train_vertical("features", np.array([[np.nan]]), peer="127.0.0.1:1", out=tmp_path / "m.json")
    with pytest.raises(ValueError, match="2-D"):
        hush.train_vertical("features", np.zeros(3), peer="127.0.0.1:1", out=tmp_path / "m.json")
    with pytest.raises(RuntimeError, match="labels party needs labels"):
        hush.train_vertical("labels", X, listen="127.0.0.1:0", out=tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()
