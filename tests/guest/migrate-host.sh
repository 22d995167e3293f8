#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Live migration of a running guest between two QEMU 11.1 processes on this
# machine, each with its own vhost-user-fs backend on the same shared
# directory, while the guest runs fio with crc32c verification and holds files
# open (scripts/migrate.sh). Says PASS or FAIL, and the migration's numbers.
#
#   migrate-host.sh --src 'CMD' --dst 'CMD' [options]
#
# The backend commands are shell command lines; {socket}, {dir} and {rundir}
# are replaced by the backend's vhost-user socket, the shared directory and
# the run directory. The source backend serves the guest from boot; the
# destination QEMU starts with -incoming and its backend waits. On the
# guest's VUFS-MIG-RUNNING line the host runs `migrate` on the source's QMP
# socket, waits for query-migrate to say completed, creates mig/migrated on the
# share (the guest's cue to run its last fio round), quits the source QEMU and
# waits for the guest's result on the destination. Options:
#   --name NAME       what the summary line calls the backend (default: backend)
#   --mem MB          guest RAM (default 768: small, so a TCG guest converges)
#   --kernel 6.1|6.12 guest kernel series (default $VUFS_GUEST_KSERIES or 6.1)
#   --set KEY=VALUE   setting for the guest script (FIO_SIZE, MAX_WAIT)
#   --timeout SEC     whole-run limit (default 600)
#   --rundir DIR      where logs go (default a new ${VUFS_GUEST_LOGS:-/tmp}/vufs-mig.*)
#   --expect-fail     the migration itself must fail (a backend without
#                     migration support) while the guest runs on at the source
#
# Logs in RUNDIR: backend-src.log, backend-dst.log, qemu-src.log, qemu-dst.log,
# output.log (the guest's ttyS1, from the source and then the destination),
# console-src.log, console-dst.log, migration.json (query-migrate at the end).
# The last line is "VUFS-MIGRATION name=... result=PASS|FAIL downtime_ms=...
# total_ms=... fio_runs=... fio_failures=..." (also in RUNDIR/result; a run is
# one fio job of a round).
# Exit status: 0 PASS, 1 FAIL, 2 usage.
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src_cmd= dst_cmd= name=backend mem=768 timeout=600 rundir= expect_fail=0
kseries=${VUFS_GUEST_KSERIES:-6.1}
sets=()
usage() { sed -n '4,/^{$/p' "$0" | sed '$d' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --src) src_cmd=$2; shift 2 ;;
    --dst) dst_cmd=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --kernel) kseries=$2; shift 2 ;;
    --set) sets+=("$2"); shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --rundir) rundir=$2; shift 2 ;;
    --expect-fail) expect_fail=1; shift ;;
    -h|--help) usage ;;
    *) echo "migrate-host: unknown argument $1" >&2; usage ;;
    esac
done
[ -n "$src_cmd" ] && [ -n "$dst_cmd" ] || usage

start=$(date +%s)
deadline=$((start + timeout))
if [ -z "$rundir" ]; then
    rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-mig.XXXXXX")
else
    mkdir -p "$rundir"
