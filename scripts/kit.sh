#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Packs a benchmark kit: one archive that runs as root on any x86-64 Linux
# host with nothing installed (no glib, no QEMU, no fio, no package registry).
#
#   scripts/kit.sh bench [-o FILE] [BUILD]   the vufs-bench kit (FILE default
#       BUILD/vufs-bench-kit.tar.gz): vufsd and vufs-bench from BUILD, QEMU
#       7.2's legacy virtiofsd (/usr/lib/qemu/virtiofsd) and Debian 13's Rust
#       virtiofsd, each with the shared libraries it loads and its own ELF
#       loader; its ./run smoke|full writes the tables and the JSON.
#   scripts/kit.sh guest [-o FILE] [BUILD]   the real-guest kit (FILE default
#       BUILD/vufs-guest-kit.run, a shell script carrying a static busybox
#       and the tar.xz, since a bare host may have no xz; sh FILE [DIR]
#       unpacks it; -o NAME.tar.xz writes the bare tar.xz): the bench kit's
#       daemons, plus QEMU 11.1
#       with its libraries and the firmware it loads, the Linux 6.12 guest
#       (vmlinux) with an initramfs holding fio, tests/guest's benchmark
#       scripts, vufs-probe, and a Python to write the summary; its
#       ./run-guest smoke|full runs tests/guest/compare.sh --bench with KVM
#       where /dev/kvm runs an ordinary guest, multi-threaded TCG elsewhere.
#
# Each binary runs through its own bundled loader with --library-path: the
# Debian 12 programs (vufsd, vufs-bench, the legacy daemon) and the Debian 13
# ones (the Rust daemon, QEMU 11.1) need different glibc versions. The loader
# is copied under the program's name, so the process is called what the
# program is (vufsd, qemu-system-x86_64: what ps, perf and hostcpu.sh look for).
# Needs the Debian 13 root of tests/guest/trixie-root.sh ($VUFS_GUEST_CACHE).
# Both kits must stay within 64 MiB (checked here); docs/benchmarks.md says how
# to run them.
{
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-}
case "$kind" in
bench|guest) shift ;;
*) sed -n '4,29p' "$0" >&2; exit 2 ;;
esac
out=
while [ $# -gt 0 ]; do
    case "$1" in
    -o) out=$2; shift 2 ;;
    -*) echo "kit: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
build=$(cd "${1:-$here/build}" && pwd)
limit=$((64 << 20))
legacy=/usr/lib/qemu/virtiofsd
for f in "$build/vufsd" "$build/vufs-bench" "$legacy"; do
    [ -x "$f" ] || { echo "kit: $f missing (build first; the legacy daemon is qemu-system-common's)" >&2; exit 1; }
