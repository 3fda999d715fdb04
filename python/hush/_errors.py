"""Typed exceptions of the Python API.

The Rust core reports errors as text written for the `hush` command, which
names command-line flags (``--pin``, ``--mode tee``). At the Python
boundary each message is re-spelled with the keyword arguments a Python
caller uses (``pin=``, ``mode="tee"``) and raised as a typed exception.
Every class keeps the built-in base it had before (``ValueError`` for bad
arguments and inputs, ``RuntimeError`` for protocol and connection
failures), so existing ``except RuntimeError`` code still catches it.
"""

import contextlib
import re
import typing as _t


class HushError(Exception):
    """Base of every error the hush package raises."""


class InvalidArgument(HushError, ValueError):
    """A bad argument, model or input (nothing was sent)."""


class ProtocolError(HushError, RuntimeError):
    """A session failed: the link, the peer or the protocol."""


class ConnectionRefused(ProtocolError, ConnectionError):
    """Nothing listened at the address within ``connect_timeout``."""


class PinMismatch(ProtocolError):
    """The peer presented another certificate than the pinned fingerprint."""


class ModeMismatch(ProtocolError):
    """The two parties run different trust modes (``mode=``)."""


class SettingMismatch(ProtocolError):
    """The parties disagree on a setting both must share (protocol family, ring bits, MAC parameter, model digest, ...)."""


class ServerAborted(ProtocolError):
    """The server aborted without output (a malicious-client check failed)."""


class PeerSilent(ProtocolError, TimeoutError):
    """The peer connected and then stopped talking."""


# flags that take a value: which values are spelled as that flag's value
_WORDS = {
    "mode": {"tee", "dealer", "interactive", "silent", "malicious-client"},
    "proto": {"auto", "fss", "tami", "cf2", "crisp"},
    "crisp-linear": {"dealt", "ckks"},
    "net": {"none", "lan", "wan", "mobile"},
}
_NUMERIC = {"mac-s", "bits", "frac", "chunk", "connect-timeout"}
_ADDRESS = {"dealer", "pin", "dealer-pin"}
_FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?:([ =])([A-Za-z0-9_.:/<>=-]+))?")


def _value_of(name: str, value: str) -> _t.Optional[str]:
    """How `value` after `--name` is spelled as a keyword value, or None if it is not that flag's value."""
    if name in _WORDS:
        return f'"{value}"' if value in _WORDS[name] else None
    if name in _NUMERIC:
        return value if re.fullmatch(r"[0-9]+(\.[0-9]+)?", value) else None
    if name in _ADDRESS:
        return f'"{value}"' if (":" in value or value.isupper() or value.startswith("sha256")) else None
    return None


def pythonic(msg: str) -> str:
    """``msg`` with command-line flags spelled as keyword arguments."""

    def sub(m: "re.Match[str]") -> str:
        name, sep, raw = m.group(1), m.group(2), m.group(3)
        kw = name.replace("-", "_")
        if name == "insecure":
            return "insecure=True" + (sep + raw if raw else "")
        if raw:
            value, tail = re.match(r"(.*?)([.,;:]*)$", raw).groups()
            shown = _value_of(name, value) if value else None
            if shown is None and value and tail.startswith(":") and (name in _WORDS or name in _NUMERIC):
                shown = f'"{value}"' if name in _WORDS else value  # "--proto xyz: unknown": the caller's own value
            if shown is not None:
                return f"{kw}={shown}{tail}"
            return kw + sep + raw if sep == " " else f"{kw}={raw}"
        return kw

    return _FLAG.sub(sub, msg)


def _classify(e: Exception) -> type:
    m = str(e)
    if isinstance(e, ValueError):
        return InvalidArgument
    if "could not connect to" in m and "refused" in m:
        return ConnectionRefused
    if "presented sha256:" in m or "rejected our certificate" in m:
        return PinMismatch
    if "mode mismatch" in m:
        return ModeMismatch
    if "mismatch" in m:
        return SettingMismatch
    if "server aborted" in m:
        return ServerAborted
    if "silent for" in m:
        return PeerSilent
    return ProtocolError


@contextlib.contextmanager
def translated() -> _t.Iterator[None]:
    """Re-raises the native layer's ``ValueError``/``RuntimeError`` as the typed, Python-spelled exception."""
    try:
        yield
    except HushError:
        raise
    except (ValueError, RuntimeError) as e:
        raise _classify(e)(pythonic(str(e))) from e
