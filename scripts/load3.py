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
                   [--soak SECONDS] [--idle-at N ...] [--smaps] [--json]

The worker loop, the raw-socket clients and the memory probes are shared
with scripts/load.py (scripts/loadlib.py).
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loadlib import LoadRun, add_common_args, cpu_seconds, free_port, latency_summary  # noqa: E402

AES_KEY = "000102030405060708090a0b0c0d0e0f"
AES_PT = "00112233445566778899aabbccddeeff"
AES_CT = "69c4e0d86a7b0430d8cdb78070b4c55a"  # FIPS-197 appendix C.1


class Load3(LoadRun):
    misbehaving_kinds = ("garbage", "disconnect", "silent", "abort")
    peer_name = "node"

    def __init__(self, a):
        super().__init__(a, a.jobs)

    def processes(self):
        return [n.pid for n in self.nodes]

    def port_for(self, rng):
        return rng.choice(self.ports)

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
            cmd += a.node_arg
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

    def honest(self, rng, n):
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
            self.honest_failed("timeout")
            return
        dt = time.time() - t0
        if p.returncode != 0:
            self.honest_process_failed(p.stderr)
            return
        try:
            out = json.loads(p.stdout.strip().splitlines()[-1])["outputs"][0]
        except (ValueError, KeyError, IndexError):
            out = None
        if out == want:
            self.honest_ok(dt)
        else:
            self.honest_failed("wrong output", "honest: WRONG OUTPUT")

    def misbehave(self, kind, rng):
        if kind == "abort":
            # a real submitter killed at a random moment: a job half submitted
            x, y = rng.getrandbits(64), rng.getrandbits(64)
            p = subprocess.Popen(self.job_cmd("adder64", [f"{x:016x}", f"{y:016x}"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.random() * 0.5)
            p.kill()
            p.wait()
        else:
            self.raw(kind, rng, self.port_for(rng))

    def run(self):
        self.start_nodes()
        wall = self.run_clients()
        alive = all(n.poll() is None for n in self.nodes)
        work = [cpu_seconds(n.pid) for n in self.nodes]
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
        mem, series = self.memory_report()
        report = {
            "clients": self.a.clients,
            "jobs": self.count,
            "wall_s": round(wall, 2),
            "by_kind": self.kinds,
            "honest_correct": self.honest_ok_n,
            "honest_failed": len(self.honest_bad),
            "latency_s": latency_summary(self.latencies),
            "errors": self.errors,
            "nodes_alive": alive,
            "rss_kib": mem,
            "node_cpu_s": work,
            "rss_series": series,
            "node_log_lines": [len(lg) for lg in logs],
            "node_log_sample": [lg[:4] for lg in logs],
        }
        return alive and not self.honest_bad, report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "jobs")
    ap.add_argument("--node-timeout", type=int, default=20, help="the nodes' and submitters' --timeout")
    ap.add_argument("--settle", type=float, default=None,
                    help="seconds the nodes get to finish before an idle sample (default: --node-timeout + 5, so that "
                         "jobs left half-submitted by aborting submitters have timed out)")
    ap.add_argument("--node-arg", action="append", default=[], help="extra argument for every `hush node` (repeatable)")
    a = ap.parse_args()
    if a.settle is None:
        a.settle = a.node_timeout + 5.0
    ok, rep = Load3(a).run()
    print(json.dumps(rep) if a.json else json.dumps(rep, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
