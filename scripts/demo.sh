#!/usr/bin/env bash
# Main job: set up, then run `hush demo` on its embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${CARGO_TARGET_DIR:-target}/release/hush" demo "$@"
