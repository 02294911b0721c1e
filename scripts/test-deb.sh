#!/bin/sh
# Installs the Debian package with apt-get (so its Depends are resolved for real), smoke-tests the
# installed files in a throwaway HOME without a D-Bus session, then removes the package again, and
# every package apt-get pulled in with it, even when a check fails or the script is interrupted.
#   scripts/test-deb.sh [DEB]      (default: dist/lanyard_<Lanyard.version>-*_<arch>.deb)
# One PASS/FAIL line per check; exits 1 when any check fails, 2 when it cannot run at all.
# Needs root, or sudo without a password prompt. Refuses to run when lanyard is already installed
# (it could not put that installation back).
set -u
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8

die() { echo "test-deb: $*" >&2; exit 2; }

# --- which package ------------------------------------------------------------------------------
if [ $# -gt 1 ]; then die "usage: scripts/test-deb.sh [DEB]"; fi
if [ $# = 1 ]; then
    deb=$1
else
    version=$(sed -n 's/^ *[a-z]* static let version = "\([^"]*\)".*/\1/p' Sources/LanyardCLI/Entry.swift)
    set -- dist/lanyard_"$version"-*_"$(dpkg --print-architecture)".deb
    [ $# = 1 ] && [ -f "$1" ] || die "expected one dist/lanyard_$version-*.deb, found: $* (run make deb, or name the .deb)"
    deb=$1
fi
[ -f "$deb" ] || die "$deb: no such file"
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
[ "$(dpkg-deb -f "$deb" Package)" = lanyard ] || die "$deb is not the lanyard package"
debversion=$(dpkg-deb -f "$deb" Version)
version=${debversion%-*}

# --- root ---------------------------------------------------------------------------------------
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    die "installing a package needs root or password-less sudo; run as root or configure sudo"
fi
if dpkg-query -W -f='${Status}' lanyard 2>/dev/null | grep -q 'installed'; then
    die "lanyard is already installed ($(dpkg-query -W -f='${Version}' lanyard)); remove it first (apt-get remove lanyard)"
fi

failures=0
pass() { echo "PASS  $1"; }
fail() { echo "FAIL  $1"; failures=$((failures + 1)); }
show() { sed 's/^/      | /'; }          # a command's output, under its check line

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-test-deb.XXXXXX")
installed=no
cleanup() {
    status=$?
    trap - EXIT
    trap '' INT TERM HUP     # a second Ctrl-C must not leave the package installed
    if [ "$installed" = yes ]; then
        # The package, then whatever apt-get installed for it (nothing else: no autoremove).
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq lanyard >"$tmp/purge.log" 2>&1
        dpkg-query -W -f='${binary:Package}\n' | sort > "$tmp/after-remove"
        added=$(comm -13 "$tmp/before" "$tmp/after-remove" | tr '\n' ' ')
        if [ -n "$added" ]; then
            # shellcheck disable=SC2086
            $SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $added >>"$tmp/purge.log" 2>&1
        fi
        dpkg-query -W -f='${binary:Package}\n' | sort > "$tmp/after-remove"
        if dpkg-query -W -f='${Status}' lanyard 2>/dev/null | grep -q 'installed'; then
            fail "remove: lanyard is still installed"; show < "$tmp/purge.log"
        elif ! cmp -s "$tmp/before" "$tmp/after-remove"; then
            fail "remove: the installed package set differs from before the test"
            diff "$tmp/before" "$tmp/after-remove" | show
        elif [ -e /usr/bin/lanyard ] || [ -e /usr/lib/lanyard ]; then
            fail "remove: /usr/bin/lanyard or /usr/lib/lanyard is still there"
        else
            pass "remove: apt-get purge lanyard${added:+ (and $added)}; installed packages as before"
        fi
    fi
    rm -rf "$tmp"
    if [ "$status" = 0 ] && [ "$failures" -gt 0 ]; then status=1; fi
    if [ "$failures" -gt 0 ]; then echo "test-deb: $failures check(s) failed" >&2
    elif [ "$status" = 0 ]; then echo "test-deb: all checks passed"
    else echo "test-deb: stopped (exit $status)" >&2; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- install ------------------------------------------------------------------------------------
echo "test-deb: $deb"
dpkg-query -W -f='${binary:Package}\n' | sort > "$tmp/before"
installed=yes          # from here on, cleanup removes whatever got installed
apt_install() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$deb" >"$tmp/install.log" 2>&1; }
if ! apt_install; then
    # Stale package lists are the usual reason; refresh them once.
    $SUDO apt-get update -qq >/dev/null 2>&1
    apt_install
fi
if dpkg-query -W -f='${Status} ${Version}' lanyard 2>/dev/null | grep -q "install ok installed $debversion\$"; then
    dpkg-query -W -f='${binary:Package}\n' | sort > "$tmp/after-install"
    pulled=$(comm -13 "$tmp/before" "$tmp/after-install" | grep -vx lanyard | tr '\n' ' ')
    pass "install: apt-get install $(basename "$deb") (also installed: ${pulled:-nothing})"
else
    fail "install: apt-get install $(basename "$deb")"; show < "$tmp/install.log"
    exit 1
fi

# --- checks, as a user with a throwaway HOME and no D-Bus session ----------------------------------
home=$tmp/home
mkdir -p "$home" "$tmp/config" "$tmp/data" "$tmp/state" "$tmp/cache"
mkdir -m 0700 "$tmp/run"
run() {   # run CMD...: the installed command in the throwaway environment
    env -i PATH=/usr/bin:/bin LC_ALL=C.UTF-8 HOME="$home" USER="$(id -un)" \
        XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/data" XDG_STATE_HOME="$tmp/state" \
        XDG_CACHE_HOME="$tmp/cache" XDG_RUNTIME_DIR="$tmp/run" "$@"
}

out=$(run lanyard --version 2>&1)
if [ "$out" = "lanyard $version" ]; then pass "lanyard --version: $out"
else fail "lanyard --version: expected 'lanyard $version'"; echo "$out" | show; fi

out=$(run /usr/lib/lanyard/lanyard-net version 2>&1)
if [ "$out" = "lanyard $version" ]; then pass "/usr/lib/lanyard/lanyard-net version: $out"
else fail "/usr/lib/lanyard/lanyard-net version: expected 'lanyard $version'"; echo "$out" | show; fi

missing=$(ldd /usr/bin/lanyard /usr/lib/lanyard/lanyard-net 2>&1 | grep 'not found')
if [ -z "$missing" ]; then pass "shared libraries: every one ldd lists is installed"
else fail "shared libraries missing (Depends incomplete)"; echo "$missing" | show; fi

# No session bus and no file store yet: nothing could keep a sign-in, which doctor reports as a
# problem (exit 1) naming the command that fixes it.
status=0; out=$(run lanyard doctor 2>&1) || status=$?
if [ "$status" = 1 ] && printf '%s\n' "$out" | grep -q 'lanyard store init'; then
    pass "lanyard doctor without D-Bus or a file store: exit 1, advising \`lanyard store init\`"
else
    fail "lanyard doctor without D-Bus or a file store: exit $status (1 with the store init advice expected)"
fi
echo "$out" | show

page=$(run man -w lanyard 2>&1)
if [ "$page" = /usr/share/man/man1/lanyard.1.gz ]; then
    if run lanyard help --man > "$tmp/man.generated" && zcat "$page" | cmp -s - "$tmp/man.generated"; then
        pass "man page: man -w lanyard finds $page, equal to lanyard help --man"
    else
        fail "man page: $page differs from lanyard help --man"
    fi
else
    fail "man page: man -w lanyard says '$page' (dpkg path-exclude for /usr/share/man?)"
fi

for shell in bash zsh fish; do
    case $shell in
        bash) file=/usr/share/bash-completion/completions/lanyard ;;
        zsh) file=/usr/share/zsh/vendor-completions/_lanyard ;;
        fish) file=/usr/share/fish/vendor_completions.d/lanyard.fish ;;
    esac
    if [ -s "$file" ] && run lanyard completion $shell | cmp -s - "$file"; then
        pass "completion $shell: $file equals lanyard completion $shell"
    else
        fail "completion $shell: $file is missing or differs from lanyard completion $shell"
    fi
done

dpkg -L lanyard > "$tmp/files"
for unit in Packaging/systemd/*.service Packaging/systemd/*.timer; do
    path=/usr/lib/systemd/user/${unit##*/}
    if ! grep -qx "$path" "$tmp/files"; then
        fail "systemd unit: dpkg -L lanyard lacks $path"
    elif grep -q '/usr/local/' "$path" || { grep -q '^ExecStart=' "$path" && ! grep -q '^ExecStart=/usr/bin/lanyard ' "$path"; }; then
        fail "systemd unit: $path does not run /usr/bin/lanyard"; grep '^ExecStart=' "$path" | show
    elif grep -q "^/etc/systemd/user/.*/${unit##*/}\$" "$tmp/files" || [ -e "/etc/systemd/user/graphical-session.target.wants/${unit##*/}" ] ||
         [ -e "/etc/systemd/user/default.target.wants/${unit##*/}" ] || [ -e "/etc/systemd/user/timers.target.wants/${unit##*/}" ]; then
        fail "systemd unit: the package enabled ${unit##*/} for every user"
    else
        pass "systemd unit: $path (dpkg -L), not enabled"
    fi
