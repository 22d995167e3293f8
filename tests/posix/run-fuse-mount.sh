#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Run the POSIX behaviour suite on the host, through a FUSE mount served by a
# daemon (vufsd --mount), then compare the files the suite kept, read through the
# mount, with the same files in the shared directory.
#
#   run-fuse-mount.sh --daemon 'CMD {mnt} {dir}' --suite POSIX_SUITE [options]
#     --xfail LIST    passed to the suite as -x (known gaps, reported as XFAIL)
#     --fstype TYPE   filesystem type the mount must show (default: fuse*)
#     --timeout SEC   bound for the whole run (default 280)
#
# Exit: 0 PASS, 1 FAIL, 77 when this machine cannot do FUSE mounts (meson: SKIP).
{
set -uo pipefail

daemon= suite= xfail= fstype='fuse*' timeout=280
while [ $# -gt 0 ]; do
    case "$1" in
    --daemon) daemon=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --xfail) xfail=$2; shift 2 ;;
    --fstype) fstype=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) echo "run-fuse-mount: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$daemon" ] && [ -x "$suite" ] || { echo "run-fuse-mount: need --daemon and --suite" >&2; exit 2; }

if [ ! -c /dev/fuse ] || [ "$(id -u)" != 0 ]; then
    echo "run-fuse-mount: SKIP: needs root and /dev/fuse"
    exit 77
fi

start=$(date +%s)
tmp=$(mktemp -d /tmp/vufs-posix-fuse.XXXXXX)
# mktemp makes a 0700 directory; a daemon that checks access as the caller
# (nobody, in the access check) must be able to reach the shared directory.
chmod 0755 "$tmp"
dir=$tmp/shared mnt=$tmp/mnt
mkdir -p "$dir" "$mnt"
pid=

mounted() {
    # mountinfo field 5 is the mount point, the type follows the " - " separator.
    awk -v m="$mnt" '$5 == m { for (i = 6; i <= NF; i++) if ($i == "-") { print $(i + 1); exit } }' \
        /proc/self/mountinfo
}
cleanup() {
    if [ -n "$(mounted)" ]; then
        fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
    fi
    if [ -n "$pid" ]; then
        kill -TERM -- "-$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "run-fuse-mount: FAIL: $*"
    [ -s "$tmp/daemon.log" ] && { echo "---- daemon log (tail) ----"; tail -n 30 "$tmp/daemon.log"; }
    exit 1
}

cmd=${daemon//\{mnt\}/$mnt}
cmd=${cmd//\{dir\}/$dir}
echo "run-fuse-mount: $cmd"
setsid bash -c "exec $cmd" > "$tmp/daemon.log" 2>&1 < /dev/null &
pid=$!

# Wait for the mount to appear (bounded), not for a fixed time.
while :; do
    t=$(mounted)
    # shellcheck disable=SC2053
    [ -n "$t" ] && [[ $t == $fstype ]] && break
    kill -0 "$pid" 2>/dev/null || fail "the daemon exited before mounting (status: $(wait "$pid"; echo $?))"
    [ $(($(date +%s) - start)) -lt 30 ] || fail "no $fstype mount on $mnt after 30 s (seen: '${t:-none}')"
    sleep 0.05
done

timeout --kill-after=10 $((timeout - 30)) "$suite" -k ${xfail:+-x "$xfail"} "$mnt" > "$tmp/suite.out" 2>&1
rc=$?
cat "$tmp/suite.out"
grep -q '^[0-9]* passed, [0-9]* failed' "$tmp/suite.out" || fail "the suite printed no summary (rc $rc)"
[ $rc = 0 ] || fail "the suite reported failures (rc $rc)"

# The kept files, through the mount and directly on the host, must be identical.
n=0
for f in $(sed -n 's/^VUFS-KEEP //p' "$tmp/suite.out"); do
    a=$(sha256sum "$mnt/$f" | cut -d' ' -f1)
    b=$(sha256sum "$dir/$f" | cut -d' ' -f1)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$f differs: mount $a, host $b"
    n=$((n + 1))
done
[ $n -ge 1 ] || fail "the suite kept no file to compare"
kill -0 "$pid" 2>/dev/null || fail "the daemon died during the run"
echo "run-fuse-mount: PASS ($n kept files identical, $(($(date +%s) - start)) s)"
exit 0
}
