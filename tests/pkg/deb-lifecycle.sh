#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The Debian package's life on this machine, as an operator lives it:
#   1. scripts/deb.sh builds vufsd VERSION and a rebuild VERSION+upgrade1
#      (the same tree, a higher version), each checked by lintian;
#   2. dpkg -i of VERSION: every file where the package puts it;
#   3. a real libvirt (tests/guest/libvirt-host.sh --descriptor) starts a
#      domain whose <filesystem> names no binary: libvirt must pick
#      /usr/libexec/vufsd through 40-vufsd.json, ahead of QEMU's
#      50-qemu-virtiofsd.json installed beside it; once the guest's first boot
#      has passed its checks, dpkg -i of the higher version upgrades the
#      package under it, and the guest, rebooted with virsh reboot, is still
#      served by the same vufsd (the old binary, now deleted on disk) until
#      virsh shutdown, when it exits by itself;
#   4. the way back an operator takes: an empty
#      /etc/qemu/vhost-user/40-vufsd.json masks the package's descriptor, and
#      libvirt starts QEMU's /usr/lib/qemu/virtiofsd again (--pick-only: the
#      domain started and destroyed, no guest checks); the mask is removed;
#   5. dpkg --purge: none of the package's files is left, nor its directories
#      that nothing else uses.
#
#   tests/pkg/deb-lifecycle.sh --probe VUFS_PROBE [--out DIR] [--keep]
#
# Needs root and a machine where the vufsd package is not installed (it
# refuses otherwise: it would purge an operator's vufsd). Exit status: 0 PASS,
# 1 FAIL, 2 usage, 77 skipped because dpkg-buildpackage or libvirt is missing.
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
probe= out= keep=0
while [ $# -gt 0 ]; do
    case "$1" in
    --probe) probe=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '4,/^{$/p' "$0" | sed '$d' >&2; exit 2 ;;
    esac
