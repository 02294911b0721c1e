#!/usr/bin/env bash
# Disk faults at every write: each operation runs with its Nth call of a system call failing, for
# N = 1, 2, … until the operation no longer makes an Nth call, in every process it starts:
#   write(2) to a file under the data and state folders: ENOSPC (Tests/Fixtures/faults/write-fault.c,
#     loaded with LD_PRELOAD: only file writes fail, as on a full disk, never pipes or wake-ups);
#   fsync(2), rename(2): EIO; link(2): ENOSPC (strace -e inject=SYSCALL:error=CODE:when=N).
#   IO_FAULTS="write:ENOSPC openat:ENOSPC …" picks others: openat:ENOSPC also fails opens for
#   reading and the dynamic loader's, which no full disk does (a run of it once crashed lanyard-net
#   with a trap that did not recur in 50 more runs; see docs/reliability.md).
# After each run:
#   the operation ended within 30 s with a status (an error or success), never by a signal (a
#   trap or crash), and its stderr holds no token;
#   `doctor --repair` then `doctor` are clean, and `list` shows every slot;
#   every slot still gives a token, a refresh of a1 with the refresh token it holds succeeds, and
#   the emulator never saw a refresh token used twice.
# The operations: refresh (recovery file, store, registry, event log), switch (registry), rename
# (store and registry), a sign-out of a third slot (signed in again after each run), a sign-in
# over that slot (approved through the emulator while it waits), and `agent --once` with every
# slot due (a config whose lead covers every token's lifetime).
#
#   scripts/soak/io-faults.sh [MAX_N]    # LANYARD_BIN=path (default .build/debug/lanyard); MAX_N 40
#                                         # IO_FAULT_OPS="login agent" runs only those operations
#                                         # IO_FAULTS_KEEP=DIR keeps the stderr of each failure
# Needs: strace, a C compiler, curl, the venv (scripts/venv.sh). Prints one line per operation and
# fault and a summary; exits 1 when an invariant fails.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
max=${1:-40}
command -v strace > /dev/null || { echo "io-faults: needs strace" >&2; exit 1; }
cc=$(command -v "${CC:-cc}" || command -v clang) || { echo "io-faults: needs a C compiler" >&2; exit 1; }
bin=${LANYARD_BIN:-.build/debug/lanyard}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d); base_tmp=$tmp
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$base_tmp"' EXIT
"$cc" -shared -fPIC -O2 -Wall -o "$tmp/write-fault.so" Tests/Fixtures/faults/write-fault.c -ldl || exit 1
. scripts/lib/emulator.sh
scripts/venv.sh > /dev/null || exit 1
tmp=$base_tmp/emulator; mkdir -p "$tmp"
emu_start || exit 1
post /_test/config '{"interval": 0}'
# fresh_home: a new home with a file store and three signed-in slots (after a failure, so each
# fault is judged on its own and not on what an earlier one broke).
homes=0
fresh_home() {
  homes=$((homes + 1))
  tmp=$base_tmp/home$homes; mkdir -p "$tmp"
  emu_home
  unset DBUS_SESSION_BUS_ADDRESS
  emu_file_store || exit 1
  for s in a1 a2 c1; do
    emu_login "$s" "$tmp/login.err" "$s@faults.test" || { echo "io-faults: login $s failed" >&2; cat "$tmp/login.err" >&2; exit 1; }
  done
  other=a2
  # The agent's config: every slot due.
  mkdir -p "$tmp/config-due/lanyard"
  { cat "$XDG_CONFIG_HOME/lanyard/config.ini"; printf '[refresh]\nlead = 100000000\nlead-share = 1\n[agent]\nnotify = false\njitter = 0\n'; } \
    > "$tmp/config-due/lanyard/config.ini"
}