done

entry=/usr/share/lanyard/lanyard-tray.desktop
if ! grep -qx "$entry" "$tmp/files"; then
    fail "autostart entry: dpkg -L lanyard lacks $entry"
elif ! grep -qx 'Exec=/usr/bin/lanyard tray' "$entry"; then
    fail "autostart entry: $entry does not run /usr/bin/lanyard tray"; grep '^Exec=' "$entry" | show
elif grep -q '^/etc/xdg/autostart/' "$tmp/files"; then
    fail "autostart entry: the package starts the tray for every user (/etc/xdg/autostart)"
elif run lanyard tray --install-autostart >/dev/null 2>&1 && cmp -s "$entry" "$tmp/config/autostart/lanyard-tray.desktop"; then
    pass "autostart entry: $entry (dpkg -L), what lanyard tray --install-autostart writes"
else
    fail "autostart entry: lanyard tray --install-autostart failed or wrote another entry than $entry"
fi

# Lanyard's icon in the hicolor theme, each size (the autostart entry and notifications name it).
lacking=""
for size in 16 22 24 32 48 64 128 256; do
    grep -qx "/usr/share/icons/hicolor/${size}x${size}/apps/lanyard.png" "$tmp/files" || lacking="$lacking ${size}x${size}"
done
if [ -n "$lacking" ]; then fail "icon: dpkg -L lanyard lacks lanyard.png at$lacking under /usr/share/icons/hicolor"
elif ! grep -qx 'Icon=lanyard' "$entry"; then fail "icon: $entry does not name the lanyard icon"
else pass "icon: /usr/share/icons/hicolor/{16..256}/apps/lanyard.png (dpkg -L), named by $entry"; fi

lacking=""
for doc in README.md copyright changelog.Debian.gz docs/cli.md; do
    grep -qx "/usr/share/doc/lanyard/$doc" "$tmp/files" || lacking="$lacking $doc"
done
if [ -z "$lacking" ]; then pass "docs: $(grep -c '^/usr/share/doc/lanyard/.' "$tmp/files") entries under /usr/share/doc/lanyard (dpkg -L)"
else fail "docs: dpkg -L lanyard lacks$lacking under /usr/share/doc/lanyard"; fi
