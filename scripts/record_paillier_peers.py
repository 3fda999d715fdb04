#!/usr/bin/env python3
"""hush's batched Paillier (enc, dec, 64-bit ct·pt) beside pypaillier's
batch API, one core each, interleaved rounds in one run; appends every
run to bench/records/paillier.jsonl, stamped like scripts/record.py does
(cpu, date, load before → after, cores, command, commit), with a `session`
id and `round` so that one run's rows belong together.

  hush:       `hush bench paillier --bits B --json` (one thread), recorded
              with source "hush".
  pypaillier: scripts/paillier_peer.py under the Python given by --peer-python
              (a venv with `pip install pypaillier`; ../shared/peers/README.md),
              RAYON_NUM_THREADS=1, recorded with source "pypaillier <version>".

Usage:
  python3 scripts/record_paillier_peers.py --peer-python ~/.cache/hush-peers/paillier-venv/bin/python \\
          [--rounds 3] [--bits 2048] [--hush target/release/hush] [--nice -10]
          (--nice N runs both under `nice -n N`, the same for each; recorded)
  python3 scripts/record_paillier_peers.py --table [SESSION]   # ratios of a session (default: latest)
Standard library only.
"""

import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "bench", "records", "paillier.jsonl")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record import commit, cpu_model, load1  # noqa: E402

FIELDS = ("enc_batch_us", "dec_batch_us", "ct_pt_batch_us")


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def run_json(cmd, env=None):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=600)
    if out.returncode != 0:
        sys.exit(f"record_paillier_peers.py: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])


def stamp(r, started, before, command, label):
    r.setdefault("cpu", cpu_model())
    r.update({"date": started, "load": f"{before:.2f} → {load1():.2f}", "cores": os.cpu_count(), "command": command, "commit": label})
    return r


def hush_run(hush, bits, nice):
    args = ["bench", "paillier", "--bits", str(bits), "--json"]
    pre = ["nice", "-n", str(nice)] if nice is not None else []
    started, before = now(), load1()
    r = run_json([*pre, hush, *args])
    r["source"] = "hush"
    return stamp(r, started, before, " ".join(pre + ["hush"] + [a for a in args if a != "--json"]), commit())


def peer_run(python, bits, nice):
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    script = os.path.join(ROOT, "scripts", "paillier_peer.py")
    pre = ["nice", "-n", str(nice)] if nice is not None else []
    started, before = now(), load1()
    r = run_json([*pre, python, script, "--bits", str(bits)], env)
    r["source"] = f"pypaillier {r.get('peer_version', '?')}"
    cmd = " ".join(["RAYON_NUM_THREADS=1"] + pre + ["python", "scripts/paillier_peer.py", "--bits", str(bits)])
    return stamp(r, started, before, cmd, f"peer: pypaillier {r.get('peer_version', '?')}")


def measure(argv):
    rounds, bits, hush, python, nice = 3, 2048, os.path.join(ROOT, "target", "release", "hush"), None, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--rounds":
            rounds = int(argv[i + 1]); i += 2
        elif a == "--bits":
            bits = int(argv[i + 1]); i += 2
        elif a == "--hush":
            hush = argv[i + 1]; i += 2
        elif a == "--nice":
            nice = int(argv[i + 1]); i += 2
        elif a == "--peer-python":
            python = os.path.expanduser(argv[i + 1]); i += 2
        else:
            sys.exit(__doc__)
    if not python:
        sys.exit(__doc__)
    session = now()
    recs = []
    for k in range(rounds):
        for r in (hush_run(hush, bits, nice), peer_run(python, bits, nice)):
            r["session"] = session
            r["round"] = k + 1
            recs.append(r)
            figs = "  ".join(f"{f} {r[f]:.1f}" for f in FIELDS)
            print(f"round {k + 1}: {r['source']:18} {figs}  load {r['load']}", file=sys.stderr)
    with open(RECORDS, "a", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"record_paillier_peers.py: {os.path.relpath(RECORDS, ROOT)} += {len(recs)} records, session {session}", file=sys.stderr)
    print(table(session))


def table(session=None):
    with open(RECORDS, encoding="utf-8") as f:
        recs = [json.loads(l) for l in f if l.strip()]
    recs = [r for r in recs if r.get("session") and r.get("source")]
    if not recs:
        sys.exit("record_paillier_peers.py: no session records in bench/records/paillier.jsonl")
    session = session or recs[-1]["session"]
    recs = [r for r in recs if r["session"] == session]
    hush = [r for r in recs if r["source"] == "hush"]
    peer = [r for r in recs if r["source"] != "hush"]
    rng = lambda rs, f: f"{min(r[f] for r in rs):,.1f}–{max(r[f] for r in rs):,.1f}"
    lines = [f"Session {session}, {recs[0]['cpu']}, {len(hush)} rounds, loads " + ", ".join(r["load"] for r in recs),
             "", "| µs per element (batched, one core) | hush | " + peer[0]["source"] + " | peer ÷ hush (worst pair of rounds) |", "|---|---|---|---|"]
    for f, name in zip(FIELDS, ("encrypt", "decrypt", "ct·pt, 64-bit k")):
        worst = min(p[f] for p in peer) / max(h[f] for h in hush)
        lines.append(f"| {name} | {rng(hush, f)} | {rng(peer, f)} | {worst:.1f}× |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--table":
        print(table(sys.argv[2] if len(sys.argv) > 2 else None))
    else:
        measure(sys.argv[1:])
