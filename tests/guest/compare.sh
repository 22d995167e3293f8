#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Run the guest suites against vufsd and against the other daemons one after
# the other, same guest, same scripts, and print a side-by-side table.
#
#   compare.sh --suite BUILD/tests/guest/posix_suite [--vufsd BUILD/vufsd]
#              [--cache auto|always|none] [--fio-size 256M] [--only posix|fio]
#              [--daemons "vufsd legacy"] [--out DIR]
#     POSIX check results, fio-verify IOPS, boot-to-mount time (QEMU 7.2,
#     Linux 6.1 unless VUFS_GUEST_QEMU / VUFS_GUEST_KSERIES say otherwise).
#
#   compare.sh --bench [--vufsd BUILD/vufsd] [--probe BUILD/tests/guest/vufs-probe]
#              [--daemons "vufsd rust legacy"] [--orders "forward reverse"] [--rounds 1]
#              [--fio-size 256M] [--fio-runtime 10] [--meta-files 10000]
#              [--vufsd-queues 4] [--smp 2] [--numjobs 4] [--qemu 11.1]
#              [--kernel 6.12] [--out DIR]
#     The real-guest benchmark (scripts/fio-bench.sh): fio 4 KiB randread and
#     randwrite at QD1 (psync) and QD16 (libaio), 1 MiB seqread, all O_DIRECT;
#     create/stat/unlink of --meta-files files; then, in a guest with --numjobs
#     vCPUs, randread and randwrite with --numjobs jobs (--numjobs 0 or 1 skips
#     that pass). Each daemon with its defaults: vufsd as installed (namespace
#     sandbox, seccomp, adaptive polling, a queue thread per CPU), the Rust
#     virtiofsd (Debian 13's, chrooted by trixie-run.sh, --sandbox=chroot) and
#     the legacy C daemon. The single jobs: every daemon behind one request
#     queue, the jobs on vCPU 0; the --numjobs pass: vufsd behind
#     --vufsd-queues request queues, the others behind one (they serve one).
#     Every daemon once per order, --rounds times: forward is --daemons as
#     given, reverse the other way round; each run is one guest boot named
#     rROUND-ORDER-DAEMON-PASS. The summary (OUT/summary.md) gives per job each
#     daemon's median over the runs (min-max), vufsd's ratio to the better
#     peer's median, and the host CPU each operation cost the daemon and the
#     VMM (medians; tests/guest/hostcpu.sh); then every run's numbers.
#
# Runs are sequential (the machine has 2 cores and TCG uses both). Exit status:
# 0 when every run passed, 1 otherwise. The table is also written to OUT/summary.md.
{
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
vufsd=$here/../../build/vufsd
probe=
suite=
cache=auto
fio_size=
only="posix fio"
daemons=
out=
bench=0
orders="forward reverse"
rounds=1
fio_runtime=10
meta_files=10000
vufsd_queues=4
smp=2
numjobs=4
qemu=${VUFS_GUEST_QEMU:-}
kernel=${VUFS_GUEST_KSERIES:-}

while [ $# -gt 0 ]; do
    case "$1" in
    --vufsd) vufsd=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --fio-size) fio_size=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --daemons) daemons=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bench) bench=1; shift ;;
    --orders) orders=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --fio-runtime) fio_runtime=$2; shift 2 ;;
    --meta-files) meta_files=$2; shift 2 ;;
    --vufsd-queues) vufsd_queues=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --numjobs) numjobs=$2; shift 2 ;;
    --qemu) qemu=$2; shift 2 ;;
    --kernel) kernel=$2; shift 2 ;;
    *) sed -n '4,30p' "$0" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/vufs-compare.XXXXXX)}
mkdir -p "$out"

