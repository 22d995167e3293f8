/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit test: one session driven from several threads at once (the daemon runs
 * one per virtqueue plus a pool), with INIT and DESTROY racing the traffic.
 * Every request must complete exactly once with a well-formed reply: success
 * while initialized, EIO otherwise. Meant to be run under TSan and ASan too.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fll.h"

#define THREADS 4
#define ROUNDS  20000

struct counters {
    int getattrs; /* atomic */
    int writes;   /* atomic */
    int inits;    /* atomic */
    int destroys; /* atomic */
};

static int c_init(void *fs, struct fll_conn *conn)
{
    __atomic_fetch_add(&((struct counters *)fs)->inits, 1, __ATOMIC_RELAXED);
    return 0;
}

static void c_destroy(void *fs)
{
    __atomic_fetch_add(&((struct counters *)fs)->destroys, 1, __ATOMIC_RELAXED);
}

static int c_getattr(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                     struct fuse_attr_out *out)
{
    __atomic_fetch_add(&((struct counters *)fll_req_userdata(r))->getattrs, 1, __ATOMIC_RELAXED);
    out->attr.ino = nodeid;
    return 0;
}

static ssize_t c_write(struct fll_req *r, uint64_t nodeid, const struct fuse_write_in *in,
                       const struct iovec *src, unsigned src_cnt)
{
    __atomic_fetch_add(&((struct counters *)fll_req_userdata(r))->writes, 1, __ATOMIC_RELAXED);
    size_t n = 0;
    for (unsigned i = 0; i < src_cnt; i++)
        n += src[i].iov_len;
    return (ssize_t)n;
}

static const struct fll_ops c_ops = {
    .init = c_init,
    .destroy = c_destroy,
    .getattr = c_getattr,
    .write = c_write,
};

/* A request with its own buffers; complete() checks and counts. */
struct creq {
    struct fll_req req; /* first */
    unsigned char in[256];
    unsigned char out[256];
    struct iovec in_iov, out_iov;
    int completions;
    size_t out_len;
};

static void c_complete(struct fll_req *r, size_t out_len)
{
    struct creq *q = (struct creq *)r;
    q->completions++;
    q->out_len = out_len;
}

static const struct fll_transport c_transport = {.complete = c_complete};

static struct fll_session *se;
static struct counters counts;
static int stop_flag;

static size_t build(unsigned char *b, uint32_t opcode, uint64_t unique, const void *arg,
                    size_t argsize)
{
    struct fuse_in_header ih = {
        .len = (uint32_t)(sizeof(ih) + argsize),
        .opcode = opcode,
        .unique = unique,
        .nodeid = 9,
    };
    memcpy(b, &ih, sizeof(ih));
    if (argsize)
        memcpy(b + sizeof(ih), arg, argsize);
    return ih.len;
}

/* Returns 0 (ok), 1 (EIO: not initialized at that moment), or -1 (broken). */
static int one(struct creq *q, uint32_t opcode, uint64_t unique, const void *arg, size_t argsize,
               size_t body)
{
    memset(&q->req, 0, sizeof(q->req));
    q->in_iov = (struct iovec){q->in, build(q->in, opcode, unique, arg, argsize)};
    q->out_iov = (struct iovec){q->out, sizeof(q->out)};
    q->req.in = &q->in_iov;
    q->req.in_cnt = 1;
    q->req.out = &q->out_iov;
    q->req.out_cnt = 1;
    q->completions = 0;
    fll_session_process(se, &q->req);
    if (q->completions != 1 || q->out_len < sizeof(struct fuse_out_header))
        return -1;
    struct fuse_out_header oh;
    memcpy(&oh, q->out, sizeof(oh));
    if (oh.unique != unique || oh.len != q->out_len)
        return -1;
    if (oh.error == -EIO && q->out_len == sizeof(oh))
        return 1;
    if (oh.error == 0 && q->out_len == sizeof(oh) + body)
        return 0;
    return -1;
}

static void *traffic(void *arg)
{
    static const unsigned char data[64];
    uintptr_t id = (uintptr_t)arg;
    struct creq q;
    long bad = 0;
    for (unsigned i = 0; i < ROUNDS; i++) {
        uint64_t unique = ((uint64_t)id << 32) | i;
        int ret;
        if (i % 2) {
            struct fuse_getattr_in gi = {0};
            ret = one(&q, FUSE_GETATTR, unique, &gi, sizeof(gi), sizeof(struct fuse_attr_out));
        } else {
            unsigned char w[sizeof(struct fuse_write_in) + sizeof(data)];
            struct fuse_write_in wi = {.size = sizeof(data)};
            memcpy(w, &wi, sizeof(wi));
            memcpy(w + sizeof(wi), data, sizeof(data));
            ret = one(&q, FUSE_WRITE, unique, w, sizeof(w), sizeof(struct fuse_write_out));
        }
        if (ret < 0)
            bad++;
    }
    return (void *)bad;
}

/* INIT and DESTROY back to back while the traffic runs. */
static void *lifecycle(void *arg)
{
    struct creq q;
    struct fuse_init_in in = {.major = 7, .minor = 41, .flags = FUSE_INIT_EXT};
    long bad = 0;
    uint64_t unique = 1;
    while (!__atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE)) {
        if (one(&q, FUSE_INIT, unique++, &in, sizeof(in), sizeof(struct fuse_init_out)) != 0)
            bad++;
        if (one(&q, FUSE_DESTROY, unique++, NULL, 0, 0) != 0)
            bad++;
    }
    /* leave it initialized */
    if (one(&q, FUSE_INIT, unique++, &in, sizeof(in), sizeof(struct fuse_init_out)) != 0)
        bad++;
    return (void *)bad;
}

static void racing_init_destroy(void **state)
{
    struct fll_session_config cfg = {
        .ops = &c_ops,
        .fs = &counts,
        .transport = &c_transport,
        .max_write = 4096,
    };
    assert_int_equal(fll_session_new(&cfg, &se), 0);

    pthread_t t[THREADS], lc;
    assert_int_equal(pthread_create(&lc, NULL, lifecycle, NULL), 0);
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, traffic, (void *)(i + 1)), 0);
    long bad = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        bad += (long)ret;
    }
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
    void *ret;
    pthread_join(lc, &ret);
    bad += (long)ret;

    assert_int_equal(bad, 0);
    assert_true(fll_session_initialized(se));
    /* every INIT but the last was followed by its DESTROY */
    assert_int_equal(counts.inits, counts.destroys + 1);
    fll_session_free(se);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(racing_init_destroy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
