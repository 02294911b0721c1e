#!/bin/sh
# `make install` into a scratch DESTDIR: every file in place, the units pointing at PREFIX, the
# installed lanyard finding its lanyard-net; then `make uninstall` leaves no file behind.
set -eu
cd "$(dirname "$0")/.."
root=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-install.XXXXXX")
trap 'rm -rf "$root"' EXIT INT TERM
prefix=/opt/lanyard
dest=$root$prefix
fail() { echo "FAIL  $*" >&2; exit 1; }
pass() { echo "PASS  $*"; }

make --no-print-directory install DESTDIR="$root" PREFIX="$prefix" SCRATCH="${SCRATCH:-}" >"$root/install.log" 2>&1 ||
    { cat "$root/install.log" >&2; fail "make install"; }
for f in bin/lanyard lib/lanyard/lanyard-net share/man/man1/lanyard.1.gz share/bash-completion/completions/lanyard \
         share/zsh/vendor-completions/_lanyard share/fish/vendor_completions.d/lanyard.fish \
         lib/systemd/user/lanyard-agent.service lib/systemd/user/lanyard-refresh.service lib/systemd/user/lanyard-refresh.timer \
         lib/systemd/user/lanyard-tray.service share/lanyard/lanyard-tray.desktop \
         share/doc/lanyard/README.md share/doc/lanyard/docs/getting-started.md \
         share/doc/lanyard/docs/images/menu.png; do
    [ -s "$dest/$f" ] || fail "make install did not install $f"
