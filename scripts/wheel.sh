#!/usr/bin/env bash
# Builds the Python package as one wheel for every CPython >= 3.8 (abi3):
# target/wheels/hush-<version>-cp38-abi3-linux_x86_64.whl, with
# `maturin build --release --locked` (the committed Cargo.lock).
#
# Installing it needs no Rust and compiles nothing:
#   python3 -m venv env && env/bin/pip install target/wheels/hush-*.whl && env/bin/hush demo
#
# Platform tag: linux_x86_64, not manylinux. The extension links the system
# GMP (Paillier, through rug) dynamically, so the target machine needs
# libgmp10 and a glibc at least as new as this machine's (Debian 12: 2.36).
# A manylinux wheel would need GMP linked statically or bundled (patchelf /
# auditwheel repair, or maturin's zig linker with a static GMP); not done.
# Reuses target/ from scripts/setup.sh: after it, only the extension links.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
[ -x .venv/bin/maturin ] || bash scripts/setup.sh
rm -f target/wheels/hush-*.whl
.venv/bin/maturin build --release --locked --out target/wheels "$@"
ls -l target/wheels/hush-*.whl >&2
