#!/bin/sh
# The fast loop (make test), and the first step of make check: every Swift test, run the way a
# Swift developer runs them, with plain `swift test` (tests in parallel), inside a private D-Bus
# session with an unlocked gnome-keyring and beside a throwaway 3-member etcd cluster
# (scripts/with-keyring.sh, scripts/with-etcd.sh). Then the LanyardKit, agent and fleet suites
# again with LIBDISPATCH_COOPERATIVE_POOL_STRICT=1: a cooperative pool one thread wide, so the run
# finishes only if nothing blocks a cooperative thread (docs/architecture.md, "Concurrency").
# Each run has a time limit: a hang fails it, with the log's tail, instead of stalling CI.
# LANYARD_TEST_TPM=1: the TPM suites (each test starts its own swtpm) must run, not skip.
set -eu
cd "$(dirname "$0")/.."
# Every service a suite needs is started here: a missing one fails its tests instead of skipping them.
export LANYARD_TEST_REQUIRE_SERVICES=1
started=$(date +%s)
${SWIFT:-swift} build --build-tests --quiet
built=$(date +%s)
logs=.build/test-logs
mkdir -p "$logs"
# run NAME LIMIT [ENV=VALUE…] -- SWIFT-TEST-ARGS…: one `swift test` in the wrappers, its log in $logs/NAME.log.
run() {
  name=$1 limit=$2; shift 2
  envs=""
  while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  status=0
  # shellcheck disable=SC2086
  NO_COLOR=1 LANYARD_TEST_TPM=1 timeout --kill-after=10 "$limit" env $envs scripts/with-etcd.sh scripts/with-keyring.sh \
    ${SWIFT:-swift} test --skip-build "$@" > "$logs/$name.log" 2>&1 || status=$?
  printf "%-16s %s\n" "$name" "$(grep -E "Test run with" "$logs/$name.log" | tail -1)"
  if [ $status -ne 0 ]; then
    [ $status -eq 124 ] && echo "$name: still running after $limit s (a hang): stopped" >&2
    grep -E "✘" "$logs/$name.log" | head -30
    tail -5 "$logs/$name.log"
    return 1
  fi
}
# RealPanelTests (an X server, Xfce's panel and the screen read) runs in make check, in a step of its own.
run parallel 900 -- --skip 'RealPanelTests'
run strict-pool 900 LIBDISPATCH_COOPERATIVE_POOL_STRICT=1 -- \
  --filter '^(LanyardKitTests|LanyardAgentTests|LanyardFleetTests)\.|^LanyardCLITests\.Fleet'
echo "make test: $(( $(date +%s) - built )) s of tests ($(( built - started )) s to build)"
