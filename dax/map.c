/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The guest's SETUPMAPPING/REMOVEMAPPING and inode removal, as exact frontend
 * map/unmap calls.
 *
 * Every change of a slot follows one pattern (see dax_i.h, "Locking"):
 *   1. under w->lock: wait until the slot is idle, plan the change, check it fits;
 *      when the plan re-maps survivors of a split, make sure there is an fd for
 *      each of their files first (ops->open, with the lock dropped and no slot
 *      owned, then plan again);
 *   2. claim the slot (MAPPING or UNMAPPING); write the guest's stores in the
 *      store mappings about to go back to their files; for each frontend call:
 *      drop the lock, call, retake the lock, stop with -ECONNRESET if a reset
 *      happened meanwhile, else record the result in the table so the table
 *      always equals what the frontend holds; a new store mapping is filled
 *      from its file before its map;
 *   3. release the slot (MAPPED or FREE) and wake waiters.
 * Plans never change another slot, so a thread owns at most one slot, and
 * never waits for another slot while it owns one.
 *
 * The new mapping's file comes as the caller's fd (the daemon opened it when it
 * checked the caller's access); only a survivor of a split, which may belong to
 * any file, is opened here. Store mappings (store.c) keep their pages across a
 * split and an upgrade: the store is addressed by window offset, and those
 * keep it.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "dax_i.h"

/* One mapping to unmap: where it is and what the ghost list should remember. */
struct victim {
    uint32_t s;
    unsigned i;
    uint64_t moffset, len;
    uint64_t key, ridx;
    bool ghost;
    bool store, writable;    /* a store extent: its stores are written back first */
};

/* A mapping to make: the new one or a survivor of a split. */
struct piece {
    struct dax_inode *ino;
    uint64_t foffset;
    uint32_t off, len;
    bool writable;
    unsigned victim;         /* survivors: index of the victim they come from */
    int fd;                  /* the file, open; survivors: set when mapped */
    enum dax_backing backing;
    bool keep;               /* store: the pages are there already (a survivor, an upgrade) */
    bool take_shadow;        /* store, kept: a read mapping made writable needs its shadow */
};

/* What one slot change does: filled under the lock, applied without a break. */
struct plan {
    struct victim v[DAX_SLOT_MAX_EXTENTS];
    struct piece surv[2 * DAX_SLOT_MAX_EXTENTS];
    unsigned nv, ns;
    bool upgrade;
    struct piece nw;         /* the new mapping, as it will be made */
    uint64_t epoch;
};

/*
 * The fds survivors are mapped again with, one per file and access, from
 * ops->open. -errno where the open failed (such a survivor is lost, as when its
 * map fails). Closed when the change is done.
 */
#define REOPEN_MAX (2 * DAX_SLOT_MAX_EXTENTS)
struct reopen {
    uint64_t key;
    bool writable;
    int fd;
};
struct reopens {
    struct reopen e[REOPEN_MAX];
    unsigned n;
};

static uint64_t slot_base(uint32_t s)
{
    return dax_slot_base(s);
}

/*
 * The owner of the victims' (busy) slots unmaps them, in batches when the frontend
 * takes batches. Lock held; dropped around the callbacks. A failed call leaves its
 * victims mapped; *ndone (set by the caller to 0) counts the victims unmapped, in
 * order. 0, the callback's error, or -ECONNRESET.
 */
static int unmap_victims_locked(struct dax_window *w, const struct victim *v, unsigned n,
                                uint64_t epoch, unsigned *ndone)
{
    unsigned done = 0;

    while (done < n) {
        struct fuse_removemapping_one batch[DAX_UNMAP_BATCH];
        unsigned k = n - done;
        int r;

        if (!w->ops->unmap_batch || k == 1)
            k = 1;
        else if (k > DAX_UNMAP_BATCH)
            k = DAX_UNMAP_BATCH;
        for (unsigned j = 0; j < k; j++)
            batch[j] = (struct fuse_removemapping_one){ v[done + j].moffset, v[done + j].len };
        if (w->epoch != epoch)
            return -ECONNRESET;
        pthread_mutex_unlock(&w->lock);
        if (k == 1)
            r = w->ops->unmap(w->ctx, batch[0].moffset, batch[0].len);
        else
            r = w->ops->unmap_batch(w->ctx, batch, k);
        pthread_mutex_lock(&w->lock);
        if (w->epoch != epoch)
            return -ECONNRESET;
        if (r < 0) {
            w->st.unmap_errors++;
            return r;
        }
        *ndone = done + k;
        for (unsigned j = 0; j < k; j++) {
            const struct victim *x = &v[done + j];
            struct dax_inode *ino = w->slots[x->s].ext[x->i].ino;

            assert(ino && ino->key == x->key);
            if (x->ghost) {
                ino->st.unmaps++;
                w->st.unmaps++;
                dax_ghost_add_locked(w, x->key, x->ridx);
            }
            dax_extent_del_locked(w, x->s, x->i);
        }
        done += k;
    }
    return 0;
}

/*
 * A new store mapping's pages: the file's bytes (and the shadow's, when
 * writable), or for a read mapping made writable the shadow of what is there.
 * Lock held; dropped around the copy.
 */
static int fill_piece_locked(struct dax_window *w, uint32_t s, const struct piece *p,
                             uint64_t epoch)
{
    uint64_t m = slot_base(s) + p->off;
    int r = 0;

    if (w->epoch != epoch)
        return -ECONNRESET;
    pthread_mutex_unlock(&w->lock);
    if (p->keep)
        dax_store_shadow_take(&w->store, m, p->len);
    else
        r = dax_store_fill(&w->store, p->fd, p->foffset, m, p->len, p->writable);
    pthread_mutex_lock(&w->lock);
    if (r == 0 && !p->keep)
        w->st.fill_bytes += p->len;
    if (w->epoch != epoch)
        return -ECONNRESET;
    return r;
}

/* Owner of busy slot s makes one mapping. Lock held; dropped around the call. */
static int map_piece_locked(struct dax_window *w, uint32_t s, const struct piece *p,
                            uint64_t epoch)
{
    bool store = p->backing == DAX_BACK_STORE;
    uint64_t m = slot_base(s) + p->off;
    uint64_t t0, dt;
    int r;

    if (store && (!p->keep || p->take_shadow)) {
        r = fill_piece_locked(w, s, p, epoch);
        if (r < 0)
            return r;
    }
    if (w->epoch != epoch)
        return -ECONNRESET;
    pthread_mutex_unlock(&w->lock);
    t0 = vufs_now_ns();
    r = w->ops->map(w->ctx, store ? w->store.fd : p->fd, store ? m : p->foffset, m, p->len,
                    p->writable);
    dt = vufs_now_ns() - t0;
    pthread_mutex_lock(&w->lock);
    if (w->epoch != epoch)
        return -ECONNRESET;
    w->st.map_lat_count++;
    w->st.map_lat_sum_ns += dt;
    if (dt > w->st.map_lat_max_ns)
        w->st.map_lat_max_ns = dt;
    if (r < 0) {
        w->st.map_errors++;
        return r;
    }
    r = dax_extent_add_locked(w, s, p->ino, p->foffset, p->off, p->len, p->writable,
                              p->backing);
    assert(r == 0); /* the plan checked the room */
    return r;
}

static void count_new_map_locked(struct dax_window *w, struct dax_inode *ino, uint64_t foffset,
                                 bool upgrade, enum dax_backing backing)
{
    dax_inode_decay_locked(w, ino);
    if (upgrade) {
        ino->st.upgrades++;
        w->st.upgrades++;
        return;
    }
    if (backing == DAX_BACK_STORE)
        w->st.store_maps++;
    else
        w->st.direct_maps++;
    ino->st.maps++;
    ino->st.recent_maps++;
    w->st.maps++;
    w->st.recent_maps++;
    if (dax_ghost_take_locked(w, ino->key, foffset >> DAX_RANGE_SHIFT)) {
        ino->st.ghost_hits++;
        ino->st.recent_ghost_hits++;
        w->st.ghost_hits++;
        w->st.recent_ghost_hits++;
    }
    dax_activity_locked(w);
}

/* ---- One slot's change ---------------------------------------------------------------- */

static int *reopen_find(struct reopens *ro, uint64_t key, bool writable)
{
    for (unsigned i = 0; i < ro->n; i++)
        if (ro->e[i].key == key && ro->e[i].writable == writable)
            return &ro->e[i].fd;
    return NULL;
}

/*
 * Plans making [off, off + len) of the idle slot s show nw (or nothing when nw
 * is NULL), keeping the parts of old mappings outside the range as survivors.
 * 1: nothing for the frontend to do (an identical mapping with enough rights, or
 * nothing to remove); 0: pl is the plan; -ENOSPC: it would not fit the slot.
 */
static int plan_locked(struct dax_window *w, uint32_t s, uint32_t off, uint32_t len,
                       const struct piece *nw, struct plan *pl)
{
    struct dax_slot *sl = &w->slots[s];

    pl->nv = pl->ns = 0;
    pl->upgrade = false;
    pl->epoch = w->epoch;
    if (nw)
        pl->nw = *nw;
    for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++) {
        const struct dax_extent *e = &sl->ext[i];
        bool same;
        uint32_t lo;

        if (!e->ino || e->off + e->len <= off || e->off >= off + len)
            continue;
        same = nw && e->off == off && e->len == len && e->ino == nw->ino &&
               e->foffset == nw->foffset;
        if (same) {
            if (e->writable || !nw->writable)
                return 1; /* identical, rights suffice */
            pl->upgrade = true;
            /* An upgrade keeps the mapping's backing, and a store mapping its pages. */
            pl->nw.backing = (enum dax_backing)e->backing;
            pl->nw.keep = dax_extent_store(e);
            pl->nw.take_shadow = dax_extent_store(e);
        }
        lo = e->off > off ? e->off : off;
        pl->v[pl->nv++] = (struct victim){
            .s = s, .i = i, .moffset = slot_base(s) + e->off, .len = e->len,
            .key = e->ino->key, .ridx = (e->foffset + (lo - e->off)) >> DAX_RANGE_SHIFT,
            .ghost = !same, /* an upgrade re-maps the same range: not a removal */
            .store = dax_extent_store(e), .writable = e->writable,
        };
        if (e->off < off)
            pl->surv[pl->ns++] = (struct piece){ e->ino, e->foffset, e->off, off - e->off,
                                                 e->writable, pl->nv - 1, -1,
                                                 (enum dax_backing)e->backing,
                                                 dax_extent_store(e) };
        if (e->off + e->len > off + len)
            pl->surv[pl->ns++] = (struct piece){ e->ino, e->foffset + (off + len - e->off),
                                                 off + len, e->off + e->len - (off + len),
                                                 e->writable, pl->nv - 1, -1,
                                                 (enum dax_backing)e->backing,
                                                 dax_extent_store(e) };
    }
    if (!nw && pl->nv == 0)
        return 1;
    if (sl->nextents - pl->nv + pl->ns + (nw ? 1 : 0) > DAX_SLOT_MAX_EXTENTS)
        return -ENOSPC;
    return 0;
}

