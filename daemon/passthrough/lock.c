/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Real locks: GETLK, SETLK, SETLKW (POSIX locks and, with FUSE_LK_FLOCK, flock).
 *
 * POSIX locks are host OFD locks. Each (inode, lock owner) pair gets its own
 * open file description, reopened from /proc/self/fd of a handle's fd, so two
 * client processes conflict exactly as two host processes would, while one
 * process locking through several opens of the file does not conflict with
 * itself (POSIX: locks belong to the process). FLUSH (a close() in the client)
 * unlocks all of its owner's locks on the file, as POSIX close() does; the
 * descriptions are closed when the inode's last handle goes.
 * flock uses the handle's own fd: one open file description per client open.
 *
 * A SETLKW that cannot be granted at once does not hold the calling queue
 * thread: the request is parked (FLL_ASYNC) on a list served by one waiter
 * thread, which retries the non-blocking call until it succeeds or fails and
 * then sends the one reply with fll_reply_err(). Retries happen at once when
 * this daemon unlocks anything (the usual case: the holder is another client
 * process) and otherwise with a backoff from 1 ms to 50 ms (a holder on the
 * host). No blocking fcntl is ever issued, so nothing can wait forever:
 *   - INTERRUPT for the parked request ends it with EINTR;
 *   - RELEASE of its handle ends it with EBADF (the waiter holds a handle
 *     reference, so the fd stays valid until then);
 *   - reset/free ends every parked request with EINTR.
 * At most PT_MAX_WAITERS requests wait; one more gets ENOLCK.
 *
 * Waiter life: PARKED --granted/failed/cancelled--> DETACHED (off the list,
 * under pt_locks.lock) --handle put, reply sent--> freed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

#include "fll.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_inode_i.h"
#include "pt_lock_i.h"
#include "pt_ops_i.h"
#include "vufs_util.h"

#define PT_MAX_WAITERS 256
#define PT_WAIT_MIN_NS 1000000L   /* 1 ms */
#define PT_WAIT_MAX_NS 50000000L  /* 50 ms */
#define PT_OFFSET_MAX 0x7fffffffffffffffull

struct pt_waiter {
    struct pt_waiter *next;
    struct pt_inode *ino; /* of h */
    uint32_t pid;         /* the client's pid for a POSIX lock */
    struct fll_req *r;
    struct pt_handle *h; /* referenced */
    int fd;
    bool is_flock;
    int how;             /* flock */
    struct flock fl;     /* POSIX */
    uint64_t unique;
    int cancel;          /* protected by pt_locks.lock; 0 = none */
};

int pt_locks_init(struct pt_locks *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->lock, NULL);
    vufs_cond_init_monotonic(&l->cond);
    l->max = PT_MAX_WAITERS;
    return 0;
}

