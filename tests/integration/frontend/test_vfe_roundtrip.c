/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * FUSE round trips through the in-tree frontend against a real vhost-user-fs
 * backend spawned for each test on a fresh shared directory:
 *
 *   test_vfe_roundtrip --backend 'CMD {socket} {dir}' --queues N
 *
 * A backend binary that does not exist is a failure, not a skip.
 * Each test checks both sides: what the FUSE replies say and what the host
 * directory really holds.
 */
#include <dirent.h>
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "../it_util.h"
#include "vfe.h"
#include "vufs_util.h"

#define BIG_SIZE (1u << 20)

static const char *opt_backend;
static unsigned opt_queues = 1;
static const char *opt_log;
/* The legacy C virtiofsd (libvhost-user) counts the iovecs a straddling buffer
 * splits into against the number of entries of its indirect table, calls that
 * a descriptor loop and exits. With this set, the test asserts exactly that. */
static bool opt_quirk_indirect_split_dies;
/* The Rust virtiofsd (rust-vmm vm-memory) cannot follow a buffer across two
 * memory regions: its queue thread panics (OutOfBounds) and the request is
 * never answered. With this set, the straddle tests assert that stall (a few
 * seconds without an answer) and accept whatever exit follows. */
static bool opt_quirk_straddle_stalls;
#define STALL_MS 3000
/* The backend must exit by itself with status 0 when the frontend hangs up
 * (a sanitizer report or a crash at shutdown fails the test). */
static bool opt_expect_clean_exit;
/* INIT's max_background must be this (-1: whatever the backend says). */
static long opt_expect_max_background = -1;

struct env {
    char *dir;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    bool peer_broken;         /* a quirk test broke the peer on purpose */
    struct vfe_fuse_init_result init;
};

static uint8_t pattern(uint64_t i)
{
    return (uint8_t)(i * 31 + (i >> 12) * 7 + 1);
}

static void write_host_file(const char *dir, const char *name, const void *data, size_t len)
{
    g_autofree char *p = g_build_filename(dir, name, NULL);
    g_autoptr(GError) err = NULL;
    assert_true(g_file_set_contents(p, data, (gssize)len, &err));
}

static char *read_host_file(const char *dir, const char *name, size_t *len)
{
    g_autofree char *p = g_build_filename(dir, name, NULL);
    char *data = NULL;
    gsize n = 0;
    if (!g_file_get_contents(p, &data, &n, NULL))
        return NULL;
    *len = n;
    return data;
}

/* plain: no EVENT_IDX and no indirect descriptors (flag-based notification
 * suppression), and SET_VRING_ERR sent too. */
static int start_backend_ex(struct env *e, uint32_t proto_minor, unsigned depth, bool plain)
{
    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = opt_backend, .dir = e->dir, .backend_log = opt_log,
                  .timeout_ms = 20000 },
        .request_queues = opt_queues,
        .queue_size = 128,
    };
    if (plain) {
        cfg.features = 1ull << VFE_F_VERSION_1;
        cfg.send_vring_err = true;
        cfg.queue_size = 64;
    }
    int r = vfe_dev_connect(&cfg, &e->dev);
    if (r < 0) {
        print_error("connect to '%s': %s\n", opt_backend, strerror(-r));
        return r;
    }
    r = vfe_dev_start(e->dev);
    if (r < 0) {
        print_error("device start: %s\n", strerror(-r));
        return r;
    }
    struct vfe_fuse_config fc = { .depth = depth, .proto_minor = proto_minor, .timeout_ms = 20000 };
    r = vfe_fuse_new(e->dev, &fc, &e->fuse);
    if (r < 0)
        return r;
    return vfe_fuse_init(e->fuse, &e->init);
}

static int start_backend(struct env *e, uint32_t proto_minor, unsigned depth)
{
    return start_backend_ex(e, proto_minor, depth, false);
}

/* Returns -1 when a clean exit was expected and did not happen. */
static int stop_backend(struct env *e)
{
    vfe_fuse_free(e->fuse);
    e->fuse = NULL;
    int status = 0;
    bool own = false;
    int r = vfe_dev_close_status(e->dev, &status, &own);
    e->dev = NULL;
    if (!opt_expect_clean_exit || r == -EINVAL || e->peer_broken)
        return 0;
    if (r < 0 || !own || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_error("backend did not exit cleanly: %s, status 0x%x\n",
                    own ? "exited" : "had to be killed", status);
        return -1;
    }
    return 0;
}

static int setup_dir(struct env *e)
{
    e->dir = g_dir_make_tmp("vfe-share-XXXXXX", NULL);
    assert_non_null(e->dir);
    chmod(e->dir, 0755);
    write_host_file(e->dir, "hello.txt", "hello from the host\n", 20);
    g_autofree uint8_t *big = g_malloc(BIG_SIZE);
    for (uint32_t i = 0; i < BIG_SIZE; i++)
        big[i] = pattern(i);
    write_host_file(e->dir, "big.bin", big, BIG_SIZE);
    g_autofree char *sub = g_build_filename(e->dir, "subdir", NULL);
    assert_int_equal(mkdir(sub, 0755), 0);
    return 0;
}

