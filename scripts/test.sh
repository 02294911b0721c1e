#!/bin/sh
# The fast loop (make test): every Swift test, inside a private D-Bus session with an unlocked
# gnome-keyring and beside a throwaway 3-member etcd cluster (scripts/with-etcd.sh; the three
# test processes share it, so a test that kills members starts a cluster of its own). Most of the
# suite's time is tests waiting on real servers and timers, so three test processes run side by
# side (the test binary itself: `swift test` processes wait for each other's lock on .build),
# each one test at a time (in one process, tests that block
# threads starve the two-thread pool a 2-core machine gives Swift's concurrency); the suite that
# locks the shared test keyring runs first, alone. make check runs the tests this way too.
set -eu
cd "$(dirname "$0")/.."
started=$(date +%s)
${SWIFT:-swift} build --build-tests --quiet
built=$(date +%s)
logs=.build/test-logs
mkdir -p "$logs"
# Suites that lock the test keyring's collection, and the example program whose doctor must see
# only its own items: nothing else may use the keyring meanwhile.
serial='SecretServiceStoreTests|ExampleProgramTests'
scripts/with-etcd.sh scripts/with-keyring.sh sh -c '
  serial=$1 logs=$2 bin=$3
  run() { # NAME SWIFT-TEST-ARGS…: one test process, its log in $logs/NAME.log
    name=$1; shift
    NO_COLOR=1 "$bin" --testing-library swift-testing --no-parallel "$@" > "$logs/$name.log" 2>&1
  }
  run keyring-lock --filter "$serial" || { tail -40 "$logs/keyring-lock.log"; exit 1; }
  run cli --filter "^LanyardCLITests\." --skip "$serial" & cli=$!
  run kit --filter "^(LanyardKitTests|LanyardAgentTests|LanyardFleetTests|AgeTests)\." --skip "$serial" & kit=$!
  run rest --filter "^(LanyardAuthTests|LanyardStoreTests|LanyardSupportTests|LanyardCoreTests|LanyardIntegrationsTests|LanyardNetworkTests|RepositoryChecks)\." --skip "$serial" & rest=$!
  status=0
  for job in "cli $cli" "kit $kit" "rest $rest"; do
    set -- $job
    if ! wait "$2"; then status=1; grep -E "✘" "$logs/$1.log" | head -30; tail -3 "$logs/$1.log"; fi
  done
  for name in keyring-lock cli kit rest; do printf "%-13s %s\n" "$name" "$(grep -E "Test run with" "$logs/$name.log" | tail -1)"; done
  exit $status' test "$serial" "$logs" "$(${SWIFT:-swift} build --show-bin-path)/LanyardPackageTests.xctest"
echo "make test: $(( $(date +%s) - built )) s of tests ($(( built - started )) s to build)"
