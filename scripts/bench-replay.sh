#!/usr/bin/env bash
# Dispatch fidelity and cost of trace-replay against trace-sim (a separate
# process that logs each request's arrival time itself, so the client's
# timing is checked independently of the client).
#
#   scripts/bench-replay.sh              # all runs
#   RUNS="stream1000 batch5000" scripts/bench-replay.sh
#
# Runs:
#   stream1000  1,000 requests/s for 30 s, streaming, 16 output tokens
#   batch5000   5,000 requests/s for 10 s, not streaming
#   memory      1 M requests, 64 closed-loop workers, not streaming
#               (peak RSS against a 100 k run: flat memory means equal)
#   shards      a 2,000 requests/s, 10 s streaming trace from one process,
#               then from 4 --shard processes sharing one --start-at
#   aiperf      the stream1000 trace with AIPerf's fixed schedule (AIPerf
#               is installed from PyPI into $WORK unless AIPERF names one)
#   floor       the batch5000 schedule sent by scripts/floor-client.c, the
#               least a client can do (no measuring, no results): the CPU
#               the kernel's part of the work costs on this machine
#   floorstream the stream1000 schedule sent the same way, each streamed
#               answer read to its end
#   agentic     100 k records of agent sessions (5-50 calls each, fan-outs
#               of up to 8 parallel calls joined by the next call), the
#               later calls untimed and waiting on `after`: dispatch lag
#               from the instant each call became due, and memory
#   callgrind   instructions in user space per request, under valgrind's
#               callgrind, for 1,500 requests at 500/s without streaming
#               and with 16 chunks: repeatable, unlike CPU time on a VM
#               (run on the `profiling` build: release binaries are stripped)
#
# Both programs share this 2-core machine with the server; "server lateness"
# is (arrival_k - arrival_0) - (due_k - due_0) with the k-th arrival matched
# to the k-th due time.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-"stream1000 batch5000 memory shards floor floorstream agentic callgrind aiperf"}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/tracekit-bench-replay}
mkdir -p "$WORK"
cargo build --release --quiet --bin trace-replay --bin trace-sim
# BIN_DIR names other builds to compare (A/B runs).
BIN=${BIN_DIR:-$PWD/target/release}
# Callgrind's output is read by function and line: the release build with
# debug information (release binaries are stripped).
PROFILING_BIN=${PROFILING_BIN_DIR:-$PWD/target/profiling}
# PROFILING_BIN_DIR names another build (the instruction counts do not
# depend on debug information: a stripped build counts the same).
case " $RUNS " in
  *" callgrind "*) [ -n "${PROFILING_BIN_DIR:-}" ] || cargo build --profile profiling --quiet --bin trace-replay ;;
esac

# A trace of N records at RATE per second: short prompts, OUT tokens each.
make_trace() { # N RATE OUT FILE
  python3 - "$@" <<'PY'
import sys
n, rate, out, path = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, "w") as f:
    for i in range(n):
        ts = round(i * 1000.0 / rate, 3)
        f.write('{"timestamp": %s, "text_input": "request %d says hello", "output_length": %d}\n' % (ts, i, out))
PY
}

SIM_PID=
start_sim() { # ARRIVALS_FILE
  "$BIN/trace-sim" --port 0 --ttft-ms 1 --itl-ms 1 --prefill-us 0 --batch-slope 0 \
    --cache-blocks 0 --arrivals "$1" > "$WORK/sim.url" &
  SIM_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/sim.url" ] && break; sleep 0.05; done
  URL=$(head -1 "$WORK/sim.url")
}
stop_sim() { kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; }
trap stop_sim EXIT

# Server-side lateness from the arrival log and the trace.
lateness() { # TRACE ARRIVALS
  python3 - "$@" <<'PY'
import json, sys
due = sorted(json.loads(l)["timestamp"] for l in open(sys.argv[1]))
arr = sorted(int(l) / 1000.0 for l in open(sys.argv[2]))
n = min(len(due), len(arr))
late = sorted((arr[k] - arr[0]) - (due[k] - due[0]) for k in range(n))
p = lambda q: late[min(n - 1, int(q * n))]
print(f"  server saw {len(arr)} of {len(due)} requests; lateness ms: p50 {p(0.5):.3f}, "
      f"p99 {p(0.99):.3f}, max {late[-1]:.3f}, late > 5 ms: {sum(1 for x in late if x > 5)}")
PY
}

