#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Real workloads in a real guest through vufsd's DAX window: QEMU 11.1's
# generic device, Linux 6.1 (or --kernel 6.12), one boot running
# tests/guest/scripts/workloads.sh under each guest mount of --configs
# (always: -o dax=always, default: per-file DAX by the daemon's --dax-policy,
# never: -o dax=never). This script lays out the share and checks what the
# guest left:
#   sqlite  a database of --db-mb MiB made by the host's sqlite3 (table
#           t(id INTEGER PRIMARY KEY, n, v BLOB), rows of 600 random bytes; its
#           size never a multiple of 2 MiB), the ids the guest reads and updates
#           (the same lists for every configuration). Afterwards the host's
#           PRAGMA integrity_check must say ok, the table's SHA3 must be the one
#           the guest printed, and every row's n must count exactly the updates
#           the guest ran on it (no update lost).
#   tree    --tree-files small files of a source tree's size distribution
#           (median about 4 KiB, a few past 1 MiB), with a known number of
#           needles for grep; the host's GNU grep and tar give the answers.
#   stress  stress-ng's file stressors with --verify, vufs-resize
#           (--resize-ops), a log appended by the guest (checked by checksum);
#           --churn: meanwhile host processes truncate, extend, write, punch
#           holes in and copytruncate wl/churn/h0..h3, which the guest reads.
# The run passes when the guest reports no failure, the host's checks agree,
# and QEMU ends by itself with status 0.
#
#   workloads-host.sh VUFSD PROBE RESIZE [options] [-- run-guest.sh options]
#     --window MB        DAX window (default 64; QEMU 11.1: a power of two <= 512)
#     --policy P         vufsd --dax-policy (default auto)
#     --configs LIST     comma-separated, run in this order (default always,default,never)
#     --workloads LIST   comma-separated: sqlite,tree,stress (default all three)
#     --db-mb N          database size in MiB (default 300)
#     --reads N          point reads per configuration (default 20000)
#     --updates N        updates, each its own transaction (default 500)
#     --batch N          updates in one transaction (default 5000; 0: none)
#     --tree-files N     files in the tree (default 3000)
#     --stress-seconds N per configuration (default 20)
#     --resize-ops N     vufs-resize operations in the stress phase (default 0)
#     --churn            the host changes wl/churn/* while the stress phase runs
#     --kernel 6.1|6.12  the guest kernel (default 6.1)
#     --data DIR         cache of the database and the tree between runs
#                        (default ${VUFS_GUEST_LOGS:-/tmp}/vufs-wl-data)
#     --rundir DIR       logs (default a new ${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.*)
#     --out FILE         append every VUFS-WL line, prefixed with the window and
#                        the policy, to FILE
#     --timeout SEC      the whole boot (default 3000)
# Exit status 0 PASS, 1 FAIL, 2 usage.
{
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 3 ] || { sed -n '4,/^{$/p' "$0" | sed '$d' >&2; exit 2; }
vufsd=$1 probe=$2 resize=$3
shift 3
window=64 policy=auto configs=always,default,never workloads=sqlite,tree,stress
db_mb=300 reads=20000 updates=500 batch=5000 tree_files=3000 stress_seconds=20
resize_ops=0 churn=0 kseries=6.1 data=${VUFS_GUEST_LOGS:-/tmp}/vufs-wl-data rundir= out=
timeout=3000
while [ $# -gt 0 ]; do
    case "$1" in
    --window) window=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --db-mb) db_mb=$2; shift 2 ;;
    --reads) reads=$2; shift 2 ;;
    --updates) updates=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --tree-files) tree_files=$2; shift 2 ;;
    --stress-seconds) stress_seconds=$2; shift 2 ;;
    --resize-ops) resize_ops=$2; shift 2 ;;
    --churn) churn=1; shift ;;
    --kernel) kseries=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --rundir) rundir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "workloads-host: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "workloads-host: $*"; }
has() { case ",$workloads," in *",$1,"*) return 0 ;; esac; return 1; }
for t in sqlite3 tar grep python3 fallocate; do
    command -v $t > /dev/null || { log "FAIL: $t not found on the host (scripts/deps.sh)"; exit 1; }
