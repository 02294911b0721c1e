#!/usr/bin/env bash
# `make soak`: the long runs of the reliability suite (docs/reliability.md), one after another,
# against the release binaries, then one table of what each found:
#   the concurrency soak for 10 minutes            (scripts/soak/concurrency.sh 600)
#   kill -9 crashes, slots in the file store       (scripts/soak/crash.sh 500)
#   kill -9 crashes, slots in the keyring          (CRASH_BACKEND=secret-service scripts/soak/crash.sh 200)
#   disk faults at every write of six operations   (scripts/soak/io-faults.sh 60)
#   a fleet of 4 machines sharing a slot through etcd, Lanyard processes and etcd members killed,
#   for 10 minutes                                 (scripts/soak/fleet.sh 600)
# SOAK_SECONDS, SOAK_FILE_KILLS, SOAK_KEYRING_KILLS, SOAK_FLEET_SECONDS change the lengths; LANYARD_BIN the binary
# (default .build/release/lanyard, built by `make soak`). Each run's whole output is kept in
# SOAK_LOGS (default a new folder under /tmp, named at the end). Exits 1 when any run failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export LANYARD_BIN=${LANYARD_BIN:-$PWD/.build/release/lanyard}
[ -x "$LANYARD_BIN" ] || { echo "soak: no $LANYARD_BIN (make release)" >&2; exit 1; }
seconds=${SOAK_SECONDS:-600} file_kills=${SOAK_FILE_KILLS:-500} keyring_kills=${SOAK_KEYRING_KILLS:-200}
fleet_seconds=${SOAK_FLEET_SECONDS:-600}
logs=${SOAK_LOGS:-$(mktemp -d /tmp/lanyard-soak.XXXXXX)}
mkdir -p "$logs"
t_all=$(date +%s)
rows=() failed=0

# run NAME LOG COMMAND…: runs one soak with its output in LOG (and on the terminal).
run() {
  local name=$1 log=$2; shift 2
  local t0; t0=$(date +%s)
  echo "== $name: $*"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || failed=1
  echo "== $name: exit $rc in $(( $(date +%s) - t0 )) s"
  return "$rc"
}

# A value from a log: the first match of a sed expression.
pick() { sed -n "$2" "$1" | head -n 1; }

run "concurrency" "$logs/concurrency.log" scripts/soak/concurrency.sh "$seconds"
c=$logs/concurrency.log
rows+=("concurrency, ${seconds} s|$(pick "$c" 's/^total *\([0-9]*\) .*/\1/p') commands, 16 workers + rename + relogin + agent|$(pick "$c" 's/^server: .*refreshes_succeeded \([0-9]*\), .*refresh_reused \([0-9]*\),.*/\1 refreshes, \2 reused/p')|$(pick "$c" 's/^invariants: //p')")

for backend in file secret-service; do
  kills=$file_kills; [ "$backend" = secret-service ] && kills=$keyring_kills
  [ "$kills" -gt 0 ] || continue
  log=$logs/crash-$backend.log
  CRASH_BACKEND=$backend run "crash ($backend)" "$log" scripts/soak/crash.sh "$kills"
  rows+=("kill -9, slots in the $backend store|$(pick "$log" 's/^crash: \([0-9]*\) kills in \([0-9]*\) rounds.*/\1 kills in \2 rounds/p')|$(pick "$log" 's/^server: refreshes_succeeded \([0-9]*\), refresh_reused \([0-9]*\).*/\1 refreshes, \2 reused/p'); $(pick "$log" 's/^  total *[0-9]* *[0-9]* *[0-9]* *[0-9]* *[0-9]* *\([0-9]*\) *\([0-9]*\)$/\1 lost in flight (worker killed), \2 repaired/p')|invariant failures: $(pick "$log" 's/^invariant failures: //p')")
done

run "disk faults" "$logs/io-faults.log" scripts/soak/io-faults.sh 60
f=$logs/io-faults.log
rows+=("ENOSPC/EIO at every write|$(pick "$f" 's/^runs: \([0-9]*\), with an injected fault: \([0-9]*\),.*/\1 runs, \2 with a fault/p')|refresh, switch, rename, logout, login, agent --once|invariant failures: $(pick "$f" 's/.*invariant failures: \([0-9]*\).*/\1/p')")

if [ "$fleet_seconds" -gt 0 ]; then
  run "fleet" "$logs/fleet.log" scripts/soak/fleet.sh "$fleet_seconds"
  l=$logs/fleet.log
  rows+=("fleet of 4 machines, one shared slot, ${fleet_seconds} s|$(pick "$l" 's/^calls: token \([0-9]*\) .*/\1 `token` calls/p'), $(pick "$l" 's/^faults: \(.*\)$/\1/p'); $(pick "$l" 's/^no quorum: \([0-9]*\) s.*cut off: \(m[0-9]\) for \([0-9]*\) s.*/\1 s without quorum, a machine cut off \3 s/p')|$(pick "$l" 's/^server: refreshes_succeeded \([0-9]*\), refresh_reused \([0-9]*\) (lost-ok \([0-9]*\), unexplained \([0-9]*\)).*/\1 refreshes, \2 reused (\3 lost in flight, \4 unexplained)/p'); $(pick "$l" 's/^convergence: \([0-9.]*\) s after.*/converged \1 s after etcd was whole/p'); $(pick "$l" 's/^after the attacker: the slot was of no use for \(.*\) after it stopped (then: .*), and every machine held the fleet.s value \(.*\) after; \([0-9]*\) commands refused a value it put back (\([0-9]*\) after it stopped).*/the slot of no use \1 after the attacker stopped, on every machine again \2 after (\3 refusals of a value it put back, \4 after it stopped)/p')|$(pick "$l" 's/^invariants: //p')")
fi

echo
echo "Reliability soak: $(( ($(date +%s) - t_all) / 60 )) min $(( ($(date +%s) - t_all) % 60 )) s, logs in $logs"
printf '| %s | %s | %s | %s |\n' scenario trials "what the server saw / what was left" result
printf '| --- | --- | --- | --- |\n'
for r in "${rows[@]}"; do
  IFS='|' read -r a b c d <<< "$r"
  printf '| %s | %s | %s | %s |\n' "$a" "$b" "$c" "$d"
done
[ "$failed" = 0 ] && echo "soak: every run passed" || echo "soak: a run FAILED (see its log above)"
exit "$failed"