backend_cmd() {
    case "$1" in
    legacy)
        echo "/usr/lib/qemu/virtiofsd --socket-path={socket} -o source={dir} -o cache=$cache -o xattr" ;;
    vufsd)
        local c=$cache
        [ "$c" = none ] && c=never
        echo "$vufsd --socket-path {socket} --shared-dir {dir} --cache $c --xattr" \
             "--sandbox none --seccomp none --unsafe-no-isolation --log-level info" ;;
    esac
}

# ---- The benchmark (--bench) ------------------------------------------------------
if [ $bench = 1 ]; then
    qemu=${qemu:-11.1}
    kernel=${kernel:-6.12}
    daemons=${daemons:-vufsd rust legacy}
    fio_size=${fio_size:-256M}
    [ -x "$vufsd" ] || { echo "compare: no vufsd at $vufsd (--vufsd)" >&2; exit 2; }
    probe=${probe:-$(dirname "$vufsd")/tests/guest/vufs-probe}
    [ -x "$probe" ] || { echo "compare: no vufs-probe at $probe (--probe)" >&2; exit 2; }
    for d in $daemons; do
        case $d in
        vufsd|legacy) ;;
        rust) [ -n "${VUFS_BENCH_RUST:-}" ] || "$here/trixie-root.sh" > /dev/null ||
                  { echo "compare: no Debian 13 root for the Rust virtiofsd" >&2; exit 1; } ;;
        *) echo "compare: --daemons takes vufsd, rust and legacy, not '$d'" >&2; exit 2 ;;
        esac
    done
    # Each daemon as it starts by default (log level aside: info is vufsd's
    # default). $VUFS_BENCH_RUST and $VUFS_BENCH_LEGACY name other binaries of
    # the peers (the real-guest kit's, scripts/kit.sh).
    rust_bin=${VUFS_BENCH_RUST:-}
    [ -n "$rust_bin" ] || rust_bin="$here/trixie-run.sh --bind {dir} /usr/libexec/virtiofsd"
    bench_cmd() {
        case "$1" in
        vufsd) echo "$vufsd --socket-path {socket} --shared-dir {dir}" ;;
        rust) echo "$rust_bin" \
                   "--socket-path={socket} --shared-dir={dir} --sandbox=chroot" ;;
        legacy) echo "${VUFS_BENCH_LEGACY:-/usr/lib/qemu/virtiofsd} --socket-path={socket} -o source={dir}" ;;
        esac
    }
    reversed() { local r= d; for d in $1; do r="$d${r:+ $r}"; done; echo "$r"; }
    status=0
    # bench_run RUN DAEMON PASS: one guest boot; RUN is rROUND-ORDER, PASS single
    # (the five jobs and the metadata phases, --smp vCPUs) or numjobs (--numjobs
    # vCPUs and jobs).
    bench_run() {
        local run=$1 d=$2 pass=$3 q=1 cpus=$smp sampler
        local sets=(--set "FIO_SIZE=$fio_size" --set "FIO_RUNTIME=$fio_runtime"
                    --set "META_FILES=$meta_files" --set HOSTCPU=1)
        if [ "$pass" = numjobs ]; then
            cpus=$numjobs
            [ "$d" = vufsd ] && q=$vufsd_queues
            sets+=(--set "FIO_NUMJOBS=$numjobs" --set "BENCH_JOBS=numjobs")
        else
            sets+=(--set "BENCH_JOBS=randread-qd1 randwrite-qd1 randread-qd16 randwrite-qd16 seqread-1m meta")
        fi
        local name=$run-$d-$pass
        echo "== $name (qemu $qemu, linux $kernel, $cpus vCPUs, $q request queue(s))" >&2
        mkdir -p "$out/$name"
        HOSTCPU_SOCKET=$out/$name/vhost.sock "$here/hostcpu.sh" "$out/$name/shared/bench" \
            "$out/$name/hostcpu.log" &
        sampler=$!
        if "$here/run-guest.sh" --qemu "$qemu" --kernel "$kernel" --queues "$q" --smp "$cpus" \
            --backend "$(bench_cmd "$d")" --script "$here/scripts/fio-bench.sh" \
            --file "$probe:/bin/vufs-probe" "${sets[@]}" --rundir "$out/$name" \
            --timeout 3600 > "$out/$name.verdict" 2>&1; then
            :
        else
            status=1
        fi
        kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
        tail -n 1 "$out/$name.verdict" | grep 'run-guest:' >&2 || tail -n 3 "$out/$name.verdict" >&2
    }
    labels=
    for round in $(seq 1 "$rounds"); do
        for order in $orders; do
            list=$daemons
            [ "$order" = reverse ] && list=$(reversed "$daemons")
            labels="$labels r$round-$order"
            for pass in single numjobs; do
                [ "$pass" = numjobs ] && [ "$numjobs" -le 1 ] && continue
                for d in $list; do
                    bench_run "r$round-$order" "$d" "$pass"
                done
            done
        done
    done
    # The table: one row per job, a column per daemon and order, vufsd's ratio to
    # the better peer per order.
    "${VUFS_PYTHON:-/usr/bin/python3}" - "$out" "$labels" "$daemons" "$qemu" "$kernel" "$smp" "$numjobs" \
        "$vufsd_queues" "$fio_size" "$fio_runtime" "$meta_files" <<'PY' | tee "$out/summary.md"
