#!/usr/bin/env bash
# CRISP (malicious clients) tampering campaign at the protocol layer:
# CRISP_TRIALS (default 10^4) runs of a small authenticated pipeline
# (input → linear → ReLU → linear → ReLU → MaxPool → truncation → checked
# release) at ℓ = 37, s = 40, an honest server and a client that flips a bit
# in / adds a value to a gate opening, z or its check share, replays an
# opening, drops the check, or alters its value or MAC shares.
# CRISP_PRIVATE=1: the two linear layers are the server's private-weight
# layers (crisp::linear, dealer-dealt bilinear triples) instead of public
# local maps, and the client also tampers with their messages F‖G (value
# part and MAC part). Prints one JSON line; fails if any value-changing
# deviation went undetected or a wrong output was released. The default
# test command runs 150 trials of each (tamper_campaign_small,
# tamper_campaign_small_private_weights).
set -euo pipefail
cd "$(dirname "$0")/.."
CRISP_PRIVATE="${CRISP_PRIVATE:-0}" CRISP_TRIALS="${CRISP_TRIALS:-10000}" nice -n 10 cargo test --release -p hush-2pc --test crisp tamper_trials -- --ignored --nocapture 2>&1 \
  | grep -E '^\{"bench"|test result|panicked|FAILED'
