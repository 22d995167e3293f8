#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Runs a Debian 13 program (QEMU 11.1, the Rust virtiofsd) from the cached
# Debian 13 root on this host:
#
#   trixie-run.sh [--bind DIR]... [--] PROGRAM [ARGS...]
#
# The program runs chrooted in the root, in a private mount namespace that sees
# the host's /dev, /proc, /sys, /tmp, /dev/shm and every --bind DIR (and
# $VUFS_TRIXIE_BINDS, colon-separated) at the same paths, so sockets, logs,
# kernels and shared directories keep their host paths. The mounts vanish with
# the process: nothing is left mounted, whatever happens to it. The program's
# pid is this script's (exec), so callers can signal it directly.
{
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$("$here/trixie-root.sh") || { echo "trixie-run: no Debian 13 root" >&2; exit 1; }
binds=(/dev /proc /sys /tmp)
while [ $# -gt 0 ]; do
    case "$1" in
    --bind) binds+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: trixie-run.sh [--bind DIR]... PROGRAM [ARGS...]" >&2; exit 2; }
if [ -n "${VUFS_TRIXIE_BINDS:-}" ]; then
    IFS=: read -r -a extra <<< "$VUFS_TRIXIE_BINDS"
    binds+=("${extra[@]}")
fi
export VUFS_TRIXIE_ROOT=$root
exec unshare -m --propagation private bash -c '
    set -e
    root=$VUFS_TRIXIE_ROOT
    n=$1; shift
    for ((i = 0; i < n; i++)); do
        d=$(readlink -f "$1"); shift
        [ -d "$d" ] || continue
        mkdir -p "$root$d"
        mount --rbind "$d" "$root$d"
    done
    exec chroot "$root" "$@"' trixie-run "${#binds[@]}" "${binds[@]}" "$@"
}