/*
 * Opens the files of the plan's survivors that have no fd yet: false when
 * there were none. Drops the lock around ops->open; the caller owns no slot
 * (ops->open may call back into the window) and must plan again.
 */
static bool reopen_survivors_locked(struct dax_window *w, const struct plan *pl,
                                    struct reopens *ro)
{
    unsigned first = ro->n;

    for (unsigned j = 0; j < pl->ns && ro->n < REOPEN_MAX; j++)
        if (pl->surv[j].backing == DAX_BACK_FILE &&
            !reopen_find(ro, pl->surv[j].ino->key, pl->surv[j].writable))
            ro->e[ro->n++] = (struct reopen){ pl->surv[j].ino->key, pl->surv[j].writable,
                                              -ENOENT };
    if (ro->n == first)
        return false;
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = first; i < ro->n; i++)
        ro->e[i].fd = w->ops->open(w->ctx, ro->e[i].key, ro->e[i].writable, true);
    pthread_mutex_lock(&w->lock);
    return true;
}

/* Carries out a plan for slot s (see the pattern at the top). Lock held. */
/*
 * The store extents a slot change brings (a new store mapping, the survivors
 * in the store) come from pages read before they are added: their files'
 * merges must not take a look meanwhile as covering them (sync.c).
 */
static void store_coming_locked(const struct plan *pl, bool has_new, int d)
{
    for (unsigned j = 0; j < pl->ns; j++)
        if (pl->surv[j].backing == DAX_BACK_STORE)
            pl->surv[j].ino->store_coming += (uint32_t)d;
    if (has_new && pl->nw.backing == DAX_BACK_STORE)
        pl->nw.ino->store_coming += (uint32_t)d;
}

