#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: vufs-resize (tests/guest/tools/resize.c) on one file of the
# share - truncate up and down, fallocate, punch hole, copy_file_range, reads
# and writes buffered, O_DIRECT and through a shared mapping, every byte checked
# against a model - under the mount the run chose (MOUNT_OPTS: empty for the
# default per-file DAX, dax=always, dax=never). Then the final file's checksum,
# which the host compares with the file it has once the guest is gone (no write
# lost on the way).
# First a negative control on the guest's own tmpfs: a byte changed behind the
# model's back must make vufs-resize fail, so a checker that cannot fail is
# never taken for a pass.
# Settings: RESIZE_OPS (default 20000), RESIZE_SEED (1), RESIZE_MAX (bytes,
# default 12 MiB), MOUNT_OPTS (guest-init.sh mounts with them).
MNT=$1
RESIZE_OPS=20000
RESIZE_SEED=1
RESIZE_MAX=12582912
MOUNT_OPTS=
[ -f /run/settings ] && . /run/settings
grep " $MNT " /proc/mounts

if vufs-resize --ops 400 --corrupt-at 300 --max-size 4194304 --no-direct /tmp/control > /tmp/control.out 2>&1; then
    cat /tmp/control.out
    echo "FAIL: negative control: a byte changed behind the model passed (the check is blind)"
    exit 1
fi
if ! grep -q 'FAIL at operation 300 .*the model says' /tmp/control.out; then
    cat /tmp/control.out
    echo "FAIL: negative control: vufs-resize failed, but not on the planted byte"
    exit 1
fi
echo "negative control: the planted byte was caught"

mkdir -p "$MNT/resize"
start=$(cut -d' ' -f1 /proc/uptime)
vufs-resize --ops "$RESIZE_OPS" --seed "$RESIZE_SEED" --max-size "$RESIZE_MAX" "$MNT/resize/file"
rc=$?
end=$(cut -d' ' -f1 /proc/uptime)
echo "VUFS-RESIZE mount=${MOUNT_OPTS:-default} ops=$RESIZE_OPS rc=$rc seconds=$(awk "BEGIN { print $end - $start }")"
[ $rc = 0 ] || exit $rc
echo "VUFS-SUM $(sha256sum "$MNT/resize/file" | cut -d' ' -f1) resize/file"
exit 0
