#!/usr/bin/env python3
"""Prints docs/dealing.md's per-kind table from bench/records/deal.jsonl
(the records `python3 scripts/record.py bench deal --kind all --json`
appends): for each dealing kind, its latest record — items/s, dealt
bytes/s, AES calls per item (party 0 / party 1), the AES-call bound and
the measured time over it — with the CPU, load and date of the run.

Usage: python3 scripts/dealing_table.py [--page]   (--page rewrites the
table between the markers of docs/dealing.md). Standard library only.
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "bench", "records", "deal.jsonl")
PAGE = os.path.join(ROOT, "docs", "dealing.md")
BEGIN = "<!-- dealing-table:begin (python3 scripts/dealing_table.py --page) -->"
END = "<!-- dealing-table:end -->"


def ms(s):
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def table():
    latest = {}
    with open(RECORDS) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                latest[(r["deal_kind"], r["n"], r["bits"])] = r
    rows = ["| kind | n | items/s | dealt | dealt B/s | AES/item (p0 / p1) | AES bound | measured (slower party) | ÷ bound | threads | load | date |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cpus = set()
    for (kind, n, bits), r in latest.items():
        cpus.add(r.get("cpu", "?"))
        rows.append(
            f"| {kind} (ℓ = {bits}) | {n:,} | {r['items_per_s']:.3g} | {r['dealt_bytes'] / 1e6:.1f} MB | "
            f"{r['dealt_bytes_per_s'] / 1e9:.2f} GB/s | {r['aes_per_item_party0']:.3g} / {r['aes_per_item_party1']:.3g} | "
            f"{ms(r['bound_s'])} | {ms(r['module_s'])} | {r['bound_ratio']:.1f} | {r.get('threads', 1)} | "
            f"{r.get('load', '?')} | {r.get('date', '?')[:16]} |")
    rate = ", ".join(f"{r['aes_blocks_per_s']:.3g}" for r in list(latest.values())[-1:])
    rows.append("")
    rows.append(f"CPU: {', '.join(sorted(cpus))}; this core's fixed-key AES rate in the last run: {rate} blocks/s.")
    return "\n".join(rows) + "\n"


def main():
    t = table()
    if "--page" not in sys.argv:
        print(t, end="")
        return
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    b, e = text.index(BEGIN) + len(BEGIN), text.index(END)
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(text[:b] + "\n" + t + text[e:])


if __name__ == "__main__":
    main()
