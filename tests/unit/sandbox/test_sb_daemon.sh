#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The sandbox on the real daemon: vufsd under every sandbox mode with
# --seccomp kill serves a whole session through vufs-frontend (so the allowlist
# covers what the daemon really calls; a missing syscall kills it with SIGSYS,
# exit status 159 through the pid namespace parent) and exits 0; SIGTERM is
# forwarded through the pid namespace; --sandbox none + --seccomp none is refused
# without --unsafe-no-isolation.
#
# usage: test_sb_daemon.sh VUFSD VUFS_FRONTEND   (needs root: exits 77 = SKIP)
set -eu
vufsd=$1
fe=$2
[ "$(id -u)" = 0 ] || { echo "needs root: skipped"; exit 77; }

work=$(mktemp -d /tmp/vufsd-sb-daemon-XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/share"
printf 'hello from the host\n' > "$work/share/hello.txt"

fail() {
    echo "FAIL: $*" >&2
    [ -f "$work/daemon.log" ] && tail -20 "$work/daemon.log" >&2
    exit 1
}

# Starts vufsd in the background with the given options; waits for its socket.
start() {
    rm -f "$work/sock"
    "$vufsd" --socket-path="$work/sock" --shared-dir="$work/share" "$@" \
        > "$work/daemon.log" 2>&1 &
    pid=$!
    n=0
    while [ ! -S "$work/sock" ]; do
        kill -0 "$pid" 2>/dev/null || fail "vufsd $* exited before listening"
        n=$((n + 1))
        [ $n -lt 600 ] || fail "vufsd $* never listened"
        sleep 0.1
    done
}

# Waits for the daemon and checks its exit status.
expect_exit() {
    want=$1
    shift
    rc=0
    wait "$pid" || rc=$?
    pid=
    [ "$rc" = "$want" ] || fail "$* exited $rc, expected $want"
}

session() {
    "$fe" --socket "$work/sock" --queues 2 \
        ls / cat hello.txt write guest.txt "written by the guest" stat guest.txt \
        mkdir d rmdir d rm guest.txt statfs > "$work/fe.log" 2>&1 ||
        { cat "$work/fe.log" >&2; fail "frontend session ($*)"; }
    grep -q '^hello from the host$' "$work/fe.log" || fail "read through vufsd ($*)"
}

for mode in namespace chroot none; do
    for extra in "" "--thread-pool-size=2 --xattr"; do
        # shellcheck disable=SC2086
        start --sandbox=$mode --seccomp=kill $extra
        session "$mode $extra"
        expect_exit 0 "--sandbox=$mode --seccomp=kill $extra"
        grep -q "security: sandbox=$mode seccomp=kill" "$work/daemon.log" ||
            fail "no security line for $mode"
        echo "ok: --sandbox=$mode --seccomp=kill $extra"
    done
done

# The pid namespace parent forwards SIGTERM to the daemon (pid 1 inside).
start --sandbox=namespace --seccomp=kill
kill -TERM "$pid"
expect_exit 0 "SIGTERM in namespace mode"
echo "ok: SIGTERM forwarded"

# No isolation at all needs the explicit switch.
rc=0
"$vufsd" --socket-path="$work/sock" --shared-dir="$work/share" --sandbox=none \
    --seccomp=none > "$work/refused.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "--sandbox none --seccomp none was accepted"
grep -qi "unsafe" "$work/refused.log" || fail "refusal does not name the unsafe switch"
start --sandbox=none --seccomp=none --unsafe-no-isolation
session "unsafe"
expect_exit 0 "--unsafe-no-isolation"
grep -q "UNSAFE" "$work/daemon.log" || fail "the unsafe run is not flagged in the log"
echo "ok: none+none refused, allowed with --unsafe-no-isolation"
