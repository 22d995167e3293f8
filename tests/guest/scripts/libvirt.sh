#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script of the libvirt test (tests/guest/libvirt-host.sh): the guest a
# real libvirt started, its share served by the vufsd libvirt started. Counts
# its boots in the share (libvirt.boots), so one script serves the first boot,
# the boot after `virsh reboot` and the one after a second `virsh start`.
#   Boot 1: the options the domain XML asked for, when OPTIONS says which
#     (OPTIONS="xattr flock posix cache-none": extended attributes set, read
#     back and listed (user.vufsd on xattr.txt, which the host reads too); the host's flock and POSIX lock on flock-held and
#     posix-held seen from here, so locks reach the host; cache=none: the
#     share is direct I/O, a shared mapping is refused), then the share check
#     (share-check.sh) and fio --verify (fio-verify.sh).
#   Later boots: what the boot before left is still there, and the share
#     check again.
# Then prints "VUFS-LIBVIRT-READY boot=N fails=F" and waits for the ACPI power
# button (`virsh reboot` and `virsh shutdown` press it): with the ACPI button
# driver (/lib/button.ko, brought by the host) the kernel counts each press of
# the fixed power-button event in /sys/firmware/acpi/interrupts/ff_pwr_btn.
# The share check runs in check/ (share-check.sh wants host.txt alone in its
# directory); its "VUFS-SUM ... keep.bin" lines name check/keep.bin here.
# Returns F: /init prints the result marker and powers off; libvirt then
# resets the machine (reboot) or QEMU exits (shutdown).
MNT=$1
OPTIONS=
[ -f /run/settings ] && . /run/settings
fails=0
ok() { echo "libvirt: ok $*"; }
bad() { echo "libvirt: FAIL $*"; fails=$((fails + 1)); }
has() { case " $OPTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

# Armed first, so a press that comes while the checks still run is not lost.
btn=/sys/firmware/acpi/interrupts/ff_pwr_btn
presses() { set -- $(cat "$btn"); echo "$1"; }
insmod /lib/button.ko 2> /tmp/insmod.err || grep -q 'File exists' /tmp/insmod.err ||
    bad "insmod button.ko: $(cat /tmp/insmod.err)"
if [ -r "$btn" ]; then
    pressed0=$(presses)
else
    bad "no $btn: cannot see the ACPI power button"
fi

share_check() {
    sh /run/bin/share-check.sh "$MNT/check" > /tmp/share-check.out 2>&1 || bad "share check"
    sed 's| keep.bin$| check/keep.bin|' /tmp/share-check.out
}

boot=$(( $(cat "$MNT/libvirt.boots" 2>/dev/null || echo 0) + 1 ))
echo "$boot" > "$MNT/libvirt.boots"
echo "VUFS-LIBVIRT-BOOT n=$boot"

if [ "$boot" = 1 ]; then
    if has xattr; then
        echo xattr > "$MNT/xattr.txt"
        vufs-probe xattr-set "$MNT/xattr.txt" user.vufsd libvirt && ok "xattr: set, read back, listed" ||
            bad "xattr: user.vufsd on xattr.txt"
    fi
    if has flock; then
        vufs-probe trylock "$MNT/flock-held"
        [ $? = 1 ] && ok "flock: the host's flock on flock-held is seen" ||
            bad "flock: the host's flock on flock-held is not seen (locks stay in the guest)"
    fi
    if has posix; then
        vufs-probe posix-try "$MNT/posix-held"
        [ $? = 1 ] && ok "posix lock: the host's POSIX lock on posix-held is seen" ||
            bad "posix lock: the host's lock on posix-held is not seen (locks stay in the guest)"
    fi
    if has cache-none; then
        : > "$MNT/mapped.bin"
        if vufs-probe fill "$MNT/mapped.bin" 0 4096 7 > /tmp/fill.out 2>&1; then
            bad "cache=none: a shared mapping was allowed ($(cat /tmp/fill.out))"
        else
            ok "cache=none: direct I/O, a shared mapping is refused ($(cat /tmp/fill.out))"
        fi
        rm -f "$MNT/mapped.bin"
    fi
    share_check
    sh /run/bin/fio-verify.sh "$MNT" || bad "fio --verify"
else
    # The previous boot's keep.bin, then moved aside: the share check writes a
    # new one.
    prev=$((boot - 1))
    [ -f "$MNT/last.sum" ] && sha256sum -c "$MNT/last.sum" > /dev/null &&
        ok "boot $boot: boot $prev's check/keep.bin still there, same checksum" ||
        bad "boot $boot: boot $prev's check/keep.bin lost or changed"
    mv "$MNT/check/keep.bin" "$MNT/keep-boot$prev.bin"
    share_check
fi
sha256sum "$MNT/check/keep.bin" > "$MNT/last.sum"
sync
echo "VUFS-LIBVIRT-READY boot=$boot fails=$fails"
if [ -r "$btn" ]; then
    while [ "$(presses)" = "$pressed0" ]; do
        sleep 0.2
    done
    echo "VUFS-LIBVIRT-POWER-BUTTON boot=$boot"
fi
exit "$fails"
