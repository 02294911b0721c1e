#!/bin/sh
# Where the time of one `lanyard token` goes, phase by phase, and the start-up targets:
#   --version <= 1.3x a static Swift hello-world built here with the release flags;
#   peak RSS of `lanyard token` <= 12 MB (/usr/bin/time -v).
# The phases come from the binary itself (LANYARD_TRACE_STARTUP=1: milliseconds on stderr, the
# median of 30 runs each); perf stat, LD_DEBUG=statistics and strace -c add page faults,
# relocations and system calls. Runs inside a private keyring session (scripts/with-keyring.sh) so
# the Secret Service backend is measured too. Exits 1 when a target is missed.
set -eu
if [ "${LANYARD_TEST_KEYRING:-}" != 1 ]; then exec scripts/with-keyring.sh sh "$0" "$@"; fi
bin=${LANYARD_BIN:-.build/release/lanyard}
root=$PWD
tmp=$(mktemp -d)
trap 'XDG_DATA_HOME="$tmp/file/data" XDG_CONFIG_HOME="$tmp/file/config" "$bin" store lock >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

# The reference: `import Foundation; print(...)`, static Swift stdlib, the Makefile's RELEASE_FLAGS.
hello=$root/.build/bench-hello
mkdir -p "$hello/Sources/hello"
printf '%s\n' '// swift-tools-version:6.0' 'import PackageDescription' \
  'let package = Package(name: "hello", targets: [.executableTarget(name: "hello")])' > "$hello/Package.swift"
printf '%s\n' 'import Foundation' 'print("hello 0.1.0")' > "$hello/Sources/hello/main.swift"
flags=$(make -s -C "$root" --no-print-directory -f - print-flags <<'MK'
include Makefile
print-flags: ; @echo $(RELEASE_FLAGS)
MK
)
# shellcheck disable=SC2086
(cd "$hello" && swift build $flags --quiet 2>/dev/null)
hello_bin="$hello/.build/release/hello"
# For information: the same hello using FoundationEssentials (Data, Date, FileManager, JSONDecoder,
# ProcessInfo), the floor for any Swift program that reads files and JSON without full Foundation.
hello_fe=$root/.build/bench-hello-fe
mkdir -p "$hello_fe/Sources/hello"
printf '%s\n' '// swift-tools-version:6.0' 'import PackageDescription' \
  'let package = Package(name: "hello", targets: [.executableTarget(name: "hello")])' > "$hello_fe/Package.swift"
cat > "$hello_fe/Sources/hello/main.swift" <<'SWIFT'
import FoundationEssentials
let data = Data("[]".utf8)
if CommandLine.arguments.count > 5 {
    print(Date().timeIntervalSince1970, FileManager.default.fileExists(atPath: "/"), ProcessInfo.processInfo.environment.count,
          (try? JSONDecoder().decode([String].self, from: data)) ?? [])
}
print("hello 0.1.0")
SWIFT
# shellcheck disable=SC2086
(cd "$hello_fe" && swift build $flags --quiet 2>/dev/null)
hello_fe_bin="$hello_fe/.build/release/hello"

# Commands of the file store run in a subshell with its folders exported (not through env(1),
# whose own start would count as lanyard's: CPU clocks and perf count the whole process).
filestore() ( export XDG_DATA_HOME="$tmp/file/data" XDG_CONFIG_HOME="$tmp/file/config"; "$@" )
# A file store (no passphrase) and a keyring item for the same slot, in two data folders.
mkdir -p "$tmp/file/data" "$tmp/file/config/lanyard"
printf '[store]\nbackend = file\n' > "$tmp/file/config/lanyard/config.ini"
tool=$(dirname "$bin")/lanyard-test-tool
# Passphrase-protected and unlocked, as in bench/token-file.sh: token reads the identity from the
# kernel keyring's unlock cache, then decrypts the store.
printf 'bench passphrase\n' > "$tmp/pass"; chmod 600 "$tmp/pass"
LANYARD_PASSPHRASE_FILE="$tmp/pass" filestore "$bin" store init >/dev/null
filestore "$tool" file-put bench 1 >/dev/null
filestore "$bin" doctor --repair >/dev/null || true
filestore "$bin" token bench-0 >/dev/null || { echo "startup: file store setup failed" >&2; exit 1; }
printf '%s' '{"account":{"email":"bench@example.com","fedramp":false},"provider":"openai","tokens":{"access_token":"bench-access-token","expires_at":"2099-01-01T00:00:00Z","refresh_token":"bench-refresh"},"version":1}' |
  secret-tool store --label='Lanyard: bench' xdg:schema dev.lanyard.Credential slot bench provider openai account-id ''
"$bin" doctor --repair >/dev/null || true
"$bin" token bench >/dev/null || { echo "startup: keyring setup failed" >&2; exit 1; }

