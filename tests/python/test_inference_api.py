"""The Python inference API: hush.run, hush.Server and hush.Client."""

import os

import numpy as np
import pytest

import hush

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "mnist_cnn.hushm")
SAMPLES = os.path.join(ROOT, "models", "samples")


def _samples():
    out = []
    for f in sorted(os.listdir(SAMPLES)):
        if f.endswith(".npy"):
            label = int(f.split("label")[1].split(".")[0])
            out.append((np.load(os.path.join(SAMPLES, f)), label))
    return out


def test_run_matches_label_and_reports_costs():
    x, label = _samples()[0]
    seen = []
    logits, rep = hush.run(MODEL, x, report=True, progress=lambda d, t: seen.append((d, t)))
    assert logits.shape == (1, 10) or logits.shape == (10,)
    assert int(np.argmax(logits)) == label
    assert rep  # costs are reported
    assert seen and seen[-1][0] == seen[-1][1]


def test_tami_and_fss_agree_on_the_prediction():
    x, label = _samples()[1]
    a = hush.run(MODEL, x, proto="fss")
    b = hush.run(MODEL, x, proto="tami")
    assert int(np.argmax(a)) == int(np.argmax(b)) == label
    # tami truncation is faithful (<= 1 ulp per truncation): logits stay close
    assert np.max(np.abs(a - b)) < 0.05


def test_server_and_clients():
    with hush.Server(MODEL) as srv:
        assert srv.fingerprint.startswith("sha256:") and len(srv.fingerprint) == 7 + 64
        for x, label in _samples()[:3]:
            with hush.Client(srv.addr, pin=srv.fingerprint) as c:
                assert c.input_shape
                logits, rep = c.infer(x, report=True)
                assert int(np.argmax(logits)) == label
                assert rep["bytes_sent"] > 0
        # A client with the wrong input shape gets a clear error; the server keeps serving.
        with hush.Client(srv.addr, pin=srv.fingerprint) as bad:
            with pytest.raises(ValueError, match="shape"):
                bad.infer(np.zeros((3, 3)))
        with hush.Client(srv.addr, pin=srv.fingerprint) as c:
            x, label = _samples()[0]
            assert int(np.argmax(c.infer(x))) == label
        # No pin, a wrong pin, or plaintext against this TLS server: refused.
        with pytest.raises(ValueError, match="pin"):
            hush.Client(srv.addr)
        wrong = "sha256:" + "00" * 32
        with pytest.raises(RuntimeError, match=wrong):
            hush.Client(srv.addr, pin=wrong)
        with pytest.raises(RuntimeError, match="TLS"):
            hush.Client(srv.addr, insecure=True)


def test_insecure_server_and_client():
    with hush.Server(MODEL, insecure=True) as srv:
        assert srv.fingerprint is None
        x, label = _samples()[1]
        with hush.Client(srv.addr, insecure=True) as c:
            assert int(np.argmax(c.infer(x))) == label


def test_bad_model_and_arguments():
    with pytest.raises(ValueError):
        hush.run(os.path.join(ROOT, "README.md"), np.zeros(3))
    with pytest.raises(ValueError):
        hush.run(MODEL, np.zeros((2, 2)))
    with pytest.raises(ValueError):
        hush.run(MODEL, _samples()[0][0], proto="nope")


def test_he_modes_run_and_serve():
    """interactive (HE linear layers + cf2 on Ferret) and silent (cf2 on module COTs)."""
    x, label = _samples()[2]
    fss = hush.run(MODEL, x)
    for mode in ("interactive", "silent"):
        logits, rep = hush.run(MODEL, x, mode=mode, report=True)
        assert rep["mode"] == mode and rep["proto"] == "cf2"
        assert int(np.argmax(logits)) == label
        # cf2's truncation is faithful (<= 1 ulp each): close to the exact fss run
        assert np.max(np.abs(logits - fss)) < 0.05
    with hush.Server(MODEL, mode="interactive") as srv:
        with hush.Client(srv.addr, pin=srv.fingerprint, mode="interactive") as c:
            assert int(np.argmax(c.infer(x))) == label
        with pytest.raises(Exception, match="mode mismatch"):
            with hush.Client(srv.addr, pin=srv.fingerprint) as c:
                c.infer(x)
    with pytest.raises(ValueError, match='does not run in mode="interactive"'):
        hush.run(MODEL, x, mode="interactive", proto="tami")


