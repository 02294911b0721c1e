#!/usr/bin/env bash
# Fleet soak (issue 25): four simulated machines share one slot through a real 3-member etcd
# cluster while Lanyard processes and etcd members are killed at random, for SECONDS (default 60),
# then checks invariants.
#
#   scripts/soak/fleet.sh [SECONDS]       # LANYARD_BIN=path (default .build/debug/lanyard)
#   FLEET_SEED=N                          # replay the same choices (timing still differs)
#   FLEET_CALLERS=N                       # `token` loops per machine (default 2)
#   FLEET_KEEP=1                          # keep the work folder (kept anyway when the run fails)
#
# Set-up: a private etcd cluster (scripts/etcd-cluster.sh: 3 members, TLS, client certificates),
# the ChatGPT emulator issuing 60-second access tokens (`interval` 0), machines m1..m4 (each its
# own HOME and XDG folders, file store without passphrase, `[fleet]` in its config.ini, and
# `[http] timeout = 5`, which makes the fleet lock's lease 20 s instead of 70: in proportion to
# 60-second tokens, as the default is to tokens that live hours). m1 signs `work` in, runs
# `fleet init` and `fleet share work`; m2..m4 run `fleet join`, m1 approves each with the
# fingerprint join printed, and they run `fleet sync`. Each machine runs `lanyard agent`.
# Then, for SECONDS:
#   - per machine, FLEET_CALLERS loops of `lanyard token work` every 0.2-1 s; one loop running
#     `lanyard refresh work` on a random machine every 4-12 s;
#   - a fault every 2-6 s, at random (weights): kill -9 of a running `token` or `refresh`
#     command (3); of a `lanyard-net refresh-worker` (2; found in /proc, killed 0-250 ms after it
#     appears, so before, during or after its request to the server, holding the fleet lock or
#     queued for it); of an agent (1; started again 0.5-3 s later); of an etcd member (1.5; any
#     of the three, so the leader a third of the time; restarted 2-8 s later); of two members at
#     once (0.5; no quorum for 5-15 s, at most a fifth of the run);
#   - once, a machine cut off from etcd for 30 s (a third of the run when that is under 50 s):
#     its config.ini's endpoints point at dead loopback ports and its agent is restarted;
#     restored afterwards the same way.
# Meanwhile every second it notes which refresh tokens (SHA-256 digests; no token is printed or
# written anywhere) each machine's store and recovery files and etcd's copy hold, and which key
# owns the fleet lock, and watches the server's `refresh_reused`.
#
# Afterwards, with every member back and etcd healthy, the invariants (one line each):
#   reuse        the server saw no refresh-token reuse, except "lost-ok": a refresh worker killed
#                between the server's answer and its recovery file, so the new refresh token
#                existed only in the answer nobody read. Such a reuse is told apart by the token
#                that was current when the reuse revoked the family: no refresh ever spent it and
#                no store, recovery file or etcd ever held it; and by a worker killed after the
#                server counted a refresh (between a second before the worker was seen and 1.5 s
#                after the kill), each such kill explaining one reuse at most. After
#                each reuse m1 signs in again (`fleet sync`, `login`, `refresh`: written to the
#                fleet). Any other reuse fails the run, and so do more lost-ok reuses than
#                refreshes the server made that no machine's event log recorded.
#   exits        every `token` and `refresh` exited 0 (a token printed, not expired when the call
#                began), or was killed, or: 5 with "has expired" (any 5 for `refresh`) while the
#                fleet had no quorum (+10 s), its machine was cut off (+5 s) or etcd elected a new
#                leader (15 s after the leader was killed); 5 `fleet_lock_timeout` when a refresh
#                worker had been killed during the call or up to 90 s before (its lock key outlives
#                it by the lease's 20 s, and etcd starts every lease's time to live again at each
#                leader election); a non-zero exit saying its refresh worker was killed, for a call
#                whose worker was killed; 4 (signed out) within 60 s of the sign-in after a
#                lost-ok reuse. Nothing else, and no command ran longer than 150 s.
#   convergence  `fleet sync` then `token work` on every machine print the same token (compared by
#                digest) within 30 s of etcd being whole and the last fleet lock key gone (a
#                killed holder's lasts up to 20 s; 10 s is the aim, the margin is for a loaded
#                machine), the agents running.
#   doctor       `lanyard doctor` exits 0 on every machine, after the agents stopped (SIGTERM: exit 0);
#                when all it reports is a killed write's temporary file (what kill -9 leaves),
#                after `doctor --repair` (counted).
#   processes    no `lanyard*` process of the run is left or a zombie (3 s grace), and none ended
#                after that check (the subreaper's log).
#   agents       no agent ended by itself.
# Summary lines (scripts/soak/all.sh and scripts/check.sh read them): calls, tokens served, faults,
# fleet lock, no quorum, server, convergence, invariants; work folder: faults.log (what was done
# when), calls.jsonl (every command: machine, times, status, error line, token digest), each
# machine's folder (agent.log, event log), etcd's member logs.
# Exit 0 when every invariant held, 1 otherwise. The driver is fleet.py; reaper.py is the child
# subreaper (as in concurrency.sh). Needs: bash, python3, etcd and etcdctl, openssl, the venv
# (scripts/venv.sh).
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
secs=${1:-60}
case $secs in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac

# Run under a child subreaper so orphans (refresh workers whose caller was killed, etcd members
# started in the background) are ours to see and reap.
if [ -z "${FLEET_UNDER_REAPER:-}" ]; then
  tmp=$(mktemp -d /tmp/lanyard-fleet-soak.XXXXXX) || exit 1
  export FLEET_UNDER_REAPER=1 FLEET_TMP="$tmp" SOAK_ORPHANS_LOG="$tmp/orphans.log"
  : > "$SOAK_ORPHANS_LOG"
  python3 scripts/soak/reaper.py bash "$0" "$@"
  rc=$?
  at_check=$(cat "$tmp/orphans-at-check" 2> /dev/null || echo 0)
  late=$(tail -n +"$((at_check + 1))" "$SOAK_ORPHANS_LOG" | awk '$2 ~ /^lanyard/')
  if [ -n "$late" ]; then
    echo "fleet: lanyard processes ended after the final check (they outlived the run):" >&2; echo "$late" >&2; rc=1
  fi
  if [ "${FLEET_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then echo "fleet: work folder kept: $tmp"; else rm -rf "$tmp"; fi
  exit $rc
fi

bin=${LANYARD_BIN:-.build/debug/lanyard}
if [ ! -x "$bin" ]; then
  [ -z "${LANYARD_BIN:-}" ] || { echo "fleet: LANYARD_BIN=$bin is not executable" >&2; exit 1; }
  swift build --quiet || { echo "fleet: swift build failed" >&2; exit 1; }
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$(dirname "$bin")/lanyard-net" ] || { echo "fleet: no lanyard-net beside $bin" >&2; exit 1; }
for tool in etcd etcdctl openssl; do
  command -v $tool > /dev/null || { echo "fleet: needs $tool (make deps)" >&2; exit 1; }
done
scripts/venv.sh > /dev/null || exit 1
unset DBUS_SESSION_BUS_ADDRESS LANYARD_ACCOUNT LANYARD_PASSPHRASE_FILE LANYARD_ASKPASS NO_COLOR
export LANYARD_BIN=$bin
exec .venv/bin/python scripts/soak/fleet.py "$secs"
