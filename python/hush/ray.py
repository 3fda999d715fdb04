"""Vertical LR training sharded over a Ray cluster per party (``hush[ray]``).

Each party runs its own Ray cluster and calls :func:`train` (or ``hush
train --ray ADDRESS --workers K``) on its driver. The driver starts K
workers (Ray actors, spread over the cluster's nodes); worker ``i`` links to
the peer's worker ``i`` over its own pinned TLS link (``listen``/``peer`` is
a base ``HOST:PORT``: worker ``i`` uses ``PORT + i``, or a list of K
addresses). Every batch's rows are split into K contiguous chunks; each
pair runs the ordinary batch protocol on its chunk, and the driver sums its
workers' gradient shares and applies the update (``hush_lr::shard`` in the
Rust crate documents the construction and what each host sees).

* With ``ids``, PSI runs first, sharded by hash bucket: worker ``i``
  intersects the IDs whose bucket (SHA-256 of the ID mod K) is ``i``. Each
  party then learns every bucket's set sizes and intersection size, not
  only the totals.
* With ``checkpoint=PATH`` the driver writes its shares atomically after
  every completed epoch (mode 0600: they are secret) and a later call with
  the same path resumes after the last completed epoch (both parties must
  resume from the same epoch; the workers check it).
* A lost worker fails the epoch with :class:`WorkerLost`, naming the
  worker; the peer's driver fails naming the same worker index.

K = 1 takes the same steps as :func:`hush.train_vertical`; K > 1 trains the
same model up to the fixed-point rounding of the shares' local truncation.
"""

import hashlib as _hashlib
import json as _json
import os as _os
import tempfile as _tempfile
import time as _time
import typing as _t

import numpy as _np

try:
    import ray as _ray
except ImportError as _e:  # pragma: no cover - the extra is missing
    raise ImportError("hush.ray needs Ray: pip install 'hush[ray]'") from _e

from . import _native
from ._errors import HushError, InvalidArgument, ProtocolError

__all__ = ["train", "WorkerLost"]

CHECKPOINT_FORMAT = "hush-lr-checkpoint-v1"


class WorkerLost(ProtocolError):
    """A worker of a sharded training failed or its actor was lost."""

    def __init__(self, index: int, epoch: int, batch: _t.Optional[int], cause: str):
        where = f"epoch {epoch}" + ("" if batch is None else f", batch {batch}")
        super().__init__(f"worker {index} failed during {where}: {cause}")
        self.index, self.epoch, self.batch = index, epoch, batch


@_ray.remote
class _LrActor:
    def __init__(self, kw: dict):
        from hush import _native as n
        self.w = n.LrWorker(**kw)

    def psi(self, ids):
        return self.w.psi(ids)

    def start(self, parts, labels, intercept, start_epoch):
        rows, cols, indptr, indices, data = parts
        return self.w.start(rows, cols, indptr, indices, data, labels, intercept, start_epoch)

    def begin_epoch(self, ep):
        return self.w.begin_epoch(ep)

    def step(self, j, own, peer):
        return self.w.step(j, own, peer)

    def reveal(self, own, peer, intercept):
        return self.w.reveal(own, peer, intercept)

    def cost(self):
        return self.w.cost()

    def where(self):
        return _ray.get_runtime_context().get_node_id(), _os.getpid()


def _addresses(base: _t.Union[None, str, _t.Sequence[str]], k: int, what: str) -> _t.List[_t.Optional[str]]:
    if base is None:
        return [None] * k
    if not isinstance(base, str):
        addrs = list(base)
        if len(addrs) != k:
            raise InvalidArgument(f"{what}: {len(addrs)} addresses for {k} workers")
        return addrs
    host, sep, port = base.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise InvalidArgument(f"{what}: expected HOST:PORT (worker i uses PORT + i), got {base!r}")
    if int(port) + k - 1 > 65535:
        raise InvalidArgument(f"{what}: ports {port}..{int(port) + k - 1} do not fit")
    return [f"{host}:{int(port) + i}" for i in range(k)]


