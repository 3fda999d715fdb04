"""Vertical logistic regression (hush-lr) on scikit-learn's breast_cancer.

The data set ships inside scikit-learn (no network); the split is vertical:
features 0-14 and the labels at one party, 15-29 at the other.
"""

import json
import os
import subprocess
import sys

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
