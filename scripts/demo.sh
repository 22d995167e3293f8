#!/usr/bin/env bash
# Installs what vufsd needs, builds it, and runs it for real: vufsd serves a demo
# directory on a vhost-user socket and the in-tree frontend (doing what QEMU and a
# guest driver do) mounts it over virtqueues, lists it, reads a file the host
# wrote and writes one the host then reads.
{
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n[demo] %s\n' "$*"; }

say "installing dependencies"
bash scripts/deps.sh

say "building"
if [ -d build ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
meson compile -C build >/dev/null

work=$(mktemp -d /tmp/vufsd-demo.XXXXXX)
share=$work/share
sock=$work/vufsd.sock
mkdir -p "$share"
echo "hello from the host, $(date -u)" >"$share/from-host.txt"
mkdir -p "$share/docs"
cp README.md "$share/docs/"

daemon_pid=
cleanup() {
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

say "starting vufsd on $sock, sharing $share"
./build/vufsd --socket-path "$sock" --shared-dir "$share" --log-level info --reconnect &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { echo "vufsd did not create its socket"; exit 1; }

say "frontend: negotiate like QEMU, FUSE_INIT, list the share, read the host's file, write one"
./build/vufs-frontend --socket "$sock" --queues 2 \
    ls / \
    cat from-host.txt \
    write from-guest.txt "written over virtqueues" \
    stat from-guest.txt
say "host: the file the frontend wrote"
cat "$share/from-guest.txt"; echo

say "stopping vufsd (SIGTERM): it finishes in-flight requests and exits 0"
kill -TERM "$daemon_pid"
wait "$daemon_pid" && rc=0 || rc=$?
daemon_pid=
echo "vufsd exited with status $rc"
[ "$rc" = 0 ]
say "done"
exit 0
}
