#!/bin/sh
# The encrypted-file backend: `lanyard token` on an unlocked store against `age -d -i IDENTITY
# STORE`, and `lanyard store unlock` against `age -d` of a passphrase file (both scrypt 2^18),
# each pair in one hyperfine run. Prints the median ratios; exits 1 when token's misses its target
# (<= 1.25) or moves more than 10 % from the reference in docs/performance.md (bench/gate.py).
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
tool=$(dirname "$bin")/lanyard-test-tool
[ -x "$tool" ] || tool=.build/debug/lanyard-test-tool
tmp=$(mktemp -d)
export HOME="$tmp/home" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_RUNTIME_DIR="$tmp/run" XDG_STATE_HOME="$tmp/state"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME/lanyard" && chmod 700 "$XDG_RUNTIME_DIR"
printf '[store]\nbackend = file\n' > "$XDG_CONFIG_HOME/lanyard/config.ini"
unset DBUS_SESSION_BUS_ADDRESS
printf 'bench passphrase\n' > "$tmp/pass"; chmod 600 "$tmp/pass"
export LANYARD_PASSPHRASE_FILE="$tmp/pass"
trap '"$bin" store lock >/dev/null 2>&1; rm -rf "$tmp"' EXIT
"$bin" store init >/dev/null
"$tool" file-put bench 1 >/dev/null
"$bin" doctor --repair >/dev/null || true
"$bin" token bench-0 >/dev/null || { echo "token-file: setup failed" >&2; exit 1; }
# age needs the identity in the clear: decrypt identity.age once (age reads passphrases from a tty).
script -qec "age -d -o $tmp/identity.txt $XDG_DATA_HOME/lanyard/identity.age" /dev/null < "$tmp/pass" >/dev/null
# Five rounds of 30 runs each, the two side by side in each round (bench/gate.py says why).
for round in 1 2 3 4 5; do
  hyperfine -N --warmup 5 --runs 30 --export-json "$tmp/token-$round.json" \
    -n "lanyard token" "$bin token bench-0" \
    -n "age -d -i" "age -d -i $tmp/identity.txt $XDG_DATA_HOME/lanyard/store.age" >/dev/null
done
# unlock: one scrypt each (lanyard reads the passphrase file; age needs a pty, so time it through script).
hyperfine --warmup 1 --runs 10 --export-json "$tmp/unlock.json" \
  -n "lanyard store unlock" "$bin store unlock" \
  -n "age -d (scrypt) via script" "script -qec 'age -d -o /dev/null $XDG_DATA_HOME/lanyard/identity.age' /dev/null < $tmp/pass" >/dev/null
python3 - "$tmp/unlock.json" <<'PY'
import json, sys
u = json.load(open(sys.argv[1]))["results"]
lu, au = u[0]["median"] * 1000, u[1]["median"] * 1000
print(f"lanyard store unlock: {lu:7.1f} ms   age -d (scrypt, via script): {au:7.1f} ms   ratio {lu/au:.2f}")
PY
echo "lanyard token (file, unlocked) vs age -d -i:"
python3 bench/gate.py rounds token-file 1.25 "$tmp"/token-*.json
