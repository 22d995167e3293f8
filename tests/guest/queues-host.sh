#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Multiqueue with a real guest: the device offers N request queues
# (num-request-queues=N), the guest runs fio with one job per vCPU
# (scripts/queues.sh) and the host counts, in vufsd's log, the requests each
# queue delivered. Passes when every request queue carried at least MIN_SHARE
# percent of the requests, i.e. the guest really spread them and vufsd served
# every queue. Needs a guest that spreads (Linux >= 6.11: --kernel 6.12) and as
# many vCPUs as queues.
#
#   queues-host.sh VUFSD [--queues N] [--min-share PCT] [run-guest options...]
#
# The counts: vufsd has no per-queue request counter it reports (its per-queue
# statistics are the busy-poll counts, logged at exit with --poll-us), so the
# daemon runs with --log-level debug, which logs one "queue Q: request head H"
# line per request popped (queue 0 is hiprio, 1..N the request queues), and
# "queue Q stopped at avail index I, at most D requests waiting" when the
# frontend stops the queue: I must agree with the count, and D (the deepest
# backlog found at a pop) shows that a queue depth of 16 in the guest reached
# the device as such.
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '4,21p' "$0" >&2; exit 2; }
vufsd=$1
shift
[ -x "$vufsd" ] || { echo "queues-host: $vufsd is not executable" >&2; exit 1; }
queues=4 min_share=5 args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --queues) queues=$2; shift 2 ;;
    --min-share) min_share=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
done
case "$queues" in
''|*[!0-9]*|0|1) echo "queues-host: --queues must be 2 or more, not '$queues'" >&2; exit 2 ;;
esac

rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
"$here/run-guest.sh" --rundir "$rundir" --queues "$queues" --smp "$queues" \
    --backend "$vufsd --socket-path {socket} --shared-dir {dir} --cache auto --log-level debug" \
    --script "$here/scripts/queues.sh" --min-sums "$queues" ${args[@]+"${args[@]}"}
rc=$?
[ $rc = 0 ] || { echo "queues-host: FAIL: the guest run failed (logs in $rundir)"; exit 1; }

# Requests per queue, from the daemon's own log.
declare -a count
total=0
for ((q = 0; q <= queues; q++)); do
    count[q]=$(grep -c " queue $q: request head " "$rundir/backend.log")
    [ "$q" = 0 ] || total=$((total + count[q]))
done
other=$(grep -c ' queue [0-9]*: request head ' "$rundir/backend.log")
other=$((other - total - count[0]))
echo "queues-host: requests per queue in vufsd's log: hiprio ${count[0]}$(
    for ((q = 1; q <= queues; q++)); do printf ', request queue %d: %d' "$q" "${count[q]}"; done)"
grep -a -o 'VUFS-QUEUE-IRQ.*' "$rundir/output.log" | sed 's/^VUFS-QUEUE-IRQ /queues-host: guest interrupts /'
fails=0
[ "$total" -ge 100 ] || { echo "queues-host: only $total requests on the request queues"; fails=1; }
[ "$other" = 0 ] || { echo "queues-host: $other requests on queues the device does not have"; fails=1; }
for ((q = 1; q <= queues; q++)); do
    if [ $((count[q] * 100)) -lt $((total * min_share)) ]; then
        echo "queues-host: request queue $q carried ${count[q]} of $total requests (< $min_share %)"
        fails=1
    fi
done
# Cross-check: a queue started once at base 0 and stopped once reports, as its
# avail index at the stop (GET_VRING_BASE), the number of requests it popped.
for ((q = 0; q <= queues; q++)); do
    [ "$(grep -c " queue $q started (size [0-9]*, base 0," "$rundir/backend.log")" = 1 ] || continue
    stops=$(sed -n "s/.* queue $q stopped at avail index \([0-9]*\),.*/\1/p" "$rundir/backend.log")
    [ "$(echo "$stops" | grep -c .)" = 1 ] || continue
    if [ "$stops" != $((count[q] % 65536)) ]; then
        echo "queues-host: queue $q stopped at avail index $stops but logged ${count[q]} requests"
        fails=1
    fi
done
# The queue depth the guest drove (the libaio phase: 16 reads in flight): at a
# pop, vufsd finds that many requests waiting only if the client sent them
# without waiting for each answer (FUSE_ASYNC_DIO granted). Answered one at a
# time it is 1. Half of 16 leaves room for a daemon quick enough to pop some
# before the guest has queued them all.
deepest=$(sed -n 's/.* queue [1-9][0-9]* stopped at avail index [0-9]*, at most \([0-9]*\) requests waiting$/\1/p' \
              "$rundir/backend.log" | sort -n | tail -n 1)
echo "queues-host: at most ${deepest:-?} requests waiting on a request queue"
if [ "${deepest:-0}" -lt 8 ]; then
    echo "queues-host: 16 reads in flight in the guest reached vufsd ${deepest:-?} at a time (< 8)"
    fails=1
fi
if [ $fails != 0 ]; then
    echo "queues-host: FAIL (logs in $rundir)"
    exit 1
fi
echo "queues-host: PASS: $total requests over $queues request queues, each >= $min_share %"
rm -rf "$rundir"
exit 0
}
