/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufsd's queue threads when there are more request queues than threads
 * (--queue-threads N, default one per CPU): each thread serves several queues
 * in turn. Against the real daemon through the in-tree frontend, with eight
 * request queues:
 *
 *   - every queue is served: a request on each alone, then all at once;
 *   - one queue is stopped (SET_VRING_ENABLE 0, GET_VRING_BASE) and started again
 *     (SET_VRING_BASE at the index the daemon returned, ADDR, KICK, CALL,
 *     ENABLE 1) again and again while another queue of the same thread is
 *     kept busy: what the daemon popped before GET_VRING_BASE answered is
 *     complete when it answers, nothing is popped while the queue is stopped,
 *     and what was left in the ring is served after the start - every request
 *     completes exactly once with the right data, on both queues;
 *   - the hiprio queue (FORGET) is answered while every request queue is busy;
 *   - after device resets, every queue is served again.
 *
 *   test_qthreads --backend 'VUFSD ... --queue-threads N {socket} {dir}'
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"
#include "vufs_util.h"
#include "../it_util.h"

#define QUEUES 8u
#define QSIZE 64u
#define FILE_SIZE (1u << 20)
#define BLOCK 4096u
/* Requests put on a queue before it is stopped: more than one batch apart. */
#define PENDING 12u

static const char *opt_backend;

struct env {
    char *dir;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    uint64_t nodeid, fh;
};

static uint8_t pattern(uint64_t i)
{
    return (uint8_t)(i * 167 + (i >> 11) * 5 + 3);
}

static void open_file(struct env *e)
{
    struct fuse_entry_out ent;
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "data.bin", &ent), 0);
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_open(e->fuse, ent.nodeid, O_RDONLY, &oo), 0);
    e->nodeid = ent.nodeid;
    e->fh = oo.fh;
}

static int setup(void **state)
{
    struct env *e = g_new0(struct env, 1);
    e->dir = it_make_data_share("vufsd-qthreads", FILE_SIZE, pattern);
    assert_non_null(e->dir);

    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = opt_backend, .dir = e->dir, .timeout_ms = 20000 },
        .request_queues = QUEUES,
        .queue_size = QSIZE,
    };
    int r = vfe_dev_connect(&cfg, &e->dev);
    if (r == 0)
        r = vfe_dev_start(e->dev);
    if (r < 0) {
        print_error("starting '%s': %s\n", opt_backend, strerror(-r));
        return -1;
    }
    if (vfe_dev_backend_queues(e->dev) < QUEUES + 1) {
        print_error("the backend serves %" PRIu64 " queues, not %u\n",
                    vfe_dev_backend_queues(e->dev), QUEUES + 1);
        return -1;
    }
    /* A lost request shows as a call that never completes: 10 s is ages. */
    struct vfe_fuse_config fc = { .depth = 16, .timeout_ms = 10000 };
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    struct vfe_fuse_init_result init;
    assert_int_equal(vfe_fuse_init(e->fuse, &init), 0);
    open_file(e);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    if (!e)
        return 0;
    vfe_fuse_release(e->fuse, e->nodeid, e->fh, 0);
    vfe_fuse_free(e->fuse);
    int status = 0;
    bool own = false;
    int r = vfe_dev_close_status(e->dev, &status, &own);
    it_rm_tree(e->dir);
    free(e->dir);
    g_free(e);
    /* The daemon exits by itself, status 0, once the frontend has gone. */
    assert_int_equal(r, 0);
    assert_true(own && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return 0;
}

/* GETATTR on queue q alone. */
static void getattr_on(struct env *e, unsigned q)
{
    vfe_fuse_set_queue(e->fuse, q);
    struct fuse_attr_out ao;
    int r = vfe_fuse_getattr(e->fuse, e->nodeid, &ao);
    if (r < 0)
        fail_msg("queue %u: GETATTR: %s", q, strerror(-r));
    assert_int_equal(ao.attr.size, FILE_SIZE);
    vfe_fuse_set_queue(e->fuse, 1);
}

