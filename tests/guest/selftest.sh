#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Self-test of run-guest.sh: a harness that cannot say FAIL proves nothing.
# Each case boots a real guest against BACKEND (default: the legacy daemon, so
# the harness is judged independently of vufsd) and checks the verdict AND its
# reason:
#   pass       script writes a file and prints its true checksum -> PASS
#   exit-code  script exits 3                                     -> FAIL rc=3
#   checksum   script prints a wrong checksum and exits 0         -> FAIL mismatch
#   no-sums    --min-sums 1, script prints none                   -> FAIL
#   backend    the backend exits at once                          -> FAIL, no boot
#   device-sum a second device (--device): right sum for the primary
#              share, wrong one for @TAG                          -> FAIL mismatch
#   exit0      --expect-exit0, the backend ends with status 3 once
#              QEMU has gone                                      -> FAIL status 3
#   vdev-qemu  --vdev generic with --qemu 7.2 (no such device)    -> usage, no boot
# The pass case also checks that the verdict names the VMM, device and kernel.
#
#   selftest.sh [--backend 'CMD {socket} {dir}']
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
backend='/usr/lib/qemu/virtiofsd --socket-path={socket} -o source={dir} -o cache=auto'
[ "${1:-}" = --backend ] && backend=$2

tmp=$(mktemp -d /tmp/vufs-selftest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0

cat > "$tmp/pass.sh" <<'EOF'
cd "$1" && echo selftest > f && echo "VUFS-SUM $(sha256sum f | cut -d' ' -f1) f"
EOF
cat > "$tmp/exit3.sh" <<'EOF'
echo exiting with 3; exit 3
EOF
cat > "$tmp/badsum.sh" <<'EOF'
cd "$1" && echo selftest > f && echo "VUFS-SUM $(echo other | sha256sum | cut -d' ' -f1) f"
EOF
cat > "$tmp/nosums.sh" <<'EOF'
echo no sums here
EOF
cat > "$tmp/devsum.sh" <<'EOF'
. /run/settings
mkdir -p /mnt-two && mount -t virtiofs "$EXTRA_TAGS" /mnt-two || exit 5
cd "$1" && echo one > f && echo "VUFS-SUM $(sha256sum f | cut -d' ' -f1) f"
echo two > /mnt-two/f && echo "VUFS-SUM $(echo other | sha256sum | cut -d' ' -f1) @two/f"
umount /mnt-two
EOF

# expect NAME WANT_RC WANT_REGEX run-guest-args...
expect() {
    local name=$1 want=$2 re=$3 rc
    shift 3
    "$here/run-guest.sh" --rundir "$tmp/$name" --timeout 240 "$@" > "$tmp/$name.out" 2>&1
    rc=$?
    if [ $rc = "$want" ] && grep -q -E "$re" "$tmp/$name.out"; then
        echo "ok $name (rc $rc)"
    else
        echo "NOT OK $name: rc $rc (wanted $want), verdict:"
        grep 'run-guest: \(PASS\|FAIL\)' "$tmp/$name.out" || tail -n 5 "$tmp/$name.out"
        fails=$((fails + 1))
    fi
}

expect pass 0 'PASS: guest rc=0, 1 host checksums matched \(qemu [0-9.]+ \((kvm|tcg)\), vhost-user-[a-z-]+-pci, [0-9]+ request queues?, linux [0-9]' \
    --backend "$backend" --script "$tmp/pass.sh" --min-sums 1
expect exit-code 1 'FAIL: guest test exited with rc=3' \
    --backend "$backend" --script "$tmp/exit3.sh"
expect checksum 1 'FAIL: 1 of 1 host checksum comparisons failed' \
    --backend "$backend" --script "$tmp/badsum.sh"
expect no-sums 1 'FAIL: guest printed 0 checksums, expected at least 1' \
    --backend "$backend" --script "$tmp/nosums.sh" --min-sums 1
expect backend 1 'FAIL: backend exited before creating' \
    --backend 'sh -c "exit 4" {socket} {dir}' --script "$tmp/pass.sh"
expect device-sum 1 'FAIL: 1 of 2 host checksum comparisons failed' \
    --backend "$backend" --device two "" "$backend" --script "$tmp/devsum.sh" --min-sums 2
expect exit0 1 'FAIL: backend exited with status 3 after QEMU disconnected' \
    --backend "bash -c '$backend; exit 3'" --script "$tmp/pass.sh" --expect-exit0

expect vdev-qemu 2 'vdev generic needs --qemu 11.1' \
    --backend "$backend" --script "$tmp/pass.sh" --qemu 7.2 --vdev generic

echo "selftest: $fails failures"
[ $fails = 0 ]
}
