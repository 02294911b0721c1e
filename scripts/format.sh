#!/bin/sh
# Formats every Swift file in place with the toolchain's swift-format and the repository's
# .swift-format (swift-nio's rules, 120 columns): `make format`.
#
# scripts/format.sh --check changes nothing and exits 1 on any finding (make check runs it first):
# `swift format lint --strict` (whatever formatting would change, and the findings of the rules it
# cannot fix by itself), then any line over 120 characters, which swift-format does not report
# where it cannot shorten the line itself (a long string literal or comment is left long, silently).
set -eu
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
# The folders that hold Swift code (bench/ holds none yet; it is listed so its first file is checked).
paths="Sources Tests Fuzz Examples bench Package.swift"

# A Swift file outside those paths would be neither formatted nor checked.
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  stray=$(git ls-files '*.swift' | grep -vE '^(Sources|Tests|Fuzz|Examples|bench)/|^Package\.swift$' || true)
  if [ -n "$stray" ]; then
    echo "format.sh: Swift files outside $paths (add their folder to scripts/format.sh):" >&2
    printf '%s\n' "$stray" >&2
    exit 1
  fi
fi

case "${1:-}" in
  "")
    # shellcheck disable=SC2086 # the paths are words
    exec "$SWIFT" format format --in-place --recursive --parallel $paths
    ;;
  --check)
    status=0
    # shellcheck disable=SC2086
    "$SWIFT" format lint --strict --recursive --parallel $paths || status=1
    # Characters, not bytes: C.UTF-8 makes grep count "é" once.
    # shellcheck disable=SC2086
    long=$(find $paths -name '*.swift' -print0 | LC_ALL=C.UTF-8 xargs -0 grep -nE '^.{121,}' || true)
    if [ -n "$long" ]; then
      printf '%s\n' "$long" | cut -c1-160 >&2
      echo "format.sh: $(printf '%s\n' "$long" | wc -l) lines over 120 characters (split the literal or comment)" >&2
      status=1
    fi
    if [ "$status" -ne 0 ]; then
      echo "format.sh: run scripts/format.sh (make format), then fix what is left by hand" >&2
    fi
    exit "$status"
    ;;
  *)
    echo "usage: scripts/format.sh [--check]" >&2
    exit 2
    ;;
esac
