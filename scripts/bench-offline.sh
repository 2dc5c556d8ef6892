#!/usr/bin/env bash
# The twin's offline runs through the replay engine: CPU and memory.
#
#   scripts/bench-offline.sh            # all three
#   RUNS=speed scripts/bench-offline.sh
#
# Runs (each prints CPU time, user + system, and peak memory):
#   speed      1 M records (prompts of 64 to 704 tokens, answers of 16 to
#              112) at 150/s through a 256-slot profile: the target is
#              under 10 s of CPU.
#   overload   5 M records at 2,000/s (prompts of 100 to 3,000 tokens,
#              answers of 5 to 50, a shared 512-token prefix) through the
#              bundled llama.cpp profile, which serves a few per second:
#              nearly every request waits; memory must stay bounded by the
#              model's queue, not grow with the trace.
#   flags      1 M of the same overloaded records through the flags' model
#              (no --profile, no slot limit).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-"speed overload flags"}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/tracekit-bench-offline}
mkdir -p "$WORK"
[ -n "${BIN_DIR:-}" ] || cargo build --release --quiet --bin trace-gen --bin trace-sim
BIN=${BIN_DIR:-$PWD/target/release}
PROFILE=tests/data/twin/llama-server.profile.json

measure() { # NAME, then the command
  local name=$1
  shift
  /usr/bin/time -f "%U %S %e %M" -o "$WORK/time.txt" "$@" >"$WORK/$name.ndjson" 2>"$WORK/$name.err" || true
  read -r user sys wall kb <"$WORK/time.txt"
  printf '%-9s %8s results  %6.2f s CPU (%s user, %s system)  %6.1f s wall  peak %5d MB  %s\n' \
    "$name" "$(wc -l <"$WORK/$name.ndjson")" "$(echo "$user + $sys" | bc)" "$user" "$sys" "$wall" \
    "$((kb / 1024))" "$(tail -n 1 "$WORK/$name.err")"
}

speed() {
  [ -s "$WORK/1m.jsonl" ] || "$BIN/trace-gen" --count 1000000 --rate 150 --input-len uniform:64..704 \
    --output-len uniform:16..112 --seed 5 -o "$WORK/1m.jsonl"
  cat >"$WORK/big.json" <<'JSON'
{"tracekit_profile": 1, "alpha_ms": 5.0, "beta_ms": 0.02, "gamma_ms": 0.05,
 "delta_ms": 0.0, "epsilon_ms": 1.0, "slots": 256, "prefill_chunk": 8192,
 "cache_blocks": 10000, "block_size": 512}
JSON
  measure speed "$BIN/trace-sim" --offline --profile "$WORK/big.json" "$WORK/1m.jsonl"
}

overload() {
  [ -s "$WORK/5m.jsonl" ] || "$BIN/trace-gen" --count 5000000 --rate 2000 --input-len uniform:100..3000 \
    --output-len uniform:5..50 --shared-prefix 512 --seed 2 -o "$WORK/5m.jsonl"
  measure overload "$BIN/trace-sim" --offline --profile "$PROFILE" "$WORK/5m.jsonl"
}

flags() {
  overload_trace=$WORK/5m.jsonl
  [ -s "$overload_trace" ] || overload
  head -n 1000000 "$overload_trace" >"$WORK/1m-overload.jsonl"
  measure flags "$BIN/trace-sim" --offline "$WORK/1m-overload.jsonl"
}

for run in $RUNS; do
  "$run"
done
