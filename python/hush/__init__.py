"""hush: private machine learning with secure multi-party computation.

The heavy lifting happens in Rust (``hush._native``); this package is the
Python front end (numpy in, numpy out; ONNX models in).

Private inference (tee mode: correlations dealt by the parties' trusted
modules — **simulated here, which gives no hardware protection**):

* :func:`run` — one call, both parties in this process: model path + numpy
  array in, numpy array of logits out (``report=True`` also returns costs);
* :class:`Server` — serve a model to many concurrent clients;
* :class:`Client` — private inference against a server;
* :func:`embed` — private sentence embeddings with a BERT-family ONNX
  encoder (e.g. all-MiniLM-L6-v2), both parties in this process.

Benchmarks: :func:`bench_cot`, :func:`bench_aes`; names: :func:`net_profiles`,
:func:`cot_sources`. Bundled demo data: :func:`samples`. Model tools: ``hush.onnx_import`` (ONNX → hush model
file) and ``hush.models`` (benchmark model builders).
"""

import json as _json
import os as _os
import pathlib as _pathlib
import sys as _sys
import typing as _t

import numpy as _np

from . import _native
from ._errors import (HushError, InvalidArgument, ProtocolError, ConnectionRefused, PinMismatch, ModeMismatch,
                      SettingMismatch, ServerAborted, PeerSilent, translated as _translated)
from ._native import __version__, bench_aes, bench_cot, cot_sources, net_profiles

__all__ = ["__version__", "bench_aes", "bench_cot", "cot_sources", "net_profiles", "Server", "Client", "run", "embed", "embed_remote",
           "samples", "HushError", "InvalidArgument", "ProtocolError", "ConnectionRefused", "PinMismatch", "ModeMismatch",
           "SettingMismatch", "ServerAborted", "PeerSilent"]

# A path to a model file (``.hushm`` or ``.onnx``) or an identity folder.
_PathLike = _t.Union[str, "_os.PathLike[str]"]
# ``True`` for a progress bar on stderr, ``False``/``None`` for none, or a
# callable ``f(done, total)`` called after each layer.
_ProgressArg = _t.Union[bool, None, _t.Callable[[int, int], _t.Any]]


def _identity_arg(identity: _t.Optional[_PathLike]) -> _t.Optional[str]:
    """An identity folder as a string, ``~`` expanded (as a shell would)."""
    return None if identity is None else _os.path.expanduser(_os.fspath(identity))


def samples() -> "_pathlib.Path":
    """The folder of the bundled demo data: ``mnist_cnn.hushm`` (the MNIST
    CNN), ``mnist_cnn.json`` (its description) and ``samples/*.npy`` (MNIST test images, the true
    label in each file name, e.g. ``mnist_8000_label4.npy``).

    Inside an installed package this is ``site-packages/hush/_models``; the
    ``hush`` command's ``demo`` uses the same folder.
    """
    d = _pathlib.Path(__file__).resolve().parent / "_models"
    if not (d / "mnist_cnn.hushm").is_file():
        raise FileNotFoundError(f"the bundled demo data is missing from {d} (a broken install?)")
    return d


def _note_raw_input(xa: "_np.ndarray") -> None:
    """Warns when an input looks like raw integer data (e.g. uint8 pixels
    0..255): hush computes on the values as given, and a model trained on
    normalised inputs then predicts garbage without any error."""
    if xa.size and float(xa.max()) > 1.0 and bool(_np.all(_np.mod(xa, 1) == 0)):
        import warnings
        warnings.warn(f"the input holds whole numbers up to {float(xa.max()):g} (raw pixels?); hush computes on them "
                      "as given — if the model was trained on normalised inputs (e.g. pixels / 255), normalise them first",
                      UserWarning, stacklevel=3)


def _model_bytes(model: _PathLike) -> bytes:
    """Bytes of a hush model file from a path to a .hushm or .onnx file."""
    path = _os.fspath(model)
    if path.lower().endswith(".onnx"):
        from . import onnx_import

        try:
            return _native.onnx_file_to_hushm(path)
        except ValueError as e:
            raise onnx_import.UnsupportedModel(str(e)) from None
    with open(path, "rb") as f:
        return f.read()


