#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The DAX window in a real guest: QEMU 11.1's generic vhost-user device with
# vufsd's window, Linux's virtio-fs DAX client, tests/guest/scripts/dax.sh in the
# guest (fio verification, shared mappings, O_DIRECT into the window, truncate
# and unlink while mapped, fsync, a crash reboot with mappings live) and the
# host's part here: the file whose host write the guest must see through its
# live mapping, and after the guest is gone the window's statistics (every map
# of the old session gone with the reset, nothing left).
#
#   dax-host.sh VUFSD PROBE [--window MB] [--no-reboot] [--hostile TOOL]
#               [run-guest.sh options]
#
# --hostile TOOL runs tests/guest/scripts/hostile.sh instead (one boot): TOOL
# (vufs-hostile) drives the device from user space with malformed
# SETUPMAPPING/REMOVEMAPPING requests; the host then also checks that the
# tool's checks all passed and that the daemon never marked the device broken.
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vufsd=$1 probe=$2
shift 2
window=8 reboot=1 hostile=
while [ $# -gt 0 ]; do
    case "$1" in
    --window) window=$2; shift 2 ;;
    --no-reboot) reboot=0; shift ;;
    --hostile) hostile=$2; reboot=0; shift 2 ;;
    *) break ;;
    esac
done
dir=$(mktemp -d /tmp/vufs-dax.XXXXXX)
rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
stats=$rundir/dax-stats.json
# dax_probe.c's pattern: byte at offset o is (o * 131 + o / 4096 + seed) & 0xff.
pattern() { # pattern FILE SIZE SEED
    python3 - "$@" <<'EOF'
import sys
path, size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "r+b" if __import__("os").path.exists(path) else "wb") as f:
    f.write(bytes((o * 131 + o // 4096 + seed) & 0xff for o in range(size)))
    f.flush()
    __import__("os").fsync(f.fileno())
EOF
}
args=(--qemu 11.1 --vdev generic --rundir "$rundir" --dir "$dir" --keep
      --backend "$vufsd --socket-path {socket} --shared-dir {dir} --tag myfs \
--dax-window ${window}M --stats-file $stats --log-level info"
      --file "$probe:/bin/vufs-probe")
helper=
if [ -n "$hostile" ]; then
    # vufs-hostile's files: h-data and h-gone of whole 2 MiB ranges, a 4 KiB
    # one (a range past its end), a directory.
    pattern "$dir/h-data" 4194304 9
    pattern "$dir/h-gone" 4194304 3
    pattern "$dir/h-small" 4096 5
    mkdir -p "$dir/h-dir"
    args+=(--script "$here/scripts/hostile.sh" --file "$hostile:/bin/vufs-hostile"
           --min-sums 1 --expect-exit0 --timeout 400)
else
    pattern "$dir/host-coherence" 2097152 7
    # The host's half of the coherence check: once the guest has the file
    # mapped, write a new pattern into it through the host's page cache.
    (
        for b in 1 2; do
            # Until the guest says so (this helper is killed when the guest is gone).
            while [ ! -e "$dir/.mapped-$b" ]; do sleep 0.1; done
            pattern "$dir/host-coherence" 2097152 $((77 + b))
            : > "$dir/.host-wrote-$b"
        done
    ) &
    helper=$!
    args+=(--script "$here/scripts/dax.sh" --set "WINDOW_MB=$window" --set "REBOOT=$reboot"
           --min-sums $((3 + 3 * reboot)) --timeout 1100)
    [ $reboot = 1 ] && args+=(--allow-reboot)
fi
"$here/run-guest.sh" "${args[@]}" "$@"
rc=$?
if [ -n "$helper" ]; then
    kill "$helper" 2>/dev/null
    wait "$helper" 2>/dev/null
fi
fails=0
if [ -n "$hostile" ]; then
    # The tool's verdict (every errno and both controls right), and the daemon
    # kept serving the device: no request made it mark the device broken.
    verdict=$(grep -a -o 'vufs-hostile: [0-9]* checks, [0-9]* failed' "$rundir/output.log")
    echo "dax-host: ${verdict:-no verdict from vufs-hostile}"
    case "$verdict" in
    *" 0 failed") n=${verdict#vufs-hostile: }; n=${n%% *}
        [ "$n" -ge 40 ] || { echo "dax-host: FAIL: only $n checks ran"; fails=$((fails + 1)); } ;;
    *) echo "dax-host: FAIL: vufs-hostile did not pass"; fails=$((fails + 1)) ;;
    esac
    if grep -a -E 'device marked broken|rejected' "$rundir/backend.log"; then
        echo "dax-host: FAIL: the daemon marked the device broken or refused a message"
        fails=$((fails + 1))
    fi
fi
if [ $rc = 0 ]; then
    if [ $reboot = 1 ] && ! grep -q VUFS-GUEST-REBOOTED "$rundir/output.log"; then
        echo "dax-host: FAIL: the guest did not come back from the crash reboot"
        fails=$((fails + 1))
    fi
    grep -a '^VUFS-FIO' "$rundir/output.log"
    # The window was used, and every mapping of the last session was removed
    # (the guest unmounted before powering off: DESTROY).
    python3 - "$stats" <<'EOF' || fails=$((fails + 1))
import json, sys
s = json.load(open(sys.argv[1]))
w = s.get("window", s)
print("dax-host: window statistics: %s" % json.dumps(w, sort_keys=True))
if not w["maps"] or not w["unmaps"]:
    sys.exit("dax-host: FAIL: the window was never used")
if w["map_errors"] or w["unmap_errors"]:
    sys.exit("dax-host: FAIL: %d map and %d unmap errors" % (w["map_errors"], w["unmap_errors"]))
if w["slots_used"]:
    sys.exit("dax-host: FAIL: %d ranges still mapped when the daemon left" % w["slots_used"])
EOF
fi
if [ $rc != 0 ] || [ $fails != 0 ]; then
    echo "dax-host: FAIL (guest rc=$rc, host checks failed: $fails; logs in $rundir)"
    exit 1
fi
rm -rf "$dir"
echo "dax-host: PASS"
exit 0
}