def _csr(X: _t.Any) -> _t.Tuple[int, int, _np.ndarray, _np.ndarray, _np.ndarray]:
    if isinstance(X, tuple) and len(X) == 5:  # (rows, cols, indptr, indices, data), as the CLI hands it over
        return int(X[0]), int(X[1]), _np.asarray(X[2], _np.uint64), _np.asarray(X[3], _np.uint64), _np.asarray(X[4], _np.float64)
    if hasattr(X, "tocsr"):
        c = X.tocsr()
        c.sort_indices()
        return (int(c.shape[0]), int(c.shape[1]), _np.asarray(c.indptr, _np.uint64), _np.asarray(c.indices, _np.uint64),
                _np.asarray(c.data, _np.float64))
    a = _np.asarray(X, dtype=_np.float64)
    if a.ndim != 2:
        raise InvalidArgument(f"X must be 2-D (samples x features), got shape {a.shape}")
    mask = a != 0
    indptr = _np.concatenate([[0], _np.cumsum(mask.sum(axis=1))]).astype(_np.uint64)
    return a.shape[0], a.shape[1], indptr, _np.nonzero(mask)[1].astype(_np.uint64), a[mask]


def _subset(parts, rows: _np.ndarray):
    n, cols, indptr, indices, data = parts
    ip = indptr.astype(_np.int64)
    lens = ip[rows + 1] - ip[rows]
    new_ptr = _np.concatenate([[0], _np.cumsum(lens)]).astype(_np.uint64)
    take = _np.concatenate([_np.arange(ip[r], ip[r + 1]) for r in rows]) if len(rows) else _np.zeros(0, _np.int64)
    return len(rows), cols, new_ptr, indices[take], data[take]


def bucket_of(ids: _t.Sequence[str], k: int) -> _np.ndarray:
    """The PSI bucket of each ID among ``k`` (first 8 bytes of SHA-256,
    little-endian, mod k: the same at both parties; computed by
    ``hush_lr::shard::bucket_of``)."""
    return _np.asarray(_native.lr_buckets(list(ids), int(k)), dtype=_np.int64)


def _write_atomic(path: str, text: str) -> None:
    d = _os.path.dirname(_os.path.abspath(path))
    fd, tmp = _tempfile.mkstemp(prefix=".hush-ckpt-", dir=d)
    try:
        _os.fchmod(fd, 0o600)
        with _os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            _os.fsync(f.fileno())
        _os.replace(tmp, path)
    except BaseException:
        try:
            _os.unlink(tmp)
        except OSError:
            pass
        raise


def _fingerprint(cfg: dict) -> str:
    return _hashlib.sha256(_json.dumps(cfg, sort_keys=True).encode()).hexdigest()


def _read_checkpoint(path: str, role: str, fp: str, k: int, epochs: int):
    """The checkpoint at ``path``, read once and checked against this run
    (format, role, fingerprint, workers, epoch count); the shares' sizes are
    checked by :func:`_checkpoint_shares` once the feature counts are known."""
    try:
        with open(path) as f:
            c = _json.load(f)
        done = int(c.get("epochs_done", -1))
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise InvalidArgument(f"checkpoint {path}: {e}") from None
    if c.get("format") != CHECKPOINT_FORMAT or c.get("role") != role:
        raise InvalidArgument(f"checkpoint {path}: not a {role} party's hush-lr checkpoint")
    if c.get("config") != fp:
        raise InvalidArgument(f"checkpoint {path}: written by a training with other hyper-parameters or data")
    if c.get("workers") != k:
        raise InvalidArgument(f"checkpoint {path}: written with {c.get('workers')} workers, this run has {k} "
                              "(the shares do not depend on K, but both parties must agree: resume with the same K)")
    if not 0 <= done <= epochs:
        raise InvalidArgument(f"checkpoint {path}: shapes or epoch count do not fit this training")
    return c, done


def _checkpoint_shares(c, path: str, d_own: int, d_peer: int):
    try:
        own, peer = bytes.fromhex(c["own"]), bytes.fromhex(c["peer"])
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgument(f"checkpoint {path}: {e}") from None
    if len(own) != 8 * d_own or len(peer) != 8 * d_peer:
        raise InvalidArgument(f"checkpoint {path}: shapes or epoch count do not fit this training")
    return own, peer


