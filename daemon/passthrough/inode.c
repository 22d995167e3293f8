/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The inode table: one O_PATH fd or file handle per host object the client
 * knows, keyed by (st_dev, st_ino, mnt_id), addressed by the client through
 * node ids that are table indices plus a generation, never pointers.
 *
 * Everything here is protected by pt_itab.lock but an inode's reference word
 * (pt_inode.rs): an operation on a known node id references and releases its
 * inode with atomics alone, so queue threads do not meet on the table lock
 * (see pt_inode_i.h). The table is chunked so an inode's address is stable while an
 * operation holds a reference to it, and a slot's memory is never freed
 * before the table. The
 * client's lookup count (nlookup) and our reference count (refs) are kept
 * apart: FORGET can only bring nlookup to zero (never below), and an inode is
 * freed only when both are zero, so a FORGET racing an operation on the same
 * node frees nothing that operation still uses.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "passthrough.h"
#include "pt_dax_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_inode_i.h"
#include "pt_slots_i.h"
#include "vufs_util.h"

#define PT_HASH_MIN 1024u

static size_t pt_hash_key(dev_t dev, ino_t ino, uint64_t mnt_id)
{
    uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)dev + 0x632be59bd9b4e019ull) * 0xff51afd7ed558ccdull;
    h ^= (mnt_id + 0x1234567ull) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return (size_t)h;
}

/* Invariant: every index below next_fresh has its chunk allocated. */
static struct pt_inode *pt_slot_locked(struct pt_itab *t, uint32_t idx)
{
    return pt_slots_get_locked(&t->slots, idx);
}

static void pt_islot_init(void *slot, uint32_t idx, void *fs)
{
    struct pt_inode *i = slot;

    i->fs = fs;
    i->idx = idx;
    i->fd = -1;
}

int pt_itab_init(struct pt_fs *fs)
{
    struct pt_itab *t = &fs->itab; /* zeroed with fs */

    pthread_mutex_init(&t->lock, NULL);
    pt_slots_init(&t->slots, sizeof(struct pt_inode), offsetof(struct pt_inode, fnext),
                  pt_islot_init, fs);
    t->nbuckets = PT_HASH_MIN;
    t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
    return t->buckets ? 0 : -ENOMEM;
}

static void pt_hash_insert_locked(struct pt_itab *t, struct pt_inode *i)
{
    size_t b = pt_hash_key(i->dev, i->ino, i->mnt_id) & (t->nbuckets - 1);

    i->hnext = t->buckets[b];
    t->buckets[b] = i->idx;
    i->hashed = true;
}

static void pt_hash_remove_locked(struct pt_itab *t, struct pt_inode *i)
{
    size_t b = pt_hash_key(i->dev, i->ino, i->mnt_id) & (t->nbuckets - 1);
    uint32_t *link = &t->buckets[b];

    if (!i->hashed)
        return; /* a stale inode, unhashed already */
    while (*link) {
        struct pt_inode *cur = pt_slot_locked(t, *link);
        if (cur == i) {
            *link = i->hnext;
            i->hnext = 0;
            i->hashed = false;
            return;
        }
        link = &cur->hnext;
    }
    assert(!"inode missing from its hash chain");
}

