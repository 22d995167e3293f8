/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The DAX window end to end: the real vufsd binary maps host files into the
 * in-tree frontend's real mmap'ed window (frontend/vfe_dax.c, which refuses overlaps
 * and inexact unmaps), through both frontend protocols:
 *
 *   test_dax --vufsd "CMD" [--extra "OPTIONS"] [--only TEST]
 *
 * CMD may carry an env prefix (sanitizer options); OPTIONS are added to every
 * daemon command line (e.g. "--sandbox none"). Each test spawns vufsd on a fresh
 * shared directory, checks bytes through the window against the host file, the
 * replies to hostile requests, the attributes per policy, the statistics, and
 * that the daemon still serves.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "../it_util.h"
#include "vfe.h"
#include "vufs_util.h"

#define MiB (1ull << 20)
#define KiB (1ull << 10)
#define WINDOW (16 * MiB)
#define RD FUSE_SETUPMAPPING_FLAG_READ
#define RW (FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE)
#define NOFH (~0ull)

static const char *opt_vufsd;
static const char *opt_extra = "";

struct env {
    char dir[64];
    char log[64];
    char cmd[2048];
    struct vfe_dax *dax;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    struct vfe_fuse_init_result init;
    uint64_t offered_protocol;
    uint64_t shmem_window; /* what GET_SHMEM_CONFIG said (0: no region / refused) */
};

struct opts {
    const char *daemon;            /* extra daemon options */
    enum vfe_dax_proto proto;
    bool no_shmem_feature;         /* the frontend does not ask for SHMEM */
    uint32_t uid, gid;
    uint64_t init_flags;           /* 0: MAP_ALIGNMENT | HAS_INODE_DAX and the usual */
    uint64_t window;               /* the frontend's window; 0: WINDOW */
    /* As QEMU 11.1 (shmem): guest memory region by region, every mapping a
     * region of its own, committed (ADD_MEM_REG) this long after its reply. */
    bool qemu_regions;
    unsigned commit_delay_us;
};

/* Where the window sits in guest-physical space when mappings are regions. */
#define WIN_GPA 0x10000000000ull

static const char *hpath(struct env *e, const char *name)
{
    return it_hpath(e->dir, name);
}

/* A host file of size bytes: byte i is (i * 7 + seed) & 0xff, 0644 root. */
static void host_file(struct env *e, const char *name, uint64_t size, unsigned seed)
{
    int fd = open(hpath(e, name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    uint8_t *buf = malloc(size ? size : 1);
    for (uint64_t i = 0; i < size; i++)
        buf[i] = (uint8_t)(i * 7 + seed);
    assert_int_equal(write(fd, buf, size), (ssize_t)size);
    free(buf);
    close(fd);
}

static void host_pread(struct env *e, const char *name, void *buf, size_t len, off_t off)
{
    int fd = open(hpath(e, name), O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, len, off), (ssize_t)len);
    close(fd);
}

static void host_pwrite(struct env *e, const char *name, const void *buf, size_t len, off_t off)
{
    int fd = open(hpath(e, name), O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
    close(fd);
}

/* The shared directory, the log, the daemon's command line and the window. */
static struct env *prepare(const struct opts *o)
{
    struct env *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    strcpy(e->dir, "/tmp/vufsd-dax-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    chmod(e->dir, 0755);
    strcpy(e->log, "/tmp/vufsd-dax-log-XXXXXX");
    int lfd = mkstemp(e->log);
    assert_true(lfd >= 0);
    close(lfd);
    snprintf(e->cmd, sizeof(e->cmd), "%s --socket-path={socket} --shared-dir={dir} %s %s",
             opt_vufsd, opt_extra, o->daemon ? o->daemon : "");
    assert_int_equal(vfe_dax_new(o->window ? o->window : WINDOW, o->proto, &e->dax), 0);
    return e;
}

/* Connects (spawning the daemon, or to socket when not NULL), starts, INIT. */
static void attach(struct env *e, const struct opts *o, const char *socket)
{
    uint64_t pf = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                  (1ull << VFE_VU_PF_BACKEND_REQ) | (1ull << VFE_VU_PF_BACKEND_SEND_FD);
    if (o->proto == VFE_DAX_SHMEM && !o->no_shmem_feature)
        pf |= 1ull << VFE_VU_PF_SHMEM;
    if (o->qemu_regions)
        pf |= 1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS;
    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = socket ? NULL : e->cmd, .socket_path = socket, .dir = e->dir,
                  .backend_log = e->log, .timeout_ms = 20000 },
        .request_queues = 2,
        .queue_size = 128,
        .protocol_features = pf,
        .backend_req = vfe_dax_handle,
        .backend_post = o->qemu_regions ? vfe_dax_post : NULL,
        .backend_req_opaque = e->dax,
    };
    assert_int_equal(vfe_dev_connect(&cfg, &e->dev), 0);
    if (o->qemu_regions) {
        assert_true(vfe_dev_protocol_features(e->dev) & (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS));
        vfe_dax_report_regions(e->dax, e->dev, WIN_GPA, o->commit_delay_us);
    }
    assert_int_equal(vfe_conn_get_u64(vfe_dev_conn(e->dev), VFE_VU_GET_PROTOCOL_FEATURES,
                                      &e->offered_protocol),
                     0);
    if (vfe_dev_protocol_features(e->dev) & (1ull << VFE_VU_PF_SHMEM))
        assert_int_equal(vfe_conn_get_shmem_window(vfe_dev_conn(e->dev), &e->shmem_window), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    uint64_t flags = o->init_flags ? o->init_flags
                                   : FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS | FUSE_MAP_ALIGNMENT |
                                         FUSE_HAS_INODE_DAX;
    struct vfe_fuse_config fc = { .depth = 16, .timeout_ms = 20000, .uid = o->uid,
                                  .gid = o->gid, .pid = 77, .init_flags = flags };
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    assert_int_equal(vfe_fuse_init(e->fuse, &e->init), 0);
}

static struct env *start(const struct opts *o)
{
    struct env *e = prepare(o);
    attach(e, o, NULL);
    return e;
}

static void assert_alive(struct env *e)
{
    struct fuse_attr_out ao;
    int status;
    assert_int_equal(vfe_fuse_getattr(e->fuse, FUSE_ROOT_ID, &ao), 0);
    assert_false(vfe_conn_backend_exited(vfe_dev_conn(e->dev), &status));
}

/* The frontend never had to refuse a request: the daemon kept the mainline rules;
 * and as QEMU it never had a region refused, nor one past its limit (where QEMU
 * 11.1 aborts). */
static void assert_no_rejects(struct env *e)
{
    struct vfe_dax_stats st;
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.rejects, 0);
    struct vfe_dev_region_stats rs;
    vfe_dev_get_region_stats(e->dev, &rs);
    assert_int_equal(rs.errors, 0);
    assert_int_equal(rs.overflows, 0);
}

static void teardown(struct env *e)
{
    vfe_fuse_free(e->fuse);
    vfe_dev_close(e->dev);
    vfe_dax_free(e->dax);
    it_rm_tree(e->dir);
    unlink(e->log);
    free(e);
}

static void stop(struct env *e)
{
    assert_alive(e);
    assert_no_rejects(e);
    teardown(e);
}

static uint64_t lookup(struct env *e, const char *name, struct fuse_entry_out *eo)
{
    struct fuse_entry_out tmp;
    if (!eo)
        eo = &tmp;
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, name, eo), 0);
    return eo->nodeid;
}

static uint8_t *win(struct env *e, uint64_t off)
{
    return (uint8_t *)vfe_dax_window(e->dax) + off;
}

/* The window at moffset shows the host file at foffset, len bytes. */
static void assert_window_is_file(struct env *e, const char *name, uint64_t moffset,
                                  uint64_t foffset, uint64_t len)
{
    uint8_t *buf = malloc(len);
    host_pread(e, name, buf, len, (off_t)foffset);
    assert_true(vfe_dax_is_mapped(e->dax, moffset, len));
    assert_memory_equal(win(e, moffset), buf, len);
    free(buf);
}

static int rm1(struct env *e, uint64_t nodeid, uint64_t moffset, uint64_t len)
{
    const uint64_t r[1][2] = { { moffset, len } };
    return vfe_fuse_removemapping(e->fuse, nodeid, r, 1);
}

/* The guest looks at file nodeid again (a GETATTR once its attributes timed out). */
static void revalidate(struct env *e, uint64_t nodeid)
{
    struct fuse_attr_out ao;
    assert_int_equal(vfe_fuse_getattr(e->fuse, nodeid, &ao), 0);
}

/* ---- Both protocols: data both ways, upgrade, partial removal --------------------------- */

/*
 * direct (--share-writers guest): the window maps the file itself, so each
 * side sees the other's writes at once. Otherwise the window store: the
 * guest sees a host write once it looks at the file again, the host sees the
 * guest's stores once they are written back (here: the range's removal).
 */
