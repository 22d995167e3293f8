#!/bin/sh
# Reproduces the numbers in docs/benchmarks.md: vufsd as installed (its
# defaults: namespace sandbox, seccomp kill, adaptive polling, a queue thread
# per CPU; the backend "vufsd-defaults") against QEMU 7.2's legacy virtiofsd
# and the Rust virtiofsd (Debian 13's, run through tests/guest/trixie-run.sh),
# each with its own defaults, and the host pseudo-backend, cache hot,
# interleaved run by run: first the targets, then what each of vufsd's defaults
# costs, profiles, the thread-pool and --poll-us variants, the queue-depth
# sweep and its plot (docs/bench-qd.png), and vufsd's RSS with many inodes.
#
# usage: scripts/bench.sh [BUILD_DIR] [OUT_DIR]
#   env: SIZE (data file, default 1G), RUNTIME (s per run, default 3),
#        REPEAT (runs per backend, default 3), DATA (files, default
#        /tmp/vufs-bench-data), RSS_FILES (default 18000), BENCH (binary),
#        PLOT (png path, default docs/bench-qd.png), SWEEP_RUNTIME (s, default 2),
#        STEPS (default "targets costs profile data meta nohalt threadpool poll
#        sweep rss plot tables"), TMPFS_DATA (default /dev/shm/vufs-bench-data),
#        CREATE_DISK (1: creates in DATA too), VARIANT_REPEAT (runs of the
#        costs, threadpool and poll steps, default REPEAT), HALT_POLL_US
#        (vufs-bench --halt-poll-us, default 200: the guest side halt-polls as a
#        KVM vCPU does; the "nohalt" step repeats the targets with 0), RUST (0:
#        leave the Rust virtiofsd out; it needs root and the Debian 13 root of
#        tests/guest/trixie-root.sh, prepared here when missing: about 1.5
#        minutes once, cached in $VUFS_GUEST_CACHE), PROFILE_SECONDS (length of
#        each profiled run, default 5)
# OUT_DIR gets NAME.json, NAME.txt (table) and NAME.cmd per run, NAME.perf.txt
# per profile, bench-qd.png's data, and tables.md (the markdown tables of
# docs/benchmarks.md, the targets' verdicts first). The plot needs
# python3-matplotlib, the profiles perf (linux-perf): installed when missing
# (apt-get; VUFS_NO_INSTALL=1 does not), a step whose tool is still missing says
# so and is skipped.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-/tmp/vufs-bench-results}
size=${SIZE:-1G}
runtime=${RUNTIME:-3}
repeat=${REPEAT:-3}
data=${DATA:-/tmp/vufs-bench-data}
tmpfs_data=${TMPFS_DATA:-/dev/shm/vufs-bench-data}
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
steps=${STEPS:-targets costs profile data meta nohalt threadpool poll sweep rss plot tables}
halt=${HALT_POLL_US:-200}
profile_s=${PROFILE_SECONDS:-5}
mkdir -p "$out" "$data"
step() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }

# The benchmark's own tools (not the build's or the tests'): installed here
# when a step needs them, unless VUFS_NO_INSTALL=1.
bench_pkg() { # bench_pkg CHECK-COMMAND PACKAGE STEP
    sh -c "$1" > /dev/null 2>&1 && return 0
    [ "${VUFS_NO_INSTALL:-0}" = 1 ] && return 1
    echo "== installing $2 (apt-get) for the $3 step" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=300 install -y -q "$2" \
        > /dev/null 2>&1 || true
    sh -c "$1" > /dev/null 2>&1
}
if step plot; then bench_pkg "/usr/bin/python3 -c 'import matplotlib'" python3-matplotlib plot || true; fi
if step profile; then bench_pkg "command -v perf" linux-perf profile || true; fi

# vufsd exactly as a user starts it: every serving and security setting its
# default (the backend's log goes to vufs-bench's per-run log file).
vufsd="$build/vufsd --socket-path {socket} --shared-dir {dir}"
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

