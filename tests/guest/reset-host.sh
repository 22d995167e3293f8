#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A device reset and a crash reboot with the share mounted (scripts/reset.sh in
# the guest), and the host's proof that nothing of an old session is left
# behind: at each point the guest marks (VUFS-LEAK-POINT on its output), this
# script looks at the serving vufsd process from /proc while the guest waits:
#   - its fds on the shared directory (inodes, open files, lock owners),
#   - the locks those open file descriptions hold (/proc/PID/fdinfo "lock:"),
#   - /proc/locks on the file the guest locks,
# and then lets the guest go on (DIR/.ack-NAME). The first "start" (a fresh
# session, the root only) is the baseline; while the guest holds its lock the
# checks must see it; after each reset's new mount and after the crash
# reboot's mount the fds are back to the baseline and no lock is left.
#
#   reset-host.sh VUFSD PROBE [run-guest.sh options: --qemu ...]
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vufsd=$1 probe=$2
shift 2
dir=$(mktemp -d /tmp/vufs-reset.XXXXXX)
rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
checks=$rundir/leak-checks.log
: > "$checks"

serving_pid() {
    local keeper
    keeper=$(cat "$rundir/vhost.sock.pid" 2>/dev/null) || return 1
    awk '{print $1}' "/proc/$keeper/task/$keeper/children" 2>/dev/null
}
# share_usage PID: "FDS LOCKS" of the process on the shared directory.
share_usage() {
    local pid=$1 fds=0 locks=0 fd t n
    for fd in /proc/"$pid"/fd/*; do
        t=$(readlink "$fd" 2>/dev/null) || continue
        case "$t" in
        "$dir"|"$dir"/*)
            fds=$((fds + 1))
            n=$(grep -c '^lock:' "/proc/$pid/fdinfo/${fd##*/}" 2>/dev/null)
            locks=$((locks + ${n:-0})) ;;
        esac
    done
    echo "$fds $locks"
}
proc_locks_on() {
    local ino
    ino=$(stat -c %i "$dir/$1" 2>/dev/null) || { echo 0; return; }
    grep -c ":$ino " /proc/locks
}

# The watcher: one measurement per point, in order, then the acknowledgement.
(
    seen=0 base=
    while :; do
        mapfile -t points < <(grep -a -o 'VUFS-LEAK-POINT [a-z0-9-]*' "$rundir/output.log" 2>/dev/null)
        while [ $seen -lt ${#points[@]} ]; do
            point=${points[seen]#VUFS-LEAK-POINT }
            seen=$((seen + 1))
            pid=$(serving_pid)
            if [ -z "$pid" ]; then
                echo "leak-check $point FAIL no serving process" >> "$checks"
            else
                read -r fds locks < <(share_usage "$pid")
                plocks=$(proc_locks_on a)
                what="fds on the share $fds (baseline ${base:-?}), locks held $locks, /proc/locks on a $plocks"
                verdict=ok
                case "$point" in
                start)
                    if [ -z "$base" ]; then
                        base=$fds
                        [ "$locks" = 0 ] || verdict=FAIL
                    else
                        point=start-after-reboot
                        [ "$fds" = "$base" ] && [ "$locks" = 0 ] && [ "$plocks" = 0 ] || verdict=FAIL
                    fi ;;
                held-*)
                    # The checks see a lock when there is one.
                    [ "$locks" -ge 1 ] && [ "$plocks" -ge 1 ] && [ "$fds" -gt "$base" ] || verdict=FAIL ;;
                reset-*)
                    [ "$fds" = "$base" ] && [ "$locks" = 0 ] && [ "$plocks" = 0 ] || verdict=FAIL ;;
                esac
                echo "leak-check $point $verdict: $what" >> "$checks"
                [ "$verdict" = ok ] || ls -l /proc/"$pid"/fd >> "$checks" 2>&1
            fi
            rm -f "$dir"/.ack-*
            : > "$dir/.ack-${points[seen - 1]#VUFS-LEAK-POINT }"
        done
        sleep 0.1
    done
) &
watcher=$!

"$here/run-guest.sh" --rundir "$rundir" --dir "$dir" --keep \
    --backend "$vufsd --socket-path {socket} --shared-dir {dir} --cache auto --xattr --log-level info" \
    --script "$here/scripts/reset.sh" --set REBOOT=1 --set LEAK=1 --allow-reboot \
    --file "$probe:/bin/vufs-probe" --min-sums 3 --expect-exit0 --timeout 420 "$@"
rc=$?
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
cat "$checks"
fails=$(grep -c ' FAIL' "$checks")
for want in start held-1 reset-1 held-2 reset-2 start-after-reboot; do
    grep -q "^leak-check $want " "$checks" || { echo "reset-host: no check at $want"; fails=$((fails + 1)); }
done
if [ $rc != 0 ] || [ "$fails" != 0 ]; then
    echo "reset-host: FAIL (guest rc=$rc, leak checks failed: $fails; logs in $rundir)"
    exit 1
fi
rm -rf "$dir"
echo "reset-host: PASS"
exit 0
}
