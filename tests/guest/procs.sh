# SPDX-License-Identifier: GPL-2.0-or-later
#
# Sourced by the guest test harnesses (run-guest.sh, migrate-host.sh): how they
# stop what they started.

# stop_group PID: stops one process group (the legacy daemon forks into a pid
# namespace, so its children are only reachable through the group), politely
# first: SIGTERM, up to 5 s, then SIGKILL; reaps PID. An empty PID is a no-op.
stop_group() {
    local pid=$1 i
    [ -n "$pid" ] || return 0
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 50); do
        kill -0 -- "-$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
