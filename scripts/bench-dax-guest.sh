#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The DAX window sweep in a real guest (docs/dax.md, section 10): Linux 6.1
# under QEMU 11.1 (TCG) with the generic vhost-user device and vufsd's window
# at 1/8, 1/4, 1/2, 1 and 2x the working set (4 files), for each window
# --dax-policy never, always and auto with the guest's default mount (per-file
# DAX: the daemon decides), and the default policy with mount -o dax=always
# (every file through the window: the upstream behaviour). fio in the guest
# (tests/guest/scripts/dax-sweep.sh): 4 KiB randread, 4 KiB randwrite, 1 MiB
# seqread, psync. One guest boot per cell, cells interleaved round by round.
#
# usage: scripts/bench-dax-guest.sh [BUILD_DIR] [OUT_DIR]
#   env: FILE_MB (per file, default 16), ROUNDS (default 2), RUNTIME (s per
#        fio run, default 8), PLOT (png path, default docs/dax-guest-sweep.png;
#        none: no plot)
# OUT_DIR gets sweep.txt (every VUFS-SWEEP line), dax-guest-tables.md, and
# each boot's log directory; PLOT the three workloads' IOPS against the window
# (medians, the bars the range over the rounds). The plot needs Debian's
# python3-matplotlib (apt-get install -y python3-matplotlib; not a build or
# test dependency), checked before the first boot.
{
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-/tmp/vufs-dax-guest-sweep}
file_mb=${FILE_MB:-16}
rounds=${ROUNDS:-2}
runtime=${RUNTIME:-8}
plot=${PLOT:-$here/docs/dax-guest-sweep.png}
if [ "$plot" != none ] && ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    echo "bench-dax-guest: the plot needs python3-matplotlib (apt-get install -y" \
        "python3-matplotlib), or PLOT=none" >&2
    exit 2
fi
mkdir -p "$out"
data=$out/share
mkdir -p "$data"
for i in 0 1 2 3; do
    [ "$(stat -c %s "$data/f$i" 2>/dev/null || echo 0)" = $((file_mb << 20)) ] ||
        head -c $((file_mb << 20)) /dev/urandom > "$data/f$i"
done
ws=$((file_mb * 4))
windows="$((ws / 8)) $((ws / 4)) $((ws / 2)) $ws $((ws * 2))"
: > "$out/sweep.txt"
for r in $(seq "$rounds"); do
    for w in $windows; do
        for cell in never always auto dax=always; do
            policy=$cell mount=
            [ "$cell" = dax=always ] && policy=auto mount=dax=always
            name="w$w-$cell"
            log=$out/r$r-$name
            rm -rf "$log"
            "$here/tests/guest/run-guest.sh" --qemu 11.1 --vdev generic --rundir "$log" \
                --dir "$data" --keep --timeout 600 \
                --backend "$build/vufsd --socket-path {socket} --shared-dir {dir} --tag myfs \
--dax-window ${w}M --dax-policy $policy --log-level warn" \
                --script "$here/tests/guest/scripts/dax-sweep.sh" \
                --set "CELL=$name" --set "RUNTIME=$runtime" \
                ${mount:+--set "MOUNT_OPTS=$mount"} > "$log.verdict" 2>&1 ||
                { echo "bench-dax-guest: $name failed:"; tail -n 30 "$log.verdict"; exit 1; }
            grep -a -o 'VUFS-SWEEP [^[:cntrl:]]*' "$log/output.log" | sed "s/^/round=$r /" |
                tee -a "$out/sweep.txt"
        done
    done
done
python3 - "$out/sweep.txt" "$ws" > "$out/dax-guest-tables.md" <<'PY'
import sys, re, statistics
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    m = re.search(r"cell=w(\d+)-(\S+) job=(\S+) iops=([0-9.]+)(k?)", line)
    if m:
        v = float(m.group(4)) * (1000 if m.group(5) else 1)
        runs[(int(m.group(1)), m.group(2), m.group(3))].append(v)
ws = int(sys.argv[2])
wins = sorted({k[0] for k in runs})
for job in ("randread", "randwrite", "seqread"):
    unit = "IOPS (1 MiB)" if job == "seqread" else "IOPS (4 KiB)"
    print("\n%s, %s, median of %d runs\n" % (job, unit, max(len(v) for v in runs.values())))
    print("| window / working set | never | always | auto | dax=always mount | auto / max(never, always) | auto / never |")
    print("|---|---|---|---|---|---|---|")
    for w in wins:
        med = {c: statistics.median(runs[(w, c, job)]) for c in ("never", "always", "auto", "dax=always") if runs[(w, c, job)]}
        frac = w / ws
        label = "1/%d" % round(1 / frac) if frac < 1 else "%g" % frac
        best = max(med.get("never", 0), med.get("always", 0))
        print("| %s (%d MiB) | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f |" % (
            label, w, med.get("never", 0), med.get("always", 0), med.get("auto", 0),
            med.get("dax=always", 0), med.get("auto", 0) / best if best else 0,
            med.get("auto", 0) / med["never"] if med.get("never") else 0))
PY
cat "$out/dax-guest-tables.md"
[ "$plot" = none ] && exit 0
/usr/bin/python3 - "$out/sweep.txt" "$ws" "$plot" "$rounds" "$runtime" <<'PY'
import re, statistics, sys
from collections import defaultdict
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
runs = defaultdict(list)
for line in open(sys.argv[1]):
    m = re.search(r"cell=w(\d+)-(\S+) job=(\S+) iops=([0-9.]+)(k?)", line)
    if m:
        runs[(int(m.group(1)), m.group(2), m.group(3))].append(
            float(m.group(4)) * (1000 if m.group(5) else 1))
ws, png, rounds, runtime = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
wins = sorted({k[0] for k in runs})

def label(w):
    r = w / ws
    return "1/%d" % round(1 / r) if r < 1 else "%g" % r

cells = {"never": ("tab:gray", "o", "-"), "always": ("tab:red", "s", "-"),
         "auto": ("tab:blue", "^", "-"), "dax=always": ("tab:orange", "v", "--")}
jobs = (("randread", "4 KiB randread"), ("randwrite", "4 KiB randwrite"),
        ("seqread", "1 MiB seqread"))
fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
for ax, (job, title) in zip(axes, jobs):
    for cell, (col, mk, ls) in cells.items():
        xs, ys, lo, hi = [], [], [], []
        for w in wins:
            v = runs.get((w, cell, job))
            if not v:
                continue
            med = statistics.median(v)
            xs.append(w / ws)
            ys.append(med)
            lo.append(med - min(v))
            hi.append(max(v) - med)
        name = ("--dax-policy " + cell) if cell != "dax=always" else "mount -o dax=always"
        ax.errorbar(xs, ys, yerr=[lo, hi], marker=mk, color=col, linestyle=ls, capsize=3,
                    label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks([w / ws for w in wins])
    ax.set_xticklabels(["%s\n(%d MiB)" % (label(w), w) for w in wins])
    ax.set_xlabel("DAX window / working set (%d MiB in 4 files)" % ws)
    ax.set_ylabel("IOPS")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
fig.suptitle("Linux 6.1 guest, QEMU 11.1 (TCG), vufsd: fio psync QD1, %s s runs, "
             "median of %s round(s) (bars: min-max)" % (runtime, rounds), fontsize=10)
fig.tight_layout()
fig.savefig(png, dpi=100)
print("plot:", png)
PY
exit 0
}
