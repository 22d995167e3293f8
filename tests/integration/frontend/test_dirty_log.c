/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Dirty page logging against the real daemon, through the in-tree frontend
 * playing QEMU's live migration:
 *
 *   test_dirty_log --backend 'VUFSD ... {socket} {dir}'
 *
 * The frontend shares a log (SET_LOG_BASE with a memfd, LOG_SHMFD), acks
 * VHOST_F_LOG_ALL and sets VHOST_VRING_F_LOG on every ring, then runs requests
 * whose writes into guest memory it knows: a READ into a buffer that straddles
 * two memory regions must mark exactly the pages the reply filled (not the
 * rest of the buffer), the used ring's page must be marked, a WRITE's data
 * (which the daemon only reads) must not be, and nothing may be marked with
 * logging off. A log the daemon cannot map (longer than its fd, an offset that
 * overflows, size 0) is refused with a non-zero answer, the old log stays in
 * use, and the daemon keeps serving. A stop (GET_VRING_BASE) while logging
 * marks the whole used ring.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"
#include "../it_util.h"

#define PAGE 4096u
#define FILE_SIZE (256u * 1024u)

static const char *opt_backend;

struct env {
    char *dir;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    uint64_t nodeid, fh;
};

static int setup(void **state)
{
    struct env *e = g_new0(struct env, 1);
    e->dir = g_dir_make_tmp("vufs-dirtylog-XXXXXX", NULL);
    assert_non_null(e->dir);
    g_autofree uint8_t *data = g_malloc(FILE_SIZE);
    for (unsigned i = 0; i < FILE_SIZE; i++)
        data[i] = (uint8_t)(i * 7 + 3);
    g_autofree char *p = g_build_filename(e->dir, "data.bin", NULL);
    assert_true(g_file_set_contents(p, (const char *)data, FILE_SIZE, NULL));

    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = opt_backend, .dir = e->dir, .timeout_ms = 20000 },
        .request_queues = 1,
        .queue_size = 128,
        .protocol_features = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                             (1ull << VFE_VU_PF_LOG_SHMFD),
    };
    assert_int_equal(vfe_dev_connect(&cfg, &e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct vfe_fuse_config fc = { .depth = 4, .timeout_ms = 20000 };
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    struct vfe_fuse_init_result init;
    assert_int_equal(vfe_fuse_init(e->fuse, &init), 0);
    struct fuse_entry_out ent;
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "data.bin", &ent), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, ent.nodeid, O_RDWR, &oo), 0);
    e->nodeid = ent.nodeid;
    e->fh = oo.fh;
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    vfe_fuse_free(e->fuse);
    int status = 0;
    bool own = false;
    vfe_dev_close_status(e->dev, &status, &own);
    it_rm_tree(e->dir);
    g_free(e->dir);
    g_free(e);
    /* The daemon survived everything above and exits 0 on the hang-up. */
    assert_true(own);
    assert_int_equal(status, 0);
    return 0;
}

/* Pages of [gpa, gpa+len) that are marked, as a string of '0'/'1'. */
static char *marks(struct env *e, uint64_t gpa, uint64_t len)
{
    unsigned n = (unsigned)((len + PAGE - 1) / PAGE);
    char *s = g_malloc(n + 1);
    for (unsigned i = 0; i < n; i++)
        s[i] = vfe_dev_log_test(e->dev, gpa + (uint64_t)i * PAGE) ? '1' : '0';
    s[n] = 0;
    return s;
}

static void test_log_marks_what_was_written(void **state)
{
    struct env *e = *state;
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    uint64_t desc, avail, used;
    vfe_vq_gpas(vfe_dev_vq(e->dev, 1), &desc, &avail, &used);

    /* The device offers logging and takes the log. */
    assert_true(vfe_dev_offered_features(e->dev) & (1ull << VFE_F_LOG_ALL));
    assert_int_equal(vfe_dev_log_start(e->dev), 0);
    vfe_dev_log_clear(e->dev);

    /* A 32 KiB buffer across two regions (16 KiB each side), page aligned;
     * READ of 5 pages and a half: the first 6 pages are written, not the rest. */
    uint64_t buf;
    assert_int_equal(vfe_mem_alloc_straddle(mem, 8 * PAGE, &buf), 0);
    assert_int_equal(buf % PAGE, 0);
    assert_true(vfe_mem_straddle_boundary(mem, buf, 8 * PAGE) != 0);
    struct vfe_sg sg = { buf, 8 * PAGE };
    assert_int_equal(vfe_fuse_read_sg(e->fuse, e->nodeid, e->fh, FILE_SIZE - 5 * PAGE - PAGE / 2,
                                      &sg, 1, false),
                     5 * PAGE + PAGE / 2);
    g_autofree char *m1 = marks(e, buf, 8 * PAGE);
    assert_string_equal(m1, "11111100");
    /* The used ring's entry and index: its first page at least. */
    assert_true(vfe_dev_log_test(e->dev, used));
    /* Not a blanket marking: the descriptor table and avail ring, which only
     * the driver writes, stay clean, and so does everything else. */
    assert_false(vfe_dev_log_test(e->dev, desc));
    assert_false(vfe_dev_log_test(e->dev, avail));
    uint64_t count = vfe_dev_log_count(e->dev);
    assert_true(count >= 7);
    assert_true(count <= 16);

    /* WRITE: the daemon reads the data pages, writes only the reply header. */
    vfe_dev_log_clear(e->dev);
    assert_int_equal(vfe_mem_fill(mem, buf, 'w', 8 * PAGE), 0);
    assert_int_equal(vfe_fuse_write_sg(e->fuse, e->nodeid, e->fh, 0, &sg, 1, false), 8 * PAGE);
    g_autofree char *m2 = marks(e, buf, 8 * PAGE);
    assert_string_equal(m2, "00000000");
    assert_true(vfe_dev_log_test(e->dev, used));

    /* Logging off: the same READ marks nothing at all. */
    assert_int_equal(vfe_dev_log_stop(e->dev), 0);
    vfe_dev_log_clear(e->dev);
    assert_int_equal(vfe_fuse_read_sg(e->fuse, e->nodeid, e->fh, 0, &sg, 1, false), 8 * PAGE);
    assert_int_equal(vfe_dev_log_count(e->dev), 0);

    /* On again (a second SET_LOG_BASE, as QEMU sends on a restart). */
    assert_int_equal(vfe_dev_log_start(e->dev), 0);
    vfe_dev_log_clear(e->dev);
    assert_int_equal(vfe_fuse_read_sg(e->fuse, e->nodeid, e->fh, 0, &sg, 1, false), 8 * PAGE);
    g_autofree char *m3 = marks(e, buf, 8 * PAGE);
    assert_string_equal(m3, "11111111");
    vfe_mem_free_block(mem, buf);
}