static int setup(void **state)
{
    /* A missing backend binary must fail loudly: CI installs it. */
    g_auto(GStrv) argv = NULL;
    if (!opt_backend || !g_shell_parse_argv(opt_backend, NULL, &argv, NULL) ||
        access(argv[0], X_OK) != 0) {
        print_error("backend '%s' is not an executable\n", opt_backend ? opt_backend : "(none)");
        return -1;
    }
    struct env *e = g_new0(struct env, 1);
    setup_dir(e);
    *state = e;
    if (start_backend(e, 0, 16) < 0) {
        /* cmocka skips teardown after a failed setup: clean up here. */
        stop_backend(e);
        it_rm_tree(e->dir);
        g_free(e->dir);
        g_free(e);
        *state = NULL;
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    if (!e)
        return 0;
    int r = stop_backend(e);
    it_rm_tree(e->dir);
    g_free(e->dir);
    g_free(e);
    return r;
}

static struct vfe_fuse *F(void **state)
{
    return ((struct env *)*state)->fuse;
}

/* ---- Tests ------------------------------------------------------------------ */

static void test_init(void **state)
{
    struct env *e = *state;
    assert_int_equal(e->init.major, 7);
    assert_true(e->init.minor >= 31 && e->init.minor <= 41);
    assert_true(e->init.max_write >= 4096);
    if (opt_expect_max_background >= 0) {
        assert_int_equal(e->init.max_background, opt_expect_max_background);
        assert_int_equal(e->init.congestion_threshold, opt_expect_max_background / 4 * 3);
    }
    /* A second session speaking the oldest protocol we support: the backend
     * answers with its own minor and the client uses the lower of the two. */
    assert_int_equal(stop_backend(e), 0);
    assert_int_equal(start_backend_ex(e, 31, 4, true), 0);
    assert_int_equal(e->init.major, 7);
    assert_true(e->init.minor >= 31);
    uint64_t feat = vfe_dev_features(e->dev);
    assert_false(feat & (1ull << VFE_F_EVENT_IDX));
    assert_false(feat & (1ull << VFE_F_INDIRECT_DESC));
    /* Requests still flow with flag-based notification on every queue. */
    struct fuse_entry_out ent;
    for (unsigned q = 1; q <= opt_queues; q++) {
        vfe_fuse_set_queue(e->fuse, q);
        assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "hello.txt", &ent), 0);
        struct fuse_open_out oo;
        assert_int_equal(vfe_fuse_open(e->fuse, ent.nodeid, O_RDONLY, &oo), 0);
        char buf[32] = { 0 };
        assert_int_equal(vfe_fuse_read(e->fuse, ent.nodeid, oo.fh, 0, buf, sizeof(buf)), 20);
        assert_memory_equal(buf, "hello from the host\n", 20);
        assert_int_equal(vfe_fuse_release(e->fuse, ent.nodeid, oo.fh, O_RDONLY), 0);
    }
    assert_int_equal(vfe_fuse_forget(e->fuse, ent.nodeid, 1), 0);
}

struct names {
    GHashTable *seen;
};

static void collect(void *opaque, const char *name, size_t namelen, uint64_t ino, uint32_t type,
                    uint64_t off)
{
    struct names *n = opaque;
    g_hash_table_insert(n->seen, g_strndup(name, namelen), GUINT_TO_POINTER(type));
}