class _ProgressBar:
    """Prints a one-line progress bar on stderr (layers done / total)."""

    def __init__(self, label: str):
        self.label = label

    def __call__(self, done: int, total: int) -> None:
        width = 30
        fill = int(width * done / max(total, 1))
        _sys.stderr.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}")
        if done >= total:
            _sys.stderr.write("\n")
        _sys.stderr.flush()


def _progress_arg(progress: _ProgressArg, label: str) -> _t.Optional[_t.Callable[[int, int], _t.Any]]:
    if progress is True:
        return _ProgressBar(label)
    if progress in (None, False):
        return None
    if callable(progress):
        return progress
    raise TypeError("progress must be True, False/None, or a callable f(done, total)")


def run(model: _PathLike, x: _t.Any, proto: str = "auto", net: str = "none", bits: int = 37, frac: int = 12,
        progress: _ProgressArg = False, report: bool = False, mode: str = "tee",
        mac_s: _t.Optional[int] = None,
        crisp_linear: _t.Optional[str] = None) -> _t.Union[_np.ndarray, _t.Tuple[_np.ndarray, dict]]:
    """Private inference of ``x`` on ``model`` with both parties in this process.

    ``model`` is a path to a ``.hushm`` or ``.onnx`` file; ``x`` a numpy array of
    the model's input shape (a leading batch dimension of 1 is allowed). Returns
    the logits as a numpy array (softmax/argmax, if the model ends with one, is
    applied by the caller to these revealed logits), or ``(logits, report)``
    with ``report=True``. ``progress=True`` shows a progress bar.

    ``mode`` is the trust mode: ``"tee"`` (the parties' trusted modules;
    attestation simulated, no hardware protection), ``"dealer"`` (a dealer
    service, started in this process here, trusted not to collude with
    either party), ``"interactive"`` (cryptography only: HE linear layers
    and cf2 comparisons on Ferret COTs) or ``"silent"`` (HE linear layers,
    cf2 on SilentFlow COTs from the simulated modules) or
    ``"malicious-client"`` (CRISP: every value carries a MAC under a key the
    client never sees and one consistency check runs before the client gets
    any output; a dealer, started in this process here, deals the
    correlations — never a simulated module; ``mac_s`` is the MAC parameter
    s, default 40; ``crisp_linear`` the linear backend: ``"dealt"``, the
    default, or ``"ckks"``, CRISP's CKKS-packed layers with the
    ciphertexts made by the dealer and the HE product offline — the same
    online openings as ``"dealt"``, more offline cost; it emits a
    ``UserWarning`` noting this).
    ``proto="auto"`` picks ``tami`` in tee/dealer mode,
    ``cf2`` in interactive/silent mode and ``crisp`` in malicious-client mode.
    """
    xa = _np.ascontiguousarray(x, dtype=_np.float64)
    _note_raw_input(xa)
    with _translated():
        logits, shape, rep = _native.run_model(
            _model_bytes(model), xa.ravel().tolist(), list(xa.shape), proto=proto, net=net,
            bits=bits, frac=frac, progress=_progress_arg(progress, "hush.run"), mode=mode, mac_s=mac_s,
            crisp_linear=crisp_linear)
    out = _np.asarray(logits, dtype=_np.float64).reshape(shape)
    return (out, _json.loads(rep)) if report else out


