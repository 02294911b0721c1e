#!/usr/bin/env bash
# Crash-consistency soak (issue 17 §1): starts one Lanyard operation at a time and SIGKILLs it at
# a random point, KILLS times (default 60; 500+ for the long run), checking invariants after each.
#
#   scripts/soak/crash.sh [KILLS]        # LANYARD_BIN=path (default .build/debug/lanyard)
#   CRASH_SEED=N                         # replay the same sequence of operations and delays
#   CRASH_KEYRING=0                      # no Secret Service even when gnome-keyring is installed
#   CRASH_BACKEND=secret-service         # keep the slots in the keyring instead of the file store
#   CRASH_KEEP=1                         # keep the work folder (kept anyway when an invariant fails)
#
# Set-up: private HOME/XDG folders, the file store (`store init --no-passphrase`; the slots live
# there, or with CRASH_BACKEND=secret-service in the keyring), the ChatGPT
# emulator (`interval` 0), slots a1 a2 x1 e1 r1 (each its own account) and, when gnome-keyring can
# run in a private D-Bus session (as scripts/with-keyring.sh does), m1 kept in the Secret
# Service; without one, `store migrate` is skipped (said in the first line). Each operation is
# first run un-killed three times: it must work, and its median length bounds the kill delay.
#
# Each round picks at random (weights) and kills after uniform(0, min(150 ms, 1.2 x its un-killed
# length [+ the injected server delay])) — the operation's start, middle and end all get hit:
#   refresh (4)   `lanyard refresh SLOT`, the token endpoint delayed 0-0.3 s (/_test/fault), so the
#                 kill lands before, during or after the server rotates; in half the rounds its
#                 `lanyard-net refresh-worker SLOT` (found in /proc) is killed too;
#   agent-once (1), agent (1)  `lanyard agent --once` / `lanyard agent` with a config whose
#                 `[refresh] lead` makes every slot due, each refresh delayed 0-0.3 s; workers too
#                 in half the rounds;
#   rename (2)    `lanyard rename r1 r2` (or back);   switch (1) `lanyard switch SLOT`;
#   export (1)    `lanyard export --to FILE` of every slot (a --recipient bundle, or 1 in 4 a
#                 passphrase one from LANYARD_PASSPHRASE_FILE), then, when FILE exists, an
#                 un-killed `lanyard import FILE --yes` (it must work: a bundle that exists is whole);
#   import (1)    an un-killed export, then `lanyard import FILE --yes` killed;
#   logout (1)    `lanyard logout x1` (x1 signed in again after the checks);
#   login (1)     `lanyard login x1` over its credential, killed 0-150 ms after the approval, the
#                 code exchange delayed 0-0.3 s;
#   remove (1)    `lanyard remove x1 --yes` (x1 signed in again after the checks);
#   codex-export (1) `lanyard codex export SLOT` into a private CODEX_HOME; afterwards its
#                 auth.json is absent or whole (parses, holds a refresh token) and 0600;
#   migrate (2)   `lanyard store migrate --to secret-service|file m1` (keyring only).
# A passphrase export/import spends over a second in scrypt, so its kills land before any write.
#
# After each round — once every process of the run has ended and the token endpoint has handled
# every request that reached it (a killed worker's delayed request still rotates the token) —
# the invariants:
#   1 list        `lanyard list --json` exits 0 and parses;
#   2 doctor      `lanyard doctor --json` reports no problem, or `doctor --repair --json` exits 0
#                 with none and a second `doctor` agrees (repairs counted, with what they said);
#                 exactly one of r1/r2 is registered (a killed rename may leave either name);
#                 a1 a2 x1 e1 (m1) are registered (x1 after a `remove` round: either way);
#   3 tokens      before any command runs, the stored refresh tokens (store.age via `age -d`, the
#                 keyring via secret-tool, recovery files — age files opened with stock `age -d -i
#                 identity.txt`, or clear JSON from an older Lanyard — and, for a slot in the keyring
#                 or a disk that refused the file, the kernel keyring's `lanyard-refreshed:DATA:SLOT`
#                 keys) are looked up in the server's
#                 /_test/tokens: every signed-in slot has a current (active) one in its backend or
#                 its recovery copy, and no two registered slots hold the same token family. The
#                 one allowed exception: a round that killed the refresh worker itself after the
#                 server answered and before the recovery file was written (the new token existed
#                 only in the answer in flight); such a slot is counted ("lost-ok") and signed in
#                 again, never refreshed with the dead token. Then, for every signed-in slot,
#                 `lanyard token SLOT` exits 0 with output and `lanyard refresh SLOT` exits 0;
#                 no slot is in another state than signed-in/signed-out;
#   4 leftovers   the recovery folder and the kernel keyring's recovery keys are empty after that;
#                 right after each kill and at the end, no file under Lanyard's folders of the home
#                 (exec folders aside) holds a refresh token the server issued in clear ("4 at
#                 rest"); at the end the server's
#                 `refresh_reused` is 0, no `lanyard*` process of the run is alive or a zombie (3 s
#                 grace), none was reaped by the subreaper after the check.
# Then the slots are brought back to the baseline (extra rename slot removed, signed-out or broken
# slots signed in again, an active slot, m1 in one backend), so one failure does not cascade.
# Exit 0 when every invariant held, 1 otherwise. The driver is crash.py; reaper.py is the child
# subreaper (as in concurrency.sh); repro-crash.sh replays each failure found, deterministically. Needs: bash, python3, age, age-keygen, the venv (scripts/venv.sh).
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
kills=${1:-60}
case $kills in '' | *[!0-9]*) echo "usage: $0 [KILLS]" >&2; exit 2 ;; esac

