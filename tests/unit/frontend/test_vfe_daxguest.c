/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The emulated guest DAX client against a fake device: the device keeps each
 * file in a memfd and maps it into a real vfe_dax window through the window's
 * own backend-request handler (so the window's rules hold: no mapping over a
 * mapping, exact unmaps), and logs every request. Checked: the free and busy
 * lists in FIFO order, the 20% reclaim threshold, 10 ranges per worker pass,
 * inline reclaim of the same file's lowest range, the LRU model's order, the
 * read->write upgrade, the plain path for files without FUSE_ATTR_DAX and for
 * extending writes, eviction in batches of 256, and the data (random I/O from
 * several threads against a reference, then the files themselves).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"

#define MiB       (1ull << 20)
#define R         (2 * MiB)
#define MAX_FILES 8
#define MAX_LOG   4096

enum ev_kind { EV_SETUP, EV_REMOVE, EV_READ, EV_WRITE };

struct ev {
    enum ev_kind kind;
    unsigned q;
    uint64_t nodeid, foffset, moffset, flags;
    uint32_t count;
    uint64_t first_moffset;
};

struct fake {
    struct vfe_dax *x;
    int fd[MAX_FILES]; /* nodeid i + 1 */
    pthread_mutex_t lock;
    struct ev log[MAX_LOG];
    unsigned nlog;
    unsigned removes_total;
    int fail_setup; /* -errno for the next SETUPMAPPING */
};

static void log_ev(struct fake *k, struct ev e)
{
    pthread_mutex_lock(&k->lock);
    if (k->nlog < MAX_LOG)
        k->log[k->nlog++] = e;
    pthread_mutex_unlock(&k->lock);
}

static uint64_t shmem_call(struct fake *k, uint32_t req, int fd, uint64_t fd_off, uint64_t shm_off,
                           uint64_t len, uint64_t flags)
{
    struct vfe_msg m;
    vfe_msg_init(&m, req, VFE_VU_FLAG_NEED_REPLY);
    uint8_t p[40] = {0};
    memcpy(p + 8, &fd_off, 8);
    memcpy(p + 16, &shm_off, 8);
    memcpy(p + 24, &len, 8);
    memcpy(p + 32, &flags, 8);
    memcpy(m.payload.raw, p, sizeof(p));
    m.size = sizeof(p);
    return vfe_dax_handle(k->x, &m, &fd, fd >= 0 ? 1 : 0);
}

static int f_setup(void *opaque, unsigned q, uint64_t nodeid, uint64_t foffset, uint64_t len,
                   uint64_t flags, uint64_t moffset)
{
    struct fake *k = opaque;
    log_ev(k, (struct ev){EV_SETUP, q, nodeid, foffset, moffset, flags, 0, 0});
    if (k->fail_setup) {
        int r = k->fail_setup;
        k->fail_setup = 0;
        return r;
    }
    if (nodeid == 0 || nodeid > MAX_FILES || len != R)
        return -EINVAL;
    /* A daemon's work: the frontend forbids mapping over a mapping. */
    pthread_mutex_lock(&k->lock);
    if (vfe_dax_is_mapped(k->x, moffset, len) &&
        shmem_call(k, VFE_VU_BACKEND_SHMEM_UNMAP, -1, 0, moffset, len, 0)) {
        pthread_mutex_unlock(&k->lock);
        return -EIO;
    }
    uint64_t r = shmem_call(k, VFE_VU_BACKEND_SHMEM_MAP, k->fd[nodeid - 1], foffset, moffset, len,
                            flags & FUSE_SETUPMAPPING_FLAG_WRITE ? 1 : 0);
    pthread_mutex_unlock(&k->lock);
    return r ? -EIO : 0;
}

static int f_remove(void *opaque, unsigned q, uint64_t nodeid,
                    const struct fuse_removemapping_one *e, uint32_t count)
{
    struct fake *k = opaque;
    log_ev(k, (struct ev){EV_REMOVE, q, nodeid, 0, 0, 0, count, e[0].moffset});
    int ret = 0;
    pthread_mutex_lock(&k->lock);
    k->removes_total += count;
    for (uint32_t i = 0; i < count; i++)
        if (shmem_call(k, VFE_VU_BACKEND_SHMEM_UNMAP, -1, 0, e[i].moffset, e[i].len, 0))
            ret = -EIO;
    pthread_mutex_unlock(&k->lock);
    return ret;
}

