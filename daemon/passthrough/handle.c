/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The handle table: open files and directories, addressed by the client as
 * fh = index | generation << 32.
 *
 * The hot path (READ/WRITE) takes no lock: the chunk pointer is published with
 * release ordering and never freed before pt_fs_free, and a slot is referenced
 * with a compare-and-swap on its state word that checks generation, CLOSING
 * and a non-zero count at once (see the state diagram in pt_handle_i.h). Only
 * allocating and freeing a slot take pt_htab.lock.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_inode_i.h"
#include "pt_slots_i.h"

static void pt_hslot_init(void *slot, uint32_t idx, void *fs)
{
    struct pt_handle *h = slot;

    h->fs = fs;
    h->idx = idx;
    h->fd = -1;
    pthread_mutex_init(&h->lock, NULL);
    atomic_init(&h->state, 0);
}

int pt_htab_init(struct pt_fs *fs)
{
    struct pt_htab *t = &fs->htab; /* zeroed with fs */

    pthread_mutex_init(&t->lock, NULL);
    pt_slots_init(&t->slots, sizeof(struct pt_handle), offsetof(struct pt_handle, fnext),
                  pt_hslot_init, fs);
    return 0;
}

/* A handle of inode i opens: the inode counts its open handles. */
static void pt_handle_inode_opened(struct pt_inode *i)
{
    pthread_mutex_lock(pt_inode_lock(i));
    i->nhandles++;
    pthread_mutex_unlock(pt_inode_lock(i));
}

/* A handle of inode i is freed: the last one closes the POSIX lock owners'
 * open file descriptions (lock.c), which drops their locks on the host. */
static void pt_handle_inode_closed(struct pt_inode *i)
{
    struct pt_lock_owner *list = NULL;

    pthread_mutex_lock(pt_inode_lock(i));
    if (--i->nhandles == 0) {
        list = i->owners;
        i->owners = NULL;
        atomic_store(&i->lock_lost, false); /* the guest closed what it locked */
    }
    pthread_mutex_unlock(pt_inode_lock(i));
    while (list) {
        struct pt_lock_owner *o = list;
        list = o->next;
        close(o->fd); /* drops every lock of this owner on the host */
        pt_fd_unreserve(i->fs);
        free(o);
    }
}

/*
 * Fills the FREE slot h with an open file of ino (referenced here) and makes
 * it OPEN at generation gen: nobody else can reference the slot until then.
 */
static void pt_handle_publish(struct pt_htab *t, struct pt_handle *h, struct pt_inode *ino,
                              int fd, int flags, bool is_dir, uint64_t gen)
{
    h->fd = fd;
    h->flags = flags;
    h->is_dir = is_dir;
    pt_inode_ref(ino);
    pt_handle_inode_opened(ino);
    h->ino = ino;
    h->nodeid = pt_inode_nodeid(ino);
    atomic_store_explicit(&h->state, (gen << 32) | 1, memory_order_release);
    atomic_fetch_add(&t->count, 1);
}

int pt_handle_new(struct pt_fs *fs, struct pt_inode *ino, int fd, int flags, bool is_dir,
                  uint64_t *fh_out)
{
    struct pt_htab *t = &fs->htab;
    struct pt_handle *h;
    uint64_t gen;

    pthread_mutex_lock(&t->lock);
    h = pt_slots_alloc_locked(&t->slots);
    /* FREE, so nobody else writes state: a generation above what a previous
     * process handed out (t->gen_base, raised by a restore). */
    if (h && (atomic_load(&h->state) >> 32) < t->gen_base)
        atomic_store(&h->state, (uint64_t)t->gen_base << 32);
    pthread_mutex_unlock(&t->lock);
    if (!h) {
        close(fd);
        pt_fd_unreserve(fs);
        return -ENFILE;
    }
    gen = atomic_load(&h->state) >> 32;
    pt_handle_publish(t, h, ino, fd, flags, is_dir, gen);
    *fh_out = (uint64_t)h->idx | (gen << 32);
    return 0;
}

int pt_handle_get(struct pt_fs *fs, uint64_t fh, uint64_t nodeid, struct pt_handle **out)
{
    struct pt_htab *t = &fs->htab;
    uint64_t idx = fh & 0xffffffffu;
    uint64_t gen = fh >> 32;
    struct pt_handle *h;
    uint64_t s;

    *out = NULL;
    if (idx == 0 || idx >= PT_MAX_SLOTS)
        return -EBADF;
    h = pt_slots_at(&t->slots, (uint32_t)idx);
    if (!h)
        return -EBADF;
    s = atomic_load_explicit(&h->state, memory_order_acquire);
    do {
        if ((s >> 32) != gen || (s & PT_H_CLOSING) || (s & PT_H_REFMASK) == 0)
            return -EBADF;
        if ((s & PT_H_REFMASK) == PT_H_REFMASK)
            return -EBUSY; /* cannot happen with bounded threads; never wrap */
    } while (!atomic_compare_exchange_weak_explicit(&h->state, &s, s + 1, memory_order_acquire,
                                                    memory_order_acquire));
    /* A handle belongs to one node: a mismatching node id is a confused client. */
    if (nodeid && h->nodeid != nodeid) {
        pt_handle_put(h);
        return -EBADF;
    }
    *out = h;
    return 0;
}

static void pt_handle_free(struct pt_handle *h)
{
    struct pt_fs *fs = h->fs;
    struct pt_htab *t = &fs->htab;
    struct pt_inode *ino = h->ino;

    pt_handle_inode_closed(ino);
    if (h->fd >= 0) {
        close(h->fd);
        pt_fd_unreserve(fs);
    }
    h->fd = -1;
    h->ino = NULL;
    h->nodeid = 0;
    atomic_fetch_sub(&t->count, 1);
    /* Next generation, FREE; then back on the free list. */
    uint64_t gen = (atomic_load(&h->state) >> 32) + 1;
    atomic_store_explicit(&h->state, (gen & 0xffffffffu) << 32, memory_order_release);
    pthread_mutex_lock(&t->lock);
    pt_slots_free_locked(&t->slots, h->idx);
    pthread_mutex_unlock(&t->lock);
    pt_inode_put(ino);
}

