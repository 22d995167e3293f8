#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: fio with FIO_JOBS jobs, each pinned to its own vCPU, doing 4 KiB
# random writes and O_DIRECT reads (both reach the device: no page cache in
# between) on the virtio-fs mount ($1). Linux >= 6.11 sends a request on the
# request queue mapped to the CPU that issued it, so the jobs' requests spread
# over the device's request queues; the host (queues-host.sh) counts them per
# queue in vufsd's log. Then one job with 16 reads in flight (libaio), whose
# depth the host reads from vufsd's log too. Prints the guest's own view too: the interrupts of each
# request queue's MSI-X vector ("VUFS-QUEUE-IRQ name count"), and its data file's
# checksums ("VUFS-SUM").
# Settings: FIO_JOBS (default: the number of CPUs), FIO_SECONDS (default 6),
#           FIO_SIZE (per job, default 8M).
MNT=$1
FIO_JOBS=$(nproc)
FIO_SECONDS=6
FIO_SIZE=8M
[ -f /run/settings ] && . /run/settings
D=$MNT/queues
mkdir -p "$D" || exit 1

# "NAME COUNT" per request queue vector: the per-CPU columns after "IRQ:" summed.
irqs() { awk '$NF ~ /^virtio[0-9]+-requests\.[0-9]+$/ {
             s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print $NF, s }' \
             /proc/interrupts; }

echo "kernel $(uname -r), $(nproc) CPUs, $FIO_JOBS jobs, request queue vectors:"
irqs | sed 's/^/  /'
irqs > /tmp/irq.before

# Files first (laid out by one writer), then the timed mixed run on all CPUs:
# cpus_allowed_policy=split gives job N CPU N.
fio --name=q --directory="$D" --numjobs="$FIO_JOBS" --size="$FIO_SIZE" --bs=1M --rw=write \
    --ioengine=psync --eta=never --output=/tmp/lay.out 2> /tmp/lay.err ||
    { echo "fio (layout) failed"; cat /tmp/lay.err /tmp/lay.out; exit 1; }
fio --name=q --directory="$D" --numjobs="$FIO_JOBS" --size="$FIO_SIZE" --bs=4k --rw=randrw \
    --direct=1 --ioengine=psync --cpus_allowed="0-$(($(nproc) - 1))" \
    --cpus_allowed_policy=split --runtime="$FIO_SECONDS" --time_based --group_reporting \
    --eta=never --output=/tmp/fio.out 2> /tmp/fio.err
rc=$?
if [ $rc != 0 ]; then
    echo "fio failed (rc $rc):"
    cat /tmp/fio.err /tmp/fio.out
    exit 1
fi
grep -E '^ *(read|write): IOPS=' /tmp/fio.out | sed 's/^ */  fio /'

# Queue depth: one job, 16 O_DIRECT reads in flight through libaio. The client
# sends them at once only when the daemon granted FUSE_ASYNC_DIO (else each
# io_submit runs one read after another); the host reads the depth vufsd saw.
fio --name=qd --filename="$D/q.0.0" --size="$FIO_SIZE" --bs=4k --rw=randread --direct=1 \
    --ioengine=libaio --iodepth=16 --runtime=2 --time_based --eta=never \
    --output=/tmp/qd.out 2> /tmp/qd.err ||
    { echo "fio (queue depth 16) failed"; cat /tmp/qd.err /tmp/qd.out; exit 1; }
grep -E '^ *read: IOPS=' /tmp/qd.out | sed 's/^ */  fio iodepth=16 /'

irqs > /tmp/irq.after
awk 'NR == FNR { b[$1] = $2; next } { print "VUFS-QUEUE-IRQ", $1, $2 - b[$1] }' \
    /tmp/irq.before /tmp/irq.after
sync
echo 3 > /proc/sys/vm/drop_caches
for f in "$D"/*; do
    echo "VUFS-SUM $(sha256sum "$f" | cut -d' ' -f1) queues/${f##*/}"
done
exit 0
