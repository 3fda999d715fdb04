#!/usr/bin/env bash
# Every test: set up, then the Rust test suite and the Python test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
echo "== Rust tests" >&2
cargo test --release --workspace
echo "== Python tests" >&2
.venv/bin/python -m pytest -q tests/python