static int apply_locked(struct dax_window *w, uint32_t s, uint32_t off, uint32_t len,
                        const struct piece *nw, struct plan *pl, struct reopens *ro)
{
    unsigned nunmapped = 0;
    int r = 0;

    dax_slot_set_state_locked(w, s, nw ? DAX_SLOT_MAPPING : DAX_SLOT_UNMAPPING);
    /* Survivors' inodes must outlive the unlocked calls even if their extents go. */
    for (unsigned j = 0; j < pl->ns; j++)
        pl->surv[j].ino->refs++;
    store_coming_locked(pl, nw != NULL, 1);

    /*
     * The guest's stores reach the file before the mapping goes. A guest
     * removes (or replaces) only a range it no longer uses, so nothing lands
     * between this and the unmap; a write-back that fails is reported at the
     * file's next fsync (dax_inode_sync), as a local file system reports a
     * page it could not write, and the unmap goes on.
     */
    for (unsigned j = 0; j < pl->nv && r == 0; j++)
        if (pl->v[j].store && pl->v[j].writable) {
            dax_extent_writeback_locked(w, s, pl->v[j].i);
            if (w->epoch != pl->epoch)
                r = -ECONNRESET;
        }
    if (r == 0)
        r = unmap_victims_locked(w, pl->v, pl->nv, pl->epoch, &nunmapped);
    /* Survivors of the victims that did go come back, even if a later unmap failed. */
    for (unsigned j = 0; j < pl->ns && r != -ECONNRESET; j++) {
        struct piece *p = &pl->surv[j];
        int rs;

        if (p->victim >= nunmapped)
            continue;
        if (p->backing == DAX_BACK_FILE) {
            int *fd = reopen_find(ro, p->ino->key, p->writable);

            if (!fd || *fd < 0) {
                w->st.map_errors++; /* its file did not open again: lost, on both sides */
                continue;
            }
            p->fd = *fd;
        }
        rs = map_piece_locked(w, s, p, pl->epoch);
        if (rs == -ECONNRESET)
            r = rs;
        else if (rs == 0)
            w->st.remaps++;
        /* else: the survivor is lost; the table says so, as the frontend does. */
    }
    if (r == 0 && nw) {
        r = map_piece_locked(w, s, &pl->nw, pl->epoch);
        if (r == 0)
            count_new_map_locked(w, pl->nw.ino, pl->nw.foffset, pl->upgrade, pl->nw.backing);
        else if (r != -ECONNRESET && pl->nw.backing == DAX_BACK_STORE && !pl->nw.keep)
            dax_store_drop(&w->store, slot_base(s) + off, len, true, pl->nw.writable);
    }
    store_coming_locked(pl, nw != NULL, -1);
    for (unsigned j = 0; j < pl->ns; j++)
        dax_inode_put_locked(w, pl->surv[j].ino);
    dax_slot_release_locked(w, s);
    return r;
}

