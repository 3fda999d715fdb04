#!/usr/bin/env python3
"""Encoder graphs exported by torch itself — the test inputs hush did not make.

``tests/fixtures/torch/*.onnx`` were written by this script with the
versions in ``tests/fixtures/torch/README.md``: ``torch.onnx.export``
(the TorchScript exporter, ``dynamo=False``) of

* ``prenorm_block_op13.onnx`` — a one-block pre-norm encoder written as a
  plain ``nn.Module`` (``nn.LayerNorm``, which opset 13 decomposes into
  ReduceMean/Sub/Pow/Sqrt/Div; ``nn.functional.gelu`` → Erf; the additive
  attention mask ``(1 - mask) · finfo.min``), at opset 13;
* ``bert_classifier_tf4_op17.onnx`` and ``bert_classifier_tf5_op17.onnx``
  — Hugging Face ``transformers``' ``BertForSequenceClassification``
  (random init, 2 layers, hidden 64, 3 labels) at opset 17, exported under
  transformers 4.57 and 5.24, whose graphs differ: fused
  ``LayerNormalization``, the attention scale split as √s on each side
  (4.x) or the ``sdpa`` attention's mask construction
  (Range/GreaterOrEqual/And/Gather/Expand on the mask) and its NaN guard
  ``Where(IsNaN(p), 0, p)`` (5.x), Slice ends of int64's maximum, a pooler
  and a classification head.

``optimum_classifier_op14.onnx`` is the same classifier (transformers 4.57,
saved with ``save_pretrained``) exported by Hugging Face ``optimum``:

    optimum-cli export onnx -m DIR --task text-classification --opset 14 OUT

CI never runs it (torch is several GB); the fixtures are committed, and
``tests/python/test_torch_exports.py`` checks hush against onnxruntime on
them. To remake them (torch, transformers, onnx installed):

    python scripts/torch_export.py tests/fixtures/torch
"""

import sys

import torch
from torch import nn


class PreNorm(nn.Module):
    def __init__(s, vocab=200, d=64, h=4, ff=128, maxpos=64):
        super().__init__()
        s.emb = nn.Embedding(vocab, d)
        s.pos = nn.Embedding(maxpos, d)
        s.register_buffer("position_ids", torch.arange(maxpos).unsqueeze(0))
        s.ln1, s.ln2, s.lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        s.q, s.k, s.v, s.o = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        s.f1, s.f2 = nn.Linear(d, ff), nn.Linear(ff, d)
        s.h, s.d = h, d

    def forward(s, input_ids, attention_mask):
        b, n = input_ids.shape
        x = s.emb(input_ids) + s.pos(s.position_ids[:, :n])
        y = s.ln1(x)

        def heads(t):
            return t.view(b, n, s.h, s.d // s.h).transpose(1, 2)

        q, k, v = heads(s.q(y)), heads(s.k(y)), heads(s.v(y))
        sc = q @ k.transpose(-1, -2) / (s.d // s.h) ** 0.5
        m = (1.0 - attention_mask[:, None, None, :].to(sc.dtype)) * torch.finfo(sc.dtype).min
        p = torch.softmax(sc + m, dim=-1)
        a = (p @ v).transpose(1, 2).reshape(b, n, s.d)
        x = x + s.o(a)
        x = x + s.f2(nn.functional.gelu(s.f1(s.ln2(x))))
        return s.lnf(x)


class Classifier(nn.Module):
    def __init__(s, m):
        super().__init__()
        s.m = m

    def forward(s, input_ids, attention_mask, token_type_ids):
        return s.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits


def export(m, args, names, path, opset):
    m.eval()
    torch.onnx.export(m, args, path, dynamo=False, input_names=names, output_names=["out"], opset_version=opset,
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})
    print("wrote", path)


def main(out):
    import transformers
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    ids = torch.randint(0, 200, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    export(PreNorm(), (ids, mask), ["input_ids", "attention_mask"], f"{out}/prenorm_block_op13.onnx", 13)
    cfg = BertConfig(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     max_position_embeddings=64, num_labels=3)
    clf = Classifier(BertForSequenceClassification(cfg))
    export(clf, (ids, mask, torch.zeros(2, 10, dtype=torch.long)), ["input_ids", "attention_mask", "token_type_ids"],
           f"{out}/bert_classifier_tf{transformers.__version__.split('.')[0]}_op17.onnx", 17)
    print("torch", torch.__version__, "transformers", transformers.__version__)


if __name__ == "__main__":
    main(sys.argv[1])
