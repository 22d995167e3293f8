/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live migration between two real daemons on one shared directory, through
 * the in-tree frontend playing both QEMUs (the guest memory and the rings move
 * along, as QEMU's do):
 *
 *   test_migrate --backend 'VUFSD ... {socket} {dir}'
 *
 * The frontend opens files, reads and writes with dirty logging on, then
 * migrates the device (rings stopped, SET_DEVICE_STATE_FD save from the
 * first daemon, load into a second one started on the same directory,
 * CHECK_DEVICE_STATE on both, rings started on the second at the same
 * positions). The FUSE client carries on as the guest's driver would, with no
 * new INIT: its node ids, open file handles and directory handle work on the
 * second daemon and its data is intact; a file deleted between the two daemons
 * answers ESTALE, not another file's data. A state damaged on the way (a
 * flipped byte, cut short, empty, garbage) is refused by the destination's
 * CHECK_DEVICE_STATE, which keeps serving (a new driver's INIT works).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"
#include "../it_util.h"

#define FILE_SIZE (128u * 1024u)

static const char *opt_backend;

struct env {
    char *dir;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
};

static uint8_t pattern(uint64_t i)
{
    return (uint8_t)(i * 11 + (i >> 10) + 5);
}

static struct vfe_conn_config conn_config(const char *dir)
{
    return (struct vfe_conn_config){
        .backend_cmd = opt_backend, .dir = dir, .timeout_ms = 20000};
}

static int setup(void **state)
{
    struct env *e = g_new0(struct env, 1);
    e->dir = g_dir_make_tmp("vufs-migrate-XXXXXX", NULL);
    assert_non_null(e->dir);
    g_autofree uint8_t *data = g_malloc(FILE_SIZE);
    for (unsigned i = 0; i < FILE_SIZE; i++)
        data[i] = pattern(i);
    g_autofree char *sub = g_build_filename(e->dir, "sub", NULL);
    assert_int_equal(mkdir(sub, 0755), 0);
    g_autofree char *p = g_build_filename(e->dir, "sub", "data.bin", NULL);
    assert_true(g_file_set_contents(p, (const char *)data, FILE_SIZE, NULL));
    g_autofree char *q = g_build_filename(e->dir, "doomed.txt", NULL);
    assert_true(g_file_set_contents(q, "doomed\n", 7, NULL));

    struct vfe_dev_config cfg = {
        .conn = conn_config(e->dir),
        .request_queues = 1,
        .queue_size = 128,
        .protocol_features = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                             (1ull << VFE_VU_PF_LOG_SHMFD) | (1ull << VFE_VU_PF_DEVICE_STATE),
    };
    assert_int_equal(vfe_dev_connect(&cfg, &e->dev), 0);
    assert_true(vfe_dev_protocol_features(e->dev) & (1ull << VFE_VU_PF_DEVICE_STATE));
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct vfe_fuse_config fc = {.depth = 4, .timeout_ms = 20000};
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    struct vfe_fuse_init_result init;
    assert_int_equal(vfe_fuse_init(e->fuse, &init), 0);
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
    assert_true(own);
    assert_int_equal(status, 0);
    return 0;
}

static void check_data(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off,
                       size_t len)
{
    g_autofree uint8_t *buf = g_malloc(len);
    assert_int_equal(vfe_fuse_read(f, nodeid, fh, off, buf, len), (ssize_t)len);
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern(off + i))
            fail_msg("byte %zu at offset %llu: %02x != %02x", i, (unsigned long long)off,
                     buf[i], pattern(off + i));
}

static void unlink_doomed(void *opaque)
{
    struct env *e = opaque;
    g_autofree char *q = g_build_filename(e->dir, "doomed.txt", NULL);
    assert_int_equal(unlink(q), 0);
}

