#!/bin/sh
# Regenerates the pictures docs/desktop.md shows ("How it looks") in docs/images/: runs the
# real-panel test (RealPanelTests in Tests/LanyardCLITests/Desktop/: `lanyard tray` on Xfce's panel
# 4.18 and xfce4-notifyd under Xvfb, against the ChatGPT emulator) with
# LANYARD_DESKTOP_SCREENSHOTS set, which keeps what the test saw once it had checked it, then writes
# each picture without metadata, at most 60 KB (with fewer colours when larger). About a minute
# once built; the machine's packages and the test venv come from scripts/deps.sh.
#   scripts/desktop-screenshots.sh
set -eu
cd "$(dirname "$0")/.."
convert=/usr/bin/convert-im6.q16  # Debian's ImageMagick by its own name (`convert` may be another program)
limit=61440
scripts/deps.sh
${SWIFT:-swift} build --build-tests --quiet
shots=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-screenshots.XXXXXX")
trap 'rm -rf "$shots"' EXIT INT TERM
# Required: a missing tool or a panel that does not start fails the run instead of skipping it.
if ! LANYARD_TEST_REQUIRE_SERVICES=1 LANYARD_DESKTOP_SCREENSHOTS="$shots" NO_COLOR=1 \
  timeout --kill-after=10 300 ${SWIFT:-swift} test --skip-build --filter 'RealPanelTests' > "$shots/test.log" 2>&1; then
  grep -v '↳' "$shots/test.log" | tail -40 >&2
  echo "desktop-screenshots: the real-panel test failed; docs/images/ is unchanged" >&2
  exit 1
fi
mkdir -p docs/images
for name in panel-calm panel-amber panel-limit panel-sign-in panel-stale menu notification; do
  [ -f "$shots/$name.png" ] || { echo "desktop-screenshots: the test wrote no $name.png" >&2; exit 1; }
  out=docs/images/$name.png
  small="-strip -define png:compression-level=9 -define png:exclude-chunks=date,time"
  # shellcheck disable=SC2086
  "$convert" "$shots/$name.png" $small "$out"
  # shellcheck disable=SC2086
  [ "$(stat -c %s "$out")" -le $limit ] || "$convert" "$shots/$name.png" $small -colors 64 "$out"
  size=$(stat -c %s "$out")
  [ "$size" -le $limit ] || { echo "desktop-screenshots: $out is $size bytes (at most $limit)" >&2; exit 1; }
  echo "$out: $(/usr/bin/identify-im6.q16 -format '%wx%h' "$out"), $size bytes"
done
