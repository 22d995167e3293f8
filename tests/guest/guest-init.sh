#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# /init of the test guest (busybox sh). Mounts the pseudo filesystems, loads the
# virtio-fs modules, mounts the shared directory at /mnt, runs /run/test.sh with
# its output on the second serial port (ttyS1) and ends with a marker line
#   VUFS-GUEST-RESULT rc=N
# that the host waits for. Then syncs, unmounts and powers off.
#
# Settings: /run/settings (sourced; written per run by mkinitramfs.sh run), and the
# kernel command line: vufs.tag=TAG overrides the settings' TAG.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
umask 022

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /mnt /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm

OUT=/dev/ttyS1
[ -c "$OUT" ] || OUT=/dev/console
say() { echo "$*" > "$OUT"; }

finish() {
    say "VUFS-GUEST-RESULT rc=$1"
    sync
    umount /mnt 2>/dev/null && say "VUFS-GUEST-UNMOUNTED"
    poweroff -f
    sleep 60
}

TAG=myfs
MOUNT_OPTS=
[ -f /run/settings ] && . /run/settings
for arg in $(cat /proc/cmdline); do
    case "$arg" in
    vufs.tag=*) TAG=${arg#vufs.tag=} ;;
    esac
done

say "VUFS-GUEST-BOOTED uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r) cpus=$(nproc)"

while read -r ko; do
    if ! insmod "/lib/modules/$(uname -r)/$ko" 2> /tmp/insmod.err; then
        # Built-in or already present modules are not an error.
        grep -q 'File exists' /tmp/insmod.err || { say "insmod $ko: $(cat /tmp/insmod.err)"; finish 120; }
    fi
done < /etc/vufs-modules

if ! mount -t virtiofs ${MOUNT_OPTS:+-o "$MOUNT_OPTS"} "$TAG" /mnt 2> /tmp/mount.err; then
    say "mount -t virtiofs $TAG failed: $(cat /tmp/mount.err)"
    dmesg | tail -n 20 > "$OUT"
    finish 121
fi
say "VUFS-GUEST-MOUNTED uptime=$(cut -d' ' -f1 /proc/uptime) tag=$TAG"

if [ -f /run/test.sh ]; then
    # In a subshell: /init itself never holds the mount, so a test may remount it.
    (cd /mnt && exec sh /run/test.sh /mnt) > "$OUT" 2>&1 < /dev/null
    rc=$?
else
    say "no /run/test.sh in the initramfs"
    rc=122
fi
finish "$rc"
