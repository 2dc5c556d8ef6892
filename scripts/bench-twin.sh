#!/usr/bin/env bash
# The twin against a real server: llama.cpp's llama-server (the real-server
# suite's tiny GPT-2 model, 4 slots, one thread; scripts/real-server.sh
# builds it), on 127.0.0.1 only.
#
#   scripts/bench-twin.sh                # the real runs, the twin's, the table
#   RUNS=offline scripts/bench-twin.sh   # only the offline speed run
#   RUNS=predict scripts/bench-twin.sh   # the twin's part again, on the real
#                                        # runs already in $BENCH_DIR
#
# Runs:
#   accuracy  run A: a trace at RATE_A requests/s, mix 1 (prompts of 64 to
#             704 tokens, answers of 16 to 112); fit a profile to its
#             results and the server's scrapes; predict run B1 (mix 1 at
#             1.7 x RATE_A) and run B2 (mix 2: prompts of 600 to 1,400
#             tokens, answers of 8 to 40, at RATE_A) in virtual time; run
#             B1 and B2 for real, and A a second time (the machine's noise
#             floor); each real run with prompts of its own (--seed), as
#             llama-server keeps earlier prompts cached. Prints each
#             figure's error: |twin - real| / real, and |A' - A| / A.
#   offline   1 M records through trace-sim --offline: CPU time (user +
#             system) and peak memory.
#
# The server (pinned to core $SERVER_CPU, default 1) and the replay client
# run at nice $PRIO (default -10, which needs root): on a shared machine, a
# server at the default priority gets its core late and its step times vary
# tenfold, which no twin can predict. PRIO=0 runs both at the default.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-"real predict offline"}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/tracekit-bench-twin}
N=${N:-150}
RATE_A=${RATE_A:-1.2}
PRIO=${PRIO:--10}
SERVER_CPU=${SERVER_CPU:-1}
mkdir -p "$WORK"
# BIN_DIR names another build.
[ -n "${BIN_DIR:-}" ] || cargo build --release --quiet --bin trace-replay --bin trace-sim --bin trace-summarize
BIN=${BIN_DIR:-$PWD/target/release}

# A trace: N records at RATE per second (Poisson arrivals), prompt and
# answer lengths uniform in [P0, P1] and [O0, O1], from SEED.
make_trace() { # N RATE P0 P1 O0 O1 SEED FILE
  python3 - "$@" <<'PY'
import random, sys
n, rate, p0, p1, o0, o1, seed, path = sys.argv[1:]
rnd = random.Random(int(seed))
t = 0.0
with open(path, "w") as f:
    for _ in range(int(n)):
        f.write('{"timestamp":%.3f,"input_length":%d,"output_length":%d}\n'
                % (t, rnd.randint(int(p0), int(p1)), rnd.randint(int(o0), int(o1))))
        t += rnd.expovariate(float(rate)) * 1000.0
PY
}

# The figures compared, from trace-summarize's JSON: one line of numbers.
figures() { # RESULTS
  "$BIN/trace-summarize" --format json "$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["ttft"]["p50"], r["ttft"]["p90"], r["e2e"]["p50"], r["e2e"]["p90"],
      r["itl"]["p50"], r["throughput"]["output_tokens_per_s"])'
}

# Runs A, B1, B2 and A again against llama-server, each with prompts of
# its own.
real() {
  eval "$(scripts/real-server.sh | grep -E '^(LLAMA_SERVER|TINY_GPT2)=')"
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  nice -n "$PRIO" taskset -c "$SERVER_CPU" "$LLAMA_SERVER" -m "$TINY_GPT2" --host 127.0.0.1 --port "$PORT" -a tiny -c 65536 -np 4 -t 1 \
    -n 4096 --no-webui --metrics >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
  URL="http://127.0.0.1:$PORT"
  RATE_B1=$(python3 -c "print($RATE_A * 1.7)")
  make_trace "$N" "$RATE_A" 64 704 16 112 1 "$WORK/a.jsonl"
  make_trace "$N" "$RATE_B1" 64 704 16 112 2 "$WORK/b1.jsonl"
  make_trace "$N" "$RATE_A" 600 1400 8 40 3 "$WORK/b2.jsonl"
  replay() { # TRACE SEED OUT
    nice -n "$PRIO" "$BIN/trace-replay" --quiet --url "$URL" --endpoint completions --ignore-eos \
      --tokenizer r50k_base --seed "$2" --metrics-url "$URL" --metrics-every 250ms \
      --metrics-out "$3.metrics" "$1" >"$3"
  }
  echo "run A ($N requests at $RATE_A/s) ..." >&2
  replay "$WORK/a.jsonl" 11 "$WORK/a.ndjson"
  echo "run B1 ($N requests at $RATE_B1/s) ..." >&2
  replay "$WORK/b1.jsonl" 12 "$WORK/b1.ndjson"
  echo "run B2 ($N requests of mix 2 at $RATE_A/s) ..." >&2
  replay "$WORK/b2.jsonl" 13 "$WORK/b2.ndjson"
  echo "run A again (the noise floor) ..." >&2
  replay "$WORK/a.jsonl" 14 "$WORK/a2.ndjson"
  kill "$SERVER_PID" 2>/dev/null || true
  trap - EXIT
}

