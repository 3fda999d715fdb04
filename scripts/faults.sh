#!/usr/bin/env bash
# Fault injection campaigns (see crates/hush-transport/src/faulty.rs):
# N schedules per protocol (default 1000; the test command runs 50 with the
# same seeds' prefix). Prints per protocol and fault kind: correct, clean
# error, undetected (semi-honest protocols, payload altered above the frame
# checksum), violations (panic, hang, wrong output after a fault that must
# be caught). Exits non-zero on any violation.
#   scripts/faults.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export HUSH_FAULT_SCHEDULES="${1:-1000}"
log=$(mktemp)
status=0
for spec in "hush-transport faults_tcp" "hush-correlations faults" "hush-2pc faults" "hush-inference faults" "hush-inference faults_dealer" "hush-replicated faults"; do
  set -- $spec
  cargo test --release -q -p "$1" --test "$2" -- --nocapture --test-threads 1 >"$log" 2>&1 || status=1
  grep -E '(faults [a-z0-9-]+: |^  [a-z-]+ +correct|  VIOLATION)' "$log" | sed -E 's/^test [a-z0-9_]+ \.\.\. //' || true
  if [ $status -ne 0 ]; then grep -E 'panicked|FAILED|error' "$log" | head -20; fi
done
rm -f "$log"
exit $status
