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
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_parts(pid):
    """VmRSS split into anonymous memory (heap, stacks) and file-backed
    pages (the binary's code and data as touched), in KiB."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                    out[k] = int(line.split()[1])
    except OSError:
        return None
    return out


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q / 100.0 * (len(v) - 1))))]


class Load:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.rng = random.Random(a.seed)
        self.latencies = []
        self.kinds = {"honest": 0, "garbage": 0, "disconnect": 0, "silent": 0}
        self.errors = {}
        self.honest_ok = 0
        self.honest_bad = []
        self.sessions = 0
        self.rss = []  # (t, sessions, kib)
        # like-for-like memory: at each checkpoint the workers pause, the
        # sessions in flight drain, and the idle server's RSS is sampled
        self.checkpoints = sorted(set(c for c in a.idle_at if c < a.sessions)) if not a.soak else []
        self.idle_rss = {}
        self.in_flight = 0
        self.cv = threading.Condition(self.lock)
        self.stop = False
        self.tmp = tempfile.mkdtemp(prefix="hush-load-")

    def err(self, kind, msg):
        with self.lock:
            key = f"{kind}: {msg}"
            self.errors[key] = self.errors.get(key, 0) + 1

    def start_server(self):
        a = self.a
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        cmd = [a.hush, "serve", "--model", a.model, "--listen", self.addr, "--max-sessions", str(a.max_sessions), "--proto", "fss"]
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

    def honest(self, i):
        out = os.path.join(self.tmp, f"y{i}.npy")
        cmd = [self.a.hush, "infer", "--connect", self.addr, "--input", self.a.input, "--out", out, "--proto", "fss"]
        cmd += ["--insecure"] if self.a.insecure else ["--pin", self.fp]
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
            self.err("honest", re.sub(r"[0-9]+", "N", last)[:120])
            with self.lock:
                self.honest_bad.append(last)
            return
        y = read_npy_f64(out)
        os.unlink(out)
        with self.lock:
            if y == self.ref:
                self.honest_ok += 1
                self.latencies.append(dt)
            else:
                self.honest_bad.append("wrong logits")
                self.errors["honest: WRONG LOGITS"] = self.errors.get("honest: WRONG LOGITS", 0) + 1

    def raw(self, kind, rng):
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
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
                    # closed by the server: the expected outcome, not an error
                except socket.timeout:
                    self.err(kind, f"server kept the connection open > {self.a.close_wait}s")
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

    def idle_sample(self, k):
        """Called with the lock held once `k` sessions have ended and none
        is in flight: waits for the server to finish its side, samples RSS."""
        time.sleep(self.a.settle)
        self.idle_rss[k] = rss_parts(self.srv.pid)
        self.checkpoints.pop(0)
        self.cv.notify_all()

    def worker(self, wid, deadline):
        rng = random.Random(self.a.seed * 1000 + wid)
        while not self.stop:
            with self.lock:
                if self.a.soak:
                    if time.time() >= deadline:
                        return
                elif self.sessions >= self.a.sessions:
                    return
                # hold back at a checkpoint until it has been sampled
                while self.checkpoints and self.sessions >= self.checkpoints[0]:
                    if self.in_flight == 0:
                        self.idle_sample(self.checkpoints[0])
                    else:
                        self.cv.wait(1.0)
                if self.sessions >= self.a.sessions:
                    return
                self.sessions += 1
                self.in_flight += 1
                n = self.sessions
            kind = "honest" if rng.random() >= self.a.misbehave else rng.choice(["garbage", "disconnect", "silent"])
            with self.lock:
                self.kinds[kind] += 1
            try:
                if kind == "honest":
                    self.honest(n)
                else:
                    self.raw(kind, rng)
            finally:
                with self.lock:
                    self.in_flight -= 1
                    self.cv.notify_all()

    def sampler(self):
        t0 = time.time()
        while not self.stop:
            r = rss_kib(self.srv.pid)
            if r is not None:
                with self.lock:
                    self.rss.append((round(time.time() - t0, 2), self.sessions, r))
            time.sleep(0.5)

    def run(self):
        self.reference()
        self.start_server()
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
        final_rss = rss_kib(self.srv.pid)
        self.idle_rss[self.sessions] = rss_parts(self.srv.pid)
        alive = self.srv.poll() is None
        self.stop = True
        self.srv.terminate()
        try:
            self.srv.wait(10)
        except subprocess.TimeoutExpired:
            self.srv.kill()
        self.server_log.seek(0)
        log = self.server_log.read().splitlines()
        rss_at = lambda k: next((r for (_, s, r) in self.rss if s >= k), None)
        lat = self.latencies
        report = {
            "clients": self.a.clients,
            "sessions": self.sessions,
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
            "server_alive": alive,
            "rss_kib": {
                "start": self.rss[0][2] if self.rss else None,
                "after_100": rss_at(100),
                "after_1000": rss_at(1000),
                "end": final_rss,
                "max": max((r for (_, _, r) in self.rss), default=None),
                # idle (no session in flight) after k sessions: like for like
                "idle_after": {str(k): v for k, v in sorted(self.idle_rss.items())},
            },
            "rss_series": self.rss[:: max(1, len(self.rss) // 40)],
            "server_log_lines": len(log),
            "server_log_sample": log[:8],
        }
        ok = alive and not self.honest_bad
        return ok, report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hush", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "hush"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "mnist_cnn.hushm"))
    ap.add_argument("--input", default=os.path.join(ROOT, "models", "samples", "mnist_8000_label4.npy"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--sessions", type=int, default=1000, help="total sessions (all kinds); ignored with --soak")
    ap.add_argument("--soak", type=float, default=0, help="run for this many seconds instead")
    ap.add_argument("--misbehave", type=float, default=0.25, help="fraction of misbehaving clients")
    ap.add_argument("--max-sessions", type=int, default=None,
                    help="the server's --max-sessions (default 2 x --clients: after its last inference a server session "
                         "pre-deals the next one while the client may already have left, so sessions outlive their clients briefly)")
    ap.add_argument("--client-timeout", type=float, default=300)
    ap.add_argument("--close-wait", type=float, default=30, help="how long a garbage client waits for the server to hang up")
    ap.add_argument("--silent-secs", type=float, default=5, help="how long a silent client stays connected")
    ap.add_argument("--insecure", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--idle-at", type=int, nargs="*", default=[100], help="session counts at which to drain and sample the idle server's RSS (the end is always sampled)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds to let the server finish before an idle sample")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for `hush serve` (repeatable)")
    ap.add_argument("--json", action="store_true")
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
