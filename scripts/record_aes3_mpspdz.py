#!/usr/bin/env python3
"""hush's three-party AES (`hush bench aes3`, TLS 1.3) beside MP-SPDZ's
replicated binary AES-128 (`replicated-bin-party.x`, its OpenSSL TLS links),
interleaved rounds in one run; appends every run to bench/records/aes3.jsonl,
stamped like scripts/record.py does (cpu, date, load before → after, cores,
command, commit), with a `session` id and `round` so that one run's rows
belong together, and prints the session's table with the ratio per round.

  MP-SPDZ: the peer harness of /work/shared/peers (README there), built in
           ~/.cache/hush-peers/mp-spdz: `run-mpspdz-aes.sh N BATCH` (three
           parties on 127.0.0.1, Bristol aes_128.txt, BATCH instances per
           circuit call; wall_s = its timer 1, the batch loop only, so set-up
           and TLS handshakes are excluded). Recorded as source
           "mp-spdz-replicated-bin".
  hush:    `hush bench aes3 --n N --json [HUSH ARGS]` (three node processes,
           TLS 1.3 between all parties; wall_s from sending the job to the
           last reconstructed output, set-up and handshakes excluded).
           Recorded as source "hush".

Both evaluate the same circuit file (Bristol aes_128.txt, key expansion
included, 6,400 ANDs per AES) with one key for every instance.

Usage:
  python3 scripts/record_aes3_mpspdz.py --rounds 3 --n 1000000 --batch 100000 \\
          [--hush target/release/hush] [--hush-args "--threads 2"]... [--no-record]
          [--no-peer]                          # hush rows only (MP-SPDZ not built)
          [--baseline-exe PATH=LABEL]          # also hush's nodes from another build
          [--baseline-hush PATH]               # ... driven by another `hush` too (its
                                               # client side: the old transport as well)
  python3 scripts/record_aes3_mpspdz.py --table [SESSION]   # Markdown table of a
                                                            # session (default: the latest)
Standard library only.
"""

import datetime
import json
import os
import resource
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "bench", "records", "aes3.jsonl")
PEERS = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hush-peers")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record import commit, cpu_model, load1  # noqa: E402
from record_iknp_emp import lscpu, now  # noqa: E402


