#!/usr/bin/env bash
# Coverage-guided fuzzing of one decoder with AFL++ through cargo-afl, on
# stable Rust. Targets: see fuzz/src/targets.rs (TARGETS), or run with no
# arguments to list them.
#   scripts/fuzz.sh TARGET SECONDS       # fuzz; prints executions, coverage, crashes, hangs
#   scripts/fuzz.sh all SECONDS          # every target in turn
#   HUSH_FUZZ_EXECS=1000000 scripts/fuzz.sh TARGET 1800
#                                        # stop at 10^6 executions or 30 min, whichever first
# Needs (once): `cargo install --locked cargo-afl` (builds AFL++ from source; a C
# compiler and make, both on a stock Debian with build-essential). Findings
# land in fuzz/out/TARGET/default/{crashes,hangs}: copy a crash to
# tests/corpus/TARGET/ — crates/hush-cli/tests/corpus.rs replays every file
# there in the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TARGET_DIR="$root/target/afl"
bin="$CARGO_TARGET_DIR/release/hush-fuzz"
targets=$(sed -n '/^pub const TARGETS/,/^];/p' fuzz/src/targets.rs | grep -o '"[a-z0-9_]*"' | tr -d '"')
if [ $# -lt 2 ]; then echo "usage: $0 TARGET|all SECONDS"; echo "targets:" $targets; exit 2; fi
command -v cargo-afl >/dev/null || { echo "cargo-afl missing: cargo install --locked cargo-afl" >&2; exit 1; }
(cd fuzz && cargo afl build --release -q)
# seed corpora: honest transcripts (written by the binary itself) plus committed regressions
seeds="$root/fuzz/out/seeds"
rm -rf "$seeds"; "$bin" seeds "$seeds"
for t in $targets; do [ -d "tests/corpus/$t" ] && cp tests/corpus/$t/* "$seeds/$t/" 2>/dev/null || true; done
run_one() {
  local t=$1 secs=$2
  # (a separate local: the words of one `local` are expanded before any is
  # assigned, so `out=.../$t` there took the loop variable of a previous call)
  local out="$root/fuzz/out/$t"
  mkdir -p "$out"
  # resume an earlier session's queue when there is one
  local input="$seeds/$t"; [ -d "$out/default/queue" ] && input=-
  local execs=(); [ -n "${HUSH_FUZZ_EXECS:-}" ] && execs=(-E "$HUSH_FUZZ_EXECS")
  AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_QUIET=1 \
    HUSH_FUZZ_TARGET=$t timeout $((secs + 60)) cargo afl fuzz -i "$input" -o "$out" -V "$secs" "${execs[@]}" -t 10000 "$bin" >"$root/fuzz/out/$t.log" 2>&1 || true
  local st="$out/default/fuzzer_stats"
  if [ -f "$st" ]; then
    printf '%-24s execs %-10s edges %-6s map %-8s crashes %-3s hangs %s\n' "$t" \
      "$(awk -F' *: ' '/^execs_done/{print $2}' "$st")" "$(awk -F' *: ' '/^edges_found/{print $2}' "$st")" \
      "$(awk -F' *: ' '/^bitmap_cvg/{print $2}' "$st")" "$(awk -F' *: ' '/^saved_crashes/{print $2}' "$st")" \
      "$(awk -F' *: ' '/^saved_hangs/{print $2}' "$st")"
  else
    echo "$t: afl did not start; see fuzz/out/$t.log"; tail -5 "$root/fuzz/out/$t.log"
  fi
}
if [ "$1" = all ]; then for t in $targets; do run_one "$t" "$2"; done; else run_one "$1" "$2"; fi
