#!/bin/sh
# vufs-frontend's demo round trip: INIT, list the directory, read a file the
# host wrote, write a file and check it on the host.
# usage: cli_demo.sh VUFS_FRONTEND BACKEND_BINARY
set -eu
fe=$1
backend=$2
[ -x "$backend" ] || { echo "backend $backend missing" >&2; exit 1; }
dir=$(mktemp -d /tmp/vfe-cli-XXXXXX)
out=$(mktemp /tmp/vfe-cli-out-XXXXXX)
trap 'rm -rf "$dir" "$out"' EXIT
printf 'hello from the host\n' > "$dir/hello.txt"
"$fe" --backend "$backend --socket-path={socket} -o source={dir} -o cache=auto" --dir "$dir" \
    ls / cat hello.txt write guest.txt "written by the guest" stat guest.txt > "$out"
cat "$out"
grep -q 'FUSE_INIT: protocol 7\.' "$out"
grep -q ' hello.txt$' "$out"
grep -q '^hello from the host$' "$out"
grep -q 'WRITE guest.txt.*: 20 bytes' "$out"
grep -q 'size 20 ' "$out"
[ "$(cat "$dir/guest.txt")" = "written by the guest" ]
# A bad command is refused before anything is sent.
if "$fe" --backend "$backend --socket-path={socket} -o source={dir}" --dir "$dir" bogus 2>/dev/null; then
    echo "bogus command accepted" >&2
    exit 1
fi
echo "cli demo: ok"
