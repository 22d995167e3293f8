/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The queue lifecycle of daemon/queue.h, through queue.c's own functions:
 * IDLE -> RUNNING (vqt_start, only when configured and its rings are in guest
 * memory), RUNNING -> STOPPING -> IDLE (vqt_stop: the thread joined, parked
 * requests cancelled, in-flight requests completed, the avail index kept as
 * the base a restart resumes from), a disabled queue that pops nothing until
 * it is enabled, and a broken ring that stops popping. Guest memory is a memfd
 * mapped here as the frontend maps it; the rings are written by this test as a
 * driver would, and requests go through the real fll session to a small fake
 * filesystem.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/virtio_ring.h>

#include "device.h"
#include "vu_msg.h"
#include "vufs_util.h"

#define MEM_SIZE (1u << 20)
#define UVA 0x7f0000000000ull /* where the "frontend" has the memory */
#define QSIZE 8u
#define DESC_GPA 0x0000u
#define AVAIL_GPA 0x1000u
#define USED_GPA 0x2000u
#define BUF_GPA 0x10000u /* request i: in at BUF_GPA + i * 0x2000, out 0x1000 after */

struct tq {
    int memfd;
    uint8_t *mem; /* the guest's memory as the test sees it */
    struct vufsd_config cfg;
    struct vufsd_dev *dev;
    struct vufsd_queue *q;
    int call_fd;
    uint16_t avail; /* next avail index the test publishes */
};

/* ---- A fake filesystem: GETATTR answers, SETLKW parks until cancelled ---------- */

static struct fll_req *parked; /* atomic */
static unsigned cancels;

static int f_init(void *fs, struct fll_conn *conn)
{
    return 0;
}

static int f_getattr(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                     struct fuse_attr_out *out)
{
    out->attr.ino = nodeid;
    out->attr.mode = 040755;
    return 0;
}

static int f_setlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in, bool sleep)
{
    if (!sleep)
        return 0;
    __atomic_store_n(&parked, r, __ATOMIC_RELEASE);
    return FLL_ASYNC;
}

static const struct fll_ops f_ops = {.init = f_init, .getattr = f_getattr, .setlk = f_setlk};

/* What pt_fs_cancel_waits does: every parked request answered EINTR, now. */
static void f_cancel_waits(void *fs)
{
    struct fll_req *r = __atomic_exchange_n(&parked, NULL, __ATOMIC_ACQ_REL);

    cancels++;
    if (r)
        fll_reply_err(r, -EINTR);
}

/* ---- The driver's side -------------------------------------------------------- */

static void *gpa(struct tq *t, uint64_t a)
{
    return t->mem + a;
}

/* Puts the next request (in bytes, then room for out bytes) on the ring and
 * kicks; with outside, its readable descriptor points past guest memory. */
static void submit_at(struct tq *t, const void *in, uint32_t in_len, uint32_t out_len, bool outside)
{
    unsigned i = t->avail % QSIZE;
    uint64_t in_gpa = BUF_GPA + i * 0x2000u, out_gpa = in_gpa + 0x1000u;
    struct vring_desc *d = gpa(t, DESC_GPA);
    struct vring_avail *av = gpa(t, AVAIL_GPA);

    memcpy(gpa(t, in_gpa), in, in_len);
    memset(gpa(t, out_gpa), 0, out_len);
    d[2 * i] = (struct vring_desc){.addr = outside ? MEM_SIZE : in_gpa, .len = in_len,
                                   .flags = VRING_DESC_F_NEXT, .next = (uint16_t)(2 * i + 1)};
    d[2 * i + 1] = (struct vring_desc){.addr = out_gpa, .len = out_len,
                                       .flags = VRING_DESC_F_WRITE};
    av->ring[t->avail % QSIZE] = (uint16_t)(2 * i);
    __atomic_store_n(&av->idx, (uint16_t)(t->avail + 1), __ATOMIC_RELEASE);
    t->avail++;
    uint64_t one = 1;
    assert_int_equal(write(t->q->kick_fd, &one, sizeof(one)), sizeof(one));
}

static void submit(struct tq *t, const void *in, uint32_t in_len, uint32_t out_len)
{
    submit_at(t, in, in_len, out_len, false);
}

static uint16_t used_idx(struct tq *t)
{
    return __atomic_load_n(&((struct vring_used *)gpa(t, USED_GPA))->idx, __ATOMIC_ACQUIRE);
}

/* Waits up to ms for the used index to reach want. */
static bool wait_used(struct tq *t, uint16_t want, int ms)
{
    for (int i = 0; i < ms && used_idx(t) != want; i++)
        usleep(1000);
    return used_idx(t) == want;
}

