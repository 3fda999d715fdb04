#!/usr/bin/env python3
"""Runs SecretFlow SPU's ReLU beside hush (/work/shared/peers/spu_relu.py,
in the venv at ~/.cache/hush-peers/spu-venv) and appends its JSON to
bench/records/nonlinear.jsonl as proto "spu-semi2k" / "spu-cheetah",
stamped like scripts/record.py does (cpu, date, load, command).

Usage: python3 scripts/record_spu_relu.py 200000 --proto SEMI2K --field FM64 --op relu --reps 3
       python3 scripts/record_spu_relu.py --op gelu --shape 128x768 --proto SEMI2K --reps 3
       (with --shape: /work/shared/peers/spu_ops.py, the transformer operators)
"""
import datetime, json, os, subprocess, sys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def load1():
    return float(open("/proc/loadavg").read().split()[0])
args = sys.argv[1:]
started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
b = load1()
py = os.path.expanduser("~/.cache/hush-peers/spu-venv/bin/python")
# HUSH_SPU_OPS: another copy of the operators' harness (e.g. one with a layernorm op added)
script = os.environ.get("HUSH_SPU_OPS", "/work/shared/peers/spu_ops.py") if "--shape" in args else "/work/shared/peers/spu_relu.py"
out = subprocess.run([py, script, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=600).stdout
a = load1()
rec = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
rec = {"bench": "nonlinear", "op": rec["op"], "n": rec["n"], "bits": 64 if rec["field"] == "FM64" else 32, **rec,
       "machine": "both SPU parties on this machine's 2 cores (brpc loopback); wall_s = SPU's total incl. its trusted-first-party Beaver generation",
       "cpu": cpu, "cores": os.cpu_count(), "date": started.isoformat().replace("+00:00", "Z"), "load": f"{b:.2f} → {a:.2f}",
       "command": "spu-venv/bin/python " + script + " " + " ".join(args), "commit": "peer: SecretFlow SPU 0.9.5"}
rec["proto"] = "spu-" + rec["proto"].lower()
with open(os.path.join(ROOT, "bench/records/nonlinear.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
print(rec["proto"], rec["wall_s"], rec["load"])
