#!/usr/bin/env bash
# Fuzz the Age module, the store JSON, the streaming parsers, the credential-helper protocols, the
# parsers of server answers and the files other hands write (config, auth.json, bundles, the
# registry) with libFuzzer.
#
#   scripts/fuzz.sh [SECONDS]    # total time, split evenly across harnesses (default 60)
#
# Each harness in Fuzz/ is compiled together with the sources it tests by swiftc
# (libFuzzer and ASan come with the Swift toolchain), then run from the seeds in
# Fuzz/seeds/<name> with a working corpus under .build/fuzz (never committed).
# Exits non-zero if any harness crashes; the reproducer is in .build/fuzz/artifacts.
set -euo pipefail

total=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.build/fuzz"
harnesses=(header armor store stream helpers responses documents)
per=$(( total / ${#harnesses[@]} ))
(( per >= 1 )) || per=1
swiftc=${SWIFTC:-swiftc}

mkdir -p "$out/artifacts"
# Let ASan/libFuzzer report crashes; the Swift backtracer can hang under ASan.
export SWIFT_BACKTRACE=enable=no
status=0
# Sources of other modules are compiled into a harness's module with their `import Lanyard…` lines
# removed (copies under .build/fuzz/src/HARNESS).
module_files() { # MODULE FILE…   (for the harness in $name)
    local module=$1; shift
    mkdir -p "$out/src/$name"
    for f in "$@"; do sed -e '/^import Lanyard/d' -e '/^import Age$/d' "$root/Sources/$module/$f.swift" > "$out/src/$name/${f##*/}.swift"; done
}
# LanyardSupport and LanyardCore: pure Swift (the OS plumbing and its C call live in LanyardSystem).
mkdir -p "$out/src/core"
for f in "$root"/Sources/LanyardSupport/*.swift "$root"/Sources/LanyardCore/*.swift; do
    sed -e '/^import Lanyard/d' "$f" > "$out/src/core/${f##*/}"
done
core=("$out"/src/core/*.swift)
# build_harness NAME: compiles NAME's harness with the sources it needs (whole-module, two threads:
# half the time of file-by-file) into $out/NAME-fuzzer; its compiler output goes to $out/NAME.build.log.
build_harness() {
    local name=$1 src="$root/Fuzz/${1^}Fuzz.swift" sources
    case $name in
        store) sources=("${core[@]}") ;;   # pure Swift: the JSON reader and documents
        stream)   # the pure streaming parsers
            module_files LanyardNetwork Streaming/ServerSentEvents Streaming/ReplayGuard Streaming/ResponseEvents
            module_files LanyardAuth AuthErrors
            sources=("${core[@]}" "$out"/src/stream/*.swift) ;;
        helpers)  # the protocols other programs speak to Lanyard (git, Docker, Kubernetes, netrc)
            module_files LanyardIntegrations GitCredential CredentialHelpers
            module_files LanyardStore StoreErrors
            module_files LanyardAuth AuthErrors
            sources=("${core[@]}" "$out"/src/helpers/*.swift) ;;
        responses)  # what servers answer: the parsing files of LanyardAuth
            module_files LanyardAuth Provider Usage HTTP Providers/DeviceAuthorizationAnswers AuthErrors
            module_files LanyardStore StoreErrors
            sources=("${core[@]}" "$out"/src/responses/*.swift) ;;
        documents)  # files other hands write: config.ini, auth.json, bundles, the registry
            module_files LanyardStore ConfigFile RegistryDocument SlotRecordReader CredentialStore PinFile
            module_files LanyardSystem SystemCall
            module_files LanyardIntegrations CodexAuthFile ExportBundle
            module_files LanyardAuth AuthErrors
            module_files LanyardStore StoreErrors
            sources=("${core[@]}" "$root"/Sources/Age/*.swift "$out"/src/documents/*.swift) ;;
        *) sources=("$root"/Sources/Age/*.swift) ;;
    esac
    # In a folder of its own: a whole-module build leaves the module's files where it runs.
    mkdir -p "$out/build/$name"
    (cd "$out/build/$name" &&
     "$swiftc" -O -g -wmo -num-threads 2 -sanitize=fuzzer,address -parse-as-library -module-name AgeFuzz \
        -package-name LanyardFuzz -I "$root/Sources/CSodium" -lsodium \
        "${sources[@]}" "$src" -o "$out/$name-fuzzer") > "$out/$name.build.log" 2>&1
}

# Each harness is built while the one before it runs (a fuzzer uses one core).
build_harness "${harnesses[0]}" & building=$!
for index in "${!harnesses[@]}"; do
    name=${harnesses[$index]}
    bin="$out/$name-fuzzer"
    echo "== building $name harness"
    if ! wait "$building"; then
        grep -v 'Cannot export local symbol' "$out/$name.build.log" >&2
        echo "FAIL: the $name harness did not build" >&2
        exit 1
    fi
    next=${harnesses[$((index + 1))]:-}
    if [[ -n $next ]]; then build_harness "$next" & building=$!; fi

    mkdir -p "$out/corpus/$name"
    dict=()
    [[ -f "$root/Fuzz/$name.dict" ]] && dict=(-dict="$root/Fuzz/$name.dict")
    echo "== fuzzing $name for ${per}s"
    if ! "$bin" -max_total_time="$per" -print_final_stats=1 -rss_limit_mb=2048 \
        -artifact_prefix="$out/artifacts/$name-" "${dict[@]}" \
        "$out/corpus/$name" "$root/Fuzz/seeds/$name"; then
        echo "FAIL: $name harness crashed; reproducer in $out/artifacts/ (run: $bin <file>)" >&2
        status=1
    fi
done
exit $status
