/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The window object: slot table and slot states, the per-inode index, reset
 * and the statistics snapshot. See dax_i.h for the state diagram
 * and the locking rules.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dax_i.h"

/* ---- Slot states ------------------------------------------------------------------ */

static bool transition_ok(enum dax_slot_state from, enum dax_slot_state to)
{
    switch (from) {
    case DAX_SLOT_FREE:
        return to == DAX_SLOT_MAPPING;
    case DAX_SLOT_MAPPING:
        return to == DAX_SLOT_MAPPED || to == DAX_SLOT_FREE;
    case DAX_SLOT_MAPPED:
        /* -> FREE only by reset */
        return to == DAX_SLOT_MAPPING || to == DAX_SLOT_UNMAPPING || to == DAX_SLOT_FREE ||
               to == DAX_SLOT_SYNCING;
    case DAX_SLOT_UNMAPPING:
        return to == DAX_SLOT_FREE || to == DAX_SLOT_MAPPED;
    case DAX_SLOT_SYNCING:
        return to == DAX_SLOT_MAPPED;
    }
    return false;
}

void dax_slot_check_locked(const struct dax_window *w, uint32_t s)
{
    const struct dax_slot *sl = &w->slots[s];

    (void)sl;
    assert(s < w->nslots);
    assert(sl->state != DAX_SLOT_FREE || sl->nextents == 0);
    assert(sl->state != DAX_SLOT_MAPPED || sl->nextents > 0);
    assert(sl->state != DAX_SLOT_SYNCING || sl->nextents > 0);
    assert(sl->nextents <= DAX_SLOT_MAX_EXTENTS);
}

void dax_slot_set_state_locked(struct dax_window *w, uint32_t s, enum dax_slot_state to)
{
    struct dax_slot *sl = &w->slots[s];
    enum dax_slot_state from = sl->state;

    assert(transition_ok(from, to));
    (void)transition_ok;
    if (from == DAX_SLOT_FREE)
        w->nfree--;
    if (dax_slot_busy(sl))
        w->busy--;
    sl->state = to;
    if (to == DAX_SLOT_FREE)
        w->nfree++;
    if (dax_slot_busy(sl)) {
        w->busy++;
        sl->claim_epoch = w->epoch;
    }
    dax_slot_check_locked(w, s);
}

/* The owner is done: idle again, FREE or MAPPED by what is left; wake waiters. */
void dax_slot_release_locked(struct dax_window *w, uint32_t s)
{
    assert(dax_slot_busy(&w->slots[s]));
    dax_slot_set_state_locked(w, s, w->slots[s].nextents ? DAX_SLOT_MAPPED : DAX_SLOT_FREE);
    pthread_cond_broadcast(&w->cond);
}

/*
 * Waits until slot s can be claimed: idle, and no reset under way. A reset
 * drops the lock (for the fds its write-back needs, for SYNCING owners) between
 * bumping the epoch and forgetting the table; a plan made then would carry the
 * new epoch and victims the frontend has already dropped.
 */
void dax_slot_wait_idle_locked(struct dax_window *w, uint32_t s)
{
    while (w->resetting || dax_slot_busy(&w->slots[s]))
        pthread_cond_wait(&w->cond, &w->lock);
}

/* ---- Per-inode index ----------------------------------------------------------------- */

static uint32_t hash_u64(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    return (uint32_t)k;
}

struct dax_inode *dax_inode_find_locked(struct dax_window *w, uint64_t key)
{
    struct dax_inode *ino = w->ino_hash[hash_u64(key) & (w->ino_buckets - 1)];

    while (ino && ino->key != key)
        ino = ino->hnext;
    return ino;
}

/* Find or create; NULL when out of memory. */
struct dax_inode *dax_inode_get_locked(struct dax_window *w, uint64_t key)
{
    struct dax_inode *ino = dax_inode_find_locked(w, key);
    uint32_t b;

    if (ino)
        return ino;
    ino = calloc(1, sizeof(*ino));
    if (!ino)
        return NULL;
    ino->key = key;
    ino->st.key = key;
    ino->ext_head = DAX_NONE;
    ino->fd = ino->fd_rw = -1;
    ino->decay_epoch = w->decay_epoch;
    b = hash_u64(key) & (w->ino_buckets - 1);
    ino->hnext = w->ino_hash[b];
    w->ino_hash[b] = ino;
    w->ninodes++;
    return ino;
}