def="vufsd-defaults=$vufsd"
tp() { echo "vufsd-tp$1=$vufsd --thread-pool-size $1"; }
poll() { echo "vufsd-poll$1=$vufsd --poll-us $1"; }
# The targets' backends: vufsd as installed, the legacy and the Rust daemon, host.
plain() { run "$@" --backend "$def" @peers --backend host; }
# on_tmpfs CMD...: creates on tmpfs, where the host filesystem is not the bottleneck.
on_tmpfs() {
    data_saved=$data
    data=$tmpfs_data
    mkdir -p "$data"
    "$@"
    data=$data_saved
}

# The targets (docs/benchmarks.md), each daemon with its defaults: 4 KiB randread at QD1 and
# 4 queues x QD16 (the peers: one queue x QD64), 1 MiB seqread against the
# host's pread, LOOKUP and GETATTR, CREATE + UNLINK.
if step targets; then
plain randread-qd1 --workload randread --bs 4k --size "$size" --queues 1 --depth 1
plain randread-4x16 --workload randread --bs 4k --size "$size" --queues 4 --depth 16
plain seqread-1m --workload seqread --bs 1M --size "$size" --queues 1 --depth 1
plain lookup-qd1 --workload lookup --files 10000 --queues 1 --depth 1
plain stat-qd1 --workload stat --files 10000 --queues 1 --depth 1
on_tmpfs plain create-unlink-qd1 --workload create-unlink --queues 1 --depth 1
fi

# What each of vufsd's defaults costs: the defaults against the same with one
# thing changed (interleaved, so the CPU per request and the CPU share compare).
if step costs; then
repeat_saved=$repeat
repeat=${VARIANT_REPEAT:-$repeat}
costs() { run "$@" --backend "$def" \
    --backend "vufsd-nosandbox=$vufsd --sandbox none" \
    --backend "vufsd-noseccomp=$vufsd --seccomp none" \
    --backend "vufsd-nopoll=$vufsd --poll-us 0" \
    --backend "vufsd-threadperqueue=$vufsd --queue-threads 16"; }
costs cost-randread-qd1 --workload randread --bs 4k --size "$size" --queues 1 --depth 1
costs cost-randread-4x1 --workload randread --bs 4k --size "$size" --queues 4 --depth 1
costs cost-randread-4x16 --workload randread --bs 4k --size "$size" --queues 4 --depth 16
costs cost-seqread-1m --workload seqread --bs 1M --size "$size" --queues 1 --depth 1
costs cost-stat-qd1 --workload stat --files 10000 --queues 1 --depth 1
on_tmpfs costs cost-create-unlink-qd1 --workload create-unlink --queues 1 --depth 1
repeat=$repeat_saved
fi

# Where vufsd's time goes, as installed: perf record -a -g over one run of
# each target workload (vufsd alone), the top of the report per workload.
if step profile; then
if ! command -v perf > /dev/null; then
    echo "== profile: skipped, no perf (apt-get install -y linux-perf)" >&2
else
prof() {
    name=$1
    shift
    echo "== $name (perf record -a -g)" >&2
    perf record -q -a -g -o "$out/$name.perf.data" -- \
        "$bench" --backend "$def" "$@" --dir "$data" --runtime "$profile_s" --repeat 1 \
        --halt-poll-us "$halt" > "$out/$name.txt" 2>&1 || true
    # Who had the CPUs (every thread of the machine), then where vufsd's own
    # threads spent theirs (percentages of vufsd's samples).
    comms=vufsd,vufsd-hiprio$(seq -f ',vufsd-req%g' 1 16 | tr -d '\n')
    {
        echo "# $name: samples per thread (perf record -a -g, cpu-clock)"
        perf report -q -i "$out/$name.perf.data" --no-children --sort comm --stdio -g none \
            --percent-limit 0.5 2> /dev/null
        echo "# $name: vufsd's threads by symbol (share of vufsd's samples)"
        perf report -q -i "$out/$name.perf.data" --no-children --comms "$comms" --sort dso,sym \
            --percentage relative --percent-limit 0.5 --stdio -g none 2> /dev/null | head -n 50
    } > "$out/$name.perf.txt"
    rm -f "$out/$name.perf.data"
    head -n 12 "$out/$name.perf.txt" >&2
}
prof profile-randread-qd1 --workload randread --bs 4k --size "$size" --queues 1 --depth 1
prof profile-randread-4x16 --workload randread --bs 4k --size "$size" --queues 4 --depth 16
prof profile-seqread-1m --workload seqread --bs 1M --size "$size" --queues 1 --depth 1
prof profile-stat-qd1 --workload stat --files 10000 --queues 1 --depth 1
fi
fi

