#!/bin/sh
# Runs a command inside a private D-Bus session with an unlocked gnome-keyring and throwaway
# HOME / XDG folders (DISPLAY and WAYLAND_DISPLAY unset, so no unlock prompt can appear), so tests
# never touch the user's real keyring.
# Fails (exit 97) when the keyring cannot start: tests that need it must not silently skip.
#   scripts/with-keyring.sh CMD [ARGS…]
set -eu
root=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-keyring.XXXXXX")
trap 'rm -rf "$root"' EXIT INT TERM
mkdir -p "$root/home" "$root/config" "$root/data" "$root/state" "$root/cache" "$root/runtime"
chmod 700 "$root/runtime"
export HOME="$root/home" XDG_CONFIG_HOME="$root/config" XDG_DATA_HOME="$root/data" \
       XDG_STATE_HOME="$root/state" XDG_CACHE_HOME="$root/cache" XDG_RUNTIME_DIR="$root/runtime"
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL SSH_AUTH_SOCK
export LANYARD_TEST_KEYRING=1 LANYARD_TEST_KEYRING_PASSWORD="lanyard-test-keyring"
. "$(dirname "$0")/lib/session-bus.sh"
session_bus_config "$root/bus.conf" "$root/runtime"
status=0
dbus-run-session --config-file="$root/bus.conf" -- sh -c '
  printf %s "$LANYARD_TEST_KEYRING_PASSWORD" | gnome-keyring-daemon --unlock --components=secrets --daemonize >/dev/null 2>&1
  if ! gdbus wait --session --timeout 10 org.freedesktop.secrets; then
    echo "with-keyring: gnome-keyring did not start on the private session bus" >&2; exit 97
  fi
  exec "$@"' with-keyring "$@" || status=$?
exit $status
