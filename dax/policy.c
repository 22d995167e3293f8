/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Per-file DAX policy: which files get FUSE_ATTR_DAX.
 *
 * The problem (docs/dax.md, the published table): once the random working set of
 * the DAX files exceeds the window, every 4 KiB miss costs a 2 MiB reclaim plus a
 * REMOVEMAPPING and a SETUPMAPPING round trip, and DAX runs 4-20x slower than the
 * plain FUSE READ/WRITE path. When it fits, DAX is 5-10x faster. So 'auto':
 *
 *   1. Only regular files, and not tiny ones (DAX_POLICY_MIN_FILE_SIZE).
 *   2. Admission by demand: a file is admitted while the sizes (in whole 2 MiB
 *      ranges) of all admitted files fit DAX_POLICY_ADMIT_PCT of the window, the
 *      part a Linux guest keeps mapped. Files that fit never compete for ranges, so
 *      admitted files cannot thrash each other; files larger than that never get
 *      DAX.
 *   3. Revocation by thrash: an admitted file whose recent maps hit the ghost list
 *      (ranges removed not long ago) at DAX_POLICY_REVOKE_PCT or more, once it has
 *      DAX_POLICY_MIN_SAMPLES recent maps, loses DAX: the guest is evicting its
 *      ranges faster than it reuses them.
 *   4. Revocation by host changes: a file another process changed under its
 *      store mappings DAX_POLICY_HOST_CHANGES times recently loses DAX. Each
 *      change costs a merge (the file read back against the store), and the
 *      guest's plain path sees such a file as the host leaves it at no cost.
 *   5. Hysteresis: a revoked file comes back only when it fits again, the host
 *      left it alone recently, and both its own and the window's recent
 *      ghost-hit rate are under DAX_POLICY_READMIT_PCT
 *      (far below the revoke threshold, so a file on the edge does not flap).
 *      "Recent" counters halve every DAX_POLICY_PERIOD_SLOTS x nslots maps and
 *      every decay interval of wall time, so old thrash is forgotten.
 *
 * dax_policy_decide() is a pure function of the statistics; dax_policy_attr_dax()
 * gathers them, remembers the answer and keeps the demand accounting.
 */
#include <errno.h>
#include <string.h>

#include "dax_i.h"

/*
 * DAX_POLICY_MIN_FILE_SIZE = 512 KiB. A mapped 2 MiB range costs the guest 32 KiB of
 * struct page (512 pages x 64 bytes) and a whole range of the window, whatever the
 * file's size; the page cache would spend 64 bytes per cached 4 KiB page instead.
 * Below a quarter of a range the window would hold mostly holes (4x waste or
 * worse) and the struct page overhead passes 6% of the data, for files that the
 * page cache serves as well after their first read.
 *
 * DAX_POLICY_ADMIT_PCT = 80: admitted file sizes may fill 80% of the window. The
 * Linux guest kicks its reclaim worker whenever fewer than 20% of the ranges are
 * free (FUSE_DAX_RECLAIM_THRESHOLD = 20 in fs/fuse/dax.c) and evicts the oldest
 * idle ranges until 20% are free again, whether or not they are still in use. Data
 * beyond 80% of the window therefore keeps being evicted and re-mapped: the 4 GiB
 * window over a 4 GiB working set in the published table is in the slow column.
 *
 * DAX_POLICY_MIN_SAMPLES = 16 recent maps before a ratio counts: a few cold misses
 * of a file just opened must not look like thrash.
 *
 * DAX_POLICY_REVOKE_PCT = 25: one map in four re-maps a range removed within the
 * last window's worth of removals. At that rate the file spends more time in map
 * round trips (each ~tens of microseconds and a 2 MiB reclaim in the guest) than
 * DAX saves on 4 KiB accesses (a few microseconds each).
 *
 * DAX_POLICY_READMIT_PCT = 5: re-admission needs the thrash rate to fall to a fifth
 * of the revoke level.
 *
 * DAX_POLICY_PERIOD_SLOTS = 2: "recent" spans about twice the window's capacity in
 * maps, long enough to see a range come back after eviction.
 */

static uint64_t ranges_bytes(uint64_t size)
{
    if (size > UINT64_MAX - DAX_RANGE_SIZE)
        return UINT64_MAX & ~(DAX_RANGE_SIZE - 1);
    return (size + DAX_RANGE_SIZE - 1) & ~(DAX_RANGE_SIZE - 1);
}