static void roundtrip(enum vfe_dax_proto proto, const char *daemon, bool direct)
{
    struct opts o = { .daemon = daemon, .proto = proto };
    struct env *e = start(&o);
    struct vfe_dax_stats st;

    if (proto == VFE_DAX_SHMEM) {
        assert_true(e->offered_protocol & (1ull << VFE_VU_PF_SHMEM));
        assert_int_equal(e->shmem_window, WINDOW);
    } else {
        /* The legacy protocol has no SHMEM negotiation: the VMM sizes its window. */
        assert_false(e->offered_protocol & (1ull << VFE_VU_PF_SHMEM));
    }
    assert_int_equal(e->init.map_alignment, 12);
    assert_true(e->init.flags & FUSE_MAP_ALIGNMENT);
    assert_true(e->init.flags & FUSE_HAS_INODE_DAX); /* auto, the default policy */

    host_file(e, "f", 6 * MiB, 1);
    uint64_t f = lookup(e, "f", NULL);

    /* Read-only mapping of the first range: the window shows the file. */
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_window_is_file(e, "f", 0, 0, 2 * MiB);
    /* A host write shows through the window. */
    host_pwrite(e, "f", "HOST", 4, 100);
    if (direct) {
        assert_memory_equal(win(e, 100), "HOST", 4); /* one page cache */
    } else {
        assert_memory_not_equal(win(e, 100), "HOST", 4); /* the daemon's own pages */
        usleep(10000);
        revalidate(e, f);
        assert_memory_equal(win(e, 100), "HOST", 4);
    }

    /* The guest's upgrade: the same range again, writable. */
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RW, 0), 0);
    memcpy(win(e, 8192), "GUEST-WRITE", 11);
    char back[11];
    host_pread(e, "f", back, sizeof(back), 8192);
    if (direct)
        assert_memory_equal(back, "GUEST-WRITE", 11);
    else
        assert_memory_not_equal(back, "GUEST-WRITE", 11);
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.maps, 2);   /* the read map, then the writable one */
    assert_int_equal(st.unmaps, 1); /* the read map went first: no overlap */
    assert_int_equal(rm1(e, f, 0, 2 * MiB), 0);
    assert_false(vfe_dax_is_mapped(e->dax, 0, 4096));
    host_pread(e, "f", back, sizeof(back), 8192);
    assert_memory_equal(back, "GUEST-WRITE", 11);

    /* A second range elsewhere in the window, then a hole punched in its middle. */
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 4 * MiB, 2 * MiB, RD, 6 * MiB), 0);
    assert_window_is_file(e, "f", 6 * MiB, 4 * MiB, 2 * MiB);
    assert_int_equal(rm1(e, f, 6 * MiB + 512 * KiB, 256 * KiB), 0);
    assert_false(vfe_dax_is_mapped(e->dax, 6 * MiB + 512 * KiB, 4096));
    assert_window_is_file(e, "f", 6 * MiB, 4 * MiB, 512 * KiB);
    assert_window_is_file(e, "f", 6 * MiB + 768 * KiB, 4 * MiB + 768 * KiB, 1280 * KiB);
    /* Removing the whole range removes both survivors; unmapped space is no error. */
    assert_int_equal(rm1(e, f, 6 * MiB, 2 * MiB), 0);
    assert_int_equal(rm1(e, f, 6 * MiB, 2 * MiB), 0);
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.mappings, 0);

    /* A request over several 2 MiB slots maps slot by slot. */
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 6 * MiB, RD, 2 * MiB), 0);
    assert_window_is_file(e, "f", 2 * MiB, 0, 6 * MiB);
    const uint64_t all[1][2] = { { 0, WINDOW } };
    assert_int_equal(vfe_fuse_removemapping(e->fuse, f, all, 1), 0);
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.mappings, 0);
    stop(e);
}

static void test_shmem_roundtrip(void **state)
{
    roundtrip(VFE_DAX_SHMEM, "--dax-window 16M", false);
}

static void test_legacy_roundtrip(void **state)
{
    roundtrip(VFE_DAX_LEGACY, "--dax-window 16M --dax-protocol legacy", false);
}

static void test_shmem_roundtrip_direct(void **state)
{
    roundtrip(VFE_DAX_SHMEM, "--dax-window 16M --share-writers guest", true);
}

static void test_legacy_roundtrip_direct(void **state)
{
    roundtrip(VFE_DAX_LEGACY, "--dax-window 16M --dax-protocol legacy --share-writers guest",
              true);
}

/* ---- Hostile requests ------------------------------------------------------------------- */

static void hostile(enum vfe_dax_proto proto, const char *daemon)
{
    struct opts o = { .daemon = daemon, .proto = proto };
    struct env *e = start(&o);
    host_file(e, "f", 4 * MiB, 2);
    assert_int_equal(mkfifo(hpath(e, "fifo"), 0644), 0);
    assert_int_equal(mkdir(hpath(e, "d"), 0755), 0);
    uint64_t f = lookup(e, "f", NULL);
    uint64_t fifo = lookup(e, "fifo", NULL);
    uint64_t d = lookup(e, "d", NULL);
    struct vfe_fuse *x = e->fuse;

    /* Outside the window, crossing its end, misaligned, overflowing, unknown flags. */
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, 2 * MiB, RD, WINDOW), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, 2 * MiB, RD, WINDOW - MiB), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, 2 * MiB, RD, 100), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 100, 2 * MiB, RD, 0), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, 100, RD, 0), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, 0, RD, 0), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, UINT64_MAX - 4095, RD, 4096), -EINVAL);
    assert_int_equal(
        vfe_fuse_setupmapping(x, f, NOFH, (uint64_t)INT64_MAX & ~4095ull, 2 * MiB, RD, 0),
        -EOVERFLOW);
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, 2 * MiB, 1ull << 5, 0), -EINVAL);
    /* Not a regular file, or no file at all. */
    assert_int_equal(vfe_fuse_setupmapping(x, d, NOFH, 0, 2 * MiB, RD, 0), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, fifo, NOFH, 0, 2 * MiB, RD, 0), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, FUSE_ROOT_ID, NOFH, 0, 2 * MiB, RD, 0), -EINVAL);
    assert_int_equal(vfe_fuse_setupmapping(x, 0xdeadbeefull, NOFH, 0, 2 * MiB, RD, 0), -ESTALE);
    assert_int_equal(vfe_fuse_setupmapping(x, f | (7ull << 32), NOFH, 0, 2 * MiB, RD, 0),
                     -ESTALE);

    /* REMOVEMAPPING: too many entries, one bad entry among good ones (nothing done). */
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    static uint64_t many[257][2];
    for (unsigned i = 0; i < 257; i++) {
        many[i][0] = 0;
        many[i][1] = 4096;
    }
    assert_int_equal(vfe_fuse_removemapping(x, f, (const uint64_t(*)[2])many, 257), -EINVAL);
    const uint64_t bad[3][2] = { { 0, 4096 }, { WINDOW, 4096 }, { 4096, 4096 } };
    assert_int_equal(vfe_fuse_removemapping(x, f, bad, 3), -EINVAL);
    const uint64_t wrap[1][2] = { { 4096, UINT64_MAX - 4095 } };
    assert_int_equal(vfe_fuse_removemapping(x, f, wrap, 1), -EINVAL);
    const uint64_t odd[1][2] = { { 100, 4096 } };
    assert_int_equal(vfe_fuse_removemapping(x, f, odd, 1), -EINVAL);
    assert_window_is_file(e, "f", 0, 0, 2 * MiB); /* untouched by the refusals */

    /* The daemon still maps and unmaps. */
    assert_int_equal(vfe_fuse_setupmapping(x, f, NOFH, 2 * MiB, 2 * MiB, RW, 2 * MiB), 0);
    assert_window_is_file(e, "f", 2 * MiB, 2 * MiB, 2 * MiB);
    const uint64_t both[2][2] = { { 0, 2 * MiB }, { 2 * MiB, 2 * MiB } };
    assert_int_equal(vfe_fuse_removemapping(x, f, both, 2), 0);
    stop(e);
}

static void test_shmem_hostile(void **state)
{
    hostile(VFE_DAX_SHMEM, "--dax-window 16M");
}

static void test_legacy_hostile(void **state)
{
    hostile(VFE_DAX_LEGACY, "--dax-window 16M --dax-protocol legacy");
}

/* A caller that may only read the file gets no writable mapping. */
static void test_write_needs_permission(void **state)
{
    if (geteuid() != 0) {
        print_message("SKIP: needs root: files of another owner, a daemon that switches ids\n");
        skip();
    }
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM, .uid = 1000,
                      .gid = 1000 };
    struct env *e = start(&o);
    host_file(e, "ro", 2 * MiB, 3); /* 0644, root's */
    host_file(e, "secret", 2 * MiB, 4);
    chmod(hpath(e, "secret"), 0600);
    uint64_t ro = lookup(e, "ro", NULL);
    uint64_t secret = lookup(e, "secret", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, ro, NOFH, 0, 2 * MiB, RW, 0), -EACCES);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, secret, NOFH, 0, 2 * MiB, RD, 0), -EACCES);
    assert_false(vfe_dax_is_mapped(e->dax, 0, 4096));
    /* Reading is allowed, and a refused upgrade leaves the read mapping alone. */
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, ro, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, ro, NOFH, 0, 2 * MiB, RW, 0), -EACCES);
    assert_window_is_file(e, "ro", 0, 0, 2 * MiB);
    struct vfe_dax_stats st;
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.maps, 1);
    stop(e);
}