# Fit to run A, predict A, B1 and B2 in virtual time, print the table.
predict() {
  # The server's 4 slots (-np 4) are known: no run at these rates fills them.
  "$BIN/trace-sim" --fit "$WORK/a.ndjson" --metrics "$WORK/a.ndjson.metrics" --max-batch 4 \
    -o "$WORK/profile.json" 2>"$WORK/fit.txt"
  cat "$WORK/fit.txt"
  for t in a b1 b2; do
    /usr/bin/time -f "%e s" -o "$WORK/$t.time" \
      "$BIN/trace-sim" --offline --profile "$WORK/profile.json" "$WORK/$t.jsonl" >"$WORK/$t.twin.ndjson"
  done
  echo "virtual-time runs: A $(cat "$WORK/a.time"), B1 $(cat "$WORK/b1.time"), B2 $(cat "$WORK/b2.time")"
  {
    echo "A $(figures "$WORK/a.ndjson")"
    echo "A2 $(figures "$WORK/a2.ndjson")"
    echo "Atwin $(figures "$WORK/a.twin.ndjson")"
    for b in b1 b2; do
      echo "${b^^} $(figures "$WORK/$b.ndjson")"
      echo "${b^^}twin $(figures "$WORK/$b.twin.ndjson")"
    done
  } >"$WORK/figures.txt"
  python3 - "$WORK/figures.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, *vals = line.split()
    rows[name] = [float(v) for v in vals]
names = ["TTFT p50", "TTFT p90", "E2E p50", "E2E p90", "ITL p50", "output tok/s"]
err = lambda a, b: abs(a - b) / b * 100.0
cols = [("A fitted", "Atwin", "A"), ("B1 1.7x rate", "B1twin", "B1"),
        ("B2 other mix", "B2twin", "B2"), ("noise A'/A", "A2", "A")]
print("| figure | " + " | ".join(c[0] for c in cols) + " |")
print("|---|" + "---:|" * len(cols))
pred = []
for i, n in enumerate(names):
    cells = []
    for _, x, y in cols:
        e = err(rows[x][i], rows[y][i])
        cells.append("%.1f %%" % e)
        if x in ("B1twin", "B2twin"):
            pred.append(e)
    print("| %s | %s |" % (n, " | ".join(cells)))
print()
print("predictions (B1, B2): median error %.1f %%, largest %.1f %%"
      % (statistics.median(pred), max(pred)))
print()
print("| figure | " + " | ".join(rows.keys()) + " |")
print("|---|" + "---:|" * len(rows))
for i, n in enumerate(names):
    print("| %s | %s |" % (n, " | ".join("%.1f" % rows[k][i] for k in rows)))
PY
}

offline() {
  make_trace 1000000 150 64 704 16 112 5 "$WORK/1m.jsonl"
  cat >"$WORK/big.json" <<'JSON'
{"tracekit_profile": 1, "alpha_ms": 5.0, "beta_ms": 0.02, "gamma_ms": 0.05,
 "delta_ms": 0.0, "epsilon_ms": 1.0, "slots": 256, "prefill_chunk": 8192,
 "cache_blocks": 10000, "block_size": 512}
JSON
  /usr/bin/time -f "%U user %S system %e wall %M KB" -o "$WORK/time.txt" \
    "$BIN/trace-sim" --offline --profile "$WORK/big.json" "$WORK/1m.jsonl" >"$WORK/1m.ndjson"
  echo "1 M records offline: $(cat "$WORK/time.txt"), $(wc -l <"$WORK/1m.ndjson") results"
}

for run in $RUNS; do
  "$run"
done
