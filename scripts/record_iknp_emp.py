#!/usr/bin/env python3
"""hush IKNP (and SilentFlow, `--sources iknp,silent`) beside emp-ot IKNP, 10^7 COTs, no network, interleaved rounds
in one run; appends every run to bench/records/cot.jsonl, stamped like
scripts/record.py does (cpu, date, load before → after, cores, command,
commit), with a `session` id and `round` so that one run's rows belong
together.

  emp-ot: the peer harness of /work/shared/peers (README there), built in
          ~/.cache/hush-peers: `PIN=1 run-emp.sh iknp N` (party 1 = COT
          sender, party 2 = receiver, pinned to cpus 0 and 1; wall_s = the
          slower party's timed rcot call, setup excluded). Recorded as
          source "emp-ot-iknp", simd "native (-march=native)".
  hush:   `hush bench cot --source iknp --n N --net none --json` (party
          threads pinned to cpus 0 and 1; wall_s from the barrier to the
          later party's end, setup excluded), once per level asked for:
          native, and `HUSH_SIMD=avx2` etc.

Usage:
  python3 scripts/record_iknp_emp.py --rounds 4 --n 10000000 --levels native,avx2 \
          [--sources iknp,silent]                             # hush sources (default iknp)
          [--nets none,mobile]                                # hush under each profile (default none)
          [--baseline /path/to/older/hush=LABEL]              # also the code before a change
  python3 scripts/record_iknp_emp.py --floor [--threads 1|2] [--levels native,avx2]
                                    # the LPN memory floor (examples/lpn_floor.rs), into
                                    # bench/records/lpn-floor.jsonl
  python3 scripts/record_iknp_emp.py --aes-soft BINARY [BINARY ...] [--rounds R]
                                    # examples/aes_soft_speed (built normally and/or with
                                    # RUSTFLAGS="--cfg aes_force_soft") interleaved with
                                    # `openssl speed` with AES-NI masked (OPENSSL_ia32cap),
                                    # into bench/records/aes-soft.jsonl
  python3 scripts/record_iknp_emp.py --table [SESSION]   # Markdown table of a session
                                                         # (default: the latest)
Standard library only.
"""

import datetime
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "bench", "records", "cot.jsonl")
PEERS = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hush-peers")


# the stamps every record carries, as scripts/record.py makes them
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record import commit, cpu_model, load1  # noqa: E402