/*
 * A --readonly share: the legacy protocol maps for reading only. QEMU 11.1 maps
 * every range read-write (a read-only fd fails there, and the guest's read
 * gets EIO): a read-only share's files are mapped from the window store, whose
 * pages are the daemon's, and a write mapping is EROFS.
 */
static void test_readonly_share(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M --readonly --dax-protocol legacy",
                      .proto = VFE_DAX_LEGACY };
    struct env *e = start(&o);
    host_file(e, "f", 2 * MiB, 5);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RW, 0), -EROFS);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_window_is_file(e, "f", 0, 0, 2 * MiB);
    stop(e);

    struct opts s = { .daemon = "--dax-window 16M --readonly --dax-policy always",
                      .proto = VFE_DAX_SHMEM };
    e = start(&s);
    host_file(e, "f", 2 * MiB, 5);
    struct fuse_entry_out eo;
    f = lookup(e, "f", &eo);
    assert_true(eo.attr.flags & FUSE_ATTR_DAX);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RW, 0), -EROFS);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_window_is_file(e, "f", 0, 0, 2 * MiB);
    stop(e);
}

/*
 * QEMU 11.1 maps every range read-write, and only a range inside its file (it
 * refuses a non-empty file that is shorter and grows an empty one): the in-tree
 * frontend does the same. A range past a file's end, or of an empty file, is
 * therefore backed by the window store (zeros past the end, the file's size
 * untouched); with --share-writers guest, a range inside the file is the file
 * itself (a host write shows at once).
 */
static void qemu_map_rules(const char *daemon, bool direct)
{
    struct opts o = { .daemon = daemon, .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 4 * MiB, 3);
    host_file(e, "short", 2 * MiB + 4 * KiB, 4);
    host_file(e, "empty", 0, 0);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_window_is_file(e, "f", 0, 0, 2 * MiB);
    host_pwrite(e, "f", "HOST", 4, 64);
    assert_int_equal(!memcmp(win(e, 64), "HOST", 4), direct);
    uint64_t s = lookup(e, "short", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, s, NOFH, 0, 2 * MiB, RD, 2 * MiB), 0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, s, NOFH, 2 * MiB, 2 * MiB, RD, 4 * MiB), 0);
    assert_window_is_file(e, "short", 4 * MiB, 2 * MiB, 4 * KiB);
    for (uint64_t k = 4 * KiB; k < 2 * MiB; k += 4093)
        assert_int_equal(*win(e, 4 * MiB + k), 0);
    uint64_t z = lookup(e, "empty", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, z, NOFH, 0, 2 * MiB, RW, 6 * MiB), 0);
    memcpy(win(e, 6 * MiB), "PAST-THE-END", 12); /* the guest would not: its size is 0 */
    assert_int_equal(rm1(e, z, 6 * MiB, 2 * MiB), 0);
    struct stat st;
    assert_int_equal(stat(hpath(e, "empty"), &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(stat(hpath(e, "short"), &st), 0);
    assert_int_equal(st.st_size, 2 * MiB + 4 * KiB);
    struct vfe_dax_stats ds;
    vfe_dax_get_stats(e->dax, &ds);
    assert_int_equal(ds.rejects, 0); /* nothing QEMU would refuse was sent */
    stop(e);
}

static void test_qemu_map_rules(void **state)
{
    qemu_map_rules("--dax-window 16M --dax-policy always", false);
    qemu_map_rules("--dax-window 16M --dax-policy always --share-writers guest", true);
}

/* ---- QEMU 11.1: every mapping a guest memory region ------------------------------------ */

static void region_stats(struct env *e, struct vfe_dev_region_stats *rs)
{
    vfe_dev_get_region_stats(e->dev, rs);
}

/* Waits until the frontend's REM_MEM_REGs reached n (each is acked by the
 * daemon once its table no longer holds the region). */
static void wait_removes(struct env *e, uint64_t n)
{
    struct vfe_dev_region_stats rs;
    for (int i = 0; i < 5000; i++) {
        region_stats(e, &rs);
        if (rs.removes >= n)
            return;
        usleep(1000);
    }
    fail_msg("REM_MEM_REG %llu of %llu", (unsigned long long)rs.removes, (unsigned long long)n);
}

/*
 * QEMU 11.1 answers BACKEND_SHMEM_MAP before the range is in the guest's
 * memory (its commit, 1-2 ms later under TCG, sends ADD_MEM_REG). The
 * frontend here commits 50 ms after its reply: a SETUPMAPPING answered on the
 * map's reply alone finds zeros in the window (the real guest's fio read
 * zeros back), one answered when the region has come finds the file.
 */
static void test_qemu_map_waits_for_region(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM,
                      .qemu_regions = true, .commit_delay_us = 50 * 1000 };
    struct env *e = start(&o);
    host_file(e, "f", 4 * MiB, 21);
    uint64_t f = lookup(e, "f", NULL);
    struct vfe_dev_region_stats rs;
    region_stats(e, &rs);
    uint64_t ram = rs.regions;
    assert_true(ram >= 1);
    for (unsigned i = 0; i < 6; i++) {
        uint64_t moff = (i % 8) * 2 * MiB, foff = (i % 2) * 2 * MiB;
        assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, foff, 2 * MiB,
                                               i % 2 ? RW : RD, moff), 0);
        /* At once: no wait here, the guest reads right after the reply. */
        if (!vfe_dax_is_mapped(e->dax, moff, 2 * MiB))
            fail_msg("map %u answered before its memory region came: the guest reads zeros", i);
        assert_window_is_file(e, "f", moff, foff, 2 * MiB);
        region_stats(e, &rs);
        assert_int_equal(rs.regions, ram + 1);
        assert_int_equal(rm1(e, f, moff, 2 * MiB), 0);
        wait_removes(e, i + 1);
    }
    region_stats(e, &rs);
    assert_int_equal(rs.regions, ram);
    assert_int_equal(rs.adds, ram + 6);
    stop(e);
}

/* The largest window QEMU 11.1 can carry, 512 MiB (256 ranges), every range
 * mapped at once: 256 regions beside the guest RAM, none refused. */
static void test_qemu_window_full(void **state)
{
    struct opts o = { .daemon = "--dax-window 512M", .proto = VFE_DAX_SHMEM, .window = 512 * MiB,
                      .qemu_regions = true };
    struct env *e = start(&o);
    assert_int_equal(e->shmem_window, 512 * MiB);
    host_file(e, "f", 4 * MiB, 22);
    uint64_t f = lookup(e, "f", NULL);
    struct vfe_dev_region_stats rs;
    region_stats(e, &rs);
    uint64_t ram = rs.regions;
    for (uint64_t i = 0; i < 256; i++)
        if (vfe_fuse_setupmapping(e->fuse, f, NOFH, (i % 2) * 2 * MiB, 2 * MiB, RD, i * 2 * MiB))
            fail_msg("map %llu of 256 refused (the daemon's table holds %llu regions)",
                     (unsigned long long)i, (unsigned long long)(ram + i));
    region_stats(e, &rs);
    assert_int_equal(rs.regions, ram + 256);
    assert_window_is_file(e, "f", 255 * 2 * MiB, 2 * MiB, 2 * MiB);
    const uint64_t all[1][2] = { { 0, 512 * MiB } };
    assert_int_equal(vfe_fuse_removemapping(e->fuse, f, all, 1), 0);
    wait_removes(e, 256);
    stop(e);
}

/* Guest RAM in n more regions of a page each (memory hotplug), as QEMU 11.1
 * counts them beside the window's. */
struct hotplug {
    int fd;
    void *base;
    unsigned n;
};