def _get(refs, epoch: int, batch: _t.Optional[int]):
    """ray.get of one ref per worker; the first failure names its worker."""
    out = []
    first = None
    for i, r in enumerate(refs):
        try:
            out.append(_ray.get(r))
        except _ray.exceptions.RayActorError as e:
            first = first or WorkerLost(i, epoch, batch, f"its Ray actor was lost ({type(e).__name__}: {str(e).splitlines()[0]})")
        except _ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            first = first or WorkerLost(i, epoch, batch, str(cause) if cause is not None else str(e).splitlines()[-1])
    if first is not None:
        raise first
    return out


def train(role: str, X: _t.Any, y: _t.Any = None, *, workers: int = 2, ray_address: _t.Optional[str] = None,
          listen: _t.Union[None, str, _t.Sequence[str]] = None, peer: _t.Union[None, str, _t.Sequence[str]] = None,
          pin: _t.Optional[str] = None, identity: _t.Optional[str] = None, insecure: bool = False,
          ids: _t.Optional[_t.Sequence[_t.Any]] = None, out: _t.Optional[str] = None,
          checkpoint: _t.Optional[str] = None, epochs: int = 10, batch: int = 64, lr: float = 0.5,
          lr_decay: float = 0.0, l2: float = 0.0, bits: int = 2048, sigmoid: str = "cubic",
          intercept: bool = True, reveal: bool = False, seed: int = 1, low_bandwidth: bool = False,
          worker_cpus: float = 1, _insecure_test_seed: _t.Optional[int] = None,
          _kill_worker_at: _t.Optional[_t.Tuple[int, int, int]] = None,
          _max_batches: _t.Optional[int] = None) -> dict:
    """One party of a vertical LR training sharded over ``workers`` Ray
    actors (the arguments of :func:`hush.train_vertical`, plus):

    ``workers`` — K, the same at both parties; ``ray_address`` — the Ray
    cluster to join (``None``: the one ``ray.init`` already joined, or a new
    local one); ``listen``/``peer`` — a base ``HOST:PORT`` (worker ``i`` at
    ``PORT + i``) or K addresses, one per worker; ``ids`` — one ID per row
    of ``X``: a sharded PSI keeps the rows both parties hold;
    ``checkpoint`` — the file to write after each epoch and to resume from;
    ``worker_cpus`` — the CPUs each actor reserves.

    ``identity`` is a ``hush keygen`` folder that every node of this party's
    cluster can read at the same path. Returns a dict: ``wall_s``,
    ``epoch_s``, ``bytes`` (all workers' links), ``workers``,
    ``resumed_from``, ``nodes`` (distinct Ray nodes the workers ran on),
    ``psi`` (with ``ids``) and the opened weights with ``reveal``."""
    t0 = _time.time()
    if role not in ("labels", "features"):
        raise InvalidArgument(f"role {role!r} (labels or features)")
    k = int(workers)
    if not 1 <= k <= 4096:
        raise InvalidArgument(f"workers={workers} (1 to 4096)")
    if (listen is None) == (peer is None):
        raise InvalidArgument("give exactly one of listen=HOST:PORT or peer=HOST:PORT")
    if out is None and not reveal:
        raise InvalidArgument("give out=PATH for the model shares (or reveal=True): the model would be lost")
    if (role == "labels") != (y is not None):
        raise InvalidArgument("y is given to the labels party only, and it needs it")
    listens, peers = _addresses(listen, k, "listen"), _addresses(peer, k, "peer")
    parts = _csr(X)
    labels = None if y is None else _np.asarray(y, dtype=_np.float64).ravel()
    if labels is not None and len(labels) != parts[0]:
        raise InvalidArgument(f"{len(labels)} labels for {parts[0]} rows")
    sids = None
    if ids is not None:
        sids = [str(v) for v in ids]
        if len(sids) != parts[0]:
            raise InvalidArgument(f"{len(sids)} IDs for {parts[0]} rows")
        if len(set(sids)) != len(sids):
            raise InvalidArgument("duplicate IDs: each row needs a unique ID")
    if not _ray.is_initialized():
        _ray.init(address=ray_address, logging_level="ERROR", log_to_driver=False)
    kw = dict(role=role, k=k, pin=pin, identity=None if identity is None else _os.path.expanduser(str(identity)),
              insecure=insecure, epochs=epochs, batch=batch, lr=lr, lr_decay=lr_decay, l2=l2, bits=bits,
              sigmoid=sigmoid, seed=seed, reveal=reveal, low_bandwidth=low_bandwidth,
              insecure_test_seed=_insecure_test_seed)
    actors = [_LrActor.options(num_cpus=worker_cpus, scheduling_strategy="SPREAD").remote(
        dict(kw, index=i, listen=listens[i], peer=peers[i])) for i in range(k)]
    try:
        return _run(role, actors, k, parts, labels, sids, out, checkpoint, intercept, reveal, epochs,
                    dict(lr=lr, lr_decay=lr_decay, l2=l2), kw, t0, _kill_worker_at, _max_batches)
    finally:
        for a in actors:
            _ray.kill(a)


