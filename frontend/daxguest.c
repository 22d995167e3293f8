/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An emulated guest DAX client: what Linux's fs/fuse/dax.c does with a DAX
 * window, so tests and vufs-bench load a backend's window the way a guest
 * does (see vfe.h for the behaviour modelled; the kernel's names are given
 * beside the functions that play them).
 *
 * A range's life (struct dg_range):
 *
 *   FREE --alloc--> (owned by one thread) --SETUPMAPPING ok--> BUSY
 *     ^                 |  failed                                |
 *     '-----------------'                                        |
 *     ^            reclaim (worker) / evict: REMOVEMAPPING       |
 *     '----------------------------------------------------------'
 *   BUSY --inline reclaim: REMOVEMAPPING--> (owned) --SETUPMAPPING--> BUSY
 *
 * A BUSY range is in its file's tree (by file range index) and on the busy
 * list; while a reader or writer copies through it its refcnt is above 1
 * (1 = idle, the kernel's convention) and reclaim skips it.
 *
 * Locking (the kernel's, minus what only page faults need):
 *   1. f->ilock, the inode lock: held shared by DAX reads, exclusive by writes.
 *   2. f->sem (fi->dax->sem): the file's tree; taken shared to look a range up,
 *      exclusive to set one up, upgrade it or take it away. Never held while
 *      waiting for another file's sem.
 *   3. g->lock (fcd->lock): free and busy lists, counts, the worker's state,
 *      file pins. Innermost; never held across a device request.
 * A file is pinned (f->refs, the kernel's igrab) by reclaim while it works on
 * one of its ranges; eviction waits for the pins to go.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include <glib.h>

#include "vfe.h"
#include "vfe_i.h"

#define DG_SHIFT 21
_Static_assert(VFE_DAXGUEST_RANGE == 1ull << DG_SHIFT, "2 MiB ranges");

struct dg_link {
    struct dg_link *prev, *next;
};

static void link_init(struct dg_link *l)
{
    l->prev = l->next = l;
}

static bool link_empty(const struct dg_link *h)
{
    return h->next == h;
}

static void link_del(struct dg_link *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    link_init(n);
}

static void link_add_tail(struct dg_link *n, struct dg_link *h)
{
    n->prev = h->prev;
    n->next = h;
    h->prev->next = n;
    h->prev = n;
}


struct dg_range {
    struct dg_link link;            /* free or busy list; protected by g->lock */
    uint64_t moffset;               /* constant */
    struct vfe_daxguest_file *file; /* owner while BUSY; protected by g->lock */
    uint64_t index;                 /* file range index while BUSY; protected by file->sem */
    bool writable;                  /* protected by file->sem */
    bool busy;                      /* on the busy list; protected by g->lock */
    int refcnt;                     /* atomic; 1 = idle */
};

struct vfe_daxguest_file {
    struct vfe_daxguest *g;
    uint64_t nodeid, fh;
    bool dax;
    uint64_t size; /* i_size; atomic */
    pthread_rwlock_t ilock;
    pthread_rwlock_t sem;
    struct dg_range **tree; /* by range index; protected by sem */
    uint64_t ntree;         /* protected by sem */
    unsigned nr;            /* ranges in tree; written under sem, read anywhere (atomic) */
    unsigned refs;          /* reclaim pins; protected by g->lock */
    bool evicting;          /* protected by g->lock */
    struct dg_link files;   /* g->files; protected by g->lock */
};

struct vfe_daxguest {
    struct vfe_daxguest_config cfg;
    uint8_t *window;
    unsigned nranges;
    struct dg_range *ranges;

    pthread_mutex_t lock;
    pthread_cond_t range_wait; /* a range went back to the free list */
    pthread_cond_t pin_wait;   /* a file pin went away */
    pthread_cond_t kick_wait;  /* the worker has work, or must stop */
    struct dg_link free_list;  /* protected by lock */
    struct dg_link busy_list;  /* protected by lock */
    unsigned nr_free, nr_busy; /* protected by lock */
    struct dg_link files;      /* protected by lock */
    bool kicked;               /* worker queued; protected by lock */
    uint64_t kick_at_ns;       /* protected by lock */
    bool stop;                 /* protected by lock */
    pthread_t worker;
    bool worker_started;

    struct vfe_daxguest_stats st; /* counters updated atomically */
};

/* vfe_daxguest_get_stats copies the leading uint64_t counters as an array. */
_Static_assert(offsetof(struct vfe_daxguest_stats, nranges) == 16 * sizeof(uint64_t),
               "the counters lead struct vfe_daxguest_stats");

#define DG_COUNT(g, field) __atomic_add_fetch(&(g)->st.field, 1, __ATOMIC_RELAXED)

static void ref_get(struct dg_range *r)
{
    __atomic_add_fetch(&r->refcnt, 1, __ATOMIC_ACQ_REL);
}

static void ref_put(struct dg_range *r)
{
    __atomic_sub_fetch(&r->refcnt, 1, __ATOMIC_ACQ_REL);
}

static bool ref_in_use(struct dg_range *r)
{
    return __atomic_load_n(&r->refcnt, __ATOMIC_ACQUIRE) > 1;
}

static unsigned file_nr(struct vfe_daxguest_file *f)
{
    return __atomic_load_n(&f->nr, __ATOMIC_ACQUIRE);
}

/* ---- The free list and the worker's kick (fcd->lock) --------------------------- */

/* __kick_dmap_free_worker: queue the worker when fewer than 20% of the ranges
 * (at least 1) are free; a queued worker is not queued again. */
static void kick_locked(struct vfe_daxguest *g, unsigned delay_ms)
{
    unsigned threshold = g->nranges * VFE_DAXGUEST_RECLAIM_PCT / 100;
    if (threshold < 1)
        threshold = 1;
    if (g->nr_free >= threshold || g->kicked)
        return;
    g->kicked = true;
    g->kick_at_ns = vufs_now_ns() + delay_ms * 1000000ull;
    DG_COUNT(g, bg_kicks);
    pthread_cond_signal(&g->kick_wait);
}

/* alloc_dax_mapping: the head of the free list, and a kick. */
static struct dg_range *alloc_range(struct vfe_daxguest *g)
{
    pthread_mutex_lock(&g->lock);
    struct dg_range *r = NULL;
    if (!link_empty(&g->free_list)) {
        r = container_of(g->free_list.next, struct dg_range, link);
        link_del(&r->link);
        g->nr_free--;
    }
    kick_locked(g, 0);
    pthread_mutex_unlock(&g->lock);
    return r;
}

static void free_range_locked(struct vfe_daxguest *g, struct dg_range *r)
{
    r->file = NULL;
    r->writable = false;
    link_add_tail(&r->link, &g->free_list);
    g->nr_free++;
    pthread_cond_broadcast(&g->range_wait);
}

static void free_range(struct vfe_daxguest *g, struct dg_range *r)
{
    pthread_mutex_lock(&g->lock);
    free_range_locked(g, r);
    pthread_mutex_unlock(&g->lock);
}

static void busy_del_locked(struct vfe_daxguest *g, struct dg_range *r)
{
    link_del(&r->link);
    r->busy = false;
    g->nr_busy--;
}

static void unpin(struct vfe_daxguest *g, struct vfe_daxguest_file *f)
{
    pthread_mutex_lock(&g->lock);
    if (--f->refs == 0)
        pthread_cond_broadcast(&g->pin_wait);
    pthread_mutex_unlock(&g->lock);
}

/* ---- Device requests -------------------------------------------------------------- */

static int send_setup(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                      uint64_t index, bool writable, uint64_t moffset)
{
    uint64_t flags = FUSE_SETUPMAPPING_FLAG_READ | (writable ? FUSE_SETUPMAPPING_FLAG_WRITE : 0);
    int r = g->cfg.ops->setupmapping(g->cfg.opaque, q, f->nodeid, index << DG_SHIFT,
                                     VFE_DAXGUEST_RANGE, flags, moffset);
    if (r < 0)
        DG_COUNT(g, setup_errors);
    return r;
}

static int send_remove(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                       const struct fuse_removemapping_one *e, uint32_t n)
{
    DG_COUNT(g, remove_requests);
    __atomic_add_fetch(&g->st.removes, n, __ATOMIC_RELAXED);
    int r = g->cfg.ops->removemapping(g->cfg.opaque, q, f->nodeid, e, n);
    if (r < 0)
        DG_COUNT(g, remove_errors);
    return r;
}

/* reclaim_one_dmap_locked: out of the tree and REMOVEMAPPING of one entry.
 * Caller holds f->sem exclusive. Like the kernel, a failed REMOVEMAPPING is
 * counted and the range is reused anyway. */
static void reclaim_one_locked(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                               struct dg_range *r)
{
    f->tree[r->index] = NULL;
    __atomic_sub_fetch(&f->nr, 1, __ATOMIC_RELEASE);
    struct fuse_removemapping_one e = {.moffset = r->moffset, .len = VFE_DAXGUEST_RANGE};
    send_remove(g, q, f, &e, 1);
}

/* lookup_and_reclaim_dmap: the range of f at index back to the free list,
 * unless it went or is in use. Returns whether it freed one. */
static bool reclaim_to_free(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                            uint64_t index)
{
    bool freed = false;
    pthread_rwlock_wrlock(&f->sem);
    struct dg_range *r = index < f->ntree ? f->tree[index] : NULL;
    if (r && !ref_in_use(r)) {
        reclaim_one_locked(g, q, f, r);
        pthread_mutex_lock(&g->lock);
        busy_del_locked(g, r);
        free_range_locked(g, r);
        pthread_mutex_unlock(&g->lock);
        freed = true;
    }
    pthread_rwlock_unlock(&f->sem);
    return freed;
}

/* try_to_free_dmap_chunks: up to 10 times, the first idle busy range (moved to
 * the tail while it is worked on) back to the free list. */
static int reclaim_pass(struct vfe_daxguest *g)
{
    int freed = 0;
    DG_COUNT(g, bg_runs);
    for (unsigned n = 0; n < VFE_DAXGUEST_RECLAIM_CHUNK; n++) {
        struct vfe_daxguest_file *f = NULL;
        uint64_t index = 0;
        pthread_mutex_lock(&g->lock);
        for (struct dg_link *l = g->busy_list.next; l != &g->busy_list; l = l->next) {
            struct dg_range *r = container_of(l, struct dg_range, link);
            if (ref_in_use(r) || r->file->evicting)
                continue;
            f = r->file;
            f->refs++;
            index = r->index;
            link_del(&r->link);
            link_add_tail(&r->link, &g->busy_list);
            break;
        }
        pthread_mutex_unlock(&g->lock);
        if (!f)
            break;
        if (reclaim_to_free(g, g->cfg.bg_queue, f, index)) {
            freed++;
            DG_COUNT(g, bg_reclaims);
        }
        unpin(g, f);
    }
    return freed;
}

static void *worker_main(void *arg)
{
    struct vfe_daxguest *g = arg;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        while (!g->stop && !g->kicked)
            pthread_cond_wait(&g->kick_wait, &g->lock);
        if (g->stop)
            break;
        uint64_t now = vufs_now_ns();
        if (now < g->kick_at_ns) {
            /* queue_delayed_work: sleep out the delay (the clock is monotonic). */
            struct timespec ts = vufs_deadline(CLOCK_REALTIME, g->kick_at_ns - now);
            pthread_cond_timedwait(&g->kick_wait, &g->lock, &ts);
            continue;
        }
        g->kicked = false;
        pthread_mutex_unlock(&g->lock);
        reclaim_pass(g);
        pthread_mutex_lock(&g->lock);
        /* fuse_dax_free_mem_worker: still below the threshold, again in 1 ms. */
        kick_locked(g, 1);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

bool vfe_daxguest_reclaim_kicked(struct vfe_daxguest *g)
{
    pthread_mutex_lock(&g->lock);
    bool k = g->kicked;
    pthread_mutex_unlock(&g->lock);
    return k;
}

int vfe_daxguest_reclaim_run(struct vfe_daxguest *g)
{
    pthread_mutex_lock(&g->lock);
    g->kicked = false;
    pthread_mutex_unlock(&g->lock);
    int n = reclaim_pass(g);
    pthread_mutex_lock(&g->lock);
    kick_locked(g, 1);
    pthread_mutex_unlock(&g->lock);
    return n;
}

/* ---- Getting a range for a request ------------------------------------------------ */

/*
 * Takes f's range at index, found idle without f->sem held: reclaimed and off
 * the busy list, or NULL with *retry set when it went or got used meanwhile.
 */
static struct dg_range *reclaim_at(struct vfe_daxguest *g, unsigned q,
                                   struct vfe_daxguest_file *f, uint64_t index, bool *retry)
{
    pthread_rwlock_wrlock(&f->sem);
    struct dg_range *r = index < f->ntree ? f->tree[index] : NULL;
    if (!r || ref_in_use(r)) {
        *retry = true;
        r = NULL;
    } else {
        reclaim_one_locked(g, q, f, r);
        pthread_mutex_lock(&g->lock);
        busy_del_locked(g, r);
        r->file = NULL;
        pthread_mutex_unlock(&g->lock);
    }
    pthread_rwlock_unlock(&f->sem);
    return r;
}

/* inode_inline_reclaim_one_dmap: the idle range of f at the lowest file offset,
 * removed and handed over (not through the free list). *retry when it went
 * or came into use meanwhile. */
static struct dg_range *inline_reclaim_same_file(struct vfe_daxguest *g, unsigned q,
                                                 struct vfe_daxguest_file *f, bool *retry)
{
    uint64_t index = 0;
    bool found = false;
    pthread_rwlock_rdlock(&f->sem);
    for (uint64_t i = 0; i < f->ntree && !found; i++)
        if (f->tree[i] && !ref_in_use(f->tree[i])) {
            index = i;
            found = true;
        }
    pthread_rwlock_unlock(&f->sem);
    if (!found)
        return NULL;
    return reclaim_at(g, q, f, index, retry);
}

/* The recency-aware guest: the least recently used idle range of any file. */
static struct dg_range *inline_reclaim_lru(struct vfe_daxguest *g, unsigned q, bool *retry)
{
    struct vfe_daxguest_file *f = NULL;
    struct dg_range *r = NULL;
    uint64_t index = 0;
    pthread_mutex_lock(&g->lock);
    for (struct dg_link *l = g->busy_list.next; l != &g->busy_list; l = l->next) {
        r = container_of(l, struct dg_range, link);
        if (ref_in_use(r) || r->file->evicting)
            continue;
        f = r->file;
        f->refs++;
        index = r->index;
        break;
    }
    pthread_mutex_unlock(&g->lock);
    if (!f)
        return NULL;
    r = reclaim_at(g, q, f, index, retry);
    unpin(g, f);
    return r;
}

/* alloc_dax_mapping_reclaim: a free range, else one reclaimed inline, else
 * wait for the worker (only when f has no range: otherwise try again). */
static int alloc_range_reclaim(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                               struct dg_range **out)
{
    for (;;) {
        struct dg_range *r = alloc_range(g);
        if (r) {
            *out = r;
            return 0;
        }
        bool retry = false;
        r = g->cfg.model == VFE_DAXGUEST_LRU ? inline_reclaim_lru(g, q, &retry)
                                             : inline_reclaim_same_file(g, q, f, &retry);
        if (r) {
            DG_COUNT(g, inline_reclaims);
            *out = r;
            return 0;
        }
        if (retry)
            continue;
        bool wait = g->cfg.model == VFE_DAXGUEST_LRU || file_nr(f) == 0;
        if (!wait) {
            sched_yield(); /* every range of f is in use right now */
            continue;
        }
        DG_COUNT(g, waits);
        if (g->cfg.bg == VFE_DAXGUEST_BG_MANUAL) {
            /* Deterministic: the worker's pass now, in place of waiting for it. */
            if (vfe_daxguest_reclaim_run(g) == 0) {
                pthread_mutex_lock(&g->lock);
                bool none = g->nr_free == 0;
                pthread_mutex_unlock(&g->lock);
                if (none)
                    return -EAGAIN;
            }
            continue;
        }
        pthread_mutex_lock(&g->lock);
        if (g->nr_free == 0 && !g->stop) {
            struct timespec ts = vufs_deadline(CLOCK_REALTIME, 10 * 1000000u);
            pthread_cond_timedwait(&g->range_wait, &g->lock, &ts);
        }
        bool stop = g->stop;
        pthread_mutex_unlock(&g->lock);
        if (stop)
            return -ESHUTDOWN;
    }
}

static void lru_touch(struct vfe_daxguest *g, struct dg_range *r)
{
    if (g->cfg.model != VFE_DAXGUEST_LRU)
        return;
    pthread_mutex_lock(&g->lock);
    if (r->busy) {
        link_del(&r->link);
        link_add_tail(&r->link, &g->busy_list);
    }
    pthread_mutex_unlock(&g->lock);
}

/* Caller holds f->sem exclusive. */
static int tree_reserve_locked(struct vfe_daxguest_file *f, uint64_t index)
{
    if (index < f->ntree)
        return 0;
    uint64_t n = f->ntree ? f->ntree : 16;
    while (n <= index)
        n *= 2;
    struct dg_range **t = g_try_renew(struct dg_range *, f->tree, n);
    if (!t)
        return -ENOMEM;
    memset(t + f->ntree, 0, (n - f->ntree) * sizeof(*t));
    f->tree = t;
    f->ntree = n;
    return 0;
}

/* fuse_upgrade_dax_mapping: the caller holds a reference on r. Returns with
 * the reference still held. */
static int upgrade(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                   struct dg_range *r)
{
    int ret = 0;
    pthread_rwlock_wrlock(&f->sem);
    if (!r->writable) {
        ret = send_setup(g, q, f, r->index, true, r->moffset);
        if (ret == 0) {
            r->writable = true;
            DG_COUNT(g, upgrades);
        }
    }
    pthread_rwlock_unlock(&f->sem);
    return ret;
}

/* fuse_setup_new_dax_mapping. Returns a referenced range. */
static int setup_new(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                     uint64_t index, bool write, struct dg_range **out)
{
    struct dg_range *r;
    int ret = alloc_range_reclaim(g, q, f, &r);
    if (ret < 0)
        return ret;
    pthread_rwlock_wrlock(&f->sem);
    struct dg_range *have = index < f->ntree ? f->tree[index] : NULL;
    if (have) {
        /* Somebody set it up meanwhile. */
        free_range(g, r);
        ref_get(have);
        pthread_rwlock_unlock(&f->sem);
        if (write && !have->writable) {
            ret = upgrade(g, q, f, have);
            if (ret < 0) {
                ref_put(have);
                return ret;
            }
        }
        *out = have;
        return 0;
    }
    ret = tree_reserve_locked(f, index);
    if (ret == 0)
        ret = send_setup(g, q, f, index, write, r->moffset);
    if (ret < 0) {
        free_range(g, r);
        pthread_rwlock_unlock(&f->sem);
        return ret;
    }
    DG_COUNT(g, setups);
    r->writable = write;
    r->index = index;
    f->tree[index] = r;
    __atomic_add_fetch(&f->nr, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&g->lock);
    r->file = f;
    r->busy = true;
    link_add_tail(&r->link, &g->busy_list);
    g->nr_busy++;
    pthread_mutex_unlock(&g->lock);
    ref_get(r);
    pthread_rwlock_unlock(&f->sem);
    *out = r;
    return 0;
}

/* fuse_iomap_begin for the chunk at pos: a referenced range. */
static int get_range(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f, uint64_t pos,
                     bool write, struct dg_range **out)
{
    uint64_t index = pos >> DG_SHIFT;
    pthread_rwlock_rdlock(&f->sem);
    struct dg_range *r = index < f->ntree ? f->tree[index] : NULL;
    if (r) {
        ref_get(r);
        bool need_upgrade = write && !r->writable;
        pthread_rwlock_unlock(&f->sem);
        if (need_upgrade) {
            int ret = upgrade(g, q, f, r);
            if (ret < 0) {
                ref_put(r);
                return ret;
            }
        } else {
            DG_COUNT(g, hits);
        }
        lru_touch(g, r);
        *out = r;
        return 0;
    }
    pthread_rwlock_unlock(&f->sem);
    return setup_new(g, q, f, index, write, out);
}

/* ---- Plain transfers in pieces --------------------------------------------------- */

/* One piece of a transfer: at most n bytes at off, the count done or -errno. */
typedef ssize_t dg_piece_fn(void *ctx, bool write, uint64_t off, uint8_t *buf, size_t n);

/*
 * len bytes at off through piece, at most max at a time, as the kernel's
 * read/write paths do: a short piece ends the transfer, an error after some
 * bytes gives those bytes.
 */
static ssize_t dg_pieces(dg_piece_fn *piece, void *ctx, bool write, uint64_t off, uint8_t *buf,
                         size_t len, size_t max)
{
    size_t done = 0;
    while (done < len) {
        size_t n = len - done < max ? len - done : max;
        ssize_t r = piece(ctx, write, off + done, buf + done, n);
        if (r < 0)
            return done ? (ssize_t)done : r;
        done += (size_t)r;
        if ((size_t)r < n)
            break;
    }
    return (ssize_t)done;
}

struct dg_plain {
    struct vfe_daxguest *g;
    unsigned q;
    struct vfe_daxguest_file *f;
};

/* A plain READ or WRITE through the device ops. */
static ssize_t plain_piece(void *ctx, bool write, uint64_t off, uint8_t *buf, size_t n)
{
    struct dg_plain *p = ctx;
    const struct vfe_daxguest_ops *ops = p->g->cfg.ops;
    if (write)
        return ops->write(p->g->cfg.opaque, p->q, p->f->nodeid, p->f->fh, off, buf, (uint32_t)n);
    return ops->read(p->g->cfg.opaque, p->q, p->f->nodeid, p->f->fh, off, buf, (uint32_t)n);
}

static ssize_t plain_rw(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                        uint64_t off, void *buf, size_t len, bool write)
{
    struct dg_plain p = {g, q, f};
    return dg_pieces(plain_piece, &p, write, off, buf, len, UINT32_MAX);
}

/* dax_iomap_rw over [off, off + len), inside i_size. */
static ssize_t dax_rw(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f, uint64_t off,
                      void *buf, size_t len, bool write)
{
    size_t done = 0;
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t in_range = pos & (VFE_DAXGUEST_RANGE - 1);
        size_t n = len - done;
        if (n > VFE_DAXGUEST_RANGE - in_range)
            n = (size_t)(VFE_DAXGUEST_RANGE - in_range);
        struct dg_range *r;
        int ret = get_range(g, q, f, pos, write, &r);
        if (ret < 0)
            return done ? (ssize_t)done : ret;
        uint8_t *p = g->window + r->moffset + in_range;
        if (write)
            memcpy(p, (const uint8_t *)buf + done, n);
        else
            memcpy((uint8_t *)buf + done, p, n);
        ref_put(r);
        done += n;
    }
    return (ssize_t)done;
}

ssize_t vfe_daxguest_read(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                          uint64_t off, void *buf, size_t len)
{
    if (len > SSIZE_MAX)
        return -EINVAL;
    if (!f->dax) {
        DG_COUNT(g, plain_reads);
        return plain_rw(g, q, f, off, buf, len, false);
    }
    DG_COUNT(g, dax_reads);
    pthread_rwlock_rdlock(&f->ilock);
    uint64_t size = __atomic_load_n(&f->size, __ATOMIC_ACQUIRE);
    ssize_t r = 0;
    if (off < size) {
        if (len > size - off)
            len = (size_t)(size - off);
        r = dax_rw(g, q, f, off, buf, len, false);
    }
    pthread_rwlock_unlock(&f->ilock);
    return r;
}

static ssize_t plain_write(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                           uint64_t off, const void *buf, size_t len)
{
    DG_COUNT(g, plain_writes);
    ssize_t r = plain_rw(g, q, f, off, (void *)buf, len, true);
    if (r < 0)
        return r;
    uint64_t end = off + (uint64_t)r;
    uint64_t size = __atomic_load_n(&f->size, __ATOMIC_ACQUIRE);
    while (end > size && !__atomic_compare_exchange_n(&f->size, &size, end, false, __ATOMIC_ACQ_REL,
                                                      __ATOMIC_ACQUIRE))
        ;
    return r;
}

ssize_t vfe_daxguest_write(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                           uint64_t off, const void *buf, size_t len)
{
    if (len > SSIZE_MAX || off + len < off)
        return -EINVAL;
    pthread_rwlock_wrlock(&f->ilock);
    ssize_t r;
    uint64_t size = __atomic_load_n(&f->size, __ATOMIC_ACQUIRE);
    if (!f->dax || off + len > size) {
        /* file_extending_write: never through the window. */
        r = plain_write(g, q, f, off, buf, len);
    } else {
        DG_COUNT(g, dax_writes);
        r = dax_rw(g, q, f, off, (void *)buf, len, true);
    }
    pthread_rwlock_unlock(&f->ilock);
    return r;
}

/* ---- Files --------------------------------------------------------------------------- */

struct vfe_daxguest_file *vfe_daxguest_file_add(struct vfe_daxguest *g, uint64_t nodeid,
                                                uint64_t fh, const struct fuse_attr *attr)
{
    struct vfe_daxguest_file *f = g_new0(struct vfe_daxguest_file, 1);
    f->g = g;
    f->nodeid = nodeid;
    f->fh = fh;
    f->dax = g->window && g->nranges && (attr->flags & FUSE_ATTR_DAX);
    f->size = attr->size;
    pthread_rwlock_init(&f->ilock, NULL);
    pthread_rwlock_init(&f->sem, NULL);
    pthread_mutex_lock(&g->lock);
    link_add_tail(&f->files, &g->files);
    pthread_mutex_unlock(&g->lock);
    return f;
}

bool vfe_daxguest_file_dax(const struct vfe_daxguest_file *f)
{
    return f->dax;
}

uint64_t vfe_daxguest_file_size(const struct vfe_daxguest_file *f)
{
    return __atomic_load_n(&f->size, __ATOMIC_ACQUIRE);
}

uint64_t vfe_daxguest_file_nodeid(const struct vfe_daxguest_file *f)
{
    return f->nodeid;
}

uint64_t vfe_daxguest_file_fh(const struct vfe_daxguest_file *f)
{
    return f->fh;
}

static void file_free(struct vfe_daxguest_file *f)
{
    pthread_rwlock_destroy(&f->ilock);
    pthread_rwlock_destroy(&f->sem);
    g_free(f->tree);
    g_free(f);
}

/* fuse_dax_inode_cleanup / inode_reclaim_dmap_range. */
int vfe_daxguest_evict(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f)
{
    pthread_mutex_lock(&g->lock);
    f->evicting = true;
    while (f->refs)
        pthread_cond_wait(&g->pin_wait, &g->lock);
    link_del(&f->files);
    pthread_mutex_unlock(&g->lock);

    int ret = 0;
    pthread_rwlock_wrlock(&f->sem);
    g_autofree struct fuse_removemapping_one *e =
        g_new(struct fuse_removemapping_one, VFE_DAXGUEST_REMOVE_MAX);
    g_autofree struct dg_range **batch = g_new(struct dg_range *, VFE_DAXGUEST_REMOVE_MAX);
    uint32_t n = 0;
    for (uint64_t i = 0; i <= f->ntree; i++) {
        struct dg_range *r = i < f->ntree ? f->tree[i] : NULL;
        if (r) {
            f->tree[i] = NULL;
            e[n] =
                (struct fuse_removemapping_one){.moffset = r->moffset, .len = VFE_DAXGUEST_RANGE};
            batch[n++] = r;
        }
        if (n && (n == VFE_DAXGUEST_REMOVE_MAX || i == f->ntree)) {
            int rr = send_remove(g, q, f, e, n);
            if (rr < 0 && ret == 0)
                ret = rr;
            pthread_mutex_lock(&g->lock);
            for (uint32_t k = 0; k < n; k++) {
                busy_del_locked(g, batch[k]);
                free_range_locked(g, batch[k]);
            }
            pthread_mutex_unlock(&g->lock);
            n = 0;
        }
    }
    __atomic_store_n(&f->nr, 0, __ATOMIC_RELEASE);
    pthread_rwlock_unlock(&f->sem);
    file_free(f);
    return ret;
}

/* ---- The guest ----------------------------------------------------------------------- */

int vfe_daxguest_new(const struct vfe_daxguest_config *cfg, struct vfe_daxguest **out)
{
    if (!cfg->ops || (cfg->window && (cfg->window_size % VFE_DAXGUEST_RANGE)))
        return -EINVAL;
    struct vfe_daxguest *g = g_new0(struct vfe_daxguest, 1);
    g->cfg = *cfg;
    g->window = cfg->window;
    g->nranges = cfg->window ? (unsigned)(cfg->window_size / VFE_DAXGUEST_RANGE) : 0;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->range_wait, NULL);
    pthread_cond_init(&g->pin_wait, NULL);
    pthread_cond_init(&g->kick_wait, NULL);
    link_init(&g->free_list);
    link_init(&g->busy_list);
    link_init(&g->files);
    g->ranges = g_new0(struct dg_range, g->nranges ? g->nranges : 1);
    for (unsigned i = 0; i < g->nranges; i++) {
        struct dg_range *r = &g->ranges[i];
        r->moffset = (uint64_t)i * VFE_DAXGUEST_RANGE;
        r->refcnt = 1;
        link_add_tail(&r->link, &g->free_list);
    }
    g->nr_free = g->nranges;
    g->st.nranges = g->nranges;
    if (g->nranges && cfg->bg == VFE_DAXGUEST_BG_THREAD) {
        int r = pthread_create(&g->worker, NULL, worker_main, g);
        if (r) {
            vfe_daxguest_free(g);
            return -r;
        }
        g->worker_started = true;
    }
    *out = g;
    return 0;
}

void vfe_daxguest_free(struct vfe_daxguest *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_broadcast(&g->kick_wait);
    pthread_cond_broadcast(&g->range_wait);
    pthread_mutex_unlock(&g->lock);
    if (g->worker_started)
        pthread_join(g->worker, NULL);
    while (!link_empty(&g->files)) {
        struct vfe_daxguest_file *f = container_of(g->files.next, struct vfe_daxguest_file, files);
        link_del(&f->files);
        file_free(f);
    }
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->range_wait);
    pthread_cond_destroy(&g->pin_wait);
    pthread_cond_destroy(&g->kick_wait);
    g_free(g->ranges);
    g_free(g);
}

void vfe_daxguest_get_stats(struct vfe_daxguest *g, struct vfe_daxguest_stats *st)
{
    pthread_mutex_lock(&g->lock);
    uint64_t *dst = (uint64_t *)st;
    const uint64_t *src = (const uint64_t *)&g->st;
    /* The counters are the leading uint64_t fields. */
    for (size_t i = 0; i < offsetof(struct vfe_daxguest_stats, nranges) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    st->nranges = g->nranges;
    st->free_ranges = g->nr_free;
    st->busy_ranges = g->nr_busy;
    pthread_mutex_unlock(&g->lock);
}

static unsigned list_offsets(struct vfe_daxguest *g, struct dg_link *h, uint64_t *m, unsigned max)
{
    unsigned n = 0;
    pthread_mutex_lock(&g->lock);
    for (struct dg_link *l = h->next; l != h; l = l->next) {
        if (n < max)
            m[n] = container_of(l, struct dg_range, link)->moffset;
        n++;
    }
    pthread_mutex_unlock(&g->lock);
    return n;
}

unsigned vfe_daxguest_busy_list(struct vfe_daxguest *g, uint64_t *moffsets, unsigned max)
{
    return list_offsets(g, &g->busy_list, moffsets, max);
}

unsigned vfe_daxguest_free_list(struct vfe_daxguest *g, uint64_t *moffsets, unsigned max)
{
    return list_offsets(g, &g->free_list, moffsets, max);
}

int64_t vfe_daxguest_mapped_at(struct vfe_daxguest_file *f, uint64_t off, bool *writable)
{
    uint64_t index = off >> DG_SHIFT;
    int64_t m = -1;
    pthread_rwlock_rdlock(&f->sem);
    struct dg_range *r = index < f->ntree ? f->tree[index] : NULL;
    if (r) {
        m = (int64_t)r->moffset;
        if (writable)
            *writable = r->writable;
    }
    pthread_rwlock_unlock(&f->sem);
    return m;
}

/* ---- The device side over a vfe_fuse ------------------------------------------------- */

#define DG_BOUNCE (256u << 10)

struct dg_fq {
    pthread_mutex_t lock; /* one request at a time on the queue */
    uint64_t gpa;         /* bounce buffer; protected by lock */
    uint8_t *hva;
};

struct vfe_daxguest_fuse {
    struct vfe_fuse *fuse;
    struct vfe_mem *mem;
    unsigned nq; /* request queues; q[0] is hiprio */
    uint32_t max_io;
    struct dg_fq *q;
};

int vfe_daxguest_fuse_new(struct vfe_fuse *fuse, struct vfe_mem *mem, unsigned nqueues,
                          uint32_t max_io, struct vfe_daxguest_fuse **out)
{
    if (!nqueues)
        return -EINVAL;
    struct vfe_daxguest_fuse *df = g_new0(struct vfe_daxguest_fuse, 1);
    df->fuse = fuse;
    df->mem = mem;
    df->nq = nqueues;
    df->max_io = max_io && max_io < DG_BOUNCE ? max_io : DG_BOUNCE;
    df->q = g_new0(struct dg_fq, nqueues + 1);
    int r = 0;
    for (unsigned i = 0; i <= nqueues; i++) {
        pthread_mutex_init(&df->q[i].lock, NULL);
        if (r == 0 && i > 0) {
            r = vfe_mem_alloc(mem, DG_BOUNCE, 4096, &df->q[i].gpa);
            if (r == 0)
                df->q[i].hva = vfe_mem_gpa_to_hva(mem, df->q[i].gpa, DG_BOUNCE);
        }
    }
    if (r < 0) {
        vfe_daxguest_fuse_free(df);
        return r;
    }
    *out = df;
    return 0;
}

void vfe_daxguest_fuse_free(struct vfe_daxguest_fuse *df)
{
    if (!df)
        return;
    for (unsigned i = 0; i <= df->nq; i++) {
        if (df->q[i].hva)
            vfe_mem_free_block(df->mem, df->q[i].gpa);
        pthread_mutex_destroy(&df->q[i].lock);
    }
    g_free(df->q);
    g_free(df);
}

static int dg_call(struct vfe_daxguest_fuse *df, unsigned q, struct vfe_fuse_op *op)
{
    if (q > df->nq)
        return -EINVAL;
    pthread_mutex_lock(&df->q[q].lock);
    int r = vfe_fuse_call(df->fuse, q, op);
    pthread_mutex_unlock(&df->q[q].lock);
    return r;
}

static int dg_setupmapping(void *opaque, unsigned q, uint64_t nodeid, uint64_t foffset,
                           uint64_t len, uint64_t flags, uint64_t moffset)
{
    struct fuse_setupmapping_in in = {
        .fh = UINT64_MAX, .foffset = foffset, .len = len, .flags = flags, .moffset = moffset};
    struct vfe_fuse_op op = {
        .opcode = FUSE_SETUPMAPPING, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in)};
    return dg_call(opaque, q, &op);
}

static int dg_removemapping(void *opaque, unsigned q, uint64_t nodeid,
                            const struct fuse_removemapping_one *e, uint32_t count)
{
    if (count == 0 || count > VFE_DAXGUEST_REMOVE_MAX)
        return -EINVAL;
    /* u32 count, then the packed 16-byte entries. */
    uint8_t buf[4 + 16 * VFE_DAXGUEST_REMOVE_MAX];
    memcpy(buf, &count, 4);
    memcpy(buf + 4, e, 16ull * count);
    struct vfe_fuse_op op = {
        .opcode = FUSE_REMOVEMAPPING, .nodeid = nodeid, .arg = buf, .arg_len = 4 + 16 * count};
    return dg_call(opaque, q, &op);
}

/* One READ or WRITE of at most max_io bytes through the queue's bounce buffer. */
static ssize_t dg_io_one(struct vfe_daxguest_fuse *df, unsigned q, bool write, uint64_t nodeid,
                         uint64_t fh, uint64_t off, uint8_t *buf, uint32_t n)
{
    struct dg_fq *fq = &df->q[q];
    struct vfe_sg sg = {fq->gpa, n};
    struct fuse_read_in ri = {.fh = fh, .offset = off, .size = n};
    struct fuse_write_in wi = {.fh = fh, .offset = off, .size = n};
    struct fuse_write_out wo = {0};
    struct vfe_fuse_op op = {.opcode = write ? FUSE_WRITE : FUSE_READ, .nodeid = nodeid};
    if (write) {
        op.arg = &wi;
        op.arg_len = sizeof(wi);
        op.in_data = &sg;
        op.in_data_cnt = 1;
        op.out_arg = &wo;
        op.out_arg_len = sizeof(wo);
    } else {
        op.arg = &ri;
        op.arg_len = sizeof(ri);
        op.out_data = &sg;
        op.out_data_cnt = 1;
    }
    pthread_mutex_lock(&fq->lock);
    if (write)
        memcpy(fq->hva, buf, n);
    int r = vfe_fuse_call(df->fuse, q, &op);
    uint32_t got = write ? wo.size : op.data_len;
    if (r == 0 && (got > n || (write && op.out_arg_got != sizeof(wo))))
        r = -EPROTO;
    if (r == 0 && !write)
        memcpy(buf, fq->hva, got);
    pthread_mutex_unlock(&fq->lock);
    return r < 0 ? r : (ssize_t)got;
}

struct dg_io_ctx {
    struct vfe_daxguest_fuse *df;
    unsigned q;
    uint64_t nodeid, fh;
};

static ssize_t dg_io_piece(void *ctx, bool write, uint64_t off, uint8_t *buf, size_t n)
{
    struct dg_io_ctx *c = ctx;
    return dg_io_one(c->df, c->q, write, c->nodeid, c->fh, off, buf, (uint32_t)n);
}

static ssize_t dg_io(void *opaque, unsigned q, bool write, uint64_t nodeid, uint64_t fh,
                     uint64_t off, uint8_t *buf, uint32_t len)
{
    struct vfe_daxguest_fuse *df = opaque;
    if (q == 0 || q > df->nq)
        return -EINVAL;
    struct dg_io_ctx c = {df, q, nodeid, fh};
    return dg_pieces(dg_io_piece, &c, write, off, buf, len, df->max_io);
}

static ssize_t dg_read(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                       void *buf, uint32_t len)
{
    return dg_io(opaque, q, false, nodeid, fh, off, buf, len);
}

static ssize_t dg_write(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                        const void *buf, uint32_t len)
{
    return dg_io(opaque, q, true, nodeid, fh, off, (uint8_t *)buf, len);
}

const struct vfe_daxguest_ops vfe_daxguest_fuse_ops = {
    .setupmapping = dg_setupmapping,
    .removemapping = dg_removemapping,
    .read = dg_read,
    .write = dg_write,
};

int vfe_daxguest_open(struct vfe_daxguest *g, struct vfe_daxguest_fuse *df, unsigned q,
                      uint64_t parent, const char *name, uint32_t flags,
                      struct vfe_daxguest_file **out)
{
    struct fuse_entry_out e = {0};
    struct vfe_fuse_op lk = {.opcode = FUSE_LOOKUP,
                             .nodeid = parent,
                             .name = name,
                             .out_arg = &e,
                             .out_arg_len = sizeof(e)};
    int r = dg_call(df, q, &lk);
    if (r < 0)
        return r;
    if (lk.out_arg_got != sizeof(e) || e.nodeid == 0)
        return -EPROTO;
    struct fuse_open_in oi = {.flags = flags};
    struct fuse_open_out oo = {0};
    struct vfe_fuse_op op = {.opcode = FUSE_OPEN,
                             .nodeid = e.nodeid,
                             .arg = &oi,
                             .arg_len = sizeof(oi),
                             .out_arg = &oo,
                             .out_arg_len = sizeof(oo)};
    r = dg_call(df, q, &op);
    if (r == 0 && op.out_arg_got != sizeof(oo))
        r = -EPROTO;
    if (r < 0) {
        struct fuse_forget_in fi = {.nlookup = 1};
        struct vfe_fuse_op fo = {.opcode = FUSE_FORGET,
                                 .nodeid = e.nodeid,
                                 .arg = &fi,
                                 .arg_len = sizeof(fi),
                                 .flags = VFE_OP_NO_REPLY};
        dg_call(df, 0, &fo);
        return r;
    }
    *out = vfe_daxguest_file_add(g, e.nodeid, oo.fh, &e.attr);
    return 0;
}

int vfe_daxguest_close(struct vfe_daxguest_fuse *df, unsigned q, uint64_t nodeid, uint64_t fh)
{
    struct fuse_release_in ri = {.fh = fh};
    struct vfe_fuse_op op = {
        .opcode = FUSE_RELEASE, .nodeid = nodeid, .arg = &ri, .arg_len = sizeof(ri)};
    int r = dg_call(df, q, &op);
    struct fuse_forget_in fi = {.nlookup = 1};
    struct vfe_fuse_op fo = {.opcode = FUSE_FORGET,
                             .nodeid = nodeid,
                             .arg = &fi,
                             .arg_len = sizeof(fi),
                             .flags = VFE_OP_NO_REPLY};
    int r2 = dg_call(df, 0, &fo);
    return r < 0 ? r : r2;
}

int vfe_daxguest_getattr(struct vfe_daxguest_fuse *df, unsigned q, uint64_t nodeid,
                         struct fuse_attr_out *out)
{
    struct fuse_getattr_in gi = {0};
    struct vfe_fuse_op op = {.opcode = FUSE_GETATTR,
                             .nodeid = nodeid,
                             .arg = &gi,
                             .arg_len = sizeof(gi),
                             .out_arg = out,
                             .out_arg_len = sizeof(*out)};
    return dg_call(df, q, &op);
}

int vfe_daxguest_fsync(struct vfe_daxguest_fuse *df, unsigned q, uint64_t nodeid, uint64_t fh)
{
    struct fuse_fsync_in fi = {.fh = fh};
    struct vfe_fuse_op op = {
        .opcode = FUSE_FSYNC, .nodeid = nodeid, .arg = &fi, .arg_len = sizeof(fi)};
    return dg_call(df, q, &op);
}
