#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest side of scripts/demo.sh: shows what the guest sees of the share at $1
# (vufsd serving it over virtio-fs), reads the file the host wrote, writes one
# for the host to read back (its checksum goes to the host as a VUFS-SUM line),
# and runs fio for a few seconds.
# Settings: FIO_SECONDS (default 3), FIO_SIZE (default 16M).
MNT=$1
FIO_SECONDS=3
FIO_SIZE=16M
[ -f /run/settings ] && . /run/settings

echo "Linux $(uname -r) is up; $(grep " $MNT " /proc/mounts | cut -d' ' -f1-3)"
echo
echo "\$ dmesg | grep -i dax    # what the guest's virtio-fs driver found of a DAX window"
dmesg | grep -i dax || echo "(no DAX message: the device offers no window)"
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
echo
echo "powering off"
exit 0
