#!/bin/sh
# Runs a command inside a private D-Bus session whose Secret Service is KWallet (kwalletd5 and its
# org.freedesktop.secrets API, KF5 ≥ 5.97), headless, with a throwaway wallet opened without a
# dialog and throwaway HOME / XDG folders, so tests never touch the user's real keyring or wallet:
# the KWallet twin of scripts/with-keyring.sh and scripts/with-keepassxc.sh. Fails (exit 97) when
# KWallet cannot serve secrets: tests that need it must not silently skip.
#   scripts/with-kwallet.sh CMD [ARGS…]
# The command sees LANYARD_TEST_KEYRING=1, LANYARD_TEST_KEYRING_PROVIDER=kwallet,
# LANYARD_TEST_KEYRING_PASSWORD (the wallet password), LANYARD_TEST_KEYRING_COLLECTION (the
# collection's object path: KWallet names it after the wallet), LANYARD_TEST_KWALLET_WALLET (the
# wallet's name) and LANYARD_TEST_KWALLET_OPEN (the helper that opens the wallet again after a
# lock: `/usr/bin/python3 "$LANYARD_TEST_KWALLET_OPEN" WALLET COLLECTION`, the password on stdin).
# Headless, never run the prompt of a Secret Service Unlock while the wallet is closed (nor of a
# CreateCollection): kwalletd5 answers it with a password dialog nobody can see, and the prompt
# never completes. Lock = Service.Lock (it closes the wallet, no prompt); unlock = pamOpen with
# the derived key, then the Unlock prompt, which finds the wallet open (scripts/lib/kwallet-open.py).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
for tool in kwalletd5 secret-tool gdbus dbus-run-session timeout; do
  command -v "$tool" >/dev/null 2>&1 || { echo "with-kwallet: $tool is not installed (scripts/deps.sh)" >&2; exit 97; }