static void test_roundtrip(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);

    /* LOOKUP + GETATTR of a file the host wrote. */
    struct fuse_entry_out ent;
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &ent), 0);
    assert_true(ent.nodeid != 0 && ent.nodeid != FUSE_ROOT_ID);
    g_autofree char *hp = g_build_filename(e->dir, "hello.txt", NULL);
    struct stat st;
    assert_int_equal(stat(hp, &st), 0);
    assert_int_equal(ent.attr.ino, st.st_ino);
    assert_int_equal(ent.attr.size, 20);
    struct fuse_attr_out ga;
    assert_int_equal(vfe_fuse_getattr(f, ent.nodeid, &ga), 0);
    assert_int_equal(ga.attr.size, 20);
    assert_true(S_ISREG(ga.attr.mode));
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "no-such-file", &ent), -ENOENT);
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &ent), 0);

    /* OPEN + READ + RELEASE. */
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_open(f, ent.nodeid, O_RDONLY, &oo), 0);
    char buf[64] = { 0 };
    assert_int_equal(vfe_fuse_read(f, ent.nodeid, oo.fh, 0, buf, sizeof(buf)), 20);
    assert_memory_equal(buf, "hello from the host\n", 20);
    assert_int_equal(vfe_fuse_read(f, ent.nodeid, oo.fh, 6, buf, 4), 4);
    assert_memory_equal(buf, "from", 4);
    assert_int_equal(vfe_fuse_release(f, ent.nodeid, oo.fh, O_RDONLY), 0);

    /* CREATE + WRITE + FSYNC + RELEASE, then the host reads it. */
    struct fuse_entry_out ce;
    struct fuse_open_out co;
    assert_int_equal(vfe_fuse_create(f, FUSE_ROOT_ID, "guest.txt", O_WRONLY | O_CREAT, 0644, &ce,
                                     &co), 0);
    const char *text = "written through virtqueues\n";
    assert_int_equal(vfe_fuse_write(f, ce.nodeid, co.fh, 0, text, strlen(text)),
                     (ssize_t)strlen(text));
    assert_int_equal(vfe_fuse_fsync(f, ce.nodeid, co.fh, false), 0);
    assert_int_equal(vfe_fuse_release(f, ce.nodeid, co.fh, O_WRONLY), 0);
    size_t n = 0;
    g_autofree char *host = read_host_file(e->dir, "guest.txt", &n);
    assert_non_null(host);
    assert_int_equal(n, strlen(text));
    assert_memory_equal(host, text, n);
    assert_int_equal(vfe_fuse_getattr(f, ce.nodeid, &ga), 0);
    assert_int_equal(ga.attr.size, strlen(text));

    /* MKDIR shows up on the host. */
    struct fuse_entry_out de;
    assert_int_equal(vfe_fuse_mkdir(f, FUSE_ROOT_ID, "newdir", 0755, &de), 0);
    g_autofree char *dp = g_build_filename(e->dir, "newdir", NULL);
    assert_int_equal(stat(dp, &st), 0);
    assert_true(S_ISDIR(st.st_mode));

    /* READDIR lists the host's entries and ours. */
    struct names nm = { g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL) };
    int cnt = vfe_fuse_readdir_all(f, FUSE_ROOT_ID, collect, &nm);
    assert_true(cnt >= 5);
    const char *want[] = { "hello.txt", "big.bin", "subdir", "guest.txt", "newdir" };
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++)
        assert_true(g_hash_table_contains(nm.seen, want[i]));
    assert_int_equal(GPOINTER_TO_UINT(g_hash_table_lookup(nm.seen, "subdir")), DT_DIR);
    assert_int_equal(GPOINTER_TO_UINT(g_hash_table_lookup(nm.seen, "hello.txt")), DT_REG);
    g_hash_table_destroy(nm.seen);

    /* STATFS. */
    struct fuse_statfs_out sf;
    assert_int_equal(vfe_fuse_statfs(f, FUSE_ROOT_ID, &sf), 0);
    assert_true(sf.st.bsize > 0 && sf.st.namelen > 0);

    /* UNLINK / RMDIR reach the host; FORGET on the hiprio queue is consumed. */
    assert_int_equal(vfe_fuse_unlink(f, FUSE_ROOT_ID, "guest.txt"), 0);
    g_autofree char *gp = g_build_filename(e->dir, "guest.txt", NULL);
    assert_int_equal(access(gp, F_OK), -1);
    assert_int_equal(vfe_fuse_rmdir(f, FUSE_ROOT_ID, "newdir"), 0);
    assert_int_equal(access(dp, F_OK), -1);
    assert_int_equal(vfe_fuse_forget(f, ce.nodeid, 1), 0);
    assert_int_equal(vfe_fuse_forget(f, de.nodeid, 1), 0);
    /* The session still works after the forgets. */
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &ent), 0);
}

