"""hush: private machine learning with secure multi-party computation.

The heavy lifting happens in Rust (``hush._native``); this package is the
Python front end. Available now:

* :func:`bench_cot` — generate correlated OTs between two parties in this
  process and return the measured costs as a dict;
* :func:`bench_aes` — fixed-key AES throughput on one core;
* :func:`net_profiles`, :func:`cot_sources` — the names you can pass.

Private inference (``Server``, ``Client``, ``run``) arrives with the
inference engine; until then those names raise ``NotImplementedError``.
"""

from ._native import __version__, bench_aes, bench_cot, cot_sources, net_profiles

__all__ = ["__version__", "bench_aes", "bench_cot", "cot_sources", "net_profiles", "Server", "Client", "run"]


def _not_yet(name: str):
    def f(*_args, **_kwargs):
        raise NotImplementedError(
            f"hush.{name} is not implemented yet: private inference lands with the inference engine"
        )

    f.__name__ = name
    return f


Server = _not_yet("Server")
Client = _not_yet("Client")
run = _not_yet("run")