static void inode_unhash_locked(struct dax_window *w, struct dax_inode *ino)
{
    struct dax_inode **pp = &w->ino_hash[hash_u64(ino->key) & (w->ino_buckets - 1)];

    while (*pp != ino)
        pp = &(*pp)->hnext;
    *pp = ino->hnext;
    w->ninodes--;
}

/* Apply the halvings of recent_* that happened since the inode was last touched. */
void dax_inode_decay_locked(struct dax_window *w, struct dax_inode *ino)
{
    uint64_t n = w->decay_epoch - ino->decay_epoch;

    if (n >= 64) {
        ino->st.recent_maps = ino->st.recent_ghost_hits = ino->st.recent_host_changes = 0;
    } else {
        ino->st.recent_maps >>= n;
        ino->st.recent_ghost_hits >>= n;
        ino->st.recent_host_changes >>= n;
    }
    ino->decay_epoch = w->decay_epoch;
}

/* One map happened: advance the activity clock, halving recent demand each period. */
static void decay_epoch_locked(struct dax_window *w)
{
    w->decay_epoch++;
    w->st.recent_maps >>= 1;
    w->st.recent_ghost_hits >>= 1;
}

void dax_activity_locked(struct dax_window *w)
{
    if (++w->events_in_period < w->period_events)
        return;
    w->events_in_period = 0;
    decay_epoch_locked(w);
}

void dax_decay_by_time_locked(struct dax_window *w)
{
    uint64_t now, n;

    if (w->decay_interval_ns == UINT64_MAX)
        return;
    now = vufs_now_ns();
    n = (now - w->last_decay_ns) / w->decay_interval_ns;
    if (n == 0)
        return;
    w->last_decay_ns += n * w->decay_interval_ns;
    for (n = n > 64 ? 64 : n; n > 0; n--)
        decay_epoch_locked(w);
}

/* ---- Extents ------------------------------------------------------------------------------ */

int dax_extent_add_locked(struct dax_window *w, uint32_t s, struct dax_inode *ino,
                          uint64_t foffset, uint32_t off, uint32_t len, bool writable,
                          enum dax_backing backing)
{
    struct dax_slot *sl = &w->slots[s];
    struct dax_extent *e;
    unsigned i;

    for (i = 0; i < DAX_SLOT_MAX_EXTENTS && sl->ext[i].ino; i++)
        ;
    if (i == DAX_SLOT_MAX_EXTENTS)
        return -ENOSPC;
    e = &sl->ext[i];
    e->ino = ino;
    e->foffset = foffset;
    e->off = off;
    e->len = len;
    e->writable = writable;
    e->backing = (uint8_t)backing;
    e->ino_prev = DAX_NONE;
    e->ino_next = ino->ext_head;
    if (ino->ext_head != DAX_NONE)
        w->slots[ino->ext_head / DAX_SLOT_MAX_EXTENTS]
            .ext[ino->ext_head % DAX_SLOT_MAX_EXTENTS].ino_prev = dax_ext_id(s, i);
    ino->ext_head = dax_ext_id(s, i);
    ino->st.extents++;
    ino->st.bytes_mapped += len;
    w->st.extents++;
    w->st.bytes_mapped += len;
    if (backing == DAX_BACK_STORE) {
        ino->st.store_extents++;
        w->st.store_bytes_mapped += len;
    }
    sl->nextents++;
    return 0;
}

static struct dax_extent *ext_by_id(struct dax_window *w, uint32_t id)
{
    return &w->slots[id / DAX_SLOT_MAX_EXTENTS].ext[id % DAX_SLOT_MAX_EXTENTS];
}

void dax_extent_del_locked(struct dax_window *w, uint32_t s, unsigned i)
{
    struct dax_slot *sl = &w->slots[s];
    struct dax_extent *e = &sl->ext[i];
    struct dax_inode *ino = e->ino;

    assert(ino);
    if (e->ino_prev != DAX_NONE)
        ext_by_id(w, e->ino_prev)->ino_next = e->ino_next;
    else
        ino->ext_head = e->ino_next;
    if (e->ino_next != DAX_NONE)
        ext_by_id(w, e->ino_next)->ino_prev = e->ino_prev;
    ino->st.extents--;
    ino->st.bytes_mapped -= e->len;
    w->st.extents--;
    w->st.bytes_mapped -= e->len;
    if (dax_extent_store(e)) {
        ino->st.store_extents--;
        w->st.store_bytes_mapped -= e->len;
    }
    memset(e, 0, sizeof(*e));
    sl->nextents--;
    if (ino->st.extents == 0 && ino->refs == 0)
        dax_inode_drop_fds_locked(w, ino);
}

