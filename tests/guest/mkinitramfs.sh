#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build the test guest's initramfs, in two parts that the kernel unpacks one after
# the other (concatenated newc cpio archives):
#
#   mkinitramfs.sh base
#       The base archive, cached per kernel in CACHE/initramfs/: busybox-static
#       with its applet links, the virtio-fs modules in load order (those the
#       kernel does not have built in), fio with every library ldd lists, and
#       /init (guest-init.sh). Rebuilt only when one of its inputs changes.
#       Prints its path. The kernel is fetch-kernel.sh's: $VUFS_GUEST_KSERIES
#       (6.1 or 6.12, default 6.1) picks it.
#
#   mkinitramfs.sh workload
#       The real-workload tools, an archive appended after the base only for the
#       runs that ask for it (run-guest.sh --workload-tools), cached in
#       CACHE/initramfs/ like the base: Debian's sqlite3 (CLI), stress-ng, GNU tar
#       and GNU grep with every library ldd lists, in /usr/local/bin (ahead of
#       busybox's tar and grep in the guest's PATH only where a script puts it
#       there). About 30 MB, a third of the base: kept out of every other boot.
#       Prints its path.
#
#   mkinitramfs.sh run OUT TEST_SCRIPT [KEY=VALUE | --file HOST[:GUEST]]...
#       A small per-run archive: /run/test.sh, /run/settings (the KEY=VALUE
#       lines) and extra files (executables get their libraries too). A HOST
#       file without :GUEST lands in /run/bin/.
#
# Uncompressed on purpose: under TCG decompression costs seconds. Every file gets
# mtime 0 so an archive is reproducible from its inputs.
#
# Environment: VUFS_GUEST_CACHE (default tests/guest/cache), VUFS_GUEST_KSERIES.
{
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${VUFS_GUEST_CACHE:-$here/cache}

log() { echo "mkinitramfs: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

MODULES="virtio_pci_modern_dev virtio_pci_legacy_dev virtio_ring virtio virtio_pci fuse virtiofs"

# copy_with_libs ROOT FILE [DEST]: copy FILE into ROOT (at DEST, default the
# same path) plus the shared libraries and the loader ldd lists for it.
copy_with_libs() {
    local root=$1 file=$2 dest=${3:-$2} lib
    mkdir -p "$root$(dirname "$dest")"
    cp -L "$file" "$root$dest"
    if ldd "$file" > /dev/null 2>&1; then
        for lib in $(ldd "$file" | grep -o '/[^ ]*'); do
            [ -e "$root$lib" ] && continue
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
    fi
}

# pack ROOT OUT: write ROOT as a newc archive with fixed mtimes.
pack() {
    local root=$1 out=$2
    find "$root" -exec touch -h -d @0 {} +
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
        busybox cpio -o -H newc > "$out.tmp" 2>/dev/null)
    mv "$out.tmp" "$out"
}

build_base() {
    local kdir kver stamp out root bb m ko fio
    # A base archive given as it is (the real-guest kit carries its own).
    if [ -n "${VUFS_GUEST_BASE_INITRAMFS:-}" ]; then
        [ -s "$VUFS_GUEST_BASE_INITRAMFS" ] || die "no $VUFS_GUEST_BASE_INITRAMFS"
        echo "$VUFS_GUEST_BASE_INITRAMFS"
        return
    fi
    kdir=$("$here/fetch-kernel.sh") || die "no kernel"
    kver=$(basename "$kdir")
    bb=$(command -v busybox) || die "busybox not found"
    fio=$(command -v fio) || die "fio not found"
    file "$bb" 2>/dev/null | grep -q 'statically linked' || ! ldd "$bb" > /dev/null 2>&1 ||
        die "$bb is not static (install busybox-static)"

    mkdir -p "$cache/initramfs"
    exec 9> "$cache/initramfs/.lock"
    flock 9
    # Stamp: everything the archive is made of.
    stamp=$(cat "$0" "$here/guest-init.sh" "$bb" "$fio" | sha256sum | cut -c1-16)
    out=$cache/initramfs/base-$kver-$stamp.cpio
    if [ -s "$out" ]; then
        touch "$out"   # its mtime says when it was last used
        echo "$out"
        return
    fi
    log "building $out"
    mkdir -p "$cache/initramfs"
    # Older versions of this kernel's base: a cache shared by several checkouts
    # (VUFS_GUEST_CACHE) holds one per version of these scripts, so only those
    # unused for a day go.
    find "$cache/initramfs" -maxdepth 1 -name "base-$kver-*.cpio" -mtime +0 -delete
    root=$(mktemp -d "$cache/initramfs/root.XXXXXX")
    trap 'rm -rf "$root"' EXIT

    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,mnt,run,root}
    cp "$bb" "$root/bin/busybox"
    for a in $("$bb" --list-full); do
        [ "$a" = bin/busybox ] && continue
        mkdir -p "$root/$(dirname "$a")"
        ln -sf /bin/busybox "$root/$a"
    done

    : > "$root/etc/vufs-modules"
    for m in $MODULES; do
        ko=$(cd "$kdir/root/lib/modules/$kver" && find kernel -name "$m.ko" | head -n1)
        if [ -z "$ko" ]; then
            # Built into this kernel (Debian 13's 6.12 has the whole stack built in).
            grep -q "/$m\.ko\$" "$kdir/root/lib/modules/$kver/modules.builtin" 2>/dev/null ||
                die "module $m.ko not found and not built in (fetch-kernel.sh decompresses modules)"
            continue
        fi
        mkdir -p "$root/lib/modules/$kver/$(dirname "$ko")"
        cp "$kdir/root/lib/modules/$kver/$ko" "$root/lib/modules/$kver/$ko"
        echo "$ko" >> "$root/etc/vufs-modules"
    done
    cp "$kdir/root/lib/modules/$kver/modules.dep" "$root/lib/modules/$kver/" 2>/dev/null || true

    copy_with_libs "$root" "$fio" /usr/bin/fio
    echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
    printf 'root:x:0:\nnobody:x:65534:\n' > "$root/etc/group"
    echo 'nobody:x:65534:65534:nobody:/:/bin/false' >> "$root/etc/passwd"

    install -m 0755 "$here/guest-init.sh" "$root/init"
    pack "$root" "$out"
    rm -rf "$root"
    trap - EXIT
    echo "$out"
}

