/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Test harness for the passthrough filesystem: a real pt_fs on a temporary
 * directory, a real fll session whose transport records completions (for
 * operations that reply later, such as SETLKW), and helpers that build the
 * fll_req an operation receives. No mocks: every call hits the host kernel.
 */
#ifndef PT_TEST_H
#define PT_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pt_fs_i.h"

struct pt_t_req {
    struct fll_req r;
    struct iovec out_iov;
    char out[256];
    /* Filled by the transport's complete(): */
    bool done;
    int err;
};

struct pt_t {
    char dir[64];
    struct pt_config cfg;
    struct pt_fs *fs;
    struct fll_session *se;
    const struct fll_ops *ops;
};

static pthread_mutex_t pt_t_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pt_t_cond = PTHREAD_COND_INITIALIZER;

static inline void pt_t_complete(struct fll_req *r, size_t out_len)
{
    struct pt_t_req *q = (struct pt_t_req *)((char *)r - offsetof(struct pt_t_req, r));
    struct fuse_out_header h;

    pthread_mutex_lock(&pt_t_lock);
    q->err = 1; /* "no reply" marker */
    if (out_len >= sizeof(h)) {
        memcpy(&h, q->out, sizeof(h));
        q->err = h.error;
    }
    q->done = true;
    pthread_cond_broadcast(&pt_t_cond);
    pthread_mutex_unlock(&pt_t_lock);
}

static const struct fll_transport pt_t_transport = { .complete = pt_t_complete };

static inline void pt_t_req_init(struct pt_t *t, struct pt_t_req *q, uint32_t uid, uint32_t gid)
{
    static uint64_t unique = 100;

    memset(q, 0, sizeof(*q));
    q->out_iov.iov_base = q->out;
    q->out_iov.iov_len = sizeof(q->out);
    q->r.se = t->se;
    q->r.out = &q->out_iov;
    q->r.out_cnt = 1;
    q->r.out_size = sizeof(q->out);
    q->r.hdr.unique = __atomic_add_fetch(&unique, 2, __ATOMIC_RELAXED);
    q->r.hdr.uid = uid;
    q->r.hdr.gid = gid;
    q->r.hdr.pid = 4242;
}

/* A request from root (most tests) on a stack object of the caller. */
#define PT_REQ(t, name) struct pt_t_req name; pt_t_req_init((t), &name, 0, 0)

/* Waits for an async completion; fails the test after a generous safety net. */
static inline int pt_t_wait(struct pt_t_req *q)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    pthread_mutex_lock(&pt_t_lock);
    while (!q->done) {
        if (pthread_cond_timedwait(&pt_t_cond, &pt_t_lock, &ts) == ETIMEDOUT)
            break;
    }
    bool done = q->done;
    int err = q->err;
    pthread_mutex_unlock(&pt_t_lock);
    assert_true(done);
    return err;
}

static inline bool pt_t_is_done(struct pt_t_req *q)
{
    pthread_mutex_lock(&pt_t_lock);
    bool d = q->done;
    pthread_mutex_unlock(&pt_t_lock);
    return d;
}

static inline int pt_t_rm(const char *p, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)type;
    (void)f;
    return remove(p);
}

/* VUFSD_TEST_HANDLES=never|prefer|mandatory: the suite runs with that --inode-file-handles. */
static inline enum pt_inode_handles pt_t_env_handles(void)
{
    const char *v = getenv("VUFSD_TEST_HANDLES");

    if (v && strcmp(v, "prefer") == 0)
        return PT_HANDLES_PREFER;
    if (v && strcmp(v, "mandatory") == 0)
        return PT_HANDLES_MANDATORY;
    return PT_HANDLES_NEVER;
}

static inline void pt_t_default_cfg(struct pt_config *c, const char *dir)
{
    memset(c, 0, sizeof(*c));
    c->shared_dir = dir;
    c->cache = PT_CACHE_AUTO;
    c->readdirplus = true;
    c->xattr = true;
    c->inode_file_handles = pt_t_env_handles();
}

