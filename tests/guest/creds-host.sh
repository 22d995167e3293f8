#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A real guest against vufsd with --security-label and uid/gid translation
# (tests/guest/scripts/creds.sh), then the host side: every object the guest
# made or chowned must carry the translated ids on the host.
#
#   creds-host.sh VUFSD
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vufsd=$1
dir=$(mktemp -d /tmp/vufs-creds.XXXXXX)
chmod 1777 "$dir"
touch "$dir/hostfile" && chown 7777:8888 "$dir/hostfile"
rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
"$here/run-guest.sh" --rundir "$rundir" --dir "$dir" --keep --timeout 570 \
    --backend "$vufsd --socket-path {socket} --shared-dir {dir} --security-label \
--translate-uid map:0:5000:2000 --translate-gid map:0:6000:2000 --log-level info" \
    --script "$here/scripts/creds.sh"
rc=$?
fails=0
want() {
    local got
    got=$(stat -c %u:%g "$dir/creds/$1" 2>/dev/null)
    if [ "$got" = "$2" ]; then echo "host ok: $1 $got"; else echo "host FAIL: $1 is '$got', want $2"; fails=$((fails + 1)); fi
}
if [ $rc -eq 0 ]; then
    want d 5000:6000   # guest root -> map base
    want p 5000:6000
    want f 6000:7001   # chown 1000:1001 -> 5000+1000 : 6000+1001
    want l 5042:6043
fi
rm -rf "$dir"
if [ $rc -ne 0 ] || [ $fails -ne 0 ]; then
    echo "creds-host: FAIL (guest rc=$rc, host checks failed: $fails; logs in $rundir)"
    exit 1
fi
rm -rf "$rundir"
echo "creds-host: PASS"
