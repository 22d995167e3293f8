#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Fetch Debian's current amd64 kernel into the guest-test cache and prepare it for
# a fast boot under QEMU TCG:
#   CACHE/kernel/KVER/vmlinux      ELF image extracted from the xz bzImage (PVH boot)
#   CACHE/kernel/KVER/root/lib/modules/KVER/...   the virtio and fuse modules + modules.dep
#   CACHE/kernel/current           the KVER in use
# Prints the kernel directory on stdout. Idempotent: a complete cache entry is
# reused without touching the network.
#
# Environment: VUFS_GUEST_CACHE (default: tests/guest/cache next to this script),
#              VUFS_GUEST_KPKG  (force a package name, e.g. linux-image-6.1.0-57-amd64)
{
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${VUFS_GUEST_CACHE:-$here/cache}
mkdir -p "$cache/kernel"
# Concurrent test runs share the cache: one preparer at a time.
exec 9> "$cache/kernel/.lock"
flock 9

log() { echo "fetch-kernel: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Which kernel package: the metapackage's dependency names the current ABI.
pkg=${VUFS_GUEST_KPKG:-}
if [ -z "$pkg" ]; then
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
          sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1) || true
fi
if [ -z "$pkg" ]; then
    # Offline or no apt lists: fall back to what is already cached.
    if [ -s "$cache/kernel/current" ]; then
        kver=$(cat "$cache/kernel/current")
        if [ -f "$cache/kernel/$kver/.complete" ]; then
            log "apt-cache gave no kernel package; reusing cached $kver"
            echo "$cache/kernel/$kver"
            exit 0
        fi
    fi
    die "cannot find the kernel package (apt-cache depends linux-image-amd64); run apt-get update"
fi
kver=${pkg#linux-image-}
kdir=$cache/kernel/$kver

if [ -f "$kdir/.complete" ]; then
    echo "$kver" > "$cache/kernel/current"
    echo "$kdir"
    exit 0
fi

log "preparing $pkg in $kdir"
rm -rf "$kdir"
mkdir -p "$kdir/dl"
# apt's own cache first (a package apt-get install fetched), else the archive.
deb=$(ls /var/cache/apt/archives/"${pkg}"_*_amd64.deb 2>/dev/null | tail -n1) || true
if [ -z "$deb" ]; then
    (cd "$kdir/dl" && apt-get download "$pkg" >&2) || die "apt-get download $pkg failed"
    deb=$(ls "$kdir"/dl/*.deb | head -n1)
fi
[ -f "$deb" ] || die "no .deb downloaded"

# Only what the guest uses: the kernel image and the virtio and fuse module
# directories (the whole tree is 400 MB and busybox depmod over it takes seconds).
mkdir -p "$kdir/pkg"
dpkg-deb --fsys-tarfile "$deb" |
    tar -x -C "$kdir/pkg" --wildcards "./boot/vmlinuz-$kver" \
        "./lib/modules/$kver/kernel/drivers/virtio/*" "./lib/modules/$kver/kernel/fs/fuse/*" \
        "./lib/modules/$kver/modules.order" "./lib/modules/$kver/modules.builtin*" ||
    die "cannot unpack $deb"
bz=$kdir/pkg/boot/vmlinuz-$kver
[ -f "$bz" ] || die "$bz missing from the package"

# The bzImage carries the kernel as an xz stream after the setup code; decompress
# from the first xz magic (FD 37 7A 58 5A 00) to get the ELF vmlinux QEMU can boot
# through PVH, which skips the in-guest decompression (seconds under TCG).
off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$bz" | head -n1 | cut -d: -f1) || true
[ -n "$off" ] || die "no xz stream in $bz"
# (xz stops at the end of its stream, so tail may die of SIGPIPE: judge xz alone.)
rc=0
{ tail -c +$((off + 1)) "$bz" || true; } | xz -dc --single-stream > "$kdir/vmlinux.tmp" 2>/dev/null || rc=$?
[ "$rc" = 0 ] || die "xz could not decompress the kernel at offset $off (rc $rc)"
[ "$(head -c 4 "$kdir/vmlinux.tmp" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] ||
    die "decompressed kernel is not an ELF image"
mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"

# Modules: keep only the tree, generate modules.dep (no kmod on the host).
mkdir -p "$kdir/root/lib/modules"
mv "$kdir/pkg/lib/modules/$kver" "$kdir/root/lib/modules/"
busybox depmod -b "$kdir/root" "$kver" ||
    die "busybox depmod failed"
[ -s "$kdir/root/lib/modules/$kver/modules.dep" ] || die "modules.dep is empty"
for m in virtio_pci_modern_dev virtio_pci_legacy_dev virtio_ring virtio virtio_pci fuse virtiofs; do
    find "$kdir/root/lib/modules/$kver" -name "$m.ko*" | grep -q . || die "module $m missing"
done
rm -rf "$kdir/pkg" "$kdir/dl"

touch "$kdir/.complete"
echo "$kver" > "$cache/kernel/current"
log "kernel $kver ready"
echo "$kdir"
exit 0
}
