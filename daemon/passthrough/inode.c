/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The inode table: one O_PATH fd per host object the client knows, keyed by
 * (st_dev, st_ino, mnt_id), addressed by the client through node ids that are
 * table indices plus a generation, never pointers.
 *
 * Everything here is protected by pt_itab.lock. The table is chunked so an
 * inode's address is stable while an operation holds a reference to it. The
 * client's lookup count (nlookup) and our reference count (refs) are kept
 * apart: FORGET can only bring nlookup to zero (never below), and an inode is
 * freed only when both are zero, so a FORGET racing an operation on the same
 * node frees nothing that operation still uses.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "pt_i.h"

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
    assert(idx < t->next_fresh && t->chunks[idx >> PT_CHUNK_SHIFT]);
    return t->chunks[idx >> PT_CHUNK_SHIFT] + (idx & (PT_CHUNK_SIZE - 1));
}

int pt_itab_init(struct pt_itab *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->next_fresh = 1; /* index 0 is never used: 0 ends hash chains and free lists */
    t->nbuckets = PT_HASH_MIN;
    t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
    return t->buckets ? 0 : -ENOMEM;
}

static void pt_hash_insert_locked(struct pt_itab *t, struct pt_inode *i)
{
    size_t b = pt_hash_key(i->dev, i->ino, i->mnt_id) & (t->nbuckets - 1);

    i->hnext = t->buckets[b];
    t->buckets[b] = i->idx;
}