def _run(role, actors, k, parts, labels, sids, out, checkpoint, intercept, reveal, epochs, upd, kw, t0, kill_at,
         max_batches):
    nodes = {n for n, _ in _ray.get([a.where.remote() for a in actors])}
    res: dict = {"role": role, "workers": k, "nodes": len(nodes)}
    if sids is not None:
        tp = _time.time()
        b = bucket_of(sids, k)
        buckets = [_np.nonzero(b == i)[0] for i in range(k)]
        got = _get([a.psi.remote([sids[j] for j in buckets[i]]) for i, a in enumerate(actors)], 0, None)
        rows = _np.concatenate([buckets[i][_np.asarray(g["rows"], dtype=_np.int64)] for i, g in enumerate(got)]).astype(_np.int64)
        inter = int(sum(g["intersection"] for g in got))
        res["psi"] = {"intersection": inter, "own_size": len(sids), "peer_size": int(sum(g["peer_size"] for g in got)),
                      "bytes": int(sum(g["bytes"] for g in got)), "wall_s": _time.time() - tp,
                      "buckets": [int(g["intersection"]) for g in got]}
        if inter == 0:
            raise InvalidArgument(f"the PSI found no ID shared by both parties ({len(sids)} own rows, "
                                  f"{res['psi']['peer_size']} at the peer): nothing to train on")
        # the PSI's shared order follows its fresh keys; sort the
        # intersection by ID instead (both parties hold those IDs), so a
        # resumed run sees the rows in the order the checkpoint's run did
        rows = _np.array(sorted(rows.tolist(), key=lambda r: sids[r]), dtype=_np.int64)
        res["psi"]["ids_sha256"] = _hashlib.sha256("\n".join(sids[r] for r in rows).encode()).hexdigest()
        parts = _subset(parts, rows)
        if labels is not None:
            labels = labels[rows]
        res["psi"]["rows"] = rows.tolist()
    fp_cfg = {k_: v for k_, v in kw.items() if k_ not in ("pin", "identity", "insecure", "epochs", "insecure_test_seed")}
    fp_cfg["rows"] = int(parts[0])
    fp_cfg["ids"] = res.get("psi", {}).get("ids_sha256")
    fp = _fingerprint(fp_cfg)
    # the starting epoch (from a checkpoint) is needed by the workers' hello
    # before the feature counts are known: the file is read once, its
    # shares' sizes checked after
    start = 0
    ck = None
    if checkpoint and _os.path.exists(checkpoint):
        ck, start = _read_checkpoint(checkpoint, role, fp, k, epochs)
    wire = (parts[0], parts[1], parts[2].astype("<u8").tobytes(), parts[3].astype("<u8").tobytes(),
            parts[4].astype("<f8").tobytes())
    wire_ref = _ray.put(wire)
    lab = None if labels is None else labels.astype("<f8").tobytes()
    ts = _time.time()
    shapes = _get([a.start.remote(wire_ref, lab, intercept, start) for a in actors], start, None)
    res["setup_s"] = _time.time() - ts
    d_own, d_peer = shapes[0]
    own, peer = bytes(8 * d_own), bytes(8 * d_peer)
    if ck is not None:
        own, peer = _checkpoint_shares(ck, checkpoint, d_own, d_peer)
        res["resumed_from"] = start
    else:
        res["resumed_from"] = None
    epoch_s = []
    triples_s = 0.0
    batches_run = 0
    for ep in range(start, epochs):
        te = _time.time()
        nb = _get([a.begin_epoch.remote(ep) for a in actors], ep, None)
        triples_s += _time.time() - te
        for j in range(nb[0]):
            if max_batches is not None and batches_run >= max_batches:
                break  # a benchmark's partial epoch (no checkpoint is written for it)
            batches_run += 1
            if kill_at is not None and (ep, j) == tuple(kill_at[1:]):
                _ray.kill(actors[kill_at[0]], no_restart=True)
            steps = _get([a.step.remote(j, own, peer) for a in actors], ep, j)
            own, peer = _native.lr_apply_steps(role, own, peer, [tuple(s) for s in steps], ep, **upd)
        epoch_s.append(_time.time() - te)
        if max_batches is not None and batches_run >= max_batches:
            break
        if checkpoint:
            _write_atomic(checkpoint, _json.dumps({"format": CHECKPOINT_FORMAT, "role": role, "config": fp,
                                                    "workers": k, "epochs_done": ep + 1, "own": own.hex(),
                                                    "peer": peer.hex()}))
    has_intercept = role == "labels" and intercept
    opened = None
    if reveal:
        opened = _get([actors[0].reveal.remote(own, peer, has_intercept)], epochs, None)[0]
        res.update(opened)
    if out is not None:
        _native.lr_save_model(str(out), role, own, peer, has_intercept, opened)
    costs = _get([a.cost.remote() for a in actors], epochs, None)
    res.update(bytes=int(sum(c[0] for c in costs)), rounds=int(max(c[1] for c in costs)), epoch_s=epoch_s,
               epochs=len(epoch_s), batches_run=batches_run, triples_s=triples_s, wall_s=_time.time() - t0)
    return res