# approve_login ERRFILE: approves the code a `login` prints into ERRFILE (in the background, while
# the faulted login runs; gives up after 30 s or when the login ends without one).
approve_login() {
  local code="" i=0
  while [ $i -lt 1500 ]; do
    if grep -q '^Waiting for approval' "$1" 2> /dev/null && code=$(sed -n 's/^    \([A-Z0-9-][A-Z0-9-]*\)$/\1/p' "$1" | grep .); then
      post /_test/approve "{\"user_code\": \"$code\", \"email\": \"c1@faults.test\"}" > /dev/null 2>&1
      return
    fi
    sleep 0.02; i=$((i + 1))
  done
}
fresh_home

failures=0 runs=0 injected_runs=0 failed_now=0
fail() {
  echo "  FAIL ($1, $2 #$3$where): $4"
  [ "$failed_now" = 1 ] || echo "    $1 said (exit $status): $(tr '\n' ' ' < "$base_tmp/err" | head -c 400)"
  # The whole of it (a crash report is long) for the log: IO_FAULTS_KEEP=DIR.
  [ -n "${IO_FAULTS_KEEP:-}" ] && cp "$base_tmp/err" "$IO_FAULTS_KEEP/$1-$2-$3.err"
  failures=$((failures + 1)); failed_now=1
}
reused() { curl -fsS "$base/_test/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["refresh_reused"])'; }

# The second slot's name now (rename moves a2 <-> b2).
op_command() { # OP: the command line for this run
  case $1 in
    refresh) echo "$bin refresh a1" ;;
    switch) [ "$("$bin" which 2> /dev/null | cut -d" " -f1)" = a1 ] && echo "$bin switch $other" || echo "$bin switch a1" ;;
    rename) [ "$other" = a2 ] && echo "$bin rename a2 b2" || echo "$bin rename b2 a2" ;;
    logout) echo "$bin logout c1" ;;
    login) echo "$bin login c1" ;;
    agent) echo "env XDG_CONFIG_HOME=$tmp/config-due $bin agent --once" ;;
  esac
}

# check OP SYSCALL N STATUS: the invariants after one injected run.
check() {
  local op=$1 sc=$2 n=$3 status=$4
  [ "$status" -lt 128 ] || fail "$op" "$sc" "$n" "exited by signal $((status - 128)): $(head -c 300 "$base_tmp/err")"
  if grep -Eq 'eyJ[A-Za-z0-9_-]{10,}|rt_[A-Za-z0-9_-]{8,}' "$base_tmp/err"; then fail "$op" "$sc" "$n" "a token in stderr"; fi
  "$bin" doctor --repair > "$tmp/repair" 2>&1
  "$bin" doctor > "$tmp/doctor" 2>&1 || fail "$op" "$sc" "$n" "doctor after --repair: $(grep -m3 problem "$tmp/doctor" | tr '\n' ' ') (repair said: $(head -c 300 "$tmp/repair"))"
  # Where the rename got to decides the name of the second slot.
  if "$bin" list --names > "$tmp/names" 2> "$tmp/list.err"; then
    if grep -qx b2 "$tmp/names"; then other=b2; else other=a2; fi
    for s in a1 "$other"; do grep -qx "$s" "$tmp/names" || fail "$op" "$sc" "$n" "list lost $s: $(tr '\n' ' ' < "$tmp/names")"; done
  else
    fail "$op" "$sc" "$n" "list: $(head -c 300 "$tmp/list.err")"
  fi
  for s in a1 "$other"; do
    "$bin" token "$s" > /dev/null 2> "$tmp/token.err" || fail "$op" "$sc" "$n" "token $s: $(head -c 300 "$tmp/token.err")"
  done
  # The refresh token a1 holds now is the live one: a refresh with it succeeds.
  "$bin" refresh a1 > /dev/null 2> "$tmp/refresh.err" || fail "$op" "$sc" "$n" "refresh a1 afterwards: $(head -c 300 "$tmp/refresh.err")"
  [ "$(reused)" = "$reused_before" ] || fail "$op" "$sc" "$n" "the server saw a refresh token used twice"
  # The third slot: signed out by the logout case, or left signed out or half signed in by a
  # failed login (or by nothing); sign it in again for the next run.
  if [ "$op" = logout ] || [ "$op" = login ]; then
    if ! "$bin" token c1 > /dev/null 2>&1; then
      emu_login c1 "$tmp/login.err" c1@faults.test > /dev/null 2>&1 || fail "$op" "$sc" "$n" "signing c1 in again: $(head -c 300 "$tmp/login.err")"
    fi
  fi
}