/* 4 KiB reads at random offsets on every queue at once, max_ops in all. */
static void read_all_queues(struct env *e, unsigned queues, unsigned depth, uint64_t max_ops)
{
    struct vfe_bench_config bc = { .op = VFE_BENCH_READ, .queues = queues, .depth = depth,
                                   .block = BLOCK, .nodeid = e->nodeid, .fh = e->fh,
                                   .file_size = FILE_SIZE, .random = true, .max_ops = max_ops };
    struct vfe_bench_result *res = g_new0(struct vfe_bench_result, 1);
    int r = vfe_bench_run(e->fuse, e->dev, &bc, res);
    if (r < 0)
        fail_msg("reads on %u queues: %s", queues, strerror(-r));
    assert_int_equal(res->ops, max_ops);
    assert_int_equal(res->errors, 0);
    assert_int_equal(res->bytes, max_ops * BLOCK);
    g_free(res);
}

static void test_every_queue_served(void **state)
{
    struct env *e = *state;
    for (unsigned q = 1; q <= QUEUES; q++)
        getattr_on(e, q);
    read_all_queues(e, QUEUES, 8, QUEUES * 400);
}

/* ---- One queue stopped and started while its thread's other queue is busy ---- */

static int set_state(struct env *e, uint32_t request, unsigned index, unsigned num,
                     uint32_t *reply_num)
{
    struct vfe_msg m, rep;
    vfe_msg_init(&m, request, 0);
    vfe_msg_set_state(&m, index, num);
    int r = vfe_conn_call(vfe_dev_conn(e->dev), &m, NULL, 0, reply_num ? &rep : NULL);
    if (r == 0 && reply_num)
        *reply_num = rep.payload.state.num;
    return r;
}

static int set_fd(struct env *e, uint32_t request, unsigned index, int fd)
{
    struct vfe_msg m;
    vfe_msg_init(&m, request, 0);
    vfe_msg_set_u64(&m, index & VFE_VU_VRING_IDX_MASK);
    return vfe_conn_call(vfe_dev_conn(e->dev), &m, &fd, 1, NULL);
}

/* QEMU's order for one ring: disable, then GET_VRING_BASE (which stops it). */
static uint16_t stop_queue(struct env *e, unsigned q)
{
    uint32_t base = 0;
    assert_int_equal(set_state(e, VFE_VU_SET_VRING_ENABLE, q, 0, NULL), 0);
    assert_int_equal(set_state(e, VFE_VU_GET_VRING_BASE, q, 0, &base), 0);
    return (uint16_t)base;
}

static void start_queue(struct env *e, unsigned q, uint16_t base)
{
    struct vfe_vq *vq = vfe_dev_vq(e->dev, q);
    assert_int_equal(set_state(e, VFE_VU_SET_VRING_NUM, q, vfe_vq_size(vq), NULL), 0);
    assert_int_equal(set_state(e, VFE_VU_SET_VRING_BASE, q, base, NULL), 0);
    struct vfe_vu_addr a;
    vfe_vq_addr(vq, &a);
    struct vfe_msg m;
    vfe_msg_init(&m, VFE_VU_SET_VRING_ADDR, 0);
    vfe_msg_set_addr(&m, &a);
    assert_int_equal(vfe_conn_call(vfe_dev_conn(e->dev), &m, NULL, 0, NULL), 0);
    assert_int_equal(set_fd(e, VFE_VU_SET_VRING_KICK, q, vfe_vq_kick_fd(vq)), 0);
    assert_int_equal(set_fd(e, VFE_VU_SET_VRING_CALL, q, vfe_vq_call_fd(vq)), 0);
    assert_int_equal(set_state(e, VFE_VU_SET_VRING_ENABLE, q, 1, NULL), 0);
}

struct busy {
    struct env *e;
    unsigned queues; /* 1..queues kept busy */
    uint64_t ops;
    int ret;
    struct vfe_bench_result res;
};

static void *busy_main(void *arg)
{
    struct busy *b = arg;
    struct vfe_bench_config bc = { .op = VFE_BENCH_READ, .queues = b->queues, .depth = 8,
                                   .block = BLOCK, .nodeid = b->e->nodeid, .fh = b->e->fh,
                                   .file_size = FILE_SIZE, .random = true, .max_ops = b->ops };
    b->ret = vfe_bench_run(b->e->fuse, b->e->dev, &bc, &b->res);
    return NULL;
}

