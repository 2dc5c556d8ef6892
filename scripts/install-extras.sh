#!/bin/sh
# Install the man pages and the shell completions (bash, zsh, fish) of the
# tracekit tools under PREFIX (default ~/.local), next to binaries installed
# with `cargo install --locked --path .`:
#
#   scripts/install-extras.sh [PREFIX]
#
# Man pages go to PREFIX/share/man/man1 and man7; completions to
# PREFIX/share/bash-completion/completions, PREFIX/share/zsh/site-functions
# and PREFIX/share/fish/vendor_completions.d. Run from anywhere in the
# source tree. The completions are written by a small example program,
# built with the release profile: after `cargo install --path .` (which
# builds the library in target/release) that takes seconds; before, cargo
# compiles the library first (minutes), and says so.
set -eu

prefix=${1:-"$HOME/.local"}
cd "$(dirname "$0")/.."

if [ -d target/release/deps ]; then
    echo "building the completions writer (cargo, release profile, reusing target/release)" >&2
else
    echo "building the completions writer (cargo, release profile): no release build yet, so this compiles the library first, several minutes" >&2
fi
cargo run --quiet --release --locked --example completions -- "$prefix/share" >/dev/null
mkdir -p "$prefix/share/man/man1" "$prefix/share/man/man7"
cp man/*.1 "$prefix/share/man/man1/"
cp man/*.7 "$prefix/share/man/man7/"

echo "man pages: $prefix/share/man (man trace-replay; if not found: MANPATH=$prefix/share/man:)"
echo "completions: $prefix/share/bash-completion/completions, $prefix/share/fish/vendor_completions.d,"
echo "  and $prefix/share/zsh/site-functions (zsh: add it to fpath before compinit)"
