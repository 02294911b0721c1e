#!/usr/bin/env bash
# Concurrency soak (issue 17 §2): stresses the real `lanyard` binaries against the ChatGPT emulator
# for SECONDS (default 60) and checks invariants afterwards.
#
#   scripts/soak/concurrency.sh [SECONDS]       # LANYARD_BIN=path (default .build/debug/lanyard)
#   SOAK_KEEP=1 scripts/soak/concurrency.sh     # keep the work folder (logs, stderr) and print it
#
# Set-up: private HOME/XDG folders, the file store (no passphrase), the emulator with 3 s access
# tokens and `[refresh] lead = 1`, so every slot falls due about every 2 s; slots s1..s5 (workers),
# r1 (renamed back and forth), x1 (logged out and in again), each a distinct account; the
# `lanyard agent` runs throughout. Then, for SECONDS:
#   - 16 worker loops, each picking at random: `token sN`, `git-credential get` (example.test is
#     mapped to s1), `exec --account sN -- sh -c 'test -s "$CODEX_HOME/auth.json"'`,
#     `usage sN --json`, `status --json` (the slot comes from the worker's pin or the active
#     slot), `switch sN`, and `pin sN` / `unpin` toggled in the worker's own folder;
#   - one loop renaming r1 -> r2 -> r1 …, each rename followed by `token` of the new name;
#   - one loop running `logout x1`, `status x1`, `login x1` (approved through /_test/approve),
#     `token x1`.
# Each command's exit status and duration go to a per-worker log (tokens are never printed or
# stored: only their length is logged).
#
# Invariants (exit 0 when all hold, 1 otherwise, naming the failures):
#   1 reuse       the server saw no refresh-token reuse (`refresh_reused` == 0) and no refresh
#                 with a dead token (`refresh_invalidated` == 0, which reuse would cause).
#   2 registry    `lanyard list --json` exits 0; slots are exactly s1..s5, x1 and one of r1/r2;
#                 every slot is signed-in and `lanyard token SLOT` exits 0 with a token.
#   3 latency     no command took longer than the lock timeout. Lanyard documents none (its
#                 flocks block without limit, Sources/LanyardStore/SecureFiles.swift), so 30 s.
#   4 leftovers   locks/ holds only SLOT.lock files of slots used in the run and agent.lock; no
#                 recovery files, no stray files beside the registry/store/event log, the
#                 `exec` folders are gone, `lanyard doctor --json` reports `problems: []`, no
#                 `lanyard*` process of this run is alive or a zombie, none outlived its parent.
#   5 statuses    exit statuses, per command. Allowed (everything else is a failure):
#                   token, git-credential, exec, status, switch, pin, unpin, list, doctor: 0 only.
#                     Slots s1..s5 are never logged out or renamed, their refresh tokens never
#                     expire and the emulator is local, so nothing excuses 3/4/5/6 here; `status`
#                     resolves the worker's pin or the active slot, always one of s1..s5;
#                     `unpin` is only run when this worker's own pin exists (1 = "no file").
#                   usage: 0 only (a 6 would need a network failure; the emulator is local).
#                   rename: 0 only. The loop is the only writer of r1/r2, so neither "no such
#                     slot" (3) nor "exists" (1) can happen unless a rename half-failed.
#                   logout, login: 0 only (the loop is the only writer of x1; a login's device
#                     code is approved at once).
#                   status x1 0.3 s after a successful logout: 3 only (signed out; 0 means a
#                     refresh that was in flight stored the credential again and undid it).
#                   token of r1/r2 and x1 after a rename/login: 0 only. When the renamed slot's
#                     token is 4 (its session was lost), the loop signs it in again (`rlogin`,
#                     0 only) so every occurrence is counted.
#                   agent: 0 after SIGTERM.
#   6 events      refresh events in the event log == `refreshes_succeeded` at the server
#                 (every refresh Lanyard made is logged once).
# Helpers: reaper.py (child subreaper), report.py (table and checks); repro-rename-refresh.sh
# reproduces, deterministically, the rename/logout-during-refresh races this soak can hit.
# Needs: bash, python3, curl, the venv (scripts/venv.sh, run here).
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
secs=${1:-60}
case $secs in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
lock_timeout=30

