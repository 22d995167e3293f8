#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Lists product functions that no product program calls: every function of the
# modules' static libraries and of the programs' own files that the linker,
# asked to keep only what a program's entry point reaches, throws away. Each
# program is linked once more with its libraries whole (--whole-archive), every
# function in a section of its own (-ffunction-sections) and --gc-sections; what
# --print-gc-sections names is unreachable from main(), through calls, function
# pointers in tables and data alike. A function counts as called when one
# program that links it keeps it. The build is -O0, so an inlined call still
# leaves a reference to the function it calls.
#
# The programs: vufsd alone speaks for the daemon's modules (daemon/,
# fuse_lowlevel/, dax/, sandbox/): a function only a test calls is not called.
# frontend/ exists to be the daemon's test peer: vufs-frontend, vufs-bench and
# every test program that links it speak for it (its introspection serves its
# own unit tests, which cannot reach its opaque structs otherwise).
#
# Usage: scripts/uncalled.sh [BUILD_DIR]   (default build-uncalled; set up if missing)
# Prints "file: function" for each uncalled function; exits 1 when there is one.
set -euo pipefail

cd "$(dirname "$0")/.."
dir=${1:-build-uncalled}
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --buildtype=debug -Dtests=enabled \
        -Dc_args='-ffunction-sections -fdata-sections' >/dev/null
fi

# Program -> the sources whose functions it speaks for (an extended regex over
# their paths in the tree).
declare -A speaks=([vufsd]=. [vufs-frontend]=. [vufs-bench]=.)
while read -r name; do
    if ninja -C "$dir" -t commands "$name" | tail -n 1 | grep -q 'libvfe\.a'; then
        speaks[$name]='^frontend/'
    fi
done < <(meson introspect "$dir" --targets | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["type"] == "executable" and "/tests/" in t["defined_in"]:
        print(os.path.relpath(t["filename"][0], os.path.abspath(sys.argv[1])))
' "$dir")
programs=("${!speaks[@]}")
meson compile -C "$dir" "${programs[@]}" >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each object and the source it was compiled from, relative to the tree.
python3 - "$dir" >"$tmp/srcmap" <<'PY'
import json, os, sys
root = os.getcwd()
for c in json.load(open(os.path.join(sys.argv[1], "compile_commands.json"))):
    src = os.path.normpath(os.path.join(c["directory"], c["file"]))
    print(os.path.normpath(c["output"]), os.path.relpath(src, root))
PY
for p in "${programs[@]}"; do
    f=${p//\//_}
    cmd=$(ninja -C "$dir" -t commands "$p" | tail -n 1)
    cmd=$(sed -E -e 's#(^| )-o [^ ]+# -o /dev/null#' \
        -e 's#-Wl,--start-group#-Wl,--start-group -Wl,--whole-archive#' \
        -e 's#-Wl,--end-group#-Wl,--no-whole-archive -Wl,--end-group#' <<<"$cmd")
    (cd "$dir" && eval "$cmd -Wl,--gc-sections -Wl,--print-gc-sections") 2>&1 |
        sed -nE "s/.*removing unused section '\.text\.(unlikely\.|hot\.|startup\.)?([^']+)' in file '([^']+)'.*/\3 \2/p" |
        sort -u >"$tmp/$f.removed"
    # The objects it links whose sources it speaks for.
    (cd "$dir" && eval "$cmd -Wl,--trace") 2>/dev/null | grep -E '\.o$' | sort -u |
        join - <(sort "$tmp/srcmap") | awk -v re="${speaks[$p]}" '$2 ~ re {print $1}' \
        >"$tmp/$f.objs" || true
done

# Uncalled: removed by every program that links the object and speaks for it.
cat "$tmp"/*.removed | sort -u | while read -r obj fn; do
    linked=0 kept=0
    for p in "${programs[@]}"; do
        f=${p//\//_}
        grep -qxF "$obj" "$tmp/$f.objs" || continue
        linked=1
        grep -qxF "$obj $fn" "$tmp/$f.removed" || kept=1
    done
    if [ $linked = 1 ] && [ $kept = 0 ]; then echo "$obj $fn"; fi
done | sort | join - <(sort "$tmp/srcmap") | awk '{print $3 ": " $2}' | sort >"$tmp/uncalled"
cat "$tmp/uncalled"
[ ! -s "$tmp/uncalled" ]
