#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Fetch a Debian amd64 kernel into the guest-test cache and prepare it for a
# fast boot under QEMU TCG:
#   CACHE/kernel/KVER/vmlinux      ELF image extracted from the bzImage (PVH boot)
#   CACHE/kernel/KVER/root/lib/modules/KVER/...   the virtio and fuse modules
#                                  (uncompressed) + modules.dep + modules.builtin
#   CACHE/kernel/current           the KVER of the 6.1 series in use
# Prints the kernel directory on stdout. Idempotent: a complete cache entry is
# reused without touching the network.
#
#   fetch-kernel.sh [--series 6.1|6.12]
#
# Series (default $VUFS_GUEST_KSERIES, else 6.1):
#   6.1   Debian 12's current kernel (linux-image-6.1.0-NN-amd64) from apt's cache
#         or `apt-get download`.
#   6.12  Debian 13's kernel (linux-image-6.12.*-amd64), the .deb kept in the
#         cached Debian 13 root (trixie-root.sh --kernel; made on first use).
#         Its modules are .ko.xz and decompressed here (busybox insmod loads
#         plain .ko only); the virtio-fs stack is built in (modules.builtin),
#         so the guest loads no module at all.
#
# Environment: VUFS_GUEST_CACHE (default: tests/guest/cache next to this script),
#              VUFS_GUEST_KSERIES (the series when --series is not given),
#              VUFS_GUEST_KPKG  (6.1 only: force a package name, e.g.
#                                linux-image-6.1.0-57-amd64)
{
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${VUFS_GUEST_CACHE:-$here/cache}
series=${VUFS_GUEST_KSERIES:-6.1}
case "${1:-}" in
--series) [ $# -ge 2 ] || { echo "usage: $0 [--series 6.1|6.12]" >&2; exit 2; }; series=$2 ;;
'') ;;
*) echo "usage: $0 [--series 6.1|6.12]" >&2; exit 2 ;;
esac
case "$series" in
6.1|6.12) ;;
*) echo "fetch-kernel: unknown kernel series '$series' (6.1 or 6.12)" >&2; exit 2 ;;
esac
# A kernel directory given as it is (the real-guest kit carries its own).
if [ -n "${VUFS_GUEST_KDIR:-}" ]; then
    [ -f "$VUFS_GUEST_KDIR/vmlinux" ] || { echo "fetch-kernel: no vmlinux in $VUFS_GUEST_KDIR" >&2; exit 1; }
    echo "$VUFS_GUEST_KDIR"
    exit 0
fi
mkdir -p "$cache/kernel"
# Concurrent test runs share the cache: one preparer at a time.
exec 9> "$cache/kernel/.lock"
flock 9

log() { echo "fetch-kernel: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

deb=
if [ "$series" = 6.12 ]; then
    # Debian 13's kernel: the .deb trixie-root.sh keeps in its root (no apt on the host).
    deb=$("$here/trixie-root.sh" --kernel | sed -n 2p) || true
    [ -n "$deb" ] && [ -f "$deb" ] || die "no Debian 13 kernel .deb (tests/guest/trixie-root.sh --kernel)"
    pkg=$(dpkg-deb -f "$deb" Package) || die "cannot read the package name of $deb"
else
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
fi
kver=${pkg#linux-image-}
case "$kver" in
"$series".*) ;;
*) die "$pkg is not a $series kernel" ;;
esac
kdir=$cache/kernel/$kver
# "current" names the 6.1 kernel (scripts/demo.sh and the offline fallback read it).
set_current() { [ "$series" != 6.1 ] || echo "$kver" > "$cache/kernel/current"; }

if [ -f "$kdir/.complete" ]; then
    set_current
    echo "$kdir"
    exit 0
fi

