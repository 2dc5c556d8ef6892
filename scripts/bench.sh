#!/usr/bin/env bash
# Throughput and memory of the trace filters on a ~1 GB trace, against jq
# doing the same job. Prints one row per run: wall seconds, CPU seconds
# (user + sys), MB/s per CPU second, peak RSS.
#
#   scripts/bench.sh            # ~1 GB (340 copies of the Mooncake trace)
#   COPIES=20 scripts/bench.sh  # smaller, for a quick look
#   BIN_DIR=/other/build NO_JQ=1 scripts/bench.sh   # another build, for A/B runs
#
# Wall time depends on what else the machine runs; CPU time is what one
# core spends, which is what the targets are about.
set -euo pipefail
cd "$(dirname "$0")/.."

COPIES=${COPIES:-340}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/tracekit-bench}
mkdir -p "$WORK"
TRACE="$WORK/big-$COPIES.jsonl"

if ! command -v jq >/dev/null; then
  echo "installing jq from Debian" >&2
  apt-get install -y -q jq >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q jq >/dev/null; }
fi

cargo build --release --quiet --bin trace-validate --bin trace-slice --bin trace-rescale
BIN=${BIN_DIR:-target/release}

if [ ! -s "$TRACE" ]; then
  echo "building $TRACE from $COPIES copies of tests/data/conversation_trace.jsonl" >&2
  # Each copy is shifted past the end of the previous one, so the trace
  # stays in arrival order and keeps Mooncake's byte layout.
  python3 - "$COPIES" "$TRACE" <<'PY'
import sys
copies, out = int(sys.argv[1]), sys.argv[2]
lines = open("tests/data/conversation_trace.jsonl").read().splitlines()
prefix = '{"timestamp": '
rows = []
for l in lines:
    assert l.startswith(prefix)
    t, rest = l[len(prefix):].split(",", 1)
    rows.append((int(t), "," + rest + "\n"))
span = rows[-1][0] + 1000
with open(out, "w") as f:
    for c in range(copies):
        off = c * span
        f.write("".join(prefix + str(t + off) + rest for t, rest in rows))
PY
fi
BYTES=$(stat -c %s "$TRACE")
RECORDS=$(wc -l < "$TRACE")
printf 'trace: %s, %d bytes, %d records\n\n' "$TRACE" "$BYTES" "$RECORDS"
printf '%-44s %8s %8s %10s %9s\n' "run" "wall s" "cpu s" "MB/cpu-s" "peak MB"

run() {
  local name=$1; shift
  local stats
  stats=$( { /usr/bin/time -f '%e %U %S %M' "$@" > /dev/null; } 2>&1 | tail -1 )
  read -r wall user sys rss <<<"$stats"
  awk -v n="$name" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v b="$BYTES" \
    'BEGIN { c = u + s; printf "%-44s %8.2f %8.2f %10.0f %9.1f\n", n, w, c, b / 1e6 / c, r / 1024 }'
}

run "trace-validate --check"            $BIN/trace-validate --check "$TRACE"
[ -n "${NO_JQ:-}" ] || run "jq (the same checks)"              jq -c 'select((.timestamp|type)=="number" and .timestamp >= 0 and (.input_length|type)=="number" and .input_length >= 0 and .output_length >= 1 and ((.hash_ids|length) == ((.input_length + 511) / 512 | floor)))' "$TRACE"
run "trace-slice --from 10m --to 20m"   $BIN/trace-slice --from 10m --to 20m "$TRACE"
[ -n "${NO_JQ:-}" ] || run "jq (the same window)"              jq -c 'select(.timestamp >= 600000 and .timestamp < 1200000)' "$TRACE"
run "trace-rescale --speed 2"           $BIN/trace-rescale --speed 2 "$TRACE"
[ -n "${NO_JQ:-}" ] || run "jq (timestamps halved)"            jq -c '.timestamp = (.timestamp / 2)' "$TRACE"
