"""What scripts/load.py (2PC server) and scripts/load3.py (3PC nodes) share
(standard library only): the worker loop of N concurrent clients with
like-for-like idle checkpoints, the misbehaving raw-socket clients, the
resident-memory probes and the latency summary.

A driver subclasses `LoadRun` and provides `honest(rng, n)` (one honest
client; calls `honest_ok`/`honest_failed`), `misbehaving_kinds`,
`misbehave(kind, rng)`, `processes()` (the pids whose memory is sampled)
and its own start-up and report.
"""

import os
import random
import re
import socket
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_hush():
    return os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "hush")


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
    pages (the binary's code and data as touched), in KiB, plus the thread
    count."""
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


def cpu_seconds(pid):
    """CPU seconds (user + system, all threads, exited ones included) of a
    process so far: how much work it did, whatever it waited for a core."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


def rss_by_mapping(pid):
    """Resident KiB by kind of mapping (/proc/PID/smaps): `brk` (the main
    malloc arena), `arenas` (anonymous mappings inside glibc's 64 MiB
    per-thread arena heaps), `stacks` (anonymous mappings directly above a
    guard page: thread stacks), `anon` (other anonymous) and `file`."""
    out = {"brk": 0, "arenas": 0, "stacks": 0, "anon": 0, "file": 0}
    try:
        with open(f"/proc/{pid}/smaps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    maps = []  # (start, end, perms, path, rss)
    cur = None
    for line in lines:
        head = line.split()
        if head and re.match(r"^[0-9a-f]+-[0-9a-f]+$", head[0]):
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            cur = [lo, hi, head[1], head[5] if len(head) > 5 else "", 0]
            maps.append(cur)
        elif line.startswith("Rss:") and cur is not None:
            cur[4] = int(line.split()[1])
    prev = None
    for lo, hi, perms, path, rss in maps:
        if path == "[heap]":
            out["brk"] += rss
        elif path.startswith("/"):
            out["file"] += rss
        elif path == "" and lo % (64 << 20) == 0 and perms.startswith("rw"):
            # a per-thread arena's heap: 64 MiB-aligned, its tail PROT_NONE
            out["arenas"] += rss
        elif path == "" and prev is not None and prev[1] == lo and prev[2].startswith("---"):
            out["stacks"] += rss
        else:
            out["anon"] += rss
        prev = (lo, hi, perms, path)
    return out


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q / 100.0 * (len(v) - 1))))]


def latency_summary(lat):
    return {
        "p50": round(pct(lat, 50), 3) if lat else None,
        "p90": round(pct(lat, 90), 3) if lat else None,
        "p99": round(pct(lat, 99), 3) if lat else None,
        "max": round(max(lat), 3) if lat else None,
    }


def add_common_args(ap, unit):
    """The options both drivers take; `unit` is "sessions" or "jobs"."""
    ap.add_argument("--hush", default=default_hush())
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument(f"--{unit}", type=int, default=1000, help=f"total {unit} (all kinds); ignored with --soak")
    ap.add_argument("--soak", type=float, default=0, help="run for this many seconds instead")
    ap.add_argument("--misbehave", type=float, default=0.25, help="fraction of misbehaving clients")
    ap.add_argument("--client-timeout", type=float, default=300)
    ap.add_argument("--close-wait", type=float, default=30, help="how long a garbage client waits to be hung up on")
    ap.add_argument("--silent-secs", type=float, default=5, help="how long a silent client stays connected")
    ap.add_argument("--idle-at", type=int, nargs="*", default=[100],
                    help=f"{unit} counts at which to drain and sample idle memory (the end is always sampled)")
    ap.add_argument("--smaps", action="store_true", help="with each idle sample, resident memory by kind of mapping")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")


