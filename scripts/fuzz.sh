#!/usr/bin/env bash
# Fuzz the Age module, the store JSON, the streaming parsers, the credential-helper protocols, the
# parsers of server answers and the files other hands write (config, auth.json, bundles, the
# registry) with libFuzzer.
#
#   scripts/fuzz.sh [SECONDS]    # total time, split evenly across harnesses (default 60)
#
# SwiftPM builds the modules once from Package.swift, whole, with libFuzzer's coverage
# instrumentation and ASan (both come with the Swift toolchain) in .build/fuzz/spm; each harness
# in Fuzz/ imports the modules it tests and is linked with their objects, then runs from the seeds
# in Fuzz/seeds/<name> with a working corpus under .build/fuzz (never committed).
# Exits non-zero if any harness crashes; the reproducer is in .build/fuzz/artifacts.
set -euo pipefail

total=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.build/fuzz"
harnesses=(header armor store stream helpers responses documents)
per=$(( total / ${#harnesses[@]} ))
(( per >= 1 )) || per=1
swift=${SWIFT:-swift}
swiftc=${SWIFTC:-swiftc}

mkdir -p "$out/artifacts"
# Let ASan/libFuzzer report crashes; the Swift backtracer can hang under ASan.
export SWIFT_BACKTRACE=enable=no
status=0

# The harnesses' modules and every module below them. -enable-testing lets the Age harnesses reach
# Age's internal API (`@testable import Age`); the others use package API.
spm=(-c release --build-path "$out/spm" --sanitize fuzzer --sanitize address -Xswiftc -enable-testing -Xswiftc -g)
echo "== building the modules"
# CLazyLoading by name: only C targets depend on it, and `--target` compiles such a target for none of the others.
for target in LanyardIntegrations LanyardNetwork LanyardDesktop CLazyLoading; do
    if ! "$swift" build "${spm[@]}" --target "$target" > "$out/modules.build.log" 2>&1; then
        grep -E 'error:' -A3 "$out/modules.build.log" >&2 || tail -20 "$out/modules.build.log" >&2
        echo "FAIL: $target did not build for fuzzing" >&2
        exit 1
    fi
done
products=$("$swift" build "${spm[@]}" --show-bin-path)
# The objects SwiftPM would link into a binary: each target's File.swift.o and file.c.o, leaving
# out those of sources removed since they were built.
objects=()
for folder in "$products"/*.build; do
    target=${folder##*/}; target=${target%.build}
    [[ -d "$root/Sources/$target" ]] || continue
    for object in "$folder"/*.o; do
        [[ -e $object ]] || continue
        source=${object##*/}
        if [[ -n $(find "$root/Sources/$target" -name "${source%.o}" -print -quit) ]]; then objects+=("$object"); fi
    done
done
# The harnesses use package API, so they are compiled into the package: with the package name
# SwiftPM passed its modules (the package identity, which comes from the checkout's folder name).
package=$(grep -m1 -A1 '"-package-name"' "$products/description.json" | tail -1 | tr -d ' ",')
[[ -n $package ]] || { echo "FAIL: no -package-name in $products/description.json" >&2; exit 1; }
# Where the compiler finds the modules and the C modules below them: the module maps in Sources/C*/
# and those SwiftPM wrote for the C targets, and GLib's headers.
flags=(-I "$products/Modules")
for map in "$products"/*.build/module.modulemap; do flags+=(-Xcc -fmodule-map-file="$map"); done
for folder in "$root"/Sources/C*; do [[ -f "$folder/module.modulemap" ]] && flags+=(-I "$folder"); done
for include in $(pkg-config --cflags-only-I glib-2.0); do flags+=(-Xcc "$include"); done

# build_harness NAME: compiles Fuzz/NAMEFuzz.swift against the modules and links it with their
# objects into $out/NAME-fuzzer; its compiler output goes to $out/NAME.build.log.
build_harness() {
    local name=$1
    mkdir -p "$out/build/$name"
    (cd "$out/build/$name" &&
     "$swiftc" -O -g -sanitize=fuzzer,address -parse-as-library -module-name "${name^}Fuzz" -package-name "$package" \
        "${flags[@]}" "$root/Fuzz/${name^}Fuzz.swift" "${objects[@]}" -o "$out/$name-fuzzer") > "$out/$name.build.log" 2>&1
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
