"""A small version of scripts/load.py in the test command: a few
concurrent clients against `hush serve` on loopback (TLS, pinned), a
quarter of them misbehaving (garbage, disconnects, silence). Every honest
client must get the reference logits, the server must stay up and log one
line per session."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HUSH = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "hush")


@pytest.mark.skipif(not os.path.exists(HUSH), reason="target/release/hush not built")
def test_load_small():
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "load.py"), "--hush", HUSH, "--clients", "6",
           "--sessions", "24", "--silent-secs", "2", "--close-wait", "15", "--seed", "3", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 0, rep
    assert rep["server_alive"]
    assert rep["honest_failed"] == 0 and rep["honest_correct"] == rep["by_kind"]["honest"] > 0, rep
    assert sum(rep["by_kind"].values()) == 24
    # one line per session (plus the banner), failed ones included
    assert rep["server_log_lines"] >= 24, rep["server_log_sample"]


@pytest.mark.skipif(not os.path.exists(HUSH), reason="target/release/hush not built")
def test_load3_small():
    """scripts/load3.py in small: three `hush node`s (TLS, pinned) and a
    few concurrent submitters, a quarter misbehaving (garbage, disconnects,
    silence, `hush job` killed mid-job). Every honest job's output must be
    the plaintext one, the nodes must stay up."""
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "load3.py"), "--hush", HUSH, "--clients", "6",
           "--jobs", "24", "--silent-secs", "2", "--close-wait", "15", "--node-timeout", "10",
           "--idle-at", "--settle", "1", "--seed", "3", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 0, rep
    assert rep["nodes_alive"]
    assert rep["honest_failed"] == 0 and rep["honest_correct"] == rep["by_kind"]["honest"] > 0, rep
    assert sum(rep["by_kind"].values()) == 24
    assert rep["by_kind"]["honest"] < 24, "some submitters must misbehave for the test to have power"