void dax_inode_put_locked(struct dax_window *w, struct dax_inode *ino)
{
    assert(ino->refs > 0);
    if (--ino->refs == 0 && ino->st.extents == 0)
        dax_inode_drop_fds_locked(w, ino);
}

/* ---- A file's fds ------------------------------------------------------------------------ */

static void close_later_locked(struct dax_window *w, int fd)
{
    if (fd < 0)
        return;
    if (w->nclosing == w->closing_cap) {
        uint32_t cap = w->closing_cap ? 2 * w->closing_cap : 16;
        int *n = realloc(w->closing, cap * sizeof(*n));

        if (!n) {
            close(fd); /* out of memory: close here, under the lock */
            return;
        }
        w->closing = n;
        w->closing_cap = cap;
    }
    w->closing[w->nclosing++] = fd;
}

void dax_inode_drop_fds_locked(struct dax_window *w, struct dax_inode *ino)
{
    close_later_locked(w, ino->fd);
    close_later_locked(w, ino->fd_rw);
    ino->fd = ino->fd_rw = -1;
    ino->seen_valid = false;
}

void dax_close_pending(struct dax_window *w)
{
    int *fds;
    uint32_t n;

    pthread_mutex_lock(&w->lock);
    fds = w->closing;
    n = w->nclosing;
    w->closing = NULL;
    w->nclosing = w->closing_cap = 0;
    pthread_mutex_unlock(&w->lock);
    for (uint32_t i = 0; i < n; i++)
        close(fds[i]);
    free(fds);
}

int dax_stamp_fd(int fd, struct dax_file_stamp *out)
{
    struct timespec ts;
    struct stat st;

    if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) < 0)
        return -errno;
    if (fstat(fd, &st) < 0)
        return -errno;
    out->size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    out->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    out->taken_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return 0;
}

/*
 * A file system stamps a change with a coarse clock (a jiffy; a second on some),
 * so a change right after a look can carry the stamp the look saw. A stamp
 * tells every later change only if that clock had moved past its ctime when
 * the look was taken: every change after the look then carries a later ctime.
 * The clock at the look, not at the use: a change between the two could hide.
 * And a write stamps the file before it copies its bytes: the look must also
 * come settle_ns after the change, when the bytes of the write that stamped
 * it are in the file (a writer stalled longer between the two is not seen
 * until its file changes again or the periodic merge).
 */
static bool stamp_settled(const struct dax_window *w, const struct dax_file_stamp *s)
{
    int64_t need = s->ctime_ns;

    if (s->ctime_ns % 1000000000 == 0)
        need += 1000000000; /* whole seconds: a file system of one-second stamps */
    return need < s->taken_ns - w->settle_ns; /* taken_ns is positive: no overflow */
}

void dax_inode_set_seen_locked(struct dax_window *w, struct dax_inode *ino,
                               const struct dax_file_stamp *s)
{
    ino->seen = *s;
    ino->seen_valid = stamp_settled(w, s);
}

bool dax_stamp_equal(const struct dax_file_stamp *a, const struct dax_file_stamp *b)
{
    return a->size == b->size && a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* ---- Life cycle ------------------------------------------------------------------------- */

void dax_window_free(struct dax_window *w)
{
    if (!w)
        return;
    for (uint32_t b = 0; b < w->ino_buckets; b++) {
        struct dax_inode *ino = w->ino_hash[b], *next;

        for (; ino; ino = next) {
            next = ino->hnext;
            if (ino->fd >= 0)
                close(ino->fd);
            if (ino->fd_rw >= 0)
                close(ino->fd_rw);
            free(ino);
        }
    }
    for (uint32_t i = 0; i < w->nclosing; i++)
        close(w->closing[i]);
    free(w->closing);
    dax_store_fini(&w->store);
    dax_ghost_fini(w);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->ino_hash);
    free(w->slots);
    free(w);
}

