#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# vufsd restarted twice under a running guest (scripts/restart.sh): at each
# point the guest marks, this script sends SIGHUP to the keeper (the process
# the pid file names); before the second it replaces the binary at the
# daemon's path, so the second restart is an upgrade (the keeper must then run
# the new file). The guest runs fio --verify across both and checks its open
# file and locks; here, afterwards: QEMU's connection was never replaced (one
# "frontend connected", no disconnect before the last restart was served).
#
#   restart-host.sh VUFSD PROBE [run-guest.sh options]
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vufsd=$1 probe=$2
shift 2
restarts=2
dir=$(mktemp -d /tmp/vufs-restart.XXXXXX)
rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
bin=$rundir/vufsd-bin
cp "$vufsd" "$bin"
checks=$rundir/restart-checks.log
: > "$checks"

# The watcher: a restart per point, then the guest's go-ahead.
(
    seen=0
    while :; do
        mapfile -t points < <(grep -a -o 'VUFS-RESTART-POINT [0-9]*' "$rundir/output.log" 2>/dev/null)
        while [ $seen -lt ${#points[@]} ]; do
            n=${points[seen]#VUFS-RESTART-POINT }
            seen=$((seen + 1))
            keeper=$(cat "$rundir/vhost.sock.pid")
            if [ "$n" = 2 ]; then
                # The upgrade: another file (another inode) at the daemon's path.
                cp "$vufsd" "$bin.new" && mv -f "$bin.new" "$bin"
            fi
            want=$(stat -c %i "$bin")
            t0=$(date +%s%N)
            kill -HUP "$keeper"
            ok=0 until=$(( $(date +%s) + 120 ))
            while [ "$(date +%s)" -lt $until ] && kill -0 "$keeper" 2>/dev/null; do
                [ "$(grep -c 'restart: serving the frontend on' "$rundir/backend.log")" -ge "$n" ] && { ok=1; break; }
                sleep 0.05
            done
            ms=$(( ($(date +%s%N) - t0) / 1000000 ))
            running=$(stat -L -c %i "/proc/$keeper/exe" 2>/dev/null)
            if [ $ok = 1 ] && [ "$running" = "$want" ]; then
                echo "restart $n ok: served again ${ms} ms after SIGHUP, keeper $keeper runs inode $running" >> "$checks"
            else
                echo "restart $n FAIL: served=$ok after ${ms} ms, keeper runs inode ${running:-?}, want $want" >> "$checks"
                # The guest would wait on its share until run-guest's deadline: end it now.
                kill "$(cat "$rundir/qemu.pid" 2>/dev/null)" 2>/dev/null
            fi
            : > "$dir/.restarted-$n"
        done
        sleep 0.1
    done
) &
watcher=$!

"$here/run-guest.sh" --rundir "$rundir" --dir "$dir" --keep --qemu 11.1 \
    --backend "$bin --socket-path {socket} --shared-dir {dir} --cache auto --xattr --log-level info" \
    --script "$here/scripts/restart.sh" --set "RESTARTS=$restarts" \
    --file "$probe:/bin/vufs-probe" --min-sums 3 --expect-exit0 --timeout 840 "$@"
rc=$?
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
fails=$(grep -c ' FAIL' "$checks")
[ "$(grep -c '^restart [0-9]* ok' "$checks")" = "$restarts" ] ||
    { echo "restart-host: $(grep -c '^restart [0-9]* ok' "$checks") of $restarts restarts done"; fails=$((fails + 1)); }
log=$rundir/backend.log
# One connection for the guest's whole life: no reconnect, no early disconnect.
[ "$(grep -c 'frontend connected' "$log")" = 1 ] ||
    { echo "restart-host: FAIL: QEMU connected $(grep -c 'frontend connected' "$log") times"; fails=$((fails + 1)); }
last_served=$(grep -n 'restart: serving the frontend on' "$log" | tail -1 | cut -d: -f1)
first_gone=$(grep -n 'frontend disconnected\|connection dropped' "$log" | head -1 | cut -d: -f1)
if [ -n "$first_gone" ] && [ -n "$last_served" ] && [ "$first_gone" -lt "$last_served" ]; then
    echo "restart-host: FAIL: the frontend disconnected before the last restart was served"
    fails=$((fails + 1))
fi
cat "$checks"
grep -a '^VUFS-FIO\|  fio: ' "$rundir/output.log"
if [ $rc != 0 ] || [ "$fails" != 0 ]; then
    echo "restart-host: FAIL (guest rc=$rc, host checks failed: $fails; logs in $rundir)"
    exit 1
fi
rm -rf "$dir"
echo "restart-host: PASS"
exit 0
}