/* Wakes the waiter thread: something may have been unlocked. */
void pt_locks_kick(struct pt_fs *fs)
{
    struct pt_locks *l = &fs->locks;

    pthread_mutex_lock(&l->lock);
    if (l->head)
        pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

/* Under the inode lock: owner's entry on i, or NULL. */
static struct pt_lock_owner *pt_owner_find(struct pt_inode *i, uint64_t owner)
{
    struct pt_lock_owner *o;

    for (o = i->owners; o && o->owner != owner; o = o->next)
        ;
    return o;
}

/* Under the inode lock: o (zeroed) made owner's entry on i, with its fd. */
static void pt_owner_link(struct pt_inode *i, struct pt_lock_owner *o, uint64_t owner, int fd,
                          uint32_t pid)
{
    o->owner = owner;
    o->fd = fd;
    o->pid = pid;
    o->next = i->owners;
    i->owners = o;
}

/*
 * The owner's fd on the inode of h (borrowed: lives while any handle of the
 * inode is open, and the caller holds h), created on first use from h's fd.
 * Read-write when the host allows, so one owner can take read and write locks
 * whichever of its opens it uses; the open mode itself is checked by the caller.
 */
static int pt_owner_fd(struct pt_handle *h, uint64_t owner)
{
    struct pt_inode *i = h->ino;
    struct pt_lock_owner *o;
    char num[PT_PROC_PATH_MAX];
    int fd, ret;

    pthread_mutex_lock(pt_inode_lock(i));
    o = pt_owner_find(i, owner);
    if (o) {
        fd = o->fd;
        goto unlock;
    }
    ret = pt_fd_reserve(h->fs);
    if (ret < 0) {
        fd = ret;
        goto unlock;
    }
    o = calloc(1, sizeof(*o));
    pt_proc_name(num, h->fd);
    /* Same file, a new open file description; no O_TRUNC, no O_CREAT. */
    fd = -1;
    if (o && !h->fs->readonly)
        fd = openat(h->fs->proc_self_fd, num, O_RDWR | O_CLOEXEC);
    if (o && fd < 0)
        fd = openat(h->fs->proc_self_fd, num, (h->flags & O_ACCMODE) | O_CLOEXEC);
    if (fd < 0) {
        fd = o ? -errno : -ENOMEM;
        free(o);
        pt_fd_unreserve(h->fs);
        goto unlock;
    }
    pt_owner_link(i, o, owner, fd, 0);
unlock:
    pthread_mutex_unlock(pt_inode_lock(i));
    return fd;
}

void pt_lock_release_owner(struct pt_handle *h, uint64_t owner)
{
    struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
    struct pt_inode *i = h->ino;
    bool found = false;

    pthread_mutex_lock(pt_inode_lock(i));
    for (struct pt_lock_owner *o = i->owners; o; o = o->next) {
        if (o->owner == owner) {
            (void)fcntl(o->fd, F_OFD_SETLK, &fl);
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(pt_inode_lock(i));
    if (found)
        pt_locks_kick(h->fs);
}

/* Remembers which client pid holds locks through the owner fd (GETLK reports it). */
static void pt_owner_note_pid(struct pt_inode *i, int fd, uint32_t pid)
{
    pthread_mutex_lock(pt_inode_lock(i));
    for (struct pt_lock_owner *o = i->owners; o; o = o->next)
        if (o->fd == fd)
            o->pid = pid;
    pthread_mutex_unlock(pt_inode_lock(i));
}

/*
 * The kernel's list of the locks of the open file description fd,
 * /proc/self/fdinfo/FD, reached from proc_self_fd (/proc/self/fd, opened
 * before the sandbox); NULL with errno set when it cannot be opened.
 */
static FILE *pt_fdinfo_open(struct pt_fs *fs, int fd)
{
    char path[PT_PROC_PATH_MAX + 16];

    snprintf(path, sizeof(path), "../fdinfo/%d", fd);
    int dfd = openat(fs->proc_self_fd, path, O_RDONLY | O_CLOEXEC);
    if (dfd < 0)
        return NULL;
    FILE *f = fdopen(dfd, "r");
    if (!f) {
        int e = errno;
        close(dfd);
        errno = e;
    }
    return f;
}

/*
 * One line of that list, when it is a lock's: "lock:\t1: OFDLCK ADVISORY  READ
 * -1 fe:00:1234 0 EOF" gives the kind (OFDLCK, FLOCK, POSIX), type READ or
 * WRITE, the start and the inclusive end (or EOF).
 */
static bool pt_fdinfo_lock(const char *line, char kind[16], char type[16],
                           unsigned long long *start, char end[24])
{
    return strncmp(line, "lock:", 5) == 0 &&
           sscanf(line + 5, " %*d: %15s %*s %15s %*d %*s %llu %23s", kind, type, start, end) == 4;
}

/*
 * Whether the open file description fd holds a lock of exactly l's type and
 * range, from the kernel's list of its locks (pt_fdinfo_open).
 */
static bool pt_fd_holds(struct pt_fs *fs, int fd, const struct flock *l)
{
    char line[256];
    bool found = false;
    FILE *f = pt_fdinfo_open(fs, fd);

    if (!f)
        return false;
    unsigned long long want_end = l->l_len == 0 ? 0 : (unsigned long long)(l->l_start + l->l_len - 1);
    while (!found && fgets(line, sizeof(line), f)) {
        char kind[16], type[16], end[24];
        unsigned long long start, e;
        if (!pt_fdinfo_lock(line, kind, type, &start, end))
            continue;
        if (strcmp(kind, "OFDLCK") != 0 || start != (unsigned long long)l->l_start)
            continue;
        if (strcmp(type, l->l_type == F_RDLCK ? "READ" : "WRITE") != 0)
            continue;
        if (strcmp(end, "EOF") == 0)
            found = l->l_len == 0;
        else
            found = l->l_len != 0 && sscanf(end, "%llu", &e) == 1 && e == want_end;
    }
    fclose(f);
    return found;
}

/*
 * The client pid behind lock l that the owner with fd self found in its way:
 * an owner that holds l does not see l as a conflict from its own description,
 * every other owner does. When several owners hold identical locks (read
 * locks), each sees another's copy and none stands out: then the kernel's list
 * of each owner's locks decides, and any holder is a right answer, as F_GETLK
 * reports one of the conflicting locks. 0 when l belongs to nobody we know
 * (a host process).
 */
static uint32_t pt_owner_pid_of(struct pt_inode *i, int self, const struct flock *l)
{
    uint32_t pid = 0;
    bool found = false;

    pthread_mutex_lock(pt_inode_lock(i));
    for (struct pt_lock_owner *o = i->owners; o; o = o->next) {
        struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = l->l_start,
                           .l_len = l->l_len };
        if (o->fd == self || fcntl(o->fd, F_OFD_GETLK, &q) < 0)
            continue;
        if (q.l_type != l->l_type || q.l_start != l->l_start || q.l_len != l->l_len) {
            pid = o->pid;
            found = true;
            break;
        }
    }
    for (struct pt_lock_owner *o = i->owners; o && !found; o = o->next) {
        if (o->fd != self && pt_fd_holds(i->fs, o->fd, l)) {
            pid = o->pid;
            found = true;
        }
    }
    pthread_mutex_unlock(pt_inode_lock(i));
    return pid;
}

/* Client lock -> struct flock, validating type and range. */
static int pt_lk_to_flock(const struct fuse_file_lock *lk, struct flock *fl)
{
    memset(fl, 0, sizeof(*fl));
    if (lk->type != F_RDLCK && lk->type != F_WRLCK && lk->type != F_UNLCK)
        return -EINVAL;
    if (lk->start > PT_OFFSET_MAX || lk->end < lk->start)
        return -EINVAL;
    fl->l_type = (short)lk->type;
    fl->l_whence = SEEK_SET;
    fl->l_start = (off_t)lk->start;
    /* end == OFFSET_MAX (or past it) means "to the end of the file": length 0. */
    fl->l_len = lk->end >= PT_OFFSET_MAX ? 0 : (off_t)(lk->end - lk->start + 1);
    return 0;
}

int pt_op_getlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in,
                struct fuse_lk_out *out)
{
    _cleanup_handle_ struct pt_handle *h = NULL;
    struct flock fl;
    int fd, ret = pt_handle_get(pt_fs_of(r), in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    if (h->is_dir)
        return -EISDIR;
    if (atomic_load(&h->ino->lock_lost))
        return -EIO;
    ret = pt_lk_to_flock(&in->lk, &fl);
    if (ret < 0)
        return ret;
    fd = pt_owner_fd(h, in->owner);
    if (fd < 0)
        return fd;
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
        return -errno;
    memset(out, 0, sizeof(*out));
    out->lk.type = (uint32_t)fl.l_type;
    if (fl.l_type != F_UNLCK) {
        out->lk.start = (uint64_t)fl.l_start;
        out->lk.end = fl.l_len == 0 ? PT_OFFSET_MAX : (uint64_t)(fl.l_start + fl.l_len - 1);
        out->lk.pid = pt_owner_pid_of(h->ino, fd, &fl);
    }
    return 0;
}

/* One non-blocking attempt: 0 granted, 1 would block, -errno failed. */
static int pt_lock_try(struct pt_waiter *w)
{
    int ret;

    if (w->is_flock)
        ret = flock(w->fd, w->how | LOCK_NB);
    else
        ret = fcntl(w->fd, F_OFD_SETLK, &w->fl);
    if (ret == 0)
        return 0;
    if (errno == EAGAIN || errno == EACCES || errno == EWOULDBLOCK)
        return 1;
    return -errno;
}

/* The handle goes first: a client that sees the reply and closes its last
 * handle at once finds the inode's lock descriptions closed with it. */
static void pt_waiter_finish(struct pt_waiter *w, int err)
{
    pt_handle_put(w->h);
    fll_reply_err(w->r, err);
    free(w);
}

static void *pt_waiter_thread(void *arg)
{
    struct pt_fs *fs = arg;
    struct pt_locks *l = &fs->locks;
    long backoff = PT_WAIT_MIN_NS;

    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        struct pt_waiter *done = NULL, **link = &l->head;
        while (*link) {
            struct pt_waiter *w = *link;
            int res = w->cancel;
            if (!res && pt_handle_closing(w->h))
                res = -EBADF;
            if (!res) {
                res = pt_lock_try(w);
                if (res == 0 && !w->is_flock)
                    pt_owner_note_pid(w->ino, w->fd, w->pid);
            }
            if (res == 1) {
                link = &w->next;
                continue;
            }
            *link = w->next;
            l->count--;
            w->cancel = res; /* the result, from here on */
            w->next = done;
            done = w;
        }
        pthread_mutex_unlock(&l->lock);
        while (done) {
            struct pt_waiter *w = done;
            done = w->next;
            pt_waiter_finish(w, w->cancel);
        }
        pthread_mutex_lock(&l->lock);
        if (l->stop)
            break;
        if (!l->head) {
            pthread_cond_wait(&l->cond, &l->lock);
            backoff = PT_WAIT_MIN_NS;
            continue;
        }
        struct timespec ts = vufs_deadline(CLOCK_MONOTONIC, (uint64_t)backoff);
        if (pthread_cond_timedwait(&l->cond, &l->lock, &ts) == 0)
            backoff = PT_WAIT_MIN_NS; /* kicked: something changed */
        else if (backoff < PT_WAIT_MAX_NS)
            backoff *= 2;
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* Parks w; FLL_ASYNC, or -ENOLCK / -errno (w is then the caller's to free). */
static int pt_waiter_park(struct pt_fs *fs, struct pt_waiter *w)
{
    struct pt_locks *l = &fs->locks;
    int ret = FLL_ASYNC;

    pthread_mutex_lock(&l->lock);
    if (l->stop || l->count >= l->max) {
        ret = -ENOLCK;
        goto unlock;
    }
    if (!l->thread_started) {
        int err = pthread_create(&l->thread, NULL, pt_waiter_thread, fs);
        if (err) {
            ret = -err;
            goto unlock;
        }
        l->thread_started = true;
    }
    w->next = l->head;
    l->head = w;
    l->count++;
    pthread_cond_signal(&l->cond);
unlock:
    pthread_mutex_unlock(&l->lock);
    return ret;
}

int pt_op_setlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in, bool sleep)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_handle_ struct pt_handle *h = NULL;
    struct pt_waiter wt = { 0 };
    int ret = pt_handle_get(fs, in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    if (h->is_dir && !(in->lk_flags & FUSE_LK_FLOCK))
        return -EISDIR;
    if (atomic_load(&h->ino->lock_lost))
        return -EIO;
    if (in->lk_flags & FUSE_LK_FLOCK) {
        switch (in->lk.type) {
        case F_RDLCK: wt.how = LOCK_SH; break;
        case F_WRLCK: wt.how = LOCK_EX; break;
        case F_UNLCK: wt.how = LOCK_UN; break;
        default: return -EINVAL;
        }
        wt.is_flock = true;
        wt.fd = h->fd;
    } else {
        ret = pt_lk_to_flock(&in->lk, &wt.fl);
        if (ret < 0)
            return ret;
        /* fcntl(2): a read lock needs a readable open, a write lock a writable one. */
        int acc = h->flags & O_ACCMODE;
        if ((wt.fl.l_type == F_RDLCK && acc == O_WRONLY) ||
            (wt.fl.l_type == F_WRLCK && acc == O_RDONLY))
            return -EBADF;
        wt.fd = pt_owner_fd(h, in->owner);
        if (wt.fd < 0)
            return wt.fd;
    }
    wt.ino = h->ino;
    wt.pid = in->lk.pid;
    ret = pt_lock_try(&wt);
    if (ret == 0 && !wt.is_flock && wt.fl.l_type != F_UNLCK)
        pt_owner_note_pid(h->ino, wt.fd, wt.pid);
    if (ret <= 0) {
        if (ret == 0 && (wt.is_flock ? wt.how == LOCK_UN : wt.fl.l_type == F_UNLCK))
            pt_locks_kick(fs);
        return ret;
    }
    if (!sleep)
        return -EAGAIN;

    struct pt_waiter *w = malloc(sizeof(*w));
    if (!w)
        return -ENOLCK;
    *w = wt;
    w->r = r;
    w->h = h;
    w->unique = r->hdr.unique;
    ret = pt_waiter_park(fs, w);
    if (ret != FLL_ASYNC) {
        free(w);
        return ret;
    }
    h = NULL; /* the waiter owns the reference now */
    return FLL_ASYNC;
}

/*
 * Only a parked SETLKW can be interrupted; anything else runs to completion, so
 * an INTERRUPT for it is just noted (0: no reply). Never EAGAIN: the client would
 * resend it for as long as the request runs.
 */
int pt_op_interrupt(struct fll_req *r, uint64_t unique)
{
    struct pt_locks *l = &pt_fs_of(r)->locks;

    pthread_mutex_lock(&l->lock);
    for (struct pt_waiter *w = l->head; w; w = w->next) {
        if (w->unique == unique && !w->cancel) {
            w->cancel = -EINTR;
            pthread_cond_signal(&l->cond);
        }
    }
    pthread_mutex_unlock(&l->lock);
    return 0;
}

void pt_locks_detach_all(struct pt_fs *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx)
{
    struct pt_locks *l = &fs->locks;
    struct pt_waiter *list;

    pthread_mutex_lock(&l->lock);
    list = l->head;
    l->head = NULL;
    l->count = 0;
    pthread_mutex_unlock(&l->lock);
    while (list) {
        struct pt_waiter *w = list;
        list = w->next;
        fn(ctx, w->r); /* not answered: the next process runs it again */
        pt_handle_put(w->h);
        free(w);
    }
}

void pt_lock_owners_image(struct pt_inode *i,
                          void (*fn)(void *ctx, uint64_t owner, int fd, uint32_t pid), void *ctx)
{
    pthread_mutex_lock(pt_inode_lock(i));
    for (const struct pt_lock_owner *o = i->owners; o; o = o->next)
        fn(ctx, o->owner, o->fd, o->pid);
    pthread_mutex_unlock(pt_inode_lock(i));
}

int pt_lock_owner_restore(struct pt_inode *i, uint64_t owner, int fd, uint32_t pid)
{
    int ret = 0;

    pthread_mutex_lock(pt_inode_lock(i));
    if (i->nhandles == 0) {
        ret = -EBADF; /* owners live only while a handle of the inode is open */
        goto unlock;
    }
    if (pt_owner_find(i, owner)) {
        ret = -EEXIST;
        goto unlock;
    }
    struct pt_lock_owner *o = calloc(1, sizeof(*o));
    if (!o) {
        ret = -ENOMEM;
        goto unlock;
    }
    pt_owner_link(i, o, owner, fd, pid);
unlock:
    pthread_mutex_unlock(pt_inode_lock(i));
    return ret;
}

int pt_fd_locks(struct pt_fs *fs, int fd, struct pt_held_lock *out, unsigned max)
{
    char line[256];
    unsigned n = 0;
    FILE *f = pt_fdinfo_open(fs, fd);

    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        char kind[16], type[16], end[24];
        unsigned long long start, e;
        if (!pt_fdinfo_lock(line, kind, type, &start, end))
            continue;
        bool flock = strcmp(kind, "FLOCK") == 0;
        if (!flock && strcmp(kind, "OFDLCK") != 0)
            continue;
        if (n == max) {
            fclose(f);
            return -E2BIG;
        }
        struct pt_held_lock *l = &out[n];
        l->flock = flock;
        l->write = strcmp(type, "WRITE") == 0;
        l->start = start;
        l->len = 0;
        if (!flock && strcmp(end, "EOF") != 0) {
            if (sscanf(end, "%llu", &e) != 1 || e < start)
                continue;
            l->len = e - start + 1;
        }
        n++;
    }
    fclose(f);
    return (int)n;
}

void pt_locks_cancel_all(struct pt_fs *fs, int err, bool stop)
{
    struct pt_locks *l = &fs->locks;
    struct pt_waiter *list;
    bool join;

    pthread_mutex_lock(&l->lock);
    list = l->head;
    l->head = NULL;
    l->count = 0;
    if (stop)
        l->stop = true;
    join = stop && l->thread_started;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    while (list) {
        struct pt_waiter *w = list;
        list = w->next;
        pt_waiter_finish(w, err);
    }
    if (join) {
        pthread_join(l->thread, NULL);
        l->thread_started = false;
    }
}