int dax_window_new(const struct dax_config *cfg, const struct dax_ops *ops, void *ctx,
                   struct dax_window **out)
{
    struct dax_window *w;
    uint64_t page = cfg->page_size ? cfg->page_size : 4096;
    uint64_t nslots;
    uint32_t b;
    int r;

    *out = NULL;
    if (!ops || !ops->map || !ops->unmap || !ops->open)
        return -EINVAL;
    if (page & (page - 1) || page > DAX_RANGE_SIZE)
        return -EINVAL;
    if (cfg->window_size == 0 || cfg->window_size % page ||
        cfg->window_size > DAX_STORE_MAX_SIZE)
        return -EINVAL;
    nslots = dax_div_round_up(cfg->window_size, DAX_RANGE_SIZE);
    /* Extent ids are u32 slot * DAX_SLOT_MAX_EXTENTS + i: 8 PiB windows at most. */
    if (nslots >= DAX_NONE / DAX_SLOT_MAX_EXTENTS)
        return -EINVAL;
    if (cfg->policy != DAX_POLICY_NEVER && cfg->policy != DAX_POLICY_ALWAYS &&
        cfg->policy != DAX_POLICY_AUTO)
        return -EINVAL;

    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    r = dax_store_init(&w->store, cfg->window_size);
    if (r < 0) {
        free(w);
        return r;
    }
    w->ops = ops;
    w->ctx = ctx;
    w->size = cfg->window_size;
    w->page_size = page;
    w->policy = cfg->policy;
    w->nslots = (uint32_t)nslots;
    w->decay_interval_ns = cfg->decay_interval_ns ? cfg->decay_interval_ns : 1000000000u;
    w->last_decay_ns = vufs_now_ns();
    w->settle_ns = cfg->settle_ns == 0        ? 1000000000
                   : cfg->settle_ns > INT64_MAX ? INT64_MAX
                                                : (int64_t)cfg->settle_ns;
    w->period_events = nslots * DAX_POLICY_PERIOD_SLOTS;
    if (w->period_events < 256)
        w->period_events = 256;
    w->slots = calloc(nslots, sizeof(*w->slots));
    for (b = 64; b < nslots && b < (1u << 24); b <<= 1)
        ;
    w->ino_buckets = b;
    w->ino_hash = calloc(b, sizeof(*w->ino_hash));
    if (!w->slots || !w->ino_hash) {
        r = -ENOMEM;
        goto out_free;
    }
    r = dax_ghost_init(w, cfg->ghost_capacity ? cfg->ghost_capacity
                                              : (unsigned)(nslots < 64 ? 64 : nslots));
    if (r < 0)
        goto out_free;
    for (uint32_t s = 0; s < w->nslots; s++)
        w->slots[s].state = DAX_SLOT_FREE;
    w->nfree = w->nslots;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    *out = w;
    return 0;

out_free:
    dax_store_fini(&w->store);
    free(w->ino_hash);
    free(w->slots);
    free(w);
    return r;
}

unsigned dax_window_map_alignment(const struct dax_window *w)
{
    return (unsigned)__builtin_ctzll(w->page_size);
}

bool dax_window_usable(struct dax_window *w)
{
    return !w->ops->usable || w->ops->usable(w->ctx);
}

enum dax_policy dax_window_policy(const struct dax_window *w)
{
    return w->policy;
}

static bool any_syncing_locked(const struct dax_window *w)
{
    for (uint32_t s = 0; s < w->nslots; s++)
        if (w->slots[s].state == DAX_SLOT_SYNCING)
            return true;
    return false;
}

/*
 * Opens the fds the reset's write-back needs: true when one was opened (the
 * lock was dropped; look again). A file that cannot be opened again is tried
 * once (tried marks it); its stores are lost, as a local file system loses a
 * page it cannot write back.
 */
static bool reset_open_fds_locked(struct dax_window *w, struct dax_inode **tried, size_t *ntried,
                                  size_t cap)
{
    for (uint32_t s = 0; s < w->nslots; s++)
        for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++) {
            struct dax_extent *e = &w->slots[s].ext[i];
            bool seen = false;

            if (!e->ino || !dax_extent_store(e) || !e->writable || e->ino->fd_rw >= 0)
                continue;
            for (size_t k = 0; k < *ntried && !seen; k++)
                seen = tried[k] == e->ino;
            if (seen || *ntried == cap)
                continue;
            tried[(*ntried)++] = e->ino;
            dax_inode_open_fds_locked(w, e->ino, true);
            return true;
        }
    return false;
}

