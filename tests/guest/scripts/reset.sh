#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: a device reset with the share mounted, as a crashed guest's
# reboot, a kexec or a driver rebind do it (no FUSE_DESTROY reaches the daemon).
# The guest writes a file, holds a flock on it and keeps it open, then removes
# the virtio-fs PCI function and rescans the bus: the new driver instance must
# mount again and serve (the daemon ends the old session, which it did not:
# every operation on the new mount failed with ECONNREFUSED). The old session's
# lock must be gone (a non-blocking flock from the new mount succeeds), and the
# file written before the reset reads back. Twice, then a final write the host
# checks. With REBOOT=1, then a crash reboot with a lock held and a writer
# running; the second boot mounts, reads, locks and passes fio --verify.
MNT=$1
REBOOT=0
LEAK=0
[ -f /run/settings ] && . /run/settings
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# With LEAK=1 (tests/guest/reset-host.sh), at each point the host measures the
# daemon from /proc (its fds on the share, the locks they hold, /proc/locks)
# and says so by creating DIR/.ack-NAME; waiting for it costs the daemon
# nothing (a lookup of a missing name leaves no inode behind).
leak_point() { # NAME DIR
    [ "$LEAK" = 1 ] || return 0
    echo "VUFS-LEAK-POINT $1"
    n=0
    while [ ! -e "$2/.ack-$1" ] && [ $n -lt 900 ]; do sleep 0.1; n=$((n + 1)); done
    [ -e "$2/.ack-$1" ] || fail "the host did not check the daemon at $1"
}

# First, in both boots: the session knows nothing but the share's root yet.
leak_point start "$MNT"

# Boot 2 (after the crash reboot below): the share mounts (init did), what the
# first boot wrote reads back, and fio writes and verifies a new file.
if [ -e "$MNT/.rebooted" ]; then
    echo "VUFS-GUEST-REBOOTED the share mounted after a crash reboot"
    [ "$(cat "$MNT/b" 2>&1)" = "after the resets" ] || fail "b after the reboot: $(cat "$MNT/b" 2>&1)"
    vufs-probe trylock "$MNT/a" || fail "a lock of the first boot survived the reboot"
    fio --name=v --filename="$MNT/after-reboot" --size=16M --bs=4k --rw=randwrite \
        --verify=crc32c --do_verify=1 --eta=never --output=/tmp/v.out 2>/tmp/v.err ||
        { fail "fio verify after the reboot"; grep -m3 -E 'err|verify' /tmp/v.out /tmp/v.err; }
    echo "VUFS-SUM $(sha256sum "$MNT/after-reboot" | cut -d' ' -f1) after-reboot"
    echo "reset.sh: $fails failure(s) after the reboot"
    exit $fails
fi

pci_of_virtiofs() {
    for d in /sys/bus/virtio/drivers/virtiofs/virtio*; do
        [ -e "$d" ] || continue
        basename "$(dirname "$(readlink -f "$d")")"
    done | head -n 1
}

echo "before the reset" > "$MNT/a"
sync
cur=$MNT
for round in 1 2; do
    # Hold a lock (and so an open file) of the old session across the reset.
    vufs-probe hold "$cur/a" 600 &
    holder=$!
    sleep 1
    vufs-probe trylock "$cur/a" > /dev/null && fail "the lock held before reset $round is not held"
    leak_point "held-$round" "$cur"
    pci=$(pci_of_virtiofs)
    [ -n "$pci" ] || { fail "no virtio-fs PCI device"; break; }
    echo "round $round: removing $pci with $cur mounted and a lock held"
    echo 1 > "/sys/bus/pci/devices/$pci/remove" || fail "PCI remove"
    sleep 1
    echo 1 > /sys/bus/pci/rescan || fail "PCI rescan"
    n=0
    while [ -z "$(pci_of_virtiofs)" ] && [ $n -lt 50 ]; do sleep 0.2; n=$((n + 1)); done
    new=/mnt-r$round
    mkdir -p "$new"
    if ! mount -t virtiofs myfs "$new" 2> /tmp/mount.err; then
        fail "mount after reset $round: $(cat /tmp/mount.err)"
        break
    fi
    # The new driver's INIT ended the old session: nothing of it may be left.
    leak_point "reset-$round" "$new"
    got=$(cat "$new/a" 2>&1) || fail "read after reset $round: $got"
    [ "$got" = "before the reset" ] || fail "after reset $round the file reads '$got'"
    ls "$new" > /dev/null || fail "ls after reset $round"
    # The old session's flock was released on the host.
    vufs-probe trylock "$new/a" || fail "the old session's lock survived reset $round"
    echo "round $round: the new mount serves: $(ls "$new" | tr '\n' ' ')"
    kill $holder 2>/dev/null
    cur=$new
done
echo "after the resets" > "$cur/b" || fail "write after the resets"
sync
echo "VUFS-SUM $(sha256sum "$cur/b" | cut -d' ' -f1) b"
echo "VUFS-SUM $(sha256sum "$cur/a" | cut -d' ' -f1) a"
if [ "$REBOOT" = 1 ] && [ $fails = 0 ]; then
    # A crash with the share mounted, a lock held and a writer running.
    vufs-probe hold "$cur/a" 600 &
    fio --name=busy --filename="$cur/busy" --size=16M --bs=4k --rw=randwrite --time_based \
        --runtime=60 --eta=never --output=/dev/null 2>/dev/null &
    sleep 3
    : > "$cur/.rebooted"
    sync
    echo "crash reboot with a writer running"
    echo b > /proc/sysrq-trigger
    sleep 30
    echo "the sysrq reboot did not happen"
    exit 99
fi
umount "$cur" 2>/dev/null
echo "reset.sh: $fails failure(s)"
exit $fails