# Run under a child subreaper so orphans are ours to see (PID 1 may never reap them).
if [ -z "${SOAK_UNDER_REAPER:-}" ]; then
  tmp=$(mktemp -d /tmp/lanyard-soak.XXXXXX) || exit 1
  export SOAK_UNDER_REAPER=1 SOAK_TMP="$tmp" SOAK_ORPHANS_LOG="$tmp/orphans.log"
  : > "$SOAK_ORPHANS_LOG"
  python3 scripts/soak/reaper.py bash "$0" "$@"
  rc=$?
  if [ -s "$tmp/orphans.log" ] && [ "$rc" -eq 0 ]; then
    # Processes reaped by the subreaper after the soak's own checks ran.
    echo "soak: lanyard processes outlived their parents late:" >&2; cat "$tmp/orphans.log" >&2; rc=1
  fi
  if [ "${SOAK_KEEP:-0}" = 1 ]; then echo "soak: work folder kept: $tmp"; else rm -rf "$tmp"; fi
  exit $rc
fi
tmp=$SOAK_TMP

bin=${LANYARD_BIN:-.build/debug/lanyard}
if [ ! -x "$bin" ]; then
  [ -z "${LANYARD_BIN:-}" ] || { echo "soak: LANYARD_BIN=$bin is not executable" >&2; exit 1; }
  swift build --quiet || { echo "soak: swift build failed" >&2; exit 1; }
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")   # absolute: workers run in their own folders
[ -x "$(dirname "$bin")/lanyard-net" ] || { echo "soak: no lanyard-net beside $bin" >&2; exit 1; }

server_pid="" agent_pid="" bg_pids=""
cleanup() {
  for p in $bg_pids $agent_pid; do kill "$p" 2>/dev/null; done
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

. scripts/lib/emulator.sh
emu_home
mkdir -p "$tmp/logs"
unset DBUS_SESSION_BUS_ADDRESS NO_COLOR

scripts/venv.sh || exit 1
emu_start --access-token-lifetime 3 || { echo "soak: the emulator did not start" >&2; exit 1; }
emu_file_store '[refresh]\nlead = 1\n[agent]\nnotify = false\n[events]\nmax-bytes = 1073741824\n[git]\nexample.test = s1\n' \
  || { echo "soak: store init failed" >&2; exit 1; }
post /_test/config '{"interval": 0}' || exit 1

now_us() { local t=${EPOCHREALTIME/./}; echo $((10#$t)); }

# login_slot SLOT ERRFILE: `lanyard login SLOT`, approved through the hook as SLOT@soak.test.
login_slot() { emu_login "$1" "$2" "$1@soak.test"; }

slots="s1 s2 s3 s4 s5 r1 x1"
pids=""
for s in $slots; do login_slot "$s" "$tmp/logs/setup-login-$s.err" & pids="$pids $!"; done
for p in $pids; do
  wait "$p" || { echo "soak: a set-up login failed:" >&2; cat "$tmp"/logs/setup-login-*.err >&2; exit 1; }
done
"$bin" switch s1 > /dev/null || exit 1
before_setup=$(curl -fsS "$base/_test/stats") || exit 1
echo "$before_setup" > "$tmp/stats-setup.json"

"$bin" agent > "$tmp/logs/agent.out" 2> "$tmp/logs/agent.err" &
agent_pid=$!

start_us=$(now_us)
deadline=$(( start_us + secs * 1000000 ))

# run LOG KIND SLOT CMD...: runs CMD, logs "KIND SLOT STATUS MICROSECONDS OUTPUT-BYTES CHECK" (CHECK:
# 1 when the output looked right for a successful command, else 0; "-" when not checked) and, on
# a non-zero status, the command's stderr (never a secret) to LOG.err.
# Output is kept in $out (for the caller to inspect, never printed).
run() {
  local log=$1 kind=$2 slot=$3 t0 t1 st
  shift 3
  t0=$(now_us)
  out=$("$@" 2> "$log.cur-err"); st=$?
  t1=$(now_us)
  last_status=$st
  check=-
  case $kind in
    token|rtoken|xtoken|final-token) [ $st -ne 0 ] || { case $out in *[![:print:]]* | '') check=0 ;; *) check=1 ;; esac; } ;;
    git-credential) [ $st -ne 0 ] || { case $out in *password=?*) check=1 ;; *) check=0 ;; esac; } ;;
  esac
  printf '%s %s %d %d %d %s\n' "$kind" "$slot" "$st" $((t1 - t0)) "${#out}" "$check" >> "$log"
  if [ $st -ne 0 ] || [ "$check" = 0 ]; then
    { printf -- '--- %s %s exit %d after %d ms\n' "$kind" "$slot" "$st" $(((t1 - t0) / 1000)); head -c 600 "$log.cur-err"; echo; } >> "$log.err"
  fi
  return $st
}