done
/usr/bin/python3 -c 'import dbus' 2>/dev/null || { echo "with-kwallet: python3-dbus is not installed (scripts/deps.sh)" >&2; exit 97; }
# The Diffie-Hellman session libsecret asks for needs QCA's OpenSSL plugin; without it kwalletd5
# answers OpenSession with "createDLGroup failed".
ls /usr/lib/*/qca-qt5/crypto/libqca-ossl.so >/dev/null 2>&1 ||
  { echo "with-kwallet: QCA's OpenSSL plugin is not installed (libqca-qt5-2-plugins, scripts/deps.sh)" >&2; exit 97; }
umask 077
root=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-kwallet.XXXXXX")
cleanup() {
  pid=$(cat "$root/kwalletd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = kwalletd5 ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$root"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$root/home" "$root/config" "$root/data/kwalletd" "$root/state" "$root/cache" "$root/runtime" "$root/tmp"
export HOME="$root/home" XDG_CONFIG_HOME="$root/config" XDG_DATA_HOME="$root/data" \
       XDG_STATE_HOME="$root/state" XDG_CACHE_HOME="$root/cache" XDG_RUNTIME_DIR="$root/runtime"
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL SSH_AUTH_SOCK \
      SECRET_SERVICE_BUS_NAME PAM_KWALLET5_LOGIN KDE_FULL_SESSION
export LANYARD_TEST_KEYRING=1 LANYARD_TEST_KEYRING_PROVIDER=kwallet \
       LANYARD_TEST_KEYRING_PASSWORD="lanyard-test-kwallet" \
       LANYARD_TEST_KEYRING_COLLECTION=/org/freedesktop/secrets/collection/lanyard \
       LANYARD_TEST_KWALLET_WALLET=lanyard LANYARD_TEST_KWALLET_OPEN="$here/scripts/lib/kwallet-open.py"
# Settings as kwalletd5 reads them (KWalletD::reconfigure and the KWalletD and
# KWalletFreedesktopService constructors, KF5 5.103): the wallet subsystem and the Secret Service
# API on ("apiEnabled", on by default, said anyway); no first-use wizard; the wallet "lanyard" is
# both the local wallet and the default one, so the Secret Service "default" alias names it;
# nothing closes it by itself (idle, screensaver, last application gone); no prompt when an
# application opens the already open wallet, and no wallet manager started.
cat >"$root/config/kwalletrc" <<'EOF'
[Wallet]
Enabled=true
First Use=false
Default Wallet=lanyard
Local Wallet=lanyard
Use One Wallet=true
Close When Idle=false
Close on Screensaver=false
Leave Open=true
Prompt on Open=false
Launch Manager=false

[org.freedesktop.secrets]
apiEnabled=true
EOF
# The salt kwalletd would make for a new wallet (Backend::createAndSaveSalt: 56 random bytes,
# 0600): the key derived from it and the password is what pamOpen takes.
head -c 56 /dev/urandom >"$root/data/kwalletd/lanyard.salt"
# The private session bus starts no services on demand: otherwise the first call to
# org.freedesktop.secrets, if it comes before kwalletd5 owns the name, starts gnome-keyring.
mkdir "$root/dbus-services"
. "$(dirname "$0")/lib/session-bus.sh"
session_bus_config "$root/bus.conf" "$root/runtime" "$root/dbus-services"
status=0
export LANYARD_SCRIPTS_LIB="$here/scripts/lib"
dbus-run-session --config-file="$root/bus.conf" -- sh -c '
  log="$1"; shift
  dir=$(dirname "$log")
  fail() { echo "with-kwallet: $*" >&2; sed "s/^/  log: /" "$log" >&2; exit 97; }
  kw=""
  running() { [ -n "$kw" ] && read -r _ _ state _ 2>/dev/null </proc/$kw/stat && [ "$state" != Z ]; }
  stop() {
    [ -n "$kw" ] || return 0
    kill $kw 2>/dev/null || return 0
    i=0; while running && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 $kw 2>/dev/null; wait $kw 2>/dev/null; kw=""
  }
  trap stop EXIT
  trap "exit 130" INT
  trap "exit 143" TERM
  owned() {
    gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
      --method org.freedesktop.DBus.NameHasOwner "$1" 2>/dev/null | grep -q true
  }
  # start: kwalletd5, and up to 10 s for it to own both its names.
  start() {
    TMPDIR="$dir/tmp" QT_QPA_PLATFORM=offscreen kwalletd5 >/dev/null 2>>"$log" &
    kw=$!
    echo $kw >"$dir/kwalletd.pid"
    i=0
    until owned org.kde.kwalletd5 && owned org.freedesktop.secrets; do
      running || fail "kwalletd5 exited while starting"
      i=$((i + 1))
      [ $i -lt 100 ] || fail "kwalletd5 did not take org.kde.kwalletd5 and org.freedesktop.secrets on the private session bus"
      sleep 0.1
    done
  }
  wallet="$LANYARD_TEST_KWALLET_WALLET"
  coll="$LANYARD_TEST_KEYRING_COLLECTION"
  open="$LANYARD_TEST_KWALLET_OPEN"
  # Two starts: kwalletd5 makes the collections of the wallets it finds when it starts, and one
  # that pamOpen creates later gets none until the next start (pamOpen emits no walletCreated).
  start
  printf %s "$LANYARD_TEST_KEYRING_PASSWORD" | /usr/bin/python3 "$open" --create "$wallet" 2>>"$log" ||
    fail "pamOpen could not create the wallet $wallet"
  stop
  start
  svc="--session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets"
  gdbus call $svc --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Service Collections \
      2>/dev/null | grep -q "$coll" || fail "kwalletd5 offers no collection $coll for the wallet $wallet"
  printf %s "$LANYARD_TEST_KEYRING_PASSWORD" | /usr/bin/python3 "$open" "$wallet" "$coll" 2>>"$log" ||
    fail "the collection $coll stays locked: kwalletd5 did not open the wallet $wallet with its password"
  gdbus call $svc --method org.freedesktop.Secret.Service.ReadAlias default 2>/dev/null | grep -q "$coll" ||
    fail "the default alias does not name $coll (Default Wallet in kwalletrc)"
  # Usable: a probe item stored into the default alias, read back and deleted.
  . "$LANYARD_SCRIPTS_LIB/secret-service-probe.sh"
  probe_secret_service
  "$@"' with-kwallet "$root/kwalletd.log" "$@" || status=$?
exit $status
