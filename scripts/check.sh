#!/bin/sh
# The test suite: first the formatting (scripts/format.sh --check: swift format lint --strict and
# no line over 120 characters), then every Swift test inside a private keyring session and beside a throwaway
# 3-member etcd cluster (scripts/test.sh, as make test: plain `swift test`, tests in parallel,
# then the LanyardKit, agent and fleet suites on a one-thread cooperative pool), the Secret
# Service suites again with KeePassXC and then KWallet as the provider, the tray on a real panel (Xvfb, Xfce's
# panel and xfce4-notifyd, the screen read by the test), a 60 s concurrency soak, a 60 s fleet soak
# (4 machines sharing a slot through etcd while processes and etcd members are killed), 60 + 20 random
# kill -9 crashes (slots in the file store, then in the keyring) of the real binaries with
# invariant checks, the crash cases replayed at chosen system calls, disk faults at every write (scripts/soak/),
# the kit and lifecycle suites again under Thread Sanitizer, a short
# fuzzing smoke run of the parsers, then the Debian package:
# built and checked by lintian, installed with apt-get, smoke-tested and removed.
set -eu
cd "$(dirname "$0")/.."
# Every service a suite needs is started here: a missing one fails its tests instead of skipping them.
export LANYARD_TEST_REQUIRE_SERVICES=1
started=$(date +%s)
# What git sees at the start: the run must leave the tree as it found it (outputs go under .build).
tree_before=$(git status --porcelain --untracked-files=all 2> /dev/null || true)
# phase TEXT: a heading with the minutes and seconds since the suite started.
phase() { t=$(( $(date +%s) - started )); printf '== [%d:%02d] %s\n' $((t / 60)) $((t % 60)) "$1"; }
phase "formatting (scripts/format.sh --check; make format fixes most of it)"
SWIFT="${SWIFT:-swift}" scripts/format.sh --check
phase "build (debug, with the tests)"
${SWIFT:-swift} build --build-tests --quiet
scripts/verify-units.sh
phase "the Swift tests (swift test, in parallel; then LIBDISPATCH_COOPERATIVE_POOL_STRICT=1), in a private gnome-keyring session and a 3-member etcd cluster (scripts/test.sh)"
SWIFT="${SWIFT:-swift}" scripts/test.sh
phase "the tray on a real panel: Xvfb, Xfce's panel 4.18 and xfce4-notifyd, the screen read (RealPanelTests)"
# Its pictures are kept for a look in .build/desktop-screenshots (scripts/desktop-screenshots.sh puts
# them in docs/images/).
LANYARD_DESKTOP_SCREENSHOTS=.build/desktop-screenshots NO_COLOR=1 timeout --kill-after=10 300 \
  swift test --skip-build --filter 'RealPanelTests' > .build/real-panel.log 2>&1 \
  || { grep -v '↳' .build/real-panel.log | tail -60; exit 1; }
grep -E 'Test run with' .build/real-panel.log
phase "the Secret Service suites again, against KeePassXC (scripts/with-keepassxc.sh)"
scripts/with-keepassxc.sh swift test --skip-build --no-parallel --filter 'SecretServiceStoreTests|RealBackendCommandTests' \
  > .build/keepassxc.log 2>&1 || { tail -80 .build/keepassxc.log; exit 1; }
grep -E 'Test run with' .build/keepassxc.log
phase "the Secret Service suites again, against KWallet (scripts/with-kwallet.sh)"
scripts/with-kwallet.sh swift test --skip-build --no-parallel --filter 'SecretServiceStoreTests|RealBackendCommandTests' \
  > .build/kwallet.log 2>&1 || { tail -80 .build/kwallet.log; exit 1; }