/* Doubles the bucket array when chains get long; failure only costs speed. */
static void pt_hash_grow_locked(struct pt_itab *t)
{
    size_t n = t->nbuckets * 2;
    uint32_t *nb;

    if (t->count < t->nbuckets * 2)
        return;
    nb = calloc(n, sizeof(*nb));
    if (!nb)
        return;
    for (size_t b = 0; b < t->nbuckets; b++) {
        uint32_t idx = t->buckets[b];
        while (idx) {
            struct pt_inode *i = pt_slot_locked(t, idx);
            uint32_t next = i->hnext;
            size_t nbk = pt_hash_key(i->dev, i->ino, i->mnt_id) & (n - 1);
            i->hnext = nb[nbk];
            nb[nbk] = idx;
            idx = next;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->nbuckets = n;
}

static struct pt_inode *pt_hash_find_locked(struct pt_itab *t, dev_t dev, ino_t ino,
                                            uint64_t mnt_id)
{
    size_t b = pt_hash_key(dev, ino, mnt_id) & (t->nbuckets - 1);

    for (uint32_t idx = t->buckets[b]; idx;) {
        struct pt_inode *i = pt_slot_locked(t, idx);
        if (i->ino == ino && i->dev == dev && i->mnt_id == mnt_id)
            return i;
        idx = i->hnext;
    }
    return NULL;
}

/* What a freed inode held, released outside the table lock. */
struct pt_inode_rest {
    int fd;
    int cached_fd; /* from the fd cache */
    struct pt_mount *mnt;
    struct pt_fh fh;
    uint64_t nodeid; /* the freed node id (its DAX mappings go too), 0 = none */
};
static const struct pt_inode_rest pt_rest_none = {.fd = -1, .cached_fd = -1, .mnt = NULL};

/* The reference word of a LIVE inode at generation gen with refs references. */
static uint64_t pt_irs(uint32_t gen, uint64_t refs)
{
    return (uint64_t)gen << 32 | PT_I_LIVE | refs;
}

/* Unhashes a LIVE inode with no users (its reference word already 0); its fd
 * or handle goes to rest. */
static void pt_inode_free_locked(struct pt_itab *t, struct pt_inode *i, struct pt_inode_rest *rest)
{
    assert(i->live && atomic_load(&i->rs) == 0 && i->nlookup == 0);
    assert(i->owners == NULL && i->nhandles == 0); /* handles hold references */
    assert(rest->fd < 0 && !rest->mnt);
    pt_hash_remove_locked(t, i);
    rest->fd = i->fd;
    rest->mnt = i->mnt;
    rest->fh = i->fh;
    rest->nodeid = pt_inode_nodeid(i);
    if (i->mnt)
        rest->cached_fd = pt_fdc_drop_locked(i->fs, i);
    i->live = false;
    i->fd = -1;
    i->mnt = NULL;
    memset(&i->fh, 0, sizeof(i->fh));
    i->gen++;
    pt_slots_free_locked(&t->slots, i->idx);
    t->count--;
}

/*
 * Frees a LIVE inode at generation gen when the client has forgotten it and no
 * operation holds it: the reference word goes from gen | LIVE | 0 to 0, which
 * fails, and nothing is freed, when a reference was taken meanwhile (or the
 * inode is another generation's). True when freed.
 */
static bool pt_inode_try_free_locked(struct pt_itab *t, struct pt_inode *i, uint32_t gen,
                                     struct pt_inode_rest *rest)
{
    uint64_t expect = pt_irs(gen, 0);

    if (!i->live || i->gen != gen || i->nlookup != 0 ||
        !atomic_compare_exchange_strong(&i->rs, &expect, 0))
        return false;
    pt_inode_free_locked(t, i, rest);
    return true;
}

static void pt_inode_release_rest(struct pt_fs *fs, struct pt_inode_rest *rest)
{
    if (rest->fd >= 0) {
        close(rest->fd);
        pt_fd_unreserve(fs);
    }
    if (rest->cached_fd >= 0) {
        close(rest->cached_fd);
        pt_fd_unreserve(fs);
    }
    if (rest->mnt) {
        pt_fh_free(&rest->fh);
        pt_mnt_put(fs, rest->mnt);
    }
    rest->fd = -1;
    rest->cached_fd = -1;
    rest->mnt = NULL;
    if (rest->nodeid)
        pt_dax_inode_gone(fs, rest->nodeid);
    rest->nodeid = 0;
}

int pt_inode_get(struct pt_fs *fs, uint64_t nodeid, struct pt_inode **out)
{
    struct pt_itab *t = &fs->itab;
    uint64_t idx = nodeid & 0xffffffffu;
    uint32_t gen = (uint32_t)(nodeid >> 32);
    struct pt_inode *i;
    uint64_t s;

    *out = NULL;
    if (idx == 0 || idx >= PT_MAX_SLOTS)
        return -ESTALE;
    /* No lock: a slot of a chunk never allocated is NULL, one never used or
     * freed is not LIVE, one reused is another generation. */
    i = pt_slots_at(&t->slots, (uint32_t)idx);
    if (!i)
        return -ESTALE;
    s = atomic_load_explicit(&i->rs, memory_order_acquire);
    do {
        if ((s & ~PT_I_REFMASK) != pt_irs(gen, 0))
            return -ESTALE;
        if ((s & PT_I_REFMASK) == PT_I_REFMASK)
            return -EBUSY; /* cannot happen with a bounded fd budget; never wrap */
    } while (!atomic_compare_exchange_weak_explicit(&i->rs, &s, s + 1, memory_order_acquire,
                                                    memory_order_acquire));
    *out = i;
    return 0;
}

void pt_inode_ref(struct pt_inode *i)
{
    uint64_t s = atomic_fetch_add_explicit(&i->rs, 1, memory_order_relaxed);

    assert((s & PT_I_LIVE) && (s & PT_I_REFMASK) > 0);
    (void)s;
}

void pt_inode_put(struct pt_inode *i)
{
    struct pt_fs *fs = i->fs;
    struct pt_inode_rest rest = pt_rest_none;
    /* Sequentially consistent with the nlookup read below and with FORGET's
     * write of nlookup then read of rs: at least one of the two sees both
     * counts at zero and tries the free, under the lock. */
    uint64_t s = atomic_fetch_sub(&i->rs, 1);

    assert((s & PT_I_LIVE) && (s & PT_I_REFMASK) > 0);
    if ((s & PT_I_REFMASK) != 1 || atomic_load(&i->nlookup) != 0)
        return;
    pthread_mutex_lock(&fs->itab.lock);
    pt_inode_try_free_locked(&fs->itab, i, (uint32_t)(s >> 32), &rest);
    pthread_mutex_unlock(&fs->itab.lock);
    pt_inode_release_rest(fs, &rest);
}

/*
 * With handles: a hash hit whose handle differs from the object's is an old
 * inode whose number the host reused (a handle, unlike an fd, does not keep its
 * object alive). It is unhashed: its node id keeps failing with ESTALE, and
 * the new object gets an inode of its own.
 */
static struct pt_inode *pt_find_current_locked(struct pt_itab *t, dev_t dev, ino_t ino,
                                               uint64_t mnt_id, const struct pt_fh *fh)
{
    struct pt_inode *i = pt_hash_find_locked(t, dev, ino, mnt_id);

    if (i && fh && i->mnt && !pt_fh_equal(&i->fh, fh)) {
        pt_hash_remove_locked(t, i);
        return NULL;
    }
    return i;
}

int pt_inode_find(struct pt_fs *fs, const struct statx *st, bool count_lookup,
                  struct pt_inode **out)
{
    struct pt_itab *t = &fs->itab;
    struct pt_inode *i;

    pthread_mutex_lock(&t->lock);
    i = pt_hash_find_locked(t, makedev(st->stx_dev_major, st->stx_dev_minor), st->stx_ino,
                            st->stx_mnt_id);
    /* Only an O_PATH fd pins the number: an inode kept by its file handle may name
     * a reused inode number, which the opening path finds out by the handle. */
    if (i && i->fd < 0)
        i = NULL;
    if (i) {
        atomic_fetch_add(&i->rs, 1); /* hashed, so LIVE: the lock keeps it so */
        if (count_lookup)
            i->nlookup++;
    }
    pthread_mutex_unlock(&t->lock);
    *out = i;
    return i ? 0 : -ENOENT;
}

int pt_inode_get_type(struct pt_fs *fs, uint64_t nodeid, mode_t type, int wrong_type,
                      struct pt_inode **out)
{
    int ret = pt_inode_get(fs, nodeid, out);

    if (ret == 0 && (*out)->type != type) {
        pt_inode_put(*out);
        *out = NULL;
        ret = wrong_type;
    }
    return ret;
}

int pt_inode_get_fd(struct pt_fs *fs, uint64_t nodeid, struct pt_inode **i, struct pt_ifd *f)
{
    int ret = pt_inode_get(fs, nodeid, i);

    return ret < 0 ? ret : pt_inode_fd(fs, *i, f);
}

int pt_inode_intern_fd(struct pt_fs *fs, int fd, struct statx *st, bool count_lookup,
                       struct pt_inode **out)
{
    int ret = pt_statx_fd(fd, st);

    if (ret < 0) {
        close(fd);
        return ret;
    }
    return pt_inode_intern(fs, fd, st, count_lookup, out);
}

int pt_inode_intern(struct pt_fs *fs, int fd, const struct statx *st, bool count_lookup,
                    struct pt_inode **out)
{
    struct pt_itab *t = &fs->itab;
    dev_t dev = makedev(st->stx_dev_major, st->stx_dev_minor);
    mode_t type = st->stx_mode & S_IFMT;
    struct pt_inode_rest unused = pt_rest_none;
    struct pt_fh fh = {0};
    struct pt_mount *mnt = NULL;
    struct pt_inode *i;
    int ret;

    *out = NULL;
    if (fs->handles != PT_HANDLES_NEVER) {
        /* Made before the lookup: a system call, never under the table lock. */
        ret = pt_fh_make(fs, fd, type, st->stx_mnt_id, &fh, &mnt);
        if (ret < 0 && fs->handles == PT_HANDLES_MANDATORY) {
            close(fd);
            return ret;
        }
        /* prefer: without a handle, this object keeps an O_PATH fd. */
    }
    pthread_mutex_lock(&t->lock);
    i = pt_find_current_locked(t, dev, st->stx_ino, st->stx_mnt_id, mnt ? &fh : NULL);
    if (i) {
        atomic_fetch_add(&i->rs, 1); /* hashed, so LIVE: the lock keeps it so */
        if (count_lookup)
            i->nlookup++;
        ret = 0;
        goto unlock;
    }
    if (!mnt) {
        ret = pt_fd_reserve(fs);
        if (ret < 0)
            goto unlock;
    }
    i = pt_slots_alloc_locked(&fs->itab.slots);
    if (!i) {
        if (!mnt)
            pt_fd_unreserve(fs);
        ret = -ENFILE;
        goto unlock;
    }
    if (i->gen < t->gen_base)
        i->gen = t->gen_base; /* above what a previous process handed out */
    if (mnt) {
        i->fd = -1;
        i->mnt = mnt;
        i->fh = fh; /* the handle replaces fd, closed below */
        mnt = NULL;
    } else {
        i->fd = TAKE_FD(fd);
    }
    i->type = (uint16_t)type;
    i->dev = dev;
    i->ino = st->stx_ino;
    i->mnt_id = st->stx_mnt_id;
    i->live = true;
    i->nlookup = count_lookup ? 1 : 0;
    atomic_store(&i->cap_clean, false);
    atomic_store(&i->lock_lost, false);
    /* Last: a lock-free get sees the inode only once it is whole. */
    atomic_store_explicit(&i->rs, pt_irs(i->gen, 1), memory_order_release);
    t->count++;
    pt_hash_insert_locked(t, i);
    pt_hash_grow_locked(t);
    ret = 0;

unlock:
    pthread_mutex_unlock(&t->lock);
    /* A temporary fd (never counted in the budget) or a handle nobody needs. */
    if (fd >= 0)
        close(fd);
    if (mnt) {
        unused.mnt = mnt;
        unused.fh = fh;
        pt_inode_release_rest(fs, &unused);
    }
    *out = ret == 0 ? i : NULL;
    return ret;
}

void pt_inode_forget(struct pt_fs *fs, uint64_t nodeid, uint64_t n)
{
    struct pt_itab *t = &fs->itab;
    uint64_t idx = nodeid & 0xffffffffu;
    uint32_t gen = (uint32_t)(nodeid >> 32);
    struct pt_inode_rest rest = pt_rest_none;

    if (idx == 0 || idx >= PT_MAX_SLOTS)
        return;
    pthread_mutex_lock(&t->lock);
    if (idx < t->slots.next_fresh) {
        struct pt_inode *i = pt_slot_locked(t, (uint32_t)idx);
        if (i->live && i->gen == gen) {
            /* The client's count is untrusted: clamp, never underflow. Then,
             * sequentially consistent with pt_inode_put, try the free. */
            uint64_t nl = i->nlookup;
            i->nlookup = nl - (n < nl ? n : nl);
            pt_inode_try_free_locked(t, i, gen, &rest);
        }
    }
    pthread_mutex_unlock(&t->lock);
    pt_inode_release_rest(fs, &rest);
}

/* ---- Saved state (pt_state_save.c, pt_state_load.c) ---------------------------------- */

int pt_inode_restore(struct pt_fs *fs, const struct pt_inode_image *im, struct pt_inode **out)
{
    struct pt_itab *t = &fs->itab;
    int ret = 0;

    *out = NULL;
    if (im->idx < 2 || im->idx >= PT_MAX_SLOTS || (im->fd < 0) == (im->mnt == NULL))
        return -EINVAL;
    pthread_mutex_lock(&t->lock);
    ret = pt_slots_reach_locked(&t->slots, im->idx);
    if (ret < 0)
        goto unlock;
    struct pt_inode *i = pt_slot_locked(t, im->idx);
    if (i->live) {
        ret = -EEXIST;
        goto unlock;
    }
    if (im->hashed && pt_hash_find_locked(t, im->dev, im->ino, im->mnt_id)) {
        ret = -EEXIST;
        goto unlock;
    }
    i->fd = im->fd;
    i->mnt = im->mnt;
    if (im->mnt)
        i->fh = im->fh;
    else
        memset(&i->fh, 0, sizeof(i->fh));
    i->type = (uint16_t)im->type;
    i->dev = im->dev;
    i->ino = im->ino;
    i->mnt_id = im->mnt_id;
    i->gen = im->gen;
    i->live = true;
    i->nlookup = im->nlookup;
    i->fnext = 0;
    atomic_store(&i->cap_clean, false);
    atomic_store(&i->lock_lost, false);
    atomic_store_explicit(&i->rs, pt_irs(i->gen, 0), memory_order_release);
    t->count++;
    if (im->hashed) {
        pt_hash_insert_locked(t, i);
        pt_hash_grow_locked(t);
    }
    *out = i;
unlock:
    pthread_mutex_unlock(&t->lock);
    return ret;
}

static bool pt_islot_unused(void *slot, uint32_t gen_floor)
{
    struct pt_inode *i = slot;

    if (i->live)
        return false;
    /* A node id the old process handed out and freed must stay stale. */
    if (i->gen < gen_floor)
        i->gen = gen_floor;
    return true;
}

void pt_itab_restore_finish(struct pt_fs *fs, uint32_t gen_floor)
{
    struct pt_itab *t = &fs->itab;

    pthread_mutex_lock(&t->lock);
    t->gen_base = gen_floor;
    pt_slots_refree_locked(&t->slots, pt_islot_unused, gen_floor);
    pthread_mutex_unlock(&t->lock);
}

void pt_itab_image(struct pt_fs *fs, void (*fn)(void *ctx, const struct pt_inode *i), void *ctx,
                   uint32_t *gen_floor)
{
    struct pt_itab *t = &fs->itab;
    uint32_t floor = 0;

    pthread_mutex_lock(&t->lock);
    for (uint32_t idx = 1; idx < t->slots.next_fresh; idx++) {
        struct pt_inode *i = pt_slot_locked(t, idx);
        if (i->gen >= floor)
            floor = i->gen + 1;
        if (i->live)
            fn(ctx, i);
    }
    pthread_mutex_unlock(&t->lock);
    if (gen_floor)
        *gen_floor = floor;
}

void pt_itab_reset(struct pt_fs *fs)
{
    struct pt_itab *t = &fs->itab;

    pthread_mutex_lock(&t->lock);
    for (uint32_t idx = 1; idx < t->slots.next_fresh; idx++) {
        struct pt_inode *i = pt_slot_locked(t, idx);
        if (!i->live || i == fs->root)
            continue;
        i->nlookup = 0;
        /* Inodes still referenced (by handles being torn down) go with their last put. */
        struct pt_inode_rest rest = pt_rest_none;
        if (pt_inode_try_free_locked(t, i, i->gen, &rest)) {
            /* The window was reset before: no mapping is left to unmap. */
            pt_dax_inode_forget(fs, rest.nodeid);
            rest.nodeid = 0;
            pt_inode_release_rest(fs, &rest); /* close and free: nothing blocks */
        }
    }
    fs->root->nlookup = 0;
    pthread_mutex_unlock(&t->lock);
}

static void pt_islot_fini(void *slot)
{
    struct pt_inode *i = slot;

    if (i->live && i->fd >= 0)
        close(i->fd);
    if (i->live && i->mnt)
        pt_fh_free(&i->fh); /* the mount fds go with pt_mnts_destroy */
}

void pt_itab_destroy(struct pt_fs *fs)
{
    struct pt_itab *t = &fs->itab;

    pt_slots_destroy(&t->slots, pt_islot_fini);
    free(t->buckets);
    t->buckets = NULL;
    pthread_mutex_destroy(&t->lock);
}
