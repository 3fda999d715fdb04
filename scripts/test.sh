#!/usr/bin/env bash
# Every test: set up, then the Rust test suite and the Python test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# every relative link and anchor in README.md and docs/*.md (under a second;
# `bash scripts/docs.sh` also builds the book, not run here)
echo "== Documentation links" >&2
python3 scripts/check_links.py
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
# a headless browser for the report's rendering test (crates/hush-cli/tests/
# report.rs; it is skipped, saying so, where none can be installed)
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "test: installing chromium (headless report check)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "test: chromium could not be installed; the browser check will be skipped" >&2
fi
echo "== Rust tests" >&2
cargo test --release --workspace
# tfhe-ntt picks its kernels at run time with no switch: on an AVX-512 CPU
# the line above ran its AVX-512 NTTs; this runs the HE tests on its AVX2
# ones (the same plaintext references)
echo "== HE tests on tfhe-ntt's AVX2 kernels (hush-rlwe without ntt-avx512)" >&2
cargo test --release -p hush-rlwe --no-default-features
# Paillier below AVX-512 (no AVX2 kernel there: GMP, the portable path; the
# line above ran the IFMA kernels where the CPU has them, each pinned
# against GMP in the same tests)
echo "== Paillier at HUSH_SIMD=portable (GMP)" >&2
HUSH_SIMD=portable cargo test --release -p hush-paillier
# the prebuilt wheel, built once (about 40 s after the build above: the
# extension relinks); tests/python/test_wheel.py installs it into a fresh
# venv with no Rust on the PATH and runs `hush demo` from it
echo "== Wheel (scripts/wheel.sh)" >&2
bash scripts/wheel.sh
HUSH_WHEEL="$PWD/$(ls target/wheels/hush-*.whl)"
export HUSH_WHEEL
echo "== Python tests" >&2
.venv/bin/python -m pytest -q tests/python