struct pending_read {
    struct vfe_fuse_op op;
    struct fuse_read_in in;
    struct vfe_sg sg;
};

static void check_read(struct env *e, const struct pending_read *p, unsigned q)
{
    if (p->op.error)
        fail_msg("queue %u: READ at %" PRIu64 ": %s", q, (uint64_t)p->in.offset,
                 strerror(-p->op.error));
    assert_int_equal(p->op.data_len, BLOCK);
    g_autofree uint8_t *buf = g_malloc(BLOCK);
    assert_int_equal(vfe_mem_read(vfe_dev_mem(e->dev), p->sg.gpa, buf, BLOCK), 0);
    for (unsigned k = 0; k < BLOCK; k++)
        if (buf[k] != pattern(p->in.offset + k))
            fail_msg("queue %u: READ at %" PRIu64 ": byte %u wrong", q, (uint64_t)p->in.offset,
                     k);
}

/* Reaps what queue q completed within timeout_ms; counts into *done. */
static void reap(struct env *e, unsigned q, unsigned *done, int timeout_ms)
{
    struct vfe_fuse_op *ops[PENDING];
    int n = vfe_fuse_reap(e->fuse, q, ops, PENDING, timeout_ms);
    if (n == -ETIMEDOUT)
        return;
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        check_read(e, ops[i]->user, q);
        (*done)++;
    }
}

static void stop_start_round(struct env *e, unsigned q, uint64_t round)
{
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    struct pending_read p[PENDING];
    for (unsigned i = 0; i < PENDING; i++) {
        p[i] = (struct pending_read){ 0 };
        assert_int_equal(vfe_mem_alloc(mem, BLOCK, 4096, &p[i].sg.gpa), 0);
        p[i].sg.len = BLOCK;
        p[i].in = (struct fuse_read_in){ .fh = e->fh, .size = BLOCK,
                                         .offset = ((round * 7 + i * 13) % (FILE_SIZE / BLOCK)) *
                                                   BLOCK };
        p[i].op = (struct vfe_fuse_op){ .opcode = FUSE_READ, .nodeid = e->nodeid, .arg = &p[i].in,
                                        .arg_len = sizeof(p[i].in), .out_data = &p[i].sg,
                                        .out_data_cnt = 1, .user = &p[i] };
    }
    /* Half published before the stop (the daemon may be serving them as it
     * stops), half while the queue is stopped. */
    struct vfe_vq *vq = vfe_dev_vq(e->dev, q);
    uint16_t avail_before = vfe_vq_avail_idx(vq);
    uint16_t used_before = vfe_vq_raw_used_idx(vq);
    for (unsigned i = 0; i < PENDING / 2; i++)
        assert_int_equal(vfe_fuse_submit(e->fuse, q, &p[i].op), 0);
    vfe_fuse_kick(e->fuse, q);
    uint16_t base = stop_queue(e, q);

    /* What the daemon popped (up to base) is complete when GET_VRING_BASE answers. */
    uint16_t popped = (uint16_t)(base - avail_before);
    assert_true(popped <= PENDING / 2);
    uint16_t after = vfe_vq_raw_used_idx(vq);
    assert_int_equal((uint16_t)(after - used_before), popped);
    unsigned done = 0;
    reap(e, q, &done, 0);
    assert_int_equal(done, popped);
    for (unsigned i = PENDING / 2; i < PENDING; i++)
        assert_int_equal(vfe_fuse_submit(e->fuse, q, &p[i].op), 0);
    vfe_fuse_kick(e->fuse, q);
    /* Stopped: nothing more is served, kicked or not. */
    struct timespec ts = { 0, 30 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    unsigned stopped_done = 0;
    reap(e, q, &stopped_done, 0);
    assert_int_equal(stopped_done, 0);
    assert_int_equal(vfe_vq_raw_used_idx(vq), after);

    /* Started where the daemon stopped: the rest is served, each once. */
    start_queue(e, q, base);
    vfe_fuse_kick(e->fuse, q);
    /* A wait may end on a stale notification with nothing new: look until 10 s. */
    uint64_t deadline = vufs_now_ns() + 10000000000ull;
    while (done < PENDING && vufs_now_ns() < deadline)
        reap(e, q, &done, 1000);
    if (done < PENDING)
        fail_msg("queue %u: %u of %u requests never completed after the restart", q,
                 PENDING - done, PENDING);
    assert_int_equal(vfe_fuse_in_flight(e->fuse, q), 0);
    for (unsigned i = 0; i < PENDING; i++) {
        assert_true(p[i].op.done);
        assert_int_equal(vfe_mem_free_block(mem, p[i].sg.gpa), 0);
    }
}

static void test_stop_one_queue_under_load(void **state)
{
    struct env *e = *state;
    /* Queue 1 busy in the background; every other queue stopped and started in
     * turn (with --queue-threads 1 they all share queue 1's thread). */
    struct busy b = { .e = e, .queues = 1, .ops = 60000 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, busy_main, &b), 0);
    for (uint64_t round = 0; round < 42; round++)
        stop_start_round(e, 2 + (unsigned)(round % (QUEUES - 1)), round);
    pthread_join(th, NULL);
    if (b.ret < 0)
        fail_msg("busy queue: %s", strerror(-b.ret));
    assert_int_equal(b.res.ops, b.ops);
    assert_int_equal(b.res.errors, 0);
    /* And everyone is still served. */
    for (unsigned q = 1; q <= QUEUES; q++)
        getattr_on(e, q);
}