class LoadRun:
    misbehaving_kinds = ("garbage", "disconnect", "silent")
    peer_name = "server"

    def __init__(self, a, total):
        self.a = a
        self.total = total
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.latencies = []
        self.kinds = {k: 0 for k in ("honest",) + tuple(self.misbehaving_kinds)}
        self.errors = {}
        self.honest_ok_n = 0
        self.honest_bad = []
        self.count = 0
        self.in_flight = 0
        self.rss = []  # (t, count, kib or [kib per process])
        # like-for-like memory: at each checkpoint the workers pause, the
        # clients in flight drain, and the idle processes' RSS is sampled
        self.checkpoints = sorted(set(c for c in a.idle_at if c < total)) if not a.soak else []
        self.idle_rss = {}
        self.idle_maps = {}
        self.stop = False
        self.tmp = tempfile.mkdtemp(prefix="hush-load-")

    # --- to provide -------------------------------------------------------
    def processes(self):
        raise NotImplementedError

    def honest(self, rng, n):
        raise NotImplementedError

    def misbehave(self, kind, rng):
        self.raw(kind, rng, self.port_for(rng))

    def port_for(self, rng):
        raise NotImplementedError

    # --- shared -----------------------------------------------------------
    def err(self, kind, msg):
        with self.lock:
            key = f"{kind}: {msg}"
            self.errors[key] = self.errors.get(key, 0) + 1

    def honest_ok(self, dt):
        with self.lock:
            self.honest_ok_n += 1
            self.latencies.append(dt)

    def honest_failed(self, why, error_key=None):
        with self.lock:
            self.honest_bad.append(why)
            if error_key:
                self.errors[error_key] = self.errors.get(error_key, 0) + 1

    def honest_process_failed(self, stderr):
        last = (stderr.strip().splitlines() or ["(no message)"])[-1]
        self.err("honest", re.sub(r"[0-9a-f]{16,}|[0-9]+", "N", last)[:140])
        self.honest_failed(last)

    def raw(self, kind, rng, port):
        """A misbehaving client on a raw socket: `garbage` sends random
        bytes and expects to be hung up on, `disconnect` sends a random
        prefix of garbage (maybe nothing) and leaves, `silent` sends
        nothing for a while."""
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
                    # closed by the peer: the expected outcome, not an error
                except socket.timeout:
                    self.err(kind, f"{self.peer_name} kept the connection open > {self.a.close_wait}s")
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

    def sample_idle(self, k):
        pids = self.processes()
        self.idle_rss[k] = [rss_parts(p) for p in pids]
        if self.a.smaps:
            self.idle_maps[k] = [rss_by_mapping(p) for p in pids]

    def idle_checkpoint(self, k):
        """Called with the lock held once `k` clients have ended and none is
        in flight: waits for the processes to finish their side, samples."""
        time.sleep(self.a.settle)
        self.sample_idle(k)
        self.checkpoints.pop(0)
        self.cv.notify_all()

    def worker(self, wid, deadline):
        rng = random.Random(self.a.seed * 1000 + wid)
        while not self.stop:
            with self.lock:
                if self.a.soak:
                    if time.time() >= deadline:
                        return
                elif self.count >= self.total:
                    return
                # hold back at a checkpoint until it has been sampled
                while self.checkpoints and self.count >= self.checkpoints[0]:
                    if self.in_flight == 0:
                        self.idle_checkpoint(self.checkpoints[0])
                    else:
                        self.cv.wait(1.0)
                if not self.a.soak and self.count >= self.total:
                    return
                self.count += 1
                self.in_flight += 1
                n = self.count
            kind = "honest" if rng.random() >= self.a.misbehave else rng.choice(list(self.misbehaving_kinds))
            with self.lock:
                self.kinds[kind] += 1
            try:
                if kind == "honest":
                    self.honest(rng, n)
                else:
                    self.misbehave(kind, rng)
            finally:
                with self.lock:
                    self.in_flight -= 1
                    self.cv.notify_all()

    def sampler(self):
        t0 = time.time()
        while not self.stop:
            r = [rss_kib(p) for p in self.processes()]
            with self.lock:
                self.rss.append((round(time.time() - t0, 2), self.count, r))
            time.sleep(0.5)

    def run_clients(self):
        """Runs the clients to the end; then lets the processes settle and
        takes the final idle sample. Returns the clients' wall time."""
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
        self.sample_idle(self.count)
        return wall

    def memory_report(self, one=False):
        """RSS figures; `one`: a single process (figures unwrapped)."""
        pick = (lambda v: v[0] if v else None) if one else (lambda v: v)
        n = len(self.processes())
        rep = {
            "start": pick(self.rss[0][2]) if self.rss else None,
            "max": pick([max((r[i] or 0 for (_, _, r) in self.rss), default=None) for i in range(n)]),
            "idle_after": {str(k): pick(v) for k, v in sorted(self.idle_rss.items())},
        }
        if self.idle_maps:
            rep["idle_by_mapping"] = {str(k): pick(v) for k, v in sorted(self.idle_maps.items())}
        return rep, [(t, c, pick(r)) for (t, c, r) in self.rss[:: max(1, len(self.rss) // 40)]]
