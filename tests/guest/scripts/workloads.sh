#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest half of tests/guest/workloads-host.sh: real workloads on the share, each
# under every guest mount in CONFIGS in turn, in this boot (the share is
# remounted between them):
#   always   mount -o dax=always (every file through the window)
#   default  no option: per-file DAX, the daemon's --dax-policy decides
#   never    mount -o dax=never (no window)
# Workloads (WORKLOADS, any of):
#   sqlite   Debian's sqlite3 on wl/db.sqlite (laid out by the host, a size that
#            is not a multiple of 2 MiB): random point reads by primary key
#            (reads), the same through SQLite's mmap (mreads), updates by
#            primary key each in its own transaction (updates), and in one
#            transaction (batch), caches dropped before each; the id lists are
#            the host's (wl/sql/), the same for every configuration
#   tree     a source tree of small files (wl/tree): grep -r and tar c | wc -c,
#            caches dropped first; match count and tar size checked against the
#            host's
#   stress   stress-ng's file stressors with --verify in a directory of the
#            guest's own, vufs-resize (RESIZE_OPS > 0) on a file of its own, a
#            numbered log appended to; with CHURN=1 the host is told to change
#            wl/churn/* meanwhile (it truncates, extends, writes, punches holes
#            and copytruncates them) while the guest reads them with read() and
#            through mappings
# After the last configuration: PRAGMA integrity_check (must say ok) and the
# table's SHA3 (sha3_query), which the host compares with the file it has.
# Output, one line per phase:
#   VUFS-WL config=C workload=W phase=P status=ok|fail seconds=S [dax=yes|no] [...]
# Settings: CONFIGS, WORKLOADS, STRESS_SECONDS (default 20), RESIZE_OPS (0),
# CHURN (0), PHASE_TIMEOUT (s, default 900); from the host (wl/sql/settings):
# SQL_READS and SQL_READ_BYTES, TREE_MATCHES, TREE_TAR_BYTES and TREE_SAMPLE
# (a file of the tree large enough for --dax-policy auto).
MNT=$1
CONFIGS="always default never"
WORKLOADS="sqlite tree stress"
STRESS_SECONDS=20
RESIZE_OPS=0
CHURN=0
PHASE_TIMEOUT=900
TREE_MATCHES=
TREE_TAR_BYTES=
TREE_SAMPLE=
[ -f /run/settings ] && . /run/settings
# The workload tools (run-guest.sh --workload-tools). GNU tar and grep by
# their paths: busybox's sh runs its own applets of those names whatever PATH
# says.
PATH=$PATH:/usr/local/bin
export PATH
GREP=/usr/local/bin/grep
TAR=/usr/local/bin/tar
WL=$MNT/wl
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk "BEGIN { printf \"%.2f\", $(now) - $1 }"; }

for t in sqlite3 stress-ng; do
    command -v $t > /dev/null || { echo "FAIL: no $t in the guest (run-guest.sh --workload-tools)"; exit 1; }
done
$GREP --version | head -n 1 | grep -q GNU || { echo "FAIL: $GREP is not GNU grep"; exit 1; }
$TAR --version | head -n 1 | grep -q GNU || { echo "FAIL: $TAR is not GNU tar"; exit 1; }
echo "tools: sqlite3 $(sqlite3 --version | cut -d' ' -f1), $(stress-ng --version | cut -d' ' -f1-3), $($TAR --version | head -n 1), $($GREP --version | head -n 1)"

mount_cfg() { # mount_cfg CONFIG
    case $1 in
    always) opts=dax=always ;;
    never) opts=dax=never ;;
    default) opts= ;;
    *) echo "unknown configuration $1"; return 1 ;;
    esac
    cd /
    # A process that just ended may still be leaving (busybox's timeout
    # watcher polls once a second): a few tries.
    n=0
    until umount "$MNT" 2> /tmp/umount.err; do
        n=$((n + 1))
        [ $n -lt 10 ] || { fail "umount: $(cat /tmp/umount.err)"; return 1; }
        sleep 1
    done
    mount -t virtiofs ${opts:+-o "$opts"} myfs "$MNT" || { fail "mount ${opts:-(default)}"; return 1; }
    echo "== configuration $1: $(grep " $MNT " /proc/mounts)"
}

is_dax() { vufs-probe is-dax "$1" 2>/dev/null || echo "?"; }

