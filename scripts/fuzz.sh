#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# scripts/fuzz.sh SECONDS [TARGET...]
#
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS
# from its seed corpus in tests/fuzz/corpus/<target>/ (SECONDS = 0: only replay
# the corpus, seeds and regression inputs, once). Exits non-zero on any finding:
# a crash, a leak, a UBSan report, a timeout or an out-of-memory.
#
# Findings are left in $FUZZ_OUT/<target>/ (crash-*, leak-*, timeout-*, oom-*)
# with the log; copy a crash input into tests/fuzz/corpus/<target>/regress-<what>
# once it is fixed, so it is replayed forever after.
#
# Environment:
#   FUZZ_BUILD_DIR  build directory (default build-fuzz in the checkout)
#   FUZZ_OUT        working corpus, findings, logs (default $FUZZ_BUILD_DIR/fuzz-out)
#   CC              the clang to use (default clang-14)
#   FUZZ_ARGS       extra libFuzzer arguments
set -eu

usage() {
    echo "usage: $0 SECONDS [TARGET...]" >&2
    exit 2
}

[ $# -ge 1 ] || usage
secs=$1
shift
case $secs in
'' | *[!0-9]*) usage ;;
esac

src=$(cd "$(dirname "$0")/.." && pwd)
# Inside the checkout by default, so two checkouts never share (and build each
# other's sources in) one fuzz build directory.
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
out=${FUZZ_OUT:-$build/fuzz-out}
cc=${CC:-clang-14}

if [ ! -f "$build/build.ninja" ]; then
    CC=$cc meson setup "$build" "$src" -Dfuzzing=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dtests=disabled -Dwerror=true >"$build.setup.log" 2>&1 || {
        tail -20 "$build.setup.log" >&2
        echo "fuzz.sh: meson setup failed (log: $build.setup.log)" >&2
        exit 1
    }
fi
meson compile -C "$build" >"$build.compile.log" 2>&1 || {
    grep -E 'error|FAILED' "$build.compile.log" | head -20 >&2
    echo "fuzz.sh: build failed (log: $build.compile.log)" >&2
    exit 1
}

if [ $# -eq 0 ]; then
    set -- $(cd "$build/tests/fuzz" && ls | grep '^fuzz_[a-z_]*$' | sort)
fi
[ $# -gt 0 ] || { echo "fuzz.sh: no fuzz targets were built" >&2; exit 1; }

# Every sanitizer report is fatal; leaks are checked (libFuzzer -detect_leaks).
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:print_summary=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1

failed=0
for t in "$@"; do
    exe=$build/tests/fuzz/$t
    seeds=$src/tests/fuzz/corpus/$t
    work=$out/$t
    if [ ! -x "$exe" ]; then
        echo "$t: not built" >&2
        failed=1
        continue
    fi
    mkdir -p "$work/corpus" "$seeds"
    rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-*
    log=$work/log.txt
    rc=0
    # New inputs go to the working corpus, never into the tree's seeds.
    # shellcheck disable=SC2086
    if [ "$secs" -eq 0 ]; then
        "$exe" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$work/" ${FUZZ_ARGS:-} -runs=0 "$seeds" >"$log" 2>&1 || rc=$?
    else
        "$exe" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$work/" ${FUZZ_ARGS:-} -max_total_time="$secs" \
            "$work/corpus" "$seeds" >"$log" 2>&1 || rc=$?
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    findings=$(ls "$work" | grep -cE '^(crash|leak|timeout|oom)-' || true)
    if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ] ||
        grep -qE 'runtime error:|ERROR: (AddressSanitizer|LeakSanitizer)' "$log"; then
        echo "$t: FINDING (exit $rc, ${runs:-?} runs) - see $log"
        grep -E 'runtime error:|ERROR:|SUMMARY:|invariant broken|Test unit written' "$log" | head -8
        failed=1
    else
        echo "$t: ok (${runs:-?} runs, ${secs}s)"
    fi
done
exit $failed
