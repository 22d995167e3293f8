#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Real workloads through the DAX window in a real guest (docs/dax.md, section
# 10): Linux 6.1 under QEMU 11.1 (TCG) with the generic vhost-user device and
# vufsd --dax-policy auto, one boot per window size and round, and in each boot
# every workload under the three guest mounts - mount -o dax=always, the
# default per-file mount (the daemon's auto policy decides) and dax=never -
# in an order that turns with the round (tests/guest/workloads-host.sh,
# tests/guest/scripts/workloads.sh):
#   SQLite   a database of DB_MB MiB (never a whole number of 2 MiB ranges):
#            READS random point reads by primary key through pread and through
#            SQLite's mmap, UPDATES updates each in its own transaction, BATCH
#            updates in one; integrity check and the table's checksum at the
#            end, compared by the host
#   tree     grep -r and tar c | wc -c over TREE_FILES small files
#   stress   stress-ng's file stressors with --verify for STRESS_SECONDS, with
#            host processes changing other files of the share (CHURN=1)
# A cell whose phase failed (an I/O error, a wrong answer, QEMU gone) shows
# "fail" instead of a time.
#
# usage: scripts/bench-dax-workloads.sh [BUILD_DIR] [OUT_DIR]
#   env: DB_MB (default 300), WINDOWS (MiB, powers of two <= 512, default
#        "512 128 64"), ROUNDS (default 1), READS (20000), UPDATES (500),
#        BATCH (5000), TREE_FILES (3000), STRESS_SECONDS (20), CHURN (1),
#        RESIZE_OPS (vufs-resize beside stress-ng, default 0), KERNEL (6.1),
#        REPORT_ONLY=1 (no boots: the tables again from OUT_DIR/wl.txt)
# OUT_DIR gets wl.txt (every VUFS-WL line, with window and round),
# dax-workloads.md (the tables), dax-workloads.json, and each boot's logs.
{
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-/tmp/vufs-dax-workloads}
db_mb=${DB_MB:-300}
windows=${WINDOWS:-512 128 64}
rounds=${ROUNDS:-1}
configs=(always default never)
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ "${REPORT_ONLY:-0}" != 1 ]; then
: > "$out/wl.txt"
for t in "$build/vufsd" "$build/tests/guest/vufs-probe" "$build/tests/guest/vufs-resize"; do
    [ -x "$t" ] || { echo "bench-dax-workloads: $t missing (meson compile -C $build" \
        "tests/guest/vufs-probe tests/guest/vufs-resize)" >&2; exit 2; }
done
echo "bench-dax-workloads: started $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee "$out/machine.txt"
churn=()
[ "${CHURN:-1}" = 1 ] && churn=(--churn)
for r in $(seq "$rounds"); do
    # The configurations' order turns with the round.
    k=$(((r - 1) % 3))
    order="${configs[k]},${configs[(k + 1) % 3]},${configs[(k + 2) % 3]}"
    for w in $windows; do
        log=$out/r$r-w$w
        rm -rf "$log"
        brc=0
        "$here/tests/guest/workloads-host.sh" "$build/vufsd" "$build/tests/guest/vufs-probe" \
            "$build/tests/guest/vufs-resize" --window "$w" --policy auto --configs "$order" \
            --db-mb "$db_mb" --reads "${READS:-20000}" --updates "${UPDATES:-500}" \
            --batch "${BATCH:-5000}" --tree-files "${TREE_FILES:-3000}" \
            --stress-seconds "${STRESS_SECONDS:-20}" --resize-ops "${RESIZE_OPS:-0}" \
            ${churn[@]+"${churn[@]}"} --kernel "${KERNEL:-6.1}" \
            --rundir "$log" --data "$out/data" --timeout 5400 > "$log.verdict" 2>&1 || brc=$?
        st=$(cat "$log/qemu.status" 2>/dev/null || echo unknown)
        echo "bench-dax-workloads: round $r window ${w}M ($order): workloads-host rc=$brc," \
            "QEMU status $st, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
        grep -a -o 'VUFS-WL[-A-Z]* [^[:cntrl:]]*' "$log/output.log" 2>/dev/null |
            sed "s/^/round=$r window=$w /" >> "$out/wl.txt" || true
        dbsize=$(sed -n 's/.*database: \([0-9]*\) bytes.*/\1/p' "$log.verdict" | head -n 1)
        echo "round=$r window=$w VUFS-WL-BOOT rc=$brc qemu_status=$st db_bytes=${dbsize:-0} order=$order" \
            >> "$out/wl.txt"
    done
