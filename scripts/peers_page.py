#!/usr/bin/env python3
"""Writes docs/peers.md: every same-run comparison of hush's primitives with
their peers that bench/records holds, one table per comparison, one row per
session, grouped by CPU kind, with the target each row is held against
(issue 34's lines) and whether that session meets it.

  cot.jsonl       hush IKNP and SilentFlow beside emp-ot IKNP (scripts/record_iknp_emp.py)
  aes3.jsonl      hush's 3PC AES beside MP-SPDZ replicated-bin (scripts/record_aes3_mpspdz.py)
  paillier.jsonl  hush's batched Paillier beside pypaillier (scripts/record_paillier_peers.py)
  aes.jsonl       hush's AES beside `openssl speed`, same run (scripts/record.py bench aes)

Ratios are computed here from the records, never typed in: per round
(the rounds of a session are interleaved) and as the ratio of the medians.
A session "meets" a line when the ratio of its medians does; the per-round
range says how firmly. Load is the 1-minute load average before → after
each run, min–max over the session: a session at load ≳ 1.5 on these two
cores was not idle, and its walls include waiting for a core.

Usage:
  python3 scripts/peers_page.py          # rewrite docs/peers.md
  python3 scripts/peers_page.py --check  # exit 1 if docs/peers.md is not current
Standard library only.
"""

import collections
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "bench", "records")
PAGE = os.path.join(ROOT, "docs", "peers.md")


