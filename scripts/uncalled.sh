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
# The programs: vufsd speaks for the daemon's modules (daemon/, fuse_lowlevel/,
# dax/, sandbox/); vufs-frontend, vufs-bench and the integration tests that drive
# vufsd through the frontend speak for frontend/ (it exists to be the daemon's
# test peer). Unit tests never count as callers.
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

# Program -> the objects it speaks for (an extended regex over their paths).
declare -A speaks=([vufsd]=. [vufs-frontend]=. [vufs-bench]=.)
while read -r name; do
    if ninja -C "$dir" -t commands "$name" | tail -n 1 | grep -q 'frontend/libvfe\.a'; then
        speaks[$name]='^frontend/'
    fi
done < <(meson introspect "$dir" --targets | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["type"] == "executable" and "/tests/integration/" in t["defined_in"]:
        print(os.path.relpath(t["filename"][0], os.path.abspath(sys.argv[1])))
' "$dir")
programs=("${!speaks[@]}")
meson compile -C "$dir" "${programs[@]}" >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in "${programs[@]}"; do
    f=${p//\//_}
    cmd=$(ninja -C "$dir" -t commands "$p" | tail -n 1)
    cmd=$(sed -E -e 's#(^| )-o [^ ]+# -o /dev/null#' \
        -e 's#-Wl,--start-group#-Wl,--start-group -Wl,--whole-archive#' \
        -e 's#-Wl,--end-group#-Wl,--no-whole-archive -Wl,--end-group#' <<<"$cmd")
    (cd "$dir" && eval "$cmd -Wl,--gc-sections -Wl,--print-gc-sections") 2>&1 |
        sed -nE "s/.*removing unused section '\.text\.(unlikely\.|hot\.|startup\.)?([^']+)' in file '([^']+)'.*/\3 \2/p" |
        sort -u >"$tmp/$f.removed"
    (cd "$dir" && eval "$cmd -Wl,--trace") 2>/dev/null | grep -E '\.o$' | grep -E "${speaks[$p]}" |
        sort -u >"$tmp/$f.objs" || true
done

# Uncalled: removed by every program that links the file and speaks for it.
cat "$tmp"/*.removed | sort -u | while read -r obj fn; do
    linked=0 kept=0
    for p in "${programs[@]}"; do
        f=${p//\//_}
        grep -qxF "$obj" "$tmp/$f.objs" || continue
        linked=1
        grep -qxF "$obj $fn" "$tmp/$f.removed" || kept=1
    done
    if [ $linked = 1 ] && [ $kept = 0 ]; then echo "$obj $fn"; fi
done >"$tmp/uncalled"

# Each object's source file, from the compile commands.
python3 - "$dir" "$tmp/uncalled" <<'PY'
import json, os, sys
builddir, listing = sys.argv[1], sys.argv[2]
src = {}
for c in json.load(open(os.path.join(builddir, "compile_commands.json"))):
    src[os.path.normpath(c["output"])] = os.path.normpath(os.path.join(c["directory"], c["file"]))
for line in sorted(open(listing)):
    obj, fn = line.split()
    f = src.get(os.path.normpath(obj), obj)
    print(f"{os.path.relpath(f) if os.path.isabs(f) else f}: {fn}")
PY
[ ! -s "$tmp/uncalled" ]