done
[ "$(readlink "$dest/bin/docker-credential-lanyard")" = lanyard ] || fail "make install did not link bin/docker-credential-lanyard to lanyard"
out=$(printf 'unmapped.example' | env -i HOME="$root/home" PATH=/usr/bin:/bin "$dest/bin/docker-credential-lanyard" get) && fail "docker-credential-lanyard get of an unmapped registry exited 0"
[ "$out" = "credentials not found in native keychain" ] || fail "docker-credential-lanyard get: $out"
pass "bin/docker-credential-lanyard runs lanyard's Docker helper"
pass "make install PREFIX=$prefix: $(find "$root" -type f ! -name install.log | wc -l) files"
grep -q "ExecStart=$prefix/bin/lanyard agent" "$dest/lib/systemd/user/lanyard-agent.service" || fail "the agent unit does not run $prefix/bin/lanyard"
grep -qx "ExecStart=$prefix/bin/lanyard tray" "$dest/lib/systemd/user/lanyard-tray.service" || fail "the tray unit does not run $prefix/bin/lanyard tray"
pass "units run $prefix/bin/lanyard"
# Lanyard's own icon in the hicolor theme, at each size, drawn by the binary just built: a PNG of
# that size (its IHDR's width and height), readable by all, that the autostart entry names.
for size in 16 22 24 32 48 64 128 256; do
    icon="$dest/share/icons/hicolor/${size}x${size}/apps/lanyard.png"
    [ -s "$icon" ] || fail "make install did not install share/icons/hicolor/${size}x${size}/apps/lanyard.png"
    [ "$(stat -c %a "$icon")" = 644 ] || fail "$icon has mode $(stat -c %a "$icon"), not 644"
    [ "$(head -c 8 "$icon" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$icon is not a PNG"
    dims=$(od -An -tu1 -j16 -N8 "$icon" |
        awk '{ print $1*16777216 + $2*65536 + $3*256 + $4 "x" $5*16777216 + $6*65536 + $7*256 + $8 }')
    [ "$dims" = "${size}x${size}" ] || fail "$icon is $dims pixels, not ${size}x${size}"
done
grep -qx "Icon=lanyard" "$dest/share/lanyard/lanyard-tray.desktop" ||
    fail "the autostart entry does not name the lanyard icon"
pass "share/icons/hicolor/{16..256}/apps/lanyard.png: PNGs of their sizes, 0644, named by the autostart entry"
entry="$dest/share/lanyard/lanyard-tray.desktop"
grep -qx "Exec=$prefix/bin/lanyard tray" "$entry" || fail "the autostart entry does not run $prefix/bin/lanyard tray"
command -v desktop-file-validate >/dev/null 2>&1 || fail "desktop-file-validate is not installed (desktop-file-utils; run scripts/deps.sh)"
out=$(desktop-file-validate "$entry" 2>&1) && [ -z "$out" ] || fail "desktop-file-validate share/lanyard/lanyard-tray.desktop: $out"
# The installed lanyard writes the same entry to a user's autostart folder (naming itself where
# it runs from: under DESTDIR here).
ahome="$root/autostarthome"; mkdir -p "$ahome"
out=$(env -i HOME="$ahome" PATH=/usr/bin:/bin "$dest/bin/lanyard" tray --install-autostart 2>&1) || fail "installed lanyard: tray --install-autostart: $out"
sed "s|$dest/bin/lanyard|$prefix/bin/lanyard|g" "$ahome/.config/autostart/lanyard-tray.desktop" | cmp -s "$entry" - ||
    fail "lanyard tray --install-autostart wrote another entry than share/lanyard/lanyard-tray.desktop: $(cat "$ahome/.config/autostart/lanyard-tray.desktop")"
pass "share/lanyard/lanyard-tray.desktop runs $prefix/bin/lanyard tray, passes desktop-file-validate, equals what tray --install-autostart writes"

# The shipped binaries load GLib, libsecret, libsodium and libkeyutils on first use, never at start.
for bin in bin/lanyard lib/lanyard/lanyard-net; do
    eager=$(readelf -d "$dest/$bin" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -E 'glib|gio|gobject|secret|sodium|keyutils|qrencode|websockets|tss2' || true)
    [ -z "$eager" ] || fail "$bin links $eager at start-up (they are loaded on first use)"
done
pass "bin/lanyard and lanyard-net load GLib, libsecret, libsodium, libkeyutils and libtss2 on first use"
# ...and a file-store token, which needs all but libsecret, still works.
fhome="$root/filehome"; mkdir -p "$fhome/config/lanyard"
printf '[store]\nbackend = file\n' > "$fhome/config/lanyard/config.ini"
fenv() { env -i HOME="$fhome" XDG_CONFIG_HOME="$fhome/config" XDG_DATA_HOME="$fhome/data" XDG_STATE_HOME="$fhome/state" \
    XDG_RUNTIME_DIR="$fhome/run" PATH=/usr/bin:/bin "$@"; }
printf 'install test passphrase\n' > "$fhome/pass"; chmod 600 "$fhome/pass"
out=$(fenv LANYARD_PASSPHRASE_FILE="$fhome/pass" "$dest/bin/lanyard" store init 2>&1) || fail "installed lanyard: store init (file store) failed: $out"
out=$(fenv "$dest/bin/lanyard" store status 2>&1) || fail "installed lanyard: store status failed: $out"
fenv "$dest/bin/lanyard" store lock >/dev/null 2>&1 || true
pass "installed lanyard creates and opens a file store (GLib, libsodium and libkeyutils loaded on demand)"

# A network command from the installed layout execs ../lib/lanyard/lanyard-net.
home="$root/home"; mkdir -p "$home"
status=0
out=$(env -i HOME="$home" XDG_RUNTIME_DIR="$home/run" PATH=/usr/bin:/bin "$dest/bin/lanyard" usage --all --json 2>&1) || status=$?
case $out in *"cannot run"*) fail "installed lanyard cannot run lanyard-net: $out" ;; esac
[ "$status" = 0 ] || fail "lanyard usage --all exited $status: $out"
pass "installed lanyard hands network commands to lib/lanyard/lanyard-net (usage --all: exit 0, $(echo $out | head -c 60))"

make --no-print-directory uninstall DESTDIR="$root" PREFIX="$prefix" >"$root/uninstall.log" 2>&1 ||
    { cat "$root/uninstall.log" >&2; fail "make uninstall"; }
left=$(find "$dest" -type f 2>/dev/null | head -5)
[ -z "$left" ] || fail "make uninstall left: $left"
pass "make uninstall removed every installed file"