static void test_migrate_keeps_open_files(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = e->fuse;
    struct fuse_entry_out sub, data, doomed;
    struct fuse_open_out rw, dirh, dh;

    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "sub", &sub), 0);
    assert_int_equal(vfe_fuse_lookup(f, sub.nodeid, "data.bin", &data), 0);
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "doomed.txt", &doomed), 0);
    assert_int_equal(vfe_fuse_open(f, data.nodeid, O_RDWR, &rw), 0);
    assert_int_equal(vfe_fuse_open(f, doomed.nodeid, O_RDONLY, &dh), 0);
    assert_int_equal(vfe_fuse_opendir(f, sub.nodeid, &dirh), 0);
    check_data(f, data.nodeid, rw.fh, 4096, 8192);
    /* A write before the switch, with the log on as during a migration. */
    assert_int_equal(vfe_dev_log_start(e->dev), 0);
    static const char w1[] = "written before the switch";
    assert_int_equal(vfe_fuse_write(f, data.nodeid, rw.fh, 100, w1, sizeof(w1)), sizeof(w1));
    assert_true(vfe_dev_log_count(e->dev) > 0);

    /* Between the two daemons, the doomed file goes. */
    struct vfe_conn_config to = conn_config(e->dir);
    assert_int_equal(vfe_dev_migrate(e->dev, &to, unlink_doomed, e), 0);

    /* The second daemon: the same node ids and handles, no new INIT. */
    struct fuse_attr_out ao;
    assert_int_equal(vfe_fuse_getattr(f, data.nodeid, &ao), 0);
    assert_int_equal(ao.attr.size, FILE_SIZE);
    assert_int_equal(ao.attr.ino, data.attr.ino);
    check_data(f, data.nodeid, rw.fh, 8192, 16384);
    char got[sizeof(w1)];
    assert_int_equal(vfe_fuse_read(f, data.nodeid, rw.fh, 100, got, sizeof(got)), sizeof(got));
    assert_memory_equal(got, w1, sizeof(w1));
    static const char w2[] = "written after the switch";
    assert_int_equal(vfe_fuse_write(f, data.nodeid, rw.fh, 200, w2, sizeof(w2)), sizeof(w2));
    assert_int_equal(vfe_fuse_fsync(f, data.nodeid, rw.fh, false), 0);
    /* Both writes are in the host file, nothing else changed. */
    g_autofree char *hp = g_build_filename(e->dir, "sub", "data.bin", NULL);
    g_autofree char *host = NULL;
    gsize n = 0;
    assert_true(g_file_get_contents(hp, &host, &n, NULL));
    assert_int_equal(n, FILE_SIZE);
    assert_memory_equal(host + 100, w1, sizeof(w1));
    assert_memory_equal(host + 200, w2, sizeof(w2));
    assert_int_equal((uint8_t)host[99], pattern(99));
    assert_int_equal((uint8_t)host[200 + sizeof(w2)], pattern(200 + sizeof(w2)));
    /* The directory handle and node id still list and look up. */
    struct fuse_entry_out again;
    assert_int_equal(vfe_fuse_lookup(f, sub.nodeid, "data.bin", &again), 0);
    assert_int_equal(again.nodeid, data.nodeid);
    assert_int_equal(vfe_fuse_releasedir(f, sub.nodeid, dirh.fh), 0);
    /* The file deleted in between: its node id is stale; no other file's data. */
    char dbuf[16];
    ssize_t dr = vfe_fuse_read(f, doomed.nodeid, dh.fh, 0, dbuf, sizeof(dbuf));
    assert_true(dr < 0);
    assert_int_equal(vfe_fuse_getattr(f, doomed.nodeid, &ao), -ESTALE);
    assert_int_equal(vfe_fuse_release(f, data.nodeid, rw.fh, O_RDWR), 0);
    /* New work on the second daemon. */
    struct fuse_entry_out ce;
    struct fuse_open_out co;
    assert_int_equal(vfe_fuse_create(f, FUSE_ROOT_ID, "after.txt", O_RDWR | O_CREAT, 0644, &ce,
                                     &co), 0);
    assert_int_equal(vfe_fuse_write(f, ce.nodeid, co.fh, 0, "x", 1), 1);
    assert_int_equal(vfe_fuse_release(f, ce.nodeid, co.fh, O_RDWR), 0);
}

