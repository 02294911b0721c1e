#!/bin/sh
# The file store sealed by a TPM (store init --tpm), against a software TPM (swtpm, socket mode,
# a fresh state): `lanyard token` with the unsealed identity cached in the kernel keyring (the hot
# path, which never touches the TPM) against `age -d -i RECOVERY-KEY` of the same store, in 5
# rounds gated like token-file (bench/gate.py `token-tpm`, target <= 1.25); then a cold `token`
# (the cache purged before each run: the TPM unseals the identity) against the hot one, for
# information (docs/performance.md, "TPM-sealed file store").
set -eu
bin=${LANYARD_BIN:-.build/release/lanyard}
tool=$(dirname "$bin")/lanyard-test-tool
[ -x "$tool" ] || tool=.build/debug/lanyard-test-tool
command -v swtpm >/dev/null || { echo "token-tpm: swtpm is not installed (scripts/deps.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
export HOME="$tmp/home" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_RUNTIME_DIR="$tmp/run" XDG_STATE_HOME="$tmp/state"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME/lanyard" "$tmp/tpm" && chmod 700 "$XDG_RUNTIME_DIR"
printf '[store]\nbackend = file\n' > "$XDG_CONFIG_HOME/lanyard/config.ini"
unset DBUS_SESSION_BUS_ADDRESS LANYARD_PASSPHRASE_FILE LANYARD_ASKPASS
# Two free loopback ports (swtpm takes no port 0).
port=$(python3 -c 'import socket
for _ in range(50):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    t = socket.socket()
    try: t.bind(("127.0.0.1", p + 1)); t.close(); print(p); break
    except OSError: t.close()')
swtpm socket --tpm2 --tpmstate dir="$tmp/tpm" --server type=tcp,bindaddr=127.0.0.1,port="$port" \
  --ctrl type=tcp,bindaddr=127.0.0.1,port=$((port + 1)) --flags not-need-init,startup-clear &
swtpm_pid=$!
trap '"$bin" store lock >/dev/null 2>&1; kill -9 $swtpm_pid 2>/dev/null; rm -rf "$tmp"' EXIT
export TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$port"
for _ in $(seq 100); do "$bin" store init --tpm --recovery-file "$tmp/recovery.txt" >/dev/null 2>&1 && break; sleep 0.1; done
[ -s "$tmp/recovery.txt" ] || { echo "token-tpm: store init --tpm failed" >&2; exit 1; }
"$tool" file-put bench 1 >/dev/null
"$bin" doctor --repair >/dev/null || true
"$bin" token bench-0 >/dev/null || { echo "token-tpm: setup failed" >&2; exit 1; }
for round in 1 2 3 4 5; do
  hyperfine -N --warmup 5 --runs 30 --export-json "$tmp/token-$round.json" \
    -n "lanyard token (TPM store, cached)" "$bin token bench-0" \
    -n "age -d -i" "age -d -i $tmp/recovery.txt $XDG_DATA_HOME/lanyard/store.age" >/dev/null
done
hyperfine -N --warmup 3 --runs 30 --prepare "$bin store lock" --export-json "$tmp/cold.json" \
  -n "lanyard token (cold: TPM unseal)" "$bin token bench-0" >/dev/null
hyperfine -N --warmup 3 --runs 30 --export-json "$tmp/hot.json" -n "lanyard token (cached)" "$bin token bench-0" >/dev/null
python3 - "$tmp/cold.json" "$tmp/hot.json" <<'PY'
import json, sys
cold = json.load(open(sys.argv[1]))["results"][0]
hot = json.load(open(sys.argv[2]))["results"][0]
print(f"lanyard token, TPM store: cold (cache purged, swtpm unseals) {cold['median']*1000:.1f} ms "
      f"(min {cold['min']*1000:.1f}, max {cold['max']*1000:.1f}); cached {hot['median']*1000:.1f} ms; "
      f"the unseal costs {(cold['median'] - hot['median'])*1000:.1f} ms")
PY
echo "lanyard token (TPM store, cached) vs age -d -i (recovery key):"
python3 bench/gate.py rounds token-tpm 1.25 "$tmp"/token-*.json
