#!/bin/sh
# `make demo`: Lanyard end to end against the bundled ChatGPT-protocol emulator, in a throwaway
# HOME. Two accounts sign in, one with the device-code flow and one through the browser (curl plays
# the browser), then list, switch, status, token, refresh and doctor. Narrated; nothing outside the temp folder changes.
set -eu
cd "$(dirname "$0")/.."
bin=$(swift build --show-bin-path)/lanyard
demo=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-demo.XXXXXX")
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  [ -f "$demo/etcd/env" ] && scripts/etcd-cluster.sh stop "$demo/etcd" >/dev/null 2>&1
  rm -rf "$demo"
}
trap cleanup EXIT INT TERM

export HOME="$demo/home" XDG_CONFIG_HOME="$demo/config" XDG_DATA_HOME="$demo/data" XDG_STATE_HOME="$demo/state" \
       XDG_RUNTIME_DIR="$demo/run"
mkdir -p "$HOME" "$XDG_CONFIG_HOME/lanyard" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
unset DBUS_SESSION_BUS_ADDRESS LANYARD_ACCOUNT   # no keyring here: `backend = auto` picks the file store
unset DISPLAY WAYLAND_DISPLAY   # the demo plays the browser itself: never open the real one at the emulator

bold=$(printf '\033[1m'); dim=$(printf '\033[2m'); off=$(printf '\033[0m')
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$off"; }
run() { printf '%s$ lanyard %s%s\n' "$dim" "$*" "$off"; "$bin" "$@"; }

say "Starting the ChatGPT-protocol emulator on 127.0.0.1 (a stand-in for auth.openai.com)"
.venv/bin/python Tests/Fixtures/oauth/chatgpt_emulator.py --port 0 --exit-with-parent --log-level WARNING > "$demo/server.out" &
server_pid=$!
while ! grep -q '^READY ' "$demo/server.out" 2>/dev/null; do
  kill -0 "$server_pid" 2>/dev/null || { echo "demo: the emulator did not start" >&2; exit 1; }
  sleep 0.1
done
base=$(sed -n 's/^READY //p' "$demo/server.out")
echo "emulator at $base"
cat > "$XDG_CONFIG_HOME/lanyard/config.ini" <<INI
[store]
backend = auto
[provider.openai]
issuer = $base
usage-base-url = $base
INI

say "No keyring on this machine, so the encrypted file store (age format) holds the tokens"
run store init --no-passphrase

# Signs one account in: lanyard login runs in the background; we read the code it shows and
# approve it on the emulator's page, as a person would in a browser.
sign_in() { # EMAIL PLAN [SLOT]
  email=$1 plan=$2; shift 2
  printf '%s$ lanyard login %s%s\n' "$dim" "$*" "$off"
  "$bin" login "$@" 2> "$demo/login.err" &
  login_pid=$!
  code=""
  while [ -z "$code" ]; do
    kill -0 "$login_pid" 2>/dev/null || { cat "$demo/login.err" >&2; exit 1; }
    code=$(sed -n 's/^    \([A-Z0-9-][A-Z0-9-]*\)$/\1/p' "$demo/login.err" 2>/dev/null | head -n 1)
    [ -n "$code" ] || sleep 0.1
  done
  sed -n '1,/^    [A-Z0-9-]*$/p' "$demo/login.err"
  printf '%s(approving %s as %s in the "browser")%s\n' "$dim" "$code" "$email" "$off"
  curl -fsS -o /dev/null -d "user_code=$code" -d "email=$email" -d "plan=$plan" "$base/codex/device"
  wait "$login_pid"
}

# Signs one account in through the browser, as Codex does: lanyard login --browser listens on
# localhost:1455 and prints the sign-in address; we "open" it with curl, sign in on the emulator's
# page, and curl follows the redirect back to lanyard's listener, which completes the sign-in.
sign_in_browser() { # EMAIL PLAN [SLOT]
  email=$1 plan=$2; shift 2
  printf '%s$ lanyard login --browser %s%s\n' "$dim" "$*" "$off"
  "$bin" login --browser "$@" < /dev/null 2> "$demo/login.err" &
  login_pid=$!
  url=""
  while [ -z "$url" ]; do
    kill -0 "$login_pid" 2>/dev/null || { cat "$demo/login.err" >&2; exit 1; }
    url=$(sed -n 's/^    \(http[^ ]*\/oauth\/authorize?[^ ]*\)$/\1/p' "$demo/login.err" 2>/dev/null | head -n 1)
    [ -n "$url" ] || sleep 0.1
  done
  cat "$demo/login.err"
  printf '%s(the "browser" opens that address, signs in as %s, and is sent back to lanyard on localhost:1455)%s\n' "$dim" "$email" "$off"
  curl -fsS -L -o /dev/null -d "email=$email" -d "plan=$plan" -d action=approve "$url"
  wait "$login_pid"
}

