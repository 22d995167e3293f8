#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# vufsd in one command, with a real Linux guest: installs what is missing
# (scripts/deps.sh), builds vufsd, fetches Debian's kernel, builds a small
# initramfs and prepares a Debian 13 root with QEMU 11.1 (all cached in
# tests/guest/cache), starts vufsd with a DAX window on a demo directory holding
# a file the host wrote, and boots the kernel under QEMU 11.1 (TCG) with the
# generic vhost-user device, which carries the window. The guest shows the
# window it found, mounts the share, lists it, reads the host's file, writes one
# that the host then reads back, runs fio without the window and through it side
# by side, and powers off; vufsd logs the window's statistics (SIGUSR1) and
# exits 0 when QEMU disconnects. Everything it started is stopped and its
# temporary directory removed.
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
setsid bash -c 'tests/guest/mkinitramfs.sh base && tests/guest/trixie-root.sh' \
    > "$guestlog" 2>&1 < /dev/null &
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

step "3/6 guest kernel, initramfs and QEMU 11.1 (a Debian 13 root)"
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

step "4/6 vufsd serves $share with a 64 MiB DAX window; QEMU 11.1 boots Linux $kver (TCG)"
echo "QEMU 11.1 carries a vhost-user backend's window on its generic device:"
echo "  -device vhost-user-test-device-pci,chardev=vfs,virtio-id=26,num_vqs=2,config_size=40,vq_size=1024"
cmd="$vufsd --socket-path {socket} --shared-dir {dir} --cache auto --tag myfs --dax-window=64M"
echo "\$ ${cmd//\{dir\}/$share}"
echo "guest output:"
# When the guest asks, the window's statistics: SIGUSR1 makes vufsd log them.
(
    for _ in $(seq 1700); do
        grep -q VUFS-DEMO-STATS "$work/run/output.log" 2> /dev/null && break
        sleep 0.1
    done
    kill -USR1 "$(cat "$work/run/vhost.sock.pid" 2> /dev/null)" 2> /dev/null
) &
watcher=$!
rc=0
tests/guest/run-guest.sh --qemu 11.1 --vdev generic --backend "$cmd" --dir "$share" \
    --rundir "$work/run" --script tests/guest/scripts/demo.sh --set DAX=1 \
    --set "FIO_SECONDS=${VUFS_DEMO_FIO_SECONDS:-3}" \
    --min-sums 1 --expect-exit0 --live --timeout 170 2>&1 |
    sed -u '/^run-guest: guest started/d; /VUFS-DEMO-STATS/d' || rc=$?
kill "$watcher" 2> /dev/null || true
wait "$watcher" 2> /dev/null || true
[ $rc = 0 ] || exit 1

step "5/6 back on the host: the file the guest wrote"
echo "\$ cat $share/from-guest.txt"
cat "$share/from-guest.txt"
echo
echo "what vufsd logged (the DAX statistics are the JSON line SIGUSR1 asked for):"
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
