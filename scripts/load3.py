#!/usr/bin/env python3
"""Load and soak test of the 3PC service on loopback (standard library only).

Three `hush node`s (TLS, each pinning the other two; fresh identities from
`hush keygen`) receive jobs from N concurrent submitters (default 64):
honest ones (`hush job` processes: `adder64` on random inputs, checked
against the plaintext sum, and `aes128` on the FIPS-197 vector) and
misbehaving ones (a quarter by default):

  garbage     raw socket to a random node, sends random bytes, expects the
              node to close the connection
  disconnect  raw socket, a random prefix of garbage (maybe nothing), hangs up
  silent      raw socket that sends nothing for a while
  abort       a real `hush job` killed at a random moment (0-0.5 s): a job
              half submitted to some nodes, or a submitter gone mid-job

Reports latency percentiles of honest jobs, errors by kind, each node's
resident memory over time and idle after 100 jobs and at the end (workers
drain before each idle sample), and the nodes' log lines. Exit status 1 if
any honest submitter got a wrong or no answer, or a node died.

  scripts/load3.py [--clients 64] [--jobs 1000] [--misbehave 0.25]
                   [--soak SECONDS] [--json]
"""

import argparse
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import ROOT, free_port, pct, rss_kib, rss_parts  # noqa: E402

AES_KEY = "000102030405060708090a0b0c0d0e0f"
AES_PT = "00112233445566778899aabbccddeeff"
AES_CT = "69c4e0d86a7b0430d8cdb78070b4c55a"  # FIPS-197 appendix C.1