# Run trace-replay under /usr/bin/time; print its final line and its cost.
replay() { # NAME TRACE ARGS...
  local name=$1 trace=$2; shift 2
  local n; n=$(wc -l < "$trace")
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/$name.time" \
    "$BIN/trace-replay" --quiet --url "$URL" "$@" "$trace" > "$WORK/$name.ndjson" 2> "$WORK/$name.err"
  echo "$name: $(tail -1 "$WORK/$name.err" | sed 's/^trace-replay: //')"
  read -r wall user sys rss < <(tail -1 "$WORK/$name.time")
  python3 -c "
n=$n; w=$wall; u=$user; s=$sys; rss=$rss
print(f'  {n} requests in {w} s wall; client CPU {u+s:.2f} s = {(u+s)/n*1e6:.1f} us per request; peak RSS {rss/1024:.1f} MB')
print(f'{(u+s)/n*1e6:.1f}', file=open('$WORK/$name.cpu', 'w'))"
}

# Agent sessions: SESSIONS starting RATE per second, each a chain of steps
# where a step is one call or a fan-out of 2-8 parallel calls; the step
# after a fan-out joins it. Only a session's first call has a timestamp.
make_agentic() { # RECORDS RATE FILE
  python3 - "$@" <<'PY'
import json, random, sys
n, rate, path = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
rnd = random.Random(7)
written, s = 0, 0
with open(path, "w") as f:
    while written < n:
        turns = min(rnd.randint(5, 50), n - written)
        prev, k = [], 0
        while k < turns:
            width = 1 if not prev or rnd.random() < 0.7 else min(rnd.randint(2, 8), turns - k)
            step = []
            for _ in range(width):
                r = {"id": f"s{s}-c{k}", "session_id": f"s{s}",
                     "text_input": f"call {k} of session {s}", "output_length": 4}
                if prev:
                    r["after"], r["delay"] = prev, round(rnd.random() * 5, 3)
                else:
                    r["timestamp"] = round(s * 1000.0 / rate, 3)
                f.write(json.dumps(r) + "\n")
                step.append(r["id"])
                k += 1
            prev = step
        written += turns
        s += 1
PY
}

for run in $RUNS; do
  case $run in
    agentic)
      make_agentic 100000 60 "$WORK/agentic.jsonl"
      start_sim "$WORK/agentic.arrivals"
      replay agentic "$WORK/agentic.jsonl"
      stop_sim
      ;;
    stream1000)
      make_trace 30000 1000 16 "$WORK/stream1000.jsonl"
      start_sim "$WORK/stream1000.arrivals"
      replay stream1000 "$WORK/stream1000.jsonl"
      stop_sim
      lateness "$WORK/stream1000.jsonl" "$WORK/stream1000.arrivals"
      ;;
    batch5000)
      make_trace 50000 5000 16 "$WORK/batch5000.jsonl"
      start_sim "$WORK/batch5000.arrivals"
      replay batch5000 "$WORK/batch5000.jsonl" --no-stream
      stop_sim
      lateness "$WORK/batch5000.jsonl" "$WORK/batch5000.arrivals"
      ;;
    memory)
      for n in 100000 1000000; do
        make_trace "$n" 1000 4 "$WORK/mem$n.jsonl"
        start_sim /dev/null
        replay "mem$n" "$WORK/mem$n.jsonl" --no-stream --concurrency 64
        stop_sim
      done
      ;;
    shards)
      make_trace 20000 2000 16 "$WORK/shards.jsonl"
      start_sim "$WORK/single.arrivals"
      replay single "$WORK/shards.jsonl"
      stop_sim
      lateness "$WORK/shards.jsonl" "$WORK/single.arrivals"
      start_sim "$WORK/shards.arrivals"
      at=$(python3 -c 'import datetime as d; print((d.datetime.now(d.timezone.utc) + d.timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))')
      pids=
      for k in 1 2 3 4; do
        "$BIN/trace-replay" --quiet --url "$URL" --shard "$k/4" --start-at "$at" \
          "$WORK/shards.jsonl" > "$WORK/shard$k.ndjson" 2> "$WORK/shard$k.err" &
        pids="$pids $!"
      done
      wait $pids
      for k in 1 2 3 4; do echo "shard $k/4: $(tail -1 "$WORK/shard$k.err" | sed 's/^trace-replay: //')"; done
      stop_sim
      lateness "$WORK/shards.jsonl" "$WORK/shards.arrivals"
      ;;
    floor|floorstream)
      # floor: the batch5000 schedule; floorstream: the stream1000 one.
      cc -O2 -o "$WORK/floor-client" scripts/floor-client.c
      if [ "$run" = floor ]; then set -- 5000 50000; else set -- 1000 30000 stream; fi
      start_sim "$WORK/$run.arrivals"
      /usr/bin/time -f "%e %U %S %M" -o "$WORK/$run.time" \
        "$WORK/floor-client" "${URL##*:}" "$@" > "$WORK/$run.out"
      stop_sim
      read -r wall user sys rss < <(tail -1 "$WORK/$run.time")
      python3 -c "
