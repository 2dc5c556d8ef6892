#!/usr/bin/env bash
# A fuzzing campaign: the property tests of tests/cli/fuzz.rs (mutated
# records and results through every tool, no panic; what a tool writes,
# the next one accepts), run again and again from fresh seeds for the
# given number of seconds (default 60), FUZZ_SCALE times their usual
# number of cases each (default 2). Their inputs grow from the seeds in
# tests/data/fuzz, the reproducers of past findings among them.
#
# A failure prints its seed; the same cases run again with
#   TRACEKIT_FUZZ_SEED=N TRACEKIT_FUZZ_SCALE=S cargo test --test cli fuzz::
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
scale=${FUZZ_SCALE:-2}
# CI gives FUZZ_SEED_BASE and FUZZ_CAMPAIGNS: the same seeds on every run
# (base, base+1, ...), so that what passed before a change is what CI runs.
base=${FUZZ_SEED_BASE:-}
count=${FUZZ_CAMPAIGNS:-}

cargo test --locked -q --test cli --no-run
log=$(mktemp)
trap 'rm -f "$log"' EXIT
end=$((SECONDS + seconds))
campaigns=0
while if [ -n "$count" ]; then [ "$campaigns" -lt "$count" ]; else [ "$SECONDS" -lt "$end" ]; fi; do
  if [ -n "$base" ]; then
    seed=$((base + campaigns))
  else
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  fi
  if ! TRACEKIT_FUZZ_SEED=$seed TRACEKIT_FUZZ_SCALE=$scale \
      cargo test --locked -q --test cli fuzz:: >"$log" 2>&1; then
    cat "$log"
    echo "fuzz: a failure from seed $seed; repeat it with:"
    echo "  TRACEKIT_FUZZ_SEED=$seed TRACEKIT_FUZZ_SCALE=$scale cargo test --test cli fuzz::"
    exit 1
  fi
  campaigns=$((campaigns + 1))
done
echo "fuzz: $campaigns campaign(s) in ${SECONDS}s, no failure"