static bool ratio_at_least(uint64_t part, uint64_t whole, unsigned pct)
{
    /* part * 100 >= whole * pct, without overflow for any u64 counters */
    return (__uint128_t)part * 100 >= (__uint128_t)whole * pct;
}

static bool thrashing(const struct dax_inode_stats *ino)
{
    return ino->recent_maps >= DAX_POLICY_MIN_SAMPLES &&
           ratio_at_least(ino->recent_ghost_hits, ino->recent_maps, DAX_POLICY_REVOKE_PCT);
}

static bool host_changing(const struct dax_inode_stats *ino)
{
    return ino->recent_host_changes >= DAX_POLICY_HOST_CHANGES;
}

static bool calm(uint64_t ghost_hits, uint64_t maps)
{
    return maps < DAX_POLICY_MIN_SAMPLES ||
           (__uint128_t)ghost_hits * 100 <= (__uint128_t)maps * DAX_POLICY_READMIT_PCT;
}

bool dax_policy_decide(const struct dax_policy_input *in)
{
    uint64_t need, others, budget;

    switch (in->policy) {
    case DAX_POLICY_NEVER:
        return false;
    case DAX_POLICY_ALWAYS:
        return in->is_regular && in->win.window_size > 0;
    case DAX_POLICY_AUTO:
        break;
    default:
        return false;
    }
    if (!in->is_regular || in->win.window_size == 0)
        return false;
    if (in->file_size < DAX_POLICY_MIN_FILE_SIZE)
        return false;

    need = ranges_bytes(in->file_size);
    others = in->win.admitted_bytes >= in->ino.admitted_bytes
                 ? in->win.admitted_bytes - in->ino.admitted_bytes
                 : 0;
    budget = (uint64_t)((__uint128_t)in->win.window_size * DAX_POLICY_ADMIT_PCT / 100);
    if (need > budget || others > budget - need)
        return false;

    if (in->ino.dax)
        return !thrashing(&in->ino) && !host_changing(&in->ino);
    if (in->ino.revoked)
        return in->ino.recent_host_changes == 0 &&
               calm(in->ino.recent_ghost_hits, in->ino.recent_maps) &&
               calm(in->win.recent_ghost_hits, in->win.recent_maps);
    return !host_changing(&in->ino);
}

bool dax_policy_attr_dax(struct dax_window *w, uint64_t key, uint64_t file_size,
                         bool is_regular)
{
    struct dax_policy_input in = { .policy = w->policy, .is_regular = is_regular,
                                   .file_size = file_size };
    struct dax_inode *ino;
    bool on;

    if (w->policy != DAX_POLICY_AUTO || !is_regular) {
        in.win.window_size = w->size;
        return dax_policy_decide(&in);
    }
    pthread_mutex_lock(&w->lock);
    dax_decay_by_time_locked(w);
    ino = dax_inode_get_locked(w, key);
    if (!ino) {
        pthread_mutex_unlock(&w->lock);
        return false;
    }
    dax_inode_decay_locked(w, ino);
    in.ino = ino->st;
    in.win = w->st;
    in.win.window_size = w->size;
    in.win.nslots = w->nslots;
    on = dax_policy_decide(&in);
    if (on)
        ino->st.revoked = false;
    else if (ino->st.dax && (thrashing(&ino->st) || host_changing(&ino->st)))
        ino->st.revoked = true;
    w->st.admitted_bytes -= ino->st.admitted_bytes;
    ino->st.admitted_bytes = on ? ranges_bytes(file_size) : 0;
    w->st.admitted_bytes += ino->st.admitted_bytes;
    ino->st.dax = on;
    pthread_mutex_unlock(&w->lock);
    return on;
}

void dax_policy_release_locked(struct dax_window *w, struct dax_inode *ino)
{
    w->st.admitted_bytes -= ino->st.admitted_bytes;
    ino->st.admitted_bytes = 0;
    ino->st.dax = false;
}

static const char *const policy_names[] = {
    [DAX_POLICY_NEVER] = "never",
    [DAX_POLICY_ALWAYS] = "always",
    [DAX_POLICY_AUTO] = "auto",
};

const char *dax_policy_name(enum dax_policy p)
{
    if ((unsigned)p >= sizeof(policy_names) / sizeof(policy_names[0]))
        return "?";
    return policy_names[p];
}

int dax_policy_parse(const char *s, enum dax_policy *out)
{
    for (unsigned i = 0; i < sizeof(policy_names) / sizeof(policy_names[0]); i++)
        if (s && strcmp(s, policy_names[i]) == 0) {
            *out = (enum dax_policy)i;
            return 0;
        }
    return -EINVAL;
}