void pt_handle_put(struct pt_handle *h)
{
    uint64_t s = atomic_fetch_sub_explicit(&h->state, 1, memory_order_acq_rel);

    assert((s & PT_H_REFMASK) > 0);
    if ((s & PT_H_REFMASK) == 1) {
        /* Only the base reference, dropped after CLOSING is set, can be last. */
        assert(s & PT_H_CLOSING);
        pt_handle_free(h);
    }
}

int pt_handle_close(struct pt_fs *fs, uint64_t fh, uint64_t nodeid)
{
    struct pt_handle *h;
    int ret = pt_handle_get(fs, fh, nodeid, &h);

    if (ret < 0)
        return ret;
    uint64_t s = atomic_fetch_or_explicit(&h->state, PT_H_CLOSING, memory_order_acq_rel);
    if (s & PT_H_CLOSING) {
        /* Lost a race with another RELEASE of the same fh. */
        pt_handle_put(h);
        return -EBADF;
    }
    pt_handle_put(h); /* ours */
    pt_handle_put(h); /* the base reference */
    return 0;
}

/* ---- Saved state (pt_state_save.c, pt_state_load.c) ---------------------------------- */

int pt_handle_restore(struct pt_fs *fs, uint32_t idx, uint32_t gen, struct pt_inode *ino, int fd,
                      int flags, bool is_dir)
{
    struct pt_htab *t = &fs->htab;
    struct pt_handle *h;

    if (idx == 0 || idx >= PT_MAX_SLOTS)
        return -EINVAL;
    pthread_mutex_lock(&t->lock);
    int ret = pt_slots_reach_locked(&t->slots, idx);
    if (ret < 0) {
        pthread_mutex_unlock(&t->lock);
        return ret;
    }
    h = pt_slots_at(&t->slots, idx);
    uint64_t s = atomic_load(&h->state);
    pthread_mutex_unlock(&t->lock);
    if (s & PT_H_REFMASK)
        return -EEXIST;
    h->fnext = 0;
    pt_handle_publish(t, h, ino, fd, flags, is_dir, gen);
    return 0;
}

static bool pt_hslot_unused(void *slot, uint32_t gen_floor)
{
    struct pt_handle *h = slot;
    uint64_t s = atomic_load(&h->state);

    if (s & PT_H_REFMASK)
        return false;
    if ((s >> 32) < gen_floor)
        atomic_store(&h->state, (uint64_t)gen_floor << 32);
    return true;
}

void pt_htab_restore_finish(struct pt_fs *fs, uint32_t gen_floor)
{
    struct pt_htab *t = &fs->htab;

    pthread_mutex_lock(&t->lock);
    t->gen_base = gen_floor;
    pt_slots_refree_locked(&t->slots, pt_hslot_unused, gen_floor);
    pthread_mutex_unlock(&t->lock);
}

/*
 * fn on each slot ever handed out, with its state read once. The slot count is
 * read under the lock; slots never move, so the walk itself needs none.
 */
static void pt_htab_walk(struct pt_htab *t, void (*fn)(void *ctx, struct pt_handle *h, uint64_t s),
                         void *ctx)
{
    uint32_t n;

    pthread_mutex_lock(&t->lock);
    n = t->slots.next_fresh;
    pthread_mutex_unlock(&t->lock);
    for (uint32_t idx = 1; idx < n; idx++) {
        struct pt_handle *h = pt_slots_at(&t->slots, idx);
        if (h)
            fn(ctx, h, atomic_load(&h->state));
    }
}

static bool pt_handle_is_open(uint64_t s)
{
    return (s & PT_H_REFMASK) && !(s & PT_H_CLOSING);
}

struct pt_htab_image {
    void (*fn)(void *ctx, const struct pt_handle *h);
    void *ctx;
    uint32_t floor;
};

static void pt_htab_image_slot(void *ctx, struct pt_handle *h, uint64_t s)
{
    struct pt_htab_image *im = ctx;

    if ((uint32_t)(s >> 32) >= im->floor)
        im->floor = (uint32_t)(s >> 32) + 1;
    if (pt_handle_is_open(s))
        im->fn(im->ctx, h);
}

void pt_htab_image(struct pt_fs *fs, void (*fn)(void *ctx, const struct pt_handle *h), void *ctx,
                   uint32_t *gen_floor)
{
    struct pt_htab_image im = {fn, ctx, 0};

    pt_htab_walk(&fs->htab, pt_htab_image_slot, &im);
    if (gen_floor)
        *gen_floor = im.floor;
}

static void pt_htab_reset_slot(void *ctx, struct pt_handle *h, uint64_t s)
{
    if (pt_handle_is_open(s))
        pt_handle_close(ctx, (uint64_t)h->idx | (s & 0xffffffff00000000ull), 0);
}

void pt_htab_reset(struct pt_fs *fs)
{
    pt_htab_walk(&fs->htab, pt_htab_reset_slot, fs);
}

static void pt_hslot_fini(void *slot)
{
    pthread_mutex_destroy(&((struct pt_handle *)slot)->lock);
}

void pt_htab_destroy(struct pt_fs *fs)
{
    struct pt_htab *t = &fs->htab;

    pt_htab_reset(fs);
    pt_slots_destroy(&t->slots, pt_hslot_fini);
    pthread_mutex_destroy(&t->lock);
}