static void hotplug_ram(struct env *e, struct hotplug *h, unsigned n)
{
    h->n = n;
    h->fd = memfd_create("hotplug", MFD_CLOEXEC);
    assert_true(h->fd >= 0);
    assert_int_equal(ftruncate(h->fd, (off_t)n * 4096), 0);
    h->base = mmap(NULL, n * 4096ull, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
    assert_true(h->base != MAP_FAILED);
    for (unsigned i = 0; i < n; i++) {
        struct vfe_vu_region r = { .guest_phys_addr = 0x20000000000ull + i * 4096ull,
                                   .memory_size = 4096,
                                   .userspace_addr = (uint64_t)(uintptr_t)h->base + i * 4096ull,
                                   .mmap_offset = i * 4096ull };
        assert_int_equal(vfe_dev_add_region(e->dev, &r, h->fd), 0);
    }
}

static void hotplug_free(struct hotplug *h)
{
    munmap(h->base, h->n * 4096ull);
    close(h->fd);
}

/* QEMU 11.1 with 300 more RAM regions (memory hotplug) and a 512 MiB window:
 * ranges 0.. of file "f" (2 MiB) mapped until the table holds QEMU's 512
 * regions (none refused). */
struct at_limit {
    struct env *e;
    struct hotplug h;
    uint64_t f;    /* the file's node id */
    uint64_t room; /* ranges mapped */
};

static void at_limit_start(struct at_limit *a, unsigned seed)
{
    struct opts o = { .daemon = "--dax-window 512M", .proto = VFE_DAX_SHMEM, .window = 512 * MiB,
                      .qemu_regions = true };
    struct env *e = a->e = start(&o);
    hotplug_ram(e, &a->h, 300);
    host_file(e, "f", 2 * MiB, seed);
    a->f = lookup(e, "f", NULL);
    struct vfe_dev_region_stats rs;
    region_stats(e, &rs);
    uint64_t before = rs.regions;
    a->room = VFE_VU_QEMU_MAX_SLOTS - before;
    assert_true(a->room < 256);
    for (uint64_t i = 0; i < a->room; i++)
        if (vfe_fuse_setupmapping(e->fuse, a->f, NOFH, 0, 2 * MiB, RD, i * 2 * MiB))
            fail_msg("map %llu refused with %llu regions", (unsigned long long)i,
                     (unsigned long long)(before + i));
}

static void at_limit_stop(struct at_limit *a)
{
    hotplug_free(&a->h);
    stop(a->e);
}

/*
 * QEMU 11.1 checks no slot limit when a mapping becomes a region and aborts
 * past 512 of them. With 300 more RAM regions (memory hotplug) a 512 MiB window
 * cannot all be mapped: the map that would need the 513th region is refused
 * (ENOSPC), the frontend never sees it, and once a range is unmapped (its
 * REM_MEM_REG done) the next map succeeds.
 */
static void test_qemu_region_cap(void **state)
{
    struct at_limit a;
    at_limit_start(&a, 23);
    struct env *e = a.e;
    uint64_t f = a.f, room = a.room;
    int r = vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, room * 2 * MiB);
    struct vfe_dev_region_stats rs;
    region_stats(e, &rs);
    if (rs.overflows)
        fail_msg("the daemon mapped past QEMU's 512 regions: QEMU 11.1 aborts there");
    assert_int_equal(r, -ENOSPC);
    assert_int_equal(rs.regions, VFE_VU_QEMU_MAX_SLOTS);
    assert_false(vfe_dax_is_mapped(e->dax, room * 2 * MiB, 4096));
    assert_alive(e);
    /* Room again once a mapping and its region are gone. */
    uint64_t removes = rs.removes;
    assert_int_equal(rm1(e, f, 0, 2 * MiB), 0);
    wait_removes(e, removes + 1);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, room * 2 * MiB), 0);
    assert_window_is_file(e, "f", room * 2 * MiB, 0, 2 * MiB);
    at_limit_stop(&a);
}

static uint64_t now_ms(void)
{
    return vufs_now_ns() / 1000000;
}

/*
 * QEMU 11.1 answers BACKEND_SHMEM_UNMAP before the range leaves the guest's
 * memory (the commit after the reply sends REM_MEM_REG): the guest's
 * REMOVEMAPPING is answered while the daemon's table still holds the region.
 * At the 512-region limit, the guest's next SETUPMAPPING must not be refused
 * for a region that is on its way out: it waits for the REM_MEM_REG (here 200
 * ms after the reply), and the frontend never counts a 513th region.
 */
static void test_qemu_map_after_unmap_at_limit(void **state)
{
    struct at_limit a;
    at_limit_start(&a, 24);
    struct env *e = a.e;
    uint64_t f = a.f, room = a.room;
    vfe_dax_delay_removals(e->dax, 200 * 1000);
    for (uint64_t i = 0; i < 3; i++) {
        assert_int_equal(rm1(e, f, i * 2 * MiB, 2 * MiB), 0);
        int r = vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, (room + i) * 2 * MiB);
        struct vfe_dev_region_stats rs;
        region_stats(e, &rs);
        if (rs.overflows)
            fail_msg("the daemon mapped past QEMU's 512 regions: QEMU 11.1 aborts there");
        if (r)
            fail_msg("map %llu right after an unmap at the limit: %s (the unmapped range's "
                     "region was still counted)", (unsigned long long)i, strerror(-r));
        assert_window_is_file(e, "f", (room + i) * 2 * MiB, 0, 2 * MiB);
        assert_int_equal(rs.regions, VFE_VU_QEMU_MAX_SLOTS);
    }
    /* Nothing on its way out: a map past the limit is still refused, at once. */
    uint64_t t0 = now_ms();
    int r = vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, (room + 3) * 2 * MiB);
    assert_int_equal(r, -ENOSPC);
    if (now_ms() - t0 >= 1000)
        fail_msg("a refusal with no removal pending took %llu ms",
                 (unsigned long long)(now_ms() - t0));
    at_limit_stop(&a);
}

/* Unmaps range 0 with its REM_MEM_REG 2 s after the reply; returns the
 * REM_MEM_REGs done before. */
static uint64_t at_limit_unmap_late(struct at_limit *a)
{
    struct vfe_dev_region_stats rs;
    region_stats(a->e, &rs);
    vfe_dax_delay_removals(a->e->dax, 2000 * 1000);
    assert_int_equal(rm1(a->e, a->f, 0, 2 * MiB), 0);
    return rs.removes;
}

/* Once that REM_MEM_REG has come, the map past the limit succeeds. */
static void at_limit_map_after_removal(struct at_limit *a, uint64_t removes)
{
    wait_removes(a->e, removes + 1);
    vfe_dax_delay_removals(a->e->dax, 0);
    assert_int_equal(
        vfe_fuse_setupmapping(a->e->fuse, a->f, NOFH, 0, 2 * MiB, RD, a->room * 2 * MiB), 0);
    assert_window_is_file(a->e, "f", a->room * 2 * MiB, 0, 2 * MiB);
}

/*
 * A frontend need not send REM_MEM_REG at all (the spec asks for none for a
 * shared memory mapping): a map at the limit waits for a pending removal for a
 * bounded time only. Here the REM_MEM_REG comes 2 s after the unmap's reply:
 * the map is refused (ENOSPC) before that, nothing is sent past the limit, the
 * daemon keeps serving, and once the region is gone the map succeeds.
 */
static void test_qemu_removal_late(void **state)
{
    struct at_limit a;
    at_limit_start(&a, 25);
    struct env *e = a.e;
    uint64_t f = a.f, room = a.room;
    uint64_t t0 = now_ms();
    uint64_t removes = at_limit_unmap_late(&a);
    int r = vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, room * 2 * MiB);
    uint64_t took = now_ms() - t0;
    struct vfe_dev_region_stats rs;
    region_stats(e, &rs);
    if (rs.removes != removes)
        fail_msg("the map waited %llu ms, until the REM_MEM_REG came", (unsigned long long)took);
    assert_int_equal(r, -ENOSPC);
    assert_int_equal(rs.overflows, 0);
    assert_alive(e);
    at_limit_map_after_removal(&a, removes);
    at_limit_stop(&a);
}

struct bg_map {
    struct env *e;
    uint64_t nodeid, moffset;
    int ret;
};

static void *bg_map_run(void *arg)
{
    struct bg_map *b = arg;
    b->ret = vfe_fuse_setupmapping(b->e->fuse, b->nodeid, NOFH, 0, 2 * MiB, RD, b->moffset);
    return NULL;
}

/*
 * A map waiting at the limit for a REM_MEM_REG must not hold up the message
 * thread: a frontend may stop the queues (GET_VRING_BASE waits for in-flight
 * requests) with the REM_MEM_REG still to come. The stop wakes the map, which
 * is refused, and the stop is answered at once rather than when the map's wait
 * runs out; the device then starts again and serves.
 */
static void test_qemu_stop_while_map_waits(void **state)
{
    struct at_limit a;
    at_limit_start(&a, 26);
    struct env *e = a.e;
    uint64_t f = a.f, room = a.room;
    uint64_t removes = at_limit_unmap_late(&a);
    struct bg_map b = { .e = e, .nodeid = f, .moffset = room * 2 * MiB };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, bg_map_run, &b), 0);
    usleep(50 * 1000); /* the map is in the daemon, waiting */
    /* GET_VRING_BASE of the map's queue alone: vfe_dev_stop would reset the
     * ring under the thread that waits for the reply. */
    struct vfe_msg m, rep;
    vfe_msg_init(&m, VFE_VU_GET_VRING_BASE, 0);
    vfe_msg_set_state(&m, 1, 0);
    uint64_t t0 = now_ms();
    assert_int_equal(vfe_conn_call(vfe_dev_conn(e->dev), &m, NULL, 0, &rep), 0);
    uint64_t took = now_ms() - t0;
    pthread_join(t, NULL);
    if (took >= 500)
        fail_msg("the stop took %llu ms: it waited for the map's wait to run out",
                 (unsigned long long)took);
    assert_int_equal(b.ret, -ENOSPC);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    at_limit_map_after_removal(&a, removes);
    at_limit_stop(&a);
}

