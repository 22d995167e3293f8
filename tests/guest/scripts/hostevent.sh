#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest half of tests/guest/hostevent-host.sh: a host event under a live DAX
# window, and what the guest must see - what a local file system would show it.
#   truncate  read the 8 MiB file h8 through the window (mount -o dax=always),
#             map it in a second process, tell the host (.read-done), which
#             runs truncate -s 0 on it (.host-truncated); the second process
#             reads its mapping again (the access that reaches the window
#             whatever the guest's attribute cache knows); read h8 again: the
#             read must succeed and give the empty file, a shorter one or the
#             data as it stands (a prefix of what was there); then read it through a mapping (a SIGBUS in
#             the reader past what the file holds is what a local file system
#             gives too)
#   enospc    the share is a 24 MiB tmpfs holding a 20 MiB file: truncate -s 8M f,
#             then dd of 8 MiB of zeros into it, conv=notrunc: dd must fail with
#             ENOSPC, and the share must go on working
# Either way the guest then writes a small file the host checks (VUFS-SUM) and
# prints "VUFS-HOSTEVENT case=CASE ok". Settings: CASE.
MNT=$1
CASE=
[ -f /run/settings ] && . /run/settings
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
grep " $MNT " /proc/mounts

case $CASE in
truncate)
    f=$MNT/h8
    echo "h8 is $(vufs-probe is-dax "$f") and $(stat -c %s "$f") bytes"
    cp "$f" /tmp/orig || fail "the first read of h8"
    echo "first read: $(sha256sum < /tmp/orig | cut -d' ' -f1)"
    [ "$(stat -c %s /tmp/orig)" = 8388608 ] || fail "the first read gave $(stat -c %s /tmp/orig) bytes"
    # A reader that maps h8 now and reads the same mapping after the host's
    # truncate: the guest's kernel does not know the file shrank and backs
    # the mapping by the window as before, so this is the access that reaches
    # the VMM's pages whatever the attribute cache says.
    vufs-resize --map-read "$f" /tmp/held-ready "$MNT/.host-truncated" > /tmp/held.out 2>&1 &
    held=$!
    n=0
    while [ ! -e /tmp/held-ready ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
    [ -e /tmp/held-ready ] || fail "the mapped reader never got ready: $(cat /tmp/held.out)"
    : > "$MNT/.read-done"
    n=0
    while [ ! -e "$MNT/.host-truncated" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
    [ -e "$MNT/.host-truncated" ] || { fail "the host never truncated h8"; exit 1; }
    echo "the host truncated h8"
    wait $held
    rc=$?
    cat /tmp/held.out
    # 0: it read the window's pages (zeros past the new end, or the data as it
    # was); 3: SIGBUS in the reader, as a local file system gives. Either way
    # the reader, not the VM, is what the truncate reaches.
    case $rc in
    0|3) echo "mapping held across the truncate: status $rc" ;;
    *) fail "the mapping held across the truncate: status $rc" ;;
    esac
    if cat "$f" > /tmp/again 2> /tmp/again.err; then
        got=$(stat -c %s /tmp/again)
        if [ "$got" = 0 ] || cmp -s -n "$got" /tmp/orig /tmp/again; then
            echo "second read: $got bytes, as the file stands or was"
        else
            fail "second read: $got bytes that are not what h8 held"
        fi
    else
        fail "second read: $(cat /tmp/again.err)"
    fi
    vufs-resize --map-read "$f"
    echo "mapped read: status $? (3: SIGBUS in the reader past the file's end)"
    echo "h8 is now $(stat -c %s "$f") bytes"
    ;;
enospc)
    df -k "$MNT" | tail -n 1
    truncate -s 8M "$MNT/f" || fail "truncate -s 8M f"
    echo "f is $(vufs-probe is-dax "$MNT/f")"
    if dd if=/dev/zero of="$MNT/f" bs=1M count=8 conv=notrunc 2> /tmp/dd.err; then
        fail "dd wrote 8 MiB into a share with 4 MiB free"
    fi
    cat /tmp/dd.err
    grep -q 'No space left on device' /tmp/dd.err || fail "dd did not fail with ENOSPC"
    rm -f "$MNT/f" || fail "rm f"
    ;;
*)
    echo "unknown CASE '$CASE'"
    exit 2
    ;;
esac

# The share goes on working.
echo "written after the $CASE event" > "$MNT/after" && sync || fail "writing a file after the event"
echo "VUFS-SUM $(sha256sum "$MNT/after" | cut -d' ' -f1) after"
[ $fails = 0 ] && echo "VUFS-HOSTEVENT case=$CASE ok"
exit $fails