def embed(model: _PathLike, ids: _t.Any, mask: _t.Any = None, *,
          tokenizer: _t.Union[None, _PathLike, _t.Callable[[_t.List[str]], _t.Any]] = None,
          proto: str = "tami", bits: int = 64, frac: int = 12, batch_tokens: _t.Optional[int] = None,
          check: bool = False, report: bool = False) -> _t.Union[_np.ndarray, _t.Tuple[_np.ndarray, dict]]:
    """Private sentence embeddings with a BERT-family encoder, both parties in this process.

    ``model`` is the path of an ONNX export of a BERT-style encoder (Hugging
    Face / sentence-transformers graphs: embeddings, attention mask, mean
    pooling, optional L2 normalisation; ``scripts/minilm.py`` writes
    all-MiniLM-L6-v2's). Tee mode: the parties' trusted modules are
    **simulated here, which gives no hardware protection**.

    ``ids`` is either a 2-D integer array of token ids padded to a common
    length, with ``mask`` (1 for real tokens, 0 for padding) — what a
    Hugging Face tokenizer returns as ``input_ids``/``attention_mask`` — or
    a list of per-sentence id lists (no padding, no mask). With
    ``tokenizer`` (a callable taking the list of sentences and returning
    ``(ids, mask)``), ``ids`` may be the list of sentences themselves.
    Sentences without a callable are tokenised here with the model's
    Hugging Face ``tokenizer.json`` (``tokenizer=`` its path; by default the
    file of that name next to ``model``), by the same code as ``hush embed
    --text``; at most 128 tokens per sentence.
    Tokenization is the client's, local: the server learns the sequence
    lengths only (as the batches' padded lengths).

    Returns the embeddings as a ``(sentences, hidden)`` float64 array, or
    ``(embeddings, report)`` with ``report=True`` (time, bytes, rounds, the
    smallest headroom of the ranges proved at load; ``check=True`` also runs
    the plaintext fixed-point reference and reports the smallest cosine).
    """
    if isinstance(ids, str):
        ids = [ids]
    sentences = isinstance(ids, (list, tuple)) and bool(ids) and all(isinstance(x, str) for x in ids)
    if callable(tokenizer):
        ids, mask = tokenizer(list(ids))
    elif sentences:
        path = _os.path.join(_os.path.dirname(_os.path.abspath(_os.fspath(model))), "tokenizer.json") if tokenizer is None \
            else _os.path.expanduser(_os.fspath(tokenizer))
        if tokenizer is None and not _os.path.isfile(path):
            raise FileNotFoundError(f"no tokenizer.json next to the model ({path}): give tokenizer= (its path, or a callable)")
        with _translated():
            ids, mask = _native.tokenize(path, list(ids)), None
    if isinstance(ids, (list, tuple)) and ids and not isinstance(ids[0], (list, tuple, _np.ndarray)):
        raise TypeError("ids: a 2-D array of token ids, a list of id lists, or sentences")
    if mask is None:
        rows = [[int(t) for t in row] for row in ids]
    else:
        a = _np.asarray(ids)
        m = _np.asarray(mask)
        if a.ndim != 2 or a.shape != m.shape:
            raise ValueError(f"ids {a.shape} and mask {m.shape} must be 2-D arrays of the same shape")
        if not _np.isin(m, (0, 1)).all():
            raise ValueError("mask must hold only 0 and 1")
        rows = []
        for r, (row, mr) in enumerate(zip(a, m)):
            n = int(mr.sum())
            if n == 0 or not mr[:n].all():
                raise ValueError(f"mask row {r}: real tokens must come first (right padding), at least one")
            rows.append([int(t) for t in row[:n]])
    if any(t < 0 for row in rows for t in row):
        raise ValueError("token ids must be non-negative")
    with _translated():
        emb, rep = _native.embed_tokens(_os.fspath(model), rows, proto=proto, bits=bits, frac=frac,
                                        batch_tokens=batch_tokens, check=check)
    out = _np.asarray(emb, dtype=_np.float64)
    return (out, _json.loads(rep)) if report else out


def _plan_arg(plan: _t.Optional[_PathLike]) -> _t.Optional[str]:
    """``None``, ``"auto"`` or a plan file's path (``~`` expanded)."""
    if plan is None or plan == "auto":
        return plan
    return _os.path.expanduser(_os.fspath(plan))


