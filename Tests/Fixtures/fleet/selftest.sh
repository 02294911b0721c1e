#!/usr/bin/env bash
# Self-test of forge.py, the fleet signer outside Lanyard's code, against a fleet that `lanyard`
# made: one machine, one loopback etcd over http (no TLS: loopback only, as docs/fleet.md's
# five-minute trial).
#   Tests/Fixtures/fleet/selftest.sh        # LANYARD_BIN=path (default .build/release/lanyard,
#                                           # else .build/debug/lanyard); KEEP=1 keeps the folder
# Checks, each printed as "ok N - …":
#   1. `forge.py pubkey` of the identity `lanyard fleet init` made (read from its file store with
#      stock `age -d`) is the signing_key of the genesis entry in etcd, and of `fleet status`;
#   2. `forge.py digest` of that entry, grouped, is the fleet fingerprint `fleet init` printed;
#   3. an entry written by forge.py alone (entry 2, adding a machine whose age key stock
#      age-keygen made, `prev` the genesis's digest, signed with the founder's derived key), with
#      its body changed after signing, is not accepted: a second home that joins the fleet reports
#      log/0000000002 as not signed by a member (its members stay the founder alone);
#   4. the entry as forge.py signed it is accepted: `fleet status` lists the new member.
# Needs etcd, etcdctl, age, age-keygen and the venv (scripts/venv.sh). Exits non-zero on the first
# failure; ends with "N passed".
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
"$root/scripts/venv.sh" > /dev/null
PY="$root/.venv/bin/python"
FORGE="$here/forge.py"
bin=${LANYARD_BIN:-}
if [ -z "$bin" ]; then
  for b in "$root/.build/release/lanyard" "$root/.build/debug/lanyard"; do [ -x "$b" ] && { bin=$b; break; }; done
fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "selftest: no lanyard binary (make release, or LANYARD_BIN=…)" >&2; exit 1; }
for tool in etcd etcdctl age age-keygen; do
  command -v $tool > /dev/null || { echo "selftest: needs $tool (make deps)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/fleet-forge-selftest.XXXXXX")
etcd_pid=""
cleanup() {
  [ -z "$etcd_pid" ] || { kill "$etcd_pid" 2> /dev/null || true; wait "$etcd_pid" 2> /dev/null || true; }
  if [ "${KEEP:-0}" = 1 ]; then echo "selftest: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
passed=0
pass() { passed=$((passed + 1)); echo "ok $passed - $*"; }
die() { echo "FAIL - $*" >&2; exit 1; }

# Two free loopback ports for etcd (client and peer).
read -r client peer < <("$PY" -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])
[x.close() for x in s]')
url=http://127.0.0.1:$client
etcd --name forge --data-dir "$work/etcd" --listen-client-urls "$url" --advertise-client-urls "$url" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "forge=http://127.0.0.1:$peer" > "$work/etcd.log" 2>&1 &
etcd_pid=$!
ctl() { ETCDCTL_API=3 etcdctl --endpoints="$url" --dial-timeout=2s --command-timeout=5s "$@"; }
for _ in $(seq 100); do ctl endpoint health > /dev/null 2>&1 && break; sleep 0.1; done
ctl endpoint health > /dev/null 2>&1 || die "etcd did not start (see $work/etcd.log)"

