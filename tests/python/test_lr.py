"""Vertical logistic regression (hush-lr) on scikit-learn's breast_cancer.

The data set ships inside scikit-learn (no network); the split is vertical:
features 0-14 and the labels at one party, 15-29 at the other.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HUSH = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "hush")


def _hush(*args, env=None, timeout=600):
    assert os.path.exists(HUSH), f"{HUSH} is not built (run scripts/setup.sh)"
    return subprocess.run([HUSH, *args], capture_output=True, text=True, env=env, timeout=timeout)


def _env(**extra):
    env = dict(os.environ)
    env["HUSH_PYTHON"] = sys.executable
    env.update(extra)
    return env


def test_breast_cancer_accuracy_matches_sklearn_and_plaintext():
    p = _hush("bench", "lr", "--dataset", "breast_cancer", "--json", env=_env())
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["dataset"] == "breast_cancer"
    assert r["features_labels"] == 15 and r["features_other"] == 15
    assert r["samples_train"] + r["samples_test"] == 569
    acc, sk, plain = r["accuracy"], r["sklearn_accuracy"], r["plaintext_accuracy"]
    # within 1 point of scikit-learn (same regularisation) and of the
    # plaintext run of the same mini-batch algorithm
    assert abs(acc - sk) <= 0.01 + 1e-9, r
    assert abs(acc - plain) <= 0.01 + 1e-9, r
    assert acc > 0.85, r
    assert r["bytes"] > 0 and r["rounds"] > 0 and r["path"]


def test_breast_cancer_needs_python():
    env = {k: v for k, v in os.environ.items() if k not in ("HUSH_PYTHON", "VIRTUAL_ENV")}
    p = _hush("bench", "lr", "--dataset", "breast_cancer", "--json", env=env)
    assert p.returncode != 0
    assert "HUSH_PYTHON" in p.stderr and "scikit-learn" in p.stderr, p.stderr
    p = _hush("bench", "lr", "--dataset", "iris", "--json", env=_env())
    assert p.returncode != 0 and "breast_cancer" in p.stderr, p.stderr


# ---- two processes on loopback, from files: hush train, then hush predict ----

import re
import threading

import numpy as np


def _write_libsvm(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            cells = " ".join(f"{j + 1}:{float(v)!r}" for j, v in enumerate(row) if v != 0)
            f.write(f"{int(label)} {cells}\n")


def _sym(train, test):
    lo, hi = train.min(0), train.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    f = lambda a: np.where(hi > lo, 2 * (a - lo) / span - 1, 0.0)  # noqa: E731
    return f(train), f(test)


def _pair(listen_args, peer_args, timeout=600):
    """Runs `hush ... --listen 127.0.0.1:0` and, once it prints its address
    and fingerprint, `hush ... --peer ADDR --pin FP`. Returns both results."""
    lp = subprocess.Popen([HUSH, *listen_args, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    fp = addr = None
    lines = []
    while fp is None or addr is None:
        line = lp.stdout.readline()
        assert line, f"listener ended early: {lp.stderr.read()}"
        lines.append(line)
        m = re.search(r"fingerprint (sha256:[0-9a-f]{64})", line)
        fp = fp or (m and m.group(1))
        m = re.search(r"listening (\S+)", line)
        addr = addr or (m and m.group(1))
    out = {}
    t = threading.Thread(target=lambda: out.update(l=lp.communicate(timeout=timeout)))
    t.start()
    pp = subprocess.run([HUSH, *peer_args, "--peer", addr, "--pin", fp], capture_output=True, text=True,
                        timeout=timeout)
    t.join()
    return (lp.returncode, "".join(lines) + out["l"][0], out["l"][1]), (pp.returncode, pp.stdout, pp.stderr)


@pytest.mark.parametrize("mode", [[], ["--low-bandwidth"]], ids=["default", "low-bandwidth"])
def test_two_processes_train_and_predict_breast_cancer(tmp_path, mode):
    """Labels party: libsvm (features 0-14 + labels); features party: SciPy
    .npz (15-29). Trained model stays shared; `hush predict` with both
    parties; held-out accuracy within 1 point of scikit-learn's. Over TCP +
    TLS, in the default mode and with --low-bandwidth (slot-packed model
    shares, balanced backward, per-batch triples)."""
    scipy_sparse = __import__("scipy.sparse", fromlist=["csr_matrix"])
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=11, stratify=y)
    la, lb = _sym(Xtr[:, :15], Xte[:, :15])
    fa, fb = _sym(Xtr[:, 15:], Xte[:, 15:])
    _write_libsvm(tmp_path / "lab_train.svm", la, ytr)
    _write_libsvm(tmp_path / "lab_test.svm", lb, yte)
    scipy_sparse.save_npz(tmp_path / "feat_train.npz", scipy_sparse.csr_matrix(fa))
    scipy_sparse.save_npz(tmp_path / "feat_test.npz", scipy_sparse.csr_matrix(fb))
    lam = 0.03
    hyper = ["--epochs", "20", "--batch", "32", "--lr", "1", "--lr-decay", "1", "--l2", str(lam), *mode]
    (lc, lo, le), (fc, fo, fe) = _pair(
        ["train", "--role", "labels", "--data", str(tmp_path / "lab_train.svm"), "--out", str(tmp_path / "lab.json"), *hyper],
        ["train", "--role", "features", "--data", str(tmp_path / "feat_train.npz"), "--out", str(tmp_path / "feat.json"), *hyper],
    )
    assert lc == 0 and fc == 0, (le, fe)
    lab = json.loads((tmp_path / "lab.json").read_text())
    assert lab["role"] == "labels" and lab["intercept"] is True and len(lab["own_share"]) == 16
    assert "weights_labels_party" not in lab  # not revealed
    (lc, lo, le), (fc, fo, fe) = _pair(
        ["predict", "--model", str(tmp_path / "lab.json"), "--data", str(tmp_path / "lab_test.svm"), "--out", str(tmp_path / "scores.csv")],
        ["predict", "--model", str(tmp_path / "feat.json"), "--data", str(tmp_path / "feat_test.npz")],
    )
    assert lc == 0 and fc == 0, (le, fe)
    assert "went to the labels party" in fe
    rows = (tmp_path / "scores.csv").read_text().splitlines()
    assert rows[0] == "score,probability,prediction" and len(rows) == 1 + len(yte)
    pred = np.array([int(r.split(",")[2]) for r in rows[1:]])
    acc = float((pred == yte).mean())
    A = np.hstack([la, fa, np.ones((len(ytr), 1))])
    At = np.hstack([lb, fb, np.ones((len(yte), 1))])
    sk = LogisticRegression(C=1 / (lam * len(ytr)), fit_intercept=False, max_iter=100000, tol=1e-10).fit(A, ytr)
    sk_acc = float((sk.predict(At) == yte).mean())
    assert abs(acc - sk_acc) <= 0.01 + 1e-9, (acc, sk_acc)
    # a shares-only model cannot score alone
    p = _hush("predict", "--model", str(tmp_path / "lab.json"), "--data", str(tmp_path / "lab_test.svm"), "--out", str(tmp_path / "x.csv"))
    assert p.returncode != 0 and "--reveal" in p.stderr and not (tmp_path / "x.csv").exists()


def test_revealed_model_scores_alone_like_the_shared_one(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(60, 6))
    y = (X @ np.array([1.5, -1, 0.5, 2, -1.5, 1]) > 0).astype(int)
    _write_libsvm(tmp_path / "a.svm", X[:, :3], y)
    scipy_sparse = __import__("scipy.sparse", fromlist=["csr_matrix"])
    scipy_sparse.save_npz(tmp_path / "b.npz", scipy_sparse.csr_matrix(X[:, 3:]), compressed=False)
    hyper = ["--epochs", "2", "--batch", "20", "--sigmoid", "linear", "--reveal"]
    (lc, _, le), (fc, _, fe) = _pair(
        ["train", "--role", "labels", "--data", str(tmp_path / "a.svm"), "--out", str(tmp_path / "a.json"), *hyper],
        ["train", "--role", "features", "--data", str(tmp_path / "b.npz"), "--out", str(tmp_path / "b.json"), *hyper],
    )
    assert lc == 0 and fc == 0, (le, fe)
    a, b = json.loads((tmp_path / "a.json").read_text()), json.loads((tmp_path / "b.json").read_text())
    assert a["weights_labels_party"] == b["weights_labels_party"] and len(a["weights_labels_party"]) == 4
    (lc, _, le), (fc, _, fe) = _pair(
        ["predict", "--model", str(tmp_path / "a.json"), "--data", str(tmp_path / "a.svm"), "--out", str(tmp_path / "shared.csv")],
        ["predict", "--model", str(tmp_path / "b.json"), "--data", str(tmp_path / "b.npz")],
    )
    assert lc == 0 and fc == 0, (le, fe)
    _write_libsvm(tmp_path / "whole.svm", X, y)
    p = _hush("predict", "--model", str(tmp_path / "b.json"), "--data", str(tmp_path / "whole.svm"), "--out", str(tmp_path / "alone.csv"))
    assert p.returncode == 0, p.stderr
    shared = np.loadtxt(tmp_path / "shared.csv", delimiter=",", skiprows=1)
    alone = np.loadtxt(tmp_path / "alone.csv", delimiter=",", skiprows=1)
    # the same model, opened or shared: scores agree up to fixed point
    assert np.abs(shared[:, 0] - alone[:, 0]).max() < 0.01
    assert np.abs(alone[:, 0]).max() > 0.1
    # the shared-model predict refuses mismatched model files and data
    p = _hush("predict", "--model", str(tmp_path / "a.json"), "--data", str(tmp_path / "whole.svm"), "--listen", "127.0.0.1:0", "--out", str(tmp_path / "y.csv"))
    assert p.returncode != 0 and "columns but the model has weights for 3" in p.stderr, p.stderr


def test_bench_lr_table_is_labelled_extrapolated():
    # small basis (1 batch of 8 samples, 1024-bit keys: shape only, no figure is checked)
    p = _hush("bench", "lr", "--table", "--batch", "8", "--measure-batches", "1", "--bits", "1024", "--json", env=_env())
    assert p.returncode == 0, p.stderr
    recs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    cells = [r for r in recs if r["bench"] == "lr_table"]
    assert [r["samples"] for r in cells] == [100_000, 200_000, 400_000, 600_000, 800_000, 1_000_000]
    for r in cells:
        assert r["extrapolated"] is True and "extrapolated" in r["basis"] and r["measured_samples"] == 8
        assert r["features_labels"] == 30_000 and r["features_other"] == 70_000 and r["density"] == 0.0002
        assert r["epoch_min"] > 0 and r["path"] and r["cpu"]
    # linear in samples
    assert abs(cells[-1]["epoch_min"] / cells[0]["epoch_min"] - 10) < 1e-6
    basis = recs[-1]
    assert basis["bench"] == "lr" and basis["samples"] == 8 and basis["features_other"] == 70_000


def test_bench_lr_on_an_emulated_network_reports_directions():
    # SHAPER's network (40 Mbps per direction, 40 ms one-way) on a tiny run:
    # the record names it, and the two directions' bytes add up to the total
    p = _hush("bench", "lr", "--samples", "64", "--features", "3,5", "--density", "0.5", "--batch", "32",
              "--bits", "1024", "--sigmoid", "linear", "--net", "shaper", "--transport", "mem", "--json", env=_env())
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["net"] == "shaper" and r["transport"] == "mem"
    assert r["bytes_labels_to_features"] > 0 and r["bytes_features_to_labels"] > 0
    assert r["bytes_labels_to_features"] + r["bytes_features_to_labels"] == r["bytes"]
    # the emulation never delivers early: at least one 40 ms flight is felt
    # (a lower bound only, which load cannot break)
    assert r["wall_s"] > 0.04
    p = _hush("bench", "lr", "--net", "adsl", "--json", env=_env())
    assert p.returncode != 0 and "--net" in p.stderr and "shaper" in p.stderr, p.stderr
