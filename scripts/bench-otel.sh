#!/usr/bin/env bash
# trace-convert --from otel throughput and memory on a Collector-style file
# export: one ExportTraceServiceRequest per line, 100 spans a line, traces
# of one agent span over nine chat spans (a chain of turns, the fourth and
# fifth in parallel), token counts as protojson intValue strings.
#
#   scripts/bench-otel.sh                 # 1 M spans
#   N=200000 scripts/bench-otel.sh
#   PROFILE=profiling scripts/bench-otel.sh   # the release settings with
#                                             # line tables, for perf
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
PROFILE=${PROFILE:-release}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/tracekit-bench-otel}
mkdir -p "$WORK"
cargo build --profile "$PROFILE" --quiet --bin trace-convert
BIN=$PWD/target/$PROFILE
SPANS=$WORK/spans-$N.jsonl

if [ ! -s "$SPANS" ]; then
  python3 - "$N" "$SPANS" <<'PY'
import json, sys
n, path = int(sys.argv[1]), sys.argv[2]
t0 = 1781627099248209120
def kv(k, v):
    if isinstance(v, str):
        return {"key": k, "value": {"stringValue": v}}
    return {"key": k, "value": {"intValue": str(v)}}
def span(trace, sid, parent, start, end, attrs):
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": "chat",
            "kind": 3, "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
            "attributes": [kv(k, v) for k, v in attrs.items()], "status": {"code": 1}}
with open(path, "w") as f:
    batch = []
    for i in range(n // 10):
        trace = "%032x" % (i + 1)
        base = t0 + i * 50_000_000
        root = "%016x" % (i * 16 + 1)
        batch.append(span(trace, root, "", base, base + 30_000_000_000,
                          {"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "m"}))
        at = base + 1_000_000
        for k in range(9):
            dur = 400_000_000 + (i * 7 + k) % 13 * 100_000_000
            start = at if k != 4 else at - dur_prev  # the 5th starts with the 4th
            batch.append(span(trace, "%016x" % (i * 16 + 2 + k), root, start, start + dur, {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "azure/gpt-5.4",
                "gen_ai.response.model": "azure/gpt-5.4", "gen_ai.conversation.id": "s%d" % i,
                "gen_ai.usage.input_tokens": 1000 + 300 * k, "gen_ai.usage.output_tokens": 50 + k,
                "gen_ai.usage.cache_read.input_tokens": 256 * k,
                "gen_ai.response.time_to_first_token": 150_000_000 + k}))
            dur_prev = dur
            at = start + dur + 20_000_000
        if len(batch) >= 100:
            f.write(json.dumps({"resourceSpans": [{"resource": {"attributes": [kv("service.name", "bench")]},
                    "scopeSpans": [{"scope": {"name": "bench"}, "spans": batch}]}]}, separators=(",", ":")) + "\n")
            batch = []
    if batch:
        f.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}) + "\n")
PY
fi

echo "input: $(du -m "$SPANS" | cut -f1) MB, $N spans"
# CPU seconds, not wall time, are the figure: the machine may be shared.
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v "$BIN/trace-convert" --from otel "$SPANS" -o "$WORK/out.jsonl" 2> "$WORK/time.txt"
grep -E "note:|Elapsed|User time|System time|Maximum resident" "$WORK/time.txt"
out=$(stat -c %s "$WORK/out.jsonl")
rss=$(awk '/Maximum resident/ {print $NF * 1024}' "$WORK/time.txt")
cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$WORK/time.txt")
echo "output: $((out / 1000000)) MB, $(wc -l < "$WORK/out.jsonl") records"
awk -v n="$N" -v cpu="$cpu" -v rss="$rss" -v out="$out" 'BEGIN {
  printf "%.1f k spans per cpu-s (target 100 k); peak RSS / output %.2f (target under 2)\n",
    n / cpu / 1000, rss / out }'
