#!/bin/sh
# Builds dist/lanyard_<version>-<revision>_<arch>.deb from the release binaries and checks it with
# lintian (any error or warning that Packaging/debian/lanyard.lintian-overrides does not override
# fails the build). Layout and lintian status: Packaging/debian/README.md.
#   scripts/build-deb.sh [--scratch-path DIR] [--no-lintian]      (or: make deb [SCRATCH=DIR])
# Environment:
#   SCRATCH            swift build scratch folder (default: swift's own, .build)
#   SWIFT_BUILD_FLAGS  more `swift build` flags, after the Makefile's RELEASE_FLAGS
#   SOURCE_DATE_EPOCH  timestamp of every file in the package (default: the changelog entry's date)
#   DIST               output folder (default: <repo>/dist)
# Needs dpkg-dev, lintian and binutils; installs them (apt-get, root or sudo) when missing.
set -eu
cd "$(dirname "$0")/.."
root=$PWD
umask 022
export LC_ALL=C.UTF-8 TZ=UTC

lint=yes
scratch=${SCRATCH:-}
while [ $# -gt 0 ]; do
    case $1 in
        --scratch-path) [ $# -ge 2 ] || { echo "build-deb: --scratch-path needs a folder" >&2; exit 2; }
                        scratch=$2; shift 2 ;;
        --scratch-path=*) scratch=${1#*=}; shift ;;
        --no-lintian) lint=no; shift ;;
        -h|--help) sed -n '2,11s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "build-deb: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

say() { echo "build-deb: $*" >&2; }
fail() { say "$*"; exit 1; }

# --- tools -------------------------------------------------------------------------------------
missing=""
for tool in dpkg-deb:dpkg dpkg-shlibdeps:dpkg-dev dpkg-gencontrol:dpkg-dev dpkg-parsechangelog:dpkg-dev \
            lintian:lintian strip:binutils gzip:gzip; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing="$missing ${tool#*:}"
done
if [ -n "$missing" ]; then
    say "installing$missing"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# --- version: Lanyard.version (the source of truth) must match the changelog -----------------
changelog=Packaging/debian/changelog
version=$(sed -n 's/^ *[a-z]* static let version = "\([^"]*\)".*/\1/p' Sources/LanyardCLI/Entry.swift)
[ -n "$version" ] || fail "cannot read Lanyard.version from Sources/LanyardCLI/Entry.swift"
debversion=$(dpkg-parsechangelog -l "$changelog" -SVersion)
[ "${debversion%-*}" = "$version" ] ||
    fail "$changelog is at $debversion but Lanyard.version is $version: add a changelog entry ($version-1)"
: "${SOURCE_DATE_EPOCH:=$(dpkg-parsechangelog -l "$changelog" -STimestamp)}"
export SOURCE_DATE_EPOCH
arch=$(dpkg --print-architecture)
dist=${DIST:-$root/dist}
deb="$dist/lanyard_${debversion}_${arch}.deb"

work=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/debian"
pkg="$work/debian/lanyard"          # the package tree, as debhelper would have it

# --- build and stage with `make install` -------------------------------------------------------
# The Makefile's RELEASE_FLAGS carry the hardening a Swift link can take: BIND_NOW and RELRO (PIE
# is the default) and no RUNPATH=$ORIGIN (the binaries need no private shared libraries).
say "building and staging (swift build scratch: ${scratch:-default})"
make --no-print-directory install DESTDIR="$pkg" PREFIX=/usr SCRATCH="$scratch" \
    SWIFT_BUILD_FLAGS="${SWIFT_BUILD_FLAGS:-}" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "make install failed"; }

[ -x "$pkg/usr/bin/lanyard" ] && [ -x "$pkg/usr/lib/lanyard/lanyard-net" ] || fail "make install staged no binaries"
got=$("$pkg/usr/bin/lanyard" version)
[ "$got" = "lanyard $version" ] || fail "the built binary says '$got', expected 'lanyard $version'"

# Like dh_strip: no debug info, no .comment/.note sections (the binaries keep their build id).
for bin in "$pkg/usr/bin/lanyard" "$pkg/usr/lib/lanyard/lanyard-net"; do
    strip --remove-section=.comment --remove-section=.note "$bin"
done

# Debian's own files.
doc="$pkg/usr/share/doc/lanyard"
install -m 0644 Packaging/debian/copyright "$doc/copyright"
gzip -9nc "$changelog" > "$doc/changelog.Debian.gz"
install -d "$pkg/usr/share/lintian/overrides"
install -m 0644 Packaging/debian/lanyard.lintian-overrides "$pkg/usr/share/lintian/overrides/lanyard"
chmod 0644 "$doc/changelog.Debian.gz"

# --- control file: Depends from dpkg-shlibdeps, the rest from control + changelog -------------
cp Packaging/debian/control "$work/debian/control"
cp "$changelog" "$work/debian/changelog"
mkdir -m 0755 "$pkg/DEBIAN"
(
    cd "$work"
    dpkg-shlibdeps -Tdebian/lanyard.substvars \
        debian/lanyard/usr/bin/lanyard debian/lanyard/usr/lib/lanyard/lanyard-net
    find debian/lanyard -type d -exec chmod 0755 {} +
    dpkg-gencontrol -planyard -ldebian/changelog -cdebian/control -Tdebian/lanyard.substvars \
        -Pdebian/lanyard -fdebian/files
    cd debian/lanyard
    find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums
    chmod 0644 DEBIAN/control DEBIAN/md5sums
)

# Every file dated SOURCE_DATE_EPOCH, so the same binaries give the same .deb.
find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$dist"
rm -f "$deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
say "built $deb"
sed -n 's/^\(Version\|Architecture\|Installed-Size\|Depends\|Recommends\|Suggests\): /  \1: /p' "$pkg/DEBIAN/control" >&2

# --- lintian ----------------------------------------------------------------------------------
if [ "$lint" = yes ]; then
    say "lintian $(lintian --print-version)"
    # Errors and warnings that are not overridden fail; info and pedantic tags are shown, overridden
    # tags counted. (--fail-on is not used: with --show-overrides, lintian 2.116 fails on overridden
    # warnings too.)
    status=0
    lintian --fail-on none --display-info --pedantic --show-overrides --tag-display-limit 0 \
        "$deb" > "$work/lintian" 2>&1 || status=$?
    grep -v -e '^[NO]: ' -e 'running with root privileges' "$work/lintian" >&2 || true
    grep '^O: ' "$work/lintian" | awk '{print $3}' | sort | uniq -c |
        sed 's/^ *\([0-9]*\) \(.*\)/O: \2 (overridden x\1, see the overrides file)/' >&2 || true
    if [ "$status" -ne 0 ]; then
        fail "lintian failed (exit $status)"
    fi
    if grep -q '^[EW]: ' "$work/lintian"; then
        fail "lintian found errors or warnings that are not overridden (see above and Packaging/debian/README.md)"
    fi
    say "lintian: no errors or warnings that are not overridden"
fi
echo "$deb"
