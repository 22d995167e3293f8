#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The command lines management stacks really start vhost-user-fs daemons with,
# proven against one real guest: each invocation serves its own virtio-fs
# device (its own daemon, socket, tag and directory), the guest mounts all of
# them and runs scripts/share-check.sh on each, and every daemon must exit 0 by
# itself once QEMU disconnects.
#
#   rust         --shared-dir DIR --cache always --socket-path P
#                (the Rust virtiofsd's long options; the primary device)
#   libvirt      --fd=N -o source=DIR -o cache=always --thread-pool-size=N
#                --sandbox=chroot (the caller creates the socket, as libvirt does)
#   libvirt-old  what libvirt builds for a daemon without "separate-options":
#                --fd=N -o source=DIR,cache=always,sandbox=chroot,xattr,flock,posix_lock
#                --thread-pool-size=N
#   libvirt-new  what libvirt builds for one with "separate-options":
#                --fd=N --shared-dir DIR --cache always --sandbox chroot --xattr
#                --thread-pool-size=N --rlimit-nofile=N
#   kata         Kata's Go runtime with its shipped defaults: --syslog --cache=auto
#                --shared-dir=DIR --fd=3 --thread-pool-size=1 -o announce_submounts
#                (a host mount point inside the share must reach the guest as a
#                submount)
#   kata-never   the same with --cache=never and --announce-submounts
#   systemd      the ExecStart line of packaging/vufsd@.service, run by
#                systemd-socket-activate on a listening socket (as vufsd@.socket)
#
#   invocations.sh VUFSD [run-guest options...]
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '4,28p' "$0" >&2; exit 2; }
vufsd=$1
shift
[ -x "$vufsd" ] || { echo "invocations: $vufsd is not executable" >&2; exit 1; }
lfd="python3 $here/listen-fd.py {socket} 3"
# The unit's own command line: @LIBEXECDIR@ and the EnvironmentFile's variables filled in.
unit=$here/../../packaging/vufsd@.service
sa=$(command -v systemd-socket-activate) || { echo "invocations: no systemd-socket-activate" >&2; exit 1; }
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ -n "$exec_start" ] || { echo "invocations: no ExecStart in $unit" >&2; exit 1; }
exec_start=${exec_start//@LIBEXECDIR@\/vufsd/$vufsd}
exec_start=${exec_start//\$\{SHARED_DIR\}/\{dir\}}
exec_start=${exec_start//\$VUFSD_OPTIONS/}

work=$(mktemp -d /tmp/vufs-invocations.XXXXXX)
sub_mounted=
cleanup() {
    for m in $sub_mounted; do umount "$m" 2> /dev/null || umount -l "$m"; done
    rm -rf "$work"
}
trap cleanup EXIT

tags="rust libvirt libvirt-old libvirt-new kata kata-never systemd"
for t in $tags; do
    mkdir -p "$work/$t"
    echo "host file for $t" > "$work/$t/host.txt"
done
[ -d "$work/rust" ] || exit 1
# Submounts: a host mount point inside each Kata share (root only).
submount_tags=
if [ "$(id -u)" = 0 ]; then
    for t in kata kata-never; do
        mkdir "$work/$t/sub"
        if mount -t tmpfs -o size=1m "vufs-$t-sub" "$work/$t/sub"; then
            sub_mounted="$sub_mounted $work/$t/sub"
            echo "inside the submount" > "$work/$t/sub/inner.txt"
            submount_tags="$submount_tags $t"
        fi
    done
fi
[ -n "$submount_tags" ] || echo "invocations: no submounts (not root): announce-submounts unchecked"
# host.txt names the share: "myfs" is the primary device's tag in the guest.
echo "host file for myfs" > "$work/rust/host.txt"

"$here/run-guest.sh" \
    --backend "$vufsd --shared-dir {dir} --cache always --socket-path {socket}" \
    --dir "$work/rust" \
    --device libvirt "$work/libvirt" \
        "$lfd $vufsd --fd=3 -o source={dir} -o cache=always --thread-pool-size=2 --sandbox=chroot" \
    --device libvirt-old "$work/libvirt-old" \
        "$lfd $vufsd --fd=3 -o source={dir},cache=always,sandbox=chroot,xattr,flock,posix_lock --thread-pool-size=4" \
    --device libvirt-new "$work/libvirt-new" \
        "$lfd $vufsd --fd=3 --shared-dir {dir} --cache always --sandbox chroot --xattr --thread-pool-size=2 --rlimit-nofile=4096" \
    --device kata "$work/kata" \
        "$lfd $vufsd --syslog --cache=auto --shared-dir={dir} --fd=3 --thread-pool-size=1 -o announce_submounts" \
    --device kata-never "$work/kata-never" \
        "$lfd $vufsd --syslog --cache=never --shared-dir={dir} --fd=3 --thread-pool-size=1 --announce-submounts" \
    --device systemd "$work/systemd" "$sa -l {socket} $exec_start" \
    --set "SUBMOUNT_TAGS=$submount_tags" \
    --script "$here/scripts/share-check.sh" \
    --min-sums 7 --expect-exit0 --mem 1024 "$@"
rc=$?
exit $rc
}
