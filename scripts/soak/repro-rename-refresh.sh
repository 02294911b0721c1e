#!/usr/bin/env bash
# Deterministic reproduction of the race the concurrency soak finds: `lanyard rename` while a
# refresh of the same slot is in flight. The emulator delays the refresh answer by 2 s; during it
# `lanyard rename r1 r2` copies the credential (still holding the refresh token being rotated) to
# r2 and deletes r1. The refresh then stores the rotated tokens under r1 (not in the registry any
# more) and r2 keeps the spent refresh token: its next refresh is `refresh_token_reused` (the
# server revokes the whole sign-in) and r2 must sign in again.
# `logout` instead: `lanyard logout r1` during the refresh; the refresh then writes the credential
# back and marks r1 signed-in again, undoing the logout.
#   scripts/soak/repro-rename-refresh.sh [rename|logout]   # exit 0 when the race did no harm
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
bin=${LANYARD_BIN:-.build/debug/lanyard}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
. scripts/lib/emulator.sh
emu_home
unset DBUS_SESSION_BUS_ADDRESS
scripts/venv.sh || exit 1
emu_start || exit 1
emu_file_store || exit 1
post /_test/config '{"interval": 0}'
emu_login r1 || { echo "login failed" >&2; exit 1; }

post /_test/fault '{"endpoint": "oauth_token", "type": "delay", "seconds": 2}'
"$bin" refresh r1 > /dev/null 2> "$tmp/refresh.err" & refresh=$!
sleep 0.7
if [ "${1:-rename}" = logout ]; then
  "$bin" logout r1 > /dev/null; echo "logout r1 (refresh of r1 in flight): exit $?"
  wait $refresh; echo "refresh r1 (started before the logout): exit $? $(head -c 200 "$tmp/refresh.err")"
  "$bin" status r1 > /dev/null 2>&1; st=$?
  echo "status r1 afterwards: exit $st (3 = signed out, as logout said)"
  [ $st -eq 3 ]; st=$?
else
  "$bin" rename r1 r2 > /dev/null; echo "rename r1 r2 (refresh of r1 in flight): exit $?"
  wait $refresh; echo "refresh r1 (started before the rename): exit $? $(head -c 200 "$tmp/refresh.err")"
  "$bin" refresh r2 > /dev/null 2> "$tmp/refresh2.err"; st=$?
  echo "refresh r2 afterwards: exit $st $(head -c 200 "$tmp/refresh2.err")"
fi
curl -fsS "$base/_test/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); print("server: refreshes_succeeded", s["refreshes_succeeded"], "refresh_reused", s["refresh_reused"])'
"$bin" list --json | python3 -c 'import json,sys; print("registry:", [(s["slot"], s["state"]) for s in json.load(sys.stdin)["slots"]])'
age -d -i "$XDG_DATA_HOME/lanyard/identity.txt" "$XDG_DATA_HOME/lanyard/store.age" 2>/dev/null \
  | python3 -c 'import json,sys; print("store items:", sorted(json.load(sys.stdin)["slots"]))' 2>/dev/null
"$bin" doctor --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("doctor: problems", d["problems"], "unregistered_items", d.get("unregistered_items"))'
[ $st -eq 0 ]