def embed_remote(addr: str, ids: _t.Any, mask: _t.Any, token_types: _t.Any = None, *, pin: _t.Optional[str] = None,
                 identity: _t.Optional[_PathLike] = None, insecure: bool = False, mode: str = "tee",
                 dealer: _t.Optional[str] = None, dealer_pin: _t.Optional[str] = None, output: _t.Optional[str] = None,
                 proto: str = "auto", net: str = "none", connect_timeout: _t.Optional[float] = None,
                 plan: _t.Optional[_PathLike] = None,
                 report: bool = False) -> _t.Union[_np.ndarray, _t.Tuple[_np.ndarray, dict]]:
    """Runs an encoder graph served by ``hush serve --model encoder.onnx`` on
    ``addr`` (the graph runtime: graphs as ``torch.onnx.export`` or
    ``optimum`` write them). ``ids``/``mask`` (and ``token_types``) are
    ``rows x padded length`` integer arrays, as a Hugging Face tokenizer
    returns them; the server learns the padded shape only. ``pin`` is the
    server's fingerprint; ``mode`` ``"tee"`` (trusted modules **simulated
    here — no hardware protection**) or ``"dealer"`` (with ``dealer`` and
    ``dealer_pin``: the dealer never sees the weights). Returns the graph's
    first output (or ``output``), and with ``report=True`` the run's record."""
    a = _np.ascontiguousarray(ids, dtype=_np.int64)
    m = _np.ascontiguousarray(mask, dtype=_np.int64)
    if a.ndim != 2 or a.shape != m.shape:
        raise ValueError(f"ids {a.shape} and mask {m.shape} must be 2-D arrays of the same shape")
    tt = None if token_types is None else _np.ascontiguousarray(token_types, dtype=_np.int64).ravel().tolist()
    ident = None if identity is None else _os.path.expanduser(_os.fspath(identity))
    vals, shape, rep = _native.embed_remote(addr, a.ravel().tolist(), m.ravel().tolist(), list(a.shape), token_types=tt,
                                            output=output, proto=proto, net=net, pin=pin, identity=ident, insecure=insecure,
                                            mode=mode, dealer=dealer, dealer_pin=dealer_pin, connect_timeout=connect_timeout,
                                            plan=_plan_arg(plan))
    out = _np.asarray(vals, dtype=_np.float64).reshape(shape)
    return (out, _json.loads(rep)) if report else out


class Server:
    """Serves private inference of a model (the model stays with the server).

    Each client connection is an independent session on its own thread; a
    failing session never disturbs the others. ``addr`` is where it listens.

    Links are TLS 1.3: the server presents ``identity`` (a folder written by
    ``hush keygen``; an ephemeral identity by default) and clients pin its
    :attr:`fingerprint`. ``pins`` (a list of ``"sha256:<hex>"``) restricts
    the server to clients presenting those certificates. ``insecure=True``
    serves plaintext, unauthenticated links.

    ``mode="dealer"`` takes correlations from the ``hush dealer`` service at
    ``dealer`` (pinned to ``dealer_pin``, the fingerprint it prints) instead
    of trusted modules; clients must use the same mode.
    ``mode="malicious-client"`` (CRISP, with the same ``dealer`` and
    ``dealer_pin``) protects the model against a client that deviates from
    the protocol: a client whose messages fail the final MAC check gets an
    abort and no output, its session ends, and the server goes on serving
    the others. ``mac_s`` (default 40) and ``crisp_linear`` (``"dealt"``,
    the default, or ``"ckks"``, see :func:`run`) must match the clients'.
    """

    def __init__(self, model: _PathLike, listen: str = "127.0.0.1:0", proto: str = "auto", net: str = "none",
                 bits: int = 37, frac: int = 12, identity: _t.Optional[_PathLike] = None, pins: _t.Sequence[str] = (),
                 insecure: bool = False, mode: str = "tee", dealer: _t.Optional[str] = None,
                 dealer_pin: _t.Optional[str] = None, mac_s: _t.Optional[int] = None,
                 crisp_linear: _t.Optional[str] = None) -> None:
        with _translated():
            self._s = _native.serve(_model_bytes(model), listen, proto=proto, net=net, bits=bits, frac=frac,
                                    identity=_identity_arg(identity), pins=list(pins),
                                    insecure=insecure, mode=mode, dealer=dealer, dealer_pin=dealer_pin, mac_s=mac_s,
                                    crisp_linear=crisp_linear)

    @property
    def addr(self) -> str:
        """``"HOST:PORT"`` where the server listens (the port is resolved when
        ``listen`` asked for port 0)."""
        return self._s.addr

    @property
    def fingerprint(self) -> _t.Optional[str]:
        """``"sha256:<hex>"`` of the server's certificate (None if insecure)."""
        return self._s.fingerprint

    def sessions(self) -> _t.Tuple[int, int]:
        """(sessions ended well, sessions failed)."""
        return self._s.sessions()

    def shutdown(self) -> None:
        """Stops accepting clients and waits for the accept loop to end."""
        self._s.shutdown()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: _t.Any) -> None:
        self.shutdown()