static ssize_t f_read(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                      void *buf, uint32_t len)
{
    struct fake *k = opaque;
    (void)fh;
    log_ev(k, (struct ev){EV_READ, q, nodeid, off, 0, 0, len, 0});
    ssize_t n = pread(k->fd[nodeid - 1], buf, len, (off_t)off);
    return n < 0 ? -errno : n;
}

static ssize_t f_write(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                       const void *buf, uint32_t len)
{
    struct fake *k = opaque;
    (void)fh;
    log_ev(k, (struct ev){EV_WRITE, q, nodeid, off, 0, 0, len, 0});
    ssize_t n = pwrite(k->fd[nodeid - 1], buf, len, (off_t)off);
    return n < 0 ? -errno : n;
}

static const struct vfe_daxguest_ops fake_ops = {f_setup, f_remove, f_read, f_write};

static uint8_t pattern(uint64_t nodeid, uint64_t off)
{
    return (uint8_t)(nodeid * 31 + off / 4096 * 7 + off % 251);
}

/* File nodeid (1-based) of size bytes, filled with pattern(). */
static void add_file(struct fake *k, uint64_t nodeid, uint64_t size)
{
    int fd = memfd_create("daxguest-file", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    uint8_t *buf = malloc(MiB);
    if (size <= 64 * MiB) {
        for (uint64_t off = 0; off < size; off += MiB) {
            uint64_t n = size - off < MiB ? size - off : MiB;
            for (uint64_t i = 0; i < n; i++)
                buf[i] = pattern(nodeid, off + i);
            assert_int_equal(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
        }
    } else {
        /* Large files stay sparse but for the block touch() reads per range. */
        for (uint64_t off = 4096; off + 4096 <= size; off += R) {
            for (uint64_t i = 0; i < 4096; i++)
                buf[i] = pattern(nodeid, off + i);
            assert_int_equal(pwrite(fd, buf, 4096, (off_t)off), 4096);
        }
    }
    free(buf);
    k->fd[nodeid - 1] = fd;
}

struct fix {
    struct fake k;
    struct vfe_daxguest *g;
    struct vfe_daxguest_file *f[MAX_FILES];
};

static struct fix *mk(unsigned nranges, enum vfe_daxguest_model model, enum vfe_daxguest_bg bg)
{
    struct fix *x = calloc(1, sizeof(*x));
    pthread_mutex_init(&x->k.lock, NULL);
    for (unsigned i = 0; i < MAX_FILES; i++)
        x->k.fd[i] = -1;
    assert_int_equal(vfe_dax_new(nranges * R, VFE_DAX_SHMEM, &x->k.x), 0);
    /* The guest model maps the last range of a file past its end, as Linux does. */
    vfe_dax_allow_past_eof(x->k.x, true);
    struct vfe_daxguest_config cfg = {.model = model,
                                      .bg = bg,
                                      .window = vfe_dax_window(x->k.x),
                                      .window_size = nranges * R,
                                      .bg_queue = 2,
                                      .ops = &fake_ops,
                                      .opaque = &x->k};
    assert_int_equal(vfe_daxguest_new(&cfg, &x->g), 0);
    return x;
}

static struct vfe_daxguest_file *file(struct fix *x, uint64_t nodeid, uint64_t size, bool dax)
{
    add_file(&x->k, nodeid, size);
    struct fuse_attr a = {
        .ino = nodeid, .size = size, .mode = 0100644, .flags = dax ? FUSE_ATTR_DAX : 0};
    x->f[nodeid - 1] = vfe_daxguest_file_add(x->g, nodeid, 100 + nodeid, &a);
    return x->f[nodeid - 1];
}

static void done(struct fix *x)
{
    struct vfe_dax_stats ds;
    vfe_dax_get_stats(x->k.x, &ds);
    assert_int_equal(ds.rejects, 0); /* no window rule was broken */
    vfe_daxguest_free(x->g);
    vfe_dax_free(x->k.x);
    for (unsigned i = 0; i < MAX_FILES; i++)
        if (x->k.fd[i] >= 0)
            close(x->k.fd[i]);
    pthread_mutex_destroy(&x->k.lock);
    free(x);
}

/* One 4 KiB read at range index idx (+ 4 KiB), checked against the pattern. */
static void touch(struct fix *x, struct vfe_daxguest_file *f, uint64_t idx)
{
    uint8_t buf[4096];
    uint64_t off = idx * R + 4096;
    assert_int_equal(vfe_daxguest_read(x->g, 1, f, off, buf, sizeof(buf)), (ssize_t)sizeof(buf));
    uint64_t nodeid = vfe_daxguest_file_nodeid(f);
    for (unsigned i = 0; i < sizeof(buf); i++)
        if (buf[i] != pattern(nodeid, off + i))
            fail_msg("byte %u of range %" PRIu64 " of file %" PRIu64 " wrong", i, idx, nodeid);
}

static unsigned count_kind(struct fix *x, enum ev_kind kind)
{
    unsigned n = 0;
    for (unsigned i = 0; i < x->k.nlog; i++)
        n += x->k.log[i].kind == kind;
    return n;
}

/* Setups take the free list from its head; the busy list is in setup order and
 * a hit does not move a range. */
static void test_fifo_order(void **state)
{
    (void)state;
    struct fix *x = mk(10, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *a = file(x, 1, 40 * MiB, true);
    static const uint64_t order[] = {5, 2, 9, 0, 7};
    for (unsigned i = 0; i < 5; i++)
        touch(x, a, order[i]);
    assert_int_equal(count_kind(x, EV_SETUP), 5);
    for (unsigned i = 0; i < 5; i++) {
        struct ev *e = &x->k.log[i];
        assert_int_equal(e->kind, EV_SETUP);
        assert_int_equal(e->moffset, i * R);        /* free list head first */
        assert_int_equal(e->foffset, order[i] * R); /* the whole 2 MiB range */
        assert_int_equal(e->flags, FUSE_SETUPMAPPING_FLAG_READ);
    }
    touch(x, a, 5); /* a hit: no request, no reordering */
    touch(x, a, 2);
    assert_int_equal(x->k.nlog, 5);
    uint64_t busy[16];
    assert_int_equal(vfe_daxguest_busy_list(x->g, busy, 16), 5);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(busy[i], i * R);
    struct vfe_daxguest_stats st;
    vfe_daxguest_get_stats(x->g, &st);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.setups, 5);
    assert_int_equal(st.free_ranges, 5);
    assert_int_equal(st.busy_ranges, 5);
    done(x);
}

/* The worker is kicked once fewer than 20% of the ranges are free. */
static void test_threshold(void **state)
{
    (void)state;
    struct fix *x = mk(10, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL); /* threshold 2 */
    struct vfe_daxguest_file *a = file(x, 1, 40 * MiB, true);
    for (uint64_t i = 0; i < 8; i++) {
        touch(x, a, i);
        assert_false(vfe_daxguest_reclaim_kicked(x->g)); /* 2 of 10 free: not below 20% */
    }
    touch(x, a, 8); /* 1 free */
    assert_true(vfe_daxguest_reclaim_kicked(x->g));
    done(x);

    /* 50 ranges: threshold 10. */
    x = mk(50, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    a = file(x, 1, 100 * MiB, true);
    for (uint64_t i = 0; i < 40; i++)
        touch(x, a, i);
    assert_false(vfe_daxguest_reclaim_kicked(x->g));
    touch(x, a, 40);
    assert_true(vfe_daxguest_reclaim_kicked(x->g));
    done(x);
}

/* A worker pass frees 10 ranges from the head of the busy list (oldest setup
 * first, whatever was used since), one REMOVEMAPPING of one entry each. */
static void test_reclaim_batch(void **state)
{
    (void)state;
    struct fix *x = mk(50, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *a = file(x, 1, 60 * MiB, true);
    struct vfe_daxguest_file *b = file(x, 2, 60 * MiB, true);
    for (uint64_t i = 0; i < 45; i++)
        touch(x, i % 2 ? b : a, i / 2);
    for (uint64_t i = 0; i < 10; i++)
        touch(x, a, i); /* hits: recency does not matter to this guest */
    assert_true(vfe_daxguest_reclaim_kicked(x->g));
    unsigned before = x->k.nlog;
    assert_int_equal(vfe_daxguest_reclaim_run(x->g), 10);
    assert_int_equal(x->k.nlog - before, 10);
    for (unsigned i = 0; i < 10; i++) {
        struct ev *e = &x->k.log[before + i];
        assert_int_equal(e->kind, EV_REMOVE);
        assert_int_equal(e->count, 1);
        assert_int_equal(e->first_moffset, i * R);
        assert_int_equal(e->nodeid, i % 2 ? 2 : 1);
        assert_int_equal(e->q, 2); /* the worker's queue */
    }
    /* The free list: the 5 never used, then the 10 freed in order. */
    uint64_t fl[64];
    assert_int_equal(vfe_daxguest_free_list(x->g, fl, 64), 15);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(fl[i], (45 + i) * R);
    for (unsigned i = 0; i < 10; i++)
        assert_int_equal(fl[5 + i], i * R);
    /* 15 free >= 10: the worker does not queue itself again. */
    assert_false(vfe_daxguest_reclaim_kicked(x->g));
    assert_int_equal(vfe_daxguest_mapped_at(a, 0, NULL), -1);
    assert_int_equal(vfe_daxguest_mapped_at(a, 5 * R, NULL), 10 * R);
    touch(x, a, 0); /* mapped again, at the free list's head */
    assert_int_equal(vfe_daxguest_mapped_at(a, 0, NULL), 45 * R);
    done(x);
}

/* Nothing free: a read reclaims the same file's idle range at the lowest file
 * offset inline (not the oldest range of the window) and reuses its place. A
 * file with no range waits for the worker. */
static void test_inline_same_file(void **state)
{
    (void)state;
    struct fix *x = mk(4, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *a = file(x, 1, 20 * MiB, true);
    struct vfe_daxguest_file *b = file(x, 2, 20 * MiB, true);
    struct vfe_daxguest_file *c = file(x, 3, 20 * MiB, true);
    touch(x, b, 0); /* oldest range of the window: b's */
    touch(x, a, 3);
    touch(x, a, 1);
    touch(x, b, 4);
    unsigned before = x->k.nlog;
    touch(x, a, 6);
    assert_int_equal(x->k.nlog - before, 2);
    struct ev *rm = &x->k.log[before], *su = &x->k.log[before + 1];
    assert_int_equal(rm->kind, EV_REMOVE);
    assert_int_equal(rm->nodeid, 1);
    assert_int_equal(rm->count, 1);
    assert_int_equal(rm->first_moffset, 2 * R); /* a's range 1 sat at 4 MiB */
    assert_int_equal(su->kind, EV_SETUP);
    assert_int_equal(su->foffset, 6 * R);
    assert_int_equal(su->moffset, 2 * R);
    assert_int_equal(vfe_daxguest_mapped_at(a, R, NULL), -1);
    assert_int_equal(vfe_daxguest_mapped_at(a, 3 * R, NULL), R);
    assert_int_equal(vfe_daxguest_mapped_at(b, 0, NULL), 0);
    struct vfe_daxguest_stats st;
    vfe_daxguest_get_stats(x->g, &st);
    assert_int_equal(st.inline_reclaims, 1);
    assert_int_equal(st.waits, 0);
    /* c has no range and nothing is free: it waits for the worker (run in
     * place here), which frees from the busy list's head: b's range 0 first. */
    before = x->k.nlog;
    touch(x, c, 0);
    vfe_daxguest_get_stats(x->g, &st);
    assert_int_equal(st.waits, 1);
    assert_int_equal(x->k.log[before].kind, EV_REMOVE);
    assert_int_equal(x->k.log[before].first_moffset, 0);
    assert_int_equal(x->k.log[before].nodeid, 2);
    assert_int_not_equal(vfe_daxguest_mapped_at(c, 0, NULL), -1);
    done(x);
}

/* The recency-aware guest: use moves a range to the tail, and with nothing
 * free the least recently used idle range of any file goes. */
static void test_lru_order(void **state)
{
    (void)state;
    struct fix *x = mk(4, VFE_DAXGUEST_LRU, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *a = file(x, 1, 20 * MiB, true);
    struct vfe_daxguest_file *b = file(x, 2, 20 * MiB, true);
    touch(x, a, 0); /* moffset 0 */
    touch(x, a, 1); /* 2 MiB */
    touch(x, b, 0); /* 4 MiB */
    touch(x, b, 1); /* 6 MiB */
    touch(x, a, 0); /* a0 is now the most recent */
    touch(x, b, 0);
    uint64_t busy[8];
    assert_int_equal(vfe_daxguest_busy_list(x->g, busy, 8), 4);
    assert_int_equal(busy[0], 1 * R); /* a1 */
    assert_int_equal(busy[1], 3 * R); /* b1 */
    assert_int_equal(busy[2], 0);     /* a0 */
    assert_int_equal(busy[3], 2 * R); /* b0 */
    unsigned before = x->k.nlog;
    touch(x, b, 5); /* b's own lowest range would be b0; the LRU range is a1 */
    assert_int_equal(x->k.log[before].kind, EV_REMOVE);
    assert_int_equal(x->k.log[before].first_moffset, R);
    assert_int_equal(x->k.log[before].nodeid, 1);
    assert_int_equal(x->k.log[before + 1].moffset, R);
    assert_int_equal(vfe_daxguest_mapped_at(a, R, NULL), -1);
    assert_int_equal(vfe_daxguest_mapped_at(b, 5 * R, NULL), R);
    /* The worker too takes the least recently used first: b1, a0, b0, b5. */
    assert_true(vfe_daxguest_reclaim_kicked(x->g));
    before = x->k.nlog;
    assert_int_equal(vfe_daxguest_reclaim_run(x->g), 4);
    static const uint64_t want[] = {3 * R, 0, 2 * R, R};
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(x->k.log[before + i].first_moffset, want[i]);
    done(x);

    /* The same traffic in the Linux model reclaims b's own lowest range. */
    x = mk(4, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    a = file(x, 1, 20 * MiB, true);
    b = file(x, 2, 20 * MiB, true);
    touch(x, a, 0);
    touch(x, a, 1);
    touch(x, b, 0);
    touch(x, b, 1);
    touch(x, a, 0);
    touch(x, b, 0);
    before = x->k.nlog;
    touch(x, b, 5);
    assert_int_equal(x->k.log[before].first_moffset, 2 * R);
    assert_int_equal(x->k.log[before].nodeid, 2);
    done(x);
}

/* A write to a range mapped for reading sets it up again, READ|WRITE, at the
 * same place; the data lands in the file. */
static void test_upgrade(void **state)
{
    (void)state;
    struct fix *x = mk(4, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *a = file(x, 1, 8 * MiB, true);
    touch(x, a, 1);
    bool w = true;
    assert_int_equal(vfe_daxguest_mapped_at(a, R, &w), 0);
    assert_false(w);
    uint8_t buf[8192];
    memset(buf, 0xc3, sizeof(buf));
    assert_int_equal(vfe_daxguest_write(x->g, 1, a, R + 100, buf, sizeof(buf)), 8192);
    assert_int_equal(x->k.nlog, 2);
    assert_int_equal(x->k.log[1].kind, EV_SETUP);
    assert_int_equal(x->k.log[1].moffset, 0);
    assert_int_equal(x->k.log[1].foffset, R);
    assert_int_equal(x->k.log[1].flags, FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE);
    assert_int_equal(vfe_daxguest_mapped_at(a, R, &w), 0);
    assert_true(w);
    /* A write across a range boundary into an unmapped range: set up writable. */
    assert_int_equal(vfe_daxguest_write(x->g, 1, a, 2 * R - 4096, buf, sizeof(buf)), 8192);
    assert_int_equal(x->k.log[2].flags, FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE);
    assert_int_equal(x->k.log[2].foffset, 2 * R);
    uint8_t got[8192];
    assert_int_equal(pread(x->k.fd[0], got, sizeof(got), (off_t)(R + 100)), 8192);
    assert_memory_equal(got, buf, sizeof(got));
    assert_int_equal(pread(x->k.fd[0], got, sizeof(got), (off_t)(2 * R - 4096)), 8192);
    assert_memory_equal(got, buf, sizeof(got));
    struct vfe_daxguest_stats st;
    vfe_daxguest_get_stats(x->g, &st);
    assert_int_equal(st.upgrades, 1);
    assert_int_equal(st.setups, 2);
    done(x);
}

/* Without FUSE_ATTR_DAX (or without a window) and for writes past the end, the
 * guest uses FUSE READ/WRITE; reads stop at the end of the file. */
static void test_plain_paths(void **state)
{
    (void)state;
    struct fix *x = mk(4, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *p = file(x, 1, 4 * MiB, false);
    struct vfe_daxguest_file *d = file(x, 2, 3 * MiB + 100, true);
    assert_false(vfe_daxguest_file_dax(p));
    assert_true(vfe_daxguest_file_dax(d));
    touch(x, p, 1);
    assert_int_equal(x->k.nlog, 1);
    assert_int_equal(x->k.log[0].kind, EV_READ);
    uint8_t buf[8192];
    memset(buf, 0x11, sizeof(buf));
    assert_int_equal(vfe_daxguest_write(x->g, 1, p, 4096, buf, 4096), 4096);
    assert_int_equal(x->k.log[1].kind, EV_WRITE);
    /* DAX file: a read past the end returns 0 without a request; one across the
     * end is short. */
    unsigned n = x->k.nlog;
    assert_int_equal(vfe_daxguest_read(x->g, 1, d, 3 * MiB + 100, buf, 10), 0);
    assert_int_equal(vfe_daxguest_read(x->g, 1, d, 4 * MiB, buf, 10), 0);
    assert_int_equal(x->k.nlog, n);
    assert_int_equal(vfe_daxguest_read(x->g, 1, d, 3 * MiB, buf, sizeof(buf)), 100);
    assert_int_equal(x->k.log[n].kind, EV_SETUP);
    /* An extending write goes through FUSE WRITE and grows the size. */
    n = x->k.nlog;
    assert_int_equal(vfe_daxguest_write(x->g, 1, d, 3 * MiB, buf, sizeof(buf)), 8192);
    assert_int_equal(x->k.log[n].kind, EV_WRITE);
    assert_int_equal(vfe_daxguest_file_size(d), 3 * MiB + 8192);
    /* Now inside the file: through the window (an upgrade). */
    assert_int_equal(vfe_daxguest_write(x->g, 1, d, 3 * MiB, buf, 4096), 4096);
    assert_int_equal(x->k.log[n + 1].kind, EV_SETUP);
    assert_int_equal(x->k.log[n + 1].flags,
                     FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE);
    done(x);

    /* No window: FUSE_ATTR_DAX is ignored. */
    struct fake k = {0};
    pthread_mutex_init(&k.lock, NULL);
    struct vfe_daxguest_config cfg = {.ops = &fake_ops, .opaque = &k, .bg = VFE_DAXGUEST_BG_THREAD};
    struct vfe_daxguest *g;
    assert_int_equal(vfe_daxguest_new(&cfg, &g), 0);
    struct fuse_attr a = {.size = 4096, .flags = FUSE_ATTR_DAX};
    assert_false(vfe_daxguest_file_dax(vfe_daxguest_file_add(g, 1, 1, &a)));
    vfe_daxguest_free(g);
    pthread_mutex_destroy(&k.lock);
}

/* Eviction removes every range of the file in requests of up to 256 entries and
 * returns them to the free list; the other file keeps its ranges. */
static void test_evict_batches(void **state)
{
    (void)state;
    struct fix *x = mk(400, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *a = file(x, 1, 700 * MiB, true);
    struct vfe_daxguest_file *b = file(x, 2, 8 * MiB, true);
    for (uint64_t i = 0; i < 300; i++)
        touch(x, a, i);
    touch(x, b, 2);
    unsigned before = x->k.nlog;
    assert_int_equal(vfe_daxguest_evict(x->g, 3, a), 0);
    assert_int_equal(x->k.nlog - before, 2);
    assert_int_equal(x->k.log[before].count, 256);
    assert_int_equal(x->k.log[before + 1].count, 44);
    assert_int_equal(x->k.log[before].q, 3);
    struct vfe_daxguest_stats st;
    vfe_daxguest_get_stats(x->g, &st);
    assert_int_equal(st.free_ranges, 399);
    assert_int_equal(st.busy_ranges, 1);
    assert_int_equal(vfe_daxguest_mapped_at(b, 2 * R, NULL), 300 * R);
    struct vfe_dax_stats ds;
    vfe_dax_get_stats(x->k.x, &ds);
    assert_int_equal(ds.mappings, 1);
    done(x);
}

/* A failed SETUPMAPPING returns the range to the free list and the error to the
 * caller. */
static void test_setup_error(void **state)
{
    (void)state;
    struct fix *x = mk(4, VFE_DAXGUEST_LINUX, VFE_DAXGUEST_BG_MANUAL);
    struct vfe_daxguest_file *a = file(x, 1, 8 * MiB, true);
    uint8_t buf[16];
    x->k.fail_setup = -ENOSPC;
    assert_int_equal(vfe_daxguest_read(x->g, 1, a, 0, buf, sizeof(buf)), -ENOSPC);
    struct vfe_daxguest_stats st;
    vfe_daxguest_get_stats(x->g, &st);
    assert_int_equal(st.free_ranges, 4);
    assert_int_equal(st.setup_errors, 1);
    assert_int_equal(vfe_daxguest_mapped_at(a, 0, NULL), -1);
    touch(x, a, 0);
    done(x);
}

/* Random reads and writes from 4 threads over 3 DAX files and a plain one
 * through a window of 6 ranges, with the worker thread: every read matches the
 * reference (threads own disjoint 4 KiB blocks for writing, so a block's value
 * is known), and so do the files at the end. */
#define RW_FILES   4
#define RW_SIZE    (16 * MiB)
#define RW_BLOCK   4096u
#define RW_THREADS 4

struct rw_shared {
    struct fix *x;
    uint8_t *ref[RW_FILES]; /* the expected content */
    pthread_mutex_t ref_lock[RW_FILES];
    unsigned seed;
    int failures;
};

struct rw_thread {
    struct rw_shared *s;
    unsigned index;
    pthread_t t;
};

static void *rw_main(void *arg)
{
    struct rw_thread *t = arg;
    struct rw_shared *s = t->s;
    uint32_t rng = s->seed * 7919u + t->index * 104729u + 1;
    uint8_t buf[3 * RW_BLOCK], want[3 * RW_BLOCK];
    for (unsigned it = 0; it < 1500; it++) {
        rng = rng * 1103515245u + 12345u;
        unsigned fi = (rng >> 8) % RW_FILES;
        struct vfe_daxguest_file *f = s->x->f[fi];
        unsigned nblocks = RW_SIZE / RW_BLOCK;
        rng = rng * 1103515245u + 12345u;
        if ((rng >> 16) % 3 == 0) {
            /* Write one of this thread's blocks. */
            unsigned b = ((rng >> 4) % (nblocks / RW_THREADS)) * RW_THREADS + t->index;
            memset(buf, (int)(rng >> 24), RW_BLOCK);
            buf[0] = (uint8_t)it;
            pthread_mutex_lock(&s->ref_lock[fi]);
            memcpy(s->ref[fi] + (uint64_t)b * RW_BLOCK, buf, RW_BLOCK);
            pthread_mutex_unlock(&s->ref_lock[fi]);
            if (vfe_daxguest_write(s->x->g, 1 + t->index % 2, f, (uint64_t)b * RW_BLOCK, buf,
                                   RW_BLOCK) != RW_BLOCK)
                __atomic_add_fetch(&s->failures, 1, __ATOMIC_RELAXED);
        } else {
            /* Read this thread's own block (its value cannot change meanwhile),
             * with its neighbours' blocks around it when they are its own too. */
            unsigned b = ((rng >> 4) % (nblocks / RW_THREADS)) * RW_THREADS + t->index;
            uint64_t off = (uint64_t)b * RW_BLOCK;
            pthread_mutex_lock(&s->ref_lock[fi]);
            memcpy(want, s->ref[fi] + off, RW_BLOCK);
            pthread_mutex_unlock(&s->ref_lock[fi]);
            if (vfe_daxguest_read(s->x->g, 1 + t->index % 2, f, off, buf, RW_BLOCK) != RW_BLOCK ||
                memcmp(buf, want, RW_BLOCK))
                __atomic_add_fetch(&s->failures, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static void rw_run(enum vfe_daxguest_model model)
{
    struct fix *x = mk(6, model, VFE_DAXGUEST_BG_THREAD);
    struct rw_shared s = {.x = x, .seed = 42};
    for (unsigned i = 0; i < RW_FILES; i++) {
        file(x, i + 1, RW_SIZE, i != 3);
        s.ref[i] = malloc(RW_SIZE);
        assert_int_equal(pread(x->k.fd[i], s.ref[i], RW_SIZE, 0), (ssize_t)RW_SIZE);
        pthread_mutex_init(&s.ref_lock[i], NULL);
    }
    struct rw_thread t[RW_THREADS];
    for (unsigned i = 0; i < RW_THREADS; i++) {
        t[i] = (struct rw_thread){.s = &s, .index = i};
        assert_int_equal(pthread_create(&t[i].t, NULL, rw_main, &t[i]), 0);
    }
    for (unsigned i = 0; i < RW_THREADS; i++)
        pthread_join(t[i].t, NULL);
    assert_int_equal(s.failures, 0);
    struct vfe_daxguest_stats st;
    vfe_daxguest_get_stats(x->g, &st);
    assert_true(st.setups > 50);
    assert_true(st.upgrades > 0);
    assert_true(st.removes > 40);
    assert_true(st.plain_reads > 0 && st.plain_writes > 0);
    assert_int_equal(st.setup_errors + st.remove_errors, 0);
    /* Evict everything; then the files must equal the reference. */
    for (unsigned i = 0; i < RW_FILES; i++) {
        assert_int_equal(vfe_daxguest_evict(x->g, 1, x->f[i]), 0);
        x->f[i] = NULL;
    }
    vfe_daxguest_get_stats(x->g, &st);
    assert_int_equal(st.free_ranges, 6);
    uint8_t *got = malloc(RW_SIZE);
    for (unsigned i = 0; i < RW_FILES; i++) {
        assert_int_equal(pread(x->k.fd[i], got, RW_SIZE, 0), (ssize_t)RW_SIZE);
        assert_memory_equal(got, s.ref[i], RW_SIZE);
        free(s.ref[i]);
        pthread_mutex_destroy(&s.ref_lock[i]);
    }
    free(got);
    struct vfe_dax_stats ds;
    vfe_dax_get_stats(x->k.x, &ds);
    assert_int_equal(ds.mappings, 0);
    done(x);
}

static void test_random_rw_linux(void **state)
{
    (void)state;
    rw_run(VFE_DAXGUEST_LINUX);
}

static void test_random_rw_lru(void **state)
{
    (void)state;
    rw_run(VFE_DAXGUEST_LRU);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_order),    cmocka_unit_test(test_threshold),
        cmocka_unit_test(test_reclaim_batch), cmocka_unit_test(test_inline_same_file),
        cmocka_unit_test(test_lru_order),     cmocka_unit_test(test_upgrade),
        cmocka_unit_test(test_plain_paths),   cmocka_unit_test(test_evict_batches),
        cmocka_unit_test(test_setup_error),   cmocka_unit_test(test_random_rw_linux),
        cmocka_unit_test(test_random_rw_lru),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
