#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Runs a test that needs the Rust virtiofsd from the cached Debian 13 root
# (tests/guest/trixie-root.sh; the daemon runs through tests/guest/trixie-run.sh):
#
#   rust_peer.sh TEST [ARGS...]
#
# Not root: the daemon cannot run at all here (chroot, a mount namespace), the
# test is skipped (exit 77) and says so. As root a missing root is prepared
# first (debootstrap and apt from Debian's archive: about 1.5 minutes, once),
# and a root that cannot be prepared, or a Rust virtiofsd that does not run,
# FAILS the test: CI runs as root with the root cached.
set -eu
guest=$(cd "$(dirname "$0")/../guest" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: the Rust virtiofsd runs chrooted in the Debian 13 root, which needs root (running as uid $(id -u))" >&2
    exit 77
fi
root=$("$guest/trixie-root.sh") ||
    { echo "FAIL: cannot prepare the Debian 13 root (tests/guest/trixie-root.sh)" >&2; exit 1; }
[ -x "$root/usr/libexec/virtiofsd" ] ||
    { echo "FAIL: $root has no /usr/libexec/virtiofsd" >&2; exit 1; }
version=$("$guest/trixie-run.sh" /usr/libexec/virtiofsd --version 2>&1) ||
    { echo "FAIL: the Rust virtiofsd does not run in $root: $version" >&2; exit 1; }
echo "Rust peer: $version (root $root)" >&2
exec "$@"