/* Data through guest buffers described by several descriptors, direct or indirect. */
static void sg_roundtrip(void **state, bool indirect)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    enum { SEG = 3, SEGLEN = 5000 };
    struct vfe_sg sg[SEG];
    for (unsigned i = 0; i < SEG; i++) {
        assert_int_equal(vfe_mem_alloc(mem, SEGLEN, 64, &sg[i].gpa), 0);
        sg[i].len = SEGLEN;
    }
    /* READ of big.bin at an odd offset into three buffers. */
    struct fuse_entry_out ent;
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "big.bin", &ent), 0);
    assert_int_equal(vfe_fuse_open(f, ent.nodeid, O_RDWR, &oo), 0);
    uint64_t off = 12345;
    assert_int_equal(vfe_fuse_read_sg(f, ent.nodeid, oo.fh, off, sg, SEG, indirect), SEG * SEGLEN);
    g_autofree uint8_t *got = g_malloc(SEGLEN);
    for (unsigned i = 0; i < SEG; i++) {
        assert_int_equal(vfe_mem_read(mem, sg[i].gpa, got, SEGLEN), 0);
        for (unsigned k = 0; k < SEGLEN; k++)
            if (got[k] != pattern(off + i * SEGLEN + k))
                fail_msg("segment %u byte %u: %02x != %02x", i, k, got[k],
                         pattern(off + i * SEGLEN + k));
    }
    /* WRITE from three buffers; the host sees them in order. */
    for (unsigned i = 0; i < SEG; i++)
        assert_int_equal(vfe_mem_fill(mem, sg[i].gpa, 'a' + (int)i, SEGLEN), 0);
    assert_int_equal(vfe_fuse_write_sg(f, ent.nodeid, oo.fh, 100, sg, SEG, indirect),
                     SEG * SEGLEN);
    assert_int_equal(vfe_fuse_release(f, ent.nodeid, oo.fh, O_RDWR), 0);
    size_t n = 0;
    g_autofree char *host = read_host_file(e->dir, "big.bin", &n);
    assert_int_equal(n, BIG_SIZE);
    for (unsigned i = 0; i < SEG * SEGLEN; i++)
        if (host[100 + i] != 'a' + (int)(i / SEGLEN))
            fail_msg("host byte %u is %02x", 100 + i, (uint8_t)host[100 + i]);
    assert_int_equal((uint8_t)host[99], pattern(99));
    assert_int_equal((uint8_t)host[100 + SEG * SEGLEN], pattern(100 + SEG * SEGLEN));
    for (unsigned i = 0; i < SEG; i++)
        vfe_mem_free_block(mem, sg[i].gpa);
}

static void test_direct_sg(void **state)
{
    sg_roundtrip(state, false);
}

static void test_indirect(void **state)
{
    sg_roundtrip(state, true);
}

/* One descriptor whose buffer crosses two guest-physical regions that are not
 * contiguous in the frontend's (and so the backend's) address space. */
static void straddle_roundtrip(void **state, bool indirect)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    enum { LEN = 64 * 1024 };
    uint64_t gpa;
    assert_int_equal(vfe_mem_alloc_straddle(mem, LEN, &gpa), 0);
    assert_true(vfe_mem_straddle_boundary(mem, gpa, LEN) != 0);
    struct vfe_sg sg = { gpa, LEN };

    g_autofree uint8_t *data = g_malloc(LEN);
    for (unsigned i = 0; i < LEN; i++)
        data[i] = (uint8_t)(i * 13 + 5);
    assert_int_equal(vfe_mem_write(mem, gpa, data, LEN), 0);
    struct fuse_entry_out ce;
    struct fuse_open_out co;
    assert_int_equal(vfe_fuse_create(f, FUSE_ROOT_ID, "straddle.bin", O_RDWR | O_CREAT, 0644, &ce,
                                     &co), 0);
    assert_int_equal(vfe_fuse_write_sg(f, ce.nodeid, co.fh, 0, &sg, 1, indirect), LEN);
    size_t n = 0;
    g_autofree char *host = read_host_file(e->dir, "straddle.bin", &n);
    assert_int_equal(n, LEN);
    assert_memory_equal(host, data, LEN);

    /* Read big.bin back into the same straddling buffer. */
    assert_int_equal(vfe_mem_fill(mem, gpa, 0, LEN), 0);
    struct fuse_entry_out be;
    struct fuse_open_out bo;
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "big.bin", &be), 0);
    assert_int_equal(vfe_fuse_open(f, be.nodeid, O_RDONLY, &bo), 0);
    assert_int_equal(vfe_fuse_read_sg(f, be.nodeid, bo.fh, 4096, &sg, 1, indirect), LEN);
    assert_int_equal(vfe_mem_read(mem, gpa, data, LEN), 0);
    for (unsigned i = 0; i < LEN; i++)
        if (data[i] != pattern(4096 + i))
            fail_msg("straddled read byte %u: %02x != %02x", i, data[i], pattern(4096 + i));
    assert_int_equal(vfe_fuse_release(f, be.nodeid, bo.fh, O_RDONLY), 0);
    assert_int_equal(vfe_fuse_release(f, ce.nodeid, co.fh, O_RDWR), 0);
    vfe_mem_free_block(mem, gpa);
}

/* The Rust daemon's known failure: the straddled request is never answered. */
static void straddle_stalls_peer(void **state, bool indirect)
{
    struct env *e = *state;
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    enum { LEN = 64 * 1024 };
    uint64_t gpa;
    assert_int_equal(vfe_mem_alloc_straddle(mem, LEN, &gpa), 0);
    struct vfe_sg sg = { gpa, LEN };
    struct fuse_entry_out ent;
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "big.bin", &ent), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, ent.nodeid, O_RDONLY, &oo), 0);
    struct fuse_read_in in = { .fh = oo.fh, .size = LEN };
    struct vfe_fuse_op op = { .opcode = FUSE_READ, .nodeid = ent.nodeid, .arg = &in,
                              .arg_len = sizeof(in), .out_data = &sg, .out_data_cnt = 1,
                              .flags = indirect ? VFE_OP_INDIRECT : 0 };
    assert_int_equal(vfe_fuse_submit(e->fuse, 1, &op), 0);
    vfe_fuse_kick(e->fuse, 1);
    struct vfe_fuse_op *done[1];
    int n = vfe_fuse_reap(e->fuse, 1, done, 1, STALL_MS);
    assert_true(n == -ETIMEDOUT || n == 0);
    assert_false(op.done);
    vfe_fuse_abandon_all(e->fuse, 1);
    e->peer_broken = true;
}

