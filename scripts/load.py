#!/usr/bin/env python3
"""Load and soak test of `hush serve` on loopback (standard library only).

N concurrent clients (default 64) run sessions against one server: honest
clients (`hush infer` processes, whose logits must equal the reference
exactly: every party runs `--proto fss`, which reproduces the plaintext
fixed-point reference bit for bit; the default family, tami, is faithful
to within one unit per truncation, not exact) and misbehaving ones (a quarter by default, as raw sockets):

  garbage     sends random bytes, expects the server to close the connection
  disconnect  connects, sends a random prefix of garbage (maybe nothing), and
              hangs up at a random moment
  silent      connects and sends nothing; the server must close it (its
              handshake/receive timeouts) or keep serving the others

Reports latency percentiles of honest sessions, errors by kind, the server's
resident memory over time (after 100 sessions and at the end), and the
server's log lines. Exit status 1 if any honest client got a wrong or no
answer, or the server died.

  scripts/load.py [--clients 64] [--sessions 1000] [--misbehave 0.25]
                  [--soak SECONDS] [--insecure] [--json]
"""

import argparse
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loadlib import ROOT, LoadRun, add_common_args, free_port, latency_summary, rss_kib  # noqa: E402
from loadlib import pct, rss_parts  # noqa: E402,F401  (re-exported: older callers import them from here)


def read_npy_f64(path):
    """Minimal .npy reader for little-endian float64 arrays (the logits)."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not .npy")
    major = b[6]
    if major == 1:
        hlen = struct.unpack("<H", b[8:10])[0]
        off = 10
    else:
        hlen = struct.unpack("<I", b[8:12])[0]
        off = 12
    header = b[off:off + hlen].decode("latin1")
    if "'<f8'" not in header:
        raise ValueError(f"{path}: expected <f8, header {header}")
    data = b[off + hlen:]
    return list(struct.unpack(f"<{len(data) // 8}d", data))


class Load(LoadRun):
    peer_name = "server"

    def __init__(self, a):
        super().__init__(a, a.sessions)

    def processes(self):
        return [self.srv.pid]

    def port_for(self, rng):
        return self.port

    def start_server(self):
        a = self.a
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        # Every client here connects from 127.0.0.1, so the per-address cap
        # (default 8) would refuse honest clients once sessions outlive their
        # clients (pre-dealing the next inference): raise it to the global cap.
        cmd = [a.hush, "serve", "--model", a.model, "--listen", self.addr, "--max-sessions", str(a.max_sessions),
               "--max-sessions-per-addr", str(a.max_sessions), "--proto", "fss"]
        if a.insecure:
            cmd.append("--insecure")
        cmd += a.serve_arg
        self.server_log = open(os.path.join(self.tmp, "server.log"), "w+")
        self.srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.server_log, text=True)
        self.fp = None
        t0 = time.time()
        while time.time() - t0 < 30:
            line = self.srv.stdout.readline()
            if not line:
                break
            m = re.search(r"fingerprint (sha256:[0-9a-f]{64})", line)
            if m:
                self.fp = m.group(1)
            if a.insecure or self.fp:
                break
        threading.Thread(target=lambda: [None for _ in self.srv.stdout], daemon=True).start()
        # wait until it accepts
        while time.time() - t0 < 30:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def reference(self):
        """The logits of one honest session (checked against `hush run`)."""
        out = os.path.join(self.tmp, "ref.npy")
        cmd = [self.a.hush, "run", "--model", self.a.model, "--input", self.a.input, "--out", out, "--insecure", "--proto", "fss"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
        self.ref = read_npy_f64(out)

    def honest(self, rng, n):
        out = os.path.join(self.tmp, f"y{n}.npy")
        cmd = [self.a.hush, "infer", "--connect", self.addr, "--input", self.a.input, "--out", out, "--proto", "fss"]
        cmd += ["--insecure"] if self.a.insecure else ["--pin", self.fp]
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
        y = read_npy_f64(out)
        os.unlink(out)
        if y == self.ref:
            self.honest_ok(dt)
        else:
            self.honest_failed("wrong logits", "honest: WRONG LOGITS")

    def run(self):
        self.reference()
        self.start_server()
        wall = self.run_clients()
        final_rss = rss_kib(self.srv.pid)
        alive = self.srv.poll() is None
        self.stop = True
        self.srv.terminate()
        try:
            self.srv.wait(10)
        except subprocess.TimeoutExpired:
            self.srv.kill()
        self.server_log.seek(0)
        log = self.server_log.read().splitlines()
        rss_at = lambda k: next((r[0] for (_, s, r) in self.rss if s >= k), None)
        mem, series = self.memory_report(one=True)
        report = {
            "clients": self.a.clients,
            "sessions": self.count,
            "wall_s": round(wall, 2),
            "by_kind": self.kinds,
            "honest_correct": self.honest_ok_n,
            "honest_failed": len(self.honest_bad),
            "latency_s": latency_summary(self.latencies),
            "errors": self.errors,
            "server_alive": alive,
            "rss_kib": {
                "start": mem["start"],
                "after_100": rss_at(100),
                "after_1000": rss_at(1000),
                "end": final_rss,
                "max": mem["max"],
                # idle (no session in flight) after k sessions: like for like
                "idle_after": mem["idle_after"],
                **({"idle_by_mapping": mem["idle_by_mapping"]} if "idle_by_mapping" in mem else {}),
            },
            "rss_series": series,
            "server_log_lines": len(log),
            "server_log_sample": log[:8],
        }
        ok = alive and not self.honest_bad
        return ok, report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "sessions")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "mnist_cnn.hushm"))
    ap.add_argument("--input", default=os.path.join(ROOT, "models", "samples", "mnist_8000_label4.npy"))
    ap.add_argument("--max-sessions", type=int, default=None,
                    help="the server's --max-sessions (default 2 x --clients: after its last inference a server session "
                         "pre-deals the next one while the client may already have left, so sessions outlive their clients briefly)")
    ap.add_argument("--insecure", action="store_true")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds to let the server finish before an idle sample")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for `hush serve` (repeatable)")
    a = ap.parse_args()
    if a.max_sessions is None:
        a.max_sessions = 2 * a.clients
    ok, rep = Load(a).run()
    if a.json:
        print(json.dumps(rep))
    else:
        print(json.dumps(rep, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