def run_json(cmd, env=None):
    """Runs `cmd`, returns its last JSON line with `cpu_s` added: the user +
    system CPU seconds of the command and every process it waited for (the
    three parties), set-up included: a figure that a loaded machine
    disturbs far less than wall time."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=900)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"record_aes3_mpspdz.py: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    r = json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])
    r["cpu_s"] = round((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), 3)
    r["cpu_s_note"] = "user + system CPU of the run and all its processes (set-up, handshakes and checks included)"
    return r


def mpspdz_commit():
    src = os.path.realpath(os.path.join(PEERS, "mp-spdz"))
    for f in ("PEER_COMMIT",):
        p = os.path.join(src, f)
        if os.path.exists(p):
            return open(p).read().strip()
    return "unknown"


def mpspdz_ready():
    exe = os.path.join(PEERS, "mp-spdz", "replicated-bin-party.x")
    if not os.path.exists(exe):
        sys.exit(f"record_aes3_mpspdz.py: {exe} is not built (see /work/shared/peers/README.md, the MP-SPDZ row: "
                 "`make replicated-bin-party.x` in the MP-SPDZ checkout, then `ln -sfn src/MP-SPDZ mp-spdz` in the peers folder)")


def mpspdz_run(n, batch):
    started, before = now(), load1()
    r = run_json([os.path.join(PEERS, "run-mpspdz-aes.sh"), str(n), str(batch)])
    after = load1()
    if not r.get("correct"):
        sys.exit(f"record_aes3_mpspdz.py: MP-SPDZ's last ciphertext is wrong: {r}")
    c = mpspdz_commit()
    rec = {
        "bench": "aes3", "source": "mp-spdz-replicated-bin", "n": r["n"], "net": "none", "parties": 3, "processes": 3,
        "tls": True, "link": "MP-SPDZ's OpenSSL TLS between the parties (Scripts/setup-ssl.sh 3), 127.0.0.1",
        "wall_s": r["wall_s"], "aes_per_s": r["aes_per_s"], "batch": batch,
        "cpu_s": r["cpu_s"], "cpu_s_note": r["cpu_s_note"], "cpu_us_per_aes": r["cpu_s"] / r["n"] * 1e6,
        "circuit": "Bristol aes_128.txt (key expansion included)", "and_per_aes": 6400, "key": "one key for all instances",
        "peer": f"MP-SPDZ {c} replicated-bin-party.x (clang++ -O3 -march=native)",
        "date": started, "load": f"{before:.2f} → {after:.2f}", "cpu": cpu_model(), "cores": os.cpu_count(),
        "command": f"run-mpspdz-aes.sh {n} {batch}", "commit": f"peer: MP-SPDZ {c}",
    }
    for k in ("total_s", "mb_sent_p0", "mb_sent_global", "rounds"):
        if k in r:
            rec[k] = r[k]
    if "mb_sent_p0" in r:
        rec["bytes_per_aes_per_party"] = r["mb_sent_p0"] * 1e6 / r["n"]
    return rec


def hush_run(hush, n, extra, label=None):
    args = ["bench", "aes3", "--n", str(n), *extra, "--json"]
    started, before = now(), load1()
    r = run_json([hush, *args])
    after = load1()
    r.setdefault("cpu", cpu_model())
    r.update({"source": "hush", "date": started, "load": f"{before:.2f} → {after:.2f}", "cores": os.cpu_count(),
              "command": "hush " + " ".join(a for a in args if a != "--json"), "commit": label or commit(),
              "cpu_us_per_aes": r["cpu_s"] / r["n"] * 1e6})
    if label:
        r["variant"] = "baseline"
    return r


def table(session=None):
    recs = [json.loads(l) for l in open(RECORDS, encoding="utf-8") if l.strip()]
    recs = [r for r in recs if r.get("session")]
    if not recs:
        return "no session in " + RECORDS
    session = session or recs[-1]["session"]
    recs = [r for r in recs if r["session"] == session]
    out = [f"session {session}, {recs[0].get('lscpu_model', recs[0].get('cpu'))}, {recs[0].get('cores')} cores", "",
           "| round | source | command | AES/s | wall | CPU per AES (all processes) | load | hush ÷ MP-SPDZ |", "|---|---|---|---|---|---|---|---|"]
    for k in sorted({r["round"] for r in recs}):
        row = [r for r in recs if r["round"] == k]
        peer = [r for r in row if r["source"] != "hush"]
        for r in row:
            ratio = ""
            if r["source"] == "hush" and peer and not r.get("variant"):
                ratio = f"{r['aes_per_s'] / peer[0]['aes_per_s']:.2f}×"
            src = r["source"] + (f" ({r['variant']} {r['commit']})" if r.get("variant") else "")
            out.append(f"| {k} | {src} | `{r['command']}` | {r['aes_per_s']:,.0f} | {r['wall_s']:.2f} s | {r.get('cpu_us_per_aes', 0):.2f} µs | {r['load']} | {ratio} |")
    return "\n".join(out)


def measure(argv):
    rounds, n, batch, hush, extra, record = 3, 1_000_000, 100_000, os.path.join(ROOT, "target", "release", "hush"), [], True
    peer, baseline, extras, base_hush = True, None, [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--rounds":
            rounds = int(argv[i + 1]); i += 2
        elif a == "--n":
            n = int(float(argv[i + 1])); i += 2
        elif a == "--batch":
            batch = int(float(argv[i + 1])); i += 2
        elif a == "--hush":
            hush = argv[i + 1]; i += 2
        elif a == "--hush-args":
            # may be given several times: one hush run per round for each
            extras.append(shlex.split(argv[i + 1])); i += 2
        elif a == "--no-record":
            record = False; i += 1
        elif a == "--no-peer":
            # hush rows only (when MP-SPDZ is not built): no ratio
            peer = False; i += 1
        elif a == "--baseline-exe":
            # PATH=LABEL: also run hush's nodes from another build (the code
            # before a change) in every round, recorded with variant
            # "baseline" and commit LABEL
            baseline = argv[i + 1].split("=", 1); i += 2
        elif a == "--baseline-hush":
            # the `hush` program of the baseline runs (default: --hush)
            base_hush = argv[i + 1]; i += 2
        else:
            sys.exit(__doc__)
    extras = extras or [extra]
    extra = extras[0]
    if peer:
        mpspdz_ready()
    if not os.path.exists(hush):
        sys.exit(f"record_aes3_mpspdz.py: no hush program at {hush} (build with `cargo build --release -p hush-cli`, or pass --hush PATH)")
    session, cpu, recs = now(), lscpu(), []
    # one unrecorded warm-up each (MP-SPDZ compiles its bytecode on first use)
    if peer:
        mpspdz_run(n, batch)
    hush_run(hush, min(n, 65536), extra)

    def base_extra():
        e, skip = [], False
        for x in extra:  # the baseline's --exe replaces ours
            if skip:
                skip = False
            elif x == "--exe":
                skip = True
            elif not x.startswith("--exe="):
                e.append(x)
        return e + ["--exe", baseline[0]]

    for k in range(rounds):
        runs = [lambda e=e: hush_run(hush, n, e) for e in extras]
        if baseline:
            runs.append(lambda: hush_run(base_hush or hush, n, base_extra(), baseline[1] if len(baseline) > 1 else "baseline"))
        if peer:
            runs.append(lambda: mpspdz_run(n, batch))
        # rotate which goes first
        runs = runs[k % len(runs):] + runs[:k % len(runs)]
        row = [f() for f in runs]
        for r in row:
            r.update(cpu)
            r["session"] = session
            r["round"] = k + 1
            recs.append(r)
            print(f"round {k + 1}: {r['source']:24} {r.get('variant', ''):9} {r['aes_per_s']:>12,.0f} AES/s  {r['wall_s']:.3f} s  {r['cpu_us_per_aes']:.2f} µs CPU/AES  load {r['load']}", file=sys.stderr)
    if record:
        with open(RECORDS, "a", encoding="utf-8") as f:
            for r in recs:
                f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"record_aes3_mpspdz.py: {os.path.relpath(RECORDS, ROOT)} += {len(recs)} records, session {session}", file=sys.stderr)
        print(table(session))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--table"]:
        print(table(sys.argv[2] if len(sys.argv) > 2 else None))
    else:
        measure(sys.argv[1:])
