#!/bin/sh
# Reproduces the DAX window sweep of docs/dax.md section 9: vufsd with a DAX
# window of 1/8, 1/4, 1/2, 1 and 2 x the random working set, --dax-policy never,
# always and auto, driven by vufs-bench's emulated Linux guest (and the
# recency-aware one for comparison), every combination interleaved run by run in
# one invocation per workload; then the table (markdown) and the plot.
#
# usage: scripts/bench-dax.sh [BUILD_DIR] [OUT_DIR]
#   env: FILE_SIZE (per file, MiB, default 64), FILES (default 4),
#        RUNTIME (s per run, default 2), REPEAT (runs per variant, default 3),
#        WORKLOADS (default "randread randwrite"), GUESTS (default linux,lru),
#        DATA (default /tmp/vufs-bench-dax-data), PLOT (default docs/dax-sweep.png),
#        HALT_POLL_US (vufs-bench --halt-poll-us, default 200)
# OUT_DIR gets dax-WORKLOAD.json (vufs-bench --json), .txt (its tables), .cmd
# (the exact command) and dax-tables.md.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-/tmp/vufs-bench-dax-results}
file_mib=${FILE_SIZE:-64}
files=${FILES:-4}
runtime=${RUNTIME:-2}
repeat=${REPEAT:-3}
workloads=${WORKLOADS:-randread randwrite}
guests=${GUESTS:-linux,lru}
data=${DATA:-/tmp/vufs-bench-dax-data}
plot=${PLOT:-$here/docs/dax-sweep.png}
bench=$build/vufs-bench
[ -x "$bench" ] || { echo "no vufs-bench in $build" >&2; exit 1; }
mkdir -p "$out" "$data"

ws=$((file_mib * files))
windows="$((ws / 8))M,$((ws / 4))M,$((ws / 2))M,${ws}M,$((ws * 2))M"
vufsd="$build/vufsd --socket-path {socket} --shared-dir {dir} --cache auto --sandbox none --seccomp none --unsafe-no-isolation --log-level error --dax-window {dax_window} --dax-policy {dax_policy}"

for w in $workloads; do
    set -- --backend "vufsd=$vufsd" --dir "$data" --workload "$w" --bs 4k \
        --size "${file_mib}M" --files "$files" --queues 1 --depth 1 \
        --runtime "$runtime" --repeat "$repeat" --halt-poll-us "${HALT_POLL_US:-200}" \
        --dax-window "$windows" --dax-policy never,always,auto --dax-guest "$guests" --json
    printf '%s' "vufs-bench" > "$out/dax-$w.cmd"
    for a in "$@"; do printf " '%s'" "$a" >> "$out/dax-$w.cmd"; done
    echo >> "$out/dax-$w.cmd"
    echo "== dax $w: working set $ws MiB, windows $windows" >&2
    "$bench" "$@" > "$out/dax-$w.json" 2> "$out/dax-$w.txt"
done

/usr/bin/python3 - "$out" "$plot" "$ws" $workloads <<'PY'
import json, os, sys
out, png, ws = sys.argv[1], sys.argv[2], int(sys.argv[3])
workloads = sys.argv[4:]
data = {}
for w in workloads:
    for o in json.load(open(os.path.join(out, f"dax-{w}.json"))):
        key = (w, o["dax_guest"], o["dax_window"] >> 20, o["dax_policy"])
        data[key] = o
guests = sorted({k[1] for k in data}, key=lambda g: g != "linux")
windows = sorted({k[2] for k in data})

def frac(m):
    r = m / ws
    return {0.125: "1/8", 0.25: "1/4", 0.5: "1/2"}.get(r, f"{r:g}")

lines = []
for w in workloads:
    for g in guests:
        lines.append(f"\n{w}, {g} guest (kIOPS, median of the runs; auto's ratios)\n")
        lines.append("| window (MiB) | / working set | never | always | auto | auto / max | auto / never | DAX files under auto |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for m in windows:
            row = {p: data.get((w, g, m, p)) for p in ("never", "always", "auto")}
            if not all(row.values()):
                continue
            n, a, u = (row[p]["iops"] / 1e3 for p in ("never", "always", "auto"))
            best = max(n, a)
            mark = "" if u >= 0.95 * best else " **(below 0.95)**"
            lines.append(f"| {m} | {frac(m)} | {n:.1f} | {a:.1f} | {u:.1f} | {u / best:.2f}{mark} | "
                         f"{u / n:.2f} | {row['auto'].get('dax_files', '-')} |")
open(os.path.join(out, "dax-tables.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, axes = plt.subplots(1, len(workloads), figsize=(5.5 * len(workloads), 4.2), squeeze=False)
styles = {"never": ("tab:gray", "o"), "always": ("tab:red", "s"), "auto": ("tab:blue", "^")}
for ax, w in zip(axes[0], workloads):
    for g in guests:
        for p, (col, mk) in styles.items():
            xs = [m / ws for m in windows if (w, g, m, p) in data]
            ys = [data[(w, g, m, p)]["iops"] / 1e3 for m in windows if (w, g, m, p) in data]
            if g != "linux" and p == "never":
                continue
            ax.plot(xs, ys, marker=mk, color=col, linestyle="-" if g == "linux" else "--",
                    label=f"{p} ({g} guest)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks([m / ws for m in windows])
    ax.set_xticklabels([frac(m) for m in windows])
    ax.set_xlabel(f"DAX window / random working set ({ws} MiB)")
    ax.set_ylabel("kIOPS (4 KiB, QD1)")
    ax.set_title(f"{w}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(png, dpi=110)
print("plot:", png)
PY