worker() {
  local i=$1 log=$tmp/logs/w$1 pinned=0 op slot
  mkdir -p "$tmp/w$i" && cd "$tmp/w$i" || exit 1
  RANDOM=$(( i * 7919 + $$ % 4096 ))
  while [ "$(now_us)" -lt "$deadline" ]; do
    slot=s$(( RANDOM % 5 + 1 ))
    op=$(( RANDOM % 7 ))
    case $op in
      0) run "$log" token "$slot" "$bin" token "$slot" ;;
      1) run "$log" git-credential s1 sh -c 'printf "protocol=https\nhost=example.test\n\n" | "$1" git-credential get' sh "$bin" ;;
      2) run "$log" exec "$slot" "$bin" exec --account "$slot" -- sh -c 'test -s "$CODEX_HOME/auth.json"' ;;
      3) run "$log" usage "$slot" "$bin" usage "$slot" --json ;;
      4) run "$log" status - "$bin" status --json ;;
      5) run "$log" switch "$slot" "$bin" switch "$slot" --json ;;
      6) if [ $pinned = 0 ]; then run "$log" pin "$slot" "$bin" pin "$slot" --json && pinned=1
         else run "$log" unpin - "$bin" unpin --json; pinned=0; fi ;;
    esac
  done
}

renamer() {
  local log=$tmp/logs/rename cur=r1 next
  while [ "$(now_us)" -lt "$deadline" ]; do
    if [ $cur = r1 ]; then next=r2; else next=r1; fi
    if run "$log" rename "$cur>$next" "$bin" rename "$cur" "$next" --json; then
      cur=$next
    else
      # Find out where it is now, so the loop goes on.
      next=$("$bin" list --names 2> /dev/null | grep -x 'r[12]' | head -1)
      [ -n "$next" ] && cur=$next
    fi
    run "$log" rtoken "$cur" "$bin" token "$cur"
    # A lost session (exit 4) is signed in again, so each later occurrence is counted too.
    [ "$last_status" = 4 ] && run "$log" rlogin "$cur" login_slot "$cur" "$log.login-err"
  done
}

relogger() {
  local log=$tmp/logs/relogin
  while [ "$(now_us)" -lt "$deadline" ]; do
    run "$log" logout x1 "$bin" logout x1 --json
    # Signed out it must stay (nobody else signs x1 in); a refresh in flight gets 0.3 s to land.
    sleep 0.3
    run "$log" xstatus x1 "$bin" status x1 --json
    run "$log" login x1 login_slot x1 "$log.login-err"
    run "$log" xtoken x1 "$bin" token x1
  done
}

declare -A loop_log
for i in $(seq 1 16); do worker "$i" & bg_pids="$bg_pids $!"; loop_log[$!]=$tmp/logs/w$i; done
renamer & bg_pids="$bg_pids $!"; loop_log[$!]=$tmp/logs/rename
relogger & bg_pids="$bg_pids $!"; loop_log[$!]=$tmp/logs/relogin
echo "soak: $secs s, 16 workers + rename + logout/login loops + agent, against $base ($bin)"

# descends_from PID ANCESTOR: whether ANCESTOR is PID or one of its parents (followed through
# /proc, at most 64 steps).
descends_from() {
  local p=$1 hops=0
  while [ -n "$p" ] && [ "$p" -gt 1 ] && [ $hops -lt 64 ]; do
    [ "$p" = "$2" ] && return 0
    p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status" 2> /dev/null)
    hops=$((hops + 1))
  done
  return 1
}

# show_hung_loop PID LOG: what a hung loop is waiting for: its last logged command, the stderr of
# the command it is in (and of a login's helper), the emulator's counts, the processes under it
# and, for each lanyard one, where its threads sleep, its open files and two seconds of its
# system calls.
show_hung_loop() {
  local p=$1 log=$2 c t
  echo "--- last logged: $(tail -1 "$log" 2> /dev/null)"
  for f in "$log.cur-err" "$log.login-err"; do [ -s "$f" ] && { echo "--- $(basename "$f"):"; tail -c 1500 "$f"; echo; }; done
  echo "--- emulator: $(curl -fsS --max-time 5 "$base/_test/stats" 2> /dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print({k: d[k] for k in ("usercodes_issued","approvals","device_polls","device_poll_results","code_exchanges","code_exchange_errors")})' 2> /dev/null || echo "its counts could not be read")"
  for c in /proc/[0-9]*; do
    c=${c#/proc/}
    [ "$c" != "$p" ] && descends_from "$c" "$p" || continue
    echo "--- process $c: $(tr '\0' ' ' < "/proc/$c/cmdline" 2> /dev/null)"
    case $(cat "/proc/$c/comm" 2> /dev/null) in lanyard*) ;; *) continue ;; esac
    for t in /proc/$c/task/*; do echo "  thread ${t##*/} $(cat "$t/comm" 2> /dev/null): $(cat "$t/wchan" 2> /dev/null)"; done
    ls -l "/proc/$c/fd" 2> /dev/null | sed -n 's/.* \([0-9]*\) -> /  fd \1 -> /p'
    timeout 2 strace -f -s 0 -p "$c" 2>&1 | head -40 | sed 's/^/  /'
  done
  grep -c . /proc/locks | sed 's/^/--- posix+flock locks held: /'
}

