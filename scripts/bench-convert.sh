#!/usr/bin/env bash
# trace-convert throughput and memory on LiteLLM StandardLoggingPayload logs
# made by repeating the bundled fixture with shifted times and new ids.
#
#   scripts/bench-convert.sh                 # 1 M payloads without prompts, 100 k with
#   N=200000 NP=20000 scripts/bench-convert.sh
#   BIG=20000000 scripts/bench-convert.sh    # also 20 M payloads without prompts,
#                                            # generated into standard input
#                                            # (beyond --memory: runs on disk)
#
# Prompt runs: "prompts" gives every request its own 150-2400 word user
# message after one of eight shared system prompts; "history" is four-turn
# chats that resend their history (each turn adds a user message and the
# previous answer), as chat clients and agents do.
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
# PROMPT: 0 none, 1 unique prompts, history: conversations resending history.
make_logs() { # COUNT PROMPT FILE
  python3 - "$@" <<'PY'
import json, random, sys
count, prompt, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
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
        if prompt == "1":
            n = rng.randint(150, 2400)
            user = " ".join(rng.choice(words) for _ in range(n))
            p["messages"] = [{"role": "system", "content": apps[i % 8]}, {"role": "user", "content": user}]
        elif prompt == "history":
            chat = random.Random(i // 4)
            messages = [{"role": "system", "content": apps[(i // 4) % 8]}]
            for turn in range(i % 4 + 1):
                if turn:
                    answer = " ".join(chat.choice(words) for _ in range(chat.randint(50, 200)))
                    messages.append({"role": "assistant", "content": answer})
                user = " ".join(chat.choice(words) for _ in range(chat.randint(150, 600)))
                messages.append({"role": "user", "content": user})
            p["messages"] = messages
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

# The "plain" payloads of make_logs (the same values), formatted from one
# dump of the template: fast enough to feed 20 M lines to a pipe.
plain_logs() { # COUNT
  python3 - "$@" <<'PY'
import json, sys
count = int(sys.argv[1])
p = json.loads(open("tests/data/convert/standard_logging_payloads.constructed.jsonl").readline())
t0 = p["startTime"]
p.pop("messages", None)
p.pop("response", None)
marks = {"startTime": "%(s)r", "endTime": "%(e)r", "completionStartTime": "%(c)r", "id": "%(i)s",
         "litellm_call_id": "%(i)s", "trace_id": "%(t)s", "prompt_tokens": "%(p)d",
         "completion_tokens": "%(o)d"}
for k in marks:
    p[k] = "@%s@" % k
text = json.dumps(p).replace("%", "%%")
for k, f in marks.items():
    quoted = f.endswith("s")
    text = text.replace(('"@%s@"' if not quoted else "@%s@") % k, f)
out, buf = sys.stdout, []
for i in range(count):
    start = t0 + i * 0.005
    buf.append(text % {"s": start, "e": start + 0.5 + (i % 17) * 0.1, "c": start + 0.2,
                       "i": "chatcmpl-%09d" % i, "t": "conv-%d" % (i // 4),
                       "p": 1000 + i % 3000, "o": 20 + i % 200} + "\n")
    if len(buf) == 10000:
        out.write("".join(buf))
        buf = []
out.write("".join(buf))
PY
}

if [ -n "${BIG:-}" ]; then
  plain_logs "$BIG" | /usr/bin/time -f "%e %U %S %M" -o "$WORK/big.time" \
    "$BIN/trace-convert" --from litellm - -o "$WORK/big.out.jsonl" 2> "$WORK/big.err"
  read -r wall user sys rss < "$WORK/big.time"
  out=$(wc -c < "$WORK/big.out.jsonl")
  python3 -c "
n=$BIG; w=$wall; c=$user+$sys; rss=$rss; out=$out
print(f'big: {n} payloads from a pipe in {w} s wall, {c:.2f} cpu-s: {n/w:,.0f} records per wall-s, {n/c:,.0f} per cpu-s; peak RSS {rss/1024:.0f} MB; output {out/1e6:.0f} MB')"
  rm -f "$WORK/big.out.jsonl"
fi

[ -s "$WORK/plain-$N.jsonl" ] || make_logs "$N" 0 "$WORK/plain-$N.jsonl"
run plain "$WORK/plain-$N.jsonl"
[ -s "$WORK/prompts-$NP.jsonl" ] || make_logs "$NP" 1 "$WORK/prompts-$NP.jsonl"
run prompts "$WORK/prompts-$NP.jsonl"
[ -s "$WORK/history-$NP.jsonl" ] || make_logs "$NP" history "$WORK/history-$NP.jsonl"
run history "$WORK/history-$NP.jsonl"
