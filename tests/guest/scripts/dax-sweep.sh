#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest half of scripts/bench-dax-guest.sh: fio over the 4 files the host made
# (f0..f3 in the share), psync, one job, caches dropped before each run:
#   4 KiB randread, 4 KiB randwrite, 1 MiB seqread, each RUNTIME seconds.
# Prints one "VUFS-SWEEP cell=CELL job=JOB iops=N" line per run.
# Settings: CELL (the run's name), RUNTIME (s, default 8), MOUNT_OPTS (init).
MNT=$1
RUNTIME=8
CELL=?
[ -f /run/settings ] && . /run/settings
files=$MNT/f0:$MNT/f1:$MNT/f2:$MNT/f3
for job in randread randwrite seqread; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    case $job in
    randread) args="--rw=randread --bs=4k" ;;
    randwrite) args="--rw=randwrite --bs=4k" ;;
    seqread) args="--rw=read --bs=1M" ;;
    esac
    # shellcheck disable=SC2086
    fio --name=$job --filename="$files" --ioengine=psync $args --time_based \
        --runtime="$RUNTIME" --eta=never --output=/tmp/s.out 2>/tmp/s.err
    iops=$(sed -n 's/^ *\(read\|write\): IOPS=\([0-9.k]*\).*/\2/p' /tmp/s.out | head -n 1)
    echo "VUFS-SWEEP cell=$CELL job=$job iops=${iops:-0}"
done
exit 0