say "Sign in a personal account with a device code (the slot is named after the email)"
sign_in alice@home.example plus --device
say "Sign in a work account through the browser, into a slot called work"
sign_in_browser alice@corp.example team work

say "Every slot, without unlocking anything"
run list
run rename alice personal
run switch work
run status
say "Which account applies here, and why"
run which
LANYARD_ACCOUNT=personal "$bin" which
say "A script takes the token (shown cut short here)"
printf '%s$ lanyard token | cut -c1-24%s\n' "$dim" "$off"
"$bin" token | cut -c1-24
say "Usage windows of the work account (scripted on the emulator)"
account=$("$bin" status work --json | sed -n 's/.*"account_id": "\(.*\)".*/\1/p')
now=$(date +%s)
curl -fsS -o /dev/null -H 'Content-Type: application/json' -d "{\"account_id\":\"$account\",\"primary_window\":{\"used_percent\":42,\"limit_window_seconds\":18000,\"reset_at\":$((now+7830))},\"secondary_window\":{\"used_percent\":12,\"limit_window_seconds\":604800,\"reset_at\":$((now+400000))}}" "$base/_test/usage"
run usage work
say "Stream a reply as the work account: WebSocket first, then the same over server-sent events"
run ask --account work "Is this account working?"
run ask --account work --transport sse "And over SSE?"
say "Refresh now (rotating refresh tokens are never used twice)"
run refresh --all
run status personal --json
say "Health check"
run doctor

say "A second machine shares the work account through etcd (docs/fleet.md)"
echo "Starting a 3-member etcd cluster on 127.0.0.1 with TLS and client certificates (scripts/etcd-cluster.sh)"
scripts/etcd-cluster.sh start "$demo/etcd" >/dev/null
. "$demo/etcd/env"
fleet_config() { # MACHINE
  printf '[fleet]\nname = demo\nmachine = %s\nendpoints = %s\nca = %s\ncert = %s\nkey = %s\n' \
    "$1" "$LANYARD_TEST_ETCD_ENDPOINTS" "$LANYARD_TEST_ETCD_CA" "$LANYARD_TEST_ETCD_CERT" "$LANYARD_TEST_ETCD_KEY"
}
fleet_config laptop >> "$XDG_CONFIG_HOME/lanyard/config.ini"
run fleet init
fleet_fingerprint=$("$bin" fleet status --json | sed -n 's/^  "fingerprint": "\([0-9A-F-]*\)".*/\1/p')
run fleet share work
# The second machine: its own HOME and XDG folders, store and identity.
second() { env HOME="$demo/ci/home" XDG_CONFIG_HOME="$demo/ci/config" XDG_DATA_HOME="$demo/ci/data" \
  XDG_STATE_HOME="$demo/ci/state" XDG_RUNTIME_DIR="$demo/ci/run" "$bin" "$@"; }
mkdir -p "$demo/ci/home" "$demo/ci/config/lanyard" "$demo/ci/run" && chmod 700 "$demo/ci/run"
{ printf '[store]\nbackend = file\n[provider.openai]\nissuer = %s\nusage-base-url = %s\n' "$base" "$base"; fleet_config ci; } \
  > "$demo/ci/config/lanyard/config.ini"
on_ci() { printf '%s(ci)$ lanyard %s%s\n' "$dim" "$*" "$off"; second "$@"; }
second store init --no-passphrase >/dev/null 2>&1
on_ci fleet join --fleet-fingerprint "$fleet_fingerprint"
fingerprint=$(second fleet join --fleet-fingerprint "$fleet_fingerprint" --json | sed -n 's/.*"fingerprint": "\([0-9A-F-]*\)".*/\1/p')
run fleet approve ci --fingerprint "$fingerprint"
on_ci fleet sync
on_ci list
say "The laptop refreshes the shared slot once; the CI machine adopts the new tokens instead of refreshing again"
run refresh work
on_ci fleet sync
printf '%s$ lanyard token work | sha256sum | cut -c1-16   (laptop, then ci: the same token)%s\n' "$dim" "$off"
"$bin" token work | sha256sum | cut -c1-16
second token work | sha256sum | cut -c1-16
run fleet status
say "Done. Everything above lived in $demo, which is now removed."