done
[ -n "$rundir" ] || rundir=$(mktemp -d "${VUFS_GUEST_LOGS:-/tmp}/vufs-guest.XXXXXX")
mkdir -p "$rundir" "$data"
rundir=$(cd "$rundir" && pwd)
share=$rundir/share
rm -rf "$share"
mkdir -p "$share/wl/sql"
settings=$share/wl/settings
: > "$settings"
exec 8> "$data/.lock"
flock 8   # two runs never build the same cache at once

# ---- the database, its id lists and the answers
vlen=600
if has sqlite; then
    db=$data/db-${db_mb}M.sqlite
    if [ ! -s "$db" ]; then
        log "making a database of about $db_mb MiB ($db)"
        # About 6 rows of 600 bytes per 4 KiB page.
        rows=$((db_mb * 1048576 / 682))
        rm -f "$db.tmp"
        sqlite3 "$db.tmp" "PRAGMA page_size=4096; PRAGMA journal_mode=DELETE;
            CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, v BLOB NOT NULL);
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $rows)
            INSERT INTO t SELECT i, 0, randomblob($vlen) FROM c;" > /dev/null || exit 1
        # Real files are not whole 2 MiB ranges: nor is this one.
        while [ $(($(stat -c %s "$db.tmp") % 2097152)) = 0 ]; do
            sqlite3 "$db.tmp" "INSERT INTO t SELECT max(id) + 1, 0, randomblob($vlen) FROM t;"
        done
        mv "$db.tmp" "$db"
    fi
    rows=$(sqlite3 "$db" 'SELECT max(id) FROM t;')
    # The ids: fixed by the sizes, so every configuration and round gets the same.
    python3 - "$share/wl/sql" "$rows" "$reads" "$updates" "$batch" "$vlen" <<'EOF' || exit 1
import random, sys
d, rows, reads, updates, batch, vlen = sys.argv[1], *map(int, sys.argv[2:])
rnd = random.Random(21)
with open(d + "/read-ids.sql", "w") as f:
    f.write("CREATE TEMP TABLE q(k INTEGER);\n")
    ids = [rnd.randint(1, rows) for _ in range(reads)]
    for i in range(0, len(ids), 500):
        f.write("INSERT INTO q VALUES %s;\n" % ",".join("(%d)" % k for k in ids[i:i + 500]))
upd = "UPDATE t SET n = n + 1, v = randomblob(%d) WHERE id = %%d;\n" % vlen
with open(d + "/updates.sql", "w") as f, open(d + "/update-ids", "w") as g:
    for _ in range(updates):
        k = rnd.randint(1, rows)
        f.write(upd % k)
        g.write("%d\n" % k)
with open(d + "/batch.sql", "w") as f, open(d + "/batch-ids", "w") as g:
    if batch:
        f.write("BEGIN;\n")
        for _ in range(batch):
            k = rnd.randint(1, rows)
            f.write(upd % k)
            g.write("%d\n" % k)
        f.write("COMMIT;\n")
EOF
    cp "$db" "$share/wl/db.sqlite"
    echo "SQL_READS=$reads SQL_READ_BYTES=$((reads * vlen))" >> "$settings"
    log "database: $(stat -c %s "$share/wl/db.sqlite") bytes ($(( $(stat -c %s "$share/wl/db.sqlite") % 2097152 )) past the last whole 2 MiB range), $rows rows"
fi

# ---- the source tree and the answers
if has tree; then
    tree=$data/tree-$tree_files
    if [ ! -s "$tree.answers" ]; then
        log "making a tree of $tree_files files ($tree)"
        rm -rf "$tree" "$tree.answers"
        python3 - "$tree" "$tree_files" <<'EOF' || exit 1
import math, os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(5)
words = ["static", "int", "struct", "const", "char", "return", "if", "else", "for",
         "unsigned", "long", "void", "size_t", "uint64_t", "buf", "len", "ret", "err",
         "goto", "out", "inode", "fuse", "req", "reply", "node", "attr", "dax", "map"]
lines = []
for i in range(4000):
    k = rnd.randint(1, 12)
    ind = "    " * rnd.randint(0, 3)
    lines.append(ind + " ".join(rnd.choice(words) for _ in range(k)) +
                 rnd.choice([";", " {", "", " }", ");", " = %d;" % rnd.randint(0, 4096)]) + "\n")