done
root=$("$here/tests/guest/trixie-root.sh") ||
    { echo "kit: no Debian 13 root (tests/guest/trixie-root.sh)" >&2; exit 1; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/vufs-kit.XXXXXX")
trap 'rm -rf "$stage"' EXIT
name=vufs-$kind-kit
k=$stage/$name
mkdir -p "$k/bin" "$k/libexec" "$k/lib/debian12" "$k/lib/debian13"

# selfextract PAYLOAD BUSYBOX OUT: OUT is a shell script that unpacks the
# tar.xz PAYLOAD with the static BUSYBOX carried after it (a host with nothing
# installed may have no xz): sh OUT [DIR].
selfextract() {
    local payload=$1 busybox=$2 dest=$3 head hsize bsize
    bsize=$(stat -c %s "$busybox")
    head='#!/bin/sh
# vufs real-guest kit, self-extracting: sh THIS_FILE [DIR] unpacks it into DIR
# (default .) with the static busybox it carries; then DIR/vufs-guest-kit/run-guest.
set -e
dir=${1:-.}
mkdir -p "$dir"
mkdir -p "$dir/.vufs-kit-unpack"
bb=$dir/.vufs-kit-unpack/busybox
tail -c +HSIZE1 "$0" | head -c BSIZE > "$bb"
chmod 0755 "$bb"
tail -c +PSTART "$0" | "$bb" xz -dc | "$bb" tar -x -C "$dir"
rm -rf "$dir/.vufs-kit-unpack"
echo "unpacked: $dir/vufs-guest-kit (see its README)"
exit 0
'
    # The header's length depends on the offsets written into it: pad them.
    hsize=$(printf '%s' "$head" | sed 's/HSIZE1/0000000001/; s/BSIZE/0000000001/; s/PSTART/0000000001/' | wc -c)
    printf '%s' "$head" | sed "s/HSIZE1/$(printf %010d $((hsize + 1)))/;
        s/BSIZE/$(printf %010d "$bsize")/; s/PSTART/$(printf %010d $((hsize + bsize + 1)))/" > "$dest"
    cat "$busybox" "$payload" >> "$dest"
    chmod 0755 "$dest"
}

# libs SYSROOT DEST ELF: every library ELF loads (ldd, run inside SYSROOT
# when it is not /) and the loader, into DEST.
libs() {
    local sysroot=$1 dest=$2 elf=$3 list lib
    if [ "$sysroot" = / ]; then
        list=$(ldd "$elf")
    else
        list=$(chroot "$sysroot" ldd "$elf")
    fi
    for lib in $(grep -o '/[^ ]*' <<<"$list"); do
        [ -e "$dest/$(basename "$lib")" ] || cp -L "$sysroot$lib" "$dest/"
    done
    [ -e "$dest/ld-linux-x86-64.so.2" ] || { echo "kit: no loader for $elf" >&2; exit 1; }
}

# add SYSROOT RELEASE ELF NAME [ARGS]: ELF as libexec/NAME, run by bin/NAME
# through lib/RELEASE/NAME (the loader under the program's name), ARGS (kit
# paths as $kit/...) before the caller's.
add() {
    local sysroot=$1 rel=$2 elf=$3 name=$4 args=${5:-} dir=$k/lib/$2
    cp -L "$sysroot$elf" "$k/libexec/$name"
    libs "$sysroot" "$dir" "$elf"
    ln -f "$dir/ld-linux-x86-64.so.2" "$dir/$name"
    cat > "$k/bin/$name" <<EOF
#!/bin/sh
# $name through the loader and libraries it was built against ($rel).
kit=\$(cd "\$(dirname "\$0")/.." && pwd)
exec "\$kit/lib/$rel/$name" --library-path "\$kit/lib/$rel" --argv0 "\$0" "\$kit/libexec/$name" $args "\$@"
EOF
    chmod 0755 "$k/bin/$name"
}

add / debian12 "$build/vufsd" vufsd
add / debian12 "$build/vufs-bench" vufs-bench
add / debian12 "$legacy" virtiofsd-legacy
add "$root" debian13 /usr/libexec/virtiofsd virtiofsd-rust
# A static busybox: the POSIX tools the scripts use, where the host lacks one.
bb=$(command -v busybox) || { echo "kit: no busybox (busybox-static)" >&2; exit 1; }
cp -L "$bb" "$k/libexec/busybox"
mkdir -p "$k/lib/busybox"
for a in $("$bb" --list) busybox; do
    ln -sf ../../libexec/busybox "$k/lib/busybox/$a"
done
{
    echo "vufsd $(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown), built $(date -u +%Y-%m-%d)"
    echo "legacy virtiofsd: $(dpkg-query -W -f='${Package} ${Version}' qemu-system-common 2>/dev/null)"
    echo "Rust virtiofsd: $(chroot "$root" dpkg-query -W -f='${Package} ${Version}' virtiofsd 2>/dev/null)"
} > "$k/VERSIONS"
install -m 0755 "$here/scripts/kit/run" "$k/run"
install -m 0644 "$here/scripts/kit/README" "$k/README"

if [ "$kind" = guest ]; then
    kdir=$(VUFS_GUEST_KSERIES=6.12 "$here/tests/guest/fetch-kernel.sh" --series 6.12)
    base=$(VUFS_GUEST_KSERIES=6.12 "$here/tests/guest/mkinitramfs.sh" base)
    probe=$build/tests/guest/vufs-probe
    [ -x "$probe" ] || { echo "kit: $probe missing (meson compile -C $build)" >&2; exit 1; }
    add "$root" debian13 /usr/bin/qemu-system-x86_64 qemu-system-x86_64 '-L "$kit/share/qemu"'
    # The firmware a q35 guest booted with -kernel (PVH) loads: SeaBIOS and
    # the option ROMs QEMU adds for -kernel and the VAPIC.
    mkdir -p "$k/share/qemu"
    for f in usr/share/seabios/bios-256k.bin usr/share/qemu/kvmvapic.bin \
             usr/share/qemu/linuxboot_dma.bin usr/share/qemu/pvh.bin \
             usr/share/qemu/multiboot_dma.bin; do
        cp -L "$root/$f" "$k/share/qemu/"
    done
    # Python for compare.sh's summary: the interpreter and its standard library
    # without what a summary never imports.
    add / debian12 /usr/bin/python3 python3
    py=$(python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
    mkdir -p "$k/lib/$py"
    (cd "/usr/lib/$py" && tar -c --exclude=test --exclude=tests --exclude=idlelib \
        --exclude=tkinter --exclude=turtledemo --exclude=lib2to3 --exclude=ensurepip \
        --exclude=distutils --exclude=pydoc_data --exclude='config-*' \
        --exclude=site-packages --exclude=dist-packages --exclude=__pycache__ .) |
        tar -x -C "$k/lib/$py"
    for lib in $(ls "$k/lib/$py/lib-dynload"/*.so); do libs / "$k/lib/debian12" "$lib"; done
    cat > "$k/bin/python3" <<EOF
#!/bin/sh
# python3 through the loader and libraries it was built against (debian12).
kit=\$(cd "\$(dirname "\$0")/.." && pwd)
PYTHONHOME=\$kit PYTHONNOUSERSITE=1 exec "\$kit/lib/debian12/python3" --library-path "\$kit/lib/debian12" --argv0 "\$0" "\$kit/libexec/python3" "\$@"
EOF
    # The guest: the kernel, the base initramfs (busybox, fio and its
    # libraries, /init), the benchmark's scripts and its guest tool.
    kver=$(basename "$kdir")
    mkdir -p "$k/guest/kernel/$kver" "$k/guest/tests/guest/scripts"
    cp "$kdir/vmlinux" "$k/guest/kernel/$kver/vmlinux"
    cp "$base" "$k/guest/base.cpio"
    cp "$probe" "$k/guest/vufs-probe"
    for f in compare.sh run-guest.sh hostcpu.sh procs.sh mkinitramfs.sh fetch-kernel.sh \
             guest-init.sh scripts/fio-bench.sh; do
        cp "$here/tests/guest/$f" "$k/guest/tests/guest/$f"
    done
    install -m 0755 "$here/scripts/kit/run-guest" "$k/run-guest"
    {
        echo "QEMU: $(chroot "$root" dpkg-query -W -f='${Package} ${Version}' qemu-system-x86 2>/dev/null)"
        echo "guest kernel: $kver"
        echo "fio (guest): $(dpkg-query -W -f='${Version}' fio 2>/dev/null)"
    } >> "$k/VERSIONS"
fi

out=${out:-$build/$name.$([ "$kind" = guest ] && echo run || echo tar.gz)}
case "$out" in
*.run|*.xz) comp=(xz -T0 -9e) ;;
*) comp=(gzip -9) ;;
esac
tar -C "$stage" --owner=0 --group=0 -c "$name" | "${comp[@]}" > "$stage/payload"
case "$out" in
*.run) selfextract "$stage/payload" "$bb" "$out.tmp" ;;
*) mv "$stage/payload" "$out.tmp" ;;
esac
size=$(stat -c %s "$out.tmp")
if [ "$size" -gt "$limit" ]; then
    echo "kit: $out would be $size bytes, over the 64 MiB limit" >&2
    rm -f "$out.tmp"
    exit 1
fi
mv "$out.tmp" "$out"
echo "kit: $out ($((size / 1024)) KiB, $(du -sm "$k" | cut -f1) MiB unpacked)"
exit 0
}
