#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: ids and labels through a real Linux guest, against vufsd with
# --security-label --translate-uid map:0:5000:2000 --translate-gid map:0:6000:2000
# (tests/guest/creds-host.sh starts it and checks the host side).
# The guest negotiates FUSE_SECURITY_CTX and sends its (empty, no LSM label)
# security context with every create: creates must keep working. Owners the
# guest sets and sees are guest ids; the host checks what they became.
MNT=$1
D=$MNT/creds
fails=0
check() {
    if [ "$1" = "$2" ]; then echo "ok: $3"; else echo "FAIL: $3: got '$1', want '$2'"; fails=$((fails + 1)); fi
}
mkdir "$D" || exit 1
echo data > "$D/f" || fails=$((fails + 1))
mkdir "$D/d" || fails=$((fails + 1))
ln -s f "$D/l" || fails=$((fails + 1))
mknod "$D/p" p || fails=$((fails + 1))
check "$(stat -c %u:%g "$D/d")" "0:0" "guest root's new directory is root's"
chown 1000:1001 "$D/f" || fails=$((fails + 1))
chown -h 42:43 "$D/l" || fails=$((fails + 1))
sync
echo 3 > /proc/sys/vm/drop_caches
check "$(stat -c %u:%g "$D/f")" "1000:1001" "chown 1000:1001 shown back"
check "$(stat -c %u:%g "$D/l")" "42:43" "symlink chown shown back"
check "$(stat -c %u:%g "$D/p")" "0:0" "fifo owner"
check "$(cat "$D/f")" "data" "file content"
# A host file of an id outside the maps (made by the host before the boot).
check "$(stat -c %u:%g "$MNT/hostfile")" "7777:8888" "unmapped host ids pass unchanged"
# The guest's view for the host to compare.
for n in f d l p; do echo "VUFS-OWNER $n $(stat -c %u:%g "$D/$n")"; done
exit $fails
