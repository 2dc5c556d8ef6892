#!/usr/bin/env bash
# trace-summarize throughput and memory on 10 M result lines of the size
# trace-replay writes for 16-token streamed answers (15 inter-token gaps).
# One 1 M-line file is generated once and named ten times, so the 10 M lines
# come from the page cache and the figure is summarize's own speed.
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/tracekit-bench}
mkdir -p "$WORK"
RESULTS="$WORK/results-1m.ndjson"
COPIES=${COPIES:-10}

cargo build --release --quiet --bin trace-summarize

if [ ! -s "$RESULTS" ]; then
  echo "generating $RESULTS" >&2
  python3 - "$RESULTS" <<'PY'
import random, sys
random.seed(1)
with open(sys.argv[1], "w") as f:
    for i in range(1_000_000):
        sched = i * 1.0
        sent = sched + random.random() * 0.3
        ttft = 20 + random.random() * 200
        itl = [round(8 + random.random() * 20, 3) for _ in range(15)]
        e2e = ttft + sum(itl)
        status = "ok" if i % 100 else "error"
        f.write(
            '{"index":%d,"id":"req-%d","model":"m","scheduled_ms":%.3f,"sent_ms":%.3f,'
            '"start_time":"2026-11-22T10:00:00.000Z","ttft_ms":%.3f,"first_chunk_ms":%.3f,"e2e_ms":%.3f,'
            '"itl_ms":[%s],"input_length":512,"output_length":16,"prompt_tokens":512,'
            '"completion_tokens":16,"cached_tokens":256,"finish_reason":"length","status":"%s","http_status":200}\n'
            % (i, i, sched, sent, ttft, ttft - 1, e2e, ",".join("%.3f" % x for x in itl), status))
PY
fi
LINES=$(( $(wc -l < "$RESULTS") * COPIES ))
BYTES=$(( $(stat -c %s "$RESULTS") * COPIES ))
FILES=$(for _ in $(seq "$COPIES"); do printf '%s ' "$RESULTS"; done)
cat "$RESULTS" > /dev/null
printf '%d lines, %d bytes (%s named %d times)\n' "$LINES" "$BYTES" "$RESULTS" "$COPIES"
for args in "" "--window 10s --slo ttft=200ms,tpot=20ms"; do
  # shellcheck disable=SC2086
  stats=$( { /usr/bin/time -f '%e %U %S %M' target/release/trace-summarize $args --format json $FILES > /dev/null; } 2>&1 | tail -1 )
  read -r wall user sys rss <<<"$stats"
  awk -v a="${args:-(defaults)}" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v n="$LINES" \
    'BEGIN { c = u + s; printf "%-40s wall %.2f s, cpu %.2f s, %.2f M lines per cpu-s, peak RSS %.1f MB\n", a, w, c, n / c / 1e6, r / 1024 }'
done