import glob, os, re, statistics, sys
out, runs, daemons = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
qemu, kernel, smp, numjobs, vq, size, rt, meta = sys.argv[4:12]
val = {}   # (run, daemon, job) -> number
ops = {}   # (run, daemon, meta job) -> operations done
ticks = {} # (run, daemon, job) -> (daemon, VMM) CPU clock ticks in the phase
hz = os.sysconf("SC_CLK_TCK")
for run in runs:
    for d in daemons:
        for p in ("single", "numjobs"):
            base = os.path.join(out, f"{run}-{d}-{p}")
            log = os.path.join(base, "output.log")
            if not os.path.exists(log):
                continue
            text = open(log, errors="replace").read()
            for m in re.finditer(r"VUFS-BENCH job=(\S+) read_iops=(\S*) write_iops=(\S*)", text):
                job, r, w = m.group(1), float(m.group(2) or 0), float(m.group(3) or 0)
                val[(run, d, job)] = r + w
            for m in re.finditer(r"VUFS-META phase=(\S+) n=(\d+) seconds=\S+ ops_per_s=(\S+)", text):
                val[(run, d, "meta-" + m.group(1))] = float(m.group(3))
                ops[(run, d, "meta-" + m.group(1))] = int(m.group(2))
            # tests/guest/hostcpu.sh: CPU ticks at each phase mark.
            marks = []
            hc = os.path.join(base, "hostcpu.log")
            for line in open(hc) if os.path.exists(hc) else []:
                f = dict(kv.split("=", 1) for kv in line.split())
                marks.append((f["mark"].split(".", 1)[1], int(f["daemon_ticks"]),
                              int(f["vmm_ticks"])))
            for (name, d0, v0), (_, d1, v1) in zip(marks, marks[1:]):
                # (a phase whose closing sample found the processes gone, or
                # that shared a sample with its opening mark, was not measured)
                if name != "idle" and d1 >= d0 and v1 > v0:
                    ticks[(run, d, name)] = (d1 - d0, v1 - v0)
jobs = []
for k in val:
    if k[2] not in jobs:
        jobs.append(k[2])
order_of = ["randread-qd1", "randwrite-qd1", "randread-qd16", "randwrite-qd16", "seqread-1m",
            "meta-create", "meta-stat", "meta-unlink"]
jobs.sort(key=lambda j: (order_of.index(j) if j in order_of else len(order_of), j))
peers = [d for d in daemons if d != "vufsd"]
compare = "vufsd" in daemons and peers