corpus = "".join(lines)
for i in range(n):
    # Sizes like a source tree's: log-normal around 4.4 KiB, a few past 1 MiB;
    # file 0 is past what --dax-policy auto admits (512 KiB).
    size = 700 * 1024 + 123 if i == 0 else int(min(2.5e6, max(64, rnd.lognormvariate(math.log(4400), 1.6))))
    d = os.path.join(root, "d%02d" % (i // 400), "s%02d" % (i // 20 % 20))
    os.makedirs(d, exist_ok=True)
    start = rnd.randrange(len(corpus))
    text = (corpus[start:] + corpus) * (size // len(corpus) + 2)
    text = text[:size]
    parts = text.split("\n")
    for _ in range(rnd.randint(0, 3)):
        j = rnd.randrange(len(parts))
        parts[j] += " /* vufs_needle_%d */" % rnd.randint(0, 999)
    ext = rnd.choice([".c", ".h", ".c", ".py", ".txt", ".md"])
    with open(os.path.join(d, "f%05d%s" % (i, ext)), "w") as f:
        f.write("\n".join(parts))
for dp, dn, fn in os.walk(root):
    for x in fn + dn:
        os.utime(os.path.join(dp, x), (1700000000, 1700000000))
os.utime(root, (1700000000, 1700000000))
EOF
        matches=$(cd "$tree" && grep -r -o -I 'vufs_needle_[0-9]*' . | wc -l)
        tarb=$(cd "$tree" && tar c --numeric-owner . | wc -c)
        sample=$(cd "$tree" && find . -name 'f00000.*')
        echo "TREE_MATCHES=$matches TREE_TAR_BYTES=$tarb TREE_SAMPLE=$sample" > "$tree.answers"
    fi
    cp -a "$tree" "$share/wl/tree"
    cat "$tree.answers" >> "$settings"
    log "tree: $(find "$share/wl/tree" -type f | wc -l) files, $(du -sm "$share/wl/tree" | cut -f1) MiB; $(cat "$tree.answers")"
fi

# ---- the files the host changes
churn_pid=
if [ $churn = 1 ]; then
    mkdir -p "$share/wl/churn"
    head -c 6291456 /dev/urandom > "$share/wl/churn/h0"
    head -c 8388608 /dev/urandom > "$share/wl/churn/h1"
    head -c 5243904 /dev/urandom > "$share/wl/churn/h2"
    printf 'a log line\n%.0s' $(seq 1000) > "$share/wl/churn/h3"
    # While the guest says so (.churn-go): truncate to 0 and refill, resize up
    # and down (now and then to whole 2 MiB ranges), write inside, punch holes,
    # copytruncate as logrotate does. Counts in RUNDIR/churn.log.
    (
        trap 'echo "host changes: $n"; exit 0' TERM
        n=0
        while :; do
            if [ ! -e "$share/wl/.churn-go" ]; then sleep 0.2; continue; fi
            f=$share/wl/churn/h$((RANDOM % 4))
            case $((RANDOM % 7)) in
            0) : > "$f"; head -c $((RANDOM * 128)) /dev/urandom >> "$f" ;;
            1) truncate -s $((RANDOM * 256)) "$f" ;;
            2) truncate -s $(((RANDOM % 5) * 2097152)) "$f" ;;
            3) dd if=/dev/urandom of="$f" bs=4k seek=$((RANDOM % 2048)) count=$((1 + RANDOM % 64)) \
                   conv=notrunc status=none ;;
            4) fallocate -p -o $((RANDOM * 128)) -l $((4096 + RANDOM * 16)) "$f" 2> /dev/null ;;
            5) cp "$f" "$f.1" && truncate -s 0 "$f" && head -c $((RANDOM * 64)) /dev/urandom >> "$f" ;;
            6) head -c $((RANDOM * 32)) /dev/urandom >> "$f" ;;
            esac
            n=$((n + 1))
            sleep 0.0$((RANDOM % 10))
        done
    ) > "$rundir/churn.log" 2>&1 &
    churn_pid=$!
fi

