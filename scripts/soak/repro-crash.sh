#!/usr/bin/env bash
# Deterministic reproductions of what scripts/soak/crash.sh finds: instead of a random SIGKILL,
# strace kills the process when it enters a chosen system call (-e inject=SYSCALL:signal=KILL:when=N),
# so the crash lands exactly between two durable writes. Each case prints what happened and exits
# 0 when the crash did no harm, 1 when it did.
#
#   scripts/soak/repro-crash.sh CASE          # LANYARD_BIN=path (default .build/debug/lanyard)
#
#   rename-stray     `rename r1 r2` killed after the copy to r2, before r1 is deleted (2nd link(2)):
#                    doctor reports r2 as unlisted; `doctor --repair` registers it as a second
#                    signed-in slot holding the same refresh token; refreshing r1 then r2 is
#                    refresh_token_reused and the server revokes the sign-in.
#   rename-both      `rename r1 r2` killed after r1 is deleted, before the registry is written (3rd
#                    link(2)): after `doctor --repair` the registry holds r1 (signed out) and r2.
#   migrate-stray    `store migrate --to secret-service m1` killed after the keyring copy, before
#                    the registry switches (1st link(2)); needs gnome-keyring (run under
#                    scripts/with-keyring.sh): `doctor --repair` exits 0 saying nothing is left,
#                    yet the next `doctor` reports the same unlisted item again.
#   recovery-temp    the refresh worker killed as it renames its recovery file into place (1st
#                    rename(2)): recovery/SLOT.json.XXXXXX stays (an age file now, a
#                    plaintext credential before), holding the only copy of the refresh token,
#                    which doctor never reported and nothing removed.
#   rename-recovery  the refresh worker killed after the recovery file, before the store (1st
#                    link(2)), then `rename a1 b1`: the rename moves the spent token, leaves
#                    recovery/a1.json behind, and `refresh b1` is refresh_token_reused.
#   logout-recovery  the same crash, then `logout a1`: the recovery file survives the logout and
#                    the next `doctor --repair` signs a1 back in.
# Needs: strace, curl, age, the venv (scripts/venv.sh).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
case=${1:-}
case $case in rename-stray | rename-both | migrate-stray | recovery-temp | rename-recovery | logout-recovery) ;;
  *) sed -n '2,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;; esac
if [ "$case" = migrate-stray ] && [ -z "${LANYARD_TEST_KEYRING:-}" ]; then exec scripts/with-keyring.sh "$0" "$@"; fi
command -v strace > /dev/null || { echo "repro-crash: needs strace" >&2; exit 1; }
bin=${LANYARD_BIN:-.build/debug/lanyard}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
. scripts/lib/emulator.sh
emu_home
[ "$case" = migrate-stray ] || unset DBUS_SESSION_BUS_ADDRESS
scripts/venv.sh || exit 1
emu_start || exit 1
emu_file_store || exit 1
post /_test/config '{"interval": 0}'
login() { emu_login "$1" "$tmp/login.err" "$1@repro.test" || { echo "login $1 failed" >&2; exit 1; }; }
# killed_at SYSCALL N CMD…: runs CMD, SIGKILLed (with its refresh worker: -f) on entering the Nth SYSCALL.
killed_at() {
  local sc=$1 n=$2; shift 2
  (strace -f -qq -o /dev/null -e trace="$sc" -e inject="$sc":signal=KILL:when="$n" "$@" > /dev/null 2>&1; exit $?) 2> /dev/null
  echo "  lanyard ${*:2} killed on entering $sc #$n: exit $?"
}
doctor() { "$bin" doctor "$@" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("  doctor'"${1:+ $1}"': problems", d["problems"], "repaired", d.get("repaired"))'; }
registry() { "$bin" list --json | python3 -c 'import json,sys; print("  registry:", [(s["slot"], s["state"]) for s in json.load(sys.stdin)["slots"]])'; }
reused() { curl -fsS "$base/_test/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["refresh_reused"])'; }
st() { "$bin" "$@" > /dev/null 2> "$tmp/err"; local s=$?; echo "  lanyard $*: exit $s $(head -c 160 "$tmp/err")"; return $s; }

harm=0
case $case in
  rename-stray | rename-both)
    login r1
    [ "$case" = rename-stray ] && n=2 || n=3
    killed_at link $n "$bin" rename r1 r2
    doctor; doctor --repair; registry
    names=$("$bin" list --names | grep -c '^r[12]$')
    [ "$names" = 1 ] || { echo "  HARM: the registry holds $names rename slots (a rename leaves one name)"; harm=1; }
    if [ "$case" = rename-stray ]; then
      st refresh r1; st refresh r2
      [ "$(reused)" = 0 ] || { echo "  HARM: server refresh_reused = $(reused): both slots held one refresh token"; harm=1; }
    fi ;;
  migrate-stray)
    login m1
    killed_at link 1 "$bin" store migrate --to secret-service m1
    doctor; doctor --repair; doctor; registry
    "$bin" doctor > /dev/null 2>&1 || { echo "  HARM: doctor --repair said it was done, the next doctor still finds a problem"; harm=1; } ;;
  recovery-temp)
    login a1
    killed_at rename 1 "$bin" refresh a1
    doctor --repair
    echo "  recovery folder: $(ls "$XDG_STATE_HOME/lanyard/recovery" | tr '\n' ' ')"
    for f in "$XDG_STATE_HOME"/lanyard/recovery/*.json.*; do
      [ -e "$f" ] || continue
      # An age file encrypted to the store's recipients (stock age opens it with the store's identity).
      if head -c 22 "$f" | grep -q '^age-encryption.org/v1$'; then
        age -d -i "$XDG_DATA_HOME/lanyard/identity.txt" "$f" | python3 -c 'import json,sys; print("  ", sys.argv[1].rsplit("/",1)[1], "(age) holds a credential with a refresh token:", bool(json.load(sys.stdin)["tokens"].get("refresh_token")))' "$f"
      else
        python3 -c 'import json,sys; print("  ", sys.argv[1].rsplit("/",1)[1], "(clear) holds a credential with a refresh token:", bool(json.load(open(sys.argv[1]))["tokens"].get("refresh_token")))' "$f"
      fi
      echo "  HARM: a credential stays in a temp file nobody reports or removes"; harm=1
    done ;;
  rename-recovery | logout-recovery)
    login a1
    killed_at link 1 "$bin" refresh a1
    echo "  recovery folder: $(ls "$XDG_STATE_HOME/lanyard/recovery" | tr '\n' ' ')"
    if [ "$case" = rename-recovery ]; then
      st rename a1 b1
      echo "  recovery folder: $(ls "$XDG_STATE_HOME/lanyard/recovery" | tr '\n' ' ')"
      st refresh b1 || { echo "  HARM: the renamed slot holds the spent refresh token (server refresh_reused = $(reused))"; harm=1; }
    else
      st logout a1; st status a1
      doctor --repair
      st status a1 && { echo "  HARM: a1 is signed in again after its logout"; harm=1; }
    fi ;;
esac
exit $harm
