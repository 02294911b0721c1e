#!/bin/sh
# How `lanyard import` grows with the bundle's size. For each N (default 100 1000 10000) a bundle
# of N slots is made with python3 and stock `age -r` (the export side is not measured) and
# imported three times, each into a fresh, unlocked file store (`store init --no-passphrase`);
# prints the median wall time and, after each import, checks that `lanyard doctor` agrees and
# `list` shows the N slots. Target: 10,000 slots within 20x the 1,000-slot time (linear is 10x;
# the slot-by-slot import it replaced was about 100x). Exits 1 on a miss or a failed check.
#   bench/bundle-import.sh [N…]          LANYARD_BIN defaults to .build/release/lanyard
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
sizes=${*:-100 1000 10000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset DBUS_SESSION_BUS_ADDRESS LANYARD_ACCOUNT LANYARD_PASSPHRASE_FILE LANYARD_ASKPASS
export HOME="$tmp/home" XDG_RUNTIME_DIR="$tmp/run" XDG_STATE_HOME="$tmp/state"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
age-keygen -o "$tmp/key.txt" 2>/dev/null
recipient=$(age-keygen -y "$tmp/key.txt")
status=0

for n in $sizes; do
  python3 - "$n" <<'PY' | age -r "$recipient" -o "$tmp/bundle$n.age"
import json, sys
n = int(sys.argv[1])
slots = {}
for i in range(n):
    account = {"email": f"user{i}@example.com", "user_id": f"user-{i}", "account_id": f"acct-{i}", "plan": "pro", "fedramp": False}
    slots[f"slot-{i:05d}"] = {
        "credential": {"version": 1, "provider": "openai", "last_refresh": "2027-01-15T08:00:00Z", "account": account,
                       "tokens": {"access_token": f"AT-bench-{i}-" + "a" * 900, "refresh_token": f"RT-bench-{i}-" + "r" * 40,
                                  "id_token": "eyJ" + "i" * 1200, "expires_at": "2099-01-15T10:10:00Z"}},
        "record": {"provider": "openai", "backend": "file", "account": account,
                   "state": {"state": "signed-in", "expires_at": "2099-01-15T10:10:00Z"},
                   "last_refresh": "2027-01-15T08:00:00Z", "created_at": "2027-01-01T00:00:00Z"}}
json.dump({"version": 1, "exported_at": "2027-01-15T08:00:00Z", "slots": slots}, sys.stdout, indent=2, sort_keys=True)
PY
  times=""
  for run in 1 2 3; do
    d="$tmp/r$n-$run"
    mkdir -p "$d/config/lanyard"
    printf '[store]\nbackend = file\n' > "$d/config/lanyard/config.ini"
    export XDG_DATA_HOME="$d/data" XDG_CONFIG_HOME="$d/config"
    "$bin" store init --no-passphrase >/dev/null 2>&1
    start=$(date +%s.%N)
    "$bin" import "$tmp/bundle$n.age" --identity "$tmp/key.txt" --yes --json >/dev/null
    end=$(date +%s.%N)
    times="$times $(echo "$end - $start" | bc)"
    "$bin" doctor >/dev/null || { echo "bundle-import: doctor disagrees after importing $n slots" >&2; status=1; }
    listed=$("$bin" list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["slots"]))')
    [ "$listed" = "$n" ] || { echo "bundle-import: $listed slots listed after importing $n" >&2; status=1; }
    rm -rf "$d"
  done
  median=$(printf '%s\n' $times | sort -n | sed -n 2p)
  eval "median_$n=$median"
  printf '%6d slots: import %.3f s (median of 3:%s; bundle %s bytes)\n' "$n" "$median" "$times" "$(stat -c %s "$tmp/bundle$n.age")"
  rm -f "$tmp/bundle$n.age"
done

if [ -n "${median_1000:-}" ] && [ -n "${median_10000:-}" ]; then
  ratio=$(echo "scale=1; $median_10000 / $median_1000" | bc)
  if [ "$(echo "$median_10000 <= 20 * $median_1000" | bc)" = 1 ]; then
    echo "10,000 slots: ${ratio}x the 1,000-slot time (target <= 20x): met"
  else
    echo "10,000 slots: ${ratio}x the 1,000-slot time (target <= 20x): MISSED"
    status=1
  fi
fi
exit $status
