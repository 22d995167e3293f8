#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The host's side of a benchmark phase: how much CPU the daemon and the VMM
# spent while the guest ran it.
#
#   HOSTCPU_SOCKET=SOCK hostcpu.sh MARKDIR OUT
#
# The guest script marks each phase by creating MARKDIR/.phase.SEQ.NAME in the
# share (a CREATE reaches the daemon at once; a write could wait in the guest's
# page cache). At every new mark this script appends to OUT
#   mark=SEQ.NAME t=SECONDS daemon_ticks=D vmm_ticks=V
# where D and V are the utime+stime clock ticks (/proc/PID/stat) summed over
# the processes whose command line holds SOCK (every daemon and VMM names its
# vhost-user socket there): the VMM is the qemu-system-* process, the daemon
# every other (its sandbox's keeper and serving process; the wrappers that
# only wait cost nothing). The socket comes in the environment so that this
# script is not one of them. Once a mark is sampled it answers with an empty
# MARKDIR/.ack.SEQ, which the guest waits for (fio-bench.sh with HOSTCPU=1):
# the sample then comes before the phase starts, and the last one before the
# guest shuts down and its daemon exits. Runs until killed.
{
set -u
sock=${HOSTCPU_SOCKET:?HOSTCPU_SOCKET names the vhost-user socket}
markdir=$1 out=$2

sample() { # the CPU ticks now
    local d=0 v=0 f pid stat rest comm
    for f in $(grep -laF -- "$sock" /proc/[0-9]*/cmdline 2>/dev/null); do
        pid=${f#/proc/}; pid=${pid%/cmdline}
        read -r stat 2>/dev/null < "/proc/$pid/stat" || continue
        comm=${stat#*(}; comm=${comm%)*}
        rest=${stat##*) }
        # shellcheck disable=SC2086
        set -- $rest  # $1 is field 3 (state): utime is field 14, stime 15
        case $comm in
        qemu-system-*) v=$((v + ${12} + ${13})) ;;
        *) d=$((d + ${12} + ${13})) ;;
        esac
    done
    echo "t=$(date +%s.%N) daemon_ticks=$d vmm_ticks=$v"
}

: > "$out"
last=0
while :; do
    # Every mark not yet seen, in order; marks that came together share a sample.
    # The names come from the guest: only SEQ.NAME with a number and a plain name.
    new=$(cd "$markdir" 2>/dev/null && ls -1 .phase.* 2>/dev/null | cut -d. -f3- |
          awk -F. -v last="$last" 'NF == 2 && $1 ~ /^[0-9]+$/ && $2 ~ /^[A-Za-z0-9_-]+$/ &&
                                  $1 + 0 > last + 0' | sort -t. -k1,1n)
    if [ -n "$new" ]; then
        line=$(sample)
        for m in $new; do
            echo "mark=$m ${line}" >> "$out"
            last=${m%%.*}
        done
        : > "$markdir/.ack.$last"
    fi
    sleep 0.1
done
}