/* Logs the daemon must refuse; the current log stays and the daemon serves on. */
static void test_log_base_hostile(void **state)
{
    struct env *e = *state;
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    assert_int_equal(vfe_dev_log_start(e->dev), 0);

    int fd = memfd_create("short-log", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    static const struct {
        uint64_t size, offset;
    } bad[] = {
        { 8192, 0 },                 /* longer than the fd: would fault on access */
        { 4096, 1 },                 /* ends past it */
        { 0, 0 },                    /* empty */
        { 16, UINT64_MAX - 8 },      /* offset + size wraps */
        { UINT64_MAX, 0 },           /* absurd */
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t answer = 0;
        assert_int_equal(vfe_dev_log_base_raw(e->dev, fd, bad[i].size, bad[i].offset, &answer), 0);
        if (answer == 0)
            fail_msg("log of %llu bytes at %llu accepted", (unsigned long long)bad[i].size,
                     (unsigned long long)bad[i].offset);
    }
    close(fd);
    /* No fd at all: malformed, and the answer must still say it failed. */
    uint64_t lp[2] = {4096, 0};
    struct vfe_conn *c = vfe_dev_conn(e->dev);
    assert_int_equal(vfe_conn_send_raw(c, VFE_VU_SET_LOG_BASE, VFE_VU_VERSION, sizeof(lp), lp,
                                       sizeof(lp), NULL, 0), 0);
    struct vfe_msg rep;
    assert_int_equal(vfe_conn_recv_raw(c, &rep, NULL, NULL, 20000), 0);
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_SET_LOG_BASE, 8), 0);
    assert_true(rep.payload.u64 != 0);

    /* Still logging into the frontend's real log. */
    vfe_dev_log_clear(e->dev);
    uint64_t buf;
    assert_int_equal(vfe_mem_alloc(mem, 2 * PAGE, PAGE, &buf), 0);
    struct vfe_sg sg = { buf, 2 * PAGE };
    assert_int_equal(vfe_fuse_read_sg(e->fuse, e->nodeid, e->fh, 0, &sg, 1, false), 2 * PAGE);
    g_autofree char *m = marks(e, buf, 2 * PAGE);
    assert_string_equal(m, "11");
    vfe_mem_free_block(mem, buf);
    assert_int_equal(vfe_dev_log_stop(e->dev), 0);
}

/* A stop while logging: the whole used ring (flags and avail_event, which the
 * queue thread writes outside any completion) is marked before the answer. */
static void test_stop_marks_used_ring(void **state)
{
    struct env *e = *state;
    uint64_t desc, avail, used;
    struct vfe_vq *vq = vfe_dev_vq(e->dev, 1);
    vfe_vq_gpas(vq, &desc, &avail, &used);
    /* 128 entries: 4 + 8 * 128 + 2 bytes, placed by vfe; its last byte's page. */
    uint64_t last = used + 4 + 8 * 128 + 2 - 1;

    assert_int_equal(vfe_dev_log_start(e->dev), 0);
    vfe_dev_log_clear(e->dev);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    assert_true(vfe_dev_log_test(e->dev, used));
    assert_true(vfe_dev_log_test(e->dev, last));
    assert_false(vfe_dev_log_test(e->dev, desc));
    assert_int_equal(vfe_dev_start(e->dev), 0);
    assert_int_equal(vfe_dev_log_stop(e->dev), 0);
    struct fuse_entry_out ent;
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "data.bin", &ent), 0);
}

int main(int argc, char **argv)
{
    int r = it_backend_arg(argc, argv, &opt_backend);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_log_marks_what_was_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_base_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_marks_used_ring, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