/*
 * A descriptor may point into the window: the guest's O_DIRECT read into (or
 * write from) a buffer that is a DAX mapping. The daemon reads and writes such
 * buffers through its own mapping of the window's regions, each only its part
 * of the file: 64 ranges of a sparse 8 TiB file mapped from 4 TiB on (mapping
 * each file from offset 0 would need 256 TiB of address space). A buffer
 * straddling two ranges is split between their regions.
 */
static void test_qemu_descriptor_in_window(void **state)
{
    struct opts o = { .daemon = "--dax-window 512M", .proto = VFE_DAX_SHMEM, .window = 512 * MiB,
                      .qemu_regions = true };
    struct env *e = start(&o);
    const uint64_t far = 4ull << 40, n = 64;
    int big = open(hpath(e, "big"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    assert_true(big >= 0);
    assert_int_equal(ftruncate(big, (off_t)(2 * far)), 0);
    host_file(e, "src", 256 * KiB, 24);
    host_file(e, "dst", 0, 0);
    uint64_t b = lookup(e, "big", NULL);
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(vfe_fuse_setupmapping(e->fuse, b, NOFH, far + i * 2 * MiB, 2 * MiB, RW,
                                               i * 2 * MiB), 0);
    struct vfe_dev_region_stats rs;
    region_stats(e, &rs);
    assert_int_equal(rs.errors, 0);

    /* READ of src into the window: range 62's last 64 KiB and range 63's first. */
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    uint64_t src = lookup(e, "src", &eo);
    assert_int_equal(vfe_fuse_open(e->fuse, src, O_RDONLY, &oo), 0);
    const uint64_t at = 63 * 2 * MiB - 64 * KiB;
    struct vfe_sg sg = { vfe_dax_gpa(e->dax, at), 128 * KiB };
    assert_int_equal(vfe_fuse_read_sg(e->fuse, src, oo.fh, 4096, &sg, 1, false), 128 * KiB);
    uint8_t *want = malloc(128 * KiB), *got = malloc(128 * KiB);
    host_pread(e, "src", want, 128 * KiB, 4096);
    assert_memory_equal(win(e, at), want, 128 * KiB);
    /* In big once the guest syncs it (the window store writes it back). */
    struct fuse_open_out bo;
    assert_int_equal(vfe_fuse_open(e->fuse, b, O_RDWR, &bo), 0);
    assert_int_equal(vfe_fuse_fsync(e->fuse, b, bo.fh, false), 0);
    assert_int_equal(pread(big, got, 128 * KiB, (off_t)(far + at)), 128 * KiB);
    assert_memory_equal(got, want, 128 * KiB);

    /* WRITE to dst from the window (the same bytes, now in big). */
    uint64_t dst = lookup(e, "dst", &eo);
    assert_int_equal(vfe_fuse_open(e->fuse, dst, O_WRONLY, &oo), 0);
    assert_int_equal(vfe_fuse_write_sg(e->fuse, dst, oo.fh, 0, &sg, 1, false), 128 * KiB);
    host_pread(e, "dst", got, 128 * KiB, 0);
    assert_memory_equal(got, want, 128 * KiB);
    free(want);
    free(got);
    close(big);
    assert_alive(e);
    stop(e);
}

/* ---- The host's events: what a truncate or a full file system does to the frontend ----- */

/*
 * Touches every page of [off, off + len) of the window, as a guest's loads and
 * stores would, in a child of this process (the frontend): its exit status, or
 * 128 + the signal that killed it. A page the frontend maps from a file that
 * lost it raises SIGBUS there, as in QEMU, whose process dies of it.
 */
static int touch_in_child(struct env *e, uint64_t off, uint64_t len, bool store)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* not cmocka's handler: die as a VMM does */
        signal(SIGSEGV, SIG_DFL);
        volatile uint8_t *w = win(e, off);
        uint8_t sum = 0;
        for (uint64_t k = 0; k < len; k += 4096) {
            sum ^= w[k];
            if (store)
                w[k] = (uint8_t)(sum + 1);
        }
        _exit(sum == 0xff ? 0 : 0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/*
 * A host process truncates a file the guest has mapped (`> file`, an editor,
 * copytruncate log rotation). With the window store the frontend loses no
 * page: it keeps showing the bytes until the guest looks at the file again,
 * then zeros past the new end, and the host file keeps its new size. With
 * direct mappings (--share-writers guest, a promise this test breaks) the
 * frontend dies of SIGBUS on the first page past the new end, as QEMU does.
 */
static void host_truncate(bool direct)
{
    struct opts o = { .daemon = direct ? "--dax-window 16M --share-writers guest"
                                       : "--dax-window 16M",
                      .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 8 * MiB, 21);
    uint64_t f = lookup(e, "f", NULL);
    for (uint64_t r = 0; r < 4; r++)
        assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, r * 2 * MiB, 2 * MiB,
                                               r % 2 ? RW : RD, r * 2 * MiB), 0);
    assert_int_equal(touch_in_child(e, 0, 8 * MiB, false), 0);
    assert_int_equal(truncate(hpath(e, "f"), 0), 0);
    int rc = touch_in_child(e, 0, 8 * MiB, false);
    if (direct) {
        assert_int_equal(rc, 128 + SIGBUS);
        /* Take the dead ranges out, so the test's own teardown survives. */
        const uint64_t all[1][2] = { { 0, WINDOW } };
        assert_int_equal(vfe_fuse_removemapping(e->fuse, f, all, 1), 0);
        stop(e);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(touch_in_child(e, 2 * MiB, 2 * MiB, true), 0); /* stores too */
    struct fuse_attr_out ao;
    assert_int_equal(vfe_fuse_getattr(e->fuse, f, &ao), 0);
    assert_int_equal(ao.attr.size, 0);
    for (uint64_t k = 0; k < 8 * MiB; k += 4093)
        assert_int_equal(*win(e, k), 0);
    /* The guest's last stores past the end go nowhere: the file stays empty. */
    const uint64_t all[1][2] = { { 0, WINDOW } };
    assert_int_equal(vfe_fuse_removemapping(e->fuse, f, all, 1), 0);
    struct stat st;
    assert_int_equal(stat(hpath(e, "f"), &st), 0);
    assert_int_equal(st.st_size, 0);
    stop(e);
}

static void test_host_truncate(void **state)
{
    host_truncate(false);
}

static void test_host_truncate_direct_kills(void **state)
{
    host_truncate(true);
}

/* A share on a tmpfs of size bytes (root: mount), before the daemon starts. */
static struct env *start_on_tmpfs(const struct opts *o, const char *size)
{
    struct env *e = prepare(o);
    char data[64];
    snprintf(data, sizeof(data), "size=%s,mode=0755", size);
    assert_int_equal(mount("vufsd-test", e->dir, "tmpfs", 0, data), 0);
    attach(e, o, NULL);
    return e;
}

static void stop_on_tmpfs(struct env *e)
{
    assert_alive(e);
    assert_no_rejects(e);
    vfe_fuse_free(e->fuse);
    vfe_dev_close(e->dev);
    e->fuse = NULL;
    e->dev = NULL;
    umount2(e->dir, MNT_DETACH);
    teardown(e);
}

/* Fills the file system of the share with a file "fill" until it is full. */
static void fill_fs(struct env *e)
{
    int fd = open(hpath(e, "fill"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    static const uint8_t block[65536];
    assert_true(fd >= 0);
    while (write(fd, block, sizeof(block)) > 0)
        ;
    close(fd);
}

/*
 * The guest writes into holes of a file on a full file system (the issue's
 * tmpfs: 24 MiB holding a 20 MiB file, the guest's 8 MiB sparse file written
 * through the window). A local file system answers ENOSPC to the write: here
 * the writable mapping is refused with ENOSPC (its blocks are allocated before
 * it is made), the guest's write returns it, and nothing faults. And when the
 * host takes the blocks away afterwards (a hole punched, the space filled),
 * the window store's write-back fails instead of a store: FSYNC answers ENOSPC.
 */
static void test_full_file_system(void **state)
{
    if (geteuid() != 0) {
        print_message("needs root to mount a small tmpfs as the share\n");
        skip();
    }
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM };
    struct env *e = start_on_tmpfs(&o, "24m");
    host_file(e, "big", 20 * MiB, 1);
    assert_int_equal(truncate(hpath(e, "big"), 20 * MiB), 0);
    int fd = open(hpath(e, "f"), O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 8 * MiB), 0);
    close(fd);
    uint64_t f = lookup(e, "f", NULL);
    int r = 0;
    uint64_t done = 0;
    for (; done < 4 && (r = vfe_fuse_setupmapping(e->fuse, f, NOFH, done * 2 * MiB, 2 * MiB, RW,
                                                   done * 2 * MiB)) == 0; done++)
        assert_int_equal(touch_in_child(e, done * 2 * MiB, 2 * MiB, true), 0);
    assert_int_equal(r, -ENOSPC);
    assert_true(done >= 1 && done < 4);
    assert_int_equal(touch_in_child(e, 0, done * 2 * MiB, true), 0);

    /* The host takes the blocks away under a mapped range. */
    int hfd = open(hpath(e, "f"), O_RDWR);
    assert_true(hfd >= 0);
    assert_int_equal(fallocate(hfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 2 * MiB), 0);
    close(hfd);
    fill_fs(e);
    assert_int_equal(touch_in_child(e, 0, 2 * MiB, true), 0); /* the frontend lives */
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_open(e->fuse, f, O_RDWR, &oo), 0);
    assert_int_equal(vfe_fuse_fsync(e->fuse, f, oo.fh, false), -ENOSPC);
    /* Room again: the stores that waited are written. */
    assert_int_equal(unlink(hpath(e, "fill")), 0);
    assert_int_equal(vfe_fuse_fsync(e->fuse, f, oo.fh, false), 0);
    uint8_t b;
    host_pread(e, "f", &b, 1, 4096);
    assert_int_equal(b, *win(e, 4096));
    const uint64_t all[1][2] = { { 0, WINDOW } };
    assert_int_equal(vfe_fuse_removemapping(e->fuse, f, all, 1), 0);
    stop_on_tmpfs(e);
}

/*
 * --share-writers guest on a file system that cannot promise a mapped page: a
 * FUSE mount (here vufsd --mount of another directory; NFS, CIFS and the like
 * alike). The window maps its files from the store all the same, so a file
 * truncated on the host behind the FUSE mount leaves the frontend alive.
 */
static void test_direct_refused_on_fuse(void **state)
{
    if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
        print_message("needs root and /dev/fuse for a FUSE mount as the share\n");
        skip();
    }
    struct opts o = { .daemon = "--dax-window 16M --share-writers guest", .proto = VFE_DAX_SHMEM };
    struct env *e = prepare(&o);
    char src[64] = "/tmp/vufsd-dax-src-XXXXXX", cmd[1024];
    assert_non_null(mkdtemp(src));
    snprintf(cmd, sizeof(cmd), "exec %s --mount %s --shared-dir %s --log-level warn", opt_vufsd,
             e->dir, src);
    pid_t fuse = fork();
    assert_true(fuse >= 0);
    if (fuse == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct statfs sfs = { 0 };
    for (int i = 0; i < 300 && !(statfs(e->dir, &sfs) == 0 && sfs.f_type == 0x65735546); i++)
        usleep(20000);
    assert_int_equal(sfs.f_type, 0x65735546); /* FUSE_SUPER_MAGIC */
    attach(e, &o, NULL);
    char path[128];
    snprintf(path, sizeof(path), "%s/f", src);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4 * MiB), 0);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RW, 0), 0);
    assert_int_equal(ftruncate(fd, 0), 0); /* the host, behind the FUSE mount */
    close(fd);
    assert_int_equal(touch_in_child(e, 0, 2 * MiB, false), 0);
    const uint64_t all[1][2] = { { 0, WINDOW } };
    assert_int_equal(vfe_fuse_removemapping(e->fuse, f, all, 1), 0);
    assert_alive(e);
    assert_no_rejects(e);
    vfe_fuse_free(e->fuse);
    vfe_dev_close(e->dev);
    e->fuse = NULL;
    e->dev = NULL;
    umount2(e->dir, MNT_DETACH);
    int st;
    waitpid(fuse, &st, 0);
    teardown(e);
    it_rm_tree(src);
}