class Client:
    """A client session with a :class:`Server`: the input stays with the client.

    ``pin`` is the server's fingerprint (``"sha256:<hex>"``, as printed by
    ``hush serve`` or :attr:`Server.fingerprint`); the TLS 1.3 link is
    refused if the server presents another certificate. ``identity`` is the
    client's own (for servers that pin clients). ``insecure=True`` connects
    in plaintext to a server started with ``insecure=True``. ``mode``,
    ``dealer`` and ``dealer_pin`` as for :class:`Server` (the server refuses
    a client of another mode).

    ``connect_timeout`` (seconds; default 30) is how long the client keeps
    retrying while nothing listens at ``addr``; then ``RuntimeError("...
    could not connect to ADDR: connection refused")``.
    """

    def __init__(self, addr: str, proto: str = "auto", net: str = "none", pin: _t.Optional[str] = None,
                 identity: _t.Optional[_PathLike] = None, insecure: bool = False, mode: str = "tee",
                 dealer: _t.Optional[str] = None, dealer_pin: _t.Optional[str] = None,
                 connect_timeout: _t.Optional[float] = None, mac_s: _t.Optional[int] = None,
                 crisp_linear: _t.Optional[str] = None) -> None:
        with _translated():
            self._c = _native.connect(addr, proto=proto, net=net, pin=pin,
                                      identity=_identity_arg(identity), insecure=insecure,
                                      mode=mode, dealer=dealer, dealer_pin=dealer_pin,
                                      connect_timeout=connect_timeout, mac_s=mac_s, crisp_linear=crisp_linear)

    @property
    def input_shape(self) -> _t.Tuple[int, ...]:
        """The model's input shape, as the server announced it (no batch dimension)."""
        return tuple(self._c.input_shape)

    def infer(self, x: _t.Any, progress: _ProgressArg = False,
              report: bool = False) -> _t.Union[_np.ndarray, _t.Tuple[_np.ndarray, dict]]:
        """Private inference of one input; returns logits (and a cost report).

        An input of the wrong shape or with NaN/infinite values raises
        ``ValueError`` before anything is sent, and the session stays open
        for the next input. (A failure during the protocol itself ends the
        session: the next call raises ``RuntimeError("client session is
        closed")``.)
        """
        xa = _np.ascontiguousarray(x, dtype=_np.float64)
        want = self.input_shape
        if tuple(xa.shape) not in (want, (1,) + want):
            raise ValueError(f"input of shape {tuple(xa.shape)}, the model expects {want} "
                             f"(optionally with a leading batch dimension of 1); the session stays open")
        if not _np.isfinite(xa).all():
            raise ValueError("input has NaN or infinite values; the session stays open")
        _note_raw_input(xa)
        with _translated():
            logits, shape, rep = self._c.infer(xa.ravel().tolist(), list(xa.shape),
                                               progress=_progress_arg(progress, "hush.Client.infer"))
        out = _np.asarray(logits, dtype=_np.float64).reshape(shape)
        return (out, _json.loads(rep)) if report else out

    def close(self) -> None:
        """Ends the session (the server sees a clean end)."""
        self._c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: _t.Any) -> None:
        self.close()


# ---- vertical logistic regression (hush-lr) ----

def _csr_parts(X: _t.Any) -> _t.Tuple[int, int, list, list, list]:
    """(rows, cols, indptr, indices, data) of a SciPy sparse matrix or a 2-D array."""
    if hasattr(X, "tocsr"):
        c = X.tocsr()
        rows, cols = c.shape
        return int(rows), int(cols), c.indptr.tolist(), c.indices.tolist(), _np.asarray(c.data, dtype=_np.float64).tolist()
    a = _np.asarray(X, dtype=_np.float64)
    if a.ndim != 2:
        raise ValueError(f"X must be 2-D (samples x features), got shape {a.shape}")
    mask = a != 0
    indptr = _np.concatenate([[0], _np.cumsum(mask.sum(axis=1))])
    return a.shape[0], a.shape[1], indptr.tolist(), _np.nonzero(mask)[1].tolist(), a[mask].tolist()


