#!/usr/bin/env bash
# Measures `hush psi` between two processes over loopback TCP + TLS:
#   scripts/bench_psi.sh [N] [OVERLAP]      (default 1000000 0.5)
# Each party holds N IDs (a CSV with an ID and a value column, shuffled);
# N·OVERLAP of them are shared. Prints both parties' JSON records, then the
# load and each process's CPU seconds (a wall figure is only meaningful
# beside them: on a shared machine the CPU seconds are the stable figure).
set -euo pipefail
N=${1:-1000000}
OV=${2:-0.5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HUSH=${HUSH:-${CARGO_TARGET_DIR:-$ROOT/target}/release/hush}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
python3 - "$N" "$OV" "$DIR" <<'PY'
import random, sys
n, ov, d = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
c = int(n * ov)
rng = random.Random(1)
ids = [f"{x:016x}" for x in rng.sample(range(1 << 60), 2 * n - c)]
a, b = ids[:n], ids[n - c:]
for name, s in (("a", a), ("b", b)):
    rng.shuffle(s)
    with open(f"{d}/{name}.csv", "w") as f:
        f.write("id,v\n")
        f.writelines(f"{x},{i}\n" for i, x in enumerate(s))
PY
uptime
"$HUSH" keygen --out "$DIR/ka" | sed -n 's/fingerprint //p' > "$DIR/fpa"
TIME=(/usr/bin/time -f "cpu_s %U user + %S sys, wall %e s")
"${TIME[@]}" -o "$DIR/a.time" "$HUSH" psi --role receiver --ids "$DIR/a.csv" --id-column id --out "$DIR/a_out.csv" --json \
  --identity "$DIR/ka" --listen 127.0.0.1:47411 > "$DIR/a.log" 2> "$DIR/a.err" &
PA=$!
"${TIME[@]}" -o "$DIR/b.time" "$HUSH" psi --role sender --ids "$DIR/b.csv" --id-column id --out "$DIR/b_out.csv" --json \
  --connect 127.0.0.1:47411 --pin "$(cat "$DIR/fpa")" > "$DIR/b.log" 2> "$DIR/b.err" || { cat "$DIR/b.err"; exit 1; }
wait $PA || { cat "$DIR/a.err"; exit 1; }
grep '^{' "$DIR/a.log"
grep '^{' "$DIR/b.log"
echo "receiver process: $(cat "$DIR/a.time")"
echo "sender process: $(cat "$DIR/b.time")"
cmp <(cut -d, -f1 "$DIR/a_out.csv") <(cut -d, -f1 "$DIR/b_out.csv") && echo "aligned: identical ID columns ($(($(wc -l < "$DIR/a_out.csv") - 1)) rows)"
uptime
grep -m1 "model name" /proc/cpuinfo