grep -E 'Test run with' .build/kwallet.log
phase "concurrency soak: 16 processes, the agent, renames and sign-outs against 3-second tokens (60 s)"
scripts/soak/concurrency.sh "${SOAK_SECONDS:-60}" > .build/soak.log 2>&1 || { tail -60 .build/soak.log; exit 1; }
grep -E '^(server|invariants):' .build/soak.log
phase "the fleet attacker's signer (Tests/Fixtures/fleet/forge.py, outside Lanyard's code) against a fleet lanyard made"
LANYARD_BIN=.build/debug/lanyard Tests/Fixtures/fleet/selftest.sh > .build/forge-selftest.log 2>&1 || { tail -30 .build/forge-selftest.log; exit 1; }
tail -1 .build/forge-selftest.log
phase "fleet soak: 4 machines share a slot through etcd, and a removed fifth keeps its key and etcd access; Lanyard processes and etcd members killed, quorum lost, a machine cut off (60 s)"
scripts/soak/fleet.sh "${SOAK_FLEET_SECONDS:-60}" > .build/fleet-soak.log 2>&1 || { tail -60 .build/fleet-soak.log; exit 1; }
grep -E '^(server|convergence|invariants):' .build/fleet-soak.log
phase "crash consistency: operations killed with SIGKILL at random points, invariants after each (60 kills, file store)"
scripts/soak/crash.sh "${CRASH_KILLS:-60}" > .build/crash.log 2>&1 || { tail -60 .build/crash.log; exit 1; }
grep -E '^(invariant failures|repairs needed):' .build/crash.log
phase "the same with the slots in the keyring (20 kills)"
CRASH_BACKEND=secret-service scripts/soak/crash.sh "${CRASH_KEYRING_KILLS:-20}" > .build/crash-keyring.log 2>&1 || { tail -60 .build/crash-keyring.log; exit 1; }
grep -E '^(invariant failures|repairs needed):' .build/crash-keyring.log
phase "crashes at chosen system calls (strace kills the process between two durable writes)"
for case in rename-stray rename-both recovery-temp rename-recovery logout-recovery migrate-stray; do
  scripts/soak/repro-crash.sh "$case" > .build/crash-$case.log 2>&1 || { cat .build/crash-$case.log; exit 1; }
  echo "ok $case"
done
phase "disk faults: ENOSPC or EIO at each write, fsync, rename and link of refresh, switch, rename, logout, login and agent --once"
IO_FAULTS_KEEP=.build scripts/soak/io-faults.sh > .build/io-faults.log 2>&1 || { tail -60 .build/io-faults.log; exit 1; }
tail -1 .build/io-faults.log
phase "Thread Sanitizer: the LanyardKit (its fleet included) and token-lifecycle suites (a data race fails the run)"
swift build --build-tests --sanitize=thread --scratch-path .build/tsan --quiet
scripts/with-etcd.sh scripts/with-keyring.sh swift test --skip-build --sanitize=thread --scratch-path .build/tsan --no-parallel \
  --filter 'LanyardKitTests|LifecycleTests' > .build/tsan.log 2>&1 || { tail -80 .build/tsan.log; exit 1; }
grep -E 'Test run with' .build/tsan.log
phase "fuzz smoke run (make fuzz for longer runs)"
scripts/fuzz.sh "${FUZZ_SECONDS:-60}" > .build/fuzz-smoke.log 2>&1 || {
  # The failing harness is not always the last one: show each failure with its sanitizer report.
  grep -E -B2 -A40 '^FAIL|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|deadly signal' .build/fuzz-smoke.log | head -200
  tail -5 .build/fuzz-smoke.log; exit 1; }
grep -E '^Done' .build/fuzz-smoke.log
phase "Debian package (make deb, then install, smoke test and remove)"
scripts/build-deb.sh
scripts/test-deb.sh
phase "make install and make uninstall into a scratch root"
scripts/test-install.sh
tree_after=$(git status --porcelain --untracked-files=all 2> /dev/null || true)
if [ "$tree_before" != "$tree_after" ]; then
  echo "make check changed files in the tree (outputs belong under .build):" >&2
  printf '%s\n' "$tree_after" >&2
  exit 1
fi
phase "done"
