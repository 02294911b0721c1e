#!/bin/sh
# Runs a command inside a private D-Bus session whose Secret Service is KeePassXC (its "FdoSecrets"
# integration), headless, with a throwaway unlocked database and throwaway HOME / XDG folders, so
# tests never touch the user's real keyring or password manager: the KeePassXC twin of
# scripts/with-keyring.sh. Fails (exit 97) when KeePassXC cannot serve secrets: tests that need it
# must not silently skip.
#   scripts/with-keepassxc.sh CMD [ARGS…]
# The command sees LANYARD_TEST_KEYRING=1, LANYARD_TEST_KEYRING_PROVIDER=keepassxc,
# LANYARD_TEST_KEYRING_PASSWORD (the database password), LANYARD_TEST_KEYRING_COLLECTION (the
# collection's object path: KeePassXC names it after the .kdbx file) and LANYARD_TEST_KEEPASSXC_DB.
# Headless, never run the prompt of Secret Service Unlock (nor of a CreateItem into a locked
# collection): KeePassXC 2.7.4 answers it with an invisible dialog that never closes and then
# refuses to lock again. Lock = Service.Lock and then Prompt.Prompt on the prompt it returns;
# unlock through KeePassXC's own interface instead:
#   org.keepassxc.KeePassXC.MainWindow /keepassxc openDatabase(s DB, s PASSWORD)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
fixture="$here/Tests/Fixtures/keepassxc/lanyard.xml"
for tool in keepassxc keepassxc-cli secret-tool gdbus dbus-run-session timeout; do
  command -v "$tool" >/dev/null 2>&1 || { echo "with-keepassxc: $tool is not installed (scripts/deps.sh)" >&2; exit 97; }