# phase CONFIG WORKLOAD PHASE CMD...: runs CMD from / (output in
# /tmp/phase.out); it passes when it exits 0 and, with $want set, its output's
# last line is $want. Prints its VUFS-WL line (plus $extra).
phase() {
    pc=$1 pw=$2 pp=$3
    shift 3
    t0=$(now)
    (cd / && exec timeout -s KILL "$PHASE_TIMEOUT" "$@") > /tmp/phase.out 2>&1
    prc=$?
    secs=$(since "$t0")
    st=ok
    if [ $prc != 0 ]; then
        st=fail
        fail "$pc $pw $pp: exit status $prc: $(grep -v '^$' /tmp/phase.out | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
    elif [ -n "$want" ] && [ "$(tail -n 1 /tmp/phase.out)" != "$want" ]; then
        st=fail
        fail "$pc $pw $pp: got '$(tail -n 1 /tmp/phase.out | cut -c1-200)', the host expects '$want'"
    fi
    echo "VUFS-WL config=$pc workload=$pw phase=$pp status=$st seconds=$secs${extra:+ $extra}"
    extra= want=
}
want=

run_sqlite() { # run_sqlite CONFIG
    c=$1
    db=$WL/db.sqlite
    dax=$(is_dax "$db")
    for p in reads mreads; do
        # The host's ids, one lookup each, in its order; mreads through
        # SQLite's mmap (PRAGMA mmap_size) instead of pread.
        mm=0
        [ $p = mreads ] && mm=1073741824
        {
            echo "PRAGMA mmap_size=$mm;"
            cat /tmp/sql/read-ids.sql
            echo "SELECT 'VUFS-SQL-READ', count(*), sum((SELECT length(v) FROM t WHERE id = q.k)) FROM q;"
        } > /tmp/reads.sql
        drop
        extra="dax=$dax" want="VUFS-SQL-READ|$SQL_READS|$SQL_READ_BYTES"
        phase "$c" sqlite $p sqlite3 -bail -batch "$db" ".read /tmp/reads.sql"
    done
    drop
    extra="dax=$dax"
    phase "$c" sqlite updates sqlite3 -bail -batch "$db" ".read /tmp/sql/updates.sql"
    if [ -s /tmp/sql/batch.sql ]; then
        drop
        extra="dax=$dax"
        phase "$c" sqlite batch sqlite3 -bail -batch "$db" ".read /tmp/sql/batch.sql"
    fi
    [ ! -e "$db-journal" ] || fail "$c sqlite: a journal was left behind"
}

run_tree() { # run_tree CONFIG
    c=$1
    [ -d "$WL/tree" ] || { fail "no tree"; return; }
    drop
    want=$TREE_MATCHES
    phase "$c" tree grep sh -c "set -o pipefail; cd $WL/tree && $GREP -r -o -I 'vufs_needle_[0-9]*' . | wc -l"
    drop
    want=$TREE_TAR_BYTES
    phase "$c" tree tar sh -c "set -o pipefail; cd $WL/tree && $TAR c --numeric-owner . | wc -c"
    [ -z "$TREE_SAMPLE" ] ||
        echo "tree: $TREE_SAMPLE ($(stat -c %s "$WL/tree/$TREE_SAMPLE") bytes) is $(is_dax "$WL/tree/$TREE_SAMPLE")"
}

# The guest's readers of the files the host changes (CHURN=1): read() must
# give data or a short count, never an error; a mapped access past what the
# file holds may raise SIGBUS in the reader (a local file system does too)
# and only counts.
churn_readers() {
    end=$(($(cut -d. -f1 /proc/uptime) + STRESS_SECONDS))
    rerr=0 rounds=0
    while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
        for f in "$WL"/churn/h*; do
            [ -f "$f" ] || continue
            cat "$f" > /dev/null 2> /tmp/cat.err || { rerr=$((rerr + 1)); head -n 1 /tmp/cat.err; }
            vufs-resize --map-read "$f" > /dev/null 2>&1
        done
        rounds=$((rounds + 1))
    done
    echo "rounds=$rounds read_errors=$rerr"
    [ $rerr = 0 ]
}