def load(name):
    p = os.path.join(RECORDS, name)
    if not os.path.exists(p):
        return []
    with open(p, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def cpu_kind(r):
    """A CPU kind label from a record: model name, family/model when lscpu
    was recorded, L2 per core when known."""
    s = r.get("lscpu_model") or r.get("cpu") or "unknown CPU"
    if r.get("lscpu_family"):
        s += f", family {r['lscpu_family']} model {r.get('lscpu_model_number', '?')}"
    if r.get("l2_bytes"):
        s += f", L2 {r['l2_bytes'] // 1024} KiB per core"
    return s


def loads(rs):
    xs = []
    for r in rs:
        for part in str(r.get("load", "")).replace("→", " ").split():
            try:
                xs.append(float(part))
            except ValueError:
                pass
    return f"{min(xs):.2f}–{max(xs):.2f}" if xs else "?"


def rng(xs, fmt="{:.2f}"):
    return fmt.format(min(xs)) if min(xs) == max(xs) else f"{fmt.format(min(xs))}–{fmt.format(max(xs))}"


def verdict(ok):
    return "**yes**" if ok else "no"


def sessions(recs):
    by = collections.OrderedDict()
    for r in recs:
        if r.get("session"):
            by.setdefault(r["session"], []).append(r)
    return by


def session_cpu(rs):
    """The kind of the session's hush rows (they carry the most fields)."""
    best = max(rs, key=lambda r: len(r))
    return cpu_kind(best)


def per_cpu_tables(out, rows, columns):
    """One table per CPU kind: `columns` the header cells, `rows` kind → lines."""
    for kind, rs in rows.items():
        out.append(f"### {kind}\n")
        out.append("| " + " | ".join(columns) + " |")
        out.append("|" + "---|" * len(columns))
        out.extend(rs)
        out.append("")


def cot_section(out):
    rows = collections.OrderedDict()
    for s, rs in sessions(load("cot.jsonl")).items():
        emp = [r for r in rs if r.get("source") == "emp-ot-iknp"]
        if not emp:
            continue
        emp_by_round = {r.get("round"): r["wall_s"] for r in emp}
        emp_med = statistics.median(emp_by_round.values())
        groups = collections.OrderedDict()
        for r in rs:
            if r.get("source") in ("iknp", "silent"):
                key = (r["source"], r.get("simd"), r.get("net", "none"), r.get("variant", ""), r.get("commit", ""))
                groups.setdefault(key, []).append(r)
        none_med = {}
        for (src, simd, net, variant, commit), g in groups.items():
            med = statistics.median(r["wall_s"] for r in g)
            if net == "none":
                none_med[(src, simd, variant, commit)] = med
        for (src, simd, net, variant, commit), g in groups.items():
            med = statistics.median(r["wall_s"] for r in g)
            per = [r["wall_s"] / emp_by_round[r.get("round")] for r in g if r.get("round") in emp_by_round]
            name = {"iknp": "IKNP", "silent": "SilentFlow"}[src]
            what = f"{name}, {simd}" + (f", `--net {net}`" if net != "none" else "") + (" (code before a change)" if variant == "baseline" else "")
            if src == "iknp":
                target, ok, note = "≤ 1.0×", med / emp_med <= 1.0, ""
            elif net == "none":
                target, ok, note = "≤ 0.5×", med / emp_med <= 0.5, ""
            else:
                base = none_med.get((src, simd, variant, commit))
                target = "≤ 1.15× its own no-network time"
                ok = base is not None and med / base <= 1.15
                note = f"{med / base:.2f}× its own no-network median" if base else "no no-network run in the session"
            cpu = statistics.median(max(r.get("sender_cpu_s", 0), r.get("receiver_cpu_s", 0)) for r in g)
            rows.setdefault(session_cpu(rs), []).append(
                f"| {s} | {loads(rs)} | {what} (`{commit}`) | {emp_med:.3f} | {med:.3f} | {cpu:.3f} | "
                f"{(rng(per) + '×') if per else '—'} | {med / emp_med:.2f}× | {target} | {verdict(ok)}{(' — ' + note) if note else ''} |")
    out.append("## IKNP and SilentFlow beside emp-ot IKNP\n")
    out.append("10^7 correlated OTs, no network (hush's `--net mobile` rows run under the mobile profile), "
               "both parties on this machine's two cores, each pinned to one; walls in seconds, the slower "
               "party's, set-up excluded. emp-ot is `run-emp.sh iknp` (`-march=native`). \"CPU\" is the busier "
               "hush party's thread CPU time (median), which load disturbs less than wall time. Records: "
               "`bench/records/cot.jsonl`; command: `python3 scripts/record_iknp_emp.py`.\n")
    per_cpu_tables(out, rows, ["session", "load", "hush run", "emp-ot median (s)", "hush median (s)", "hush CPU (s)",
                               "per round", "ratio of medians", "target", "met"])


def aes3_section(out):
    rows = collections.OrderedDict()
    for s, rs in sessions(load("aes3.jsonl")).items():
        mp = {r.get("round"): r["aes_per_s"] for r in rs if r.get("source", "").startswith("mp-spdz")}
        if not mp:
            continue
        mp_med = statistics.median(mp.values())
        groups = collections.OrderedDict()
        for r in rs:
            if r.get("source") == "hush":
                groups.setdefault((r.get("command", ""), r.get("variant", "")), []).append(r)
        for (cmd, variant), g in groups.items():
            med = statistics.median(r["aes_per_s"] for r in g)
            per = [r["aes_per_s"] / mp[r.get("round")] for r in g if r.get("round") in mp]
            what = f"`{cmd}`" + (" (code before a change)" if variant == "baseline" else "")
            ok = med / mp_med >= 3.0
            rows.setdefault(session_cpu(rs), []).append(
                f"| {s} | {loads(rs)} | {what} | {mp_med:,.0f} | {med:,.0f} | {(rng(per) + '×') if per else '—'} | "
                f"{med / mp_med:.2f}× | ≥ 3× | {verdict(ok)} |")
    out.append("## Three-party AES beside MP-SPDZ\n")
    out.append("10^6 AES-128 (Bristol `aes_128.txt`, key expansion included), three parties on 127.0.0.1, "
               "TLS on both sides; AES per second. MP-SPDZ is `replicated-bin-party.x` "
               "(`run-mpspdz-aes.sh 1000000 100000`). Records: `bench/records/aes3.jsonl`; command: "
               "`python3 scripts/record_aes3_mpspdz.py`.\n")
    per_cpu_tables(out, rows, ["session", "load", "hush run", "MP-SPDZ median (AES/s)", "hush median (AES/s)", "per round",
                               "ratio of medians", "target", "met"])


def paillier_section(out):
    rows = collections.OrderedDict()
    for s, rs in sessions(load("paillier.jsonl")).items():
        peer = [r for r in rs if str(r.get("source", "")).startswith("pypaillier")]
        mine = [r for r in rs if r.get("source") == "hush"]
        if not peer or not mine:
            continue
        ct = [r["ct_pt_batch_us"] for r in mine]
        # Worst pair of rounds: the slowest hush round against the fastest peer round.
        enc = min(r["enc_batch_us"] for r in peer) / max(r["enc_batch_us"] for r in mine)
        dec = min(r["dec_batch_us"] for r in peer) / max(r["dec_batch_us"] for r in mine)
        ok = max(ct) <= 40 and enc >= 8 and dec >= 10
        label = f"{peer[0]['source']}"
        rows.setdefault(session_cpu(mine), []).append(
            f"| {s} | {loads(rs)} | {rng(ct, '{:.1f}')} | {enc:.1f}× | {dec:.1f}× | {label} | {verdict(ok)} |")
    out.append("## Paillier-2048 beside pypaillier\n")
    out.append("Batched, one core each: hush's ct·pt (64-bit scalars) in µs per element over the session's "
               "rounds, and how many times faster hush's batched encryption and decryption are than "
               "pypaillier's batch API, worst pair of rounds (the slowest hush round against the fastest "
               "peer round). Targets: ct·pt ≤ 40 µs, encryption ≥ 8×, decryption ≥ 10×. Records: "
               "`bench/records/paillier.jsonl`; command: `python3 scripts/record_paillier_peers.py`.\n")
    per_cpu_tables(out, rows, ["session", "load", "ct·pt (µs)", "encrypt, peer ÷ hush", "decrypt, peer ÷ hush", "peer",
                               "all three met"])


def aes_section(out):
    rows = collections.OrderedDict()
    for r in load("aes.jsonl"):
        if "openssl_ratio" not in r:
            continue
        day = str(r.get("date", ""))[:10]
        rows.setdefault((cpu_kind(r), day), {}).setdefault(r.get("simd", "?"), []).append(r)
    out.append("## AES beside OpenSSL\n")
    out.append("Fixed-key AES-128 on one core, `hush bench aes` against `openssl speed -elapsed -evp "
               "aes-128-ecb` on the same buffer size in the same run (`openssl_ratio`); every run of a "
               "day on one CPU kind. Target: ≥ 0.95× at every level. Records: `bench/records/aes.jsonl`; "
               "command: `HUSH_SIMD=<level> python3 scripts/record.py bench aes --seconds 1`.\n")
    out.append("| CPU | day | level | runs | load | ratio to OpenSSL | met in every run |")
    out.append("|---|---|---|---|---|---|---|")
    for (kind, day), levels in rows.items():
        for simd in sorted(levels):
            rs = levels[simd]
            xs = [r["openssl_ratio"] for r in rs]
            out.append(f"| {kind} | {day} | {simd} | {len(rs)} | {loads(rs)} | {rng(xs)}× | {verdict(min(xs) >= 0.95)} |")
    out.append("")


def render():
    out = [
        "# Side by side with the peers",
        "",
        "<!-- Generated by scripts/peers_page.py from bench/records/*.jsonl; do not edit by hand. -->",
        "",
        "Every same-run comparison of hush's primitives with an outside implementation that the "
        "records hold, grouped by the CPU it ran on, each row held against its target (issue 34). "
        "How the peers are built and run: `../shared/peers/README.md` and "
        "[Benchmark methodology](benchmarks.md); what the figures mean and what was changed to reach "
        "them: [Primitives, correlated OT, SIMD](perf-primitives.md) and "
        "[Three-party AES](perf-3pc.md). A row marked \"no\" is a session in which the line was not "
        "met; the load column says whether the machine was idle.",
        "",
    ]
    cot_section(out)
    aes3_section(out)
    paillier_section(out)
    aes_section(out)
    return "\n".join(out).rstrip() + "\n"


def main(argv):
    text = render()
    if argv[:1] == ["--check"]:
        cur = open(PAGE, encoding="utf-8").read() if os.path.exists(PAGE) else ""
        if cur != text:
            sys.exit("docs/peers.md is not current: run python3 scripts/peers_page.py")
        return
    if argv:
        sys.exit(__doc__)
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"peers_page.py: {os.path.relpath(PAGE, ROOT)} written", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
