#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A host with nothing installed, on this machine: a minimal Debian 12 root
# (debootstrap --variant=minbase: no glib, no fuse, no QEMU, no fio, no Python,
# no xz) made once and cached, then a command run with that root as / (a
# private mount namespace and pivot_root, so the daemons' namespace sandboxes
# work as on a real host; /proc, /sys and /dev are the host's, /tmp is new).
#
#   scripts/kit/bare-root.sh [--copy FILE]... -- COMMAND [ARGS...]
#
# --copy puts FILE into the root's /kit first. The root: $VUFS_BARE_ROOT, or
# $VUFS_GUEST_CACHE/bare-bookworm (tests/guest/cache/bare-bookworm).
{
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
root=${VUFS_BARE_ROOT:-${VUFS_GUEST_CACHE:-$here/tests/guest/cache}/bare-bookworm}
copies=()
while [ $# -gt 0 ]; do
    case "$1" in
    --copy) copies+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { sed -n '4,14p' "$0" >&2; exit 2; }
mkdir -p "$(dirname "$root")"
exec 9> "$root.lock"
flock 9
if [ ! -f "$root/.complete" ]; then
    command -v debootstrap > /dev/null || { echo "bare-root: no debootstrap" >&2; exit 1; }
    rm -rf "$root"
    echo "bare-root: debootstrap --variant=minbase bookworm $root" >&2
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian > "$root.log" 2>&1 ||
        { tail -n 5 "$root.log" >&2; exit 1; }
    touch "$root/.complete"
fi
mkdir -p "$root/kit"
for f in ${copies[@]+"${copies[@]}"}; do cp "$f" "$root/kit/"; done
exec 9>&-
exec unshare --mount --propagation private --fork bash -c '
set -e
r=$1; shift
mount --rbind "$r" "$r"
for m in proc sys dev; do mount --rbind "/$m" "$r/$m"; done
mount -t tmpfs tmpfs "$r/tmp"
cd "$r"
mkdir -p .old
pivot_root . .old
umount -l /.old
cd /kit
exec "$@"' bare-root "$root" "$@"
}
