#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A real guest against vufsd with --security-label and uid/gid translation
# (tests/guest/scripts/creds.sh), then the host side: every object the guest
# made or chowned must carry the translated ids on the host. Then a guest
# running SELinux (tests/guest/scripts/labels.sh): every object it made must
# carry the guest's security context as security.selinux on the host.
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

# Labels: the guest runs SELinux (no policy: contexts are "unlabeled"), vufsd
# sets what each creating request carries as security.selinux on the host.
dir=$(mktemp -d /tmp/vufs-creds.XXXXXX)
"$here/run-guest.sh" --rundir "$rundir/labels" --dir "$dir" --keep --timeout 570 \
    --append "security=selinux selinux=1 enforcing=0" \
    --backend "$vufsd --socket-path {socket} --shared-dir {dir} --security-label \
--modcaps=+sys_admin --log-level info" \
    --script "$here/scripts/labels.sh"
lrc=$?
if [ $lrc -eq 0 ]; then
    for n in "" f d l p; do
        got=$(python3 -c 'import os, sys
print(os.getxattr(sys.argv[1], "security.selinux", follow_symlinks=False))' "$dir/labels/$n" 2>&1)
        if [ "$got" = "b'unlabeled\x00'" ]; then echo "host ok: labels/$n $got"
        else echo "host FAIL: labels/$n security.selinux is $got"; fails=$((fails + 1)); fi
    done
else
    rc=$lrc
fi
rm -rf "$dir"
if [ $rc -ne 0 ] || [ $fails -ne 0 ]; then
    echo "creds-host: FAIL (guest rc=$rc, host checks failed: $fails; logs in $rundir)"
    exit 1
fi
rm -rf "$rundir"
echo "creds-host: PASS"
