#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: the real-guest benchmark of tests/guest/compare.sh --bench. On
# the virtio-fs mount ($1), timed fio jobs whose every request reaches the
# daemon (O_DIRECT, so the guest's page cache answers nothing):
#   randread-qd1, randwrite-qd1     4 KiB, psync
#   randread-qd16, randwrite-qd16   4 KiB, libaio iodepth 16
#   seqread-1m                      1 MiB, psync
# then the metadata phases over META_FILES files (vufs-probe meta: create with
# O_CREAT|O_EXCL, stat, unlink; the dentry and inode caches are dropped before
# stat and unlink, so each reaches the daemon as LOOKUP/GETATTR/UNLINK), and,
# with FIO_NUMJOBS > 1, randread and randwrite again with that many jobs, each
# pinned to its own vCPU (Linux >= 6.11 sends a request on the request queue
# of the CPU that issued it).
# Prints "VUFS-BENCH job=NAME read_iops=R write_iops=W read_kib_s=B write_kib_s=C"
# per fio job and "VUFS-META phase=... ops_per_s=..." per metadata phase, and
# marks where each timed phase starts and ends with an empty file
# bench/.phase.SEQ.NAME (NAME idle between phases) for the host's
# tests/guest/hostcpu.sh.
# Settings: FIO_SIZE (file, default 256M), FIO_RUNTIME (s per job, default 10),
#           META_FILES (default 10000), FIO_NUMJOBS (default 0: no such jobs),
#           BENCH_JOBS (default: all of the above, by name), HOSTCPU (1: wait
#           for the host's answer to each mark).
MNT=$1
FIO_SIZE=256M
FIO_RUNTIME=10
META_FILES=10000
FIO_NUMJOBS=0
HOSTCPU=0
BENCH_JOBS="randread-qd1 randwrite-qd1 randread-qd16 randwrite-qd16 seqread-1m meta numjobs"
[ -f /run/settings ] && . /run/settings
D=$MNT/bench
mkdir -p "$D" || exit 1
fails=0

# mark NAME: the phase NAME starts now (idle: the last one ended). With
# HOSTCPU=1 the host's sampler answers each mark (bench/.ack.SEQ) and the
# phase waits for it, at most 5 s.
seq=0
mark() {
    seq=$((seq + 1))
    : > "$D/.phase.$seq.$1"
    [ "$HOSTCPU" = 1 ] || return 0
    i=0
    while [ ! -e "$D/.ack.$seq" ] && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}

want() { case " $BENCH_JOBS " in *" $1 "*) return 0 ;; esac; return 1; }

# run NAME [fio options...]: one timed fio job, its VUFS-BENCH line.
run() {
    name=$1; shift
    mark "$name"
    fio --name="$name" --directory="$D" --size="$FIO_SIZE" --direct=1 \
        --time_based --runtime="$FIO_RUNTIME" --group_reporting --minimal "$@" \
        > /tmp/"$name".out 2> /tmp/"$name".err
    rc=$?
    mark idle
    if [ $rc != 0 ]; then
        echo "FAIL $name:"; head -n 5 /tmp/"$name".err
        fails=$((fails + 1))
        return
    fi
    # terse v3: 8 read IOPS, 7 read KiB/s, 49 write IOPS, 48 write KiB/s
    awk -F';' -v n="$name" 'END { printf "VUFS-BENCH job=%s read_iops=%s write_iops=%s read_kib_s=%s write_kib_s=%s\n", n, $8, $49, $7, $48 }' /tmp/"$name".out
}

# The data file every single-job test uses (laid out once, not timed).
fio --name=data --directory="$D" --filename=data --size="$FIO_SIZE" --bs=1M --rw=write \
    --ioengine=psync --eta=never --output=/tmp/lay.out 2> /tmp/lay.err ||
    { echo "FAIL layout"; cat /tmp/lay.err; exit 1; }
# The single jobs and the metadata phases run on a vCPU other than the one
# that takes the first request queue's interrupt, every daemon alike: under TCG,
# whether a completion interrupts the vCPU that submitted or another one moves a
# job by more than the daemons differ (docs/benchmarks.md), so where fio runs is
# chosen from where the guest put that interrupt, not left to the scheduler.
irq=$(awk -F: '/requests\.0/ { gsub(/ /, "", $1); print $1; exit }' /proc/interrupts)
irq_cpu=$(cut -d, -f1 "/proc/irq/$irq/effective_affinity_list" 2>/dev/null | cut -d- -f1)
cpu=0
[ "$(nproc)" -gt 1 ] && [ "$irq_cpu" = 0 ] && cpu=1
echo "VUFS-BENCH-CPU jobs_on=$cpu request_irq=${irq:-none} irq_on=${irq_cpu:-unknown}"
one="--filename=data --cpus_allowed=$cpu"
want randread-qd1 && run randread-qd1 $one --bs=4k --rw=randread --ioengine=psync
want randwrite-qd1 && run randwrite-qd1 $one --bs=4k --rw=randwrite --ioengine=psync
want randread-qd16 && run randread-qd16 $one --bs=4k --rw=randread --ioengine=libaio --iodepth=16
want randwrite-qd16 && run randwrite-qd16 $one --bs=4k --rw=randwrite --ioengine=libaio --iodepth=16
want seqread-1m && run seqread-1m $one --bs=1M --rw=read --ioengine=psync

if want meta; then
    M=$D/meta
    mkdir -p "$M" || exit 1
    for phase in create stat unlink; do
        [ $phase = create ] || { sync; echo 2 > /proc/sys/vm/drop_caches; }
        mark "meta-$phase"
        taskset -c "$cpu" vufs-probe meta "$M" "$META_FILES" $phase || { echo "FAIL meta $phase"; fails=$((fails + 1)); }
        mark idle
    done
    rmdir "$M"
fi

if want numjobs && [ "$FIO_NUMJOBS" -gt 1 ]; then
    # One file per job, laid out first (outside the timed phase), each job on
    # its own vCPU.
    cpus="--cpus_allowed=0-$(($(nproc) - 1)) --cpus_allowed_policy=split"
    files="--numjobs=$FIO_NUMJOBS --filename_format=nj.\$jobnum --size=$FIO_SIZE"
    fio --name=nj-layout --directory="$D" $files --bs=1M --rw=write --ioengine=psync \
        --eta=never --output=/tmp/nj-lay.out 2> /tmp/nj-lay.err ||
        { echo "FAIL numjobs layout"; cat /tmp/nj-lay.err; exit 1; }
    nj="$files $cpus --bs=4k --ioengine=psync"
    run "randread-qd1-x$FIO_NUMJOBS" $nj --rw=randread
    run "randwrite-qd1-x$FIO_NUMJOBS" $nj --rw=randwrite
fi

echo "fio-bench: $fails failures"
[ $fails = 0 ]