# Stop: the loops end by themselves after the deadline (each finishes its command); any still
# running lock_timeout s later is hung (killed, and reported).
hung=0
for p in $bg_pids; do
  while kill -0 "$p" 2>/dev/null; do
    if [ "$(now_us)" -gt $(( deadline + lock_timeout * 1000000 )) ]; then
      hung=$((hung + 1)); echo "soak: loop $p still running ${lock_timeout} s after the end" >&2
      show_hung_loop "$p" "${loop_log[$p]}" >&2
      pkill -TERM -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; break
    fi
    sleep 0.1
  done
  wait "$p" 2>/dev/null
done
bg_pids=""
end_us=$(now_us)
kill -TERM "$agent_pid" 2>/dev/null
t0=$(now_us); agent_status=""
while kill -0 "$agent_pid" 2>/dev/null; do
  if [ "$(now_us)" -gt $(( t0 + 15000000 )) ]; then echo "soak: the agent did not stop within 15 s of SIGTERM" >&2; kill -KILL "$agent_pid"; break; fi
  sleep 0.05
done
wait "$agent_pid"; agent_status=$?
printf 'agent - %d %d 0 -\n' "$agent_status" $(( $(now_us) - t0 )) > "$tmp/logs/agent"
agent_pid=""

# Processes of this run that are still alive, or zombies, after the stop: lanyard processes that
# descend from the subreaper (their environment is not readable: Lanyard makes itself undumpable).
# A refresh worker finishing a refresh is given 3 s.
scan_procs() {
  local p comm state
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    comm=$(cat "/proc/$p/comm" 2> /dev/null) || continue
    case $comm in lanyard*) ;; *) continue ;; esac
    descends_from "$p" "$SOAK_REAPER_PID" || continue
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$p/status" 2> /dev/null)
    if [ "$state" = Z ]; then
      echo "$p zombie $(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null)$comm"
    else
      echo "$p alive $(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null)"
    fi
  done
}
t0=$(now_us)
while leftovers=$(scan_procs); [ -n "$leftovers" ] && [ "$(now_us)" -lt $(( t0 + 3000000 )) ]; do sleep 0.1; done
printf '%s\n' "$leftovers" | grep . > "$tmp/leftover-procs.txt"
# Stop what is left (ours: descendants of this run's subreaper), after recording it.
for p in $(awk '$2 == "alive" {print $1}' "$tmp/leftover-procs.txt"); do kill "$p" 2> /dev/null; done
cp "$SOAK_ORPHANS_LOG" "$tmp/orphans-at-check.txt" 2> /dev/null

# Files: what the data, state and runtime folders hold now (before the checks below touch them).
( cd "$tmp" && find data state run -mindepth 1 | sort ) > "$tmp/files.txt"

# Checks with the agent stopped. Each final command is logged like the others.
final=$tmp/logs/final
run "$final" list - "$bin" list --json; printf '%s' "$out" > "$tmp/list.json"
for s in $(python3 -c 'import json,sys; print(" ".join(sorted(s["slot"] for s in json.load(open(sys.argv[1]))["slots"])))' "$tmp/list.json" 2> /dev/null); do
  run "$final" final-token "$s" "$bin" token "$s"
done
run "$final" doctor - "$bin" doctor --json; printf '%s' "$out" > "$tmp/doctor.json"
run "$final" events - "$bin" events --json; printf '%s\n' "$out" > "$tmp/events.jsonl"
curl -fsS "$base/_test/stats" > "$tmp/stats.json"

python3 scripts/soak/report.py "$tmp" "$secs" "$lock_timeout" "$hung" $(( (end_us - start_us) / 1000 ))
