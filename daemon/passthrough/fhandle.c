/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inode file handles (--inode-file-handles prefer|mandatory).
 *
 * An O_PATH fd per known inode ties the number of inodes a guest may know to
 * RLIMIT_NOFILE. With file handles an inode keeps the host's struct
 * file_handle (name_to_handle_at) instead, a few bytes, and an operation that
 * needs an fd opens the handle again with open_by_handle_at() for the length of
 * the operation. The inode table stays keyed by (st_dev, st_ino, mnt_id): no fd
 * is needed to find an inode.
 *
 * open_by_handle_at() resolves a handle on the filesystem of its mount fd
 * without any path walk or search permission check (hence CAP_DAC_READ_SEARCH),
 * so a handle could name any object of that filesystem, inside the share or
 * not. Two rules keep that power inside the share:
 *   - only handles this file made are ever opened: name_to_handle_at() on an
 *     object the daemon reached inside the share; a handle never comes from
 *     the client (node ids are table indices);
 *   - the mount fd is an object of the share itself (the share's root, or the
 *     root of a submount reached inside the share), never found by path.
 * A handle also names one object for good: the generation it carries makes it
 * stale (ESTALE) once the object is deleted, where an O_PATH fd would have kept
 * the object alive.
 *
 * Mount fds: open_by_handle_at() wants a non-O_PATH fd on the handle's mount.
 * The first object the daemon meets on a mount (the share's root or a
 * submount's root) is reopened read-only through /proc/self/fd if it is a
 * directory or a regular file (never a FIFO, socket or device); the mount fd
 * lives while inodes with handles on that mount do.
 */
#include <assert.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_inode_i.h"

/* struct file_handle with room for the largest handle. */
struct pt_fh_buf {
    struct file_handle h;
    unsigned char bytes[PT_FH_MAX];
};

int pt_mnts_init(struct pt_mnts *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
    return 0;
}

void pt_mnts_destroy(struct pt_fs *fs)
{
    struct pt_mount *m = fs->mnts.head;

    while (m) {
        struct pt_mount *next = m->next;
        close(m->fd);
        free(m);
        m = next;
    }
    fs->mnts.head = NULL;
    fs->mnts.count = 0;
    pthread_mutex_destroy(&fs->mnts.lock);
}

static struct pt_mount *pt_mnt_find_locked(struct pt_mnts *t, uint64_t mnt_id)
{
    for (struct pt_mount *m = t->head; m; m = m->next)
        if (m->mnt_id == mnt_id)
            return m;
    return NULL;
}

/*
 * A referenced mount fd for mnt_id; fd (an object on that mount, of type
 * type) becomes the mount fd when there is none yet. The list lock is held
 * across the reopen: it happens once per mount, on a directory or regular file.
 */
static int pt_mnt_get(struct pt_fs *fs, uint64_t mnt_id, int fd, mode_t type, struct pt_mount **out)
{
    struct pt_mnts *t = &fs->mnts;
    char num[PT_PROC_PATH_MAX];
    struct pt_mount *m;
    int ret = 0;

    *out = NULL;
    pthread_mutex_lock(&t->lock);
    m = pt_mnt_find_locked(t, mnt_id);
    if (m) {
        m->refs++;
        goto unlock;
    }
    if (type != S_IFDIR && type != S_IFREG) {
        ret = -EOPNOTSUPP; /* a FIFO, socket or device is never opened */
        goto unlock;
    }
    ret = pt_fd_reserve(fs);
    if (ret < 0)
        goto unlock;
    m = calloc(1, sizeof(*m));
    if (!m) {
        pt_fd_unreserve(fs);
        ret = -ENOMEM;
        goto unlock;
    }
    m->fd = openat(fs->proc_self_fd, pt_proc_name(num, fd),
                   (type == S_IFDIR ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_NOCTTY | O_NONBLOCK |
                       O_CLOEXEC);
    if (m->fd < 0) {
        ret = -errno;
        free(m);
        m = NULL;
        pt_fd_unreserve(fs);
        goto unlock;
    }
    m->mnt_id = mnt_id;
    m->refs = 1;
    m->next = t->head;
    t->head = m;
    t->count++;
unlock:
    pthread_mutex_unlock(&t->lock);
    *out = m;
    return ret;
}

struct pt_mount *pt_mnt_adopt(struct pt_fs *fs, uint64_t mnt_id, int fd)
{
    struct pt_mnts *t = &fs->mnts;
    struct pt_mount *m = calloc(1, sizeof(*m));

    if (!m || pt_fd_reserve(fs) < 0) {
        free(m);
        close(fd);
        return NULL;
    }
    m->mnt_id = mnt_id;
    m->fd = fd;
    m->refs = 1;
    pthread_mutex_lock(&t->lock);
    m->next = t->head;
    t->head = m;
    t->count++;
    pthread_mutex_unlock(&t->lock);
    return m;
}

void pt_mnt_put(struct pt_fs *fs, struct pt_mount *m)
{
    struct pt_mnts *t = &fs->mnts;
    bool last;

    if (!m)
        return;
    pthread_mutex_lock(&t->lock);
    last = --m->refs == 0;
    if (last) {
        struct pt_mount **link = &t->head;
        while (*link != m)
            link = &(*link)->next;
        *link = m->next;
        t->count--;
    }
    pthread_mutex_unlock(&t->lock);
    if (last) {
        close(m->fd);
        pt_fd_unreserve(fs);
        free(m);
    }
}

static const unsigned char *pt_fh_bytes(const struct pt_fh *fh)
{
    return fh->len > PT_FH_INLINE ? fh->u.ext : fh->u.inl;
}

void pt_fh_free(struct pt_fh *fh)
{
    if (fh->len > PT_FH_INLINE)
        free(fh->u.ext);
    memset(fh, 0, sizeof(*fh));
}

bool pt_fh_equal(const struct pt_fh *a, const struct pt_fh *b)
{
    return a->type == b->type && a->len == b->len &&
           memcmp(pt_fh_bytes(a), pt_fh_bytes(b), a->len) == 0;
}

int pt_fh_make(struct pt_fs *fs, int fd, mode_t type, uint64_t mnt_id, struct pt_fh *fh,
               struct pt_mount **mnt)
{
    struct pt_fh_buf b;
    int hmnt, ret;

    memset(fh, 0, sizeof(*fh));
    *mnt = NULL;
    b.h.handle_bytes = PT_FH_MAX;
    b.h.handle_type = 0;
    if (name_to_handle_at(fd, "", &b.h, &hmnt, AT_EMPTY_PATH) < 0)
        return errno == EOVERFLOW ? -EOPNOTSUPP : -errno;
    if (b.h.handle_bytes > PT_FH_MAX)
        return -EOPNOTSUPP; /* the kernel never does this */
    /* The handle's mount is the object's: both ids come from the same fd (a
     * kernel without STATX_MNT_ID reports 0, and the handle's id stands). */
    if (mnt_id == 0)
        mnt_id = (unsigned)hmnt;
    else if ((uint64_t)(unsigned)hmnt != mnt_id)
        return -EXDEV;
    fh->type = b.h.handle_type;
    fh->len = (uint8_t)b.h.handle_bytes;
    if (fh->len > PT_FH_INLINE) {
        fh->u.ext = malloc(fh->len);
        if (!fh->u.ext) {
            fh->len = 0;
            return -ENOMEM;
        }
        memcpy(fh->u.ext, b.bytes, fh->len);
    } else {
        memcpy(fh->u.inl, b.bytes, fh->len);
    }
    ret = pt_mnt_get(fs, mnt_id, fd, type, mnt);
    if (ret < 0)
        pt_fh_free(fh);
    return ret;
}

int pt_fh_open(const struct pt_mount *m, const struct pt_fh *fh, int flags)
{
    struct pt_fh_buf b;
    int fd;

    b.h.handle_bytes = fh->len;
    b.h.handle_type = fh->type;
    memcpy(b.bytes, pt_fh_bytes(fh), fh->len);
    fd = open_by_handle_at(m->fd, &b.h, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* ---- The fd cache ---------------------------------------------------------------- */

void pt_fdc_init(struct pt_fdc *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
}

void pt_fdc_destroy(struct pt_fs *fs)
{
    struct pt_fdc *c = &fs->fdc;

    for (unsigned k = 0; k < PT_FDC_SIZE; k++) {
        if (c->e[k].ino) {
            close(c->e[k].fd);
            c->e[k].ino->fdc_slot = 0;
            c->e[k].ino = NULL;
            c->count--;
        }
    }
    pthread_mutex_destroy(&c->lock);
}

int pt_fdc_drop_locked(struct pt_fs *fs, struct pt_inode *i)
{
    struct pt_fdc *c = &fs->fdc;
    int fd = -1;

    pthread_mutex_lock(&c->lock);
    if (i->fdc_slot) {
        struct pt_fdc_entry *e = &c->e[i->fdc_slot - 1];
        assert(e->ino == i && e->users == 0); /* borrowers hold a reference on i */
        fd = e->fd;
        e->ino = NULL;
        e->fd = -1;
        i->fdc_slot = 0;
        c->count--;
    }
    pthread_mutex_unlock(&c->lock);
    return fd;
}

void pt_fdc_unborrow(struct pt_fs *fs, uint8_t slot)
{
    struct pt_fdc *c = &fs->fdc;

    pthread_mutex_lock(&c->lock);
    assert(c->e[slot - 1].users > 0);
    c->e[slot - 1].users--;
    pthread_mutex_unlock(&c->lock);
}

/* Borrows i's cached fd if there is one. */
static bool pt_fdc_borrow_locked(struct pt_fdc *c, struct pt_inode *i, struct pt_ifd *out)
{
    struct pt_fdc_entry *e;

    if (!i->fdc_slot)
        return false;
    e = &c->e[i->fdc_slot - 1];
    e->users++;
    e->used = ++c->clock;
    out->fd = e->fd;
    out->fdc_slot = i->fdc_slot;
    return true;
}

/*
 * Puts fd (just opened from i's handle) in the cache, in a free entry or in
 * place of the least recently used idle one (whose fd goes to *evicted). false
 * when every entry is in use or the fd budget is spent: the fd stays the
 * caller's, to close after the operation.
 */
static bool pt_fdc_insert_locked(struct pt_fs *fs, struct pt_inode *i, int fd, int *evicted,
                                 struct pt_ifd *out)
{
    struct pt_fdc *c = &fs->fdc;
    struct pt_fdc_entry *victim = NULL;
    long cap = atomic_load(&fs->fd_budget) / PT_FDC_BUDGET_SHARE;
    bool room = c->count < PT_FDC_SIZE && c->count < cap;

    for (unsigned k = 0; k < PT_FDC_SIZE; k++) {
        struct pt_fdc_entry *e = &c->e[k];
        if (!e->ino) {
            if (room) {
                victim = e;
                break;
            }
            continue;
        }
        if (e->users == 0 && (!victim || e->used < victim->used))
            victim = e;
    }
    if (!victim)
        return false;
    if (victim->ino) {
        *evicted = victim->fd; /* its budget share passes to fd */
        victim->ino->fdc_slot = 0;
    } else if (pt_fd_reserve(fs) < 0) {
        return false;
    } else {
        c->count++;
    }
    victim->ino = i;
    victim->fd = fd;
    victim->users = 1;
    victim->used = ++c->clock;
    i->fdc_slot = (uint8_t)(victim - c->e + 1);
    out->fd = fd;
    out->fdc_slot = i->fdc_slot;
    return true;
}

int pt_inode_fd(struct pt_fs *fs, struct pt_inode *i, struct pt_ifd *out)
{
    struct pt_fdc *c = &fs->fdc;
    int fd, evicted = -1;
    bool cached;

    out->fs = fs;
    out->owned = false;
    out->fdc_slot = 0;
    if (i->fd >= 0) {
        out->fd = i->fd;
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    cached = pt_fdc_borrow_locked(c, i, out);
    if (cached)
        c->hits++;
    else
        c->misses++;
    pthread_mutex_unlock(&c->lock);
    if (cached)
        return 0;

    fd = pt_fh_open(i->mnt, &i->fh, O_PATH | O_NOFOLLOW);
    if (fd < 0)
        return fd;
    pthread_mutex_lock(&c->lock);
    if (pt_fdc_borrow_locked(c, i, out)) {
        /* Another thread cached one meanwhile: use it, drop ours. */
        evicted = fd;
    } else if (!pt_fdc_insert_locked(fs, i, fd, &evicted, out)) {
        out->fd = fd;
        out->owned = true;
    }
    pthread_mutex_unlock(&c->lock);
    if (evicted >= 0)
        close(evicted);
    return 0;
}