/* ---- hiprio while the request queues are busy -------------------------------- */

static void test_hiprio_while_busy(void **state)
{
    struct env *e = *state;
    /* FORGET (no reply: the daemon hands the buffer back) on hiprio, one at a
     * time: each must come back within the fuse timeout while the request
     * queues keep their threads busy. The lookups it forgets are made first,
     * before the busy thread owns every request queue. */
    struct fuse_entry_out ent;
    for (unsigned i = 0; i < 40; i++)
        assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "data.bin", &ent), 0);
    struct busy b = { .e = e, .queues = QUEUES, .ops = 120000 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, busy_main, &b), 0);
    uint64_t worst = 0;
    for (unsigned i = 0; i < 40; i++) {
        uint64_t t0 = vufs_now_ns();
        int r = vfe_fuse_forget(e->fuse, ent.nodeid, 1);
        if (r < 0)
            fail_msg("FORGET %u on hiprio: %s", i, strerror(-r));
        uint64_t dt = vufs_now_ns() - t0;
        worst = dt > worst ? dt : worst;
    }
    pthread_join(th, NULL);
    if (b.ret < 0)
        fail_msg("busy queues: %s", strerror(-b.ret));
    assert_int_equal(b.res.ops, b.ops);
    assert_int_equal(b.res.errors, 0);
    print_message("hiprio: slowest FORGET %.1f ms while %u queues were busy\n", worst / 1e6,
                  QUEUES);
}

/* ---- Device resets ------------------------------------------------------------- */

static void test_resets(void **state)
{
    struct env *e = *state;
    for (int round = 0; round < 3; round++) {
        assert_int_equal(vfe_dev_reset(e->dev), 0);
        assert_int_equal(vfe_dev_start(e->dev), 0);
        struct vfe_fuse_init_result init;
        assert_int_equal(vfe_fuse_init(e->fuse, &init), 0); /* a new driver's INIT */
        open_file(e);
        for (unsigned q = 1; q <= QUEUES; q++)
            getattr_on(e, q);
        read_all_queues(e, QUEUES, 4, QUEUES * 100);
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "backend", required_argument, NULL, 'b' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c != 'b') {
            fprintf(stderr, "usage: %s --backend CMD\n", argv[0]);
            return 2;
        }
        opt_backend = optarg;
    }
    g_auto(GStrv) av = NULL;
    if (!opt_backend || !g_shell_parse_argv(opt_backend, NULL, &av, NULL) ||
        access(av[0], X_OK) != 0) {
        fprintf(stderr, "%s: --backend (an executable) is required\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_queue_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_one_queue_under_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hiprio_while_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resets, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