/* ---- Without a window, or without a frontend that can map ------------------------------ */

static void assert_no_dax(struct env *e, bool attr_flag_expected_off)
{
    assert_int_equal(e->init.map_alignment, 0);
    assert_false(e->init.flags & FUSE_MAP_ALIGNMENT);
    assert_false(e->init.flags & FUSE_HAS_INODE_DAX);
    host_file(e, "f", 2 * MiB, 6);
    struct fuse_entry_out eo;
    uint64_t f = lookup(e, "f", &eo);
    if (attr_flag_expected_off)
        assert_false(eo.attr.flags & FUSE_ATTR_DAX);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), -ENOSYS);
    assert_int_equal(rm1(e, f, 0, 2 * MiB), -ENOSYS);
}

static void test_no_window(void **state)
{
    struct opts o = { .daemon = "--dax-policy always", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    assert_false(e->offered_protocol & (1ull << VFE_VU_PF_SHMEM));
    assert_false(vfe_dev_protocol_features(e->dev) & (1ull << VFE_VU_PF_SHMEM));
    /* Asked anyway: a well-formed reply without a region. */
    uint64_t size = 0;
    assert_int_equal(vfe_conn_get_shmem_window(vfe_dev_conn(e->dev), &size), -EPROTO);
    assert_no_dax(e, true);
    stop(e);
}

static void test_frontend_without_shmem(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M --dax-policy always", .proto = VFE_DAX_SHMEM,
                      .no_shmem_feature = true };
    struct env *e = start(&o);
    assert_true(e->offered_protocol & (1ull << VFE_VU_PF_SHMEM));
    assert_no_dax(e, true);
    stop(e);
}

/* ---- FUSE_ATTR_DAX per policy -------------------------------------------------------------- */

static bool readdirplus_dax(struct env *e, const char *want)
{
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_opendir(e->fuse, FUSE_ROOT_ID, &oo), 0);
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    uint64_t gpa;
    assert_int_equal(vfe_mem_alloc(mem, 64 * KiB, 4096, &gpa), 0);
    struct fuse_read_in ri = { .fh = oo.fh, .size = 64 * KiB };
    struct vfe_sg sg = { gpa, 64 * KiB };
    struct vfe_fuse_op op = { .opcode = FUSE_READDIRPLUS, .nodeid = FUSE_ROOT_ID, .arg = &ri,
                              .arg_len = sizeof(ri), .out_data = &sg, .out_data_cnt = 1 };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &op), 0);
    uint8_t *buf = malloc(op.data_len);
    assert_int_equal(vfe_mem_read(mem, gpa, buf, op.data_len), 0);
    bool found = false, dax = false;
    for (size_t pos = 0; pos < op.data_len;) {
        struct fuse_direntplus dp;
        memcpy(&dp, buf + pos, sizeof(dp));
        if (dp.dirent.namelen == strlen(want) &&
            memcmp(buf + pos + sizeof(dp), want, dp.dirent.namelen) == 0) {
            found = true;
            dax = dp.entry_out.attr.flags & FUSE_ATTR_DAX;
        }
        pos += FUSE_DIRENTPLUS_SIZE(&dp);
    }
    free(buf);
    vfe_mem_free_block(mem, gpa);
    assert_int_equal(vfe_fuse_releasedir(e->fuse, FUSE_ROOT_ID, oo.fh), 0);
    assert_true(found);
    return dax;
}

/* LOOKUP, GETATTR and READDIRPLUS agree on FUSE_ATTR_DAX for name. */
static bool attr_dax(struct env *e, const char *name)
{
    struct fuse_entry_out eo;
    struct fuse_attr_out ao;
    uint64_t n = lookup(e, name, &eo);
    bool dax = eo.attr.flags & FUSE_ATTR_DAX;
    assert_int_equal(vfe_fuse_getattr(e->fuse, n, &ao), 0);
    assert_int_equal(!!(ao.attr.flags & FUSE_ATTR_DAX), dax);
    assert_int_equal(readdirplus_dax(e, name), dax);
    return dax;
}

static void policy_case_proto(const char *daemon, enum vfe_dax_proto proto, uint64_t init_flags,
                              bool big, bool tiny, bool odd)
{
    struct opts o = { .daemon = daemon, .proto = proto, .init_flags = init_flags };
    struct env *e = start(&o);
    host_file(e, "big", 4 * MiB, 7);
    host_file(e, "tiny", 4 * KiB, 8);
    host_file(e, "odd", 4 * MiB + 4 * KiB, 9); /* its last range passes its end */
    assert_int_equal(mkdir(hpath(e, "dir"), 0755), 0);
    assert_int_equal(attr_dax(e, "big"), big);
    assert_int_equal(attr_dax(e, "tiny"), tiny);
    assert_int_equal(attr_dax(e, "odd"), odd);
    assert_false(attr_dax(e, "dir"));
    stop(e);
}

static void policy_case(const char *daemon, uint64_t init_flags, bool big, bool tiny)
{
    /* A file whose size is not a whole number of 2 MiB ranges is DAX as a big
     * one is: its last range comes from the window store. */
    policy_case_proto(daemon, VFE_DAX_SHMEM, init_flags, big, tiny, big);
}