/* Creates the temp dir and (unless cfg_fn tweaks and calls pt_t_start itself) the fs. */
static inline struct pt_t *pt_t_new(void)
{
    struct pt_t *t = calloc(1, sizeof(*t));

    assert_non_null(t);
    strcpy(t->dir, "/tmp/pt-test-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    assert_int_equal(chmod(t->dir, 0755), 0);
    pt_t_default_cfg(&t->cfg, t->dir);
    return t;
}

static inline int pt_t_start(struct pt_t *t)
{
    struct fll_session_config sc;
    int err = pt_fs_new(&t->cfg, &t->fs);

    if (err < 0)
        return err;
    t->ops = pt_fs_ops();
    memset(&sc, 0, sizeof(sc));
    sc.ops = t->ops;
    sc.fs = t->fs;
    sc.transport = &pt_t_transport;
    sc.max_write = 1 << 20;
    assert_int_equal(fll_session_new(&sc, &t->se), 0);
    return 0;
}

/* ---- What the fs holds, read from its internals (pt_fs_i.h) ------------------- */

/* Inodes the client knows now (the root included). */
static inline size_t pt_t_inode_count(struct pt_fs *fs)
{
    pthread_mutex_lock(&fs->itab.lock);
    size_t n = fs->itab.count;
    pthread_mutex_unlock(&fs->itab.lock);
    return n;
}

/* fds counted in the fd budget now. */
static inline long pt_t_fds_in_use(struct pt_fs *fs)
{
    return atomic_load(&fs->fds);
}

/* Shrinks the fd budget (the fs cuts it from a limit of at least 8 fds). */
static inline void pt_t_set_fd_budget(struct pt_fs *fs, long fds)
{
    atomic_store(&fs->fd_budget, fds);
}

/* The --inode-file-handles setting in force (NEVER after a fallback). */
static inline enum pt_inode_handles pt_t_handles(struct pt_fs *fs)
{
    return fs->handles;
}

/* The cache of O_PATH fds opened from handles: operations that found an
 * inode's fd there, operations that had to open one, fds it holds now. */
static inline void pt_t_fd_cache_stats(struct pt_fs *fs, uint64_t *hits, uint64_t *misses,
                                       unsigned *cached)
{
    pthread_mutex_lock(&fs->fdc.lock);
    *hits = fs->fdc.hits;
    *misses = fs->fdc.misses;
    *cached = fs->fdc.count;
    pthread_mutex_unlock(&fs->fdc.lock);
}

/* O_PATH fds the handle fd cache holds now. */
static inline long pt_t_fds_cached(struct pt_t *t)
{
    uint64_t hits, misses;
    unsigned cached;

    pt_t_fd_cache_stats(t->fs, &hits, &misses, &cached);
    return cached;
}

/*
 * The fds the fs holds while the client knows `inodes` inodes (the root
 * included) and has nothing open: one O_PATH fd each, or with file handles
 * the root's fd, the share's mount fd and what the fd cache holds.
 */
static inline long pt_t_fds_for(struct pt_t *t, long inodes)
{
    return pt_t_handles(t->fs) == PT_HANDLES_NEVER ? inodes : 2 + pt_t_fds_cached(t);
}

static inline struct pt_t *pt_t_up(void)
{
    struct pt_t *t = pt_t_new();
    assert_int_equal(pt_t_start(t), 0);
    return t;
}

static inline void pt_t_down(struct pt_t *t)
{
    if (t->fs)
        pt_fs_free(t->fs);
    if (t->se)
        fll_session_free(t->se);
    nftw(t->dir, pt_t_rm, 16, FTW_DEPTH | FTW_PHYS);
    free(t);
}

/* Host path of a name in the share. */
static inline const char *pt_t_path(struct pt_t *t, const char *name)
{
    static __thread char buf[256];
    snprintf(buf, sizeof(buf), "%s/%s", t->dir, name);
    return buf;
}

static inline void pt_t_write_file(struct pt_t *t, const char *name, const char *data)
{
    int fd = open(pt_t_path(t, name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
}

static inline uint64_t pt_t_lookup(struct pt_t *t, uint64_t parent, const char *name)
{
    PT_REQ(t, q);
    struct fuse_entry_out e;
    int ret = t->ops->lookup(&q.r, parent, name, &e);
    assert_int_equal(ret, 0);
    assert_true(e.nodeid != 0);
    return e.nodeid;
}

static inline uint64_t pt_t_open(struct pt_t *t, uint64_t nodeid, uint32_t flags)
{
    PT_REQ(t, q);
    struct fuse_open_in in = { .flags = flags };
    struct fuse_open_out out;
    assert_int_equal(t->ops->open(&q.r, nodeid, &in, &out), 0);
    return out.fh;
}

static inline int pt_t_release(struct pt_t *t, uint64_t nodeid, uint64_t fh)
{
    PT_REQ(t, q);
    struct fuse_release_in in = { .fh = fh };
    return t->ops->release(&q.r, nodeid, &in);
}

static inline ssize_t pt_t_pwrite(struct pt_t *t, uint64_t nodeid, uint64_t fh, const void *buf,
                                  size_t len, uint64_t off, uint32_t wflags)
{
    PT_REQ(t, q);
    struct fuse_write_in in = { .fh = fh, .offset = off, .size = (uint32_t)len,
                                .write_flags = wflags };
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    return t->ops->write(&q.r, nodeid, &in, &iov, 1);
}

static inline ssize_t pt_t_pread(struct pt_t *t, uint64_t nodeid, uint64_t fh, void *buf,
                                 size_t len, uint64_t off)
{
    PT_REQ(t, q);
    struct fuse_read_in in = { .fh = fh, .offset = off, .size = (uint32_t)len };
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    return t->ops->read(&q.r, nodeid, &in, &iov, 1);
}

static inline void pt_t_forget(struct pt_t *t, uint64_t nodeid, uint64_t n)
{
    PT_REQ(t, q);
    t->ops->forget(&q.r, nodeid, n);
}

#endif
