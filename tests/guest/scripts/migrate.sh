#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script of the live migration test (migrate-host.sh): I/O with fio's
# crc32c verification running while the VM moves to another QEMU and another
# daemon, and files held open across the switch.
#
# Before the switch it opens, and keeps open, a file for reading (fd 3), a file
# for appending (fd 4) and its working directory on the share, then prints
# VUFS-MIG-RUNNING: the host starts the migration on that line. It runs rounds
# of fio (4 KiB random reads and writes, every block written with a crc32c
# header and read back verified while the job runs, verify_backlog; psync, and
# mmap with FIO_ENGINES) until the host, once the migration has completed, creates mig/migrated
# on the share; then one more whole round (on the destination alone). Each
# round prints "VUFS-MIG-FIO round=N engine=E rc=R migrated=0|1". After that, the held
# files must still work: fd 3 reads its first line, fd 4 appends, the working
# directory lists.
#
# Settings: FIO_SIZE (default 32M), FIO_ENGINES (default psync; "psync mmap"
# runs each round with both, on a file each), MAX_WAIT (seconds to wait for
# the migration, default 400).
MNT=$1
FIO_SIZE=32M
FIO_ENGINES=psync
MAX_WAIT=400
[ -f /run/settings ] && . /run/settings
D=$MNT/mig
mkdir -p "$D" || exit 1
fails=0
start=$(cut -d. -f1 /proc/uptime)

printf 'held-line-1\nheld-line-2\n' > "$D/held-read" || exit 1
exec 3< "$D/held-read" || exit 1
exec 4>> "$D/held-append" || exit 1
echo before >&4 || exit 1
cd "$D" || exit 1
echo "VUFS-MIG-RUNNING uptime=$(cut -d' ' -f1 /proc/uptime)"

round=0 seen=0
while :; do
    round=$((round + 1))
    for e in $FIO_ENGINES; do
        f=$D/fio-data
        [ "$e" = psync ] || f=$D/fio-data-$e
        fio --name="mig$round-$e" --filename="$f" --size="$FIO_SIZE" --bs=4k --rw=randrw \
            --ioengine="$e" --verify=crc32c --verify_backlog=64 --eta=never \
            --output=/tmp/round.out 2> /tmp/round.err
        rc=$?
        grep -E 'err=|IOPS=' /tmp/round.out | sed "s/^/  round $round $e: /"
        grep -m 3 -E 'verify|error' /tmp/round.err | sed "s/^/  round $round $e stderr: /"
        echo "VUFS-MIG-FIO round=$round engine=$e rc=$rc migrated=$seen uptime=$(cut -d' ' -f1 /proc/uptime)"
        [ $rc = 0 ] || fails=$((fails + 1))
    done
    [ $seen = 1 ] && break
    [ -e "$D/migrated" ] && seen=1
    now=$(cut -d. -f1 /proc/uptime)
    if [ $((now - start)) -gt "$MAX_WAIT" ]; then
        echo "FAIL: no migration within $MAX_WAIT s"
        fails=$((fails + 1))
        break
    fi
done

# The files held open across the switch.
if read -r line <&3 && [ "$line" = held-line-1 ]; then
    echo "held read fd ok: $line"
else
    echo "FAIL: the read fd held across the migration reads '${line:-nothing}'"
    fails=$((fails + 1))
fi
if echo after >&4; then
    echo "held append fd ok"
else
    echo "FAIL: the append fd held across the migration cannot write"
    fails=$((fails + 1))
fi
exec 4>&-
got=$(cat "$D/held-append" | tr '\n' ' ')
[ "$got" = "before after " ] || { echo "FAIL: held-append holds '$got'"; fails=$((fails + 1)); }
ls . > /tmp/ls.out 2>&1 || { echo "FAIL: the working directory no longer lists: $(cat /tmp/ls.out)"; fails=$((fails + 1)); }
grep -q '^fio-data$' /tmp/ls.out || { echo "FAIL: fio-data missing from the listing"; fails=$((fails + 1)); }
cd /

sync
for f in "$D"/fio-data* "$D/held-append"; do
    echo "VUFS-SUM $(sha256sum "$f" | cut -d' ' -f1) mig/${f##*/}"
done
echo "migrate: $round fio rounds, $fails failures"
[ $fails = 0 ]
