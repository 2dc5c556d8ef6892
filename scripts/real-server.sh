#!/usr/bin/env bash
# A real OpenAI-compatible server for tests: llama.cpp's llama-server, built on
# CPU from the llama.cpp sources that ship inside the llama-cpp-python source
# package on PyPI, with a tiny random-weight model that has GPT-2's real
# tokenizer (so its prompt token counts equal tiktoken's r50k_base). Only the
# package registries are used (PyPI, Debian); nothing comes from a model hub.
#
#   scripts/real-server.sh           # build or reuse; print the paths (about 7 min the first time)
#   scripts/real-server.sh --start   # also start a server on a free 127.0.0.1 port;
#                                    # prints URL=... and PID=... (stop it with kill PID)
#
# The cache ($TRACEKIT_SERVER_CACHE, default ~/.cache/tracekit-real-servers) is
# reused on the next run. The tests find it there by themselves; without it they
# print "skipped: run scripts/real-server.sh".
set -euo pipefail

VERSION=0.3.36
CACHE=${TRACEKIT_SERVER_CACHE:-$HOME/.cache/tracekit-real-servers}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC="$CACHE/llama_cpp_python-$VERSION/vendor/llama.cpp"
BUILD="$CACHE/llama-server-$VERSION"
SERVER="$BUILD/bin/llama-server"
MODEL="$CACHE/models/tiny-gpt2.gguf"

say() { echo "real-server: $*" >&2; }
mkdir -p "$CACHE/dl" "$CACHE/models"

if [ ! -d "$SRC" ]; then
  say "downloading the llama-cpp-python $VERSION source package (76 MB)"
  python3 -m pip download -q --no-deps --no-binary llama-cpp-python -d "$CACHE/dl" "llama-cpp-python==$VERSION"
  tar xzf "$CACHE/dl/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE"
fi

if [ ! -x "$SERVER" ]; then
  if ! command -v cmake >/dev/null; then
    say "installing cmake"
    apt-get install -y -q cmake >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q cmake >/dev/null; }
  fi
  say "building llama-server (6-7 min on 2 cores; log in $BUILD.log)"
  # The prebuilt web UI would be downloaded at build time: turn it off.
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON -DGGML_CCACHE=OFF >"$BUILD.log" 2>&1 \
    || { tail -20 "$BUILD.log" >&2; exit 1; }
  cmake --build "$BUILD" --target llama-server -j"$(nproc)" >>"$BUILD.log" 2>&1 \
    || { tail -20 "$BUILD.log" >&2; exit 1; }
fi

if [ ! -s "$MODEL" ]; then
  VENV="$CACHE/venv"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -c 'import gguf, numpy' 2>/dev/null || "$VENV/bin/pip" install -q gguf numpy
  say "writing the tiny GPT-2 model"
  "$VENV/bin/python" "$HERE/tiny_gguf.py" "$SRC/models/ggml-vocab-gpt-2.gguf" "$MODEL.tmp"
  mv "$MODEL.tmp" "$MODEL"
fi

echo "LLAMA_SERVER=$SERVER"
echo "TINY_GPT2=$MODEL"

if [ "${1:-}" = "--start" ]; then
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -a tiny -c 65536 -np 4 -t 1 -n 4096 \
    --no-webui >"$CACHE/server-$PORT.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
      echo "URL=http://127.0.0.1:$PORT"
      echo "PID=$PID"
      exit 0
    fi
    sleep 0.1
  done
  kill "$PID" 2>/dev/null || true
  say "the server did not become ready; see $CACHE/server-$PORT.log"
  exit 1
fi