static void pt_hash_remove_locked(struct pt_itab *t, struct pt_inode *i)
{
    size_t b = pt_hash_key(i->dev, i->ino, i->mnt_id) & (t->nbuckets - 1);
    uint32_t *link = &t->buckets[b];

    while (*link) {
        struct pt_inode *cur = pt_slot_locked(t, *link);
        if (cur == i) {
            *link = i->hnext;
            i->hnext = 0;
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

static struct pt_inode *pt_slot_alloc_locked(struct pt_fs *fs)
{
    struct pt_itab *t = &fs->itab;
    struct pt_inode *i;

    if (t->free_head) {
        i = pt_slot_locked(t, t->free_head);
        t->free_head = i->fnext;
        i->fnext = 0;
        return i;
    }
    if (t->next_fresh >= PT_MAX_SLOTS)
        return NULL;
    uint32_t c = t->next_fresh >> PT_CHUNK_SHIFT;
    struct pt_inode *chunk = t->chunks[c];
    if (!chunk) {
        chunk = calloc(PT_CHUNK_SIZE, sizeof(*chunk));
        if (!chunk)
            return NULL;
        for (uint32_t k = 0; k < PT_CHUNK_SIZE; k++) {
            chunk[k].fs = fs;
            chunk[k].idx = (c << PT_CHUNK_SHIFT) | k;
            chunk[k].fd = -1;
            pthread_mutex_init(&chunk[k].lock_mu, NULL);
        }
        t->chunks[c] = chunk;
    }
    return &chunk[t->next_fresh++ & (PT_CHUNK_SIZE - 1)];
}

/* Unhashes a LIVE inode with no users, returns its fd for closing outside the lock. */
static int pt_inode_free_locked(struct pt_itab *t, struct pt_inode *i)
{
    int fd = i->fd;

    assert(i->live && i->refs == 0 && i->nlookup == 0);
    assert(i->owners == NULL && i->nhandles == 0); /* handles hold references */
    pt_hash_remove_locked(t, i);
    i->live = false;
    i->fd = -1;
    i->gen++;
    i->fnext = t->free_head;
    t->free_head = i->idx;
    t->count--;
    return fd;
}

static void pt_inode_close_fd(struct pt_fs *fs, int fd)
{
    if (fd >= 0) {
        close(fd);
        pt_fd_unreserve(fs);
    }
}

/* After pt_inode_free_locked, without the table lock: its fd, its DAX mappings. */
static void pt_inode_gone(struct pt_fs *fs, int fd, uint64_t nodeid)
{
    if (fd < 0)
        return;
    pt_inode_close_fd(fs, fd);
    pt_dax_inode_gone(fs, nodeid);
}

int pt_inode_get(struct pt_fs *fs, uint64_t nodeid, struct pt_inode **out)
{
    struct pt_itab *t = &fs->itab;
    uint64_t idx = nodeid & 0xffffffffu;
    uint32_t gen = (uint32_t)(nodeid >> 32);
    struct pt_inode *i;
    int ret = -ESTALE;

    *out = NULL;
    if (idx == 0 || idx >= PT_MAX_SLOTS)
        return -ESTALE;
    pthread_mutex_lock(&t->lock);
    if (idx < t->next_fresh) {
        i = pt_slot_locked(t, (uint32_t)idx);
        if (i->live && i->gen == gen) {
            i->refs++;
            *out = i;
            ret = 0;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return ret;
}

void pt_inode_ref(struct pt_inode *i)
{
    pthread_mutex_lock(&i->fs->itab.lock);
    assert(i->live && i->refs > 0);
    i->refs++;
    pthread_mutex_unlock(&i->fs->itab.lock);
}

void pt_inode_put(struct pt_inode *i)
{
    struct pt_fs *fs = i->fs;
    int fd = -1;

    uint64_t nodeid = 0;

    pthread_mutex_lock(&fs->itab.lock);
    assert(i->live && i->refs > 0);
    if (--i->refs == 0 && i->nlookup == 0) {
        nodeid = pt_inode_nodeid(i);
        fd = pt_inode_free_locked(&fs->itab, i);
    }
    pthread_mutex_unlock(&fs->itab.lock);
    pt_inode_gone(fs, fd, nodeid);
}

int pt_inode_intern(struct pt_fs *fs, int fd, const struct statx *st, bool count_lookup,
                    struct pt_inode **out)
{
    struct pt_itab *t = &fs->itab;
    dev_t dev = makedev(st->stx_dev_major, st->stx_dev_minor);
    struct pt_inode *i;
    int ret;

    *out = NULL;
    pthread_mutex_lock(&t->lock);
    i = pt_hash_find_locked(t, dev, st->stx_ino, st->stx_mnt_id);
    if (i) {
        i->refs++;
        if (count_lookup)
            i->nlookup++;
        pthread_mutex_unlock(&t->lock);
        close(fd); /* a temporary fd, never counted in the budget */
        *out = i;
        return 0;
    }
    ret = pt_fd_reserve(fs);
    if (ret < 0)
        goto unlock;
    i = pt_slot_alloc_locked(fs);
    if (!i) {
        pt_fd_unreserve(fs);
        ret = -ENFILE;
        goto unlock;
    }
    i->fd = fd;
    i->type = st->stx_mode & S_IFMT;
    i->dev = dev;
    i->ino = st->stx_ino;
    i->mnt_id = st->stx_mnt_id;
    i->live = true;
    i->refs = 1;
    i->nlookup = count_lookup ? 1 : 0;
    atomic_store(&i->cap_clean, false);
    t->count++;
    pt_hash_insert_locked(t, i);
    pt_hash_grow_locked(t);
    pthread_mutex_unlock(&t->lock);
    *out = i;
    return 0;

unlock:
    pthread_mutex_unlock(&t->lock);
    close(fd);
    return ret;
}

void pt_inode_forget(struct pt_fs *fs, uint64_t nodeid, uint64_t n)
{
    struct pt_itab *t = &fs->itab;
    uint64_t idx = nodeid & 0xffffffffu;
    uint32_t gen = (uint32_t)(nodeid >> 32);
    int fd = -1;

    if (idx == 0 || idx >= PT_MAX_SLOTS)
        return;
    pthread_mutex_lock(&t->lock);
    if (idx < t->next_fresh) {
        struct pt_inode *i = pt_slot_locked(t, (uint32_t)idx);
        if (i->live && i->gen == gen) {
            /* The client's count is untrusted: clamp, never underflow. */
            i->nlookup -= n < i->nlookup ? n : i->nlookup;
            if (i->nlookup == 0 && i->refs == 0)
                fd = pt_inode_free_locked(t, i);
        }
    }
    pthread_mutex_unlock(&t->lock);
    pt_inode_gone(fs, fd, nodeid);
}

void pt_itab_reset(struct pt_fs *fs)
{
    struct pt_itab *t = &fs->itab;

    pthread_mutex_lock(&t->lock);
    for (uint32_t idx = 1; idx < t->next_fresh; idx++) {
        struct pt_inode *i = pt_slot_locked(t, idx);
        if (!i->live || i == fs->root)
            continue;
        i->nlookup = 0;
        /* Inodes still referenced (by handles being torn down) go with their last put. */
        if (i->refs == 0) {
            /* The window was reset before: no mapping is left to unmap. */
            pt_dax_inode_forget(fs, pt_inode_nodeid(i));
            pt_inode_close_fd(fs, pt_inode_free_locked(t, i));
        }
    }
    fs->root->nlookup = 0;
    pthread_mutex_unlock(&t->lock);
}

void pt_itab_destroy(struct pt_fs *fs)
{
    struct pt_itab *t = &fs->itab;

    for (uint32_t c = 0; c < PT_MAX_CHUNKS; c++) {
        struct pt_inode *chunk = t->chunks[c];
        if (!chunk)
            continue;
        for (uint32_t k = 0; k < PT_CHUNK_SIZE; k++) {
            if (chunk[k].live && chunk[k].fd >= 0)
                close(chunk[k].fd);
            pthread_mutex_destroy(&chunk[k].lock_mu);
        }
        free(chunk);
        t->chunks[c] = NULL;
    }
    free(t->buckets);
    t->buckets = NULL;
    pthread_mutex_destroy(&t->lock);
}

size_t pt_fs_inode_count(const struct pt_fs *fs)
{
    struct pt_itab *t = (struct pt_itab *)&fs->itab;
    size_t n;

    pthread_mutex_lock(&t->lock);
    n = t->count;
    pthread_mutex_unlock(&t->lock);
    return n;
}
