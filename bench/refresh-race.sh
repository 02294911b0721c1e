#!/bin/sh
# 32 processes run `lanyard token` the moment the access token falls due, against the ChatGPT
# emulator. Prints processes, refreshes the server saw, and wall time against one refresh
# (targets: 1 refresh; wall <= 2x; exits 1 when missed).
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
tmp=$(mktemp -d)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
. scripts/lib/emulator.sh
emu_home
unset DBUS_SESSION_BUS_ADDRESS
emu_start
emu_file_store '[refresh]\nlead = 600\n'
post /_test/config '{"interval": 0, "access_token_lifetime": 300}'   # due at once (lead 600)
emu_login race "$tmp/login.err" || { echo "refresh-race: login failed:" >&2; cat "$tmp/login.err" >&2; exit 1; }
post /_test/config '{"access_token_lifetime": 3600}'
now_ms() { python3 -c 'import time; print(int(time.monotonic()*1000))'; }
# One refresh on its own, for scale.
start=$(now_ms); "$bin" refresh race >/dev/null; single=$(( $(now_ms) - start ))
post /_test/config '{"access_token_lifetime": 300}'; "$bin" refresh race >/dev/null   # due again
post /_test/config '{"access_token_lifetime": 3600}'
before=$(curl -fsS "$base/_test/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["refreshes_succeeded"])')
start=$(now_ms)
pids=""
i=0; while [ $i -lt 32 ]; do "$bin" token race > "$tmp/out.$i" & pids="$pids $!"; i=$((i+1)); done
for p in $pids; do wait "$p"; done   # not a bare `wait`: the emulator runs in the background too
wall=$(( $(now_ms) - start ))
after=$(curl -fsS "$base/_test/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["refreshes_succeeded"], s["refresh_reused"])')
distinct=$(cat "$tmp"/out.* | sort -u | wc -l)
set -- $after
echo "processes: 32   distinct tokens printed: $distinct"
echo "refreshes seen by the server: $(( $1 - before ))   reuse errors: $2   (target: 1 refresh, 0 reuse)"
ratio=$(python3 -c "print(round($wall/$single, 2))")
echo "wall time: $wall ms for 32 processes vs $single ms for one refresh: ratio $ratio (target <= 2)"
[ $(( $1 - before )) -eq 1 ] && [ "$2" -eq 0 ] && python3 -c "import sys; sys.exit(0 if $ratio <= 2 else 1)" || { echo "MISSED"; exit 1; }