/* A state damaged on the way is refused by the destination, which stays usable. */
static void test_damaged_state_refused(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = e->fuse;
    struct fuse_entry_out data;
    struct fuse_open_out rw;
    assert_int_equal(vfe_fuse_lookup_path(f, "sub/data.bin", &data), 0);
    assert_int_equal(vfe_fuse_open(f, data.nodeid, O_RDWR, &rw), 0);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    g_autofree uint8_t *st = NULL;
    size_t len = 0;
    assert_int_equal(vfe_dev_state_save(e->dev, &st, &len, 1u << 24, NULL), 0);
    assert_true(len > 40);

    enum { FLIP, CUT, EMPTY, GARBAGE, NCASES };
    for (int c = 0; c < NCASES; c++) {
        g_autofree uint8_t *bad = g_memdup2(st, len);
        size_t blen = len;
        if (c == FLIP)
            bad[len / 2] ^= 0x40;
        else if (c == CUT)
            blen = len - 7;
        else if (c == EMPTY)
            blen = 0;
        else
            memset(bad, 0xa5, blen);
        struct vfe_dev_config cfg = {
            .conn = conn_config(e->dir),
            .protocol_features = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                                 (1ull << VFE_VU_PF_DEVICE_STATE),
        };
        struct vfe_dev *d2;
        assert_int_equal(vfe_dev_connect(&cfg, &d2), 0);
        uint64_t answer = 0;
        assert_int_equal(vfe_dev_state_load(d2, bad, blen, &answer), -EIO);
        assert_true(answer != 0);
        /* Still a working daemon: a new driver is served. */
        assert_int_equal(vfe_dev_start(d2), 0);
        struct vfe_fuse *f2;
        struct vfe_fuse_config fc = {.depth = 2, .timeout_ms = 20000};
        assert_int_equal(vfe_fuse_new(d2, &fc, &f2), 0);
        struct vfe_fuse_init_result init;
        assert_int_equal(vfe_fuse_init(f2, &init), 0);
        struct fuse_entry_out ent;
        assert_int_equal(vfe_fuse_lookup_path(f2, "sub/data.bin", &ent), 0);
        vfe_fuse_free(f2);
        int status = 0;
        bool own = false;
        vfe_dev_close_status(d2, &status, &own);
        assert_true(own);
        assert_int_equal(status, 0);
    }
    /* The source kept everything: it serves on when the migration fails. */
    assert_int_equal(vfe_dev_start(e->dev), 0);
    check_data(f, data.nodeid, rw.fh, 0, 4096);
}

/* SET_DEVICE_STATE_FD's raw answer: the u64, and whether an fd came with it. */
static uint64_t raw_set_state_fd(struct vfe_conn *c, uint32_t direction, uint32_t phase, int fd,
                                 unsigned *nfds_back)
{
    uint32_t p[2] = {direction, phase};
    assert_int_equal(vfe_conn_send_raw(c, VFE_VU_SET_DEVICE_STATE_FD, VFE_VU_VERSION, sizeof(p),
                                       p, sizeof(p), &fd, 1), 0);
    struct vfe_msg rep;
    int fds[2];
    unsigned n = 2;
    assert_int_equal(vfe_conn_recv_raw(c, &rep, fds, &n, 20000), 0);
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_SET_DEVICE_STATE_FD, 8), 0);
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    *nfds_back = n;
    return rep.payload.u64;
}

/* The transfer messages at the wrong moment or with wrong parameters: refused
 * (an error in bits 0-7, never an fd back), the device serves on. */
static void test_state_messages_refused(void **state)
{
    struct env *e = *state;
    struct vfe_conn *c = vfe_dev_conn(e->dev);
    int p[2];
    unsigned n;
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    /* The rings are running: the device is not suspended. */
    uint64_t a = raw_set_state_fd(c, 0, 0, p[1], &n);
    assert_true((a & 0xff) != 0);
    assert_true(a & (1ull << 8));
    assert_int_equal(n, 0);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    /* An unknown phase, an unknown direction, the wrong end of the pipe. */
    a = raw_set_state_fd(c, 0, 1, p[1], &n);
    assert_true((a & 0xff) != 0 && (a & (1ull << 8)) && n == 0);
    a = raw_set_state_fd(c, 7, 0, p[1], &n);
    assert_true((a & 0xff) != 0 && (a & (1ull << 8)) && n == 0);
    a = raw_set_state_fd(c, 0, 0, p[0], &n);
    assert_true((a & 0xff) != 0 && (a & (1ull << 8)) && n == 0);
    /* No fd at all: the message is malformed; an answer still comes. */
    uint32_t params[2] = {0, 0};
    assert_int_equal(vfe_conn_send_raw(c, VFE_VU_SET_DEVICE_STATE_FD, VFE_VU_VERSION,
                                       sizeof(params), params, sizeof(params), NULL, 0), 0);
    struct vfe_msg rep;
    assert_int_equal(vfe_conn_recv_raw(c, &rep, NULL, NULL, 20000), 0);
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_SET_DEVICE_STATE_FD, 8), 0);
    assert_true((rep.payload.u64 & 0xff) != 0);
    /* CHECK with no transfer. */
    struct vfe_msg m;
    vfe_msg_init(&m, VFE_VU_CHECK_DEVICE_STATE, 0);
    assert_int_equal(vfe_conn_call(c, &m, NULL, 0, &rep), 0);
    assert_true(rep.payload.u64 != 0);
    close(p[0]);
    close(p[1]);
    /* Serving on. */
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct fuse_entry_out ent;
    assert_int_equal(vfe_fuse_lookup_path(e->fuse, "sub/data.bin", &ent), 0);
}

int main(int argc, char **argv)
{
    int r = it_backend_arg(argc, argv, &opt_backend);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrate_keeps_open_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_state_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_messages_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
