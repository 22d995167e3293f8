#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The real-guest benchmark harness, end to end and short: compare.sh --bench
# with every daemon it knows (vufsd, the Rust virtiofsd, the legacy daemon),
# one order, tiny jobs; then the table must hold a number for every job and
# daemon, and the host CPU table (tests/guest/hostcpu.sh) a daemon and a VMM
# cost for each. It measures nothing: it keeps the benchmark runnable.
#
#   bench-smoke.sh BUILD/vufsd BUILD/tests/guest/vufs-probe
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vufsd=$1 probe=$2
out=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-bench-smoke.XXXXXX")
daemons="vufsd rust legacy"
jobs="randread-qd1 randwrite-qd1 randread-qd16 randwrite-qd16 seqread-1m meta-create meta-stat
      meta-unlink randread-qd1-x2 randwrite-qd1-x2"

"$here/compare.sh" --bench --vufsd "$vufsd" --probe "$probe" --daemons "$daemons" \
    --orders forward --fio-size 16M --fio-runtime 2 --meta-files 2000 --numjobs 2 \
    --vufsd-queues 2 --out "$out" > "$out/compare.log" 2>&1
rc=$?
cat "$out/compare.log"
[ $rc = 0 ] || { echo "bench-smoke: FAIL: compare.sh exited $rc (logs in $out)"; exit 1; }

# The tables of summary.md: IOPS first, then the host CPU per operation, then
# every run.
iops=$(sed -n '/^| job |/,/^$/p' "$out/summary.md" | head -n 14)
cpu=$(sed -n '/^Host CPU per operation/,/^Every run/p' "$out/summary.md")
fails=0
for j in $jobs; do
    # | job | vufsd | rust | legacy | ratio | runs won |: "median (min-max)" for
    # each daemon, vufsd's ratio, in how many of the one run it led
    row=$(grep -E "^\| $j \|" <<<"$iops" | head -n 1)
    if ! grep -qE "^\| $j \|( [0-9]+ \([0-9]+-[0-9]+\) \|){3} [0-9.]+ \| [01] of 1 \|$" <<<"$row"; then
        echo "bench-smoke: no IOPS for every daemon in job $j: '$row'"
        fails=$((fails + 1))
    fi
    # | job | vufsd | rust | legacy | bound |: "daemon + VMM" us for each daemon
    row=$(grep -E "^\| $j \|" <<<"$cpu" | head -n 1)
    if ! grep -qE "^\| $j \|( [0-9]+ \+ [0-9]+ \|){3} [0-9.]+ \([a-z]+\) \|$" <<<"$row"; then
        echo "bench-smoke: no host CPU for every daemon in job $j: '$row'"
        fails=$((fails + 1))
    fi
done
if [ $fails != 0 ]; then
    echo "bench-smoke: FAIL: $fails rows incomplete (logs in $out)"
    exit 1
fi
echo "bench-smoke: PASS: every job measured for $daemons, with host CPU"
rm -rf "$out"
exit 0
}
