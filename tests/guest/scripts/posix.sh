#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: the POSIX behaviour suite on the virtio-fs mount ($1). Files the
# suite keeps are checksummed after dropping the page cache and printed as
# "VUFS-SUM SHA256 PATH" for the host to compare with the shared directory.
# The suite runs with -k: the host removes the shared directory, which is far
# faster than unlinking 10k files through the mount.
# Settings: POSIX_XFAIL (comma list of known gaps, reported as XFAIL).
MNT=$1
POSIX_XFAIL=
[ -f /run/settings ] && . /run/settings

/run/bin/posix_suite -k ${POSIX_XFAIL:+-x "$POSIX_XFAIL"} "$MNT" > /tmp/posix.out 2>&1
rc=$?
cat /tmp/posix.out
grep -q '^[0-9]* passed, [0-9]* failed' /tmp/posix.out || { echo "posix: no summary line"; rc=1; }

sync
echo 3 > /proc/sys/vm/drop_caches
for f in $(sed -n 's/^VUFS-KEEP //p' /tmp/posix.out); do
    sum=$(sha256sum "$MNT/$f" | cut -d' ' -f1)
    echo "VUFS-SUM $sum $f"
done
exit $rc