fi
rundir=$(cd "$rundir" && pwd)
dir=$rundir/shared
mkdir -p "$dir"
rm -f "$rundir"/*.sock "$rundir"/*.log "$rundir/result"

log() { echo "migrate-host: $*" >&2; }
pids=()
# stop_group PID
. "$here/procs.sh"
cleanup() {
    local p
    for p in ${pids[@]+"${pids[@]}"}; do stop_group "$p"; done
    pids=()
}
trap cleanup EXIT
trap 'log "interrupted"; exit 1' INT TERM HUP

downtime=- total=- rounds=0 fio_fail=0
verdict() {
    local v=$1; shift
    cat "$rundir/output-src.log" "$rundir/output-dst.log" > "$rundir/output.log" 2>/dev/null
    rounds=$(grep -a -c 'VUFS-MIG-FIO round=' "$rundir/output.log")
    fio_fail=$(grep -a 'VUFS-MIG-FIO round=' "$rundir/output.log" | grep -c -v ' rc=0 ')
    local line="VUFS-MIGRATION name=$name result=$v downtime_ms=$downtime total_ms=$total fio_runs=$rounds fio_failures=$fio_fail"
    echo "migrate-host: $v: $* ($(( $(date +%s) - start )) s, logs in $rundir)"
    if [ "$v" = FAIL ]; then
        for f in output backend-src backend-dst qemu-src qemu-dst; do
            [ -s "$rundir/$f.log" ] || continue
            echo "---- last lines of $f.log ----"
            tail -n 15 "$rundir/$f.log"
        done
    else
        rm -rf "$dir" "$rundir/initrd.img"
    fi
    echo "$line" | tee "$rundir/result"
    [ "$v" = PASS ]
    exit $?
}

kdir=$(VUFS_GUEST_KSERIES=$kseries "$here/fetch-kernel.sh" --series "$kseries") ||
    verdict FAIL "no $kseries guest kernel"
[ "$kseries" != 6.1 ] || export VUFS_GUEST_KPKG=${VUFS_GUEST_KPKG:-linux-image-$(basename "$kdir")}
export VUFS_GUEST_KSERIES=$kseries
base=$("$here/mkinitramfs.sh" base) || verdict FAIL "cannot build the base initramfs"
"$here/mkinitramfs.sh" run "$rundir/run.cpio" "$here/scripts/migrate.sh" \
    ${sets[@]+"${sets[@]}"} || verdict FAIL "cannot build the per-run initramfs"
cat "$base" "$rundir/run.cpio" > "$rundir/initrd.img"

# start_backend CMD SIDE: in its own session; prints nothing, sets $started.
start_backend() {
    local cmd=$1 side=$2
    cmd=${cmd//\{socket\}/$rundir/$side.sock}
    cmd=${cmd//\{dir\}/$dir}
    cmd=${cmd//\{rundir\}/$rundir}
    echo "$cmd" > "$rundir/backend-$side.cmd"
    setsid bash -c "exec $cmd" > "$rundir/backend-$side.log" 2>&1 < /dev/null &
    started=$!
    pids+=("$started")
    local t0
    t0=$(date +%s)
    while [ ! -S "$rundir/$side.sock" ]; do
        kill -0 "$started" 2>/dev/null || verdict FAIL "the $side backend exited before creating its socket"
        [ "$(date +%s)" -lt $((t0 + 30)) ] || verdict FAIL "the $side backend made no socket within 30 s"
        sleep 0.05
    done
}
# start_qemu SIDE [EXTRA ARGS...]: QEMU 11.1 from the Debian 13 root; sets $started.
start_qemu() {
    local side=$1
    shift
    local q=("$here/trixie-run.sh" --bind "$rundir" --bind "$kdir" -- qemu-system-x86_64
        -machine q35 -accel tcg,thread=multi -cpu max -smp 2 -m "${mem}M"
        -object "memory-backend-memfd,id=mem,size=${mem}M,share=on" -numa node,memdev=mem
        -chardev "socket,id=vfs,path=$rundir/$side.sock"
        -device vhost-user-fs-pci,chardev=vfs,tag=myfs,queue-size=1024
        -kernel "$kdir/vmlinux" -initrd "$rundir/initrd.img"
        -append 'console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4 vufs.tag=myfs'
        -nodefaults -no-user-config -display none -no-reboot
        -chardev "file,id=con,path=$rundir/console-$side.log" -serial chardev:con
        -chardev "file,id=out,path=$rundir/output-$side.log" -serial chardev:out
        -qmp "unix:$rundir/qmp-$side.sock,server=on,wait=off" "$@")
    printf '%q ' "${q[@]}" > "$rundir/qemu-$side.cmd"
    setsid "${q[@]}" > "$rundir/qemu-$side.log" 2>&1 < /dev/null &
    started=$!
    pids+=("$started")
    local t0
    t0=$(date +%s)
    while [ ! -S "$rundir/qmp-$side.sock" ]; do
        kill -0 "$started" 2>/dev/null || verdict FAIL "QEMU ($side) exited: $(tail -n 2 "$rundir/qemu-$side.log" | tr '\n' ' ')"
        [ "$(date +%s)" -lt $((t0 + 60)) ] || verdict FAIL "QEMU ($side) made no QMP socket within 60 s"
        sleep 0.05
    done
}
qmp() { python3 "$here/qmp.py" "$rundir/qmp-$1.sock" "${@:2}"; }
# wait_line SIDE PATTERN: until PATTERN appears in output-SIDE.log.
wait_line() {
    while ! grep -a -q -- "$2" "$rundir/output-$1.log" 2>/dev/null; do
        kill -0 "$3" 2>/dev/null || verdict FAIL "QEMU ($1) exited before '$2'"
        [ "$(date +%s)" -lt "$deadline" ] || verdict FAIL "no '$2' within $timeout s"
        sleep 0.2
    done
}

start_backend "$src_cmd" src
src_backend=$started
start_backend "$dst_cmd" dst
dst_backend=$started
start_qemu src
src_qemu=$started
start_qemu dst -incoming "unix:$rundir/migration.sock"
dst_qemu=$started
log "guest started on the source (qemu $src_qemu, backend $src_backend); destination waits (qemu $dst_qemu, backend $dst_backend)"

wait_line src VUFS-MIG-RUNNING "$src_qemu"
log "guest runs fio: migrating"
# A TCG guest running fio dirties memory fast: allow a long pause rather than
# never converging, and no bandwidth cap on a local socket.
qmp src migrate-set-parameters '{"downtime-limit": 2000, "max-bandwidth": 4294967296}' > /dev/null ||
    verdict FAIL "migrate-set-parameters refused"
if ! out=$(qmp src migrate "{\"uri\": \"unix:$rundir/migration.sock\"}" 2>&1); then
    echo "$out" > "$rundir/migration.json"
    [ $expect_fail = 1 ] && verdict PASS "QEMU refused to start the migration, as expected: $out"
    verdict FAIL "QEMU refused to start the migration: $out"
fi
left=$((deadline - $(date +%s)))
qmp src --wait-migration "$left" > "$rundir/migration.json"
mrc=$?
info=$(cat "$rundir/migration.json")
downtime=$(echo "$info" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("downtime", "-"))' 2>/dev/null || echo -)
total=$(echo "$info" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("total-time", "-"))' 2>/dev/null || echo -)
if [ $mrc != 0 ]; then
    err=$(echo "$info" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("error-desc", ""))' 2>/dev/null)
    if [ $expect_fail = 1 ]; then
        # The guest must run on at the source: its fio finishes there.
        touch "$dir/mig/migrated"
        qmp src cont > /dev/null 2>&1
        wait_line src VUFS-GUEST-RESULT "$src_qemu"
        grep -a -q 'VUFS-GUEST-RESULT rc=0' "$rundir/output-src.log" ||
            verdict FAIL "the migration failed as expected, but the guest failed at the source"
        verdict PASS "the migration failed as expected ($err); the guest ran on at the source"
    fi
    verdict FAIL "migration did not complete: ${err:-see migration.json}"
fi
[ $expect_fail = 0 ] || verdict FAIL "the migration completed, but it was expected to fail"
log "migration completed: downtime $downtime ms, total $total ms"
status=$(qmp dst query-status 2>/dev/null)
echo "$status" | grep -q '"running"' || verdict FAIL "the destination is not running after the migration: $status"
touch "$dir/mig/migrated"
qmp src quit > /dev/null 2>&1

wait_line dst VUFS-GUEST-RESULT "$dst_qemu"
while kill -0 "$dst_qemu" 2>/dev/null && [ "$(date +%s)" -lt $((deadline + 30)) ]; do sleep 0.1; done
rc=$(grep -a -m1 -o 'VUFS-GUEST-RESULT rc=[0-9]*' "$rundir/output-dst.log")
rc=${rc#*rc=}
cleanup

# The host's copy of what the guest checksummed.
bad=0 nsums=0
while read -r _ sum path; do
    nsums=$((nsums + 1))
    host=$(sha256sum "$dir/$path" 2>/dev/null | cut -d' ' -f1)
    [ "$host" = "$sum" ] || { log "checksum mismatch for $path"; bad=$((bad + 1)); }
done < <(grep -a -o 'VUFS-SUM [0-9a-f]\{64\} [^[:space:]]*' "$rundir/output-dst.log")
grep -a -E 'BUG:|Oops|Kernel panic' "$rundir"/console-*.log > /dev/null &&
    verdict FAIL "the guest kernel reported errors"
[ "$rc" = 0 ] || verdict FAIL "guest test exited with rc=${rc:-none}"
[ "$nsums" -ge 2 ] && [ $bad = 0 ] || verdict FAIL "$bad of $nsums host checksums differ"
verdict PASS "guest rc=0 after the switch, $nsums host checksums matched"
}
