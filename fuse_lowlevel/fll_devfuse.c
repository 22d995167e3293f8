/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The /dev/fuse transport: serves fll_ops to the host kernel directly.
 *
 * libfuse3 does the mounting only (fuse_session_new with no operations,
 * fuse_session_mount, fuse_session_unmount); requests are read from the
 * /dev/fuse fd by our own threads and decoded by fll_session_process(), the
 * same decoder the virtqueues use.
 *
 * Threads: nthreads workers each own one request slot (an input buffer sized
 * for max_write plus headers, and an output buffer for the largest READ). The
 * fd is non-blocking and polled together with an eventfd that, once written,
 * stays readable and tells every worker to leave. A worker leaves on that
 * event, or on ENODEV (the filesystem was unmounted, the connection is gone).
 *
 * A request an operation keeps (FLL_ASYNC) must not have its buffers reused:
 * slot->state settles who frees the slot without a lock:
 *
 *   BUSY --complete()--> DONE      the worker reuses the slot
 *   BUSY --worker gives up--> DETACHED --complete()--> freed by complete()
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define FUSE_USE_VERSION 31
#include <fuse_lowlevel.h>

#include "fll_i.h"

#define DF_DEFAULT_MAX_WRITE (1u << 20)
/* The largest READ reply: the kernel caps max_pages at 256 pages. */
#define DF_MAX_READ       (256u * 4096u)
#define DF_HEADROOM       4096u
#define DF_MAX_THREADS    64
#define DF_XATTR_SIZE_MAX 65536u /* fuse_in_header + fuse_write_in, generously */

enum df_slot_state {
    DF_BUSY = 0,
    DF_DONE = 1,
    DF_DETACHED = 2,
};

struct df_slot {
    struct fll_req req; /* first: complete() gets back to the slot from it */
    struct fll_devfuse *h;
    struct iovec in_iov;
    struct iovec out_iov;
    int state; /* enum df_slot_state, atomic */
    char *inbuf;
    char *outbuf;
};

struct fll_devfuse {
    struct fuse_session *fse;
    struct fll_session *se;
    struct fll_transport transport;
    int fd;     /* /dev/fuse, non-blocking; owned by fse */
    int stopfd; /* eventfd: readable once a stop was asked for */
    unsigned nthreads;
    size_t insize;
    size_t outsize;
    int async_pending; /* detached slots not yet completed; atomic */
    int error;         /* first fatal read error; atomic */
};

/* ---- Request slots ------------------------------------------------------------ */

static void slot_free(struct df_slot *s)
{
    if (s == NULL)
        return;
    free(s->inbuf);
    free(s->outbuf);
    free(s);
}

static struct df_slot *slot_new(struct fll_devfuse *h)
{
    struct df_slot *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->h = h;
    s->inbuf = malloc(h->insize);
    s->outbuf = malloc(h->outsize);
    if (s->inbuf == NULL || s->outbuf == NULL) {
        slot_free(s);
        return NULL;
    }
    return s;
}

static void df_complete(struct fll_req *r, size_t out_len)
{
    struct df_slot *s = (struct df_slot *)r;
    struct fll_devfuse *h = s->h;

    if (out_len > 0) {
        ssize_t n;
        do {
            n = write(h->fd, s->outbuf, out_len);
            /* ENOENT: the request was interrupted and is gone; nothing to do. */
        } while (n < 0 && errno == EINTR);
    }
    if (__atomic_exchange_n(&s->state, DF_DONE, __ATOMIC_ACQ_REL) == DF_DETACHED) {
        slot_free(s);
        __atomic_fetch_sub(&h->async_pending, 1, __ATOMIC_RELEASE);
    }
}

/* ---- Workers ------------------------------------------------------------------ */