/* The reply of request number n (0-based, as submitted). */
static const struct fuse_out_header *reply_of(struct tq *t, unsigned n)
{
    return gpa(t, BUF_GPA + (n % QSIZE) * 0x2000u + 0x1000u);
}

static void submit_init(struct tq *t)
{
    struct {
        struct fuse_in_header h;
        struct fuse_init_in in;
    } m = {.h = {.len = sizeof(m), .opcode = FUSE_INIT, .unique = 2},
           .in = {.major = 7, .minor = 31}};
    submit(t, &m, sizeof(m), sizeof(struct fuse_out_header) + sizeof(struct fuse_init_out));
}

static void submit_getattr(struct tq *t, uint64_t unique)
{
    struct {
        struct fuse_in_header h;
        struct fuse_getattr_in in;
    } m = {.h = {.len = sizeof(m), .opcode = FUSE_GETATTR, .unique = unique, .nodeid = 1}};
    submit(t, &m, sizeof(m), sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out));
}

static void submit_setlkw(struct tq *t, uint64_t unique)
{
    struct {
        struct fuse_in_header h;
        struct fuse_lk_in in;
    } m = {.h = {.len = sizeof(m), .opcode = FUSE_SETLKW, .unique = unique, .nodeid = 1},
           .in = {.lk = {.type = F_WRLCK}}};
    submit(t, &m, sizeof(m), sizeof(struct fuse_out_header));
}

/* ---- Setup: a device with guest memory and queue 1 configured ------------------ */

static void configure(struct tq *t)
{
    struct vufsd_queue *q = t->q;

    q->num = QSIZE;
    q->desc_uva = UVA + DESC_GPA;
    q->avail_uva = UVA + AVAIL_GPA;
    q->used_uva = UVA + USED_GPA;
    q->addr_set = true;
    q->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    assert_true(q->kick_fd >= 0);
}

static int setup(void **state)
{
    struct tq *t = calloc(1, sizeof(*t));
    struct vmem_table *mt = NULL;
    struct vmem_desc d = {.gpa = 0, .size = MEM_SIZE, .uva = UVA, .mmap_offset = 0};

    assert_non_null(t);
    t->memfd = memfd_create("guest", MFD_CLOEXEC);
    assert_true(t->memfd >= 0);
    assert_int_equal(ftruncate(t->memfd, MEM_SIZE), 0);
    t->mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, t->memfd, 0);
    assert_true(t->mem != MAP_FAILED);
    struct vdev_config dc = {.cfg = &t->cfg, .ops = &f_ops, .fs_cancel_waits = f_cancel_waits};
    assert_int_equal(vdev_new(&dc, &t->dev), 0);
    assert_int_equal(vmem_table_new(&mt), 0);
    assert_int_equal(vmem_table_add(mt, &d, t->memfd), 0);
    vdev_mem_swap(t->dev, mt);
    vdev_set_owned(t->dev);
    t->q = &t->dev->q[1];
    t->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    vqt_set_call_fd(t->q, dup(t->call_fd));
    parked = NULL;
    cancels = 0;
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tq *t = *state;

    vdev_free(t->dev); /* stops what still runs */
    munmap(t->mem, MEM_SIZE);
    close(t->memfd);
    close(t->call_fd);
    free(t);
    return 0;
}

/* ---- The lifecycle -------------------------------------------------------------- */

/* IDLE stays IDLE until the queue is configured and its rings are in guest memory. */
static void test_start_needs_configuration(void **state)
{
    struct tq *t = *state;
    struct vufsd_queue *q = t->q;

    assert_int_equal(q->state, VQT_IDLE);
    assert_int_equal(vqt_start(q), -EAGAIN); /* nothing set */
    configure(t);
    q->addr_set = false;
    assert_int_equal(vqt_start(q), -EAGAIN); /* no SET_VRING_ADDR yet */
    q->addr_set = true;
    q->used_uva = UVA + MEM_SIZE - 8; /* the used ring would run past the memory */
    assert_true(vqt_start(q) < 0);
    assert_int_equal(q->state, VQT_IDLE);
    q->used_uva = UVA + USED_GPA;
    assert_int_equal(vqt_start(q), 0);
    assert_int_equal(q->state, VQT_RUNNING);
    assert_int_equal(vqt_start(q), 0); /* RUNNING already: nothing changes */
    vqt_stop(q);
    assert_int_equal(q->state, VQT_IDLE);
}

