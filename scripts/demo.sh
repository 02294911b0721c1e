#!/bin/sh
# Narrated tour of Lanyard in a throwaway HOME (the sign-in issue extends this end to end).
set -eu
cd "$(dirname "$0")/.."
bin=$(swift build --show-bin-path)/lanyard
demo=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-demo.XXXXXX")
trap 'rm -rf "$demo"' EXIT INT TERM
export HOME="$demo" XDG_CONFIG_HOME="$demo/config" XDG_DATA_HOME="$demo/data" XDG_STATE_HOME="$demo/state"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say "lanyard --help"
"$bin" --help
say "lanyard list (no slots yet)"
"$bin" list