# More of the data path and the metadata path: writes, 4 x QD16 metadata,
# CREATE alone (+ RELEASE + FORGET, not counted), on tmpfs and with
# CREATE_DISK=1 in DATA too.
if step data; then
plain randwrite-qd1 --workload randwrite --bs 4k --size "$size" --queues 1 --depth 1
plain randwrite-4x16 --workload randwrite --bs 4k --size "$size" --queues 4 --depth 16
fi
if step meta; then
plain lookup-4x16 --workload lookup --files 10000 --queues 4 --depth 16
plain stat-4x16 --workload stat --files 10000 --queues 4 --depth 16
on_tmpfs plain create-unlink-4x16 --workload create-unlink --queues 4 --depth 16
on_tmpfs plain create-tmpfs-qd1 --workload create --queues 1 --depth 1
on_tmpfs plain create-tmpfs-4x16 --workload create --queues 4 --depth 16
if [ "${CREATE_DISK:-0}" = 1 ]; then
    plain create-disk-qd1 --workload create --queues 1 --depth 1
    plain create-disk-4x16 --workload create --queues 4 --depth 16
fi
fi

# The targets again with a guest side that sleeps at once (--halt-poll-us 0):
# every completion then wakes the driver's thread.
if step nohalt; then
halt_saved=$halt
halt=0
plain randread-qd1-nohalt --workload randread --bs 4k --size "$size" --queues 1 --depth 1
plain randread-4x16-nohalt --workload randread --bs 4k --size "$size" --queues 4 --depth 16
plain seqread-1m-nohalt --workload seqread --bs 1M --size "$size" --queues 1 --depth 1
plain lookup-qd1-nohalt --workload lookup --files 10000 --queues 1 --depth 1
plain stat-qd1-nohalt --workload stat --files 10000 --queues 1 --depth 1
on_tmpfs plain create-unlink-qd1-nohalt --workload create-unlink --queues 1 --depth 1
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
on_tmpfs pool4 tp-create-1x16 --workload create --queues 1 --depth 16
on_tmpfs pool4 tp-create-4x16 --workload create --queues 4 --depth 16
repeat=$repeat_saved
fi

# --poll-us: QD1 latency against the CPU it burns (vufs-bench's cpu % and CPU
# per request); the default (32) is the defaults' backend.
if step poll; then
repeat_saved=$repeat
repeat=${VARIANT_REPEAT:-$repeat}
run poll-randread-qd1 --backend "$(poll 0)" --backend "$(poll 10)" --backend "$def" \
    --backend "$(poll 50)" --backend "$(poll 200)" @peers \
    --workload randread --bs 4k --size "$size" --queues 1 --depth 1
run poll-randread-4x1 --backend "$(poll 0)" --backend "$def" --backend "$(poll 50)" \
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
        run "qd-q$q-d$d" --backend "$def" --backend "$(poll 0)" \
            @peers --backend host \
            --workload randread --bs 4k --size "$size" --queues "$q" --depth "$d"
    done
done
runtime=$runtime_saved
fi

# RSS with many inodes known: the stat workload looks every file up first.
if step rss; then
repeat=1 runtime=1
run rss-1000 --backend "$def" @peers \
    --workload stat --files 1000 --queues 1 --depth 1
run rss --backend "$def" @peers \
    --workload stat --files "$rss_files" --queues 1 --depth 1
fi

if step plot && ! /usr/bin/python3 -c 'import matplotlib' 2> /dev/null; then
    echo "== plot: skipped, no matplotlib (apt-get install -y python3-matplotlib)" >&2
