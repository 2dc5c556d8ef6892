#!/usr/bin/env bash
# trace-convert throughput and memory on LiteLLM StandardLoggingPayload logs
# made by repeating the bundled fixture with shifted times and new ids.
#
#   scripts/bench-convert.sh                 # 1 M payloads without prompts, 100 k with
#   N=200000 NP=20000 scripts/bench-convert.sh
#
# Prints records/s per CPU second and peak RSS against the output's size
# (the sort holds every record: the target is under twice the output).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
NP=${NP:-100000}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/tracekit-bench-convert}
mkdir -p "$WORK"
cargo build --release --quiet --bin trace-convert
BIN=$PWD/target/release

# Payloads in completion order (as LiteLLM writes them), one per line.
# With PROMPT=1 each carries a 1-4 k token conversation whose first part is
# shared by every request of its "application" (as system prompts are).
make_logs() { # COUNT PROMPT FILE
  python3 - "$@" <<'PY'
import json, random, sys
count, prompt, path = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
template = json.loads(open("tests/data/convert/standard_logging_payloads.constructed.jsonl").readline())
rng = random.Random(7)
words = [w for w in open("tests/data/convert/SOURCES.md").read().split() if w.isalpha()] or ["word"]
apps = [" ".join(rng.choice(words) for _ in range(600)) for _ in range(8)]
t0 = template["startTime"]
with open(path, "w") as f:
    for i in range(count):
        p = dict(template)
        start = t0 + i * 0.005
        e2e = 0.5 + (i % 17) * 0.1
        p["startTime"], p["endTime"] = start, start + e2e
        p["completionStartTime"] = start + 0.2
        p["id"] = p["litellm_call_id"] = f"chatcmpl-{i:09d}"
        p["trace_id"] = f"conv-{i // 4}"  # conversations of four turns
        p["prompt_tokens"], p["completion_tokens"] = 1000 + i % 3000, 20 + i % 200
        if prompt:
            n = rng.randint(150, 2400)
            user = " ".join(rng.choice(words) for _ in range(n))
            p["messages"] = [{"role": "system", "content": apps[i % 8]}, {"role": "user", "content": user}]
        else:
            p.pop("messages", None)
            p.pop("response", None)
        f.write(json.dumps(p) + "\n")
PY
}

run() { # NAME FILE ARGS...
  local name=$1 file=$2; shift 2
  local n; n=$(wc -l < "$file")
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/$name.time" \
    "$BIN/trace-convert" --from litellm "$@" "$file" -o "$WORK/$name.out.jsonl" 2> "$WORK/$name.err"
  read -r wall user sys rss < "$WORK/$name.time"
  local out; out=$(wc -c < "$WORK/$name.out.jsonl")
  local in; in=$(wc -c < "$file")
  python3 -c "
n=$n; w=$wall; c=$user+$sys; rss=$rss; out=$out; inp=$in
print(f'$name: {n} payloads ({inp/1e6:.0f} MB) in {w} s wall, {c:.2f} cpu-s: {n/w:,.0f} records per wall-s, {n/c:,.0f} per cpu-s; peak RSS {rss/1024:.0f} MB = {rss*1024/out:.2f} x the output ({out/1e6:.0f} MB)')"
}

[ -s "$WORK/plain-$N.jsonl" ] || make_logs "$N" 0 "$WORK/plain-$N.jsonl"
run plain "$WORK/plain-$N.jsonl"
[ -s "$WORK/prompts-$NP.jsonl" ] || make_logs "$NP" 1 "$WORK/prompts-$NP.jsonl"
run prompts "$WORK/prompts-$NP.jsonl"