def _cli_train(argv: _t.List[str]) -> int:
    """``hush train --ray ADDRESS --workers K ...`` (``argv`` after
    ``train``): the flags and data are parsed and loaded by the ``hush``
    command's own code, then :func:`train` runs. ``--ray auto`` joins the
    cluster ``ray start`` made on this host, ``--ray HOST:PORT`` that head,
    ``--ray local`` starts a new cluster for this process (never joining
    another: two parties on one host each get their own)."""
    import sys

    try:
        spec = _native.lr_ray_spec(argv)
    except ValueError as e:
        print(f"hush: error: {e}".rstrip(), file=sys.stderr)
        return 2 if str(e).lstrip().startswith(("error:", "Usage")) else 1
    f = lambda k: _np.frombuffer(spec[k], dtype="<u8")  # noqa: E731
    X = (spec["rows"], spec["cols"], f("indptr"), f("indices"), _np.frombuffer(spec["data"], dtype="<f8"))
    y = None if spec.get("labels") is None else _np.frombuffer(spec["labels"], dtype="<f8")
    address = spec["ray"]
    try:
        if not _ray.is_initialized():
            _ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        r = train(spec["role"], X, y, workers=spec["workers"], listen=spec["listen"], peer=spec["peer"], pin=spec["pin"],
                  identity=spec["identity"], insecure=spec["insecure"], ids=spec["ids"], out=spec["out"],
                  checkpoint=spec["checkpoint"], epochs=spec["epochs"], batch=spec["batch"], lr=spec["lr"],
                  lr_decay=spec["lr_decay"], l2=spec["l2"], bits=spec["bits"], sigmoid=spec["sigmoid"],
                  intercept=spec["intercept"], reveal=spec["reveal"], seed=spec["seed"],
                  low_bandwidth=spec["low_bandwidth"])
    except (HushError, RuntimeError, ValueError, ConnectionError) as e:
        print(f"hush: error: {e}", file=sys.stderr)
        return 1
    if "psi" in r:
        p = r["psi"]
        print(f"PSI: {p['intersection']} of this party's {p['own_size']} rows are shared with the peer's "
              f"{p['peer_size']} ({p['wall_s']:.2f} s, {p['bytes']} bytes, {len(p['buckets'])} buckets); training on them",
              file=sys.stderr)
    resumed = "" if r["resumed_from"] is None else f" (resumed after epoch {r['resumed_from']})"
    print(f"trained {r['epochs']} epochs{resumed} on {r['workers']} workers over {r['nodes']} Ray nodes in "
          f"{r['wall_s']:.2f} s ({r['bytes']} bytes); shares written to {spec['out']}", file=sys.stderr)
    return 0