static void test_straddle(void **state)
{
    if (opt_quirk_straddle_stalls)
        straddle_stalls_peer(state, false);
    else
        straddle_roundtrip(state, false);
}

/* The legacy daemon's known failure: it must exit (deterministically), not
 * hang or answer garbage. */
static void straddle_indirect_kills_peer(void **state)
{
    struct env *e = *state;
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    enum { LEN = 64 * 1024 };
    uint64_t gpa;
    assert_int_equal(vfe_mem_alloc_straddle(mem, LEN, &gpa), 0);
    struct vfe_sg sg = { gpa, LEN };
    struct fuse_entry_out ent;
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "big.bin", &ent), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, ent.nodeid, O_RDONLY, &oo), 0);
    struct fuse_read_in in = { .fh = oo.fh, .size = LEN };
    struct vfe_fuse_op op = { .opcode = FUSE_READ, .nodeid = ent.nodeid, .arg = &in,
                              .arg_len = sizeof(in), .out_data = &sg, .out_data_cnt = 1,
                              .flags = VFE_OP_INDIRECT };
    assert_int_equal(vfe_fuse_submit(e->fuse, 1, &op), 0);
    vfe_fuse_kick(e->fuse, 1);
    struct vfe_conn *c = vfe_dev_conn(e->dev);
    assert_true(vfe_conn_wait_closed(c, 60000));
    int status = 0;
    for (int i = 0; i < 6000 && !vfe_conn_backend_exited(c, &status); i++)
        usleep(10000);
    assert_true(vfe_conn_backend_exited(c, &status));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    assert_false(op.done);
    /* Its failure is the expected outcome here, not an unclean shutdown. */
    vfe_fuse_free(e->fuse);
    e->fuse = NULL;
    vfe_dev_close(e->dev);
    e->dev = NULL;
}

static void test_straddle_indirect(void **state)
{
    if (opt_quirk_straddle_stalls)
        straddle_stalls_peer(state, true);
    else if (opt_quirk_indirect_split_dies)
        straddle_indirect_kills_peer(state);
    else
        straddle_roundtrip(state, true);
}

/* depth reads in flight on each request queue, completions in any order. */
static void test_pipelined_queues(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    unsigned nq = vfe_dev_nqueues(e->dev) - 1;
    assert_int_equal(nq, opt_queues);
    enum { DEPTH = 16, CHUNK = 8192 };

    struct fuse_entry_out ent;
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "big.bin", &ent), 0);
    assert_int_equal(vfe_fuse_open(f, ent.nodeid, O_RDONLY, &oo), 0);

    unsigned total = nq * DEPTH;
    struct vfe_fuse_op *ops = g_new0(struct vfe_fuse_op, total);
    struct fuse_read_in *in = g_new0(struct fuse_read_in, total);
    struct vfe_sg *sg = g_new0(struct vfe_sg, total);
    for (unsigned i = 0; i < total; i++) {
        assert_int_equal(vfe_mem_alloc(mem, CHUNK, 64, &sg[i].gpa), 0);
        sg[i].len = CHUNK;
        in[i] = (struct fuse_read_in){ .fh = oo.fh, .offset = (uint64_t)(i * 37 % 100) * CHUNK,
                                       .size = CHUNK };
        ops[i] = (struct vfe_fuse_op){ .opcode = FUSE_READ, .nodeid = ent.nodeid, .arg = &in[i],
                                       .arg_len = sizeof(in[i]), .out_data = &sg[i],
                                       .out_data_cnt = 1,
                                       .flags = i % 2 ? VFE_OP_INDIRECT : 0 };
    }
    /* Fill every queue before kicking any of them. */
    for (unsigned q = 0; q < nq; q++)
        for (unsigned k = 0; k < DEPTH; k++)
            assert_int_equal(vfe_fuse_submit(f, 1 + q, &ops[q * DEPTH + k]), 0);
    for (unsigned q = 0; q < nq; q++) {
        assert_int_equal(vfe_fuse_in_flight(f, 1 + q), DEPTH);
        vfe_fuse_kick(f, 1 + q);
    }
    unsigned got = 0;
    uint64_t deadline = vufs_now_ns() + 60ull * 1000000000ull;
    while (got < total) {
        for (unsigned q = 0; q < nq; q++) {
            struct vfe_fuse_op *done[DEPTH];
            int r = vfe_fuse_reap(f, 1 + q, done, DEPTH, 100);
            if (r == -ETIMEDOUT)
                continue;
            assert_true(r >= 0);
            for (int k = 0; k < r; k++) {
                assert_true(done[k]->done);
                assert_int_equal(done[k]->error, 0);
                assert_int_equal(done[k]->data_len, CHUNK);
                assert_true(done[k]->t_done_ns >= done[k]->t_submit_ns);
            }
            got += (unsigned)r;
        }
        assert_true(vufs_now_ns() < deadline);
    }
    g_autofree uint8_t *buf = g_malloc(CHUNK);
    for (unsigned i = 0; i < total; i++) {
        assert_int_equal(vfe_mem_read(mem, sg[i].gpa, buf, CHUNK), 0);
        for (unsigned k = 0; k < CHUNK; k++)
            if (buf[k] != pattern(in[i].offset + k))
                fail_msg("op %u byte %u wrong", i, k);
        for (unsigned j = 0; j < i; j++)
            assert_true(ops[j].unique != ops[i].unique);
        vfe_mem_free_block(mem, sg[i].gpa);
    }
    for (unsigned q = 0; q < nq; q++)
        assert_int_equal(vfe_fuse_in_flight(f, 1 + q), 0);
    assert_int_equal(vfe_fuse_release(f, ent.nodeid, oo.fh, O_RDONLY), 0);
    g_free(ops);
    g_free(in);
    g_free(sg);
}

