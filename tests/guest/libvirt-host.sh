#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A real libvirt starts vufsd: the host's libvirtd (Debian 12: libvirt 9.0,
# QEMU 7.2) run by this script, in a private mount namespace with its own
# /etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/log/libvirt and
# /var/cache/libvirt (so neither a libvirt the host runs nor its domains and
# networks are seen or touched; no systemd involved), defines a domain booting
# the test guest (direct kernel boot of fetch-kernel.sh's kernel and
# mkinitramfs.sh's initramfs, TCG, shared memfd memory) with one
# <filesystem type='mount'> <driver type='virtiofs'/>, and drives it with virsh:
#   virsh start     the guest checks the share (scripts/libvirt.sh: the
#                   options, share-check.sh, fio-verify.sh)
#   virsh reboot    ACPI power button, libvirt resets the machine; the guest
#                   mounts again and finds boot 1's files; the same vufsd serves
#   virsh shutdown  ACPI power button, the guest powers off, QEMU exits, and
#                   vufsd exits by itself ("frontend disconnected" in its log)
#   virsh start + virsh destroy   no vufsd is left behind
#
#   libvirt-host.sh --binary PATH --probe VUFS_PROBE
#       (a) <binary path='PATH'> with every option libvirt 9.0 puts on the
#       daemon's command line: xattr, cache mode none, sandbox chroot, POSIX
#       locks and flock on, a thread pool of 4; and <driver queue='1024'>. The
#       command line libvirt built is checked here, the effect of each option
#       in the guest (or here where a guest cannot see it: the thread pool,
#       the chroot, QEMU's queue size).
#   libvirt-host.sh --descriptor --probe VUFS_PROBE [--expect PATH]
#       (b) no binary path: libvirt picks the daemon through the vhost-user
#       descriptors; it must be PATH (default /usr/libexec/vufsd, the
#       package's, through /usr/share/qemu/vhost-user/40-vufsd.json).
#
# --stack debian13: the same with Debian 13's libvirt (11.3) and QEMU 11.1,
# which do not run on Debian 12's glibc: libvirtd and virsh run chrooted in a
# Debian 13 root with libvirt ($VUFS_GUEST_CACHE/trixie-libvirt, a copy of
# trixie-root.sh's root with libvirt-daemon-driver-qemu added, made on first
# use), and libvirt's <binary path> is a wrapper in the run directory that
# starts the host's vufsd (a Debian 12 binary) chrooted back in the host's
# root, which the Debian 13 root sees at /run/vufsd-host. --binary only.
# --pick-only: start the domain, check which daemon libvirt started
# (--expect), destroy it; no guest checks (the package test's mask check).
# Options: --after-boot1 CMD (a shell command run once boot 1's checks have
# passed, with the guest up and VUFSD_PID set: the package test upgrades the
# package there; boot 2 must then still be served by the same daemon),
# --timeout SEC (the whole run, default 900), --rundir DIR (logs;
# default a new ${VUFS_GUEST_LOGS:-/tmp}/vufs-libvirt.*), --keep.
# Needs root (the mount namespace, libvirtd's system instance). Exit status:
# 0 PASS, 1 FAIL, 2 usage, 77 skipped because libvirt is not installed.
{
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mode= binary= probe= expect=/usr/libexec/vufsd timeout=900 rundir= keep=0 after_boot1= stack=debian12 pick_only=0
usage() { sed -n '4,/^{$/p' "$0" | sed '$d' >&2; exit 2; }
args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
    --binary) mode=binary; binary=$2; shift 2 ;;
    --descriptor) mode=descriptor; shift ;;
    --expect) expect=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    --after-boot1) after_boot1=$2; shift 2 ;;
    --stack) stack=$2; shift 2 ;;
    --pick-only) pick_only=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --rundir) rundir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) usage ;;
    esac
done
[ -n "$mode" ] && [ -n "$probe" ] || usage
case "$stack" in
debian12) ;;
debian13) [ "$mode" = binary ] || { echo "libvirt-host: --stack debian13 takes --binary only" >&2; usage; } ;;
*) usage ;;
esac

