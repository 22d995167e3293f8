#!/bin/sh
# Reproduces the numbers in docs/benchmarks.md: vufsd (as it starts by default,
# and with --poll-us) against QEMU 7.2's legacy virtiofsd, the Rust virtiofsd
# (Debian 13's, run through tests/guest/trixie-run.sh) and the host
# pseudo-backend, cache hot, interleaved run by run; the thread-pool and
# --poll-us variants; then the queue-depth sweep and its plot
# (docs/bench-qd.png), and vufsd's RSS with many inodes looked up.
#
# usage: scripts/bench.sh [BUILD_DIR] [OUT_DIR]
#   env: SIZE (data file, default 1G), RUNTIME (s per run, default 3),
#        REPEAT (runs per backend, default 3), DATA (files, default
#        /tmp/vufs-bench-data), RSS_FILES (default 18000), BENCH (binary),
#        PLOT (png path, default docs/bench-qd.png), SWEEP_RUNTIME (s, default 2),
#        STEPS (default "data meta create threadpool poll sweep rss plot tables"),
#        TMPFS_DATA (default /dev/shm/vufs-bench-data), POLL_US (the polling
#        variant's --poll-us, default 50), CREATE_DISK (1: create in DATA too),
#        VARIANT_REPEAT (runs of the threadpool and poll steps, default REPEAT),
#        HALT_POLL_US (vufs-bench --halt-poll-us, default 200: the guest side
#        halt-polls as a KVM vCPU does; the "nohalt" step repeats the targets
#        with 0), RUST (0: leave the Rust virtiofsd out; it needs root and the
#        Debian 13 root of tests/guest/trixie-root.sh, prepared here when
#        missing: about 1.5 minutes once, cached in $VUFS_GUEST_CACHE)
# OUT_DIR gets NAME.json, NAME.txt (table) and NAME.cmd per run, bench-qd.png's
# data, and tables.md (the markdown tables of docs/benchmarks.md).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-/tmp/vufs-bench-results}
size=${SIZE:-1G}
runtime=${RUNTIME:-3}
repeat=${REPEAT:-3}
data=${DATA:-/tmp/vufs-bench-data}
rss_files=${RSS_FILES:-18000}
plot=${PLOT:-$here/docs/bench-qd.png}
bench=${BENCH:-$build/vufs-bench}
[ -x "$bench" ] || bench=$build/frontend/vufs-bench-dev
legacy=/usr/lib/qemu/virtiofsd
[ -x "$bench" ] || { echo "no vufs-bench in $build" >&2; exit 1; }
[ -x "$legacy" ] || { echo "$legacy missing" >&2; exit 1; }
use_rust=${RUST:-1}
if [ "$use_rust" = 1 ]; then
    "$here/tests/guest/trixie-root.sh" > /dev/null ||
        { echo "no Debian 13 root for the Rust virtiofsd (tests/guest/trixie-root.sh; RUST=0 leaves it out)" >&2; exit 1; }
fi
steps=${STEPS:-data meta create nohalt threadpool poll sweep rss plot tables}
halt=${HALT_POLL_US:-200}
poll_us=${POLL_US:-50}
mkdir -p "$out" "$data"
step() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }

vufsd="$build/vufsd --socket-path {socket} --shared-dir {dir} --cache auto --sandbox none --seccomp none --unsafe-no-isolation --log-level error"
legacy_cmd="$legacy --socket-path={socket} -o source={dir} -o cache=auto"
# The Rust virtiofsd with its defaults (cache auto, one request queue), chrooted
# into the Debian 13 root with the data directory bound at its own path; its
# namespace sandbox cannot be set up inside that chroot, hence --sandbox=chroot.
# trixie-run.sh execs the daemon: the pid and process group vufs-bench samples
# are the daemon's.
rust_cmd="$here/tests/guest/trixie-run.sh --bind {dir} /usr/libexec/virtiofsd --socket-path={socket} --shared-dir={dir} --sandbox=chroot"
# The daemons keep one O_PATH fd per known inode, so RLIMIT_NOFILE bounds the
# inodes they can know (file handles need CAP_DAC_READ_SEARCH and a filesystem
# that exports them). Where the hard limit is low and cannot be raised, keep
# RSS_FILES below it.

# run NAME ARGS...: one vufs-bench invocation, JSON to OUT/NAME.json, the
# table (stderr) to OUT/NAME.txt; the command line to OUT/NAME.cmd. An argument
# @peers stands for the other daemons: legacy, then rust (unless RUST=0).
run() {
    name=$1
    shift
    n=$#
    for a in "$@"; do
        if [ "$a" = @peers ]; then
            set -- "$@" --backend "legacy=$legacy_cmd"
            [ "$use_rust" = 1 ] && set -- "$@" --backend "rust=$rust_cmd"
        else
            set -- "$@" "$a"
        fi
    done
    shift "$n"
    printf '%s' "vufs-bench" > "$out/$name.cmd"
    for a in "$@"; do printf " '%s'" "$a" >> "$out/$name.cmd"; done
    echo >> "$out/$name.cmd"
    echo "== $name" >&2
    "$bench" "$@" --dir "$data" --runtime "$runtime" --repeat "$repeat" --halt-poll-us "$halt" --json \
        > "$out/$name.json" 2> "$out/$name.txt"
    grep -v '^\[run' "$out/$name.txt" | tail -n +2 >&2
}

