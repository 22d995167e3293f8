#!/usr/bin/env bash
# Installs the dependencies, builds vufsd twice (plain, and with ASan+UBSan) and
# runs every test on both: unit, integration (the real binary through the in-tree
# frontend), real Linux guests under QEMU, and the fuzzers; checks that every
# product function has a product caller (scripts/uncalled.sh); packs both
# benchmark kits and runs the vufs-bench kit's smoke mode in a bare Debian 12
# root (scripts/kit.sh, scripts/kit/bare-root.sh).
#
#   scripts/test.sh              everything
#   VUFS_NO_INSTALL=1 scripts/test.sh   skip apt-get (packages already there)
#   VUFS_FUZZ_SECONDS=N          seconds per fuzz target (default 60; 0 skips fuzzing)
{
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

bash scripts/deps.sh

step() { printf '\n== %s\n' "$*"; }

setup() { # setup DIR [meson options...]
    local dir=$1
    shift
    if [ -d "$dir" ]; then
        meson setup --reconfigure "$dir" "$@" >"$dir.setup.log" 2>&1 ||
            { cat "$dir.setup.log"; return 1; }
    else
        meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
    fi
}

step "build: plain (werror)"
setup build -Dwerror=true -Dtests=enabled
meson compile -C build

step "build: ASan + UBSan (werror)"
setup build-asan -Dwerror=true -Dtests=enabled -Db_sanitize=address,undefined -Db_lundef=false
meson compile -C build-asan

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1

step "check: every product function has a product caller (scripts/uncalled.sh)"
scripts/uncalled.sh build-uncalled

step "test: plain build, every suite"
meson test -C build --print-errorlogs --num-processes 2

step "test: ASan + UBSan build, unit and integration suites"
meson test -C build-asan --print-errorlogs --num-processes 2 --no-suite guest

step "kits: pack both (scripts/kit.sh), the vufs-bench kit's smoke run in a bare Debian 12 root"
bash scripts/kit.sh bench -o build/vufs-bench-kit.tar.gz
bash scripts/kit.sh guest -o build/vufs-guest-kit.run
scripts/kit/bare-root.sh --copy build/vufs-bench-kit.tar.gz -- sh -c \
    'rm -rf vufs-bench-kit smoke && tar -xzf vufs-bench-kit.tar.gz && ./vufs-bench-kit/run smoke smoke'

fuzz_seconds=${VUFS_FUZZ_SECONDS:-60}
if [ "$fuzz_seconds" != 0 ] && [ -x scripts/fuzz.sh ]; then
    step "fuzz: each target for ${fuzz_seconds}s"
    scripts/fuzz.sh "$fuzz_seconds"
fi

step "all tests passed"
cd "$top"
exit 0
}