run_stress() { # run_stress CONFIG
    c=$1
    d=$WL/stress-$c
    rm -rf "$d"
    mkdir -p "$d"
    if [ "$CHURN" = 1 ]; then
        : > "$WL/.churn-go"
        churn_readers > /tmp/readers.out 2>&1 &
        readers=$!
    fi
    resize=
    if [ "$RESIZE_OPS" -gt 0 ]; then
        vufs-resize --ops "$RESIZE_OPS" --seed 7 "$d/resize" > /tmp/resize.out 2>&1 &
        resize=$!
    fi
    # The log the guest appends to: every line must reach the host.
    (i=0; end=$(($(cut -d. -f1 /proc/uptime) + STRESS_SECONDS))
     while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
         i=$((i + 1)); echo "line $i of the guest's log" >> "$d/guest.log" || exit 1; sleep 0.05
     done) &
    logger=$!
    # File sizes: whole 2 MiB ranges and not.
    extra=
    phase "$c" stress stress-ng stress-ng --temp-path "$d" --verify --metrics-brief \
        --timeout "${STRESS_SECONDS}s" \
        --hdd 1 --hdd-bytes 6M --hdd-write-size 4k --hdd-opts wr-rnd,rd-rnd \
        --mmap 1 --mmap-file --mmap-bytes 4M \
        --msync 1 --msync-bytes 5M \
        --fallocate 1 --fallocate-bytes 8M \
        --seek 1 --seek-size 7M --seek-punch \
        --iomix 1 --iomix-bytes 6M
    sed -n 's/^stress-ng: metrc: \[[0-9]*\] \([a-z]*\) *\([0-9]\+\) .* \([0-9.]\+\) \+[0-9.]\+ *$/VUFS-WL-STRESS config='"$c"' stressor=\1 bogo_ops=\2 ops_per_s=\3/p' \
        /tmp/phase.out
    grep -E 'fail|error|verif' /tmp/phase.out | head -n 5
    wait $logger || fail "$c stress: appending to the guest's log failed"
    echo "VUFS-SUM $(sha256sum "$d/guest.log" | cut -d' ' -f1) wl/stress-$c/guest.log"
    if [ -n "$resize" ]; then
        wait $resize
        rrc=$?
        tail -n 12 /tmp/resize.out
        echo "VUFS-WL config=$c workload=stress phase=resize status=$([ $rrc = 0 ] && echo ok || echo fail) ops=$RESIZE_OPS"
        [ $rrc = 0 ] || fail "$c stress: vufs-resize failed"
        [ $rrc = 0 ] && echo "VUFS-SUM $(sha256sum "$d/resize" | cut -d' ' -f1) wl/stress-$c/resize"
    fi
    if [ "$CHURN" = 1 ]; then
        wait $readers
        crc=$?
        cat /tmp/readers.out
        rm -f "$WL/.churn-go"
        echo "VUFS-WL config=$c workload=stress phase=churn-readers status=$([ $crc = 0 ] && echo ok || echo fail) $(tail -n 1 /tmp/readers.out)"
        [ $crc = 0 ] || fail "$c stress: reading the files the host changes failed"
    fi
}

[ -f "$WL/settings" ] && . "$WL/settings"
# The id lists, read once under the first mount (they are small files: never
# DAX there), so every configuration runs the same statements.
if [ -d "$WL/sql" ]; then
    cp -r "$WL/sql" /tmp/sql || { echo "FAIL: cannot copy the host's SQL"; exit 1; }
fi
# Workload by workload, each under every configuration in turn, so that one
# configuration that breaks the VM loses the least.
for w in $WORKLOADS; do
    for c in $CONFIGS; do
        mount_cfg "$c" || continue
        case $w in
        sqlite) run_sqlite "$c" ;;
        tree) run_tree "$c" ;;
        stress) run_stress "$c" ;;
        *) fail "unknown workload $w" ;;
        esac
    done
done

case " $WORKLOADS " in
*" sqlite "*)
    # The end state: SQLite's own check, and the table's hash for the host.
    ic=$(sqlite3 -batch "$WL/db.sqlite" 'PRAGMA integrity_check;' 2>&1 | head -n 5 | tr '\n' ' ')
    [ "$ic" = "ok " ] || fail "PRAGMA integrity_check: $ic"
    sum=$(sqlite3 -batch "$WL/db.sqlite" "SELECT hex(sha3_query('SELECT id, n, v FROM t ORDER BY id'));" 2>&1)
    echo "VUFS-WL-DB integrity=${ic% } sha3=$sum size=$(stat -c %s "$WL/db.sqlite")"
    ;;
esac
echo "workloads.sh: $fails failure(s)"
exit $fails