WORKLOAD_TOOLS="sqlite3 stress-ng tar grep"

build_workload() {
    local out root stamp t p paths=()
    for t in $WORKLOAD_TOOLS; do
        p=$(command -v "$t") ||
            die "$t not found (apt-get install sqlite3 stress-ng tar grep; scripts/deps.sh)"
        paths+=("$p")
    done
    mkdir -p "$cache/initramfs"
    exec 9> "$cache/initramfs/.lock"
    flock 9
    stamp=$(cat "$0" "${paths[@]}" | sha256sum | cut -c1-16)
    out=$cache/initramfs/workload-$stamp.cpio
    if [ -s "$out" ]; then
        touch "$out"
        echo "$out"
        return
    fi
    log "building $out"
    find "$cache/initramfs" -maxdepth 1 -name 'workload-*.cpio' -mtime +0 -delete
    root=$(mktemp -d "$cache/initramfs/root.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    for t in "${paths[@]}"; do
        copy_with_libs "$root" "$t" "/usr/local/bin/$(basename "$t")"
    done
    pack "$root" "$out"
    rm -rf "$root"
    trap - EXIT
    echo "$out"
}

build_run() {
    local out=$1 script=$2 root arg host guest
    shift 2
    [ -f "$script" ] || die "test script $script not found"
    root=$(mktemp -d "${TMPDIR:-/tmp}/vufs-run-root.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    mkdir -p "$root/run/bin"
    install -m 0755 "$script" "$root/run/test.sh"
    : > "$root/run/settings"
    while [ $# -gt 0 ]; do
        arg=$1; shift
        case "$arg" in
        --file)
            [ $# -gt 0 ] || die "--file needs an argument"
            host=${1%%:*}; guest=${1#*:}; shift
            if [ "$guest" = "$host" ]; then guest=/run/bin/$(basename "$host"); fi
            [ -f "$host" ] || die "file $host not found"
            copy_with_libs "$root" "$host" "$guest"
            ;;
        *=*)
            # Values are single-quoted for the guest's sh.
            printf "%s='%s'\n" "${arg%%=*}" "$(printf %s "${arg#*=}" | sed "s/'/'\\\\''/g")" \
                >> "$root/run/settings"
            ;;
        *) die "unknown argument $arg" ;;
        esac
    done
    pack "$root" "$out"
    rm -rf "$root"
    trap - EXIT
}

case "${1:-}" in
base) build_base ;;
workload) build_workload ;;
run) shift; [ $# -ge 2 ] || die "usage: $0 run OUT TEST_SCRIPT [KEY=VALUE|--file HOST[:GUEST]]..."; build_run "$@" ;;
*) die "usage: $0 base | workload | run OUT TEST_SCRIPT [...]" ;;
esac
exit 0
}