log "preparing $pkg in $kdir"
rm -rf "$kdir"
mkdir -p "$kdir/dl"
if [ -z "$deb" ]; then
    # apt's own cache first (a package apt-get install fetched), else the archive.
    deb=$(ls /var/cache/apt/archives/"${pkg}"_*_amd64.deb 2>/dev/null | tail -n1) || true
    if [ -z "$deb" ]; then
        (cd "$kdir/dl" && apt-get download "$pkg" >&2) || die "apt-get download $pkg failed"
        deb=$(ls "$kdir"/dl/*.deb | head -n1)
    fi
fi
[ -f "$deb" ] || die "no .deb downloaded"

# Only what the guest uses: the kernel image and the virtio and fuse module
# directories (the whole tree is 400 MB and busybox depmod over it takes seconds).
# Debian 12 ships modules in /lib/modules, Debian 13 (merged /usr) in /usr/lib/modules.
mods=$(dpkg-deb -c "$deb" | grep -o "\./\(usr/\)\?lib/modules/$kver/modules\.order$" | head -n1) || true
[ -n "$mods" ] || die "no modules.order for $kver in $deb"
mods=${mods%/modules.order}
mkdir -p "$kdir/pkg"
dpkg-deb --fsys-tarfile "$deb" |
    tar -x -C "$kdir/pkg" --wildcards "./boot/vmlinuz-$kver" \
        "$mods/kernel/drivers/virtio/*" "$mods/kernel/fs/fuse/*" \
        "$mods/modules.order" "$mods/modules.builtin*" ||
    die "cannot unpack $deb"
bz=$kdir/pkg/boot/vmlinuz-$kver
[ -f "$bz" ] || die "$bz missing from the package"

# The bzImage carries the kernel compressed after the setup code; decompress it
# to get the ELF vmlinux QEMU can boot through PVH, which skips the in-guest
# decompression (seconds under TCG). Debian 12 compresses with xz, Debian 13 with
# zstd.
# The boot protocol header says where the payload is: setup_sects (0x1f1; 0
# means 4) and payload_offset/payload_length (0x248, 0x24c).
setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$bz" | tr -d ' ')
[ "$setup_sects" != 0 ] || setup_sects=4
read -r pay_off pay_len < <(od -An -tu4 -j $((0x248)) -N8 "$bz")
pay_start=$(( (setup_sects + 1) * 512 + pay_off ))
magic=$(od -An -tx1 -j "$pay_start" -N6 "$bz" | tr -d ' \n')
case "$magic" in
28b52ffd*)
    # zstd: the frame, then 4 bytes with the decompressed size (the kernel's
    # size_append), which checks that the image came out whole.
    want=$(od -An -tu4 -j $((pay_start + pay_len - 4)) -N4 "$bz" | tr -d ' ')
    rc=0
    { tail -c +$((pay_start + 1)) "$bz" | head -c $((pay_len - 4)) || true; } |
        zstd -dcq > "$kdir/vmlinux.tmp" || rc=$?
    [ "$rc" = 0 ] || die "zstd could not decompress the kernel at offset $pay_start (rc $rc)"
    [ "$(stat -c %s "$kdir/vmlinux.tmp")" = "$want" ] ||
        die "the decompressed kernel is $(stat -c %s "$kdir/vmlinux.tmp") bytes, the image says $want"
    ;;
*)
    # xz: decompress from the first xz magic (FD 37 7A 58 5A 00).
    off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$bz" | head -n1 | cut -d: -f1) || true
    [ -n "$off" ] || die "no xz or zstd stream in $bz (payload magic $magic)"
    # (xz stops at the end of its stream, so tail may die of SIGPIPE: judge xz alone.)
    rc=0
    { tail -c +$((off + 1)) "$bz" || true; } | xz -dc --single-stream > "$kdir/vmlinux.tmp" 2>/dev/null || rc=$?
    [ "$rc" = 0 ] || die "xz could not decompress the kernel at offset $off (rc $rc)"
    ;;
esac
[ "$(head -c 4 "$kdir/vmlinux.tmp" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] ||
    die "decompressed kernel is not an ELF image"
mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"

# Modules: keep only the tree, uncompressed (busybox insmod takes plain .ko),
# generate modules.dep (no kmod on the host).
mkdir -p "$kdir/root/lib/modules"
mv "$kdir/pkg/${mods#./}" "$kdir/root/lib/modules/"
mdir=$kdir/root/lib/modules/$kver
find "$mdir" -name '*.ko.xz' -exec xz -d {} +
find "$mdir" -name '*.ko.zst' -exec zstd -dq --rm {} +
find "$mdir" -name '*.ko.gz' -exec gzip -d {} +
# modules.order and modules.builtin name modules as .ko: nothing to rename.
busybox depmod -b "$kdir/root" "$kver" ||
    die "busybox depmod failed"
[ -s "$mdir/modules.dep" ] || die "modules.dep is empty"
# Each module of the virtio-fs stack is a file or built in (6.12: all built in).
for m in virtio_pci_modern_dev virtio_pci_legacy_dev virtio_ring virtio virtio_pci fuse virtiofs; do
    find "$mdir" -name "$m.ko" | grep -q . ||
        grep -q "/$m\.ko\$" "$mdir/modules.builtin" 2>/dev/null ||
        die "module $m neither in the package nor built in"
done
rm -rf "$kdir/pkg" "$kdir/dl"

touch "$kdir/.complete"
set_current
log "kernel $kver ready"
echo "$kdir"
exit 0
}