phases() { # LABEL SLOT [file]: the median of each traced phase over 30 runs
  label=$1 slot=$2 run=${3:-}
  i=0; : > "$tmp/trace"
  while [ $i -lt 30 ]; do
    LANYARD_TRACE_STARTUP=1 $run "$bin" token "$slot" 2>>"$tmp/trace" >/dev/null; i=$((i+1))
  done
  python3 - "$label" "$tmp/trace" <<'PY'
import statistics, sys
label, path = sys.argv[1], sys.argv[2]
runs = [dict(kv.split("=") for kv in line.split()[1:]) for line in open(path) if line.startswith("startup:")]
names = list(runs[0].keys())
print(f"{label}: phases (ms, median of {len(runs)} runs)")
for n in names:
    print(f"  {n:<10} {statistics.median(float(r[n]) for r in runs):6.2f}")
PY
}
echo "== phases of \`lanyard token\` (LANYARD_TRACE_STARTUP=1) =="
phases "file store (unlocked)" bench-0 filestore
phases "Secret Service (gnome-keyring)" bench

echo "== perf stat (30 runs: task-clock ms, page faults) =="
if command -v perf >/dev/null 2>&1 && perf stat -e task-clock true >/dev/null 2>&1; then
  pstat() { # LABEL CMD...
    label=$1; shift
    perf stat -x, -r 30 -e task-clock,page-faults "$@" 2>"$tmp/perf" >/dev/null
    awk -F, -v l="$label" '/task-clock/ {t=$1} /page-faults/ {p=$1} END {printf "  %-34s task-clock %6.2f ms   page-faults %5d\n", l, t, p}' "$tmp/perf"
  }
  pstat "hello (static Swift + Foundation)" "$hello_bin"
  pstat "hello with FoundationEssentials" "$hello_fe_bin"
  pstat "lanyard --version" "$bin" --version
  filestore pstat "lanyard token (file)" "$bin" token bench-0
  pstat "lanyard token (Secret Service)" "$bin" token bench
  pstat "secret-tool lookup" secret-tool lookup xdg:schema dev.lanyard.Credential slot bench
else
  echo "  perf is not available (apt-get install linux-perf); skipped"
fi

echo "== dynamic loading (LD_DEBUG=statistics) and system calls (strace -c -f) of --version =="
LD_DEBUG=statistics "$bin" --version 2>&1 >/dev/null |
  sed -n 's/^ *[0-9]*:[[:space:]]*\(total startup time in dynamic loader\|number of relative relocations\|final number of relocations\):/  \1:/p'
echo "  libraries loaded: $(LD_DEBUG=libs "$bin" --version 2>&1 >/dev/null | sed -n 's/.*calling init: //p' | xargs -n1 basename | tr '\n' ' ')"
if command -v strace >/dev/null 2>&1; then
  strace -c -f "$bin" --version 2>&1 >/dev/null | awk '/total$/ {print "  system calls: " $(NF-2) " (" $(NF-1) " failed)"}'
  filestore strace -c -f -o "$tmp/strace" "$bin" token bench-0 >/dev/null
  awk '/total$/ {print "  system calls of token (file): " $(NF-2)}' "$tmp/strace"
  strace -c -f -o "$tmp/strace" "$bin" token bench >/dev/null
  awk '/total$/ {print "  system calls of token (Secret Service): " $(NF-2)}' "$tmp/strace"
fi

hyperfine -N --warmup 20 --runs 200 --export-json "$tmp/version.json" \
  -n "lanyard --version" "$bin --version" -n "static Swift hello" "$hello_bin" \
  -n "static Swift hello with FoundationEssentials" "$hello_fe_bin" >/dev/null
rss_file=$(filestore /usr/bin/time -v "$bin" token bench-0 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p')
rss_ss=$(/usr/bin/time -v "$bin" token bench 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p')
rss_st=$(/usr/bin/time -v secret-tool lookup xdg:schema dev.lanyard.Credential slot bench 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p')
rss_hello=$(/usr/bin/time -v "$hello_fe_bin" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p')
python3 - "$tmp/version.json" "$rss_file" "$rss_ss" "$rss_st" "$rss_hello" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
v, h, fe = r[0]["median"] * 1000, r[1]["median"] * 1000, r[2]["median"] * 1000
rss = {"file": int(sys.argv[2]) / 1024, "Secret Service": int(sys.argv[3]) / 1024}
print("== targets ==")
ok = v / h <= 1.3
print(f"lanyard --version: {v:6.2f} ms   static Swift hello: {h:6.2f} ms   ratio {v/h:.2f} (target <= 1.3){'' if ok else '  MISSED'}")
print(f"  for information: hello with FoundationEssentials {fe:6.2f} ms ({fe/h:.2f}x hello); lanyard --version is {v/fe:.2f}x of it")
for name, mb in rss.items():
    good = mb <= 12
    ok = ok and good
    print(f"peak RSS of lanyard token ({name}): {mb:5.1f} MB (target <= 12){'' if good else '  MISSED'}")
print(f"  for information: peak RSS of secret-tool lookup {int(sys.argv[4]) / 1024:.1f} MB, of the FoundationEssentials hello {int(sys.argv[5]) / 1024:.1f} MB")
sys.exit(0 if ok else 1)
PY