static void test_policy(void **state)
{
    uint64_t inode_dax = FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS | FUSE_MAP_ALIGNMENT |
                         FUSE_HAS_INODE_DAX;
    policy_case("--dax-window 16M --dax-policy never", 0, false, false);
    policy_case("--dax-window 16M --dax-policy always", 0, true, true);
    /* The legacy protocol's frontends map past the end of a file: always is all. */
    policy_case_proto("--dax-window 16M --dax-policy always --dax-protocol legacy",
                      VFE_DAX_LEGACY, 0, true, true, true);
    /* auto (the default): the 4 MiB file fits 80% of the window, 4 KiB is too small. */
    policy_case("--dax-window 16M", 0, true, false);
    /* auto with a window the big file does not fit (80% of 4 MiB). */
    policy_case("--dax-window 4M", 0, false, false);
    /* A guest that did not offer FUSE_HAS_INODE_DAX gets no per-file flag. */
    policy_case("--dax-window 16M --dax-policy always", inode_dax & ~FUSE_HAS_INODE_DAX, false,
                false);
    /* never: the flag is not negotiated at all. */
    struct opts o = { .daemon = "--dax-window 16M --dax-policy never", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    assert_false(e->init.flags & FUSE_HAS_INODE_DAX);
    assert_int_equal(e->init.map_alignment, 12);
    stop(e);
}

/* ---- Requests in flight on two queues at once ------------------------------------------ */

#define NPAR 8u /* 2 MiB slots of the 16 MiB window */

struct par_req {
    struct fuse_setupmapping_in in;
    uint8_t rm[4 + 16];
    struct vfe_fuse_op op;
};

/* Submits one request per slot, alternating queues 1 and 2, then reaps them all. */
static void par_round(struct env *e, struct par_req *r, bool map, const uint64_t *nodes)
{
    for (unsigned i = 0; i < NPAR; i++) {
        uint64_t slot = 2 * MiB * i;
        memset(&r[i].op, 0, sizeof(r[i].op));
        r[i].op.nodeid = nodes[i % 2];
        if (map) {
            r[i].in = (struct fuse_setupmapping_in){ .fh = NOFH, .foffset = slot % (4 * MiB),
                                                     .len = 2 * MiB, .flags = RW,
                                                     .moffset = slot };
            r[i].op.opcode = FUSE_SETUPMAPPING;
            r[i].op.arg = &r[i].in;
            r[i].op.arg_len = sizeof(r[i].in);
        } else {
            uint32_t one = 1;
            uint64_t ent[2] = { slot, 2 * MiB };
            memcpy(r[i].rm, &one, 4);
            memcpy(r[i].rm + 4, ent, 16);
            r[i].op.opcode = FUSE_REMOVEMAPPING;
            r[i].op.arg = r[i].rm;
            r[i].op.arg_len = sizeof(r[i].rm);
        }
        assert_int_equal(vfe_fuse_submit(e->fuse, 1 + i % 2, &r[i].op), 0);
    }
    vfe_fuse_kick(e->fuse, 1);
    vfe_fuse_kick(e->fuse, 2);
    uint64_t deadline = vufs_now_ns() + 20000000000ull;
    for (unsigned q = 1; q <= 2; q++) {
        unsigned got = 0;
        while (got < NPAR / 2) {
            struct vfe_fuse_op *done[NPAR];
            /* 0: a notification for completions an earlier call already took. */
            int n = vfe_fuse_reap(e->fuse, q, done, NPAR, 1000);
            assert_true(n >= 0 || n == -ETIMEDOUT);
            assert_true(vufs_now_ns() < deadline);
            if (n < 0)
                continue;
            for (int k = 0; k < n; k++)
                assert_int_equal(done[k]->error, 0);
            got += (unsigned)n;
        }
    }
}

/* Mappings made and removed concurrently from two queues (two files, every slot):
 * the frontend sees only exact, non-overlapping requests and the data is right. */
static void test_two_queues(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M --thread-pool-size 4", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "a", 4 * MiB, 15);
    host_file(e, "b", 4 * MiB, 16);
    uint64_t nodes[2] = { lookup(e, "a", NULL), lookup(e, "b", NULL) };
    struct par_req *r = calloc(NPAR, sizeof(*r));
    for (int round = 0; round < 5; round++) {
        par_round(e, r, true, nodes);
        for (unsigned i = 0; i < NPAR; i++)
            assert_window_is_file(e, i % 2 ? "b" : "a", 2 * MiB * i, (2 * MiB * i) % (4 * MiB),
                                  2 * MiB);
        par_round(e, r, false, nodes);
        struct vfe_dax_stats st;
        vfe_dax_get_stats(e->dax, &st);
        assert_int_equal(st.mappings, 0);
    }
    free(r);
    stop(e);
}

/* ---- Lifecycle: FORGET, DESTROY, device reset ------------------------------------------------ */

static void test_forget_unmaps(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 4 * MiB, 9);
    host_file(e, "g", 4 * MiB, 10);
    uint64_t f = lookup(e, "f", NULL);
    uint64_t g = lookup(e, "g", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 4 * MiB, RD, 0), 0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, g, NOFH, 0, 2 * MiB, RD, 8 * MiB), 0);
    /* A guest that forgets a file it still maps: the daemon unmaps it. */
    assert_int_equal(vfe_fuse_forget(e->fuse, f, 1), 0);
    assert_false(vfe_dax_is_mapped(e->dax, 0, 4096));
    assert_false(vfe_dax_is_mapped(e->dax, 2 * MiB, 4096));
    assert_window_is_file(e, "g", 8 * MiB, 0, 2 * MiB);
    /* The forgotten node is gone; its window range maps again for another file. */
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), -ESTALE);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, g, NOFH, 2 * MiB, 2 * MiB, RD, 0), 0);
    assert_window_is_file(e, "g", 0, 2 * MiB, 2 * MiB);

    /* DESTROY: every mapping goes, through the frontend. */
    struct vfe_fuse_op op = { .opcode = FUSE_DESTROY, .nodeid = 0 };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &op), 0);
    struct vfe_dax_stats st;
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.mappings, 0);
    assert_no_rejects(e);
    teardown(e); /* no request after DESTROY but INIT */
}

/* A Linux guest unmounting a dax=always share sends no REMOVEMAPPING for the
 * inodes it evicts (the super block is no longer active): DESTROY finds every
 * mapping still there, as many as the window holds, and takes them all out
 * under the daemon's default seccomp filter (sorting a hundred mappings is
 * where glibc's qsort asks the kernel for the memory's size). */
static void test_destroy_with_many_mappings(void **state)
{
    struct opts o = {
        .daemon = "--dax-window 256M", .proto = VFE_DAX_SHMEM, .window = 256 * MiB};
    struct env *e = start(&o);
    host_file(e, "f", 200 * MiB, 11);
    uint64_t f = lookup(e, "f", NULL);
    for (uint64_t r = 0; r < 100; r++)
        assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, r * 2 * MiB, 2 * MiB, RD,
                                               (127 - r) * 2 * MiB), 0);
    struct vfe_fuse_op op = { .opcode = FUSE_DESTROY, .nodeid = 0 };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &op), 0);
    struct vfe_dax_stats st;
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.mappings, 0);
    int status;
    usleep(100 * 1000);
    assert_false(vfe_conn_backend_exited(vfe_dev_conn(e->dev), &status));
    assert_no_rejects(e);
    teardown(e); /* no request after DESTROY but INIT */
}

/* The driver after a reset: the device started again, a new FUSE client, INIT. */
static void new_driver(struct env *e)
{
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct vfe_fuse_config fc = { .depth = 16, .timeout_ms = 20000, .pid = 77,
                                  .init_flags = FUSE_MAP_ALIGNMENT | FUSE_HAS_INODE_DAX };
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    assert_int_equal(vfe_fuse_init(e->fuse, &e->init), 0);
}

/* A device reset clears the table: the frontend dropped its maps, and the same
 * offsets map again on the restarted device. */
static void test_reset_clears(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 4 * MiB, 11);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 4 * MiB, RW, 0), 0);

    vfe_fuse_free(e->fuse);
    assert_int_equal(vfe_dev_reset(e->dev), 0);
    vfe_dax_reset(e->dax); /* what the VMM does with its window on reset */
    new_driver(e);
    assert_int_equal(e->init.map_alignment, 12);
    f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 4 * MiB, RD, 0), 0);
    assert_window_is_file(e, "f", 0, 0, 4 * MiB);
    assert_int_equal(rm1(e, f, 0, 4 * MiB), 0);
    stop(e);
}

/* A driver reset (queues stopped, SET_STATUS 0): the VMM dropped its window, so
 * the daemon's table must be empty when the device runs again. */
static void test_status_reset_clears(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 2 * MiB, 14);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    assert_int_equal(vfe_conn_set_u64(vfe_dev_conn(e->dev), VFE_VU_SET_STATUS, 0), 0);
    vfe_dax_reset(e->dax);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    /* The same request maps again (a stale table would call it a no-op). */
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_window_is_file(e, "f", 0, 0, 2 * MiB);
    stop(e);
}

