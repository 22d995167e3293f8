#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Today's stack from Debian 13 (trixie) on a Debian 12 host: a minimal Debian 13
# root made with debootstrap, holding QEMU 11.1 (trixie-backports), the Rust
# virtiofsd and Debian 13's kernel package. Debian 13 binaries do not run on
# Debian 12's glibc, so they run inside this root through chroot (trixie-run.sh).
#
#   trixie-root.sh           prepare (or reuse) the root; prints its path
#   trixie-root.sh --kernel  also prints the path of the 6.12 kernel .deb in it
#
# Cached in $VUFS_GUEST_CACHE/trixie (default tests/guest/cache/trixie); a
# complete root is reused without touching the network. About 2 minutes and
# 450 MB the first time.
{
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${VUFS_GUEST_CACHE:-$here/cache}
root=$cache/trixie
mirror=${VUFS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
want_kernel=0
[ "${1:-}" = --kernel ] && want_kernel=1

log() { echo "trixie-root: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

mkdir -p "$cache"
exec 9> "$cache/.trixie.lock"
flock 9

print() {
    echo "$root"
    if [ $want_kernel = 1 ]; then
        ls "$root"/var/cache/vufs-kernel/linux-image-6.12*_amd64.deb 2>/dev/null | tail -n1
    fi
}

if [ -f "$root/.complete" ]; then
    print
    exit 0
fi

[ "$(id -u)" = 0 ] || die "making the Debian 13 root needs root (debootstrap, chroot)"
if ! command -v debootstrap > /dev/null; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q debootstrap >&2 ||
        die "apt-get install debootstrap failed"
fi

log "debootstrap trixie into $root"
rm -rf "$root"
mkdir -p "$root"
debootstrap --variant=minbase trixie "$root" "$mirror" > "$cache/trixie-debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/trixie-debootstrap.log" >&2; die "debootstrap failed"; }

cat > "$root/etc/apt/sources.list" <<EOF
deb $mirror trixie main
deb $mirror trixie-updates main
deb $mirror trixie-backports main
EOF
# chroot apt needs /proc and /dev only briefly: a private mount namespace, so
# nothing stays mounted if this is interrupted.
in_root() {
    unshare -m --propagation private sh -c '
        root=$1; shift
        mount --bind /proc "$root/proc" && mount --rbind /dev "$root/dev" &&
        exec chroot "$root" "$@"' sh "$root" "$@"
}
export DEBIAN_FRONTEND=noninteractive
log "apt-get install qemu-system-x86 (trixie-backports), virtiofsd"
{
    in_root apt-get update -q &&
    in_root apt-get install -y -q --no-install-recommends -t trixie-backports \
        qemu-system-x86 &&
    in_root apt-get install -y -q --no-install-recommends virtiofsd
} > "$cache/trixie-apt.log" 2>&1 || { tail -n 20 "$cache/trixie-apt.log" >&2; die "apt-get in the root failed"; }

# Debian 13's kernel package, kept as a .deb for fetch-kernel.sh.
kpkg=$(in_root apt-cache depends linux-image-amd64 2>/dev/null |
       sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1) || true
[ -n "$kpkg" ] || die "cannot name Debian 13's kernel package"
mkdir -p "$root/var/cache/vufs-kernel"
in_root sh -c "cd /var/cache/vufs-kernel && apt-get download $kpkg" >> "$cache/trixie-apt.log" 2>&1 ||
    die "apt-get download $kpkg failed"
in_root apt-get clean

in_root qemu-system-x86_64 --version | head -n1 >&2
in_root /usr/libexec/virtiofsd --version >&2
touch "$root/.complete"
log "Debian 13 root ready in $root"
print
exit 0
}
