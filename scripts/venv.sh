#!/bin/sh
# Creates or refreshes the Python virtualenv at <repo>/.venv used by the OAuth test servers
# (Tests/Fixtures/oauth). Idempotent and quiet: prints nothing when the venv is already up to date.
# pip runs only when Tests/Fixtures/oauth/requirements.txt (or the interpreter) changed since the
# last successful install; a stamp file inside .venv records the hash.
#   scripts/venv.sh            # then use .venv/bin/python
# Needs Debian's python3 and python3-venv (apt-get install python3-venv) and access to PyPI on
# the first run. Exits non-zero with a message on stderr when anything fails.
# Environment: LANYARD_VENV_PYTHON overrides the interpreter (default /usr/bin/python3).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
req="$root/Tests/Fixtures/oauth/requirements.txt"
py="${LANYARD_VENV_PYTHON:-/usr/bin/python3}"
stamp="$venv/.lanyard-requirements.stamp"

fail() {
  echo "venv.sh: $*" >&2
  exit 1
}

[ -f "$req" ] || fail "missing $req"
[ -x "$py" ] || fail "no Python interpreter at $py (on Debian: apt-get install python3 python3-venv)"
command -v sha256sum >/dev/null 2>&1 || fail "sha256sum not found (coreutils)"

pyver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) \
  || fail "$py does not run"
want=$( { cat "$req"; printf '\npython=%s %s\n' "$py" "$pyver"; } | sha256sum | cut -d' ' -f1)

# Fast path: stamp matches and the venv's interpreter runs. No lock, no output.
if [ -f "$stamp" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] \
   && "$venv/bin/python" -c '' >/dev/null 2>&1; then
  exit 0
fi

mkdir -p "$venv" || fail "cannot create $venv"
# Serialise concurrent callers (parallel test processes) while we build.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$venv/.lanyard-venv.lock" || fail "cannot open lock file in $venv"
  flock 9 || fail "cannot lock $venv"
  # Another caller may have finished the job while we waited.
  if [ -f "$stamp" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] \
     && "$venv/bin/python" -c '' >/dev/null 2>&1; then
    exit 0
  fi
fi

log=$(mktemp "${TMPDIR:-/tmp}/lanyard-venv.XXXXXX") || fail "mktemp failed"
trap 'rm -f "$log"' EXIT

run() {
  # run DESCRIPTION CMD...: run quietly; on failure show the captured output and stop.
  what=$1; shift
  if ! "$@" >"$log" 2>&1; then
    echo "venv.sh: $what failed:" >&2
    sed 's/^/  /' "$log" >&2
    exit 1
  fi
}

# (Re)create the venv when its interpreter is missing, broken, or not the one we want.
venv_ver=$("$venv/bin/python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true)
if [ "$venv_ver" != "$pyver" ]; then
  rm -f "$stamp"
  if [ -n "$venv_ver" ] || [ -e "$venv/bin" ]; then
    # Stale venv from another interpreter: rebuild from scratch, keeping our lock file.
    find "$venv" -mindepth 1 -maxdepth 1 ! -name .lanyard-venv.lock -exec rm -rf {} + \
      || fail "cannot clear stale $venv"
  fi
  run "creating the virtualenv ($py -m venv $venv; on Debian install python3-venv)" \
    "$py" -m venv "$venv"
fi

rm -f "$stamp"
run "pip install -r $req" \
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$req"
"$venv/bin/python" -c 'import authlib, flask, joserfc' >"$log" 2>&1 \
  || { echo "venv.sh: installed packages do not import:" >&2; sed 's/^/  /' "$log" >&2; exit 1; }
printf '%s\n' "$want" >"$stamp.tmp" && mv "$stamp.tmp" "$stamp" || fail "cannot write $stamp"