def cpu_us(run, d, j):
    """(daemon, VMM) host CPU microseconds per operation of one run's job."""
    t, v = ticks.get((run, d, j)), val.get((run, d, j))
    n = ops.get((run, d, j), v * float(rt) if v else None)
    return tuple(1e6 * x / hz / n for x in t) if t and n else None

def med(xs):
    return statistics.median(xs) if xs else None

def vals(d, j):
    """Daemon d's number for job j in every run that has one."""
    return [val[(r, d, j)] for r in runs if (r, d, j) in val]

def best_peer(j):
    """The peer with the best median for job j."""
    return max(peers, key=lambda p: med(vals(p, j)) or 0)

def table(cols):
    """The header and separator of a table with a job column and cols."""
    head = "| job |" + "".join(f" {c} |" for c in cols)
    print(head)
    print("|---|" + "---|" * len(cols))

# The accelerator each boot had (run-guest.sh writes it in RUNDIR/stack).
accels = set()
for st in glob.glob(os.path.join(out, "*", "stack")):
    m = re.search(r"\((tcg|kvm)\)", open(st).read())
    if m:
        accels.add(m.group(1).upper())
accel = "/".join(sorted(accels)) or "TCG"
print(f"# Real guest: Linux {kernel} under QEMU {qemu} ({accel}), each daemon with its defaults\n")
print(f"fio O_DIRECT, {size} file, {rt} s per job; metadata: {meta} files; {smp} vCPUs, "
      f"every daemon behind one request queue, the single jobs and the metadata phases on the "
      f"vCPU that does not take the request queue's interrupt; the -x{numjobs} jobs: "
      f"{numjobs} vCPUs, a job on each, vufsd behind {vq} request queues, the others one. "
      f"{len(runs)} runs of each daemon ({', '.join(runs)}), one guest boot each. "
      "IOPS (seqread: 1 MiB requests/s; meta: ops/s), median (min-max) over the runs.\n")
table(daemons + (["vufsd / best peer (medians)", "runs vufsd >= best peer"] if compare else []))
for j in jobs:
    row = f"| {j} |"
    for d in daemons:
        xs = vals(d, j)
        row += f" {med(xs):.0f} ({min(xs):.0f}-{max(xs):.0f}) |" if xs else " - |"
    if compare:
        v = med(vals("vufsd", j))
        best = med(vals(best_peer(j), j))
        won = [val[(r, "vufsd", j)] >= max(val.get((r, p, j), 0) for p in peers)
               for r in runs if (r, "vufsd", j) in val]
        row += f" {v / best:.2f} |" if v and best else " - |"
        row += f" {sum(won)} of {len(won)} |"
    print(row)

# Host CPU per operation: what each phase cost the daemon and the VMM (under
# TCG the VMM's time is the guest's: its vCPUs are QEMU threads).
if ticks:
    print("\nHost CPU per operation (us), daemon + VMM, medians over the runs "
          "(tests/guest/hostcpu.sh). Bound, where the CPUs are the limit: against a "
          "daemon costing d + v, one that cost nothing would go at most (d + v) / v as "
          "fast at the same CPU use; the last column takes the better peer's (by median "
          "IOPS).\n")
    table(daemons + (["bound: at most this x the better peer"] if compare else []))
    for j in jobs:
        row = f"| {j} |"
        cost = {}
        for d in daemons:
            xs = [c for c in (cpu_us(r, d, j) for r in runs) if c]
            if xs:
                cost[d] = (med([x[0] for x in xs]), med([x[1] for x in xs]))
                row += f" {cost[d][0]:.0f} + {cost[d][1]:.0f} |"
            else:
                row += " - |"
        if compare:
            best = best_peer(j)
            dd, vv = cost.get(best, (None, None))
            row += f" {(dd + vv) / vv:.2f} ({best}) |" if vv else " - |"
        print(row)

