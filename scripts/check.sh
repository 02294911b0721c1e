#!/bin/sh
# The test suite: every Swift test inside a private keyring session, then the other checks.
set -eu
cd "$(dirname "$0")/.."
scripts/with-keyring.sh swift test --skip-build 2>&1
