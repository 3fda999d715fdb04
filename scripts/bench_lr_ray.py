#!/usr/bin/env python3
"""Sharded vertical LR (hush.ray) on SHAPER's shape, both parties on this
machine, each with its own local Ray cluster (two nodes on loopback), and
the record appended to bench/records/lr-ray.jsonl.

  .venv/bin/python scripts/bench_lr_ray.py --workers 2                 # one whole epoch of 1M samples
  .venv/bin/python scripts/bench_lr_ray.py --workers 1 --max-batches 4 # the first 4 batches only
  .venv/bin/python scripts/bench_lr_ray.py --samples 100000 --workers 2 --no-record

Shape (SHAPER, Table 6): --samples rows × (30,000 labels-party + 70,000
features-party) sparse features at density 0.02 % (about 6 + 14 non-zeros
per row, values in [-1, 1]), labels from a planted model; Paillier-2048,
cubic sigmoid, batch 4,096, default (fast-link) mode, pinned TLS between
each worker pair. With --max-batches the run stops after that many batches
of epoch 0 (the record says so: `batches_measured` < `batches_per_epoch`).

Each party's process generates its own columns from the same seed (the
labels party also the labels), so nothing but the protocol crosses between
them. The record carries the CPU, the load before and after, the date, K,
the nodes the workers ran on, the epoch's (or the measured batches') wall
time, per-batch time and both parties' link bytes.
"""

import argparse
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import record as _rec  # noqa: E402  (cpu_model, load1, commit)


def make_data(n, d_l, d_f, density, seed, role):
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    d = d_l + d_f
    nnz_row = max(1, int(round(d * density)))
    cols = rng.integers(0, d, size=(n, nnz_row))
    vals = rng.uniform(-1, 1, size=(n, nnz_row))
    w = rng.normal(size=d)
    z = (vals * w[cols]).sum(axis=1)
    y = (z > 0).astype(np.float64)
    mine = (cols < d_l) if role == "labels" else (cols >= d_l)
    off = 0 if role == "labels" else d_l
    r_idx = np.repeat(np.arange(n), nnz_row)[mine.ravel()]
    X = sp.csr_matrix((vals.ravel()[mine.ravel()], (r_idx, cols.ravel()[mine.ravel()] - off)),
                      shape=(n, d_l if role == "labels" else d_f))
    X.sum_duplicates()
    return X, (y if role == "labels" else None)


def party(spec):
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(spec["nodes"] - 1):
        c.add_node(num_cpus=1)
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
    c.wait_for_nodes()
    import hush.ray as hr

    t = time.time()
    X, y = make_data(spec["samples"], 30000, 70000, spec["density"], spec["seed"], spec["role"])
    gen_s = time.time() - t
    kw = dict(workers=spec["workers"], epochs=1, batch=spec["batch"], lr=0.5, sigmoid="cubic", reveal=False,
              out=spec["out"], worker_cpus=0.5)
    if spec["role"] == "labels":
        kw.update(listen=spec["addr"], identity=spec["identity"])
    else:
        kw.update(peer=spec["addr"], pin=spec["pin"])
    if spec.get("max_batches"):
        kw["_max_batches"] = spec["max_batches"]
    try:
        r = hr.train(spec["role"], X, y, **kw)
        r = {"ok": True, "gen_s": gen_s, "nnz": int(X.nnz), **{k: v for k, v in r.items() if k != "psi"}}
    except Exception as e:  # noqa: BLE001
        r = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    ray.shutdown()
    c.shutdown()
    print(json.dumps(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=2, help="Ray nodes per party's cluster (default 2)")
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--density", type=float, default=0.0002)
    ap.add_argument("--max-batches", type=int, default=0, help="stop after this many batches of epoch 0 (0: the whole epoch)")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--party", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.party:
        party(json.loads(a.party))
        return 0
    hush = _rec.find_hush(None)
    tmp = f"/tmp/hush-lr-ray-{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    kg = subprocess.run([hush, "keygen", "--out", f"{tmp}/id"], capture_output=True, text=True, check=True)
    pin = re.search(r"sha256:[0-9a-f]{64}", kg.stdout).group(0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = dict(samples=a.samples, workers=a.workers, nodes=a.nodes, batch=a.batch, density=a.density, seed=a.seed,
                max_batches=a.max_batches, addr=f"127.0.0.1:{port}")
    specs = [dict(base, role="labels", identity=f"{tmp}/id", out=f"{tmp}/l.json"),
             dict(base, role="features", pin=pin, out=f"{tmp}/f.json")]
    commit0 = _rec.commit()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    load0 = _rec.load1()
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--party", json.dumps(s)], stdout=subprocess.PIPE, text=True)
             for s in specs]
    outs = [json.loads((p.communicate()[0].strip().splitlines() or ["{}"])[-1]) for p in procs]
    wall = time.time() - t0
    load1 = _rec.load1()
    lab, feat = outs
    if not (lab.get("ok") and feat.get("ok")):
        print(json.dumps(outs), file=sys.stderr)
        return 1
    nb_epoch = -(-a.samples // a.batch)
    measured = lab["batches_run"]
    rec = {
        "bench": "lr-ray",
        "shape": f"{a.samples}x(30000+70000)",
        "density": a.density,
        "workers": a.workers,
        "nodes_per_party": lab["nodes"],
        "batch": a.batch,
        "batches_per_epoch": nb_epoch,
        "batches_measured": measured,
        "whole_epoch": measured == nb_epoch,
        "epoch_s": lab["epoch_s"][0] if measured == nb_epoch else None,
        "measured_s": lab["epoch_s"][0],
        # the epoch's triples are made up front (triples_s); the rest is per batch
        "per_batch_s": (lab["epoch_s"][0] - lab["triples_s"]) / measured,
        "triples_s": lab.get("triples_s"),
        "bytes": lab["bytes"],
        "bytes_per_sample": lab["bytes"] / min(a.samples, measured * a.batch),
        "setup_s": lab.get("setup_s"),
        "process_wall_s": wall,
        "data_gen_s": [lab["gen_s"], feat["gen_s"]],
        "nnz": [lab["nnz"], feat["nnz"]],
        "paillier_bits": 2048,
        "sigmoid": "cubic",
        "tls": True,
        "cpu": _rec.cpu_model(),
        "cores": os.cpu_count(),
        "machine": f"both parties' Ray clusters ({a.nodes} nodes each, {a.workers} workers each) on this machine's {os.cpu_count()} cores",
        "date": date,
        "load": f"{load0:.2f} \u2192 {load1:.2f}",
        "commit": commit0,
        "command": "python3 scripts/bench_lr_ray.py " + " ".join(sys.argv[1:]),
    }
    print(json.dumps(rec))
    if not a.no_record:
        with open(os.path.join(ROOT, "bench", "records", "lr-ray.jsonl"), "a") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
