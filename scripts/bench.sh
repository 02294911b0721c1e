#!/bin/sh
# Runs every bench/*.sh against the release binary and prints their results.
set -eu
cd "$(dirname "$0")/.."
export LANYARD_BIN="$PWD/.build/release/lanyard"
status=0
for b in bench/*.sh; do
  [ -e "$b" ] || continue
  printf '\n### %s\n' "$b"
  sh "$b" || { echo "FAILED: $b"; status=1; }
done
exit $status