/*
 * A guest reset as QEMU 11.1's generic device shows it: every queue stopped
 * (SET_VRING_ENABLE 0, GET_VRING_BASE), no RESET_DEVICE, no SET_STATUS; the VMM
 * drops the window's mappings with the reset; the new driver's rings start at
 * 0 and its first request is FUSE_INIT. The daemon forgets the old session's
 * mappings without unmapping them (the frontend refuses an unmap of a mapping it
 * does not have), and the same offsets map again.
 */
static void test_reset_with_live_mappings(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 4 * MiB, 15);
    host_file(e, "g", 4 * MiB, 16);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 4 * MiB, RW, 0), 0);

    vfe_fuse_free(e->fuse);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    vfe_dax_reset(e->dax);
    for (unsigned i = 0; i < vfe_dev_nqueues(e->dev); i++)
        vfe_vq_reset(vfe_dev_vq(e->dev, i), 0);
    new_driver(e); /* its FUSE_INIT starts a new session, not EPROTO */
    uint64_t g = lookup(e, "g", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, g, NOFH, 0, 4 * MiB, RD, 0), 0);
    assert_window_is_file(e, "g", 0, 0, 4 * MiB);
    assert_no_rejects(e);
    stop(e);
}

/* A VM pause (stop, then the same rings go on where they stopped): the session
 * and its mappings stay, so the same request is a no-op the frontend never
 * sees (it still has the mapping) and the bytes are still the file's. */
static void test_pause_keeps_mappings(void **state)
{
    struct opts o = { .daemon = "--dax-window 16M", .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 2 * MiB, 17);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    struct vfe_dax_stats before, after;
    vfe_dax_get_stats(e->dax, &before);
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    vfe_dax_get_stats(e->dax, &after);
    assert_int_equal(after.maps, before.maps);
    assert_window_is_file(e, "f", 0, 0, 2 * MiB);
    assert_no_rejects(e);
    stop(e);
}

/* Waits up to 20 s until the log has at least n lines containing text. */
static void wait_log(struct env *e, const char *text, int n)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "test \"$(grep -c '%s' %s)\" -ge %d", text, e->log, n);
    for (int i = 0; i < 200; i++) {
        if (system(cmd) == 0)
            return;
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    fail_msg("no '%s' (x%d) in %s", text, n, e->log);
}

/* A frontend that disconnects: the next one (--reconnect) maps the same offsets. */
static void test_disconnect_clears(void **state)
{
    struct opts o = { .proto = VFE_DAX_SHMEM };
    struct env *e = prepare(&o);
    char sock[96], cmd[2400];
    snprintf(sock, sizeof(sock), "%s.sock", e->log);
    snprintf(cmd, sizeof(cmd),
             "exec %s --socket-path=%s --shared-dir=%s %s --dax-window 16M --reconnect "
             ">>%s 2>&1",
             opt_vufsd, sock, e->dir, opt_extra, e->log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    host_file(e, "f", 4 * MiB, 13);
    wait_log(e, "listening on", 1);
    for (int round = 0; round < 2; round++) {
        if (round)
            wait_log(e, "waiting for a new frontend", round);
        attach(e, &o, sock);
        uint64_t f = lookup(e, "f", NULL);
        assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 4 * MiB, RW, 0), 0);
        assert_window_is_file(e, "f", 0, 0, 4 * MiB);
        assert_no_rejects(e);
        vfe_fuse_free(e->fuse);
        vfe_dev_close(e->dev); /* gone without REMOVEMAPPING or DESTROY */
        vfe_dax_reset(e->dax); /* what the VMM does with its window */
    }
    int status;
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    e->fuse = NULL;
    e->dev = NULL;
    teardown(e);
}

/* ---- Statistics --------------------------------------------------------------------------------- */

/* python3 parses the JSON and checks one counter of the window. */
static void assert_json_counter(const char *file, const char *counter, long at_least)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "sys.exit(0 if d[\"window\"][\"%s\"] >= %ld and isinstance(d[\"inodes\"], list) "
             "else 1)' %s",
             counter, at_least, file);
    assert_int_equal(system(cmd), 0);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* The last "DAX statistics: " line of the log, into out (a file). false if none. */
static bool stats_from_log(struct env *e, const char *out)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "grep -o 'DAX statistics: .*' %s | tail -n 1 | sed 's/^DAX statistics: //' > %s && "
             "test -s %s",
             e->log, out, out);
    return system(cmd) == 0;
}

static void test_stats(void **state)
{
    char sf[64], daemon[160], tmp[64];
    strcpy(sf, "/tmp/vufsd-dax-stats-XXXXXX");
    int fd = mkstemp(sf);
    assert_true(fd >= 0);
    close(fd);
    unlink(sf);
    /* The statistics are printed whatever the log level says. */
    snprintf(daemon, sizeof(daemon), "--dax-window 16M --stats-file %s --log-level warn", sf);
    struct opts o = { .daemon = daemon, .proto = VFE_DAX_SHMEM };
    struct env *e = start(&o);
    host_file(e, "f", 4 * MiB, 12);
    uint64_t f = lookup(e, "f", NULL);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RD, 0), 0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, NOFH, 0, 2 * MiB, RW, 0), 0);
    /* Seven more files mapped: the JSON is longer than any ordinary log line. */
    for (int k = 1; k < 8; k++) {
        char name[8];
        snprintf(name, sizeof(name), "g%d", k);
        host_file(e, name, 2 * MiB, (unsigned)k);
        uint64_t g = lookup(e, name, NULL);
        assert_int_equal(vfe_fuse_setupmapping(e->fuse, g, NOFH, 0, 2 * MiB, RD, 2 * MiB * k), 0);
    }
    /* Rewritten every second. */
    sleep_ms(2500);
    assert_json_counter(sf, "maps", 8);
    assert_json_counter(sf, "upgrades", 1);
    assert_json_counter(sf, "slots_used", 8);
    assert_json_counter(sf, "inodes", 8);

    /* SIGUSR1 logs the JSON (the pid is the sandbox's parent, which forwards it). */
    strcpy(tmp, "/tmp/vufsd-dax-json-XXXXXX");
    fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(kill(vfe_conn_backend_pid(vfe_dev_conn(e->dev)), SIGUSR1), 0);
    bool seen = false;
    for (int i = 0; i < 50 && !seen; i++) {
        sleep_ms(100);
        seen = stats_from_log(e, tmp);
    }
    assert_true(seen);
    assert_json_counter(tmp, "maps", 8);
    assert_json_counter(tmp, "inodes", 8);
    assert_json_counter(tmp, "map_errors", 0);
    unlink(tmp);
    assert_alive(e); /* SIGUSR1 did not end it */
    stop(e);
    unlink(sf);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "vufsd", required_argument, NULL, 'v' },
        { "extra", required_argument, NULL, 'e' },
        { "only", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'v')
            opt_vufsd = optarg;
        else if (c == 'e')
            opt_extra = optarg;
        else if (c == 'o')
            cmocka_set_test_filter(optarg); /* a test name, or a pattern with * */
        else
            return 2;
    }
    if (!opt_vufsd) {
        fprintf(stderr, "usage: %s --vufsd CMD [--extra OPTIONS] [--only TEST]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shmem_roundtrip),
        cmocka_unit_test(test_legacy_roundtrip),
        cmocka_unit_test(test_shmem_roundtrip_direct),
        cmocka_unit_test(test_host_truncate),
        cmocka_unit_test(test_host_truncate_direct_kills),
        cmocka_unit_test(test_full_file_system),
        cmocka_unit_test(test_direct_refused_on_fuse),
        cmocka_unit_test(test_legacy_roundtrip_direct),
        cmocka_unit_test(test_shmem_hostile),
        cmocka_unit_test(test_legacy_hostile),
        cmocka_unit_test(test_write_needs_permission),
        cmocka_unit_test(test_readonly_share),
        cmocka_unit_test(test_qemu_map_rules),
        cmocka_unit_test(test_qemu_map_waits_for_region),
        cmocka_unit_test(test_qemu_window_full),
        cmocka_unit_test(test_qemu_region_cap),
        cmocka_unit_test(test_qemu_map_after_unmap_at_limit),
        cmocka_unit_test(test_qemu_removal_late),
        cmocka_unit_test(test_qemu_stop_while_map_waits),
        cmocka_unit_test(test_qemu_descriptor_in_window),
        cmocka_unit_test(test_no_window),
        cmocka_unit_test(test_frontend_without_shmem),
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_two_queues),
        cmocka_unit_test(test_forget_unmaps),
        cmocka_unit_test(test_destroy_with_many_mappings),
        cmocka_unit_test(test_reset_clears),
        cmocka_unit_test(test_disconnect_clears),
        cmocka_unit_test(test_status_reset_clears),
        cmocka_unit_test(test_reset_with_live_mappings),
        cmocka_unit_test(test_pause_keeps_mappings),
        cmocka_unit_test(test_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
