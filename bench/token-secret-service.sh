#!/bin/sh
# `lanyard token` against `secret-tool lookup` of the same keyring item, in one hyperfine run,
# inside a private D-Bus session with gnome-keyring. Prints the median ratio; exits 1 when it misses
# its target (<= 1.25) or moves more than 10 % from the reference in docs/performance.md (bench/gate.py).
set -eu
if [ "${LANYARD_TEST_KEYRING:-}" != 1 ]; then exec scripts/with-keyring.sh sh "$0" "$@"; fi
bin=${LANYARD_BIN:-.build/release/lanyard}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# A credential stored the way another tool would, then adopted by `doctor --repair`.
printf '%s' '{"account":{"email":"bench@example.com","fedramp":false},"provider":"openai","tokens":{"access_token":"bench-access-token","expires_at":"2099-01-01T00:00:00Z","refresh_token":"bench-refresh"},"version":1}' |
  secret-tool store --label='Lanyard: bench' xdg:schema dev.lanyard.Credential slot bench provider openai account-id ''
"$bin" doctor --repair >/dev/null || true
[ "$("$bin" token bench)" = bench-access-token ] || { echo "token-secret-service: setup failed" >&2; exit 1; }
# Five rounds of 30 runs each, the two side by side in each round (bench/gate.py says why).
for round in 1 2 3 4 5; do
  hyperfine -N --warmup 5 --runs 30 --export-json "$tmp/out-$round.json" \
    -n "lanyard token" "$bin token bench" \
    -n "secret-tool lookup" "secret-tool lookup xdg:schema dev.lanyard.Credential slot bench" >/dev/null
done
echo "lanyard token (Secret Service) vs secret-tool lookup:"
python3 bench/gate.py rounds token-secret-service 1.25 "$tmp"/out-*.json