/* Every request queue serves metadata and data on its own. */
static void test_each_queue(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);
    for (unsigned q = 1; q <= opt_queues; q++) {
        vfe_fuse_set_queue(f, q);
        g_autofree char *name = g_strdup_printf("q%u.txt", q);
        struct fuse_entry_out ce;
        struct fuse_open_out co;
        assert_int_equal(vfe_fuse_create(f, FUSE_ROOT_ID, name, O_RDWR | O_CREAT, 0600, &ce, &co),
                         0);
        assert_int_equal(vfe_fuse_write(f, ce.nodeid, co.fh, 0, name, strlen(name)),
                         (ssize_t)strlen(name));
        char back[16] = { 0 };
        assert_int_equal(vfe_fuse_read(f, ce.nodeid, co.fh, 0, back, sizeof(back)),
                         (ssize_t)strlen(name));
        assert_string_equal(back, name);
        assert_int_equal(vfe_fuse_release(f, ce.nodeid, co.fh, O_RDWR), 0);
        size_t n = 0;
        g_autofree char *host = read_host_file(e->dir, name, &n);
        assert_non_null(host);
        assert_int_equal(n, strlen(name));
    }
    vfe_fuse_set_queue(f, 1);
}

/* GET_VRING_BASE stops the queues (a guest reset); a new start serves again. */
static void test_stop_restart(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);
    struct fuse_entry_out ent;
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &ent), 0);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &ent), 0);
    assert_int_equal(ent.attr.size, 20);
}

/* The benchmark loop on every request queue, bounded by a request count (no
 * timing assertions): every request completes without error and is counted. */
static void test_bench_loop(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);
    struct fuse_entry_out ent;
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "big.bin", &ent), 0);
    assert_int_equal(vfe_fuse_open(f, ent.nodeid, O_RDWR, &oo), 0);
    struct vfe_bench_config bc = { .op = VFE_BENCH_READ, .queues = opt_queues, .depth = 8,
                                   .block = 4096, .nodeid = ent.nodeid, .fh = oo.fh,
                                   .file_size = BIG_SIZE, .random = true, .max_ops = 2001 };
    struct vfe_bench_result *res = g_new0(struct vfe_bench_result, 1);
    assert_int_equal(vfe_bench_run(f, e->dev, &bc, res), 0);
    assert_int_equal(res->ops, 2001);
    assert_int_equal(res->errors, 0);
    assert_int_equal(res->bytes, 2001ull * 4096);
    assert_int_equal(res->latency.total, 2001);
    assert_true(res->latency.min <= vfe_hist_percentile(&res->latency, 50));
    assert_true(vfe_hist_percentile(&res->latency, 50) <=
                vfe_hist_percentile(&res->latency, 99));

    /* Sequential indirect writes land on the host (each buffer is one letter). */
    memset(res, 0, sizeof(*res));
    bc.op = VFE_BENCH_WRITE;
    bc.random = false;
    bc.indirect = true;
    bc.max_ops = 64;
    bc.queues = 1;
    assert_int_equal(vfe_bench_run(f, e->dev, &bc, res), 0);
    assert_int_equal(res->ops, 64);
    assert_int_equal(res->errors, 0);
    assert_int_equal(res->bytes, 64ull * 4096);
    assert_int_equal(vfe_fuse_release(f, ent.nodeid, oo.fh, O_RDWR), 0);
    size_t n = 0;
    g_autofree char *host = read_host_file(e->dir, "big.bin", &n);
    assert_int_equal(n, BIG_SIZE);
    for (size_t blk = 0; blk < 64; blk++) {
        char c0 = host[blk * 4096];
        assert_true(c0 >= 'a' && c0 <= 'z');
        for (size_t k = 1; k < 4096; k++)
            if (host[blk * 4096 + k] != c0)
                fail_msg("block %zu not one letter", blk);
    }
    /* CREATE + UNLINK: both counted, and nothing is left behind on the host. */
    struct fuse_entry_out de;
    assert_int_equal(vfe_fuse_mkdir(f, FUSE_ROOT_ID, "cu", 0755, &de), 0);
    memset(res, 0, sizeof(*res));
    struct vfe_bench_config cu = { .op = VFE_BENCH_CREATE, .unlink = true, .queues = 1,
                                   .depth = 4, .parent = de.nodeid, .name_prefix = "cu",
                                   .max_ops = 100 };
    assert_int_equal(vfe_bench_run(f, e->dev, &cu, res), 0);
    assert_int_equal(res->ops, 200);
    assert_int_equal(res->errors, 0);
    g_autofree char *cu_dir = g_build_filename(e->dir, "cu", NULL);
    GDir *gd = g_dir_open(cu_dir, 0, NULL);
    assert_non_null(gd);
    assert_null(g_dir_read_name(gd));
    g_dir_close(gd);
    assert_int_equal(vfe_fuse_rmdir(f, FUSE_ROOT_ID, "cu"), 0);

    /* The queues are idle and usable afterwards. */
    for (unsigned q = 1; q <= opt_queues; q++)
        assert_int_equal(vfe_fuse_in_flight(f, q), 0);
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &ent), 0);
    g_free(res);
}

