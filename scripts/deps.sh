#!/bin/sh
# Installs what Lanyard needs to build, test, demo and benchmark on Debian 12, idempotently and
# quietly: nothing is downloaded when everything is already there.
set -eu
packages="libsecret-1-dev libglib2.0-dev libsodium-dev libkeyutils-dev libqrencode-dev libwebsockets-dev pkg-config
gnome-keyring dbus dbus-x11 libsecret-tools age python3-venv hyperfine systemd bsdutils xxd curl
libcurl4-openssl-dev fish zsh mandoc man-db dpkg-dev lintian desktop-file-utils strace gh openssl
keepassxc libkf5wallet-bin libqca-qt5-2-plugins python3-dbus python3-gi procps faketime etcd-server etcd-client
haskell-status-notifier-item-utils libdbusmenu-tools libtss2-dev swtpm swtpm-tools tpm2-tools
xvfb xfce4-panel xfce4-notifyd xfconf imagemagick x11-utils xdotool"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing$missing" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
command -v swift >/dev/null 2>&1 || { echo "deps: swift is not on PATH (Swift 6.3 toolchain needed)" >&2; exit 1; }
# The Python venv of the test servers only for what runs them (LANYARD_DEPS_VENV=0: make build,
# release and install need none).
if [ "${LANYARD_DEPS_VENV:-1}" != 0 ] && [ -x scripts/venv.sh ]; then scripts/venv.sh; fi
