#!/bin/sh
# `swift build ARGS…` for the static release (make release, make install, the .deb), without one
# line: Foundation's static library (its Data+Writing) calls mktemp, and glibc's link-time warning
# about that comes at every static link, though Lanyard's own code never calls it. Every other
# line, warning or not, and the build's exit status are kept. SWIFT names the toolchain's swift.
status=$(mktemp) || exit 1
{ ${SWIFT:-swift} build "$@" 2>&1; echo $? > "$status"; } | grep -v "warning: the use of .mktemp. is dangerous"
rc=$(cat "$status")
rm -f "$status"
exit "$rc"
