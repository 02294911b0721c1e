#!/usr/bin/env bash
# Disk faults at every write: each operation runs under strace, which makes its Nth call of a
# system call fail (-e inject=SYSCALL:error=CODE:when=N, in every process and thread it starts)
# for N = 1, 2, … until the operation no longer makes an Nth call: ENOSPC for write(2) and link(2),
# EIO for fsync(2) and rename(2). After each run:
#   the operation exited with a status (an error or success), never by a signal (a trap or crash),
#   and its stderr holds no token;
#   `doctor --repair` then `doctor` are clean, and `list` shows every slot;
#   every slot still gives a token, and the emulator never saw a refresh token used twice.
# The operations: refresh (recovery file, store, registry, event log), switch (registry), rename
# (store and registry), and a sign-out and sign-in of a third slot.
#
#   scripts/soak/io-faults.sh [MAX_N]    # LANYARD_BIN=path (default .build/debug/lanyard); MAX_N 40
# Needs: strace, curl, the venv (scripts/venv.sh). Prints one line per operation and system call
# and a summary; exits 1 when an invariant fails.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
max=${1:-40}
command -v strace > /dev/null || { echo "io-faults: needs strace" >&2; exit 1; }
bin=${LANYARD_BIN:-.build/debug/lanyard}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
. scripts/lib/emulator.sh
emu_home
unset DBUS_SESSION_BUS_ADDRESS
scripts/venv.sh > /dev/null || exit 1
emu_start || exit 1
emu_file_store || exit 1
post /_test/config '{"interval": 0}'
for s in a1 a2 c1; do emu_login "$s" "$tmp/login.err" "$s@faults.test" || { echo "io-faults: login $s failed" >&2; cat "$tmp/login.err" >&2; exit 1; }; done

failures=0 runs=0 injected_runs=0
fail() { echo "  FAIL ($1, $2 #$3): $4"; failures=$((failures + 1)); }
reused() { curl -fsS "$base/_test/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["refresh_reused"])'; }

# The slot names now (rename moves a2 <-> b2).
other=a2
op_command() { # OP: the command line for this run
  case $1 in
    refresh) echo "refresh a1" ;;
    switch) [ "$("$bin" which 2> /dev/null)" = a1 ] && echo "switch $other" || echo "switch a1" ;;
    rename) [ "$other" = a2 ] && echo "rename a2 b2" || echo "rename b2 a2" ;;
    logout) echo "logout c1" ;;
  esac
}

# check OP SYSCALL N STATUS: the invariants after one injected run.
check() {
  local op=$1 sc=$2 n=$3 status=$4
  [ "$status" -lt 128 ] || fail "$op" "$sc" "$n" "exited by signal $((status - 128)): $(head -c 300 "$tmp/err")"
  if grep -Eq 'eyJ[A-Za-z0-9_-]{10,}|rt_[A-Za-z0-9_-]{8,}' "$tmp/err"; then fail "$op" "$sc" "$n" "a token in stderr"; fi
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
  [ "$(reused)" = 0 ] || fail "$op" "$sc" "$n" "the server saw a refresh token used twice"
  # The third slot: signed out by the logout case (or by nothing); sign it in again for the next run.
  if [ "$op" = logout ]; then
    if ! "$bin" token c1 > /dev/null 2>&1; then
      emu_login c1 "$tmp/login.err" c1@faults.test > /dev/null 2>&1 || fail "$op" "$sc" "$n" "signing c1 in again: $(head -c 300 "$tmp/login.err")"
    fi
  fi
}

for op in refresh switch rename logout; do
  for spec in write:ENOSPC fsync:EIO rename:EIO link:ENOSPC; do
    sc=${spec%%:*} code=${spec##*:}
    n=1 hits=0
    while [ "$n" -le "$max" ]; do
      cmd=$(op_command "$op")
      # shellcheck disable=SC2086
      strace -f -qq -o "$tmp/trace" -e trace="$sc" -e inject="$sc":error="$code":when="$n" "$bin" $cmd > /dev/null 2> "$tmp/err"
      status=$?
      runs=$((runs + 1))
      if ! grep -q 'INJECTED' "$tmp/trace"; then break; fi   # no Nth call: every one was failed once
      injected_runs=$((injected_runs + 1)); hits=$((hits + 1))
      check "$op" "$sc" "$n" "$status"
      n=$((n + 1))
    done
    printf '%-8s %-7s %-7s failed at each of %2d calls\n' "$op" "$sc" "$code" "$hits"
  done
done
echo "runs: $runs, with an injected fault: $injected_runs, invariant failures: $failures"
[ "$failures" = 0 ]