# Run under a child subreaper so orphans (refresh workers whose caller was killed) are ours to see.
if [ -z "${CRASH_UNDER_REAPER:-}" ]; then
  tmp=$(mktemp -d /tmp/lanyard-crash.XXXXXX) || exit 1
  export CRASH_UNDER_REAPER=1 CRASH_TMP="$tmp" SOAK_ORPHANS_LOG="$tmp/orphans.log"
  : > "$SOAK_ORPHANS_LOG"
  python3 scripts/soak/reaper.py bash "$0" "$@"
  rc=$?
  at_check=$(cat "$tmp/work/orphans-at-check" 2> /dev/null || echo 0)
  late=$(tail -n +"$((at_check + 1))" "$SOAK_ORPHANS_LOG" | awk '$2 ~ /^lanyard/')
  if [ -n "$late" ]; then
    echo "crash: lanyard processes ended after the final check (they outlived the run):" >&2; echo "$late" >&2; rc=1
  fi
  if [ "${CRASH_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then echo "crash: work folder kept: $tmp"; else rm -rf "$tmp"; fi
  exit $rc
fi
tmp=$CRASH_TMP

bin=${LANYARD_BIN:-.build/debug/lanyard}
if [ ! -x "$bin" ]; then
  [ -z "${LANYARD_BIN:-}" ] || { echo "crash: LANYARD_BIN=$bin is not executable" >&2; exit 1; }
  swift build --quiet || { echo "crash: swift build failed" >&2; exit 1; }
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$(dirname "$bin")/lanyard-net" ] || { echo "crash: no lanyard-net beside $bin" >&2; exit 1; }
for tool in age age-keygen; do
  command -v $tool > /dev/null || { echo "crash: needs $tool (apt-get install age)" >&2; exit 1; }
done
scripts/venv.sh || exit 1

export LANYARD_BIN=$bin
export HOME="$tmp/home" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_RUNTIME_DIR="$tmp/run" \
       XDG_STATE_HOME="$tmp/state" XDG_CACHE_HOME="$tmp/cache"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_STATE_HOME" "$tmp/work" && chmod 700 "$XDG_RUNTIME_DIR"
unset DBUS_SESSION_BUS_ADDRESS LANYARD_ACCOUNT LANYARD_PASSPHRASE_FILE LANYARD_ASKPASS NO_COLOR DISPLAY WAYLAND_DISPLAY \
      GNOME_KEYRING_CONTROL SSH_AUTH_SOCK

if [ "${CRASH_KEYRING:-1}" != 0 ] && command -v dbus-run-session > /dev/null && command -v gnome-keyring-daemon > /dev/null \
   && command -v secret-tool > /dev/null && command -v gdbus > /dev/null; then
  # A private session bus with an unlocked gnome-keyring (like scripts/with-keyring.sh).
  . scripts/lib/session-bus.sh
  session_bus_config "$tmp/bus.conf" "$XDG_RUNTIME_DIR"
  dbus-run-session --config-file="$tmp/bus.conf" -- sh -c '
    printf %s crash-soak-keyring | gnome-keyring-daemon --unlock --components=secrets --daemonize > /dev/null 2>&1
    if gdbus wait --session --timeout 10 org.freedesktop.secrets; then export CRASH_KEYRING=1
    else echo "crash: gnome-keyring did not start; store migrate is skipped" >&2; export CRASH_KEYRING=0; fi
    exec python3 scripts/soak/crash.py "$1" "$2"' crash "$tmp/work" "$kills" \
    2> >(grep -v 'Failed to set fd limit' >&2)
  rc=$?
  wait
  exit $rc
fi
CRASH_KEYRING=0 exec python3 scripts/soak/crash.py "$tmp/work" "$kills"
