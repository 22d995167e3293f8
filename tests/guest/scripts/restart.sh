#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: vufsd restarted (and upgraded) under a running guest. The guest
# holds what a real workload holds - a file open for writing in the middle of
# its data, a POSIX lock and a flock, a working directory on the share - and
# runs rounds of fio with crc32c verification (libaio, depth 16, verify_backlog
# so that blocks are read back and checked while the restarts happen) until
# the restarts are over. At each
# VUFS-RESTART-POINT the host restarts vufsd (tests/guest/restart-host.sh) and
# says so with MNT/.restarted-N. Afterwards: fio found no error, the locks are
# still held (another process cannot take them), the open file goes on where
# it was, and once the holders are gone the locks are free.
# Settings: RESTARTS (default 2), FIO_SIZE (default 64M).
MNT=$1
RESTARTS=2
FIO_SIZE=64M
[ -f /run/settings ] && . /run/settings
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

restart_point() { # N
    echo "VUFS-RESTART-POINT $1"
    n=0
    while [ ! -e "$MNT/.restarted-$1" ] && [ $n -lt 1800 ]; do sleep 0.1; n=$((n + 1)); done
    [ -e "$MNT/.restarted-$1" ] || fail "the host did not restart vufsd ($1)"
}

mkdir -p "$MNT/work" && cd "$MNT/work" || { echo "FAIL: no working directory"; exit 1; }
: > plock
: > flock
exec 3<> open-rw
printf 'before-' >&3
vufs-probe posix-hold "$MNT/work/plock" 1200 &
posix_holder=$!
vufs-probe hold "$MNT/work/flock" 1200 &
flock_holder=$!
sleep 1
vufs-probe posix-try plock > /dev/null && fail "the POSIX lock is not held before the restarts"
vufs-probe trylock flock > /dev/null && fail "the flock is not held before the restarts"

# Rounds of fio until the restarts are over: how long one round takes depends
# on the host, and every restart must find fio running.
fio_rounds() {
    round=0
    while :; do
        round=$((round + 1))
        fio --name=verify --filename="$MNT/work/fio-data" --size="$FIO_SIZE" --bs=4k \
            --rw=randwrite --ioengine=libaio --iodepth=16 --verify=crc32c --do_verify=1 \
            --verify_backlog=256 --eta=never --output=/tmp/fio-$round.out 2> /tmp/fio-$round.err
        echo "$round $?" >> /tmp/fio-rounds
        [ -e /tmp/restarts-done ] && return 0
    done
}
fio_rounds &
fio_pid=$!
sleep 5
r=1
while [ $r -le "$RESTARTS" ]; do
    kill -0 $fio_pid 2> /dev/null || fail "fio ended before restart $r"
    restart_point $r
    # Through the new process at once: the working directory and a new file.
    ls > /dev/null || fail "ls in the working directory after restart $r"
    echo "after restart $r" > "after-$r" || fail "write after restart $r"
    sleep 3
    r=$((r + 1))
done
: > /tmp/restarts-done
wait $fio_pid
rc=0
while read -r round round_rc; do
    grep -E 'err=|IOPS=' /tmp/fio-$round.out | sed "s/^/  fio: round $round: /"
    grep -m 3 -E 'verify|error' /tmp/fio-$round.err | sed "s/^/  fio stderr: round $round: /"
    [ "$round_rc" = 0 ] || { fail "fio --verify round $round across the restarts exited $round_rc"; rc=$round_rc; }
    grep -q 'err= 0' /tmp/fio-$round.out || fail "fio round $round reported errors"
done < /tmp/fio-rounds
echo "VUFS-FIO job=verify-across-restarts rc=$rc"

vufs-probe posix-try plock > /dev/null && fail "the POSIX lock was lost across the restarts"
vufs-probe trylock flock > /dev/null && fail "the flock was lost across the restarts"
printf 'after' >&3 || fail "write to the file open across the restarts"
exec 3>&-
[ "$(cat open-rw)" = "before-after" ] || fail "the open file reads '$(cat open-rw)'"
kill $posix_holder $flock_holder
wait $posix_holder $flock_holder 2> /dev/null
vufs-probe posix-try plock > /dev/null || fail "the POSIX lock outlived its holder"
vufs-probe trylock flock > /dev/null || fail "the flock outlived its holder"
sync
echo "VUFS-SUM $(sha256sum open-rw | cut -d' ' -f1) work/open-rw"
echo "VUFS-SUM $(sha256sum after-1 | cut -d' ' -f1) work/after-1"
echo "VUFS-SUM $(sha256sum fio-data | cut -d' ' -f1) work/fio-data"
cd /
echo "restart.sh: $fails failure(s)"
exit $fails