/*
 * Opens the files the plan's store victims are written back to, where they
 * are not open yet: true when it tried one (the lock was dropped: plan again).
 * Each file is tried once per change: one that cannot be opened again loses
 * the guest's last stores, counted as a write-back error.
 */
static bool victims_fds_locked(struct dax_window *w, const struct plan *pl, uint64_t *tried,
                               unsigned *ntried)
{
    for (unsigned j = 0; j < pl->nv; j++) {
        struct dax_inode *ino = w->slots[pl->v[j].s].ext[pl->v[j].i].ino;
        bool seen = false;

        if (!pl->v[j].store || !pl->v[j].writable || ino->fd_rw >= 0)
            continue;
        for (unsigned k = 0; k < *ntried && !seen; k++)
            seen = tried[k] == ino->key;
        if (seen || *ntried == DAX_SLOT_MAX_EXTENTS)
            continue;
        tried[(*ntried)++] = ino->key;
        dax_inode_open_fds_locked(w, ino, true);
        return true;
    }
    return false;
}

/*
 * Make [off, off + len) of slot s show nw (or nothing when nw is NULL), keeping
 * the parts of old mappings outside the range. Lock held on entry and exit.
 */
static int slot_change_locked(struct dax_window *w, uint32_t s, uint32_t off, uint32_t len,
                              const struct piece *nw)
{
    struct reopens ro = { .n = 0 };
    uint64_t tried[DAX_SLOT_MAX_EXTENTS];
    unsigned ntried = 0;
    struct plan pl;
    int r;

    for (;;) {
        dax_slot_wait_idle_locked(w, s);
        r = plan_locked(w, s, off, len, nw, &pl);
        if (r != 0)
            break;
        if (!victims_fds_locked(w, &pl, tried, &ntried) &&
            !reopen_survivors_locked(w, &pl, &ro))
            break;
        /* The lock was dropped: the slot may have changed. */
    }
    if (r == 1) {
        if (nw)
            w->st.noops++;
        r = 0;
    } else if (r == 0) {
        r = apply_locked(w, s, off, len, nw, &pl, &ro);
    }
    for (unsigned i = 0; i < ro.n; i++)
        if (ro.e[i].fd >= 0)
            close(ro.e[i].fd);
    return r;
}