def train_vertical(role: str, X: _t.Any, y: _t.Any = None, *, listen: _t.Optional[str] = None,
                   peer: _t.Optional[str] = None, pin: _t.Optional[str] = None,
                   identity: _t.Optional[_PathLike] = None, insecure: bool = False,
                   out: _t.Optional[_PathLike] = None, epochs: int = 10, batch: int = 64, lr: float = 0.5,
                   lr_decay: float = 0.0, l2: float = 0.0, bits: int = 2048, sigmoid: str = "cubic",
                   intercept: bool = True, reveal: bool = False, seed: int = 1,
                   low_bandwidth: bool = False) -> dict:
    """One party of a vertical logistic-regression training (CAESAR-style:
    the model stays additively shared, sparse products go through Paillier),
    the same as ``hush train``.

    ``role`` is ``"labels"`` (holds ``y``, 0/1 or -1/+1, and some feature
    columns) or ``"features"`` (other columns of the same samples, same row
    order, no ``y``). ``X`` is a SciPy sparse matrix or a 2-D array. Exactly
    one of ``listen="HOST:PORT"`` (prints its fingerprint) or
    ``peer="HOST:PORT"`` with ``pin="sha256:..."``; ``identity`` is a
    directory from ``hush keygen``. Both parties must pass the same
    hyper-parameters (checked before training): epoch ``e`` uses
    ``lr / (1 + lr_decay*e)``; the loss is the mean log-loss +
    ``l2``/2·‖θ‖²; ``sigmoid`` is ``"cubic"`` (0.5 + 0.197z − 0.004z³) or
    ``"linear"`` (0.5 + z/4).

    The shares are written to ``out`` (for ``hush predict``); with
    ``reveal=True`` at both parties the model is opened and returned as
    ``weights_labels_party`` (intercept last when ``intercept``) and
    ``weights_features_party``. ``low_bandwidth=True`` (both parties)
    is for slow links: the model shares go slot-packed in the forward pass
    and the backward pass balances the two directions (on SHAPER's shape
    about 40 % of the bytes for ~10 % more CPU per batch). Returns a dict with ``bytes``, ``rounds``,
    ``wall_s`` and those weights. Runs without the GIL; errors raise
    ``ValueError`` (arguments, data) or ``RuntimeError`` (peer, link)."""
    rows, cols, indptr, indices, data = _csr_parts(X)
    labels = None
    if y is not None:
        ya = _np.asarray(y, dtype=_np.float64)
        if ya.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {ya.shape}")
        labels = ya.tolist()
    with _translated():
        return _native.train_vertical(role, rows, cols, indptr, indices, data, labels=labels, listen=listen, peer=peer,
                                      pin=pin, identity=_identity_arg(identity), insecure=insecure,
                                      out=None if out is None else str(out), epochs=epochs, batch=batch, lr=lr,
                                      lr_decay=lr_decay, l2=l2, bits=bits, sigmoid=sigmoid, intercept=intercept,
                                      reveal=reveal, seed=seed, low_bandwidth=low_bandwidth)


__all__ += ["train_vertical"]


def psi(role: str, ids: _t.Iterable[_t.Any], *, listen: _t.Optional[str] = None, peer: _t.Optional[str] = None,
        pin: _t.Optional[str] = None, identity: _t.Optional[_PathLike] = None, insecure: bool = False,
        size_only: bool = False, max_peer_ids: int = 1 << 25) -> dict:
    """One party of a private set intersection (ECDH-PSI on Ristretto255,
    semi-honest; the same as ``hush psi``).

    ``role`` is ``"sender"`` or ``"receiver"`` (the peer takes the other);
    ``ids`` are this party's row IDs, compared as strings (``str(x)``; they
    must be unique). Exactly one of ``listen="HOST:PORT"`` (prints its
    fingerprint) or ``peer="HOST:PORT"`` with ``pin="sha256:..."``.

    Returns a dict: ``rows`` — this party's row indices of the
    intersection, in the order both parties share (row ``i`` here and row
    ``i`` at the peer carry the same ID), so ``table.iloc[r["rows"]]``
    aligns a DataFrame; ``None`` with ``size_only=True`` (both parties must
    agree), which reveals only ``intersection``; and ``intersection``,
    ``own_size``, ``peer_size``, ``bytes``, ``rounds``, ``wall_s``. Each
    party learns the peer's set size and the intersection (or its size),
    nothing about the other IDs. Errors raise ``ValueError`` (arguments,
    duplicate IDs) or ``RuntimeError`` (peer, link)."""
    id_list = [x if isinstance(x, str) else x.decode() if isinstance(x, bytes) else str(x) for x in ids]
    return _native.psi(role, id_list, listen=listen, peer=peer, pin=pin,
                       identity=None if identity is None else str(identity), insecure=insecure,
                       size_only=size_only, max_peer_ids=max_peer_ids)


__all__ += ["psi"]