elif step plot; then
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
fig.text(0.5, 0.005, "vufsd-defaults: vufsd as installed; vufsd-poll0: the same with --poll-us 0. "
         "legacy and rust serve one queue: with 4 queues asked they get 1 queue x 4*depth; "
         "host: queues*depth threads at QD1", ha="center", fontsize=8)
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
order = ["randread-qd1", "randread-4x16", "seqread-1m", "lookup-qd1", "stat-qd1",
         "create-unlink-qd1", "cost-randread-qd1", "cost-randread-4x1", "cost-randread-4x16",
         "cost-seqread-1m", "cost-stat-qd1", "cost-create-unlink-qd1", "randwrite-qd1",
         "randwrite-4x16", "lookup-4x16", "stat-4x16", "create-unlink-4x16",
         "create-tmpfs-qd1", "create-tmpfs-4x16", "create-disk-qd1", "create-disk-4x16",
         "randread-qd1-nohalt", "randread-4x16-nohalt", "seqread-1m-nohalt",
         "lookup-qd1-nohalt", "stat-qd1-nohalt", "create-unlink-qd1-nohalt",
         "tp-randread-1x16", "tp-randread-4x16", "tp-create-1x16", "tp-create-4x16",
         "poll-randread-qd1", "poll-randread-4x1", "rss-1000", "rss"]
names = [n for n in order if n in names] + [n for n in names if n not in order and not n.startswith("qd-")]

# The targets, each daemon with its defaults: vufsd-defaults against the better
# of legacy and rust (seqread: against the host's pread).
def load(n):
    p = os.path.join(out, n + ".json")
    return {o["backend"]: o for o in json.load(open(p))} if os.path.exists(p) else None
targets = [("randread-qd1", "4 KiB randread QD1", "peer", 1.5),
           ("randread-4x16", "4 KiB randread, 4 queues x QD16 (peers 1 x QD64)", "peer", 3.0),
           ("seqread-1m", "1 MiB seqread, QD1", "host", 0.8),
           ("lookup-qd1", "LOOKUP QD1", "peer", 1.5),
           ("stat-qd1", "GETATTR QD1", "peer", 1.5),
           ("create-unlink-qd1", "CREATE + UNLINK QD1 (tmpfs)", "peer", 1.5)]
rows = []
for n, what, against, goal in targets:
    r = load(n)
    if not r or "vufsd-defaults" not in r:
        continue
    v = r["vufsd-defaults"]
    if against == "host":
        if "host" not in r:
            continue
        ref, refname = r["host"]["mib_s"], "host"
        ratio = v["mib_s"] / ref if ref else 0
        val = f"{v['mib_s']:.0f} MiB/s vs host {ref:.0f}"
    else:
        peers = [(r[p]["iops"], p) for p in ("legacy", "rust") if p in r]
        if not peers:
            continue
        ref, refname = max(peers)
        ratio = v["iops"] / ref if ref else 0
        val = f"{v['iops']:.0f} vs {refname} {ref:.0f}"
    verdict = "met" if ratio >= goal else "not met"
    rows.append(f"| {what} | {val} | **{ratio:.2f}x** | >= {goal}x | {verdict} | "
                f"{v['cpu_us_per_op']:.2f} us, {v['cpu_pct']:.0f}% |")
if rows:
    print("### Targets (vufsd as installed against each peer's defaults)\n")
    print("| target | vufsd-defaults vs the better peer (median) | ratio | goal | verdict | vufsd CPU per op, CPU % |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
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
    print("| queues | depth | " + " | ".join(backends) + "".join(f" | vufsd-defaults / {p}" for p in peers) + " |")
    print("|---|---|" + "---|" * (len(backends) + len(peers)))
    for (q, d) in sorted(rows):
        r = rows[(q, d)]
        ratios = "".join(f" | {r.get('vufsd-defaults', 0) / r[p]:.2f}" if r.get(p) else " | -" for p in peers)
        print(f"| {q} | {d} | " + " | ".join(f"{r.get(b, 0):.0f}" for b in backends) + ratios + " |")
    print()
PY
echo "tables: $out/tables.md" >&2
fi
echo "results in $out" >&2