done
echo "bench-dax-workloads: ended $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee -a "$out/machine.txt"
fi
python3 - "$out/wl.txt" "$out/dax-workloads.md" "$out/dax-workloads.json" <<'PY'
import json, re, statistics, sys
from collections import defaultdict
src, md, js = sys.argv[1:4]
def kv(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))
phases = defaultdict(list)   # (window, workload, phase, config) -> [seconds or None]
stress = defaultdict(list)   # (window, stressor, config) -> [ops/s]
dax = {}
boots, dbbytes = [], 0
for line in open(src):
    d = kv(line)
    if "VUFS-WL-BOOT" in line:
        boots.append(d)
        dbbytes = max(dbbytes, int(d.get("db_bytes", 0)))
    elif "VUFS-WL-STRESS" in line:
        stress[(int(d["window"]), d["stressor"], d["config"])].append(float(d["ops_per_s"]))
    elif "VUFS-WL " in line and "seconds" in d:
        key = (int(d["window"]), d["workload"], d["phase"], d["config"])
        phases[key].append(float(d["seconds"]) if d["status"] == "ok" else None)
        if "dax" in d:
            dax[(int(d["window"]), d["workload"], d["config"])] = d["dax"]
def med(v):
    ok = [x for x in v if x is not None]
    return None if not v or len(ok) < len(v) else statistics.median(ok)
cfgs = ("always", "default", "never")
names = {"always": "dax=always", "default": "default (auto)", "never": "dax=never"}
wins = sorted({k[0] for k in phases} | {k[0] for k in stress}, reverse=True)
rows = sorted({(k[1], k[2]) for k in phases},
              key=lambda x: (["sqlite", "tree", "stress"].index(x[0]) if x[0] in ("sqlite", "tree", "stress") else 9,
                             ["reads", "mreads", "updates", "batch", "grep", "tar", "stress-ng"].index(x[1])
                             if x[1] in ("reads", "mreads", "updates", "batch", "grep", "tar", "stress-ng") else 9))
res = {"db_bytes": dbbytes, "boots": boots, "phases": [], "stress": []}
o = []
o.append("Seconds per phase (median of %d round(s); fail: the phase failed), and "
         "dax=never's time over each (x > 1: faster than dax=never). Database: %d bytes "
         "(%.1f MiB).\n" % (max(1, len({b["round"] for b in boots})), dbbytes, dbbytes / 1048576))
o.append("| window (MiB) | / database | workload | phase | dax=always | default (auto) | dax=never "
         "| always / never | auto / never | DB on DAX (always, auto) |")
o.append("|---|---|---|---|---|---|---|---|---|---|")
for w in wins:
    for wl, ph in rows:
        m = {c: med(phases.get((w, wl, ph, c), [])) for c in cfgs}
        have = {c: (w, wl, ph, c) in phases for c in cfgs}
        cell = lambda c: ("%.2f" % m[c]) if m[c] is not None else ("fail" if have[c] else "-")
        ratio = lambda c: ("%.2fx" % (m["never"] / m[c])) if m[c] and m["never"] else "-"
        dd = "%s, %s" % (dax.get((w, wl, "always"), "-"), dax.get((w, wl, "default"), "-")) if wl == "sqlite" else ""
        o.append("| %d | %.2f | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            w, w * 1048576 / dbbytes if dbbytes else 0, wl, ph, cell("always"), cell("default"),
            cell("never"), ratio("always"), ratio("default"), dd))
        res["phases"].append({"window_mib": w, "workload": wl, "phase": ph,
                              "seconds": {c: m[c] for c in cfgs},
                              "runs": {c: phases.get((w, wl, ph, c), []) for c in cfgs}})
if stress:
    o.append("\nstress-ng bogo ops/s (real time), median; --verify on every stressor; "
             "fail (N): the run failed (its rate in brackets)\n")
    o.append("| window (MiB) | stressor | dax=always | default (auto) | dax=never |")
    o.append("|---|---|---|---|---|")
    for w in wins:
        for s in sorted({k[1] for k in stress if k[0] == w}):
            v = {c: stress.get((w, s, c)) for c in cfgs}
            # A run that failed its verification still prints its rates: marked.
            bad = {c: any(x is None for x in phases.get((w, "stress", "stress-ng", c), [])) for c in cfgs}
            o.append("| %d | %s | %s | %s | %s |" % (w, s, *[
                ("fail (%.1f)" if bad[c] else "%.1f") % statistics.median(v[c]) if v[c] else "-"
                for c in cfgs]))
            res["stress"].append({"window_mib": w, "stressor": s,
                                  "ops_per_s": {c: v[c] for c in cfgs}})
o.append("\nBoots: " + "; ".join("round %s window %s: workloads-host rc=%s, QEMU status %s" % (
    b.get("round"), b.get("window"), b.get("rc"), b.get("qemu_status")) for b in boots))
open(md, "w").write("\n".join(o) + "\n")
json.dump(res, open(js, "w"), indent=1)
PY
cat "$out/dax-workloads.md"
echo "bench-dax-workloads: tables in $out/dax-workloads.md, JSON in $out/dax-workloads.json"
exit 0
}