# run_faulted SPEC N CMD…: CMD with the Nth call of SPEC's system call failing; sets status, and
# injected (1 when a call was failed).
run_faulted() {
  local spec=$1 n=$2; shift 2
  local sc=${spec%%:*} code=${spec##*:}
  rm -f "$tmp/faults"
  where=""
  if [ "$sc" = write ]; then
    LD_PRELOAD="$base_tmp/write-fault.so" LANYARD_FAULT_DIR="$tmp/" LANYARD_FAULT_WHEN="$n" LANYARD_FAULT_LOG="$tmp/faults" \
      timeout -k 5 30 "$@" > /dev/null 2> "$base_tmp/err"
    status=$?
    [ -s "$tmp/faults" ] && injected=1 || injected=0
    [ "$injected" = 1 ] && where=": $(awk '{print $4 " (pid " $1 ")"}' "$tmp/faults" | tr '\n' ' ' | sed 's/ $//')"
  else
    timeout -k 5 30 strace -f -qq -o "$tmp/trace" -e trace="$sc" -e inject="$sc":error="$code":when="$n" "$@" > /dev/null 2> "$base_tmp/err"
    status=$?
    grep -q 'INJECTED' "$tmp/trace" && injected=1 || injected=0
  fi
}

for op in ${IO_FAULT_OPS:-refresh switch rename logout login agent}; do
  for spec in ${IO_FAULTS:-write:ENOSPC fsync:EIO rename:EIO link:ENOSPC}; do
    n=1 hits=0
    while [ "$n" -le "$max" ]; do
      cmd=$(op_command "$op")
      reused_before=$(reused) failed_now=0
      # shellcheck disable=SC2086
      [ -n "${IOF_DEBUG:-}" ] && echo "    run: $cmd ($spec #$n)"
      approver=""
      if [ "$op" = login ]; then rm -f "$base_tmp/err"; approve_login "$base_tmp/err" & approver=$!; fi
      # shellcheck disable=SC2086
      run_faulted "$spec" "$n" $cmd
      [ -n "$approver" ] && { kill "$approver" 2> /dev/null; wait "$approver" 2> /dev/null; }
      runs=$((runs + 1))
      # The run went through unharmed (no Nth call: every one was failed once): a rename took place.
      if [ "$injected" = 0 ]; then
        if "$bin" list --names 2> /dev/null | grep -qx b2; then other=b2; else other=a2; fi
        if { [ "$op" = logout ] || [ "$op" = login ]; } && ! "$bin" token c1 > /dev/null 2>&1; then emu_login c1 "$tmp/login.err" c1@faults.test > /dev/null 2>&1; fi
        break
      fi
      injected_runs=$((injected_runs + 1)); hits=$((hits + 1))
      [ "$status" = 124 ] || [ "$status" = 137 ] && fail "$op" "${spec%%:*}" "$n" "did not finish within 30 s"
      check "$op" "${spec%%:*}" "$n" "$status"
      [ "$failed_now" = 0 ] || fresh_home
      n=$((n + 1))
    done
    printf '%-8s %-7s failed at each of %2d calls%s\n' "$op" "$spec" "$hits" "$([ "$n" -gt "$max" ] && echo " (stopped at $max)")"
  done
done
echo "runs: $runs, with an injected fault: $injected_runs, invariant failures: $failures (homes: $homes)"
[ "$failures" = 0 ]