class Load3:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.latencies = []
        self.kinds = {"honest": 0, "garbage": 0, "disconnect": 0, "silent": 0, "abort": 0}
        self.errors = {}
        self.honest_ok = 0
        self.honest_bad = []
        self.jobs = 0
        self.in_flight = 0
        self.rss = []  # (t, jobs, [kib per node])
        self.checkpoints = sorted(set(c for c in a.idle_at if c < a.jobs)) if not a.soak else []
        self.idle_rss = {}
        self.stop = False
        self.tmp = tempfile.mkdtemp(prefix="hush-load3-")

    def err(self, kind, msg):
        with self.lock:
            key = f"{kind}: {msg}"
            self.errors[key] = self.errors.get(key, 0) + 1

    def start_nodes(self):
        a = self.a
        self.ports = [free_port() for _ in range(3)]
        self.addrs = [f"127.0.0.1:{p}" for p in self.ports]
        self.fps = []
        for i in range(3):
            d = os.path.join(self.tmp, f"node{i}")
            p = subprocess.run([a.hush, "keygen", "--out", d], capture_output=True, text=True, check=True)
            m = re.search(r"(sha256:[0-9a-f]{64})", p.stdout + p.stderr)
            self.fps.append(m.group(1))
        self.pins = [f"{self.addrs[j]}={self.fps[j]}" for j in range(3)]
        self.nodes, self.logs = [], []
        for i in range(3):
            cmd = [a.hush, "node", "--party", str(i), "--peers", ",".join(self.addrs), "--timeout", str(a.node_timeout),
                   "--identity", os.path.join(self.tmp, f"node{i}"), "--verbose"]
            for j in range(3):
                if j != i:
                    cmd += ["--pin", self.pins[j]]
            log = open(os.path.join(self.tmp, f"node{i}.log"), "w+")
            self.logs.append(log)
            self.nodes.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log))
        t0 = time.time()
        for p in self.ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", p), timeout=1).close()
                    break
                except OSError:
                    if time.time() - t0 > 30:
                        raise RuntimeError("nodes did not start")
                    time.sleep(0.1)

    def job_cmd(self, circuit, inputs):
        cmd = [self.a.hush, "job", "--nodes", ",".join(self.addrs), "--circuit", circuit, "--json", "--timeout", str(self.a.node_timeout)]
        for x in inputs:
            cmd += ["--input", x]
        for p in self.pins:
            cmd += ["--pin", p]
        return cmd

    def honest(self, rng):
        if rng.random() < 0.5:
            x, y = rng.getrandbits(64), rng.getrandbits(64)
            cmd, want = self.job_cmd("adder64", [f"{x:016x}", f"{y:016x}"]), f"{(x + y) % (1 << 64):016x}"
        else:
            cmd, want = self.job_cmd("aes128", [AES_KEY, AES_PT]), AES_CT
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.client_timeout)
        except subprocess.TimeoutExpired:
            self.err("honest", "timeout")
            with self.lock:
                self.honest_bad.append("timeout")
            return
        dt = time.time() - t0
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            self.err("honest", re.sub(r"[0-9a-f]{16,}|[0-9]+", "N", last)[:140])
            with self.lock:
                self.honest_bad.append(last)
            return
        try:
            out = json.loads(p.stdout.strip().splitlines()[-1])["outputs"][0]
        except (ValueError, KeyError, IndexError):
            out = None
        with self.lock:
            if out == want:
                self.honest_ok += 1
                self.latencies.append(dt)
            else:
                self.honest_bad.append("wrong output")
                self.errors["honest: WRONG OUTPUT"] = self.errors.get("honest: WRONG OUTPUT", 0) + 1

    def abort(self, rng):
        x, y = rng.getrandbits(64), rng.getrandbits(64)
        p = subprocess.Popen(self.job_cmd("adder64", [f"{x:016x}", f"{y:016x}"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.random() * 0.5)
        p.kill()
        p.wait()

    def raw(self, kind, rng):
        port = rng.choice(self.ports)
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            self.err(kind, f"connect failed: {e.__class__.__name__}")
            return
        try:
            if kind == "garbage":
                s.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096))))
                s.settimeout(self.a.close_wait)
                try:
                    while s.recv(65536):
                        pass
                except socket.timeout:
                    self.err(kind, f"node kept the connection open > {self.a.close_wait}s")
                except OSError:
                    pass
            elif kind == "disconnect":
                if rng.random() < 0.5:
                    s.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))))
                time.sleep(rng.random() * 0.3)
            else:  # silent
                s.settimeout(self.a.silent_secs)
                try:
                    s.recv(1)
                except (socket.timeout, OSError):
                    pass
        except OSError:
            pass
        finally:
            s.close()

    def node_rss(self):
        return [rss_kib(n.pid) for n in self.nodes]

    def idle_sample(self, k):
        time.sleep(self.a.settle)
        self.idle_rss[k] = [rss_parts(n.pid) for n in self.nodes]
        self.checkpoints.pop(0)
        self.cv.notify_all()

    def worker(self, wid, deadline):
        rng = random.Random(self.a.seed * 1000 + wid)
        while not self.stop:
            with self.lock:
                if self.a.soak:
                    if time.time() >= deadline:
                        return
                elif self.jobs >= self.a.jobs:
                    return
                while self.checkpoints and self.jobs >= self.checkpoints[0]:
                    if self.in_flight == 0:
                        self.idle_sample(self.checkpoints[0])
                    else:
                        self.cv.wait(1.0)
                if not self.a.soak and self.jobs >= self.a.jobs:
                    return
                self.jobs += 1
                self.in_flight += 1
            kind = "honest" if rng.random() >= self.a.misbehave else rng.choice(["garbage", "disconnect", "silent", "abort"])
            with self.lock:
                self.kinds[kind] += 1
            try:
                if kind == "honest":
                    self.honest(rng)
                elif kind == "abort":
                    self.abort(rng)
                else:
                    self.raw(kind, rng)
            finally:
                with self.lock:
                    self.in_flight -= 1
                    self.cv.notify_all()

    def sampler(self):
        t0 = time.time()
        while not self.stop:
            r = self.node_rss()
            with self.lock:
                self.rss.append((round(time.time() - t0, 2), self.jobs, r))
            time.sleep(0.5)

    def run(self):
        self.start_nodes()
        threading.Thread(target=self.sampler, daemon=True).start()
        deadline = time.time() + (self.a.soak or 0)
        t0 = time.time()
        ws = [threading.Thread(target=self.worker, args=(i, deadline)) for i in range(self.a.clients)]
        for w in ws:
            w.start()
        for w in ws:
            w.join()
        wall = time.time() - t0
        time.sleep(max(1.0, self.a.settle))
        final = self.node_rss()
        self.idle_rss[self.jobs] = [rss_parts(n.pid) for n in self.nodes]
        alive = all(n.poll() is None for n in self.nodes)
        self.stop = True
        for n in self.nodes:
            n.terminate()
        for n in self.nodes:
            try:
                n.wait(10)
            except subprocess.TimeoutExpired:
                n.kill()
        logs = []
        for lg in self.logs:
            lg.seek(0)
            logs.append(lg.read().splitlines())
        lat = self.latencies
        report = {
            "clients": self.a.clients,
            "jobs": self.jobs,
            "wall_s": round(wall, 2),
            "by_kind": self.kinds,
            "honest_correct": self.honest_ok,
            "honest_failed": len(self.honest_bad),
            "latency_s": {
                "p50": round(pct(lat, 50), 3) if lat else None,
                "p90": round(pct(lat, 90), 3) if lat else None,
                "p99": round(pct(lat, 99), 3) if lat else None,
                "max": round(max(lat), 3) if lat else None,
            },
            "errors": self.errors,
            "nodes_alive": alive,
            "rss_kib": {
                "start": self.rss[0][2] if self.rss else None,
                "max": [max((r[i] or 0 for (_, _, r) in self.rss), default=None) for i in range(3)],
                "idle_after": {str(k): v for k, v in sorted(self.idle_rss.items())},
            },
            "rss_series": self.rss[:: max(1, len(self.rss) // 40)],
            "node_log_lines": [len(lg) for lg in logs],
            "node_log_sample": [lg[:4] for lg in logs],
        }
        return alive and not self.honest_bad, report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hush", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "hush"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--jobs", type=int, default=1000, help="total submissions (all kinds); ignored with --soak")
    ap.add_argument("--soak", type=float, default=0, help="run for this many seconds instead")
    ap.add_argument("--misbehave", type=float, default=0.25)
    ap.add_argument("--node-timeout", type=int, default=20, help="the nodes' and submitters' --timeout")
    ap.add_argument("--client-timeout", type=float, default=300)
    ap.add_argument("--close-wait", type=float, default=30)
    ap.add_argument("--silent-secs", type=float, default=5)
    ap.add_argument("--idle-at", type=int, nargs="*", default=[100])
    ap.add_argument("--settle", type=float, default=None,
                    help="seconds the nodes get to finish before an idle sample (default: --node-timeout + 5, so that "
                         "jobs left half-submitted by aborting submitters have timed out)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.settle is None:
        a.settle = a.node_timeout + 5.0
    ok, rep = Load3(a).run()
    print(json.dumps(rep) if a.json else json.dumps(rep, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