stats=$rundir/dax-stats.json
guest_configs=${configs//,/ }
guest_workloads=${workloads//,/ }
"$here/run-guest.sh" --qemu 11.1 --vdev generic --kernel "$kseries" --rundir "$rundir" \
    --dir "$share" --keep --timeout "$timeout" --workload-tools --expect-qemu-exit0 \
    --backend "$vufsd --socket-path {socket} --shared-dir {dir} --tag myfs \
--dax-window ${window}M --dax-policy $policy --stats-file $stats --log-level info" \
    --script "$here/scripts/workloads.sh" \
    --file "$probe:/bin/vufs-probe" --file "$resize:/bin/vufs-resize" \
    --set "CONFIGS=$guest_configs" --set "WORKLOADS=$guest_workloads" \
    --set "STRESS_SECONDS=$stress_seconds" --set "RESIZE_OPS=$resize_ops" --set "CHURN=$churn" \
    "$@" > "$rundir/verdict" 2>&1
rc=$?
cat "$rundir/verdict"
if [ -n "$churn_pid" ]; then
    kill "$churn_pid" 2>/dev/null
    wait "$churn_pid" 2>/dev/null
    log "$(tail -n 1 "$rundir/churn.log")"
fi
grep -a -o 'VUFS-WL[-A-Z]* [^[:cntrl:]]*' "$rundir/output.log" > "$rundir/wl.txt"
cat "$rundir/wl.txt"
[ -z "$out" ] || sed "s/^/window=$window policy=$policy /" "$rundir/wl.txt" >> "$out"

# ---- what the guest left, seen from the host
fails=0
hfail() { log "FAIL: $*"; fails=$((fails + 1)); }
if has sqlite; then
    hdb=$share/wl/db.sqlite
    [ ! -e "$hdb-journal" ] || hfail "a hot journal was left in the share"
    ic=$(sqlite3 "$hdb" 'PRAGMA integrity_check;' 2>&1 | head -n 3 | tr '\n' ' ')
    [ "$ic" = "ok " ] || hfail "the host's PRAGMA integrity_check: $ic"
    hsum=$(sqlite3 "$hdb" "SELECT hex(sha3_query('SELECT id, n, v FROM t ORDER BY id'));")
    gsum=$(sed -n 's/.*VUFS-WL-DB .*sha3=\([0-9A-F]*\).*/\1/p' "$rundir/wl.txt" | tail -n 1)
    if [ -z "$gsum" ]; then
        hfail "the guest printed no checksum of the table"
    elif [ "$gsum" != "$hsum" ]; then
        hfail "the table's SHA3: guest $gsum, host $hsum"
    else
        log "the table's SHA3 matches the guest's ($hsum)"
    fi
    # Every update the guest ran is in the file: count the configurations whose
    # update phases all passed; with any failed, the counts cannot be known.
    nupd=0 nbad=0
    for c in $guest_configs; do
        if grep -q "config=$c workload=sqlite phase=updates status=ok" "$rundir/wl.txt" &&
            { [ "$batch" = 0 ] || grep -q "config=$c workload=sqlite phase=batch status=ok" "$rundir/wl.txt"; }; then
            nupd=$((nupd + 1))
        else
            nbad=$((nbad + 1))
        fi
    done
    if [ $nbad = 0 ]; then
        sqlite3 "$hdb" 'SELECT id, n FROM t WHERE n != 0;' > "$rundir/counts"
        python3 - "$share/wl/sql" "$nupd" "$rundir/counts" <<'EOF' || fails=$((fails + 1))
import collections, sys
d, k, counts = sys.argv[1], int(sys.argv[2]), sys.argv[3]
want = collections.Counter()
for name in ("update-ids", "batch-ids"):
    for line in open(d + "/" + name):
        want[int(line)] += k
got = {}
for line in open(counts):
    i, n = line.strip().split("|")
    got[int(i)] = int(n)
bad = [(i, want.get(i, 0), got.get(i, 0)) for i in set(want) | set(got) if want.get(i, 0) != got.get(i, 0)]
if bad:
    sys.exit("workloads-host: FAIL: %d rows do not count their updates (id, wanted, found): %s"
             % (len(bad), sorted(bad)[:5]))
print("workloads-host: every row counts its updates (%d updates in %d rows)" % (sum(want.values()), len(want)))
EOF
    else
        log "the update counts are not checked: $nbad configuration(s) did not finish their updates"
    fi
fi
if [ -s "$stats" ]; then
    log "window statistics: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); w=s.get("window", s); print(" ".join("%s=%s" % (k, w[k]) for k in ("maps", "unmaps", "map_errors", "unmap_errors", "ghost_hits") if k in w))' "$stats" 2>/dev/null)"
fi
if [ $rc != 0 ] || [ $fails != 0 ]; then
    log "FAIL (run-guest rc=$rc, host checks failed: $fails; logs in $rundir)"
    exit 1
fi
rm -rf "$share"
log "PASS"
exit 0
}
