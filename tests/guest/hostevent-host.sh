#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A host event under a live DAX window must not kill the VM: QEMU 11.1's
# generic device, Linux 6.1, vufsd with --dax-window=64M --dax-policy=always,
# the guest mounting with -o dax=always (tests/guest/scripts/hostevent.sh):
#
#   hostevent-host.sh VUFSD PROBE RESIZE truncate|enospc [run-guest.sh options]
#
#   truncate  the guest reads an 8 MiB file through the window, a host process
#             runs truncate -s 0 on it, the guest reads it again
#   enospc    the share is a 24 MiB tmpfs (mounted here: needs root) holding a
#             20 MiB file; the guest fills the holes of an 8 MiB sparse file
#
# PASS: the guest printed "VUFS-HOSTEVENT case=CASE ok" (it saw what a local
# file system would show it), its file after the event reached the host, and
# QEMU ended by itself with status 0. Prints QEMU's exit status either way
# (135: killed by SIGBUS).
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 4 ] || { sed -n '4,/^{$/p' "$0" | sed '$d' >&2; exit 2; }
vufsd=$1 probe=$2 resize=$3 case=$4
shift 4
rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
dir=$rundir/share
mkdir -p "$dir"
helper= mounted=0
cleanup() {
    if [ -n "$helper" ]; then kill "$helper" 2>/dev/null; wait "$helper" 2>/dev/null; fi
    [ $mounted = 0 ] || umount "$dir" || echo "hostevent-host: cannot unmount $dir"
}
trap cleanup EXIT
case $case in
truncate)
    head -c 8388608 /dev/urandom > "$dir/h8"
    # The host process: once the guest has read h8, truncate it to 0.
    (
        while [ ! -e "$dir/.read-done" ]; do sleep 0.1; done
        truncate -s 0 "$dir/h8"
        : > "$dir/.host-truncated"
    ) &
    helper=$!
    ;;
enospc)
    mount -t tmpfs -o size=24m,mode=0755 tmpfs "$dir" ||
        { echo "hostevent-host: FAIL: cannot mount a tmpfs on $dir (needs root)"; exit 1; }
    mounted=1
    head -c 20971520 /dev/zero > "$dir/fill" ||
        { echo "hostevent-host: FAIL: cannot write the 20 MiB file"; exit 1; }
    df -k "$dir" | tail -n 1
    ;;
*) echo "hostevent-host: the case is truncate or enospc, not '$case'" >&2; exit 2 ;;
esac
"$here/run-guest.sh" --qemu 11.1 --vdev generic --kernel 6.1 --rundir "$rundir" \
    --dir "$dir" --keep --timeout 280 --expect-qemu-exit0 \
    --backend "$vufsd --socket-path {socket} --shared-dir {dir} --tag myfs \
--dax-window=64M --dax-policy=always --log-level info" \
    --script "$here/scripts/hostevent.sh" --set "CASE=$case" --set MOUNT_OPTS=dax=always \
    --file "$probe:/bin/vufs-probe" --file "$resize:/bin/vufs-resize" --min-sums 1 "$@"
rc=$?
st=$(cat "$rundir/qemu.status" 2>/dev/null || echo unknown)
marker=$(grep -a -o 'VUFS-HOSTEVENT [^[:cntrl:]]*' "$rundir/output.log" 2>/dev/null)
echo "hostevent-host: case $case: QEMU exit status $st$([ "$st" = 135 ] && echo ' (SIGBUS)'), guest marker: ${marker:-none}"
if [ $rc != 0 ] || [ "$st" != 0 ] || [ "$marker" != "VUFS-HOSTEVENT case=$case ok" ]; then
    echo "hostevent-host: FAIL (logs in $rundir)"
    exit 1
fi
cleanup
trap - EXIT
rm -rf "$rundir/share"
echo "hostevent-host: PASS"
exit 0
}