/* The window keeps the file of a new mapping open for write-back and merges:
 * duplicates of the request's fd (read-write ones for writable mappings). */
static int keep_fds_locked(struct dax_inode *ino, int fd, bool writable)
{
    if (ino->fd < 0) {
        ino->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (ino->fd < 0)
            return -errno;
    }
    if (writable && ino->fd_rw < 0) {
        ino->fd_rw = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (ino->fd_rw < 0)
            return -errno;
    }
    return 0;
}

int dax_setupmapping(struct dax_window *w, uint64_t key, int fd, const struct dax_setup *req)
{
    uint64_t foffset = req->foffset, len = req->len, moffset = req->moffset;
    enum dax_backing backing = req->direct ? DAX_BACK_FILE : DAX_BACK_STORE;
    struct dax_inode *ino;
    int r = 0;

    if (req->writable) {
        /* Blocks first: a full file system says so to this request, where the
         * guest's write returns it, and a direct mapping never meets a hole. */
        r = dax_prealloc(fd, foffset, len);
        if (r > 0)
            backing = DAX_BACK_STORE; /* cannot allocate ahead: not safe to map directly */
        if (r < 0) {
            pthread_mutex_lock(&w->lock);
            w->st.prealloc_errors++;
            pthread_mutex_unlock(&w->lock);
            return r;
        }
        r = 0;
    }
    pthread_mutex_lock(&w->lock);
    ino = dax_inode_get_locked(w, key);
    if (!ino) {
        pthread_mutex_unlock(&w->lock);
        return -ENOMEM;
    }
    ino->refs++;
    r = keep_fds_locked(ino, fd, req->writable);
    while (len > 0 && r == 0) {
        uint32_t s = (uint32_t)(moffset >> DAX_RANGE_SHIFT);
        uint32_t off = (uint32_t)(moffset & (DAX_RANGE_SIZE - 1));
        uint32_t plen = (uint32_t)(len < DAX_RANGE_SIZE - off ? len : DAX_RANGE_SIZE - off);
        struct piece p = { ino, foffset, off, plen, req->writable, 0, fd, backing, false, false };

        r = slot_change_locked(w, s, off, plen, &p);
        moffset += plen;
        foffset += plen;
        len -= plen;
    }
    dax_inode_put_locked(w, ino); /* nothing mapped: the fds go too */
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
    return r;
}

