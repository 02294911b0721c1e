#!/bin/sh
# Checks Packaging/systemd/ with `systemd-analyze verify --user`: the units point at the built
# binary and run in a throwaway runtime folder (so it works in a container without a user
# manager). Any diagnostic (an unknown key included, which systemd only warns about) fails.
# Then checks the XDG autostart entry (Packaging/xdg/) with desktop-file-validate: any error,
# warning or hint fails.
set -eu
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "verify-units: systemd-analyze is not installed" >&2; exit 1
fi
if ! command -v desktop-file-validate >/dev/null 2>&1; then
    echo "verify-units: desktop-file-validate is not installed (desktop-file-utils; run scripts/deps.sh)" >&2; exit 1
fi
bin="$PWD/.build/debug/lanyard"
[ -x "$bin" ] || { echo "verify-units: build first ($bin is missing)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-units.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -m 700 "$tmp/run" "$tmp/units"
for unit in Packaging/systemd/*.service Packaging/systemd/*.timer; do
    sed "s|/usr/local/bin/lanyard|$bin|g" "$unit" > "$tmp/units/$(basename "$unit")"
done
if ! XDG_RUNTIME_DIR="$tmp/run" systemd-analyze verify --man=no --user "$tmp"/units/* > "$tmp/out" 2>&1 || [ -s "$tmp/out" ]; then
    sed "s|$tmp/units/|Packaging/systemd/|g" "$tmp/out" >&2
    echo "verify-units: systemd-analyze verify found problems" >&2
    exit 1
fi
echo "systemd units verified: $(ls Packaging/systemd | tr '\n' ' ')"
for entry in Packaging/xdg/*.desktop; do
    if ! desktop-file-validate "$entry" > "$tmp/out" 2>&1 || [ -s "$tmp/out" ]; then
        cat "$tmp/out" >&2
        echo "verify-units: desktop-file-validate found problems in $entry" >&2
        exit 1
    fi
done
echo "autostart entries validated: $(ls Packaging/xdg | tr '\n' ' ')"
