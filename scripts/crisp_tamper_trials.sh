#!/usr/bin/env bash
# CRISP (malicious clients) tampering campaign at the protocol layer:
# CRISP_TRIALS (default 10^4) runs of a small authenticated pipeline
# (input → linear → ReLU → linear → ReLU → MaxPool → truncation → checked
# release) at
# ℓ = 37, s = 40, an honest server and a client that flips a bit in / adds a
# value to a gate opening, z or its check share, replays an opening, drops the
# check, or alters its value or MAC shares. Prints one JSON line; fails if
# any value-changing deviation went undetected or a wrong output was
# released. The default test command runs 150 such trials
# (tamper_campaign_small).
set -euo pipefail
cd "$(dirname "$0")/.."
CRISP_TRIALS="${CRISP_TRIALS:-10000}" nice -n 10 cargo test --release -p hush-2pc --test crisp tamper_trials -- --ignored --nocapture 2>&1 \
  | grep -E '^\{"bench"|test result|panicked|FAILED'
