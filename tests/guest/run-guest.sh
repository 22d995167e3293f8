#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Run one test script inside a real Linux guest (QEMU, TCG) whose virtio-fs
# device is served by a vhost-user-fs backend, and say PASS or FAIL.
#
#   run-guest.sh --backend 'CMD {socket} {dir}' --script GUEST_SCRIPT [options]
#
# The backend command is a shell command line; {socket}, {dir} and {queues} are
# replaced by the vhost-user socket path, the shared directory and the number
# of request queues. Options:
#   --dir DIR            shared directory (default: RUNDIR/shared, removed on PASS)
#   --file HOST[:GUEST]  extra file for the guest (executables get their libraries)
#   --set KEY=VALUE      setting for the guest script (sourced from /run/settings)
#   --timeout SEC        whole-run limit, default 600
#   --min-sums N         the guest must print at least N "VUFS-SUM" lines
#   --rundir DIR         where logs go (default: a new ${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.*)
#   --keep               keep the shared directory even on PASS
#   --smp N / --mem MB   guest size (default 2 / 2048)
#   --append ARGS        extra guest kernel command line (e.g. an LSM choice)
#   --device TAG DIR CMD another virtio-fs device with mount tag TAG, served
#                        by its own backend CMD ({socket}, {dir}, {queues} as
#                        above) on DIR (empty: RUNDIR/shared-TAG, removed on
#                        PASS); the guest script finds the tags in $EXTRA_TAGS
#                        and mounts them itself. Repeatable.
#   --expect-exit0       every backend must exit by itself with status 0 once
#                        QEMU has disconnected (vufsd's documented behaviour)
#   --live               copy the guest's output to stdout as it arrives
#   --allow-reboot       a guest reboot resets the machine and boots it again
#                        (default: QEMU exits, -no-reboot); the test script
#                        finds out which boot it is in from the share
#   --host-file NAME=TEXT  write TEXT (and a newline) to NAME in the shared
#                        directory before the backend starts. Repeatable.
#   --chardev-opts OPTS  appended to the primary device's -chardev socket
#                        (e.g. ,reconnect-ms=1000: QEMU connects again when
#                        the backend goes away)
#   --workload-tools     the guest also gets sqlite3, stress-ng, GNU tar and
#                        GNU grep in /usr/local/bin (mkinitramfs.sh workload)
#   --expect-qemu-exit0  QEMU must end by itself with status 0 (the guest's
#                        poweroff); one killed by a signal (SIGBUS: 135) FAILs
#                        even after the guest's result marker
# The stack under test (each defaults to its environment variable, so meson
# tests and CI can pick it for every run):
#   --qemu 7.2|11.1      the VMM ($VUFS_GUEST_QEMU, default 7.2): 7.2 is the
#                        host's qemu-system-x86_64 (Debian 12); 11.1 is Debian
#                        13's, run chrooted in the cached Debian 13 root
#                        (trixie-run.sh) with the run directory and the kernel
#                        bound at their host paths
#   --kernel 6.1|6.12    the guest kernel series ($VUFS_GUEST_KSERIES, default
#                        6.1; fetch-kernel.sh)
#   --vdev fs|generic    the device ($VUFS_GUEST_VDEV, default fs):
#                        fs = vhost-user-fs-pci,tag=TAG,queue-size=1024 (plus
#                          num-request-queues=N with --queues N > 1);
#                        generic (QEMU 11.1 only) = vhost-user-test-device-pci,
#                          virtio-id=26,num_vqs=N+1,config_size=40,vq_size=1024,
#                          which takes the config space, the tag included, from
#                          the backend (VHOST_USER_GET_CONFIG): the backend
#                          must be told the tag (myfs for the primary device)
#   --queues N           request queues per device ($VUFS_GUEST_QUEUES, default 1)
#   --accel tcg|kvm|auto the accelerator ($VUFS_GUEST_ACCEL, default tcg):
#                        multi-threaded TCG with -cpu max, or KVM with -cpu
#                        host; auto takes KVM where /dev/kvm can run an
#                        ordinary guest (a vmx or svm CPU flag, not the
#                        paravirtual kvm_pvm) and TCG elsewhere
# $VUFS_GUEST_QEMU_CMD, when set, is the QEMU 11.1 to run (a path) in place of
# Debian 13's through trixie-run.sh (the benchmark kit's, scripts/kit.sh).
#
# The guest prints its output on ttyS1 (RUNDIR/output.log), the kernel console is
# RUNDIR/console.log and the backend's RUNDIR/backend.log. The verdict comes from
# the guest's "VUFS-GUEST-RESULT rc=N" marker (QEMU exits 0 even when killed),
# plus the host's own check of every "VUFS-SUM SHA256 PATH" line the guest
# printed against the real file in the shared directory after the guest is gone
# (a PATH of the form @TAG/REL names a file in the --device TAG directory). The
# verdict line names the stack (VMM, device, queues, guest kernel); so does
# RUNDIR/stack.
# Exit status: 0 PASS, 1 FAIL, 2 usage.
{
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
backend= script= dir= timeout=600 min_sums=0 rundir= keep=0 smp=2 mem=2048 append=
files=() sets=() live=0 expect_exit0=0 allow_reboot=0 chardev_opts=
dev_tags=() dev_dirs=() dev_cmds=() host_files=() workload_tools=0 expect_qemu0=0
qemu_series=${VUFS_GUEST_QEMU:-7.2} kseries=${VUFS_GUEST_KSERIES:-6.1}
vdev=${VUFS_GUEST_VDEV:-fs} queues=${VUFS_GUEST_QUEUES:-1} accel=${VUFS_GUEST_ACCEL:-tcg}

usage() { sed -n '4,/^{$/p' "$0" | sed '$d' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --backend) backend=$2; shift 2 ;;
    --script) script=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --file) files+=(--file "$2"); shift 2 ;;
    --set) sets+=("$2"); shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --min-sums) min_sums=$2; shift 2 ;;
    --rundir) rundir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --smp) smp=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    --device)
        [ $# -ge 4 ] || usage
        case "$2" in
        ''|*[!A-Za-z0-9_-]*|myfs) echo "run-guest: bad device tag '$2'" >&2; usage ;;
        esac
        dev_tags+=("$2"); dev_dirs+=("$3"); dev_cmds+=("$4"); shift 4 ;;
    --expect-exit0) expect_exit0=1; shift ;;
    --live) live=1; shift ;;
    --allow-reboot) allow_reboot=1; shift ;;
    --chardev-opts) chardev_opts=$2; shift 2 ;;
    --workload-tools) workload_tools=1; shift ;;
    --expect-qemu-exit0) expect_qemu0=1; shift ;;
    --qemu) qemu_series=$2; shift 2 ;;
    --kernel) kseries=$2; shift 2 ;;
    --vdev) vdev=$2; shift 2 ;;
    --queues) queues=$2; shift 2 ;;
    --accel) accel=$2; shift 2 ;;
    --host-file)
        case "$2" in
        [!/.]*=*) case "${2%%=*}" in */*) usage ;; esac ;;
        *) usage ;;
        esac
        host_files+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "run-guest: unknown argument $1" >&2; usage ;;
    esac
done
[ -n "$backend" ] && [ -n "$script" ] || usage
case "$qemu_series" in
7.2|11.1) ;;
*) echo "run-guest: --qemu is 7.2 or 11.1, not '$qemu_series'" >&2; usage ;;
esac
case "$kseries" in
6.1|6.12) ;;
*) echo "run-guest: --kernel is 6.1 or 6.12, not '$kseries'" >&2; usage ;;
esac
case "$vdev" in
fs) ;;
generic)
    [ "$qemu_series" = 11.1 ] ||
        { echo "run-guest: --vdev generic needs --qemu 11.1 (QEMU 7.2 has no vhost-user-test-device-pci)" >&2; usage; } ;;
*) echo "run-guest: --vdev is fs or generic, not '$vdev'" >&2; usage ;;
esac
case "$accel" in
tcg|kvm) ;;
auto)
    # /dev/kvm runs an ordinary guest kernel only with hardware virtualisation;
    # a paravirtual KVM (kvm_pvm, no vmx/svm flag) hangs or aborts it.
    if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ]; then
        accel=kvm
    else
        accel=tcg
    fi ;;
*) echo "run-guest: --accel is tcg, kvm or auto, not '$accel'" >&2; usage ;;
esac
case "$queues" in
''|*[!0-9]*|0*) echo "run-guest: --queues needs a positive number, not '$queues'" >&2; usage ;;
esac

start=$(date +%s)
deadline=$((start + timeout))
if [ -z "$rundir" ]; then
    rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
else
    mkdir -p "$rundir"
fi
rundir=$(cd "$rundir" && pwd)
own_dir=0
if [ -z "$dir" ]; then
    dir=$rundir/shared
    own_dir=1
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
for hf in ${host_files[@]+"${host_files[@]}"}; do
    printf '%s\n' "${hf#*=}" > "$dir/${hf%%=*}"
done
sock=$rundir/vhost.sock
rm -f "$sock" "$rundir"/{console,output,backend}.log "$rundir"/backend-*.log
dev_own=() dev_socks=()
for i in "${!dev_tags[@]}"; do
    dev_own[i]=0
    if [ -z "${dev_dirs[i]}" ]; then
        dev_dirs[i]=$rundir/shared-${dev_tags[i]}
        dev_own[i]=1
    fi
    mkdir -p "${dev_dirs[i]}"
    dev_dirs[i]=$(cd "${dev_dirs[i]}" && pwd)
    dev_socks[i]=$rundir/${dev_tags[i]}.sock
    rm -f "${dev_socks[i]}"
done

log() { echo "run-guest: $*" >&2; }
qemu_pid= backend_pid= live_pid=
dev_pids=()

# stop_group PID
. "$here/procs.sh"
cleanup() {
    local p
    stop_group "$qemu_pid"; qemu_pid=
    stop_group "$backend_pid"; backend_pid=
    for p in ${dev_pids[@]+"${dev_pids[@]}"}; do stop_group "$p"; done
    dev_pids=()
    stop_live
}
# --live: a tail of output.log on stdout while the guest runs.
stop_live() {
    [ -n "$live_pid" ] || return 0
    sleep 0.3   # tail polls: let it copy the last lines
    kill "$live_pid" 2>/dev/null
    wait "$live_pid" 2>/dev/null
    live_pid=
}
trap cleanup EXIT
trap 'log "interrupted"; exit 1' INT TERM HUP

# What ran, for the log and the verdict line; the kernel release joins it once known.
vdev_name=vhost-user-fs-pci
[ "$vdev" = generic ] && vdev_name=vhost-user-test-device-pci
stack="qemu $qemu_series ($accel), $vdev_name, $queues request queue$([ "$queues" = 1 ] || echo s), linux $kseries"
verdict() {
    local v=$1; shift
    echo "run-guest: $v: $* ($stack; $(( $(date +%s) - start )) s, logs in $rundir)"
    if [ "$v" = FAIL ]; then
        for f in output backend console; do
            [ -s "$rundir/$f.log" ] || continue
            echo "---- last lines of $f.log ----"
            tail -n 25 "$rundir/$f.log"
        done
        exit 1
    fi
    if [ $keep = 0 ]; then
        [ $own_dir = 1 ] && rm -rf "$dir"
        for i in "${!dev_tags[@]}"; do
            [ "${dev_own[i]}" = 1 ] && rm -rf "${dev_dirs[i]}"
        done
    fi
    rm -f "$rundir/initrd.img"   # 90 MB, rebuilt from the cache on every run
    exit 0
}

# Guest pieces: the kernel and the base initramfs (cached), plus this run's archive.
export VUFS_GUEST_KSERIES=$kseries   # mkinitramfs.sh base builds for this kernel
kdir=$("$here/fetch-kernel.sh" --series "$kseries") ||
    verdict FAIL "no $kseries guest kernel (the first fetch needs Debian's archive)"
# One apt-cache look-up per run is enough (seconds on a busy machine).
[ "$kseries" != 6.1 ] || export VUFS_GUEST_KPKG=${VUFS_GUEST_KPKG:-linux-image-$(basename "$kdir")}
stack="qemu $qemu_series ($accel), $vdev_name, $queues request queue$([ "$queues" = 1 ] || echo s), linux $(basename "$kdir")"
echo "$stack" > "$rundir/stack"
base=$("$here/mkinitramfs.sh" base) || verdict FAIL "cannot build the base initramfs"
[ ${#dev_tags[@]} = 0 ] || sets+=("EXTRA_TAGS=${dev_tags[*]}")
"$here/mkinitramfs.sh" run "$rundir/run.cpio" "$script" ${sets[@]+"${sets[@]}"} \
    ${files[@]+"${files[@]}"} || verdict FAIL "cannot build the per-run initramfs"
tools=
if [ $workload_tools = 1 ]; then
    tools=$("$here/mkinitramfs.sh" workload) || verdict FAIL "cannot build the workload tools' initramfs"
fi
cat "$base" ${tools:+"$tools"} "$rundir/run.cpio" > "$rundir/initrd.img"

# Backends first: each creates (or, handed a listening socket, already has) the
# socket QEMU connects to.
# start_backend CMD SOCKET DIR LOGNAME: starts it in its own session, sets $started.
start_backend() {
    local cmd=$1 bsock=$2 bdir=$3 name=$4
    cmd=${cmd//\{socket\}/$bsock}
    cmd=${cmd//\{dir\}/$bdir}
    cmd=${cmd//\{queues\}/$queues}
    echo "$cmd" > "$rundir/$name.cmd"
    setsid bash -c "exec $cmd" > "$rundir/$name.log" 2>&1 < /dev/null &
    started=$!
}
# wait_socket PID SOCKET NAME
wait_socket() {
    local bstart
    bstart=$(date +%s)   # not $start: fetching the kernel may have taken a while
    while [ ! -S "$2" ]; do
        kill -0 "$1" 2>/dev/null || verdict FAIL "$3 exited before creating $2"
        [ "$(date +%s)" -lt $((bstart + 30)) ] || verdict FAIL "$3 did not create $2 within 30 s"
        sleep 0.05
    done
}
start_backend "$backend" "$sock" "$dir" backend
backend_pid=$started
for i in "${!dev_tags[@]}"; do
    start_backend "${dev_cmds[i]}" "${dev_socks[i]}" "${dev_dirs[i]}" "backend-${dev_tags[i]}"
    dev_pids[i]=$started
done
wait_socket "$backend_pid" "$sock" backend
for i in "${!dev_tags[@]}"; do
    wait_socket "${dev_pids[i]}" "${dev_socks[i]}" "backend ${dev_tags[i]}"
done

# vdev_args CHARDEV TAG: the -device value for one virtio-fs device.
vdev_args() {
    if [ "$vdev" = generic ]; then
        # The tag and num_request_queues come from the backend (GET_CONFIG):
        # config_size 40 = sizeof(struct virtio_fs_config); hiprio + requests.
        echo "vhost-user-test-device-pci,chardev=$1,virtio-id=26,num_vqs=$((queues + 1)),config_size=40,vq_size=1024"
    else
        echo "vhost-user-fs-pci,chardev=$1,tag=$2,queue-size=1024$([ "$queues" = 1 ] || echo ",num-request-queues=$queues")"
    fi
}
if [ "$qemu_series" = 11.1 ] && [ -n "${VUFS_GUEST_QEMU_CMD:-}" ]; then
    qemu=("$VUFS_GUEST_QEMU_CMD")
elif [ "$qemu_series" = 11.1 ]; then
    # Debian 13's QEMU, chrooted in the Debian 13 root: it opens the sockets,
    # logs and initramfs in the run directory and the kernel in the cache, so
    # those are bound at their host paths (the shared directories are the
    # backends' business, not QEMU's). trixie-run.sh execs QEMU: the pid and
    # process group stay the ones started here.
    qemu=("$here/trixie-run.sh" --bind "$rundir" --bind "$kdir" -- qemu-system-x86_64)
else
    qemu=(qemu-system-x86_64)
fi
if [ "$accel" = kvm ]; then
    qemu+=(-machine q35 -accel kvm -cpu host)
else
    # shellcheck disable=SC2054
    qemu+=(-machine q35 -accel tcg,thread=multi -cpu max)
fi
qemu+=(    -smp "$smp" -m "${mem}M"
    -object "memory-backend-memfd,id=mem,size=${mem}M,share=on" -numa node,memdev=mem
    -chardev "socket,id=vfs,path=$sock$chardev_opts"
    -device "$(vdev_args vfs myfs)"
    -kernel "$kdir/vmlinux" -initrd "$rundir/initrd.img"
    -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4 vufs.tag=myfs${append:+ $append}"
    -nodefaults -no-user-config -display none
    -chardev "file,id=con,path=$rundir/console.log" -serial chardev:con
    -chardev "file,id=out,path=$rundir/output.log" -serial chardev:out)
[ $allow_reboot = 1 ] || qemu+=(-no-reboot)
for i in "${!dev_tags[@]}"; do
    qemu+=(-chardev "socket,id=vfs$i,path=${dev_socks[i]}"
        -device "$(vdev_args "vfs$i" "${dev_tags[i]}")")
done
printf '%q ' "${qemu[@]}" > "$rundir/qemu.cmd"
setsid "${qemu[@]}" > "$rundir/qemu.log" 2>&1 < /dev/null &
qemu_pid=$!
echo "$qemu_pid" > "$rundir/qemu.pid" # for a wrapper that must end the run early
log "guest started: $stack (qemu pid $qemu_pid, backend pid $backend_pid${dev_pids[*]:+, device backends ${dev_pids[*]}}, logs $rundir)"
if [ $live = 1 ]; then
    : >> "$rundir/output.log"
    tail -s 0.1 -n +1 -F "$rundir/output.log" 2>/dev/null > >(sed -u 's/\r$//; s/^/  guest | /') &
    live_pid=$!
fi

# qemu_reap: QEMU has exited: its status (128 + N when killed by signal N) goes
# to RUNDIR/qemu.status. qemu_said: that status in words.
qemu_reap() {
    local st
    wait "$qemu_pid" 2>/dev/null; st=$?
    qemu_pid=
    echo "$st" > "$rundir/qemu.status"
}
qemu_said() {
    local st
    st=$(cat "$rundir/qemu.status" 2>/dev/null) || { echo "QEMU status unknown"; return; }
    if [ "$st" -gt 128 ]; then
        echo "QEMU exit status $st (killed by SIG$(kill -l $((st - 128)) 2>/dev/null || echo $((st - 128))))"
    else
        echo "QEMU exit status $st"
    fi
}

# Wait for the result marker, or QEMU's death, or the deadline.
marker=
while :; do
    marker=$(grep -a -m1 -o 'VUFS-GUEST-RESULT rc=[0-9]*' "$rundir/output.log" 2>/dev/null) && break
    kill -0 "$qemu_pid" 2>/dev/null || { sleep 0.2; marker=$(grep -a -m1 -o 'VUFS-GUEST-RESULT rc=[0-9]*' "$rundir/output.log" 2>/dev/null) && break; qemu_reap; verdict FAIL "QEMU exited without a result, $(qemu_said) ($(tail -n 3 "$rundir/qemu.log" | tr '\n' ' '))"; }
    [ "$(date +%s)" -lt "$deadline" ] || verdict FAIL "no result within $timeout s"
    sleep 0.2
done
rc=${marker#*rc=}

# Let the guest unmount and power off so every write has reached the backend.
while kill -0 "$qemu_pid" 2>/dev/null && [ "$(date +%s)" -lt $((deadline + 30)) ]; do
    sleep 0.1
done
qemu_alive=0
kill -0 "$qemu_pid" 2>/dev/null && qemu_alive=1
if [ $qemu_alive = 1 ]; then
    stop_group "$qemu_pid"; qemu_pid=
else
    qemu_reap
fi
[ -s "$rundir/console.log" ] && grep -a -E 'BUG:|Oops|Kernel panic|general protection' "$rundir/console.log" > "$rundir/kernel-errors.log"
stop_live
# --expect-exit0: with QEMU gone every backend must end by itself, status 0.
exit_errors=()
if [ $expect_exit0 = 1 ]; then
    # backend_exit PID NAME: appends to exit_errors unless PID exits 0 within 15 s.
    backend_exit() {
        local i brc
        for i in $(seq 150); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$1" 2>/dev/null; then
            exit_errors+=("$2 still running 15 s after QEMU disconnected")
            return
        fi
        wait "$1"; brc=$?
        [ $brc = 0 ] || exit_errors+=("$2 exited with status $brc after QEMU disconnected")
    }
    backend_exit "$backend_pid" backend
    backend_pid=
    for i in "${!dev_tags[@]}"; do
        backend_exit "${dev_pids[i]}" "backend ${dev_tags[i]}"
        dev_pids[i]=
    done
    dev_pids=()
fi
stop_group "$backend_pid"; backend_pid=
for p in ${dev_pids[@]+"${dev_pids[@]}"}; do stop_group "$p"; done
dev_pids=()

[ $live = 1 ] || grep -a -o 'VUFS-GUEST-\(BOOTED\|MOUNTED\)[[:print:]]*' "$rundir/output.log" >&2 || true

# Host-side check of the checksums the guest computed.
nsums=0 bad=0
while read -r _ sum path; do
    [ -n "$path" ] || continue
    nsums=$((nsums + 1))
    case "$path" in
    /*|*..*) log "refusing checksum path $path"; bad=$((bad + 1)); continue ;;
    esac
    base_dir=$dir rel=$path
    if [ "${path#@}" != "$path" ]; then
        # @TAG/REL: a file on the --device TAG share.
        base_dir= rel=${path#*/}
        for i in "${!dev_tags[@]}"; do
            [ "${path%%/*}" = "@${dev_tags[i]}" ] && base_dir=${dev_dirs[i]}
        done
        if [ -z "$base_dir" ] || [ "$rel" = "$path" ]; then
            log "checksum path $path names no device"; bad=$((bad + 1)); continue
        fi
    fi
    host=$(sha256sum "$base_dir/$rel" 2>/dev/null | cut -d' ' -f1)
    if [ "$host" != "$sum" ]; then
        log "checksum mismatch for $path: guest $sum host ${host:-missing}"
        bad=$((bad + 1))
    else
        echo "host-check ok $path"
    fi
done < <(grep -a -o 'VUFS-SUM [0-9a-f]\{64\} [^[:space:]]*' "$rundir/output.log")

if [ $expect_qemu0 = 1 ]; then
    [ $qemu_alive = 0 ] || verdict FAIL "QEMU did not exit after the guest's result (--expect-qemu-exit0)"
    [ "$(cat "$rundir/qemu.status")" = 0 ] || verdict FAIL "guest rc=$rc, then $(qemu_said) (--expect-qemu-exit0)"
fi
[ "$rc" = 0 ] || verdict FAIL "guest test exited with rc=$rc"
[ ${#exit_errors[@]} = 0 ] || verdict FAIL "${exit_errors[*]}"
[ -s "$rundir/kernel-errors.log" ] && verdict FAIL "guest kernel reported errors: $(head -n 1 "$rundir/kernel-errors.log")"
[ $bad = 0 ] || verdict FAIL "$bad of $nsums host checksum comparisons failed"
[ $nsums -ge "$min_sums" ] || verdict FAIL "guest printed $nsums checksums, expected at least $min_sums"
verdict PASS "guest rc=0, $nsums host checksums matched"
}
