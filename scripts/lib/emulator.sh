# Shared by the benches and the soak scripts: a private home, the ChatGPT emulator, a file store
# and device-code sign-ins approved through the emulator's test hooks. Sourced (POSIX sh) from
# the repository root after `tmp` (a scratch folder) and `bin` (the lanyard binary) are set.

# emu_home: HOME and the XDG folders inside $tmp, and nothing of the caller's session.
emu_home() {
  export HOME="$tmp/home" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_RUNTIME_DIR="$tmp/run" \
         XDG_STATE_HOME="$tmp/state"
  mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME/lanyard" && chmod 700 "$XDG_RUNTIME_DIR"
  unset LANYARD_ACCOUNT LANYARD_PASSPHRASE_FILE LANYARD_ASKPASS
}

# emu_start [EMULATOR OPTION…]: starts the emulator on a free port; sets server_pid and base.
# Fails, showing the emulator's stderr, when it exits before its READY line.
emu_start() {
  .venv/bin/python Tests/Fixtures/oauth/chatgpt_emulator.py --port 0 --exit-with-parent --log-level WARNING "$@" \
    > "$tmp/server.out" 2> "$tmp/server.err" &
  server_pid=$!
  while ! grep -q '^READY ' "$tmp/server.out" 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || { echo "the emulator did not start:" >&2; cat "$tmp/server.err" >&2; return 1; }
    sleep 0.05
  done
  base=$(sed -n 's/^READY //p' "$tmp/server.out")
}

# post PATH JSON: a test hook of the emulator. A hook is idempotent, so a connection that fails
# (a loaded machine) is tried again; each try is bounded, so a caller never waits on it forever.
post() {
  curl -fsS --retry 3 --retry-all-errors --retry-delay 1 --max-time 10 -o /dev/null \
       -H 'Content-Type: application/json' -d "$2" "$base$1"
}

# emu_file_store [INI LINES]: config.ini with the file store, INI LINES (groups of their own, each
# line ending in \n) and openai pointed at the emulator; then an initialised store without passphrase.
emu_file_store() {
  printf '[store]\nbackend = file\n%b[provider.openai]\nissuer = %s\nusage-base-url = %s\n' "${1:-}" "$base" "$base" \
    > "$XDG_CONFIG_HOME/lanyard/config.ini"
  "$bin" store init --no-passphrase > /dev/null 2> "$tmp/store-init.err" \
    || { echo "store init failed:" >&2; cat "$tmp/store-init.err" >&2; return 1; }
}

# emu_login SLOT [ERRFILE [EMAIL]]: `lanyard login SLOT`, approved through the hook (as EMAIL when
# given); returns login's status. The code is read once the line after it ("Waiting for
# approval…") is there: reading earlier can catch half a code.
emu_login() {
  _slot=$1 _err=${2:-$tmp/login.$1.err} _email=${3:-}
  # Emptied here, not only by the redirection below: that one happens in the forked child, and
  # until it does, the loop below could read an earlier login's code from the same file.
  : > "$_err"
  "$bin" login "$_slot" > /dev/null 2> "$_err" &
  _lp=$! _code=""
  while ! { grep -q '^Waiting for approval' "$_err" 2>/dev/null &&
            _code=$(sed -n 's/^    \([A-Z0-9-][A-Z0-9-]*\)$/\1/p' "$_err" | grep .); }; do
    kill -0 "$_lp" 2>/dev/null || break
    sleep 0.02
  done
  if [ -n "$_code" ]; then
    post /_test/approve "{\"user_code\": \"$_code\"${_email:+, \"email\": \"$_email\"}}" 2>> "$_err" \
      || echo "emu_login: approving $_code failed" >> "$_err"
  fi
  wait "$_lp"
}
