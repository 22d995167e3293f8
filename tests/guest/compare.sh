#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Run the guest suites against vufsd and against the legacy C daemon
# (/usr/lib/qemu/virtiofsd) one after the other, same guest, same scripts, and
# print a side-by-side table: POSIX check results, fio IOPS, boot-to-mount time.
#
#   compare.sh --suite BUILD/tests/guest/posix_suite [--vufsd BUILD/vufsd]
#              [--cache auto|always|none] [--fio-size 256M] [--only posix|fio]
#              [--daemons "vufsd legacy"] [--out DIR]
#
# Runs are sequential (the machine has 2 cores and TCG uses both). Exit status:
# 0 when every run passed, 1 otherwise. The table is also written to OUT/summary.md.
{
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
vufsd=$here/../../build/vufsd
suite=
cache=auto
fio_size=256M
only="posix fio"
daemons="vufsd legacy"
out=

while [ $# -gt 0 ]; do
    case "$1" in
    --vufsd) vufsd=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --fio-size) fio_size=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --daemons) daemons=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '4,14p' "$0" >&2; exit 2 ;;
    esac
done
case " $only " in *" posix "*) [ -x "${suite:-}" ] || { echo "compare: --suite PATH to posix_suite is needed" >&2; exit 2; } ;; esac
out=${out:-$(mktemp -d /tmp/vufs-compare.XXXXXX)}
mkdir -p "$out"

backend_cmd() {
    case "$1" in
    legacy)
        echo "/usr/lib/qemu/virtiofsd --socket-path={socket} -o source={dir} -o cache=$cache -o xattr" ;;
    vufsd)
        local c=$cache
        [ "$c" = none ] && c=never
        echo "$vufsd --socket-path {socket} --shared-dir {dir} --cache $c --xattr" \
             "--sandbox none --seccomp none --unsafe-no-isolation --log-level info" ;;
    esac
}

status=0
declare -A verdict
for d in $daemons; do
    for s in $only; do
        args=(--backend "$(backend_cmd "$d")" --rundir "$out/$d-$s" --timeout 900)
        case $s in
        posix) args+=(--script "$here/scripts/posix.sh" --file "$suite" --min-sums 1)
               # The legacy daemon has no FUSE_TMPFILE (the 6.1 guest sends it).
               [ "$d" = legacy ] && args+=(--set POSIX_XFAIL=o_tmpfile_linkat) ;;
        fio) args+=(--script "$here/scripts/fio-verify.sh" --set "FIO_SIZE=$fio_size" --min-sums 3) ;;
        esac
        echo "== $d: $s" >&2
        if "$here/run-guest.sh" "${args[@]}" > "$out/$d-$s.verdict" 2>&1; then
            verdict[$d-$s]=PASS
        else
            verdict[$d-$s]=FAIL
            status=1
        fi
        tail -n 1 "$out/$d-$s.verdict" | grep 'run-guest:' >&2 || tail -n 3 "$out/$d-$s.verdict" >&2
    done
done

field() { # field FILE REGEX: first match's group 1
    sed -n "s/$2/\\1/p" "$1" 2>/dev/null | head -n 1
}

{
    echo "# vufsd vs legacy virtiofsd (cache=$cache, fio size $fio_size)"
    echo
    printf '| item |'; for d in $daemons; do printf ' %s |' "$d"; done; echo
    printf '|---|'; for d in $daemons; do printf -- '---|'; done; echo
    for s in $only; do
        printf '| %s run |' "$s"; for d in $daemons; do printf ' %s |' "${verdict[$d-$s]:-}"; done; echo
        printf '| %s boot-to-mount (s) |' "$s"
        for d in $daemons; do
            printf ' %s |' "$(field "$out/$d-$s/output.log" '.*VUFS-GUEST-MOUNTED uptime=\([0-9.]*\).*')"
        done
        echo
    done
    case " $only " in *" posix "*)
        first=$(echo "$daemons" | cut -d' ' -f1)
        for c in $("$suite" -l); do
            printf '| posix %s |' "$c"
            for d in $daemons; do
                r=$(grep -a -o -E "^(PASS|FAIL|XFAIL) $c([: ].*)?" "$out/$d-posix/output.log" 2>/dev/null |
                    head -n 1 | tr -d '\r' | cut -c1-70)
                printf ' %s |' "${r:-not run}"
            done
            echo
        done
        printf '| posix summary |'
        for d in $daemons; do
            printf ' %s |' "$(grep -a -o '^[0-9]* passed, [0-9]* failed[^(]*' "$out/$d-posix/output.log" 2>/dev/null | head -n 1)"
        done
        echo
        : "$first" ;;
    esac
    case " $only " in *" fio "*)
        for j in randwrite-psync randread-psync randwrite-libaio randread-libaio seqread-1m control-read; do
            printf '| fio %s |' "$j"
            for d in $daemons; do
                l=$(grep -a -o "VUFS-FIO job=$j [^[:cntrl:]]*" "$out/$d-fio/output.log" 2>/dev/null | head -n 1)
                printf ' %s |' "${l#VUFS-FIO job=$j }"
            done
            echo
        done ;;
    esac
    echo
    echo "Logs: $out"
} | tee "$out/summary.md"
exit $status
}
