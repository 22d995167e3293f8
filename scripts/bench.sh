#!/bin/sh
# Reproduces the numbers in docs/benchmarks.md: vufsd (thread-pool variants)
# against QEMU 7.2's legacy virtiofsd and the host pseudo-backend, cache hot,
# interleaved run by run; then the queue-depth sweep and its plot
# (docs/bench-qd.png), and vufsd's RSS with many inodes looked up.
#
# usage: scripts/bench.sh [BUILD_DIR] [OUT_DIR]
#   env: SIZE (data file, default 1G), RUNTIME (s per run, default 3),
#        REPEAT (runs per backend, default 3), DATA (files, default
#        /tmp/vufs-bench-data), RSS_FILES (default 100000), BENCH (binary),
#        PLOT (png path, default docs/bench-qd.png), SWEEP_RUNTIME (s, default 2)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-/tmp/vufs-bench-results}
size=${SIZE:-1G}
runtime=${RUNTIME:-3}
repeat=${REPEAT:-3}
data=${DATA:-/tmp/vufs-bench-data}
rss_files=${RSS_FILES:-100000}
plot=${PLOT:-$here/docs/bench-qd.png}
bench=${BENCH:-$build/vufs-bench}
[ -x "$bench" ] || bench=$build/frontend/vufs-bench-dev
legacy=/usr/lib/qemu/virtiofsd
[ -x "$bench" ] || { echo "no vufs-bench in $build" >&2; exit 1; }
[ -x "$legacy" ] || { echo "$legacy missing" >&2; exit 1; }
mkdir -p "$out" "$data"

vufsd="$build/vufsd --socket-path {socket} --shared-dir {dir} --cache auto --sandbox none --seccomp none --unsafe-no-isolation --log-level error"
legacy_cmd="$legacy --socket-path={socket} -o source={dir} -o cache=auto"

# run NAME ARGS...: one vufs-bench invocation, JSON to OUT/NAME.json, the
# table (stderr) to OUT/NAME.txt; the command line to OUT/NAME.cmd.
run() {
    name=$1
    shift
    printf '%s' "vufs-bench" > "$out/$name.cmd"
    for a in "$@"; do printf " '%s'" "$a" >> "$out/$name.cmd"; done
    echo >> "$out/$name.cmd"
    echo "== $name" >&2
    "$bench" "$@" --dir "$data" --runtime "$runtime" --repeat "$repeat" --json \
        > "$out/$name.json" 2> "$out/$name.txt"
    grep -v '^\[run' "$out/$name.txt" | tail -n +2 >&2
}

tp() { echo "vufsd-tp$1=$vufsd --thread-pool-size $1"; }

# Data path: 4 KiB random reads at QD1 and 4 queues x QD16; 1 MiB sequential.
run randread-qd1 --backend "$(tp 0)" --backend "$(tp 2)" --backend "$(tp 4)" \
    --backend "legacy=$legacy_cmd" --backend host \
    --workload randread --bs 4k --size "$size" --queues 1 --depth 1
run randread-4x16 --backend "$(tp 0)" --backend "$(tp 2)" --backend "$(tp 4)" \
    --backend "legacy=$legacy_cmd" --backend host \
    --workload randread --bs 4k --size "$size" --queues 4 --depth 16
run seqread-1m --backend "$(tp 0)" --backend "$(tp 2)" --backend "$(tp 4)" \
    --backend "legacy=$legacy_cmd" --backend host \
    --workload seqread --bs 1M --size "$size" --queues 1 --depth 1
run randwrite-qd1 --backend "$(tp 0)" --backend "legacy=$legacy_cmd" --backend host \
    --workload randwrite --bs 4k --size "$size" --queues 1 --depth 1

# Metadata: LOOKUP, GETATTR, CREATE (+RELEASE) at QD1 and 4 x QD16.
for w in lookup stat create; do
    run "$w-qd1" --backend "$(tp 0)" --backend "$(tp 2)" --backend "legacy=$legacy_cmd" \
        --backend host --workload "$w" --files 10000 --queues 1 --depth 1
    run "$w-4x16" --backend "$(tp 0)" --backend "$(tp 2)" --backend "legacy=$legacy_cmd" \
        --backend host --workload "$w" --files 10000 --queues 4 --depth 16
done

# IOPS against queue depth (4 KiB randread), one queue and four.
runtime=${SWEEP_RUNTIME:-2}
for q in 1 4; do
    for d in 1 2 4 8 16 32 64; do
        run "qd-q$q-d$d" --backend "vufsd=$vufsd" --backend "legacy=$legacy_cmd" \
            --backend host --workload randread --bs 4k --size "$size" --queues "$q" --depth "$d"
    done
done

# RSS with many inodes known: the stat workload looks every file up first.
repeat=1 runtime=1
run rss --backend "vufsd=$vufsd" --backend "legacy=$legacy_cmd" \
    --workload stat --files "$rss_files" --queues 1 --depth 1

/usr/bin/python3 - "$out" "$plot" <<'PY'
import glob, json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, png = sys.argv[1], sys.argv[2]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
for ax, q in zip(axes, (1, 4)):
    series = {}
    for d in (1, 2, 4, 8, 16, 32, 64):
        p = os.path.join(out, f"qd-q{q}-d{d}.json")
        if not os.path.exists(p):
            continue
        for o in json.load(open(p)):
            series.setdefault(o["backend"], []).append(
                (d, o["iops"], o["iops_min"], o["iops_max"]))
    for name, pts in series.items():
        xs = [p[0] for p in pts]
        ax.errorbar(xs, [p[1] / 1e3 for p in pts],
                    yerr=[[(p[1] - p[2]) / 1e3 for p in pts], [(p[3] - p[1]) / 1e3 for p in pts]],
                    marker="o", capsize=3, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("requests in flight per queue")
    ax.set_title(f"4 KiB randread, {q} request queue(s)")
    ax.grid(True, alpha=0.3)
axes[0].set_ylabel("kIOPS (median, min-max)")
axes[0].legend()
fig.text(0.5, 0.005, "legacy serves one queue: with 4 queues asked it gets 1 queue x 4*depth; "
         "host: queues*depth threads at QD1", ha="center", fontsize=8)
fig.tight_layout(rect=(0, 0.03, 1, 1))
fig.savefig(png, dpi=100)
print("plot:", png)
PY
echo "results in $out" >&2