done
[ -n "$probe" ] || { echo "usage: $0 --probe VUFS_PROBE [--out DIR] [--keep]" >&2; exit 2; }
for t in dpkg-buildpackage dh lintian fakeroot libvirtd virsh; do
    command -v $t > /dev/null ||
        { echo "deb-lifecycle: SKIP: $t is not installed (scripts/deps.sh installs it)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "deb-lifecycle: FAIL: needs root (dpkg -i)"; exit 1; }
if dpkg-query -W -f='${db:Status-Abbrev}' vufsd 2> /dev/null | grep -q '^[ih]i'; then
    echo "deb-lifecycle: FAIL: the vufsd package is already installed here; this test installs and purges it (dpkg --purge vufsd first)"
    exit 1
fi

start=$(date +%s)
[ -n "$out" ] || out=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-deb.XXXXXX")
mkdir -p "$out"
out=$(cd "$out" && pwd)
installed=0 mask=/etc/qemu/vhost-user/40-vufsd.json masked=0
log() { echo "deb-lifecycle: $*"; }
verdict() {
    local v=$1; shift
    echo "deb-lifecycle: $v: $* ($(( $(date +%s) - start )) s, logs in $out)"
    [ "$v" = PASS ] && exit 0
    exit 1
}
unmask() {
    [ $masked = 1 ] || return 0
    rm -f "$mask"
    rmdir /etc/qemu/vhost-user /etc/qemu 2> /dev/null
    masked=0
}
cleanup() {
    unmask
    [ $installed = 0 ] || dpkg --purge vufsd > /dev/null 2>&1
}
trap cleanup EXIT

version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
v2=$version+upgrade1
log "building vufsd $version and $v2 (scripts/deb.sh)"
"$top/scripts/deb.sh" -o "$out" > "$out/deb-$version.out" 2>&1 ||
    { tail -n 20 "$out/deb-$version.out"; verdict FAIL "scripts/deb.sh (version $version)"; }
"$top/scripts/deb.sh" -o "$out" --version "$v2" > "$out/deb-$v2.out" 2>&1 ||
    { tail -n 20 "$out/deb-$v2.out"; verdict FAIL "scripts/deb.sh --version $v2"; }
deb1=$out/vufsd_${version}_amd64.deb deb2=$out/vufsd_${v2}_amd64.deb
echo "== lintian $version:"; cat "$out/lintian-$version.log"
tail -n 1 "$out/deb-$version.out"

log "dpkg -i $(basename "$deb1")"
installed=1
dpkg -i "$deb1" > "$out/dpkg-install.log" 2>&1 || { cat "$out/dpkg-install.log"; verdict FAIL "dpkg -i $deb1"; }
dpkg -L vufsd | sort > "$out/files.txt"
for f in /usr/libexec/vufsd /usr/share/qemu/vhost-user/40-vufsd.json /usr/share/man/man1/vufsd.1.gz \
         /lib/systemd/system/vufsd@.service /lib/systemd/system/vufsd@.socket; do
    [ -e "$f" ] && grep -qx "$f" "$out/files.txt" || verdict FAIL "$f is not installed by the package"
done
/usr/libexec/vufsd --version > "$out/version.txt" 2>&1 || verdict FAIL "/usr/libexec/vufsd --version"
echo "== installed: $(dpkg-query -W -f='${Package} ${Version}' vufsd); descriptors libvirt reads:"
ls -1 /etc/qemu/vhost-user/ /usr/share/qemu/vhost-user/ 2> /dev/null | sed 's/^/  /'

log "libvirt with no binary path (tests/guest/libvirt-host.sh --descriptor), upgraded to $v2 under the running guest"
"$top/tests/guest/libvirt-host.sh" --descriptor --probe "$probe" --expect /usr/libexec/vufsd \
    --rundir "$out/libvirt" --timeout 560 \
    --after-boot1 "dpkg -i '$deb2' > '$out/dpkg-upgrade.log' 2>&1 && dpkg-query -W -f='upgraded to \${Version}\n' vufsd" ||
    verdict FAIL "libvirt with no binary path"
[ "$(dpkg-query -W -f='${Version}' vufsd)" = "$v2" ] || verdict FAIL "the upgrade did not leave $v2 installed"

if [ -e "$mask" ]; then
    log "$mask exists already: the way back is not tried"
else
    log "an empty $mask: libvirt must start QEMU's virtiofsd again"
    mkdir -p /etc/qemu/vhost-user && : > "$mask" && masked=1 ||
        verdict FAIL "cannot write $mask"
    "$top/tests/guest/libvirt-host.sh" --descriptor --pick-only --probe "$probe" \
        --expect /usr/lib/qemu/virtiofsd --rundir "$out/libvirt-masked" --timeout 300 ||
        verdict FAIL "with $mask empty, libvirt did not start /usr/lib/qemu/virtiofsd"
    unmask
fi

log "dpkg --purge vufsd"
dpkg --purge vufsd > "$out/dpkg-purge.log" 2>&1 || { cat "$out/dpkg-purge.log"; verdict FAIL "dpkg --purge vufsd"; }
installed=0
dpkg-query -W -f='${db:Status-Abbrev}' vufsd 2> /dev/null | grep -q '^[ih]' &&
    verdict FAIL "vufsd still known to dpkg after the purge"
left=()
while read -r f; do
    if [ -d "$f" ]; then
        # A directory goes when nothing else has files in it (/lib, a link
        # to usr/lib on a merged-/usr system, is listed too: not the package's).
        [ -L "$f" ] || [ -n "$(ls -A "$f")" ] || left+=("$f (empty directory)")
    elif [ -e "$f" ] || [ -L "$f" ]; then
        left+=("$f")
    fi
done < "$out/files.txt"
[ ${#left[@]} = 0 ] || verdict FAIL "left after the purge: ${left[*]}"
for e in /proc/[0-9]*/exe; do
    case "$(readlink "$e" 2> /dev/null)" in
    /usr/libexec/vufsd*) verdict FAIL "a packaged vufsd still runs after the purge: ${e%/exe}" ;;
    esac
done
[ $keep = 1 ] || rm -f "$out"/*.tar.xz "$out"/*dbgsym*
verdict PASS "built $version and $v2 (lintian clean), installed, libvirt picked /usr/libexec/vufsd with no binary path, upgraded under a running guest that kept being served, masked (libvirt back to /usr/lib/qemu/virtiofsd), purged with nothing left"
}
