#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: a hostile guest against vufsd's DAX window, from inside a real
# guest (QEMU 11.1's generic device). Run by tests/guest/dax-hostile-host.sh,
# which seeds the share (h-data, h-small, h-gone, h-dir).
#   1. the share is unmounted and the device unbound from virtio-pci;
#   2. vufs-hostile drives the device from user space and sends every
#      malformed SETUPMAPPING / REMOVEMAPPING it knows, each reply checked,
#      with well-formed mappings before and after that must show the file in
#      the window; it leaves no mapping and resets the device;
#   3. the device is bound again and the share mounted: the daemon serves the
#      new driver, h-data (whole 2 MiB ranges) is DAX under the default mount
#      and reads right through the window, and a file written now reaches the
#      host (VUFS-SUM).
MNT=$1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cd / || exit 1
umount "$MNT" || { echo "FAIL: umount $MNT"; exit 1; }
dev=
for d in /sys/bus/pci/devices/*; do
    # virtio (0x1af4), modern device id 0x1040 + 26 (fs)
    [ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = 0x105a ] && dev=$d
done
[ -n "$dev" ] || { echo "FAIL: no virtio-fs PCI device"; exit 1; }
bdf=${dev##*/}
echo "== $bdf unbound from virtio-pci"
echo "$bdf" > /sys/bus/pci/drivers/virtio-pci/unbind || { echo "FAIL: unbind"; exit 1; }

vufs-hostile "$dev"
rc=$?
[ $rc = 0 ] || fail "vufs-hostile exited $rc"

echo "== $bdf bound again"
echo "$bdf" > /sys/bus/pci/drivers/virtio-pci/bind || fail "bind"
n=0
until mount -t virtiofs myfs "$MNT" 2> /tmp/mount.err; do
    n=$((n + 1))
    [ $n -lt 50 ] || { fail "mount after the rebind: $(cat /tmp/mount.err)"; break; }
    sleep 0.2
done
dmesg | grep -E 'virtiofs|Cache len' | tail -n 2
kind=$(vufs-probe is-dax "$MNT/h-data")
[ "$kind" = dax ] || fail "h-data is $kind under the default mount after the rebind"
vufs-probe check "$MNT/h-data" 0 4194304 9 || fail "h-data through the window after the rebind"
echo "written after the hostile driver" > "$MNT/h-after" || fail "write after the rebind"
sync
echo "VUFS-SUM $(sha256sum "$MNT/h-after" | cut -d' ' -f1) h-after"
echo "hostile.sh: $fails failure(s)"
exit $fails
