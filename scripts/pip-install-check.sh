#!/usr/bin/env bash
# Install tracekit with pip into a fresh virtual environment and run what it
# put on PATH: every [[bin]] of Cargo.toml answers --help, and trace-gen's
# trace replays on trace-replay's simulator and summarizes.
#   scripts/pip-install-check.sh           (CARGO_TARGET_DIR: reused if set)
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tracekit-pip-target}"
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
start=$(date +%s)
"$venv/bin/pip" install --quiet --disable-pip-version-check .
echo "pip install .: $(( $(date +%s) - start )) s"

PATH="$venv/bin:$PATH"
for tool in $(sed -n 's/^name = "\(trace-[a-z]*\)"$/\1/p' Cargo.toml); do
  if [ "$(command -v "$tool")" != "$venv/bin/$tool" ]; then
    echo "pip install . did not put $tool on PATH" >&2
    exit 1
  fi
  "$tool" --help >/dev/null
done
trace-gen --count 20 --rate 50 --input-len 64 --output-len 8 \
  | trace-replay --sim | trace-summarize >/dev/null
echo "pip install .: every binary on PATH and running"
