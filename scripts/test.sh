#!/bin/sh
# The fast loop (make test): every Swift test, inside a private D-Bus session with an unlocked
# gnome-keyring, in parallel except the suites that lock the shared test keyring (they run first,
# one at a time). make check runs the same tests one at a time, then everything else.
set -eu
cd "$(dirname "$0")/.."
started=$(date +%s)
${SWIFT:-swift} build --build-tests --quiet
# Suites that lock the test keyring's collection: nothing else may use the keyring meanwhile.
serial='SecretServiceStoreTests'
scripts/with-keyring.sh sh -c "
  swift test --skip-build --no-parallel --filter '$serial' > .build/test-serial.log 2>&1 || { tail -60 .build/test-serial.log; exit 1; }
  grep -E 'Test run with' .build/test-serial.log
  swift test --skip-build --parallel --skip '$serial' > .build/test.log 2>&1 || { grep -E '✘' .build/test.log | head -40; tail -5 .build/test.log; exit 1; }
  grep -E 'Test run with' .build/test.log"
echo "make test: $(( $(date +%s) - started )) s"
