#!/bin/sh
# `lanyard list --json` with 1 and with 1,000 slots in the registry, in one hyperfine run.
# Prints the median ratio (target ≤ 3).
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
make_registry() { # DIR COUNT
  mkdir -p "$1/data/lanyard" && chmod 700 "$1/data/lanyard" "$1/data"
  python3 - "$1/data/lanyard/registry.json" "$2" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
slots = {f"slot-{i:04d}": {
    "provider": "openai", "backend": "secret-service",
    "account": {"email": f"user{i}@example.com", "user_id": f"user-{i}", "account_id": f"acct-{i}", "plan": "pro", "fedramp": False},
    "state": {"state": "signed-in", "expires_at": "2027-01-15T10:10:00Z"},
    "last_refresh": "2027-01-15T08:00:00Z", "created_at": "2027-01-01T00:00:00Z"} for i in range(n)}
json.dump({"version": 1, "active": "slot-0000", "slots": slots}, open(path, "w"), indent=2, sort_keys=True)
PY
  chmod 600 "$1/data/lanyard/registry.json"
}
make_registry "$tmp/one" 1
make_registry "$tmp/many" 1000
hyperfine -N --warmup 5 --runs 60 --export-json "$tmp/out.json" \
  -n "list --json (1 slot)" "env XDG_DATA_HOME=$tmp/one/data XDG_CONFIG_HOME=$tmp/one $bin list --json" \
  -n "list --json (1000 slots)" "env XDG_DATA_HOME=$tmp/many/data XDG_CONFIG_HOME=$tmp/many $bin list --json" >/dev/null
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
one, many = r[0]["median"] * 1000, r[1]["median"] * 1000
print(f"list --json, 1 slot:     {one:7.2f} ms (median)")
print(f"list --json, 1000 slots: {many:7.2f} ms (median)")
print(f"ratio 1000/1: {many/one:.2f} (target <= 3)")
PY