def lscpu():
    """`lscpu`'s model name and cache sizes (stamped on every record)."""
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    want = {"Model name": "lscpu_model", "L1d cache": "lscpu_l1d", "L2 cache": "lscpu_l2", "L3 cache": "lscpu_l3",
            "CPU family": "lscpu_family", "Model": "lscpu_model_number"}
    r = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        if k.strip() in want:
            r[want[k.strip()]] = v.strip()
    return r


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def run_json(cmd, env=None):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    if out.returncode != 0:
        sys.exit(f"record_iknp_emp.py: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])


def emp_run(n):
    env = dict(os.environ, PIN="1")
    started, before = now(), load1()
    r = run_json([os.path.join(PEERS, "run-emp.sh"), "iknp", str(n)], env)
    after = load1()
    return {
        "bench": "cot", "source": "emp-ot-iknp", "n": r["n"], "net": "none",
        "transport": "tcp", "link": "emp NetIO over TCP loopback between two processes",
        "wall_s": r["wall_s"], "sender_s": r["wall_s_p1"], "receiver_s": r["wall_s_p2"], "setup_s": r["setup_s"],
        "bytes": r["bytes"], "bits_per_cot": r["bits_per_cot"], "cots_per_s": r["n"] / r["wall_s"],
        "param": r.get("param"), "pinning": "PIN=1: party 1 (sender) on cpu 0, party 2 (receiver) on cpu 1",
        "simd": "native (-march=native)", "peer": "emp-ot 07a6c79 on emp-tool 1eef346, Release",
        "date": started, "load": f"{before:.2f} → {after:.2f}", "cpu": cpu_model(), "cores": os.cpu_count(),
        "command": f"PIN=1 run-emp.sh iknp {n}", "commit": "peer: emp-ot 07a6c79 (emp-tool 1eef346)",
    }


def hush_run(hush, n, level, variant=None, label=None, source="iknp", net="none"):
    env = dict(os.environ)
    env.pop("HUSH_SIMD", None)
    prefix = ""
    if level != "native":
        env["HUSH_SIMD"] = level
        prefix = f"HUSH_SIMD={level} "
    args = ["bench", "cot", "--source", source, "--n", str(n), "--net", net, "--json"]
    started, before = now(), load1()
    r = run_json([hush, *args], env)
    after = load1()
    r.setdefault("cpu", cpu_model())
    r.update({"date": started, "load": f"{before:.2f} → {after:.2f}", "cores": os.cpu_count(),
              "command": prefix + "hush " + " ".join(a for a in args if a != "--json"), "commit": label or commit()})
    if variant:
        r["variant"] = variant
        r["command"] = prefix + f"hush[{label}] " + " ".join(a for a in args if a != "--json")
    return r


def measure(argv):
    rounds, n, levels, hush = 4, 10_000_000, ["native", "avx2"], os.path.join(ROOT, "target", "release", "hush")
    baseline = None
    sources = ["iknp"]
    nets = ["none"]
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--rounds":
            rounds = int(argv[i + 1]); i += 2
        elif a == "--n":
            n = int(float(argv[i + 1])); i += 2
        elif a == "--levels":
            levels = argv[i + 1].split(","); i += 2
        elif a == "--sources":
            sources = argv[i + 1].split(","); i += 2
        elif a == "--nets":
            # hush runs under each network profile (`hush bench cot --net`);
            # emp-ot always runs without one
            nets = argv[i + 1].split(","); i += 2
        elif a == "--hush":
            hush = argv[i + 1]; i += 2
        elif a == "--baseline":
            # PATH=LABEL: another hush build (the code before a change),
            # run at the native level in every round and recorded with
            # variant "baseline" and commit LABEL.
            baseline = argv[i + 1].split("=", 1); i += 2
        else:
            sys.exit(__doc__)
    session = now()
    recs = []
    for k in range(rounds):
        # One warm-up pair, unrecorded, before the first round.
        if k == 0:
            emp_run(n)
            for src in sources:
                hush_run(hush, n, levels[0], source=src)
        row = [emp_run(n)]
        if baseline:
            for src in sources:
                row.append(hush_run(baseline[0], n, "native", "baseline", baseline[1] if len(baseline) > 1 else "baseline", src))
        row += [hush_run(hush, n, l, source=src, net=net) for src in sources for l in levels for net in nets]
        cpu = lscpu()
        for r in row:
            r.update(cpu)
            r["session"] = session
            r["round"] = k + 1
            recs.append(r)
            print(f"round {k + 1}: {r['source']:12} {r.get('variant', ''):9} {r['simd']:24} {r['net']:7} {r['wall_s']:.4f} s  load {r['load']}", file=sys.stderr)
    with open(RECORDS, "a", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"record_iknp_emp.py: {os.path.relpath(RECORDS, ROOT)} += {len(recs)} records, session {session}", file=sys.stderr)
    print(table(session))


FLOOR = os.path.join(ROOT, "bench", "records", "lpn-floor.jsonl")


def floor(argv):
    """Runs target/release/examples/lpn_floor (build it with `cargo build
    --release -p hush-correlations --example lpn_floor`) once per level and
    appends its lines, stamped, to bench/records/lpn-floor.jsonl."""
    threads, levels, passes = 1, ["native", "avx2"], 15
    i = 0
    while i < len(argv):
        if argv[i] == "--threads":
            threads = int(argv[i + 1]); i += 2
        elif argv[i] == "--levels":
            levels = argv[i + 1].split(","); i += 2
        elif argv[i] == "--passes":
            passes = int(argv[i + 1]); i += 2
        else:
            sys.exit(__doc__)
    exe = os.path.join(ROOT, "target", "release", "examples", "lpn_floor")
    session, cpu, recs = now(), lscpu(), []
    for level in levels:
        env = dict(os.environ)
        env.pop("HUSH_SIMD", None)
        prefix = ""
        if level != "native":
            env["HUSH_SIMD"] = level
            prefix = f"HUSH_SIMD={level} "
        started, before = now(), load1()
        out = subprocess.run([exe, str(threads), str(passes)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, timeout=600)
        after = load1()
        if out.returncode != 0:
            sys.exit(f"record_iknp_emp.py: lpn_floor failed ({out.returncode}):\n{out.stderr}")
        for line in out.stdout.splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            r["op"] = (f"ggm-expand h={r['h']}" if r["part"] == "ggm-expand" else f"accumulate {r['leaves']} leaves" if r["part"] == "accumulate"
                       else f"{r['part']} k={r['k']} ({r['k_bytes'] // 1024} KiB)")
            r.update({"n": 10_000_000, "wall_s": r["s_per_1e7"],
                      "setting_note": "n = rows (or leaves); wall_s = best pass scaled to 10^7, one party"})
            r.update({"bench": "lpn-floor", "cpu": cpu_model(), "date": started, "load": f"{before:.2f} → {after:.2f}",
                      "cores": os.cpu_count(), "session": session, "commit": commit(),
                      "command": prefix + f"cargo run --release -p hush-correlations --example lpn_floor {threads} {passes}"})
            r.update(cpu)
            recs.append(r)
            print(f"{r['simd']:8} {r['part']:12} k={r.get('k', '-'):>7} {r['s_per_1e7'] * 1e3:7.1f} ms per 10^7  load {r['load']}",
                  file=sys.stderr)
    with open(FLOOR, "a", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"record_iknp_emp.py: {os.path.relpath(FLOOR, ROOT)} += {len(recs)} records, session {session}", file=sys.stderr)


AES_SOFT = os.path.join(ROOT, "bench", "records", "aes-soft.jsonl")
# OPENSSL_ia32cap masks: bit 57 of the first word is AES-NI, bit 41 SSSE3
# (OpenSSL's vpaes); "~" clears them.
OPENSSL_MASKS = [("native", None), ("no AES-NI (vpaes, SSSE3)", "~0x200000000000000"),
                 ("no AES-NI, no SSSE3 (C tables)", "~0x200020000000000")]


def aes_soft(argv):
    """The portable AES back end beside openssl's own paths, one core, same
    run: each round runs every binary given (`aes_soft_speed` builds) and
    `openssl speed -elapsed -evp aes-128-ecb -bytes 65536 -seconds 1` under
    each OPENSSL_ia32cap mask, pinned to cpu 0."""
    bins, rounds = [], 3
    i = 0
    while i < len(argv):
        if argv[i] == "--rounds":
            rounds = int(argv[i + 1]); i += 2
        else:
            bins.append(argv[i]); i += 1
    if not bins:
        sys.exit(__doc__)
    session, cpu, recs = now(), lscpu(), []
    for k in range(rounds):
        for b in bins:
            started, before = now(), load1()
            r = run_json(["taskset", "-c", "0", b])
            r.update({"date": started, "load": f"{before:.2f} → {load1():.2f}", "binary": os.path.basename(b), "command": f"taskset -c 0 {os.path.basename(b)}"})
            recs.append(r)
        for name, mask in OPENSSL_MASKS:
            env = dict(os.environ)
            env.pop("OPENSSL_ia32cap", None)
            if mask:
                env["OPENSSL_ia32cap"] = mask
            started, before = now(), load1()
            out = subprocess.run(["taskset", "-c", "0", "openssl", "speed", "-elapsed", "-evp", "aes-128-ecb", "-bytes", "65536",
                                  "-seconds", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, timeout=60)
            line = [l for l in out.stdout.splitlines() if l.lower().startswith("aes-128-ecb")][-1]
            kbps = float(line.split()[-1].rstrip("k"))
            recs.append({"bench": "aes-soft", "backend": "openssl", "openssl_path": name, "blocks_per_s": kbps * 1000 / 16,
                         "op": f"openssl, {name}", "n": 10_000_000, "wall_s": 1e7 / (kbps * 1000 / 16),
                         "date": started, "load": f"{before:.2f} → {load1():.2f}",
                         "command": (f"OPENSSL_ia32cap='{mask}' " if mask else "") +
                         "taskset -c 0 openssl speed -elapsed -evp aes-128-ecb -bytes 65536 -seconds 1"})
        for r in recs[-(len(bins) + len(OPENSSL_MASKS)):]:
            r.update({"cpu": cpu_model(), "cores": os.cpu_count(), "session": session, "round": k + 1, "commit": commit()})
            r.update(cpu)
            what = r.get("openssl_path") or ("aes_force_soft" if r.get("aes_force_soft") else "aes crate, AES-NI detected")
            print(f"round {k + 1}: {r['backend']:8} {what:32} {r['blocks_per_s']:.3e} blocks/s  load {r['load']}", file=sys.stderr)
    with open(AES_SOFT, "a", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"record_iknp_emp.py: {os.path.relpath(AES_SOFT, ROOT)} += {len(recs)} records, session {session}", file=sys.stderr)


def table(session=None):
    with open(RECORDS, encoding="utf-8") as f:
        recs = [json.loads(l) for l in f if l.strip()]
    recs = [r for r in recs if r.get("session")]
    if not recs:
        sys.exit("record_iknp_emp.py: no session records in bench/records/cot.jsonl")
    session = session or recs[-1]["session"]
    recs = [r for r in recs if r["session"] == session]
    rounds = sorted({r["round"] for r in recs})
    emp = {r["round"]: r for r in recs if r["source"] == "emp-ot-iknp"}
    kinds = []
    for r in recs:
        kind = (r["source"], r.get("variant"), r["simd"], r.get("commit"), r.get("net", "none"))
        if r["source"] != "emp-ot-iknp" and kind not in kinds:
            kinds.append(kind)
    first = recs[0]
    loads = [r["load"] for r in recs]
    l2 = next((r["l2_bytes"] for r in recs if r.get("l2_bytes")), None)
    out = [f"Session {session} (`scripts/record_iknp_emp.py`, records in `bench/records/cot.jsonl`): "
           f"{first['cpu']}, {first.get('cores')} cores" + (f", L2 {l2 // 1024} KiB per core" if l2 else "")
           + (f"; lscpu: {first['lscpu_model']}, family {first.get('lscpu_family')} model {first.get('lscpu_model_number')}, "
              f"L1d {first.get('lscpu_l1d')}, L2 {first.get('lscpu_l2')}, L3 {first.get('lscpu_l3')}" if first.get("lscpu_model") else ""),
           f"{len(rounds)} interleaved rounds, n = {first['n']:,} COTs, no network unless the row says; load (1-min) from {loads[0]} to {loads[-1]}.",
           "",
           "| run | per-round wall (s) | median | hush ÷ emp-ot, per round | median ratio | thread CPU per party (s) |",
           "|---|---|---|---|---|---|"]
    e = [emp[k]["wall_s"] for k in rounds]
    out.append(f"| emp-ot IKNP (`-march=native`) | {', '.join(f'{x:.3f}' for x in e)} | {statistics.median(e):.3f} | — | — | — |")
    for kind in kinds:
        src, variant, l, c, net = kind
        h = {r["round"]: r for r in recs if (r["source"], r.get("variant"), r["simd"], r.get("commit"), r.get("net", "none")) == kind}
        hs = [h[k]["wall_s"] for k in rounds]
        ratios = [h[k]["wall_s"] / emp[k]["wall_s"] for k in rounds]
        label = {"iknp": "IKNP", "silent": "SilentFlow"}.get(src, src)
        name = f"hush {label} before ({c}), simd {l}" if variant == "baseline" else f"hush {label} ({c}), simd {l}"
        if net != "none":
            name += f", `--net {net}`"
        cpus = [x for k in rounds for x in (h[k].get("sender_cpu_s"), h[k].get("receiver_cpu_s")) if x is not None]
        cpu = f"{min(cpus):.3f}–{max(cpus):.3f}" if cpus else "—"
        out.append(f"| {name} | {', '.join(f'{x:.3f}' for x in hs)} | {statistics.median(hs):.3f} | "
                   f"{', '.join(f'{x:.2f}' for x in ratios)} | {statistics.median(ratios):.2f} | {cpu} |")
    return "\n".join(out)


def main(argv):
    if argv and argv[0] == "--aes-soft":
        aes_soft(argv[1:])
        return 0
    if argv and argv[0] == "--floor":
        floor(argv[1:])
        return 0
    if argv and argv[0] == "--table":
        print(table(argv[1] if len(argv) > 1 else None))
        return 0
    measure(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