/* A driver reset (RESET_DEVICE or RESET_OWNER) and a fresh start sequence. */
static void test_reset_restart(void **state)
{
    struct env *e = *state;
    struct vfe_fuse *f = F(state);
    struct fuse_entry_out ent;
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &ent), 0);
    assert_int_equal(vfe_dev_reset(e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    /* The rebooted guest's driver: INIT again, then look things up afresh. */
    assert_int_equal(vfe_fuse_init(f, &e->init), 0);
    assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "big.bin", &ent), 0);
    assert_int_equal(ent.attr.size, BIG_SIZE);
}

/* The raw layers hostile tests build on, checked against a real peer with
 * well-formed input: a hand-made vhost-user message, and a FUSE request laid
 * out descriptor by descriptor. */
static void test_raw_api(void **state)
{
    struct env *e = *state;
    struct vfe_conn *c = vfe_dev_conn(e->dev);
    struct vfe_mem *mem = vfe_dev_mem(e->dev);

    assert_int_equal(vfe_conn_send_raw(c, VFE_VU_GET_FEATURES, VFE_VU_VERSION, 0, NULL, 0, NULL,
                                       0), 0);
    struct vfe_msg m;
    assert_int_equal(vfe_conn_recv_raw(c, &m, NULL, NULL, 20000), 0);
    assert_int_equal(vfe_msg_check_reply(&m, VFE_VU_GET_FEATURES, 8), 0);
    assert_int_equal(m.payload.u64, vfe_dev_offered_features(e->dev));

    struct vfe_vq *vq = vfe_dev_vq(e->dev, 1);
    assert_int_equal(vfe_vq_in_flight(vq), 0);
    uint64_t in_gpa, out_gpa;
    assert_int_equal(vfe_mem_alloc(mem, 256, 64, &in_gpa), 0);
    assert_int_equal(vfe_mem_alloc(mem, 256, 64, &out_gpa), 0);
    struct {
        struct fuse_in_header h;
        struct fuse_getattr_in g;
    } req = { .h = { .len = sizeof(req), .opcode = FUSE_GETATTR, .unique = 0x1234,
                     .nodeid = FUSE_ROOT_ID } };
    uint32_t out_len = sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out);
    assert_int_equal(vfe_mem_write(mem, in_gpa, &req, sizeof(req)), 0);
    assert_int_equal(vfe_mem_fill(mem, out_gpa, 0xee, out_len), 0);
    vfe_vq_raw_set_desc(vq, 5, in_gpa, sizeof(req), 1 /* NEXT */, 6);
    vfe_vq_raw_set_desc(vq, 6, out_gpa, out_len, 2 /* WRITE */, 0);
    uint16_t used_before = vfe_vq_raw_used_idx(vq);
    vfe_vq_raw_publish(vq, 5);
    vfe_vq_raw_kick(vq);
    assert_int_equal(vfe_vq_raw_wait_used(vq, used_before, 60000), 0);
    assert_int_equal((uint16_t)(vfe_vq_raw_used_idx(vq) - used_before), 1);
    uint32_t id, len;
    vfe_vq_raw_used_elem(vq, used_before, &id, &len);
    assert_int_equal(id, 5);
    assert_int_equal(len, out_len);
    struct {
        struct fuse_out_header h;
        struct fuse_attr_out a;
    } rep;
    assert_int_equal(vfe_mem_read(mem, out_gpa, &rep, sizeof(rep)), 0);
    assert_int_equal(rep.h.error, 0);
    assert_int_equal(rep.h.unique, 0x1234);
    assert_int_equal(rep.h.len, out_len);
    assert_true(S_ISDIR(rep.a.attr.mode));
    struct stat st;
    assert_int_equal(stat(e->dir, &st), 0);
    assert_int_equal(rep.a.attr.ino, st.st_ino);
}

