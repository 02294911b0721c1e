#!/bin/sh
# How commands grow with the number of slots (1, 100, 1,000, 10,000 in the registry), in one
# hyperfine run per command: `list --json` must stay within 2.0x of one slot at 1,000 slots;
# `which`, `status SLOT`, `switch` and `token` (file store, unlocked) must not grow (they read
# one slot's record, see RegistryView). Peak RSS of `list --json` at 10,000 slots <= 40 MB.
# Prints each median and the growth against one slot; exits 1 when a target is missed.
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
tool=$(dirname "$bin")/lanyard-test-tool
[ -x "$tool" ] || tool=.build/debug/lanyard-test-tool
tmp=$(mktemp -d)
trap 'for n in 1 100 1000 10000; do XDG_DATA_HOME="$tmp/r$n/data" XDG_CONFIG_HOME="$tmp/r$n/config" "$bin" store lock >/dev/null 2>&1 || true; done; rm -rf "$tmp"' EXIT
unset DBUS_SESSION_BUS_ADDRESS LANYARD_ACCOUNT
export HOME="$tmp/home" XDG_RUNTIME_DIR="$tmp/run" XDG_STATE_HOME="$tmp/state"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

# A file store holding two real credentials (bench-0, bench-1: `switch` needs somewhere to go),
# then a registry of N slots around them in the layout Lanyard writes (`doctor --repair` adds the
# two, the others are added as Registry.update writes them; "1 slot" is these two).
for n in 1 100 1000 10000; do
  d="$tmp/r$n"
  mkdir -p "$d/config/lanyard"
  printf '[store]\nbackend = file\n' > "$d/config/lanyard/config.ini"
  XDG_DATA_HOME="$d/data" XDG_CONFIG_HOME="$d/config" "$bin" store init --no-passphrase >/dev/null 2>&1
  XDG_DATA_HOME="$d/data" XDG_CONFIG_HOME="$d/config" "$tool" file-put bench 2 >/dev/null
  XDG_DATA_HOME="$d/data" XDG_CONFIG_HOME="$d/config" "$bin" doctor --repair >/dev/null || true
  python3 - "$d/data/lanyard/registry.json" "$n" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
doc = json.load(open(path))
for i in range(2, n):
    doc["slots"][f"slot-{i:05d}"] = {
        "provider": "openai", "backend": "file",
        "account": {"email": f"user{i}@example.com", "user_id": f"user-{i}", "account_id": f"acct-{i}", "plan": "pro", "fedramp": False},
        "state": {"state": "signed-in", "expires_at": "2099-01-15T10:10:00Z"},
        "last_refresh": "2027-01-15T08:00:00Z", "created_at": "2027-01-01T00:00:00Z"}
doc["active"] = "bench-0"
with open(path, "w") as f:
    json.dump(doc, f, indent=2, sort_keys=True, separators=(",", ": "))
PY
  XDG_DATA_HOME="$d/data" XDG_CONFIG_HOME="$d/config" "$bin" token bench-0 >/dev/null \
    || { echo "list-scale: setup failed for $n slots" >&2; exit 1; }
done

for spec in "list:list --json" "which:which" "status:status bench-0" "switch:switch bench-1" "token:token bench-0"; do
  name=${spec%%:*}; ARGS=${spec#*:}
  cmds=""  # one hyperfine run over the four registries (commands joined by |, split by Python)
  for n in 1 100 1000 10000; do cmds="$cmds|env XDG_DATA_HOME=$tmp/r$n/data XDG_CONFIG_HOME=$tmp/r$n/config $bin $ARGS"; done
  # switch: each timed run really switches (bench-0 -> slot-1, made active again before each run).
  prepare=""
  if [ "$name" = switch ]; then
    for n in 1 100 1000 10000; do prepare="$prepare|env XDG_DATA_HOME=$tmp/r$n/data XDG_CONFIG_HOME=$tmp/r$n/config $bin switch bench-0"; done
  fi
  python3 - "$tmp/$name.json" "$cmds" "$prepare" <<'PY'
import subprocess, sys
out, cmds, prepares = sys.argv[1], [c for c in sys.argv[2].split("|") if c], [p for p in sys.argv[3].split("|") if p]
args = ["hyperfine", "-N", "--warmup", "3", "--runs", "30", "--export-json", out]
for p in prepares: args += ["--prepare", p]
subprocess.run(args + cmds, check=True, stdout=subprocess.DEVNULL)
PY
done
rss=$( { /usr/bin/time -v env XDG_DATA_HOME="$tmp/r10000/data" XDG_CONFIG_HOME="$tmp/r10000/config" "$bin" list --json >/dev/null; } 2>&1 \
  | sed -n 's/.*Maximum resident set size (kbytes): //p')
python3 - "$tmp" "$rss" <<'PY'
import json, sys
tmp, rss = sys.argv[1], int(sys.argv[2])
ok = True
print(f"{'command':<16}{'1 slot':>10}{'100':>10}{'1000':>10}{'10000':>10}   growth 1000/1, 10000/1")
for name, label, target in [("list", "list --json", 2.0), ("which", "which", 1.3), ("status", "status SLOT", 1.3),
                            ("switch", "switch SLOT", 1.3), ("token", "token (file)", 1.3)]:
    medians = [r["median"] * 1000 for r in json.load(open(f"{tmp}/{name}.json"))["results"]]
    g1000, g10000 = medians[2] / medians[0], medians[3] / medians[0]
    # list's target is at 1,000 slots; the others must not grow at all (1.3x: noise on a shared machine).
    missed = g1000 > target if name == "list" else g10000 > target
    ok &= not missed
    cells = "".join(f"{m:8.2f}ms" for m in medians)
    print(f"{label:<16}{cells}   {g1000:.2f}x, {g10000:.2f}x (target <= {target}{' at 1000' if name == 'list' else ' at 10000'})"
          + ("  MISSED" if missed else ""))
print(f"peak RSS of list --json at 10000 slots: {rss / 1024:.1f} MB (target <= 40 MB){'' if rss <= 40 * 1024 else '  MISSED'}")
ok &= rss <= 40 * 1024
sys.exit(0 if ok else 1)
PY