# A machine: its own HOME and XDG folders, a file store without passphrase, [fleet] in config.ini.
home() {
  local d=$work/$1
  mkdir -p "$d/home" "$d/config/lanyard" "$d/data" "$d/state" "$d/run" "$d/cache"
  chmod 700 "$d"/*
  printf '[store]\nbackend = file\n[fleet]\nname = forge\nmachine = %s\nendpoints = %s\n' "$1" "$url" > "$d/config/lanyard/config.ini"
}
on() {
  local d=$work/$1; shift
  env -i PATH="$PATH" HOME="$d/home" XDG_CONFIG_HOME="$d/config" XDG_DATA_HOME="$d/data" XDG_STATE_HOME="$d/state" \
    XDG_RUNTIME_DIR="$d/run" XDG_CACHE_HOME="$d/cache" "$bin" "$@"
}
json() { "$PY" -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

home a
on a store init --no-passphrase > /dev/null 2>&1 || die "store init on a failed"
fingerprint=$(on a fleet init --json | json 'd["fleet_fingerprint"]')
# The machine's fleet identity, as an attacker holding the store would read it: stock age opens
# the file store with its identity file, and the reserved entry holds the AGE-SECRET-KEY.
age -d -i "$work/a/data/lanyard/identity.txt" "$work/a/data/lanyard/store.age" \
  | json 'd["slots"]["lanyard-fleet-identity"]["tokens"]["access_token"]' > "$work/a.key"
chmod 600 "$work/a.key"
grep -q '^AGE-SECRET-KEY-1' "$work/a.key" || die "no fleet identity in a's store"

ctl get /lanyard/forge/log/0000000001 --print-value-only > "$work/genesis.json"
logged=$(json 'json.loads(d["body"])["signing_key"]' < "$work/genesis.json")
shown=$(on a fleet status --json | json '[m["signing_key"] for m in d["members"] if m["machine"] == "a"][0]')
mine=$("$PY" "$FORGE" pubkey --identity "$work/a.key")
[ "$mine" = "$logged" ] || die "forge.py pubkey $mine is not the genesis entry's signing_key $logged"
[ "$mine" = "$shown" ] || die "forge.py pubkey $mine is not the signing_key fleet status shows, $shown"
pass "forge.py pubkey of a's identity is the signing_key in log/0000000001 and in fleet status ($mine)"

digest=$("$PY" "$FORGE" digest < "$work/genesis.json")
grouped=$(echo "${digest:0:20}" | tr a-f A-F | sed 's/\(....\)/\1-/g; s/-$//')
[ "$grouped" = "$fingerprint" ] || die "forge.py digest $digest does not give the fleet fingerprint $fingerprint"
pass "forge.py digest of the genesis entry gives the fleet fingerprint ($fingerprint)"

# Entry 2, written by forge.py alone: add machine x, whose age key stock age-keygen made.
age-keygen -o "$work/x.key" 2> /dev/null
"$PY" - "$work/x.key" "$digest" "$FORGE" > "$work/entry2.body" << 'EOF'
import json, subprocess, sys
key, prev, forge = sys.argv[1:]
recipient = subprocess.run(["age-keygen", "-y", key], capture_output=True, text=True, check=True).stdout.strip()
signing = subprocess.run([sys.executable, forge, "pubkey", "--identity", key], capture_output=True, text=True, check=True).stdout.strip()
print(json.dumps({"type": "lanyard-fleet-membership", "fleet": "forge", "seq": "2", "prev": prev, "signer": "a",
                  "at": "2026-12-04T00:00:00Z", "op": "add", "machine": "x", "recipient": recipient, "signing_key": signing}), end="")
EOF
"$PY" "$FORGE" sign --identity "$work/a.key" < "$work/entry2.body" > "$work/entry2.json"
cmp -s <(json 'd["body"]' < "$work/entry2.json" | head -c -1) "$work/entry2.body" || die "forge.py sign changed the body"

# The tampered entry first, read by a second home that has verified nothing past the genesis.
sed 's/\\"machine\\": \\"x\\"/\\"machine\\": \\"y\\"/' "$work/entry2.json" > "$work/tampered.json"
! cmp -s "$work/entry2.json" "$work/tampered.json" || die "could not tamper with the entry"
ctl put /lanyard/forge/log/0000000002 < "$work/tampered.json" > /dev/null
home b
on b store init --no-passphrase > /dev/null 2>&1 || die "store init on b failed"
on b fleet join --fleet-fingerprint "$fingerprint" --json > "$work/b-join.json" || die "fleet join on b failed"
on b fleet status --json > "$work/b-status.json" || true
members=$(json '",".join(m["machine"] for m in d["members"])' < "$work/b-status.json")
damaged=$(json '",".join(str(x) for x in d.get("damaged") or [])' < "$work/b-status.json")
[ "$members" = a ] || die "after a tampered entry 2, b lists members $members"
case $damaged in *0000000002*"not signed by a member"*) ;; *) die "b does not report the tampered log/0000000002 as damaged: $damaged" ;; esac
pass "the same entry with its body changed after signing is damaged (b: members a, damaged log/0000000002)"

ctl put /lanyard/forge/log/0000000002 < "$work/entry2.json" > /dev/null
members=$(on a fleet status --json | json '",".join(m["machine"] for m in d["members"])')
[ "$members" = a,x ] || die "after forge.py's entry 2, a lists members $members, not a,x"
pass "an entry forge.py signed with a's derived key is accepted: fleet status lists a,x"

echo "$passed passed"