void dax_window_reset(struct dax_window *w)
{
    size_t cap = 64, ntried = 0;
    _cleanup_free_ struct dax_inode **tried = calloc(cap, sizeof(*tried));

    pthread_mutex_lock(&w->lock);
    w->epoch++;
    w->resetting = true;
    /* Write-backs and merges call no frontend: let them finish. */
    while (any_syncing_locked(w))
        pthread_cond_wait(&w->cond, &w->lock);
    while (tried && reset_open_fds_locked(w, tried, &ntried, cap))
        while (any_syncing_locked(w))
            pthread_cond_wait(&w->cond, &w->lock);
    for (uint32_t s = 0; s < w->nslots; s++) {
        struct dax_slot *sl = &w->slots[s];

        for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++) {
            struct dax_extent *e = &sl->ext[i];

            if (!e->ino)
                continue;
            /* The guest's stores reach the file before the mapping is forgotten
             * (the frontend dropped it already: nothing more comes). Under the
             * lock: a reset has the window to itself. */
            if (dax_extent_store(e) && e->writable && e->ino->fd_rw >= 0) {
                struct dax_store_sync out = {0};
                int r = dax_store_writeback(&w->store, e->ino->fd_rw, e->foffset,
                                            dax_slot_base(s) + e->off, e->len, &out);

                w->st.writeback_bytes += out.bytes;
                w->st.writeback_runs += out.runs;
                e->ino->st.writeback_bytes += out.bytes;
                if (out.pages)
                    w->st.writebacks++;
                if (r < 0) {
                    w->st.writeback_errors++;
                    e->ino->st.writeback_errors++;
                    if (!e->ino->wb_err)
                        e->ino->wb_err = r;
                }
            }
            dax_extent_del_locked(w, s, i);
        }
        /* Busy slots are returned by their owners, who see the new epoch. */
        if (sl->state == DAX_SLOT_MAPPED)
            dax_slot_set_state_locked(w, s, DAX_SLOT_FREE);
        if (sl->state == DAX_SLOT_FREE)
            dax_store_drop(&w->store, dax_slot_base(s), DAX_RANGE_SIZE, true, true);
    }
    dax_ghost_clear_locked(w);
    w->resetting = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
}

int dax_window_restore_mapping(struct dax_window *w, uint64_t key, uint64_t foffset,
                               uint64_t moffset, uint64_t len, bool writable,
                               enum dax_backing backing)
{
    struct fuse_setupmapping_in in = {
        .foffset = foffset,
        .len = len,
        .moffset = moffset,
        .flags = FUSE_SETUPMAPPING_FLAG_READ | (writable ? FUSE_SETUPMAPPING_FLAG_WRITE : 0),
    };
    struct dax_setup checked;
    int r = dax_setup_check(w, &in, &checked);

    if (r < 0)
        return r;
    if (backing != DAX_BACK_STORE && backing != DAX_BACK_FILE)
        return -EINVAL;
    uint32_t s = (uint32_t)(moffset >> DAX_RANGE_SHIFT);
    uint32_t off = (uint32_t)(moffset & (DAX_RANGE_SIZE - 1));
    if (len > DAX_RANGE_SIZE - off)
        return -EINVAL; /* an extent never crosses a slot */

    pthread_mutex_lock(&w->lock);
    struct dax_slot *sl = &w->slots[s];
    if (dax_slot_busy(sl)) {
        r = -EBUSY; /* nothing runs before the window serves: a caller's bug */
        goto unlock;
    }
    for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++) {
        const struct dax_extent *e = &sl->ext[i];
        if (e->ino && e->off < off + len && off < e->off + e->len) {
            r = -EEXIST;
            goto unlock;
        }
    }
    if (sl->nextents == DAX_SLOT_MAX_EXTENTS) {
        r = -ENOSPC;
        goto unlock;
    }
    struct dax_inode *ino = dax_inode_get_locked(w, key);
    if (!ino) {
        r = -ENOMEM;
        goto unlock;
    }
    /* FREE or MAPPED -> MAPPING -> MAPPED, as a map made here would go. */
    dax_slot_set_state_locked(w, s, DAX_SLOT_MAPPING);
    r = dax_extent_add_locked(w, s, ino, foffset, off, (uint32_t)len, writable, backing);
    dax_slot_release_locked(w, s);
