#!/usr/bin/env bash
# CRISP (malicious clients) tampering campaign over the *served* path:
# CRISP_SERVED_TRIALS (default 1000) deviant client sessions against one
# `--mode malicious-client` server over TCP with TLS and a TLS dealer
# service (tiny CNN: conv → ReLU → MaxPool → dense). Each deviant client
# flips a random bit or adds a random value in one of its online messages
# at a random point, or replays its previous inference's message in its
# second inference; each must get no output (the server's abort, or the
# session ended on a message the server cannot parse), the server must log
# it, and an honest client served right after must get the fixed-point
# reference's logits. Prints one JSON line with the counts. The default
# test command runs 8 such sessions.
set -euo pipefail
cd "$(dirname "$0")/.."
CRISP_SERVED_TRIALS="${CRISP_SERVED_TRIALS:-1000}" nice -n 10 cargo test --release -p hush-inference --lib served_over_tls_honest_equals_reference -- --nocapture 2>&1 \
  | grep -E '^\{"bench"|test result|panicked|FAILED'