def test_malicious_client_mode_run_serve_and_refusals():
    """mode="malicious-client" (CRISP): hush.run with a dealer in this
    process, and a Server/Client pair over TLS with a `hush dealer` process;
    the hello agrees on the mode and on mac_s; no dealer is refused."""
    import socket
    import subprocess
    import sys
    import time

    x, label = _samples()[0]
    logits, rep = hush.run(MODEL, x, mode="malicious-client", report=True)
    assert int(np.argmax(logits)) == label
    assert rep["mode"] == "malicious-client" and rep["proto"] == "crisp"
    # the same logits as the semi-honest dealer path with exact (fss) gates
    assert np.array_equal(logits, hush.run(MODEL, x, mode="dealer", proto="fss"))
    with pytest.raises(ValueError, match="mac_s"):
        hush.run(MODEL, x, mac_s=40)
    with pytest.raises(ValueError, match="mac_s=8"):
        hush.run(MODEL, x, mode="malicious-client", mac_s=8)
    with pytest.raises(ValueError, match="dealer"):
        hush.Server(MODEL, mode="malicious-client")
    # CRISP's CKKS linear layers: opt-in, announced by a note (dealer-made
    # ciphertexts: no zero-knowledge proof needed); the honest result is the
    # dealt path's, bit for bit
    with pytest.warns(UserWarning, match="zero-knowledge proof of plaintext knowledge"):
        y_ckks, rep_ckks = hush.run(MODEL, x, mode="malicious-client", crisp_linear="ckks", report=True)
    assert np.array_equal(y_ckks, logits)
    assert rep_ckks["crisp_linear"] == "ckks" and rep["crisp_linear"] == "dealt"
    # online both run the same checked openings (issue 36); offline the CKKS
    # backend's HE responses went over the link instead of masked weights
    assert rep_ckks["bytes"] == rep["bytes"]
    assert rep_ckks["offline_bytes"] != rep["offline_bytes"]
    with pytest.raises(ValueError, match="crisp_linear"):
        hush.run(MODEL, x, crisp_linear="ckks")
    with pytest.raises(ValueError, match='crisp_linear="paillier": unknown'):
        hush.run(MODEL, x, mode="malicious-client", crisp_linear="paillier")

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    daddr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    code = "import sys, hush._cli; sys.exit(hush._cli.main(['hush', 'dealer', '--listen', %r]))" % daddr
    dealer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = dealer.stdout.readline().strip()
        assert line.startswith("fingerprint sha256:"), line
        dpin = line.split(" ", 1)[1]
        t = time.time()
        while True:
            try:
                socket.create_connection(tuple(daddr.rsplit(":", 1)[0:1]) + (int(daddr.rsplit(":", 1)[1]),), timeout=1).close()
                break
            except OSError:
                assert time.time() - t < 20
                time.sleep(0.05)
        kw = dict(mode="malicious-client", dealer=daddr, dealer_pin=dpin)
        with hush.Server(MODEL, **kw) as srv:
            with hush.Client(srv.addr, pin=srv.fingerprint, **kw) as c:
                for x, label in _samples()[:2]:
                    y, rep = c.infer(x, report=True)
                    assert int(np.argmax(y)) == label
                    assert rep["mac_check"] == "passed" and rep["checked_openings"] > 0
            with pytest.raises(RuntimeError, match="MAC parameter mismatch"):
                hush.Client(srv.addr, pin=srv.fingerprint, mac_s=48, **kw)
            with pytest.raises(RuntimeError, match="trust mode mismatch"):
                hush.Client(srv.addr, pin=srv.fingerprint, mode="dealer", dealer=daddr, dealer_pin=dpin)
            # a client of the other linear backend is refused at the hello
            with pytest.warns(UserWarning, match="zero-knowledge proof"):
                with pytest.raises(RuntimeError, match="linear backend mismatch"):
                    hush.Client(srv.addr, pin=srv.fingerprint, crisp_linear="ckks", **kw)
            assert srv.sessions()[0] >= 1
    finally:
        dealer.kill()
        dealer.wait()