done
root=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-keepassxc.XXXXXX")
# On Ctrl-C the session can end before KeePassXC has: make sure it is gone (it writes into $root
# as it quits), then remove everything.
cleanup() {
  pid=$(cat "$root/keepassxc.pid" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    i=0
    while [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = keepassxc ] &&
          ! grep -q '^[0-9]* ([^)]*) Z' /proc/"$pid"/stat 2>/dev/null && [ $i -lt 40 ]; do
      sleep 0.1; i=$((i + 1))
    done
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" != keepassxc ] || kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$root"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$root/home" "$root/config/keepassxc" "$root/data" "$root/state" "$root/cache" "$root/runtime" "$root/tmp"
chmod 700 "$root/runtime" "$root/tmp"
export HOME="$root/home" XDG_CONFIG_HOME="$root/config" XDG_DATA_HOME="$root/data" \
       XDG_STATE_HOME="$root/state" XDG_CACHE_HOME="$root/cache" XDG_RUNTIME_DIR="$root/runtime"
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL SSH_AUTH_SOCK \
      KPXC_CONFIG KPXC_CONFIG_LOCAL SECRET_SERVICE_BUS_NAME
export LANYARD_TEST_KEYRING=1 LANYARD_TEST_KEYRING_PROVIDER=keepassxc \
       LANYARD_TEST_KEYRING_PASSWORD="lanyard-test-keepassxc" \
       LANYARD_TEST_KEYRING_COLLECTION=/org/freedesktop/secrets/collection/lanyard \
       LANYARD_TEST_KEEPASSXC_DB="$root/lanyard.kdbx"
# Settings as KeePassXC 2.7 names them (src/core/Config.cpp). Secret Service on, without
# notifications or confirmation dialogs; UnlockBeforeSearch=false, or a search while the database
# is locked blocks in an unlock dialog nobody can see. SingleInstance=false so that a real
# KeePassXC of the same user is never handed our database. Nothing locks by itself or goes online.
cat >"$root/config/keepassxc/keepassxc.ini" <<'EOF'
[General]
ConfigVersion=2
SingleInstance=false
RememberLastDatabases=false
RememberLastKeyFiles=false
OpenPreviousDatabasesOnStartup=false
UpdateCheckMessageShown=true
BackupBeforeSave=false
AutoSaveAfterEveryChange=false
AutoSaveOnExit=true

[GUI]
CheckForUpdates=false
ShowTrayIcon=false
MinimizeOnStartup=false
ShowExpiredEntriesOnDatabaseUnlock=false

[Security]
LockDatabaseIdle=false
LockDatabaseScreenLock=false
LockDatabaseMinimize=false
QuickUnlock=false

[Browser]
Enabled=false

[SSHAgent]
Enabled=false

[FdoSecrets]
Enabled=true
ShowNotification=false
ConfirmAccessItem=false
ConfirmDeleteItem=false
UnlockBeforeSearch=false
EOF
# The database, from KeePass XML whose metadata exposes its root group to Secret Service
# (FDO_SECRETS_EXPOSED_GROUP). The file name gives the collection its object path.
if ! printf '%s\n%s\n' "$LANYARD_TEST_KEYRING_PASSWORD" "$LANYARD_TEST_KEYRING_PASSWORD" |
     keepassxc-cli import -q -p "$fixture" "$LANYARD_TEST_KEEPASSXC_DB" >"$root/import.log" 2>&1; then
  echo "with-keepassxc: keepassxc-cli import of $fixture failed:" >&2; cat "$root/import.log" >&2; exit 97
fi
# The private session bus starts no services on demand: otherwise the first call to
# org.freedesktop.secrets, if it comes before KeePassXC owns the name, starts gnome-keyring.
mkdir "$root/dbus-services"
. "$(dirname "$0")/lib/session-bus.sh"
session_bus_config "$root/bus.conf" "$root/runtime" "$root/dbus-services"
status=0
export LANYARD_SCRIPTS_LIB="$here/scripts/lib"
dbus-run-session --config-file="$root/bus.conf" -- sh -c '
  log="$1"; shift
  fail() { echo "with-keepassxc: $*" >&2; sed "s/^/  keepassxc: /" "$log" >&2; exit 97; }
  printf "%s\n" "$LANYARD_TEST_KEYRING_PASSWORD" |
    TMPDIR="$(dirname "$log")/tmp" QT_QPA_PLATFORM=offscreen \
    keepassxc --pw-stdin "$LANYARD_TEST_KEEPASSXC_DB" >/dev/null 2>"$log" &
  kp=$!
  echo $kp >"$(dirname "$log")/keepassxc.pid"
  # Stop KeePassXC whatever happens (dbus-run-session would only take the bus away from it).
  # 2.7.4 ignores a SIGTERM that comes while it saves or while one of its dialogs is open, and
  # every SIGTERM after that one: SIGKILL after 3 s. The database is throwaway.
  running() { read -r _ _ state _ 2>/dev/null </proc/$kp/stat && [ "$state" != Z ]; }
  stop() {
    kill $kp 2>/dev/null || return 0
    i=0; while running && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 $kp 2>/dev/null; wait $kp 2>/dev/null
  }
  trap stop EXIT
  trap "exit 130" INT
  trap "exit 143" TERM
  coll="$LANYARD_TEST_KEYRING_COLLECTION"
  svc="--session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets"
  # Up to 10 s for the name, then the collection (registered locked while the database opens),
  # then its unlocking.
  listed() {
    gdbus call $svc --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Service Collections \
      2>/dev/null | grep -q "$coll"
  }
  unlocked() {
    gdbus call --session --dest org.freedesktop.secrets --object-path "$coll" \
      --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked 2>/dev/null | grep -q false
  }
  i=0
  until listed && unlocked; do
    running || fail "KeePassXC exited while starting"
    i=$((i + 1))
    if [ $i -ge 100 ]; then
      gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
          --method org.freedesktop.DBus.NameHasOwner org.freedesktop.secrets 2>/dev/null | grep -q true ||
        fail "KeePassXC did not start Secret Service on the private session bus"
      listed || fail "KeePassXC offers no collection $coll (is a group of the database exposed?)"
      fail "the collection $coll stays locked: KeePassXC did not open the database with its password"
    fi
    sleep 0.1
  done
  # Clients that store into the "default" alias need one. KeePassXC 2.7.4 points it at the active
  # database by itself; set it only if that ever changes.
  if ! gdbus call $svc --method org.freedesktop.Secret.Service.ReadAlias default 2>/dev/null | grep -q "$coll"; then
    gdbus call $svc --method org.freedesktop.Secret.Service.SetAlias default "$coll" >/dev/null 2>>"$log" ||
      fail "cannot point the default alias at $coll"
  fi
  # Usable: a probe item stored into the default alias, read back and deleted.
  . "$LANYARD_SCRIPTS_LIB/secret-service-probe.sh"
  probe_secret_service
  "$@"' with-keepassxc "$root/keepassxc.log" "$@" || status=$?
exit $status
