#!/usr/bin/env bash
# Builds the workspace's API docs (target/doc) and fails on any rustdoc
# warning. Not part of scripts/test.sh: on a fresh machine it first
# type-checks every dependency (about 5 minutes on 2 cores; seconds after).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --no-deps --workspace "$@"
echo "docs: target/doc/hush_inference/index.html (and the other crates beside it)" >&2