for t in libvirtd virsh; do
    command -v $t > /dev/null ||
        { echo "libvirt-host: SKIP: $t is not installed (libvirt-daemon-system, libvirt-clients)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "libvirt-host: FAIL: needs root (libvirtd's system instance, a mount namespace)"; exit 1; }

# Everything below runs in a private mount namespace: the tmpfs and bind
# mounts go away with the last process in it.
if [ "${VUFS_LIBVIRT_NS:-}" != inside ]; then
    exec unshare --mount --propagation private -- \
        env VUFS_LIBVIRT_NS=inside bash "$0" "${args[@]}"
fi

start=$(date +%s)
deadline=$((start + timeout))
if [ -z "$rundir" ]; then
    rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-libvirt.XXXXXX")
else
    mkdir -p "$rundir"
fi
rundir=$(cd "$rundir" && pwd)
share=$rundir/shared
rm -rf "$share" "$rundir"/*.log
mkdir -p "$share"
probe=$(cd "$(dirname "$probe")" && pwd)/$(basename "$probe")
[ "$mode" != binary ] || binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
dom=vufsd-libvirt
virsh=(in_root virsh -q -c qemu:///system)
log() { echo "libvirt-host: $*" >&2; }
# R: the root libvirt runs in ("" for the host's own); in_root runs a command there.
R=
in_root() {
    if [ -n "$R" ]; then chroot "$R" "$@"; else "$@"; fi
}

libvirtd_pid= holder_pids=() vufsd_pid=
cleanup() {
    local p
    if [ -n "$libvirtd_pid" ]; then
        "${virsh[@]}" destroy "$dom" > /dev/null 2>&1
        "${virsh[@]}" undefine "$dom" > /dev/null 2>&1
        kill "$libvirtd_pid" 2> /dev/null
        for _ in $(seq 50); do kill -0 "$libvirtd_pid" 2> /dev/null || break; sleep 0.1; done
        kill -KILL "$libvirtd_pid" 2> /dev/null
        wait "$libvirtd_pid" 2> /dev/null
    fi
    for p in ${holder_pids[@]+"${holder_pids[@]}"}; do kill "$p" 2> /dev/null; wait "$p" 2> /dev/null; done
    holder_pids=()
    [ -z "$vufsd_pid" ] || kill "$vufsd_pid" 2> /dev/null
}
trap cleanup EXIT
trap 'log interrupted; exit 1' INT TERM HUP

verdict() {
    local v=$1; shift
    echo "libvirt-host: $v: $* (libvirt $(in_root libvirtd --version | awk '{print $NF}'), $(in_root qemu-system-x86_64 --version | head -n1), $stack, $mode; $(( $(date +%s) - start )) s, logs in $rundir)"
    if [ "$v" = FAIL ]; then
        for f in output.log libvirtd.log virtiofsd.log console.log; do
            [ -s "$rundir/$f" ] || continue
            echo "---- last lines of $f ----"
            tail -n 25 "$rundir/$f"
        done
        exit 1
    fi
    [ $keep = 1 ] || rm -rf "$share" "$rundir/initrd.img"
    exit 0
}

# The guest: the project's kernel and initramfs, as run-guest.sh builds them.
kdir=$("$here/fetch-kernel.sh") || verdict FAIL "no guest kernel"
export VUFS_GUEST_KPKG=${VUFS_GUEST_KPKG:-linux-image-$(basename "$kdir")}
base=$("$here/mkinitramfs.sh" base) || verdict FAIL "cannot build the base initramfs"
# The ACPI button driver (a module in Debian's 6.1, not in the base
# initramfs): `virsh reboot` and `virsh shutdown` press the power button, and
# only with its handler does the guest's kernel count the press.
button=$kdir/extra/button.ko
if [ ! -s "$button" ]; then
    log "fetching button.ko from $VUFS_GUEST_KPKG"
    dl=$(mktemp -d "$rundir/dl.XXXXXX")
    (cd "$dl" && apt-get download "$VUFS_GUEST_KPKG" > /dev/null 2>&1) ||
        verdict FAIL "apt-get download $VUFS_GUEST_KPKG failed (button.ko)"
    dpkg-deb --fsys-tarfile "$dl"/*.deb | tar -x -C "$dl" --wildcards '*/kernel/drivers/acpi/button.ko' ||
        verdict FAIL "no button.ko in $VUFS_GUEST_KPKG"
    mkdir -p "$kdir/extra"
    cp "$(find "$dl" -name button.ko | head -n1)" "$button.tmp" && mv "$button.tmp" "$button"
    rm -rf "$dl"
fi
options=
# libvirt 11 refuses <lock> for a daemon whose --print-capabilities says
# "separate-options" (as vufsd's does): "locking options are not supported
# by this virtiofsd". The locks are libvirt 9.0's to set.
locks=1
[ "$stack" = debian12 ] || locks=0
if [ "$mode" = binary ]; then
    options="xattr cache-none"
    [ $locks = 0 ] || options="$options flock posix"
fi
"$here/mkinitramfs.sh" run "$rundir/run.cpio" "$here/scripts/libvirt.sh" \
    "OPTIONS=$options" FIO_SIZE=64M FIO_ENGINES=psync \
    --file "$probe:/bin/vufs-probe" --file "$button:/lib/button.ko" \
    --file "$here/scripts/share-check.sh:/run/bin/share-check.sh" \
    --file "$here/scripts/fio-verify.sh:/run/bin/fio-verify.sh" ||
    verdict FAIL "cannot build the per-run initramfs"
cat "$base" "$rundir/run.cpio" > "$rundir/initrd.img"

# The share: the file share-check.sh reads, and the locks the guest must see.
mkdir "$share/check"   # share-check.sh's directory: it wants host.txt alone there
echo "host file for myfs" > "$share/check/host.txt"
: > "$share/flock-held"
: > "$share/posix-held"
python3 -c 'import fcntl, sys, time
a = open(sys.argv[1], "r+"); fcntl.flock(a, fcntl.LOCK_EX)
b = open(sys.argv[2], "r+"); fcntl.lockf(b, fcntl.LOCK_EX)
time.sleep(100000)' "$share/flock-held" "$share/posix-held" &
holder_pids+=($!)

if [ "$stack" = debian13 ]; then
    cache=${VUFS_GUEST_CACHE:-$here/cache}
    R=$cache/trixie-libvirt
    if [ ! -x "$R/usr/sbin/libvirtd" ]; then
        base_root=$("$here/trixie-root.sh") || verdict FAIL "no Debian 13 root (trixie-root.sh)"
        log "making $R: $base_root plus Debian 13's libvirt"
        rm -rf "$R.tmp"
        cp -a "$base_root" "$R.tmp" && cp /etc/resolv.conf "$R.tmp/etc/resolv.conf" &&
        unshare -m bash -c 'for d in proc sys dev; do mount --rbind /$d "$1/$d"; done
            chroot "$1" apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive chroot "$1" apt-get install -y -q --no-install-recommends \
                libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients' sh "$R.tmp" > "$rundir/root-apt.log" 2>&1 ||
            verdict FAIL "cannot install libvirt in the Debian 13 root ($rundir/root-apt.log)"
        mv "$R.tmp" "$R"
    fi
    # The host's root (vufsd runs there), then what libvirt and QEMU open at
    # their host paths: /dev, /proc, /sys, the run directory, the kernel.
    mkdir -p "$R/run/vufsd-host"
    mount --rbind / "$R/run/vufsd-host" || verdict FAIL "cannot bind / in $R"
    for d in /dev /proc /sys "$rundir" "$kdir"; do
        mkdir -p "$R$d"
        mount --rbind "$d" "$R$d" || verdict FAIL "cannot bind $d in $R"
    done
    printf '#!/bin/sh\n# vufsd of the host (Debian 12), started from the Debian 13 root\nexec chroot /run/vufsd-host %q "$@"\n' \
        "$binary" > "$rundir/vufsd-host"
    chmod 755 "$rundir/vufsd-host"
fi

# libvirt's own directories, private to this run.
etc=$rundir/etc
rm -rf "$etc"
mkdir -p "$etc"
cat > "$etc/libvirtd.conf" << CONF
# vufsd's libvirt test: root only, no polkit, logs in the run directory.
unix_sock_group = "root"
unix_sock_ro_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:$rundir/libvirtd.log"
CONF
cat > "$etc/qemu.conf" << 'CONF'
# vufsd's libvirt test: QEMU as root, no security driver, no cgroups and no
# namespaces (the test host may be a container), daemon logs to plain files.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = [ ]
cgroup_controllers = [ ]
stdio_handler = "file"
CONF
mount --bind "$etc" "$R/etc/libvirt" || verdict FAIL "cannot bind $etc on $R/etc/libvirt"
for d in /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt; do
    mkdir -p "$R$d"
    mount -t tmpfs -o mode=0755 tmpfs "$R$d" || verdict FAIL "cannot mount a tmpfs on $R$d"
done
# A vufsd left by an earlier run on this share would be found below: none may be.
serving="(source=|--shared-dir[= ])$share"
pgrep -f -- "$serving" > /dev/null && verdict FAIL "a daemon already serves $share"

# Started directly (not through in_root, a function: in the background that
# would be a subshell), so $! is libvirtd's own pid.
if [ -n "$R" ]; then
    chroot "$R" libvirtd --pid-file "$rundir/libvirtd.pid" > "$rundir/libvirtd.out" 2>&1 < /dev/null &
else
    libvirtd --pid-file "$rundir/libvirtd.pid" > "$rundir/libvirtd.out" 2>&1 < /dev/null &
fi
libvirtd_pid=$!
for _ in $(seq 300); do
    [ -S "$R/run/libvirt/libvirt-sock" ] && break
    kill -0 "$libvirtd_pid" 2> /dev/null || verdict FAIL "libvirtd exited: $(tail -n 3 "$rundir/libvirtd.out")"
    sleep 0.1
done
"${virsh[@]}" version > "$rundir/virsh-version.txt" 2>&1 || verdict FAIL "virsh cannot reach libvirtd: $(cat "$rundir/virsh-version.txt")"
log "libvirtd $libvirtd_pid up ($(head -n 3 "$rundir/virsh-version.txt" | tr -s ' \n' ' '))"

if [ "$mode" = binary ]; then
    xml_binary=$binary
    [ "$stack" = debian12 ] || xml_binary=$rundir/vufsd-host
    fsbinary="<binary path='$xml_binary' xattr='on'>
        <cache mode='none'/>
        <sandbox mode='chroot'/>
        $([ $locks = 0 ] || echo "<lock posix='on' flock='on'/>")
        <thread_pool size='4'/>
      </binary>"
else
    fsbinary=
fi
cat > "$rundir/domain.xml" << XML
<domain type='qemu'>
  <name>$dom</name>
  <memory unit='MiB'>2048</memory>
  <vcpu>2</vcpu>
  <memoryBacking>
    <source type='memfd'/>
    <access mode='shared'/>
  </memoryBacking>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>$kdir/vmlinux</kernel>
    <initrd>$rundir/initrd.img</initrd>
    <cmdline>console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4 vufs.tag=myfs</cmdline>
  </os>
  <features><acpi/></features>
  <cpu mode='maximum' check='none'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$(in_root sh -c 'command -v qemu-system-x86_64')</emulator>
    <filesystem type='mount' accessmode='passthrough'>
      <driver type='virtiofs' queue='1024'/>
      $fsbinary
      <source dir='$share'/>
      <target dir='myfs'/>
    </filesystem>
    <serial type='file'>
      <source path='$rundir/console.log' append='on'/>
      <target port='0'/>
    </serial>
    <serial type='file'>
      <source path='$rundir/output.log' append='on'/>
      <target port='1'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
XML
"${virsh[@]}" define "$rundir/domain.xml" > "$rundir/virsh.log" 2>&1 || verdict FAIL "virsh define: $(cat "$rundir/virsh.log")"

# wait_line REGEX N WHAT: until output.log holds N lines matching REGEX.
wait_line() {
    while [ "$(grep -a -c -E "$1" "$rundir/output.log" 2> /dev/null)" -lt "$2" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || verdict FAIL "no $3 within $timeout s"
        sleep 0.3
    done
}
# wait_state STATE SECONDS
wait_state() {
    local i
    for i in $(seq $(($2 * 5))); do
        [ "$("${virsh[@]}" domstate "$dom" 2> /dev/null)" = "$1" ] && return 0
        sleep 0.2
    done
    return 1
}
# wait_gone PID SECONDS
wait_gone() {
    local i
    for i in $(seq $(($2 * 10))); do
        kill -0 "$1" 2> /dev/null || return 0
        sleep 0.1
    done
    return 1
}
# find_daemon: the pid of the daemon libvirt started for the domain (libvirt
# 9.0 daemonizes it and keeps its pid in SHORTNAME-fs0-fs.pid).
find_daemon() {
    local f
    f=$(ls "$R"/run/libvirt/qemu/*-"$dom"-fs0-fs.pid 2> /dev/null | head -n1)
    [ -n "$f" ] && cat "$f"
}
# ready N: boot N's result line, its fails count must be 0.
ready() {
    wait_line "VUFS-LIBVIRT-READY boot=$1 " 1 "boot $1 result"
    grep -a -q "VUFS-LIBVIRT-READY boot=$1 fails=0" "$rundir/output.log" ||
        verdict FAIL "boot $1: $(grep -a 'libvirt: FAIL' "$rundir/output.log" | tr '\n' ' ')"
    log "boot $1: guest checks passed ($(( $(date +%s) - start )) s)"
}

"${virsh[@]}" start "$dom" >> "$rundir/virsh.log" 2>&1 || verdict FAIL "virsh start: $(tail -n 3 "$rundir/virsh.log")"
vufsd_pid=$(find_daemon) || verdict FAIL "no virtio-fs daemon serving $share: $(ls "$R/run/libvirt/qemu")"
qemu_pid=$(cat "$R/run/libvirt/qemu/$dom.pid")
exe=$(readlink "/proc/$vufsd_pid/exe")
daemon_cmd=$(tr '\0' ' ' < "/proc/$vufsd_pid/cmdline")
cp "$R/var/log/libvirt/qemu/$dom.log" "$rundir/qemu-cmdline.log" 2> /dev/null
{
    echo "== ps: the daemon libvirt started for $dom, and QEMU"
    ps -o pid,ppid,user,args -p "$vufsd_pid","$qemu_pid" | cut -c1-400
    echo "== every process on the share (the daemon's sandboxed child too)"
    ps -o pid,ppid,user,args -p "$(pgrep -d, -f -- "$serving")" | cut -c1-400
    echo "== /proc/$vufsd_pid/exe -> $exe"
} | tee "$rundir/processes.txt" >&2

case "$mode" in
binary) want_exe=$binary ;;
descriptor) want_exe=$expect ;;
esac
# The same file (in the Debian 13 root the path has /run/vufsd-host before it).
[ "$(stat -L -c %d:%i "/proc/$vufsd_pid/exe")" = "$(stat -L -c %d:%i "$want_exe")" ] ||
    verdict FAIL "libvirt started $exe, not $want_exe ($daemon_cmd)"
if [ $pick_only = 1 ]; then
    "${virsh[@]}" destroy "$dom" >> "$rundir/virsh.log" 2>&1 || verdict FAIL "virsh destroy: $(tail -n 3 "$rundir/virsh.log")"
    wait_gone "$vufsd_pid" 15 || verdict FAIL "$want_exe ($vufsd_pid) still running 15 s after virsh destroy"
    vufsd_pid=
    verdict PASS "libvirt started $want_exe ($daemon_cmd)"
fi
if [ "$mode" = binary ]; then
    # libvirt 9.0 writes -o source=DIR,cache=none,...; a libvirt that finds
    # "separate-options" in --print-capabilities may write --shared-dir DIR
    # --cache none ... instead.
    want=("--fd=" "(source=|--shared-dir[= ])$share" "cache[= ](none|never)" "sandbox[= ]chroot"
          "(,|--)xattr( |,|$)" "thread-pool-size[= ]4")
    [ $locks = 0 ] || want+=("(,|--)flock( |,|$)" "(,|--)posix[_-]lock( |,|$)")
    for o in "${want[@]}"; do
        echo "$daemon_cmd" | grep -q -E -- "$o" ||
            verdict FAIL "libvirt's daemon command line lacks '$o': $daemon_cmd"
    done
    grep -a -q -E 'queue-size"?[=:]1024' /proc/"$qemu_pid"/cmdline ||
        verdict FAIL "QEMU's vhost-user-fs-pci has no queue-size=1024 (<driver queue='1024'/>)"
    log "command line: every option the domain XML set is there"
fi

ready 1
if [ "$mode" = binary ]; then
    # What the guest cannot see: the worker threads and the chroot.
    # vufsd serves from a child in its sandbox (the parent forwards signals).
    server=$(pgrep -P "$vufsd_pid" | head -n1)
    server=${server:-$vufsd_pid}
    workers=$(cat /proc/"$server"/task/*/comm 2> /dev/null | grep -c '^vufsd-worker')
    root=$(readlink /proc/"$server"/root)
    echo "== thread pool: $workers vufsd-worker threads in $server; sandbox: /proc/$server/root -> $root" |
        tee -a "$rundir/processes.txt" >&2
    [ "$workers" = 4 ] || verdict FAIL "thread_pool size='4': $workers worker threads"
    [ "$(stat -c %d:%i "/proc/$server/root/")" = "$(stat -c %d:%i "$share")" ] ||
        verdict FAIL "sandbox mode='chroot': the daemon's root is $root, not $share"
    xattr=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.vufsd").decode())' "$share/xattr.txt" 2>&1)
    echo "== xattr: user.vufsd on the host's xattr.txt: $xattr" | tee -a "$rundir/processes.txt" >&2
    [ "$xattr" = libvirt ] || verdict FAIL "xattr='on': the guest's user.vufsd is not on the host's file ($xattr)"
fi

if [ -n "$after_boot1" ]; then
    log "after boot 1: $after_boot1"
    VUFSD_PID=$vufsd_pid bash -c "$after_boot1" || verdict FAIL "after boot 1: '$after_boot1' failed"
    echo "== after '$after_boot1': /proc/$vufsd_pid/exe -> $(readlink "/proc/$vufsd_pid/exe")" |
        tee -a "$rundir/processes.txt" >&2
fi

"${virsh[@]}" reboot "$dom" >> "$rundir/virsh.log" 2>&1 || verdict FAIL "virsh reboot: $(tail -n 3 "$rundir/virsh.log")"
ready 2
[ "$(find_daemon)" = "$vufsd_pid" ] && kill -0 "$vufsd_pid" 2> /dev/null ||
    verdict FAIL "after virsh reboot another daemon serves (was $vufsd_pid, now $(find_daemon))"

"${virsh[@]}" shutdown "$dom" >> "$rundir/virsh.log" 2>&1 || verdict FAIL "virsh shutdown: $(tail -n 3 "$rundir/virsh.log")"
wait_state "shut off" 120 || verdict FAIL "virsh shutdown: still $("${virsh[@]}" domstate "$dom") after 120 s"
wait_gone "$vufsd_pid" 15 || verdict FAIL "vufsd $vufsd_pid still running 15 s after the shutdown"
cp "$R/var/log/libvirt/qemu/$dom-fs0-virtiofsd.log" "$rundir/virtiofsd.log" 2> /dev/null
grep -q 'frontend disconnected' "$rundir/virtiofsd.log" ||
    verdict FAIL "vufsd did not log 'frontend disconnected' before it ended (killed instead of exiting by itself?)"
log "virsh shutdown: guest off, vufsd $vufsd_pid exited by itself: $(grep -E 'disconnected|exiting' "$rundir/virtiofsd.log" | tr '\n' ' ')"

"${virsh[@]}" start "$dom" >> "$rundir/virsh.log" 2>&1 || verdict FAIL "second virsh start: $(tail -n 3 "$rundir/virsh.log")"
vufsd_pid=$(find_daemon) || verdict FAIL "no daemon serving $share after the second virsh start"
ready 3
"${virsh[@]}" destroy "$dom" >> "$rundir/virsh.log" 2>&1 || verdict FAIL "virsh destroy: $(tail -n 3 "$rundir/virsh.log")"
wait_gone "$vufsd_pid" 15 || verdict FAIL "vufsd $vufsd_pid still running 15 s after virsh destroy"
left=$(pgrep -a -f -- "$serving")
[ -z "$left" ] || verdict FAIL "after virsh destroy a daemon is left: $left"
vufsd_pid=
log "virsh destroy: no daemon left"

# The checksums the guest printed, against the files (the last one per path).
nsums=0 bad=0
while read -r sum path; do
    nsums=$((nsums + 1))
    case "$path" in /*|*..*|@*) bad=$((bad + 1)); continue ;; esac
    [ "$(sha256sum "$share/$path" 2> /dev/null | cut -d' ' -f1)" = "$sum" ] || { log "checksum mismatch: $path"; bad=$((bad + 1)); }
done < <(grep -a -o 'VUFS-SUM [0-9a-f]\{64\} [^[:space:]]*' "$rundir/output.log" | awk '{s[$3] = $2} END {for (p in s) print s[p], p}')
[ $bad = 0 ] || verdict FAIL "$bad of $nsums host checksum comparisons failed"
[ $nsums -ge 2 ] || verdict FAIL "the guest printed $nsums checksums"
results=$(grep -a -o 'VUFS-GUEST-RESULT rc=[0-9]*' "$rundir/output.log" | tr '\n' ' ')
[ "$results" = "VUFS-GUEST-RESULT rc=0 VUFS-GUEST-RESULT rc=0 " ] ||
    verdict FAIL "guest results over the two powered-off boots: '$results'"
verdict PASS "3 boots, $nsums host checksums matched, vufsd ($want_exe) served each, exited by itself after virsh shutdown, none left after virsh destroy"
}
