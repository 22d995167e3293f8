#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest side of scripts/demo.sh: shows what the guest sees of the share at $1
# (vufsd serving it over virtio-fs), reads the file the host wrote, writes one
# for the host to read back (its checksum goes to the host as a VUFS-SUM line),
# and runs fio for a few seconds. With DAX=1 (a device with a window: QEMU 11.1's
# generic device), the same fio job without the window (dax=never) and through
# it (dax=always), side by side; then it asks the host for the window's
# statistics (a "VUFS-DEMO-STATS" line, which scripts/demo.sh answers with
# SIGUSR1 to vufsd).
# Settings: FIO_SECONDS (default 3), FIO_SIZE (default 16M), DAX (default 0).
MNT=$1
FIO_SECONDS=3
FIO_SIZE=16M
DAX=0
[ -f /run/settings ] && . /run/settings

echo "Linux $(uname -r) is up; $(grep " $MNT " /proc/mounts | cut -d' ' -f1-3)"
echo
echo "\$ dmesg | grep -i -e 'cache len' -e dax    # the DAX window the virtio-fs driver found"
dmesg | grep -i -e 'cache len' -e dax || echo "(no DAX message: the device offers no window)"
echo
echo "\$ ls -l $MNT"
ls -l "$MNT" || exit 1
echo
echo "\$ cat $MNT/from-host.txt"
cat "$MNT/from-host.txt" || exit 1
echo
echo "\$ echo ... > $MNT/from-guest.txt"
echo "written by the guest, Linux $(uname -r), $(cut -d' ' -f1 /proc/uptime) s after boot" \
    > "$MNT/from-guest.txt" || exit 1
cat "$MNT/from-guest.txt"
echo "VUFS-SUM $(sha256sum "$MNT/from-guest.txt" | cut -d' ' -f1) from-guest.txt"
echo
echo "\$ fio: ${FIO_SECONDS} s of 4 KiB random reads and writes (psync) on a $FIO_SIZE file in $MNT"
fio --name=demo --directory="$MNT" --size="$FIO_SIZE" --rw=randrw --bs=4k --ioengine=psync \
    --runtime="$FIO_SECONDS" --time_based --unlink=1 --eta=never --output=/tmp/fio.out \
    2> /tmp/fio.err
rc=$?
if [ $rc != 0 ]; then
    echo "fio failed (rc $rc):"
    cat /tmp/fio.err /tmp/fio.out
    exit 1
fi
grep -E '^ *(read|write): IOPS=' /tmp/fio.out | sed 's/^ */  fio /'
grep -q 'IOPS=' /tmp/fio.out || { echo "fio printed no result"; exit 1; }
if [ "$DAX" = 1 ]; then
    # fio_iops MOUNT_OPTION: the job on a fresh mount, its two IOPS figures.
    fio_iops() {
        cd /
        umount "$MNT" && mount -t virtiofs -o "$1" myfs "$MNT" || return 1
        fio --name=dax --filename="$MNT/dax-demo" --size="$FIO_SIZE" --rw=randrw --bs=4k \
            --ioengine=psync --runtime="$FIO_SECONDS" --time_based --eta=never \
            --output=/tmp/fio.out 2> /tmp/fio.err || { cat /tmp/fio.err; return 1; }
        echo "$(printf '%-12s' "$1"): $(grep -E '^ *(read|write): IOPS=' /tmp/fio.out |
            sed 's/^ *\([a-z]*\): IOPS=\([0-9.k]*\).*/\1 \2 IOPS/' | tr '\n' ' ')"
    }
    echo
    echo "\$ fio: the same ${FIO_SECONDS} s job without the DAX window and through it"
    fio_iops dax=never || exit 1
    fio_iops dax=always || exit 1
    rm -f "$MNT/dax-demo"
    echo "VUFS-DEMO-STATS"
    sleep 2
fi
echo
echo "powering off"
exit 0