# Every run.
print("\nEvery run:\n")
table([f"{r}: {d}" for r in runs for d in daemons])
for j in jobs:
    row = f"| {j} |"
    for r in runs:
        for d in daemons:
            v = val.get((r, d, j))
            row += f" {v:.0f} |" if v is not None else " - |"
    print(row)
print(f"\nLogs: {out}")
PY
    exit $status
fi

daemons=${daemons:-vufsd legacy}
fio_size=${fio_size:-256M}
case " $only " in *" posix "*) [ -x "${suite:-}" ] || { echo "compare: --suite PATH to posix_suite is needed" >&2; exit 2; } ;; esac

status=0
declare -A verdict
for d in $daemons; do
    for s in $only; do
        args=(--backend "$(backend_cmd "$d")" --rundir "$out/$d-$s" --timeout 900)
        case $s in
        posix) args+=(--script "$here/scripts/posix.sh" --file "$suite" --min-sums 1)
               # The legacy daemon has no FUSE_TMPFILE (the 6.1 guest sends it).
               [ "$d" = legacy ] && args+=(--set POSIX_XFAIL=o_tmpfile_linkat) ;;
        fio) args+=(--script "$here/scripts/fio-verify.sh" --set "FIO_SIZE=$fio_size" --min-sums 3) ;;
        esac
        echo "== $d: $s" >&2
        if "$here/run-guest.sh" "${args[@]}" > "$out/$d-$s.verdict" 2>&1; then
            verdict[$d-$s]=PASS
        else
            verdict[$d-$s]=FAIL
            status=1
        fi
        tail -n 1 "$out/$d-$s.verdict" | grep 'run-guest:' >&2 || tail -n 3 "$out/$d-$s.verdict" >&2
    done
done

field() { # field FILE REGEX: first match's group 1
    sed -n "s/$2/\\1/p" "$1" 2>/dev/null | head -n 1
}

{
    echo "# vufsd vs legacy virtiofsd (cache=$cache, fio size $fio_size)"
    echo
    printf '| item |'; for d in $daemons; do printf ' %s |' "$d"; done; echo
    printf '|---|'; for d in $daemons; do printf -- '---|'; done; echo
    for s in $only; do
        printf '| %s run |' "$s"; for d in $daemons; do printf ' %s |' "${verdict[$d-$s]:-}"; done; echo
        printf '| %s boot-to-mount (s) |' "$s"
        for d in $daemons; do
            printf ' %s |' "$(field "$out/$d-$s/output.log" '.*VUFS-GUEST-MOUNTED uptime=\([0-9.]*\).*')"
        done
        echo
    done
    case " $only " in *" posix "*)
        first=$(echo "$daemons" | cut -d' ' -f1)
        for c in $("$suite" -l); do
            printf '| posix %s |' "$c"
            for d in $daemons; do
                r=$(grep -a -o -E "^(PASS|FAIL|XFAIL) $c([: ].*)?" "$out/$d-posix/output.log" 2>/dev/null |
                    head -n 1 | tr -d '\r' | cut -c1-70)
                printf ' %s |' "${r:-not run}"
            done
            echo
        done
        printf '| posix summary |'
        for d in $daemons; do
            printf ' %s |' "$(grep -a -o '^[0-9]* passed, [0-9]* failed[^(]*' "$out/$d-posix/output.log" 2>/dev/null | head -n 1)"
        done
        echo
        : "$first" ;;
    esac
    case " $only " in *" fio "*)
        for j in randwrite-psync randread-psync randwrite-libaio randread-libaio seqread-1m control-read; do
            printf '| fio %s |' "$j"
            for d in $daemons; do
                l=$(grep -a -o "VUFS-FIO job=$j [^[:cntrl:]]*" "$out/$d-fio/output.log" 2>/dev/null | head -n 1)
                printf ' %s |' "${l#VUFS-FIO job=$j }"
            done
            echo
        done ;;
    esac
    echo
    echo "Logs: $out"
} | tee "$out/summary.md"
exit $status
}