/* The request header and the reply header themselves split across regions
 * (a backend must copy them out piecewise), sent through the raw ring. */
static void test_straddled_headers(void **state)
{
    struct env *e = *state;
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    struct vfe_vq *vq = vfe_dev_vq(e->dev, 1);
    uint64_t blk1, blk2;
    assert_int_equal(vfe_mem_alloc_straddle(mem, 8192, &blk1), 0);
    assert_int_equal(vfe_mem_alloc_straddle(mem, 8192, &blk2), 0);
    uint64_t b1 = vfe_mem_straddle_boundary(mem, blk1, 8192);
    uint64_t b2 = vfe_mem_straddle_boundary(mem, blk2, 8192);
    assert_true(b1 && b2 && b1 != b2);
    uint64_t in_gpa = b1 - 20;  /* the boundary cuts the in header's unique field */
    uint64_t out_gpa = b2 - 8;  /* ... and the out header's unique field */
    struct {
        struct fuse_in_header h;
        struct fuse_getattr_in g;
    } req = { .h = { .len = sizeof(req), .opcode = FUSE_GETATTR, .unique = 0x1122334455667788ull,
                     .nodeid = FUSE_ROOT_ID } };
    uint32_t out_len = sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out);
    assert_int_equal(vfe_mem_write(mem, in_gpa, &req, sizeof(req)), 0);
    assert_int_equal(vfe_mem_fill(mem, out_gpa, 0xee, out_len), 0);
    vfe_vq_raw_set_desc(vq, 5, in_gpa, sizeof(req), 1 /* NEXT */, 6);
    vfe_vq_raw_set_desc(vq, 6, out_gpa, out_len, 2 /* WRITE */, 0);
    uint16_t before = vfe_vq_raw_used_idx(vq);
    vfe_vq_raw_publish(vq, 5);
    vfe_vq_raw_kick(vq);
    if (opt_quirk_straddle_stalls) {
        assert_int_equal(vfe_vq_raw_wait_used(vq, before, STALL_MS), -ETIMEDOUT);
        e->peer_broken = true;
        return;
    }
    assert_int_equal(vfe_vq_raw_wait_used(vq, before, 60000), 0);
    uint32_t id, len;
    vfe_vq_raw_used_elem(vq, before, &id, &len);
    assert_int_equal(id, 5);
    assert_int_equal(len, out_len);
    struct {
        struct fuse_out_header h;
        struct fuse_attr_out a;
    } rep;
    assert_int_equal(vfe_mem_read(mem, out_gpa, &rep, sizeof(rep)), 0);
    assert_int_equal(rep.h.error, 0);
    assert_int_equal(rep.h.unique, 0x1122334455667788ull);
    assert_int_equal(rep.h.len, out_len);
    struct stat st;
    assert_int_equal(stat(e->dir, &st), 0);
    assert_int_equal(rep.a.attr.ino, st.st_ino);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "backend", required_argument, NULL, 'b' },
        { "queues", required_argument, NULL, 'q' },
        { "backend-log", required_argument, NULL, 'l' },
        { "quirk-indirect-split-dies", no_argument, NULL, 'Q' },
        { "quirk-straddle-stalls", no_argument, NULL, 'S' },
        { "expect-clean-exit", no_argument, NULL, 'C' },
        { "expect-max-background", required_argument, NULL, 'M' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            opt_backend = optarg;
            break;
        case 'q':
            opt_queues = (unsigned)atoi(optarg);
            break;
        case 'l':
            opt_log = optarg;
            break;
        case 'Q':
            opt_quirk_indirect_split_dies = true;
            break;
        case 'S':
            opt_quirk_straddle_stalls = true;
            break;
        case 'C':
            opt_expect_clean_exit = true;
            break;
        case 'M':
            opt_expect_max_background = atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: %s --backend CMD [--queues N] [--backend-log F]\n", argv[0]);
            return 2;
        }
    }
    if (!opt_backend || opt_queues == 0 || opt_queues > 16) {
        fprintf(stderr, "%s: --backend is required, 1 <= --queues <= 16\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_init, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_direct_sg, setup, teardown),
        cmocka_unit_test_setup_teardown(test_indirect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_straddle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_straddle_indirect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_queues, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bench_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_api, setup, teardown),
        cmocka_unit_test_setup_teardown(test_straddled_headers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