tp() { echo "vufsd-tp$1=$vufsd --thread-pool-size $1"; }
poll() { echo "vufsd-poll$1=$vufsd --poll-us $1"; }
# The targets' backends: vufsd as it starts by default, vufsd polling, the
# legacy and the Rust daemon, host.
at_qd1() { run "$@" --backend "vufsd=$vufsd" --backend "$(poll "$poll_us")" \
    @peers --backend host; }
plain() { run "$@" --backend "vufsd=$vufsd" @peers --backend host; }

# Data path: 4 KiB random reads at QD1 and 4 queues x QD16; 1 MiB sequential.
if step data; then
at_qd1 randread-qd1 --workload randread --bs 4k --size "$size" --queues 1 --depth 1
plain randread-4x16 --workload randread --bs 4k --size "$size" --queues 4 --depth 16
at_qd1 seqread-1m --workload seqread --bs 1M --size "$size" --queues 1 --depth 1
plain randwrite-qd1 --workload randwrite --bs 4k --size "$size" --queues 1 --depth 1
fi

# Metadata: LOOKUP and GETATTR at QD1 and 4 x QD16.
if step meta; then
for w in lookup stat; do
    at_qd1 "$w-qd1" --workload "$w" --files 10000 --queues 1 --depth 1
    plain "$w-4x16" --workload "$w" --files 10000 --queues 4 --depth 16
done
fi

# CREATE (+ RELEASE + FORGET, not counted) on tmpfs (TMPFS_DATA), where the
# host filesystem is not the bottleneck; with CREATE_DISK=1 in DATA too.
if step create; then
data_saved=$data
wheres=tmpfs
[ "${CREATE_DISK:-0}" = 1 ] && wheres="disk tmpfs"
for where in $wheres; do
    if [ $where = tmpfs ]; then
        data=${TMPFS_DATA:-/dev/shm/vufs-bench-data}
        mkdir -p "$data"
    fi
    at_qd1 "create-$where-qd1" --workload create --queues 1 --depth 1
    plain "create-$where-4x16" --workload create --queues 4 --depth 16
done
data=$data_saved
fi

# The QD1 and 4-queue targets again with a guest side that sleeps at once
# (--halt-poll-us 0): every completion then wakes the driver's thread.
if step nohalt; then
halt_saved=$halt
halt=0
at_qd1 randread-qd1-nohalt --workload randread --bs 4k --size "$size" --queues 1 --depth 1
plain randread-4x16-nohalt --workload randread --bs 4k --size "$size" --queues 4 --depth 16
at_qd1 seqread-1m-nohalt --workload seqread --bs 1M --size "$size" --queues 1 --depth 1
at_qd1 lookup-qd1-nohalt --workload lookup --files 10000 --queues 1 --depth 1
at_qd1 stat-qd1-nohalt --workload stat --files 10000 --queues 1 --depth 1
data_saved=$data
data=${TMPFS_DATA:-/dev/shm/vufs-bench-data}
mkdir -p "$data"
at_qd1 create-tmpfs-qd1-nohalt --workload create --queues 1 --depth 1
data=$data_saved
halt=$halt_saved
fi

# The thread-pool default: --thread-pool-size 0/1/2/4 on reads and creates.
if step threadpool; then
repeat_saved=$repeat
repeat=${VARIANT_REPEAT:-$repeat}
pool4() { run "$@" --backend "$(tp 0)" --backend "$(tp 1)" --backend "$(tp 2)" \
    --backend "$(tp 4)" @peers; }
pool4 tp-randread-1x16 --workload randread --bs 4k --size "$size" --queues 1 --depth 16
pool4 tp-randread-4x16 --workload randread --bs 4k --size "$size" --queues 4 --depth 16
data_saved=$data
data=${TMPFS_DATA:-/dev/shm/vufs-bench-data}
mkdir -p "$data"
pool4 tp-create-1x16 --workload create --queues 1 --depth 16
pool4 tp-create-4x16 --workload create --queues 4 --depth 16
data=$data_saved
repeat=$repeat_saved
fi

# --poll-us: QD1 latency against the CPU it burns (vufs-bench's cpu %).
if step poll; then
repeat_saved=$repeat
repeat=${VARIANT_REPEAT:-$repeat}
run poll-randread-qd1 --backend "$(poll 0)" --backend "$(poll 10)" --backend "$(poll 50)" \
    --backend "$(poll 200)" @peers \
    --workload randread --bs 4k --size "$size" --queues 1 --depth 1
run poll-randread-4x1 --backend "$(poll 0)" --backend "$(poll 50)" \
    @peers \
    --workload randread --bs 4k --size "$size" --queues 4 --depth 1