static void df_signal_stop(struct fll_devfuse *h)
{
    uint64_t one = 1;
    ssize_t n;
    do {
        n = write(h->stopfd, &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
}

static void df_fail(struct fll_devfuse *h, int err)
{
    int zero = 0;
    __atomic_compare_exchange_n(&h->error, &zero, err, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    df_signal_stop(h);
}

static void *df_worker(void *arg)
{
    struct fll_devfuse *h = arg;
    struct df_slot *s = slot_new(h);

    if (s == NULL) {
        df_fail(h, -ENOMEM);
        return NULL;
    }
    for (;;) {
        int w = vufs_wait_input(h->fd, h->stopfd, -1);
        if (w < 0)
            df_fail(h, w);
        if (w <= 0)
            break;

        ssize_t n = read(h->fd, s->inbuf, h->insize);
        if (n < 0) {
            /* EAGAIN: another worker took it; ENOENT: interrupted meanwhile. */
            if (errno == EINTR || errno == EAGAIN || errno == ENOENT)
                continue;
            if (errno == ENODEV) { /* unmounted: the connection is gone */
                df_signal_stop(h);
                break;
            }
            df_fail(h, -errno);
            break;
        }

        s->in_iov = (struct iovec){s->inbuf, (size_t)n};
        s->out_iov = (struct iovec){s->outbuf, h->outsize};
        s->req.in = &s->in_iov;
        s->req.in_cnt = 1;
        s->req.out = &s->out_iov;
        s->req.out_cnt = 1;
        s->req.queue = 0;
        __atomic_store_n(&s->state, DF_BUSY, __ATOMIC_RELAXED);
        fll_session_process(h->se, &s->req);

        int busy = DF_BUSY;
        if (__atomic_compare_exchange_n(&s->state, &busy, DF_DETACHED, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            /* Kept by an FLL_ASYNC operation: its completion frees the slot. */
            __atomic_fetch_add(&h->async_pending, 1, __ATOMIC_RELAXED);
            s = slot_new(h);
            if (s == NULL) {
                df_fail(h, -ENOMEM);
                return NULL;
            }
        } else {
            assert(__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == DF_DONE);
        }
    }
    slot_free(s);
    return NULL;
}

/* ---- Life cycle ----------------------------------------------------------------- */

int fll_devfuse_new(const struct fll_devfuse_config *cfg, struct fll_devfuse **out)
{
    static const struct fuse_lowlevel_ops no_ops;
    *out = NULL;
    if (cfg == NULL || cfg->ops == NULL || cfg->mountpoint == NULL)
        return -EINVAL;
    uint32_t max_write = cfg->max_write ? cfg->max_write : DF_DEFAULT_MAX_WRITE;
    if (max_write < 4096)
        return -EINVAL;

    struct fll_devfuse *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    h->fd = -1;
    h->nthreads = cfg->nthreads ? cfg->nthreads : 1;
    /* The largest request: a WRITE of max_write, or a SETXATTR of 64 KiB. */
    h->insize = (max_write > DF_XATTR_SIZE_MAX ? max_write : DF_XATTR_SIZE_MAX) + DF_HEADROOM;
    h->outsize = sizeof(struct fuse_out_header) + DF_MAX_READ;
    h->transport.complete = df_complete;
    h->stopfd = eventfd(0, EFD_CLOEXEC);
    if (h->stopfd < 0) {
        int err = -errno;
        free(h);
        return err;
    }

    struct fll_session_config scfg = {
        .ops = cfg->ops,
        .fs = cfg->fs,
        .transport = &h->transport,
        .max_write = max_write,
        .max_pages = DF_MAX_READ / 4096,
    };
    int ret = fll_session_new(&scfg, &h->se);
    if (ret < 0) {
        fll_devfuse_free(h);
        return ret;
    }

    char opts[1024];
    int len = snprintf(opts, sizeof(opts), "fsname=%s,subtype=vufsd%s%s",
                       cfg->fsname ? cfg->fsname : "vufsd", cfg->mount_opts ? "," : "",
                       cfg->mount_opts ? cfg->mount_opts : "");
    if (len < 0 || (size_t)len >= sizeof(opts) || strpbrk(cfg->fsname ? cfg->fsname : "", ",")) {
        fll_devfuse_free(h);
        return -EINVAL;
    }
    char *argv[] = {(char *)"vufsd", (char *)"-o", opts, NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, argv);
    h->fse = fuse_session_new(&args, &no_ops, sizeof(no_ops), NULL);
    fuse_opt_free_args(&args); /* libfuse may have copied argv while parsing */
    if (h->fse == NULL) {
        fll_devfuse_free(h);
        return -EINVAL;
    }
    if (fuse_session_mount(h->fse, cfg->mountpoint) != 0) {
        fuse_session_destroy(h->fse);
        h->fse = NULL;
        fll_devfuse_free(h);
        return -EIO;
    }
    h->fd = fuse_session_fd(h->fse);
    int fl = fcntl(h->fd, F_GETFL);
    if (fl < 0 || fcntl(h->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        int err = -errno;
        fll_devfuse_free(h);
        return err;
    }
    *out = h;
    return 0;
}

int fll_devfuse_loop(struct fll_devfuse *h)
{
    pthread_t tids[DF_MAX_THREADS];
    unsigned n = h->nthreads < DF_MAX_THREADS ? h->nthreads : DF_MAX_THREADS;
    unsigned started = 0;

    for (; started < n; started++) {
        if (pthread_create(&tids[started], NULL, df_worker, h) != 0) {
            df_fail(h, -EAGAIN);
            break;
        }
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    return __atomic_load_n(&h->error, __ATOMIC_ACQUIRE);
}

void fll_devfuse_stop(struct fll_devfuse *h)
{
    int saved = errno; /* async-signal-safe: may run in a signal handler */
    if (h)
        df_signal_stop(h);
    errno = saved;
}

void fll_devfuse_free(struct fll_devfuse *h)
{
    if (h == NULL)
        return;
    /*
     * A /dev/fuse connection ends without DESTROY: tell the filesystem now,
     * while the fd is still open, so it can answer the requests it kept
     * (FLL_ASYNC) -- they must all be answered before the buffers go.
     */
    if (h->se)
        fll_session_shutdown(h->se);
    while (__atomic_load_n(&h->async_pending, __ATOMIC_ACQUIRE) > 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (h->fse) {
        fuse_session_unmount(h->fse); /* closes the fd, then a lazy umount */
        fuse_session_destroy(h->fse);
    }
    fll_session_free(h->se);
    if (h->stopfd >= 0)
        close(h->stopfd);
    free(h);
}
