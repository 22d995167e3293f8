#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: data integrity through virtio-fs with fio's crc32c verification.
# For each engine (psync, libaio; 4 KiB blocks on a FIO_SIZE file):
#   randwrite of every block with a verify header (offset + crc32c),
#   page cache dropped, randread of every block checking its header and crc,
# then a 1 MiB sequential read checking at 4 KiB intervals.
# Negative control: the same read check on a file with one block overwritten
# behind fio's back MUST fail with a verify error; if it passes, the check is
# blind and the run fails.
# Prints "VUFS-FIO job=... iops=..." lines and "VUFS-SUM" lines for the host.
# Settings: FIO_SIZE (default 256M), FIO_ENGINES (default "psync libaio").
MNT=$1
FIO_SIZE=256M
FIO_ENGINES="psync libaio"
[ -f /run/settings ] && . /run/settings
D=$MNT/fio
mkdir -p "$D" || exit 1
fails=0

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# run NAME [fio options...]: one fio job, its summary line, its IOPS.
run() {
    name=$1; shift
    fio --name="$name" --bs=4k --verify=crc32c --group_reporting --eta=never \
        --output=/tmp/"$name".out "$@" 2> /tmp/"$name".err
    rc=$?
    grep -E 'err=|IOPS=' /tmp/"$name".out | sed "s/^/  $name: /"
    grep -m 3 -E 'verify|error' /tmp/"$name".err | sed "s/^/  $name stderr: /"
    r=$(sed -n 's/^ *read: IOPS=\([0-9.k]*\).*/\1/p' /tmp/"$name".out | head -n 1)
    w=$(sed -n 's/^ *write: IOPS=\([0-9.k]*\).*/\1/p' /tmp/"$name".out | head -n 1)
    echo "VUFS-FIO job=$name rc=$rc read_iops=${r:--} write_iops=${w:--}"
    return $rc
}

# read_verify NAME FILE SIZE ENGINE: the read check used by both the real test
# and the negative control.
read_verify() {
    run "$1" --filename="$2" --size="$3" --rw=randread --ioengine="$4" --iodepth=16
}

for e in $FIO_ENGINES; do
    f=$D/data-$e
    run "randwrite-$e" --filename="$f" --size="$FIO_SIZE" --rw=randwrite --ioengine="$e" \
        --iodepth=16 --do_verify=0 || { echo "FAIL randwrite-$e"; fails=$((fails + 1)); }
    drop
    read_verify "randread-$e" "$f" "$FIO_SIZE" "$e" || { echo "FAIL randread-$e"; fails=$((fails + 1)); }
done

drop
f=$D/data-$(echo $FIO_ENGINES | cut -d' ' -f1)
run seqread-1m --filename="$f" --size="$FIO_SIZE" --rw=read --ioengine=psync --bs=1M \
    --verify_interval=4k || { echo "FAIL seqread-1m"; fails=$((fails + 1)); }

# Negative control on a small file: write with headers, corrupt block 100.
c=$D/control
run control-write --filename="$c" --size=8M --rw=randwrite --ioengine=psync --do_verify=0 ||
    { echo "FAIL control-write"; fails=$((fails + 1)); }
dd if=/dev/urandom of="$c" bs=4k seek=100 count=1 conv=notrunc 2> /dev/null ||
    { echo "FAIL control: dd"; fails=$((fails + 1)); }
drop
if read_verify control-read "$c" 8M psync; then
    echo "FAIL negative control: fio verified a corrupted file without error"
    fails=$((fails + 1))
elif ! grep -q -E 'verify: (bad|.*crc)' /tmp/control-read.err; then
    echo "FAIL negative control: fio failed, but not with a verify error"
    fails=$((fails + 1))
else
    echo "negative control ok: the corrupted block was detected"
fi

drop
for f in "$D"/data-* "$c"; do
    sum=$(sha256sum "$f" | cut -d' ' -f1)
    echo "VUFS-SUM $sum fio/${f##*/}"
done
echo "fio-verify: $fails failures"
[ $fails = 0 ]