unlock:
    pthread_mutex_unlock(&w->lock);
    return r;
}

/* ---- Introspection --------------------------------------------------------------------------- */

static void window_stats_locked(struct dax_window *w, struct dax_window_stats *st)
{
    *st = w->st;
    st->window_size = w->size;
    st->nslots = w->nslots;
    st->slots_used = w->nslots - w->nfree;
    st->ghost_entries = w->ghost_live;
    st->inodes = w->ninodes;
    st->policy = w->policy;
}

void dax_window_get_stats(struct dax_window *w, struct dax_window_stats *st)
{
    pthread_mutex_lock(&w->lock);
    window_stats_locked(w, st);
    pthread_mutex_unlock(&w->lock);
}

int dax_inode_forget(struct dax_window *w, uint64_t key)
{
    struct dax_inode *ino;
    int r = 0;

    pthread_mutex_lock(&w->lock);
    ino = dax_inode_find_locked(w, key);
    if (!ino) {
        r = -ENOENT;
    } else if (ino->st.extents || ino->refs) {
        r = -EBUSY;
    } else {
        dax_policy_release_locked(w, ino);
        dax_inode_drop_fds_locked(w, ino);
        inode_unhash_locked(w, ino);
        free(ino);
    }
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
    return r;
}

struct mapping_snap {
    uint64_t key, foffset, moffset, len;
    bool writable;
    enum dax_backing backing;
};

static int cmp_snap(const void *a, const void *b)
{
    const struct mapping_snap *x = a, *y = b;

    return x->moffset < y->moffset ? -1 : x->moffset > y->moffset;
}

int dax_for_each_mapping(struct dax_window *w, dax_mapping_fn fn, void *opaque)
{
    _cleanup_free_ struct mapping_snap *snap = NULL;
    size_t n = 0;

    pthread_mutex_lock(&w->lock);
    snap = calloc(w->st.extents ? w->st.extents : 1, sizeof(*snap));
    if (!snap) {
        pthread_mutex_unlock(&w->lock);
        return -ENOMEM;
    }
    for (uint32_t s = 0; s < w->nslots; s++)
        for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++) {
            const struct dax_extent *e = &w->slots[s].ext[i];

            if (!e->ino)
                continue;
            snap[n++] = (struct mapping_snap){
                .key = e->ino->key,
                .foffset = e->foffset,
                .moffset = ((uint64_t)s << DAX_RANGE_SHIFT) + e->off,
                .len = e->len,
                .writable = e->writable,
                .backing = (enum dax_backing)e->backing,
            };
        }
    pthread_mutex_unlock(&w->lock);
    qsort(snap, n, sizeof(*snap), cmp_snap);
    for (size_t i = 0; i < n; i++)
        fn(opaque, snap[i].key, snap[i].foffset, snap[i].moffset, snap[i].len,
           snap[i].writable, snap[i].backing);
    return 0;
}

void dax_window_store_fds(const struct dax_window *w, int *store_fd, int *shadow_fd)
{
    *store_fd = w->store.fd;
    *shadow_fd = w->store.shadow_fd;
}

int dax_window_restore_store(struct dax_window *w, int store_fd, int shadow_fd)
{
    int r;

    pthread_mutex_lock(&w->lock);
    r = w->st.store_bytes_mapped ? -EINVAL : dax_store_adopt(&w->store, store_fd, shadow_fd);
    pthread_mutex_unlock(&w->lock);
    return r;
}

int dax_stats_snapshot(struct dax_window *w, struct dax_window_stats *ws,
                       struct dax_inode_stats **inodes, size_t *n)
{
    struct dax_inode_stats *arr;
    size_t k = 0;

    pthread_mutex_lock(&w->lock);
    window_stats_locked(w, ws);
    arr = calloc(w->ninodes ? w->ninodes : 1, sizeof(*arr));
    if (!arr) {
        pthread_mutex_unlock(&w->lock);
        return -ENOMEM;
    }
    for (uint32_t b = 0; b < w->ino_buckets; b++)
        for (struct dax_inode *ino = w->ino_hash[b]; ino; ino = ino->hnext) {
            dax_inode_decay_locked(w, ino);
            arr[k++] = ino->st;
        }
    pthread_mutex_unlock(&w->lock);
    *inodes = arr;
    *n = k;
    return 0;
}
