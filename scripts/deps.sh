#!/usr/bin/env bash
# Installs the Debian 12 packages vufsd needs to build, test and demo.
# Sourced-or-run by scripts/test.sh and scripts/demo.sh; VUFS_NO_INSTALL=1 skips it.
{
set -euo pipefail
if [ "${VUFS_NO_INSTALL:-0}" = 1 ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
packages=(
    # build
    gcc meson ninja-build pkg-config
    libglib2.0-dev libfuse3-dev fuse3 libcap-ng-dev libseccomp-dev libcmocka-dev
    # fuzzing (libFuzzer) and sanitizers with clang
    clang-14 libclang-rt-14-dev
    # real-guest tests and the peer we measure against (/usr/lib/qemu/virtiofsd);
    # debootstrap makes the Debian 13 root with QEMU 11.1, the Rust virtiofsd and
    # Linux 6.12 (tests/guest/trixie-root.sh); libc6-dev's static libc builds the
    # guest's tool (tests/guest/tools/probe.c); zstd unpacks the 6.12 kernel
    qemu-system-x86 qemu-system-common busybox-static fio xz-utils debootstrap libc6-dev zstd
    # the real-workload guest tests (tests/guest/mkinitramfs.sh workload): the
    # guest's sqlite3 CLI and stress-ng, and the host's sqlite3 that checks the
    # database the guest left
    sqlite3 stress-ng
    # the Debian package (scripts/deb.sh) and its install, upgrade and purge
    # test (tests/pkg/deb-lifecycle.sh)
    dpkg-dev debhelper fakeroot lintian
    # a real libvirt starting vufsd (tests/guest/libvirt-host.sh): libvirtd
    # (libvirt 9.0 with the QEMU driver) and virsh
    libvirt-daemon-system libvirt-clients
    # tools the scripts use
    python3 procps util-linux man-db groff-base
    # the trace-setupmapping tests run the daemon under gdb (tests/trace_setupmapping.py)
    gdb
)
# Already there (a second run, a prepared CI image): no apt-get, no network.
installed=$(dpkg-query -W -f='${db:Status-Abbrev}\n' "${packages[@]}" 2>/dev/null |
            grep -c '^ii') || installed=0
if [ "$installed" = ${#packages[@]} ]; then
    echo "vufsd: all ${#packages[@]} build and test packages are installed"
    exit 0
fi
echo "vufsd: installing build and test dependencies (apt-get)"
$sudo apt-get -o DPkg::Lock::Timeout=300 update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=300 install -y -q "${packages[@]}" >/dev/null
exit 0
}
