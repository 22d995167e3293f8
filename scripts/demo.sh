#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# vufsd in one command, with a real Linux guest: installs what is missing
# (scripts/deps.sh), builds vufsd, fetches Debian's kernel and builds a small
# initramfs (both cached in tests/guest/cache), starts vufsd on a demo directory
# holding a file the host wrote, and boots the kernel under QEMU (TCG) with a
# vhost-user-fs device served by vufsd. The guest mounts the share, lists it,
# reads the host's file, writes one that the host then reads back, runs fio for
# a few seconds and powers off; vufsd exits 0 when QEMU disconnects. Everything
# it started is stopped and its temporary directory removed.
#
#   scripts/demo.sh                 as root (re-runs itself with sudo otherwise)
#   VUFS_NO_INSTALL=1               skip apt-get (the packages are already there)
#   VUFS_GUEST_CACHE=DIR            kernel/initramfs cache (default tests/guest/cache)
#   VUFS_DEMO_FIO_SECONDS=N         length of the fio run in the guest (default 3)
{
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "demo: vufsd's sandbox and QEMU's shared memory need root; re-running with sudo"
    exec sudo --preserve-env=VUFS_NO_INSTALL,VUFS_GUEST_CACHE,VUFS_DEMO_FIO_SECONDS \
        bash "$top/scripts/demo.sh" "$@"
fi
cd "$top"
t0=$(date +%s)
step() { printf '\n\033[1m[demo %3ds] %s\033[0m\n' "$(($(date +%s) - t0))" "$*"; }
[ -t 1 ] || step() { printf '\n[demo %3ds] %s\n' "$(($(date +%s) - t0))" "$*"; }

work= guest_prep= guestlog=
cleanup() {
    local rc=$?
    if [ -n "$guest_prep" ] && kill -0 "$guest_prep" 2> /dev/null; then
        kill -TERM -- "-$guest_prep" 2> /dev/null
        wait "$guest_prep" 2> /dev/null
    fi
    [ -n "$guestlog" ] && rm -f "$guestlog"
    [ -n "$work" ] && rm -rf "$work"
    [ $rc = 0 ] || echo "demo: FAILED (exit status $rc)" >&2
}
trap cleanup EXIT

step "1/6 dependencies (scripts/deps.sh)"
bash scripts/deps.sh

step "2/6 building vufsd in $top/build; meanwhile the guest kernel and initramfs are prepared"
# The guest pieces (network, xz, disk) overlap the compiler: Debian's kernel
# (apt-get download on first use) and an initramfs with busybox, the virtio-fs
# modules and fio, both cached in tests/guest/cache after the first run.
guestlog=$(mktemp /tmp/vufsd-demo-guest.XXXXXX)
setsid tests/guest/mkinitramfs.sh base > "$guestlog" 2>&1 < /dev/null &
guest_prep=$!
buildlog=$(mktemp /tmp/vufsd-demo-build.XXXXXX)
if [ ! -f build/build.ninja ]; then
    meson setup build > "$buildlog" 2>&1 || { cat "$buildlog"; rm -f "$buildlog"; exit 1; }
fi
ninja -C build vufsd > "$buildlog" 2>&1 || { tail -n 40 "$buildlog"; rm -f "$buildlog"; exit 1; }
tail -n 1 "$buildlog"
rm -f "$buildlog"
vufsd=$top/build/vufsd
"$vufsd" --version

step "3/6 guest kernel and initramfs"
prep_rc=0
wait $guest_prep || prep_rc=$?
guest_prep=
sed 's/^/  /' "$guestlog"
rm -f "$guestlog"
guestlog=
[ $prep_rc = 0 ] || { echo "demo: cannot prepare the guest (see above)" >&2; exit 1; }
cache=${VUFS_GUEST_CACHE:-$top/tests/guest/cache}
kver=$(cat "$cache/kernel/current")
kdir=$cache/kernel/$kver
# The kernel package is known now: no second apt-cache look-up in run-guest.sh.
export VUFS_GUEST_KPKG=linux-image-$kver
echo "kernel $kver in $kdir"

work=$(mktemp -d /tmp/vufsd-demo.XXXXXX)
share=$work/share
mkdir -p "$share/docs"
echo "hello from the host ($(hostname), $(date -u '+%F %T UTC'))" > "$share/from-host.txt"
cp README.md docs/vufsd.1 "$share/docs/"

# DAX: a window is only useful if the VMM maps it. QEMU 7.2's vhost-user-fs-pci
# has no cache-size property and never negotiates one, so the demo can only say
# whether this vufsd would offer a window, not show the guest using it.
dax_opt=
"$vufsd" --dax-window=64M --shared-dir "$share" --socket-path "$work/dax-probe.sock" \
    --sandbox none --log-level error > "$work/dax-probe.log" 2>&1 &
probe=$!
for _ in $(seq 40); do
    [ -S "$work/dax-probe.sock" ] && break
    kill -0 $probe 2> /dev/null || break
    sleep 0.05
done
if [ -S "$work/dax-probe.sock" ]; then
    dax_opt=" --dax-window=64M"
    kill -TERM $probe
fi
wait $probe 2> /dev/null || true
rm -f "$work/dax-probe.sock" "$work/dax-probe.sock.pid"

step "4/6 vufsd serves $share; QEMU boots Linux $kver (TCG) with a vhost-user-fs device"
if [ -n "$dax_opt" ]; then
    echo "DAX: vufsd offers a 64 MiB window, but QEMU 7.2's vhost-user-fs-pci has no cache-size"
    echo "     property and never maps one: the guest's driver finds no window (its dmesg below)"
    echo "     and all data moves through the virtqueues."
else
    echo "DAX: not shown. This vufsd refuses --dax-window:"
    sed -n 's/^.* error: /       /p' "$work/dax-probe.log" | head -n 1
    echo "     and QEMU 7.2's vhost-user-fs-pci could not map a window anyway (no cache-size property)."
fi
cmd="$vufsd --socket-path {socket} --shared-dir {dir} --cache auto$dax_opt"
echo "\$ ${cmd//\{dir\}/$share}"
echo "guest output:"
rc=0
tests/guest/run-guest.sh --backend "$cmd" --dir "$share" --rundir "$work/run" \
    --script tests/guest/scripts/demo.sh --set "FIO_SECONDS=${VUFS_DEMO_FIO_SECONDS:-3}" \
    --min-sums 1 --expect-exit0 --live --timeout 170 2>&1 |
    sed -u '/^run-guest: guest started/d' || rc=$?
[ $rc = 0 ] || exit 1

step "5/6 back on the host: the file the guest wrote"
echo "\$ cat $share/from-guest.txt"
cat "$share/from-guest.txt"
echo
echo "what vufsd logged:"
sed 's/^/  vufsd | /' "$work/run/backend.log"

step "6/6 shutting down"
echo "guest powered off; vufsd exited with status 0 when QEMU disconnected"
left=$(pgrep -f -- "$work" || true)
if [ -n "$left" ]; then
    echo "demo: processes left behind: $left" >&2
    exit 1
fi
rm -rf "$work"
work=
echo "no process left, $share removed"
step "done in $(($(date +%s) - t0)) s"
exit 0
}