repeat=$repeat_saved
fi

# IOPS against queue depth (4 KiB randread), one queue and four.
if step sweep; then
runtime_saved=$runtime
runtime=${SWEEP_RUNTIME:-2}
for q in 1 4; do
    for d in 1 2 4 8 16 32 64; do
        run "qd-q$q-d$d" --backend "vufsd=$vufsd" --backend "$(poll "$poll_us")" \
            @peers --backend host \
            --workload randread --bs 4k --size "$size" --queues "$q" --depth "$d"
    done
done
runtime=$runtime_saved
fi

# RSS with many inodes known: the stat workload looks every file up first.
if step rss; then
repeat=1 runtime=1
run rss-1000 --backend "vufsd=$vufsd" @peers \
    --workload stat --files 1000 --queues 1 --depth 1
run rss --backend "vufsd=$vufsd" @peers \
    --workload stat --files "$rss_files" --queues 1 --depth 1
fi

if step plot; then
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
fig.text(0.5, 0.005, "legacy and rust serve one queue: with 4 queues asked they get 1 queue x "
         "4*depth; host: queues*depth threads at QD1", ha="center", fontsize=8)
fig.tight_layout(rect=(0, 0.03, 1, 1))
fig.savefig(png, dpi=100)
print("plot:", png)
PY
fi

if step tables; then
/usr/bin/python3 - "$out" > "$out/tables.md" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
def cell(o, k):
    return f"{o[k]:.0f} ({o[k+'_min']:.0f}-{o[k+'_max']:.0f})"
names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(out, "*.json")))
order = ["randread-qd1", "randread-4x16", "seqread-1m", "randwrite-qd1", "lookup-qd1",
         "lookup-4x16", "stat-qd1", "stat-4x16", "create-disk-qd1", "create-disk-4x16",
         "create-tmpfs-qd1", "create-tmpfs-4x16", "randread-qd1-nohalt",
         "randread-4x16-nohalt", "seqread-1m-nohalt", "lookup-qd1-nohalt", "stat-qd1-nohalt",
         "create-tmpfs-qd1-nohalt", "tp-randread-1x16", "tp-randread-4x16",
         "tp-create-1x16", "tp-create-4x16", "poll-randread-qd1", "poll-randread-4x1",
         "rss-1000", "rss"]
names = [n for n in order if n in names] + [n for n in names if n not in order and not n.startswith("qd-")]
for n in names:
    objs = json.load(open(os.path.join(out, n + ".json")))
    cmd = open(os.path.join(out, n + ".cmd")).read().strip()
    print(f"### {n}\n")
    print("| backend | queues x depth | IOPS median (min-max) | MiB/s median (min-max) | p50 us | p99 us | ratio | backend CPU us/op | backend CPU % | backend RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for o in objs:
        cpu = f"{o['cpu_us_per_op']:.2f}" if o["cpu_us_per_op"] >= 0 else "-"
        pct = f"{o['cpu_pct']:.0f}" if o.get("cpu_pct", -1) >= 0 else "-"
        rss = f"{o['rss_kib_max']/1024:.1f}" if o["rss_kib_max"] > 0 else "-"
        print(f"| {o['backend']} | {o['queues']} x {o['depth']} | {cell(o,'iops')} | "
              f"{o['mib_s']:.1f} ({o['mib_s_min']:.1f}-{o['mib_s_max']:.1f}) | "
              f"{o['p50_us']:.1f} | {o['p99_us']:.1f} | {o['ratio']:.2f} | {cpu} | {pct} | {rss} |")
    print()
    print("<details><summary>command and JSON</summary>\n")
    print("```")
    print(cmd + " --dir DATA --runtime RUNTIME --repeat REPEAT --json")
    print(open(os.path.join(out, n + ".json")).read().strip())
    print("```\n</details>\n")
qd = sorted(glob.glob(os.path.join(out, "qd-*.json")))
if qd:
    print("### queue-depth sweep (4 KiB randread, median IOPS)\n")
    rows = {}
    backends = []
    for p in qd:
        base = os.path.basename(p)[3:-5]
        q, d = base.split("-")
        for o in json.load(open(p)):
            if o["backend"] not in backends:
                backends.append(o["backend"])
            rows.setdefault((int(q[1:]), int(d[1:])), {})[o["backend"]] = o["iops"]
    peers = [p for p in ("legacy", "rust") if p in backends]
    print("| queues | depth | " + " | ".join(backends) + "".join(f" | vufsd / {p}" for p in peers) + " |")
    print("|---|---|" + "---|" * (len(backends) + len(peers)))
    for (q, d) in sorted(rows):
        r = rows[(q, d)]
        ratios = "".join(f" | {r.get('vufsd', 0) / r[p]:.2f}" if r.get(p) else " | -" for p in peers)
        print(f"| {q} | {d} | " + " | ".join(f"{r.get(b, 0):.0f}" for b in backends) + ratios + " |")
    print()
PY
echo "tables: $out/tables.md" >&2
fi
echo "results in $out" >&2