/*
 * RUNNING serves; vqt_stop takes it through STOPPING to IDLE with the avail
 * index kept as its base (GET_VRING_BASE), and a restart with a new kick fd
 * resumes there.
 */
static void test_serve_stop_restart(void **state)
{
    struct tq *t = *state;
    struct vufsd_queue *q = t->q;
    uint64_t v;

    configure(t);
    assert_int_equal(vqt_start(q), 0);
    submit_init(t);
    assert_true(wait_used(t, 1, 5000));
    assert_int_equal(reply_of(t, 0)->error, 0);
    assert_int_equal(read(t->call_fd, &v, sizeof(v)), sizeof(v)); /* the driver was told */
    vqt_stop(q);
    assert_int_equal(q->state, VQT_IDLE);
    assert_int_equal(q->base, 1);
    assert_int_equal(q->kick_fd, -1); /* the next start comes with a new kick fd */
    assert_int_equal(vqt_start(q), -EAGAIN);

    q->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    assert_int_equal(vqt_start(q), 0);
    submit_getattr(t, 4);
    assert_true(wait_used(t, 2, 5000));
    const struct fuse_out_header *oh = reply_of(t, 1);
    assert_int_equal(oh->error, 0);
    assert_int_equal(oh->unique, 4);
    assert_int_equal(oh->len, sizeof(*oh) + sizeof(struct fuse_attr_out));
    vqt_stop(q);
    assert_int_equal(q->base, 2);
}

/*
 * A request the filesystem parked (a SETLKW waiting for its lock) is in flight:
 * vqt_stop cancels it (fs_cancel_waits), waits for its completion, and only
 * then is the queue IDLE. The driver finds the EINTR reply in the used ring.
 */
static void test_stop_cancels_parked(void **state)
{
    struct tq *t = *state;
    struct vufsd_queue *q = t->q;

    configure(t);
    assert_int_equal(vqt_start(q), 0);
    submit_init(t);
    assert_true(wait_used(t, 1, 5000));
    submit_setlkw(t, 6);
    for (int i = 0; i < 5000 && !__atomic_load_n(&parked, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    assert_non_null(__atomic_load_n(&parked, __ATOMIC_ACQUIRE));
    assert_int_equal(used_idx(t), 1); /* parked: not answered */
    vqt_stop(q);
    assert_int_equal(q->state, VQT_IDLE);
    assert_true(cancels >= 1);
    assert_int_equal(q->inflight, 0);
    assert_int_equal(used_idx(t), 2);
    assert_int_equal(reply_of(t, 1)->error, -EINTR);
    assert_int_equal(reply_of(t, 1)->unique, 6);
}

/* With VHOST_USER_F_PROTOCOL_FEATURES a queue starts disabled: it pops nothing
 * until SET_VRING_ENABLE (the flag, then vqt_wake). */
static void test_disabled_pops_nothing(void **state)
{
    struct tq *t = *state;
    struct vufsd_queue *q = t->q;

    t->dev->features = 1ull << VU_F_PROTOCOL_FEATURES;
    configure(t);
    assert_int_equal(vqt_start(q), 0);
    submit_init(t);
    usleep(100 * 1000);
    assert_int_equal(used_idx(t), 0);
    __atomic_store_n(&q->enabled, true, __ATOMIC_RELEASE);
    vqt_wake(q);
    assert_true(wait_used(t, 1, 5000));
    vqt_stop(q);
}

/* A chain pointing outside guest memory breaks the device: nothing more is
 * popped, not even a good request after it, until the device is reset. */
static void test_broken_ring_stops(void **state)
{
    struct tq *t = *state;
    struct vufsd_queue *q = t->q;
    struct {
        struct fuse_in_header h;
        struct fuse_getattr_in in;
    } m = {.h = {.len = sizeof(m), .opcode = FUSE_GETATTR, .unique = 8, .nodeid = 1}};

    configure(t);
    assert_int_equal(vqt_start(q), 0);
    submit_init(t);
    assert_true(wait_used(t, 1, 5000));
    submit_at(t, &m, sizeof(m), sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out),
              true);
    for (int i = 0; i < 5000 && !vdev_is_broken(t->dev); i++)
        usleep(1000);
    assert_true(vdev_is_broken(t->dev));
    submit_getattr(t, 10);
    usleep(100 * 1000);
    assert_int_equal(used_idx(t), 1); /* neither the bad chain nor the good one after it */
    vqt_stop(q);
    assert_int_equal(q->state, VQT_IDLE);
    assert_int_equal(q->base, 2); /* the bad chain was consumed; the good one waits */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_needs_configuration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serve_stop_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_cancels_parked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disabled_pops_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broken_ring_stops, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
