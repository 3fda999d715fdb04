#!/usr/bin/env python3
"""Runs a `hush bench` command and appends its `--json` records to
bench/records/<bench>.jsonl, each stamped with where and when it ran:

  date      UTC start time, RFC 3339
  load      1-minute load average before and after the run ("0.52 → 1.90")
  cores     CPUs the OS reports
  cpu       /proc/cpuinfo's model name (kept if the record has its own)
  command   the command as run (`hush bench ...`)
  commit    `git describe --always --dirty` of the checkout

Usage:
  python3 scripts/record.py bench aes --seconds 1
  python3 scripts/record.py --hush target/release/hush bench cot --n 1000000
  python3 scripts/record.py plan squeezenet --mode tee --net lan,wan,mobile --verify
                                        # `hush plan` reports, compacted to one record per
                                        # model and profile in bench/records/plan.jsonl
  python3 scripts/record.py --page      # regenerate docs/performance.md's records section
                                        # and docs/peers.md (scripts/peers_page.py)

`--page` runs `hush report --markdown bench/records/*.jsonl` and writes its
output between the markers of docs/performance.md (crates/hush-cli/tests/
docs_records.rs fails when they differ). Standard library only.
"""

import datetime
import glob
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "bench", "records")
PAGE = os.path.join(ROOT, "docs", "performance.md")
BEGIN = "<!-- records:begin"
END = "<!-- records:end -->"


def find_hush(explicit):
    if explicit:
        return explicit
    built = os.path.join(ROOT, "target", "release", "hush")
    if os.path.exists(built):
        return built
    found = shutil.which("hush")
    if not found:
        sys.exit("record.py: no hush program (build with `cargo build --release -p hush-cli`, or pass --hush PATH)")
    return found


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == "model name" and v.strip():
                    return v.strip()
    except OSError:
        pass
    return "unknown"


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def page(hush):
    files = sorted(glob.glob(os.path.join(RECORDS, "*.jsonl")))
    rel = [os.path.relpath(f, ROOT) for f in files]
    md = subprocess.run([hush, "report", "--markdown", *rel], cwd=ROOT, capture_output=True, text=True)
    if md.returncode != 0:
        sys.exit(f"record.py: hush report --markdown failed:\n{md.stderr}")
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    a = text.index(BEGIN)
    a = text.index("\n", a) + 1
    b = text.index(END)
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(text[:a] + md.stdout + text[b:])
    print(f"record.py: {os.path.relpath(PAGE, ROOT)}: {len(files)} record files", file=sys.stderr)
    # docs/peers.md, the same-run comparisons with the peers, from the same records.
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "peers_page.py")], check=True)


def compact_plan(rep):
    """One `hush plan` report (a CNN's or an encoder graph's) as a record:
    auto's prediction and choice, every fixed choice's prediction, the best
    of them, and the measured run of auto's plan (`--verify`)."""
    cnn = "family" in (rep.get("auto") or {})
    fixed, fixed_measured = {}, {}
    for f in rep.get("fixed", []):
        fixed[f.get("family") or f.get("preset")] = f["predicted_s"]
        if f.get("measured_s") is not None:
            fixed_measured[f.get("family") or f.get("preset")] = f["measured_s"]
    best = min(fixed.values()) if fixed else None
    auto = rep["auto"]["predicted_s"]
    if cnn:
        choice = rep["auto"]["family"]
    else:
        picked = sorted({r["choice"] for r in rep.get("steps", []) if r.get("choice")})
        choice = "per-layer" if len(picked) > 1 else (picked[0] if picked else "preset")
    m = rep.get("measured") or {}
    out = {
        "bench": "plan", "model": rep.get("model") or rep.get("program"), "mode": rep["mode"], "net": rep["net"],
        "auto_choice": choice, "predicted_s": auto,
        "fixed_predicted_s": fixed, "best_fixed_s": best,
        "auto_over_best_fixed": (auto / best) if best else None,
        "measured_s": m.get("seconds"), "predicted_over_measured": m.get("predicted_over_measured"),
        "fixed_measured_s": fixed_measured or None,
        "best_fixed_measured_s": min(fixed_measured.values()) if fixed_measured else None,
        "auto_over_best_fixed_measured": (m["seconds"] / min(fixed_measured.values())) if fixed_measured and m.get("seconds") else None,
        "cost_model": rep.get("cost_model"),
    }
    if rep.get("seq"):
        out["seq"] = rep["seq"]
    if rep.get("client_profile") not in (None, "none"):
        out["client_profile"] = rep["client_profile"]
    if rep.get("max_mem") is not None:
        out["max_mem"] = rep["max_mem"]
    if "dealer_sees_weights" in rep:
        out["dealer_sees_weights"] = rep["dealer_sees_weights"]
    if rep.get("cpu"):
        out["cpu"] = rep["cpu"]
    return out


def main(argv):
    hush = None
    if len(argv) >= 2 and argv[0] == "--hush":
        hush, argv = argv[1], argv[2:]
    hush = find_hush(hush)
    if argv == ["--page"]:
        page(hush)
        return 0
    if not argv or argv[0] not in ("bench", "plan"):
        sys.exit(__doc__)
    args = list(argv)
    if "--json" not in args:
        args.append("--json")
    started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    before = load1()
    run = subprocess.run([hush, *args], stdout=subprocess.PIPE, text=True)
    after = load1()
    if run.returncode != 0:
        sys.exit(f"record.py: `hush {' '.join(args)}` failed ({run.returncode}); nothing recorded")
    stamp = {
        "date": started.isoformat().replace("+00:00", "Z"),
        "load": f"{before:.2f} → {after:.2f}",
        "cores": os.cpu_count(),
        # the environment that changes what runs (the SIMD level) is part of the command
        "command": "".join(f"{k}={os.environ[k]} " for k in ("HUSH_SIMD",) if os.environ.get(k))
        + "hush " + " ".join(a for a in args if a != "--json"),
        # HUSH_RECORD_COMMIT names the build when --hush is not this checkout's.
        "commit": os.environ.get("HUSH_RECORD_COMMIT") or commit(),
    }
    os.makedirs(RECORDS, exist_ok=True)
    n = 0
    for line in run.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if argv[0] == "plan":
            rec = compact_plan(rec)
        rec.setdefault("cpu", cpu_model())
        rec.update(stamp)
        path = os.path.join(RECORDS, f"{rec.get('bench', 'other')}.jsonl")
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
        n += 1
        print(f"record.py: {os.path.relpath(path, ROOT)} += {rec.get('bench')} ({stamp['date']}, load {stamp['load']})", file=sys.stderr)
    if n == 0:
        sys.exit("record.py: the command printed no JSON record")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
