#!/usr/bin/env bash
# Fleet soak (issue 25): four simulated machines share one slot through a real 3-member etcd
# cluster while Lanyard processes and etcd members are killed at random, for SECONDS (default 60),
# then checks invariants.
#
#   scripts/soak/fleet.sh [SECONDS]       # LANYARD_BIN=path (default .build/debug/lanyard)
#   FLEET_SEED=N                          # replay the same choices (timing still differs)
#   FLEET_CALLERS=N                       # `token` loops per machine (default 2)
#   FLEET_KEEP=1                          # keep the work folder (kept anyway when the run fails)
#   FLEET_REMOVED_ATTACKER=0              # without the removed machine d and the attacker's moves as d
#   FLEET_RESOLVE="WORDS"                 # what a person runs on every machine after the log is
#                                         # put back from a fork (lanyard WORDS; default nothing)
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
#     restored afterwards the same way;
#   - an attacker (issue 31), until ATTACK_QUIET seconds before the end (a quarter of the run, 10
#     to 30 s): someone who can write the prefix with the machines' own TLS client certificate but
#     holds no member's key. Its own age key (stock `age-keygen`) and Ed25519 key; every operation
#     with stock `etcdctl` (sealing with stock `age`), one every 0.2-1 s, at random (weights):
#     junk under slots/ (other names, lanyard-fleet-identity among them), log/, pending/ and
#     intents/ (2); log forgeries: log/0000000002 copied with its signature kept and the recipient
#     and machine replaced by the attacker's (a new member, an impostor m1/m2, the entry rewritten
#     in place, a `remove m1`), an entry signed with its own key, a join request (2); forged
#     credentials (tokens at-attacker/rt-attacker naming the victim's account id, sealed with
#     `age -e` to the members' recipients read from the log, writer m1, a zero, copied or its own
#     signature, or a forged tombstone) under other slot names (0.5); deletes of any key but the
#     lock and leader keys and slots/work (intents/work weighted 5) (1.5); slots/work's newest
#     value put back at a new revision (0.7); a member's value of slots/work put under slots/evil
#     (0.3); and, a fifteenth of the operations, ones that leave slots/work of no use: deleted
#     (0.1), junk (0.1), a forged credential (0.1), one of its last five earlier values put back
#     (0.2). Lock and leader keys are never deleted: deleting the lock's key breaks mutual
#     exclusion, which no signature can give back. Its last operation always puts one of the last
#     five earlier values back, so every run has a rollback that outlives the attacker.
#   - the removed machine (FLEET_REMOVED_ATTACKER=0 leaves it out): a fifth machine d
#     (file store without passphrase, no loops, no agent) joins at set-up; at 15-30 % of the run
#     m1 runs `fleet remove d`, and from then on the attacker holds d's age identity (read from
#     d's store with stock age) and so its signing key, and adds to its moves, signing with
#     Tests/Fixtures/fleet/forge.py (never Lanyard's code): the removal's log entry deleted (a third
#     of the time the one before too) and a fork at the removal's number (an entry by d adding
#     `evil`, or removing m1), at most one of the two every 20-40 s (0.15 each); an entry by d after
#     its removal (0.3); a value of slots/work from before the removal put back (0.1); forged
#     credentials signed with d's key. A log keeper (a person who notices) puts the members' entries
#     back with etcdctl 1-4 s after any known entry changed or vanished (then FLEET_RESOLVE). A guardian (a person noticing the slot no
#     longer refreshes) reads slots/work every 0.5 s and, when it has been missing, not signed by
#     a member or older than a generation some machine has seen for 1-4 s, signs in again on m1
#     (`fleet sync`, `login`: written over whatever the fleet holds; on m2 while m1 is cut off;
#     not while etcd has no quorum; again at most every 6 s).
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
#                lost-ok reuse; 1 with the fleet's value missing or refused, a refresh already
#                presented, or the lock "expired during the refresh" (a fenced write that found the
#                value changed), within 15 s of an attacker's write to slots/work or intents/work
#                or of the slot being of no use, or while the value it wrote there was the value;
#                1 refusing a value older than a generation seen there only when the attacker's
#                own log shows it put that generation back and etcd's history shows that value in
#                slots/work during the call, a member having written the newer one (however long
#                after the attack: the machine refuses by design until a sign-in lands);
#                fleet_forked or fleet_membership_behind while (or 15 s after) the log held the
#                attacker's entry at a known number or missed one it deleted. Judged by the error
#                code (--json). Nothing else, and no command ran longer than 150 s.
#   convergence  `fleet sync` then `token work` on every machine print the same token (compared by
#                digest) within 30 s of etcd being whole and the last fleet lock key gone (a
#                killed holder's lasts up to 20 s; 10 s is the aim, the margin is for a loaded
#                machine), the agents running, once the guardian has undone what the attacker left
#                in slots/work. `fleet sync` must not refuse `work`; it exits 1 for the attacker's
#                values under other slot names, which stay (no member can delete them).
#   secrecy      no value under the prefix, nor the sealed credential inside a signed value, opens
#                with `age -d -i attacker.key`: tried every 5 s during the attack and at the end;
#                and no value under slots/ or intents/ that a member first wrote after d's removal
#                (every one in etcd's history) opens with `age -d -i d.key`.
#   served       every token a `token` call printed is an access token the server issued to the
#                victim's account (its /_test/tokens families); at-attacker never printed, and
#                rt-attacker never in a store or recovery file.
#   doctor       `lanyard doctor` exits 0 on every machine, after the agents stopped (SIGTERM: exit 0);
#                when all it reports is a killed write's temporary file (what kill -9 leaves),
#                after `doctor --repair` (counted); or 1 when all it reports besides is what the
#                attacker left under the prefix (keys that do not verify, a value refused under
#                another slot name; counted).
#   processes    no `lanyard*` process of the run is left or a zombie (3 s grace), and none ended
#                after that check (the subreaper's log).
#   agents       no agent ended by itself.
# Etcd's whole history is recorded by a watch of every key from revision 1 (nothing is compacted),
# and the attacker logs every write with the revision etcd answered: the exits and secrecy checks
# judge by both.
# Summary lines (scripts/soak/all.sh and scripts/check.sh read them): calls, tokens served, faults,
# fleet lock, no quorum, server, attacker (operations by kind and key), attacker's damage, removed
# machine, after the attacker (how long the slot stayed of no use after it stopped, and when every
# machine held the fleet's value again), convergence, invariants; work folder: faults.log (what was
# done when), calls.jsonl (every command: machine, times, status, error code and line, token
# digest), history.jsonl (etcd's history: revision, key, value digest, generation, whether the
# attacker wrote it), each machine's folder (agent.log, event log), etcd's member logs, attacker/
# (its key, d.key, log.jsonl: its writes).
# Exit 0 when every invariant held, 1 otherwise. The driver is fleet.py; reaper.py is the child
# subreaper (as in concurrency.sh). Needs: bash, python3, etcd and etcdctl, openssl, age and
# age-keygen, the venv (scripts/venv.sh).
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
for tool in etcd etcdctl openssl age age-keygen; do
  command -v $tool > /dev/null || { echo "fleet: needs $tool (make deps)" >&2; exit 1; }
done
scripts/venv.sh > /dev/null || exit 1
unset DBUS_SESSION_BUS_ADDRESS LANYARD_ACCOUNT LANYARD_PASSPHRASE_FILE LANYARD_ASKPASS NO_COLOR
export LANYARD_BIN=$bin
exec .venv/bin/python scripts/soak/fleet.py "$secs"