int dax_removemapping(struct dax_window *w, const struct fuse_removemapping_one *e,
                      unsigned count)
{
    int r = dax_remove_check(w, e, count);

    if (r < 0)
        return r;
    pthread_mutex_lock(&w->lock);
    for (unsigned k = 0; k < count && r == 0; k++) {
        uint64_t moffset = e[k].moffset, len = e[k].len;

        while (len > 0 && r == 0) {
            uint32_t s = (uint32_t)(moffset >> DAX_RANGE_SHIFT);
            uint32_t off = (uint32_t)(moffset & (DAX_RANGE_SIZE - 1));
            uint32_t plen = (uint32_t)(len < DAX_RANGE_SIZE - off ? len : DAX_RANGE_SIZE - off);

            r = slot_change_locked(w, s, off, plen, NULL);
            moffset += plen;
            len -= plen;
        }
    }
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
    return r;
}

int dax_remove_inode(struct dax_window *w, uint64_t key)
{
    struct dax_inode *ino;
    int r = 0;

    pthread_mutex_lock(&w->lock);
    ino = dax_inode_find_locked(w, key);
    if (!ino)
        goto out_unlock;
    ino->refs++;
    /* Its store mappings are written back first; the file is tried once. */
    if (ino->st.store_extents)
        dax_inode_open_fds_locked(w, ino, true);
    while (ino->ext_head != DAX_NONE) {
        uint32_t s = ino->ext_head / DAX_SLOT_MAX_EXTENTS;
        struct victim v[DAX_SLOT_MAX_EXTENTS];
        unsigned nv = 0;
        uint64_t epoch;

        if (w->resetting || dax_slot_busy(&w->slots[s])) {
            dax_slot_wait_idle_locked(w, s);
            continue; /* the owner may have changed this inode's extents */
        }
        epoch = w->epoch;
        for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++) {
            const struct dax_extent *e = &w->slots[s].ext[i];

            if (e->ino == ino)
                v[nv++] = (struct victim){
                    .s = s, .i = i, .moffset = slot_base(s) + e->off, .len = e->len,
                    .key = key, .ridx = e->foffset >> DAX_RANGE_SHIFT, .ghost = false,
                    .store = dax_extent_store(e), .writable = e->writable,
                };
        }
        unsigned done = 0;

        assert(nv > 0);
        dax_slot_set_state_locked(w, s, DAX_SLOT_UNMAPPING);
        for (unsigned j = 0; j < nv && w->epoch == epoch; j++)
            if (v[j].store && v[j].writable)
                dax_extent_writeback_locked(w, s, v[j].i);
        r = unmap_victims_locked(w, v, nv, epoch, &done);
        if (r == 0) {
            ino->st.unmaps += nv;
            w->st.unmaps += nv;
        }
        dax_slot_release_locked(w, s);
        if (r < 0)
            break;
    }
    dax_inode_put_locked(w, ino);
out_unlock:
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
    return r;
}