n=$2; w=$wall; u=$user; s=$sys
print(f'$run: $(cat "$WORK/$run.out") in {w} s wall; CPU {u+s:.2f} s = {(u+s)/n*1e6:.1f} us per request')
print(f'{(u+s)/n*1e6:.1f}', file=open('$WORK/$run.cpu', 'w'))"
      ;;
    callgrind)
      make_trace 1500 500 16 "$WORK/callgrind.jsonl"
      for mode in --no-stream --stream; do
        start_sim /dev/null
        args=(--quiet --url "$URL")
        [ "$mode" = --no-stream ] && args+=(--no-stream)
        valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind$mode.out" \
          "$PROFILING_BIN/trace-replay" "${args[@]}" "$WORK/callgrind.jsonl" \
          > "$WORK/callgrind$mode.ndjson" 2> "$WORK/callgrind$mode.err"
        stop_sim
        python3 - "$WORK/callgrind$mode.out" "$mode" <<'PY'
import sys
total = next(int(l.split()[1]) for l in open(sys.argv[1]) if l.startswith("summary:"))
print(f"callgrind {sys.argv[2]}: {total / 1500 / 1000:.1f} k instructions per request")
PY
        grep -c '"status":"ok"' "$WORK/callgrind$mode.ndjson" | sed 's/^/  ok results: /'
      done
      ;;
    aiperf)
      # AIPerf from PyPI, in a virtualenv of its own. Its "builtin"
      # tokenizer is tiktoken's o200k_base, which tiktoken downloads; the
      # same file ships in the tiktoken-rs crate, so it is put in
      # tiktoken's cache and no network is needed.
      AIPERF=${AIPERF:-$WORK/aiperf-venv/bin/aiperf}
      if [ ! -x "$AIPERF" ]; then
        python3 -m venv "$WORK/aiperf-venv"
        "$WORK/aiperf-venv/bin/pip" install -q aiperf
      fi
      export TIKTOKEN_CACHE_DIR=$WORK/tiktoken-cache
      mkdir -p "$TIKTOKEN_CACHE_DIR"
      key=$(python3 -c "import hashlib; print(hashlib.sha1(b'https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken').hexdigest())")
      cp "$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path '*tiktoken-rs-*/assets/o200k_base.tiktoken' | head -1)" "$TIKTOKEN_CACHE_DIR/$key"
      [ -s "$WORK/stream1000.jsonl" ] || make_trace 30000 1000 16 "$WORK/stream1000.jsonl"
      start_sim "$WORK/aiperf.arrivals"
      /usr/bin/time -f "%e %U %S %M" -o "$WORK/aiperf.time" \
        "$AIPERF" profile --model-names sim --tokenizer builtin --url "$URL" \
        --endpoint-type chat --streaming --input-file "$WORK/stream1000.jsonl" \
        --custom-dataset-type mooncake_trace --fixed-schedule --ui none \
        --output-artifact-dir "$WORK/aiperf-artifacts" \
        > "$WORK/aiperf.out" 2>&1 || echo "aiperf exited with status $? (its figures below may still be complete): see $WORK/aiperf.out"
      stop_sim
      read -r wall user sys rss < <(tail -1 "$WORK/aiperf.time")
      python3 -c "
n=$(wc -l < "$WORK/stream1000.jsonl"); w=$wall; u=$user; s=$sys; rss=$rss
print(f'aiperf: {n} requests in {w} s wall (start-up included); CPU {u+s:.2f} s = {(u+s)/n*1e6:.1f} us per request (its processes); peak RSS of the largest {rss/1024:.1f} MB')"
      grep -E "Benchmark Duration|Request Throughput" "$WORK/aiperf.out" | sed 's/^/  aiperf says: /' || true
      lateness "$WORK/stream1000.jsonl" "$WORK/aiperf.arrivals"
      ;;
  esac
done

# The client's CPU above the floor's, for runs measured in this invocation:
# the floor moves with the machine's state, the difference much less.
for pair in "batch5000 floor" "stream1000 floorstream"; do
  set -- $pair
  case " $RUNS " in *" $1 "*) ;; *) continue ;; esac
  case " $RUNS " in *" $2 "*) ;; *) continue ;; esac
  echo "$1: $(cat "$WORK/$1.cpu") us per request, $(python3 -c "print(f'{$(cat "$WORK/$1.cpu") - $(cat "$WORK/$2.cpu"):.1f}')") us above $2 ($(cat "$WORK/$2.cpu"))"
done
