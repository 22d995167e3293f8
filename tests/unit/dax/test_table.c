/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The slot table, scenario by scenario: every state transition, no-op, upgrade,
 * replacement, splits, multi-slot requests, extent limits, bounds, failures, reset
 * (also in the middle of a call), inode removal, the ghost list. The fake frontend enforces the mainline rules throughout.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dax_i.h"
#include "fake_frontend.h"

#define MiB (UINT64_C(1) << 20)
#define KiB (UINT64_C(1) << 10)
#define RD FUSE_SETUPMAPPING_FLAG_READ
#define RW (FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE)

struct tctx {
    struct fake_fe fe;
    struct dax_window *w;
    uint32_t watch;          /* slot whose state the callbacks record */
    char log[64];            /* 'm'/'u' + state digit per call */
    size_t nlog;
    int fail_map, fail_unmap; /* fail the next N calls */
    int unmaps_before_fail;   /* let this many unmaps through before fail_unmap applies */
    bool reset_in_call;
    bool forget_in_open;      /* ops->open frees the file first, as the daemon may */
};

static void note(struct tctx *t, char op)
{
    if (t->nlog + 2 < sizeof(t->log)) {
        t->log[t->nlog++] = op;
        t->log[t->nlog++] = (char)('0' + t->w->slots[t->watch].state);
        t->log[t->nlog] = 0;
    }
}

static int t_map(void *c, int fd, uint64_t foffset, uint64_t moffset, uint64_t len,
                 bool writable)
{
    struct tctx *t = c;

    note(t, 'm');
    if (t->reset_in_call) {
        t->reset_in_call = false;
        dax_window_reset(t->w);
    }
    if (t->fail_map > 0) {
        t->fail_map--;
        return -EIO;
    }
    return fake_ops.map(&t->fe, fd, foffset, moffset, len, writable);
}

static int t_unmap(void *c, uint64_t moffset, uint64_t len)
{
    struct tctx *t = c;

    note(t, 'u');
    if (t->reset_in_call) {
        t->reset_in_call = false;
        dax_window_reset(t->w);
    }
    if (t->fail_unmap > 0 && t->unmaps_before_fail-- <= 0) {
        t->fail_unmap--;
        return -EIO;
    }
    return fake_ops.unmap(&t->fe, moffset, len);
}

static int t_open(void *c, uint64_t key, bool writable, bool for_frontend)
{
    struct tctx *t = c;

    note(t, 'o');
    if (t->forget_in_open) {
        /* The daemon's open dropped the last reference to the inode: its
         * mappings go, through the same window, from inside this call. */
        t->forget_in_open = false;
        assert_int_equal(dax_remove_inode(t->w, key), 0);
        assert_int_equal(dax_inode_forget(t->w, key), 0);
    }
    return fake_ops.open(&t->fe, key, writable, for_frontend);
}

static const struct dax_ops t_ops = { .map = t_map, .unmap = t_unmap, .open = t_open };

static struct tctx *tnew(uint64_t size, unsigned ghost_cap)
{
    struct tctx *t = calloc(1, sizeof(*t));
    struct dax_config cfg = { .window_size = size, .policy = DAX_POLICY_AUTO,
                              .ghost_capacity = ghost_cap, .decay_interval_ns = UINT64_MAX };

    assert_non_null(t);
    fake_init(&t->fe, size, 4096);
    assert_int_equal(dax_window_new(&cfg, &t_ops, t, &t->w), 0);
    return t;
}

static void tcheck(struct tctx *t)
{
    if (t->fe.violations)
        fail_msg("frontend rule broken: %s", t->fe.last_violation);
    assert_int_equal(fake_leaked_fds(&t->fe, t->w), 0);
    assert_int_equal(fake_matches_table(&t->fe, t->w), 0);
    for (uint32_t s = 0; s < t->w->nslots; s++) {
        assert_false(dax_slot_busy(&t->w->slots[s]));
        dax_slot_check_locked(t->w, s);
    }
}

static void tfree(struct tctx *t)
{
    tcheck(t);
    dax_window_free(t->w);
    fake_fini(&t->fe);
    free(t);
}

static void log_clear(struct tctx *t)
{
    t->nlog = 0;
    t->log[0] = 0;
}

#define S_FREE '0'
#define S_MAPPING '1'
#define S_MAPPED '2'
#define S_UNMAPPING '3'

static void test_states_setup_remove(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one e = { 2 * MiB, 2 * MiB };
    struct dax_window_stats st;

    t->watch = 1;
    assert_int_equal(t->w->slots[1].state, DAX_SLOT_FREE);
    /* FREE -> MAPPING (map called) -> MAPPED */
    assert_int_equal(fake_setup(&t->fe, t->w, 7, 0, 2 * MiB, 2 * MiB, RD), 0);
    assert_string_equal(t->log, "m1");
    assert_int_equal(t->w->slots[1].state, DAX_SLOT_MAPPED);
    tcheck(t);
    /* MAPPED -> UNMAPPING (unmap called) -> FREE */
    log_clear(t);
    assert_int_equal(dax_removemapping(t->w, &e, 1), 0);
    assert_string_equal(t->log, "u3");
    assert_int_equal(t->w->slots[1].state, DAX_SLOT_FREE);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.maps, 1);
    assert_int_equal(st.unmaps, 1);
    assert_int_equal(st.extents, 0);
    assert_int_equal(st.bytes_mapped, 0);
    assert_int_equal(st.map_lat_count, 1);
    tfree(t);
}

static void test_states_failure_paths(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one e = { 0, 2 * MiB };
    struct dax_window_stats st;

    /* MAPPING -> FREE when the map fails on a free slot */
    t->fail_map = 1;
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RD), -EIO);
    assert_int_equal(t->w->slots[0].state, DAX_SLOT_FREE);
    assert_int_equal(fake_count(&t->fe), 0);
    tcheck(t);
    /* UNMAPPING -> MAPPED when the unmap fails: the mapping is still there */
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RD), 0);
    t->fail_unmap = 1;
    assert_int_equal(dax_removemapping(t->w, &e, 1), -EIO);
    assert_int_equal(t->w->slots[0].state, DAX_SLOT_MAPPED);
    assert_int_equal(fake_count(&t->fe), 1);
    tcheck(t);
    /* MAPPED -> MAPPING -> MAPPED: an upgrade whose unmap fails keeps read-only */
    t->fail_unmap = 1;
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RW), -EIO);
    assert_false(fake_at(&t->fe, 0)->writable);
    tcheck(t);
    /* an upgrade whose map fails after the unmap: MAPPING -> FREE, nothing mapped */
    t->fail_map = 1;
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RW), -EIO);
    assert_int_equal(t->w->slots[0].state, DAX_SLOT_FREE);
    assert_int_equal(fake_count(&t->fe), 0);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.map_errors, 2);
    assert_int_equal(st.unmap_errors, 2);
    tfree(t);
}

static void test_noop_and_upgrade(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct dax_window_stats st;
    struct dax_inode_stats is;

    t->watch = 3;
    assert_int_equal(fake_setup(&t->fe, t->w, 5, 4 * MiB, 2 * MiB, 6 * MiB, RD), 0);
    log_clear(t);
    /* identical: no frontend call */
    assert_int_equal(fake_setup(&t->fe, t->w, 5, 4 * MiB, 2 * MiB, 6 * MiB, RD), 0);
    assert_string_equal(t->log, "");
    /* read -> write at the same moffset: unmap then map, both while MAPPING */
    assert_int_equal(fake_setup(&t->fe, t->w, 5, 4 * MiB, 2 * MiB, 6 * MiB, RW), 0);
    assert_string_equal(t->log, "u1m1");
    assert_true(fake_at(&t->fe, 6 * MiB)->writable);
    /* read over a writable identical mapping: no-op, stays writable */
    log_clear(t);
    assert_int_equal(fake_setup(&t->fe, t->w, 5, 4 * MiB, 2 * MiB, 6 * MiB, RD), 0);
    assert_string_equal(t->log, "");
    assert_true(fake_at(&t->fe, 6 * MiB)->writable);
    /* flags 0 is a read-only request: also a no-op */
    assert_int_equal(fake_setup(&t->fe, t->w, 5, 4 * MiB, 2 * MiB, 6 * MiB, 0), 0);
    assert_string_equal(t->log, "");
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.maps, 1);
    assert_int_equal(st.upgrades, 1);
    assert_int_equal(st.noops, 3);
    assert_int_equal(st.unmaps, 0);
    assert_int_equal(st.ghost_hits, 0);
    assert_int_equal(fake_inode_stats(t->w, 5, &is), 0);
    assert_int_equal(is.upgrades, 1);
    assert_int_equal(is.extents, 1);
    assert_int_equal(is.bytes_mapped, 2 * MiB);
    tfree(t);
}

static void test_replace_other_file(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct dax_window_stats st;

    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RW), 0);
    /* same moffset, another file: the old mapping goes first */
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 8 * MiB, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_at(&t->fe, 0)->key, 2);
    assert_int_equal(fake_at(&t->fe, 0)->foffset, 8 * MiB);
    /* same file, other offset */
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 10 * MiB, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_at(&t->fe, 0)->foffset, 10 * MiB);
    /* file 1's range 0 comes back: it was replaced, so a ghost hit */
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 2 * MiB, RD), 0);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.maps, 4);
    assert_int_equal(st.unmaps, 2);
    assert_int_equal(st.ghost_hits, 1);
    tfree(t);
}

static void test_split_middle_prefix_suffix(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one mid = { 512 * KiB, 512 * KiB };
    struct fuse_removemapping_one pre = { 0, 256 * KiB };
    struct fuse_removemapping_one suf = { 1536 * KiB, 512 * KiB };
    const struct fake_map *m;
    struct dax_window_stats st;

    t->watch = 0;
    assert_int_equal(fake_setup(&t->fe, t->w, 9, 20 * MiB, 2 * MiB, 0, RW), 0);
    log_clear(t);
    assert_int_equal(dax_removemapping(t->w, &mid, 1), 0);
    /* the survivors' file is opened once while the slot is idle (MAPPED): no slot
     * owned; then the whole mapping goes and both survivors come back, all while
     * UNMAPPING */
    assert_string_equal(t->log, "o2u3m3m3");
    assert_int_equal(t->fe.open_calls, 1);
    m = fake_at(&t->fe, 0);
    assert_int_equal(m->moffset, 0);
    assert_int_equal(m->len, 512 * KiB);
    assert_int_equal(m->foffset, 20 * MiB);
    assert_true(m->writable);
    assert_null(fake_at(&t->fe, 512 * KiB));
    assert_null(fake_at(&t->fe, 1 * MiB - 4096));
    m = fake_at(&t->fe, 1 * MiB);
    assert_int_equal(m->moffset, 1 * MiB);
    assert_int_equal(m->len, 1 * MiB);
    assert_int_equal(m->foffset, 21 * MiB);
    tcheck(t);
    /* prefix of the first survivor, suffix of the second */
    assert_int_equal(dax_removemapping(t->w, &pre, 1), 0);
    m = fake_at(&t->fe, 256 * KiB);
    assert_int_equal(m->moffset, 256 * KiB);
    assert_int_equal(m->len, 256 * KiB);
    assert_int_equal(m->foffset, 20 * MiB + 256 * KiB);
    assert_int_equal(dax_removemapping(t->w, &suf, 1), 0);
    m = fake_at(&t->fe, 1 * MiB);
    assert_int_equal(m->len, 512 * KiB);
    assert_null(fake_at(&t->fe, 1536 * KiB));
    assert_int_equal(fake_count(&t->fe), 2);
    assert_int_equal(t->w->slots[0].state, DAX_SLOT_MAPPED);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.remaps, 4);
    assert_int_equal(st.bytes_mapped, 768 * KiB);
    tfree(t);
}

/* A survivor whose file does not open again is lost on both sides, counted. */
static void test_split_open_fails(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one mid = { 512 * KiB, 512 * KiB };
    struct dax_window_stats st;

    assert_int_equal(fake_setup(&t->fe, t->w, 9, 0, 2 * MiB, 0, RD), 0);
    t->fe.open_fail = 1;
    assert_int_equal(dax_removemapping(t->w, &mid, 1), 0);
    assert_int_equal(fake_count(&t->fe), 0);
    assert_int_equal(t->w->slots[0].state, DAX_SLOT_FREE);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.map_errors, 2);
    assert_int_equal(st.remaps, 0);
    tfree(t);
}

/*
 * The open of a survivor's file may free that file in the daemon, which unmaps
 * its mappings through the window from inside the call: the window opens with
 * no slot owned (no deadlock) and plans again (nothing is left to split).
 */
static void test_split_open_reenters(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one mid = { 512 * KiB, 512 * KiB };

    t->watch = 0;
    assert_int_equal(fake_setup(&t->fe, t->w, 9, 0, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 8, 0, 2 * MiB, 2 * MiB, RD), 0);
    log_clear(t);
    t->forget_in_open = true;
    assert_int_equal(dax_removemapping(t->w, &mid, 1), 0);
    /* open (slot idle), the whole mapping unmapped from inside it, no more */
    assert_string_equal(t->log, "o2u3");
    assert_int_equal(fake_count(&t->fe), 1);
    assert_int_equal(fake_at(&t->fe, 2 * MiB)->key, 8);
    assert_int_equal(t->w->slots[0].state, DAX_SLOT_FREE);
    tfree(t);
}

/* Survivors of several files, read-only and writable: one open per file and access. */
static void test_split_opens_per_file(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one e = { 512 * KiB, 1 * MiB };
    const struct fake_map *m;

    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 1 * MiB, 0, RW), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 0, 1 * MiB, 1 * MiB, RD), 0);
    assert_int_equal(dax_removemapping(t->w, &e, 1), 0);
    assert_int_equal(t->fe.open_calls, 2);
    m = fake_at(&t->fe, 0);
    assert_int_equal(m->key, 1);
    assert_true(m->writable);
    m = fake_at(&t->fe, 1536 * KiB);
    assert_int_equal(m->key, 2);
    assert_false(m->writable);
    assert_int_equal(fake_count(&t->fe), 2);
    tfree(t); /* no fd the window opened is left open */
}

static void test_split_second_unmap_fails(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one e = { 512 * KiB, 1 * MiB };
    const struct fake_map *m;

    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 1 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 0, 1 * MiB, 1 * MiB, RD), 0);
    /* both extents are cut; the first unmap works, the second fails */
    t->unmaps_before_fail = 1;
    t->fail_unmap = 1;
    assert_int_equal(dax_removemapping(t->w, &e, 1), -EIO);
    /* file 1's surviving half came back; file 2's extent was never touched */
    m = fake_at(&t->fe, 0);
    assert_non_null(m);
    assert_int_equal(m->key, 1);
    assert_int_equal(m->len, 512 * KiB);
    assert_null(fake_at(&t->fe, 512 * KiB));
    m = fake_at(&t->fe, 1 * MiB);
    assert_int_equal(m->key, 2);
    assert_int_equal(m->len, 1 * MiB);
    assert_int_equal(fake_count(&t->fe), 2);
    tfree(t);
}

static void test_partial_overlap_setup(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    const struct fake_map *m;

    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 64 * MiB, 512 * KiB, 1 * MiB, RW), 0);
    m = fake_at(&t->fe, 0);
    assert_int_equal(m->key, 1);
    assert_int_equal(m->len, 1 * MiB);
    m = fake_at(&t->fe, 1 * MiB);
    assert_int_equal(m->key, 2);
    assert_int_equal(m->len, 512 * KiB);
    m = fake_at(&t->fe, 1536 * KiB);
    assert_int_equal(m->key, 1);
    assert_int_equal(m->foffset, 1536 * KiB);
    assert_int_equal(fake_count(&t->fe), 3);
    /* a sub-range exactly equal to an existing extent is a no-op */
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 64 * MiB, 512 * KiB, 1 * MiB, RD), 0);
    assert_int_equal(fake_count(&t->fe), 3);
    tfree(t);
}

static void test_multi_slot(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one e = { 3 * MiB, 4 * MiB };
    const struct fake_map *m;

    /* 6 MiB starting at 2 MiB: one mapping per slot, file offsets consecutive */
    assert_int_equal(fake_setup(&t->fe, t->w, 4, 100 * MiB, 6 * MiB, 2 * MiB, RD), 0);
    assert_int_equal(fake_count(&t->fe), 3);
    for (unsigned i = 0; i < 3; i++) {
        m = fake_at(&t->fe, (2 + 2 * i) * MiB);
        assert_int_equal(m->moffset, (2 + 2 * i) * MiB);
        assert_int_equal(m->len, 2 * MiB);
        assert_int_equal(m->foffset, (100 + 2 * i) * MiB);
    }
    /* remove [3M, 7M): keeps [2M,3M) and [7M,8M) */
    assert_int_equal(dax_removemapping(t->w, &e, 1), 0);
    assert_int_equal(fake_count(&t->fe), 2);
    assert_int_equal(fake_at(&t->fe, 2 * MiB)->len, 1 * MiB);
    m = fake_at(&t->fe, 7 * MiB);
    assert_int_equal(m->len, 1 * MiB);
    assert_int_equal(m->foffset, 105 * MiB);
    assert_null(fake_at(&t->fe, 4 * MiB));
    /* a page-aligned range not on slot boundaries, crossing one */
    assert_int_equal(fake_setup(&t->fe, t->w, 5, 4096, 8192, 4 * MiB - 4096, RD), 0);
    assert_int_equal(fake_at(&t->fe, 4 * MiB - 4096)->len, 4096);
    assert_int_equal(fake_at(&t->fe, 4 * MiB)->foffset, 8192);
    tfree(t);
}

static void test_extent_limit(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one mid = { 4096, 4096 };
    struct dax_window_stats st;

    for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++)
        assert_int_equal(fake_setup(&t->fe, t->w, 1, i * 64 * KiB, 64 * KiB, i * 128 * KiB, RD), 0);
    /* a fifth mapping in the slot: refused before any frontend call */
    log_clear(t);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 4096, 1 * MiB, RD), -ENOSPC);
    /* splitting the first extent in three would need a fifth too */
    assert_int_equal(dax_removemapping(t->w, &mid, 1), -ENOSPC);
    assert_string_equal(t->log, "");
    assert_int_equal(fake_count(&t->fe), DAX_SLOT_MAX_EXTENTS);
    /* replacing two extents by one that covers both fits */
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 0, 256 * KiB, 0, RD), 0);
    assert_int_equal(fake_count(&t->fe), DAX_SLOT_MAX_EXTENTS - 1);
    /* other slots are unaffected by the limit */
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 2 * MiB, RD), 0);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.extents, DAX_SLOT_MAX_EXTENTS);
    tfree(t);
}

static void test_bounds_partial_last_slot(void **state)
{
    struct tctx *t = tnew(5 * MiB, 0);

    assert_int_equal(t->w->nslots, 3);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 1 * MiB, 4 * MiB, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 4 * MiB, RD), -EINVAL);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 4096, 5 * MiB, RD), -EINVAL);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 4096, 5 * MiB - 4096, RD), 0);
    tfree(t);
}

static void test_remove_unmapped_and_count0(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one e[2] = { { 0, 2 * MiB }, { 4 * MiB, 4096 } };

    assert_int_equal(dax_removemapping(t->w, e, 2), 0);
    assert_int_equal(dax_removemapping(t->w, NULL, 0), 0);
    assert_string_equal(t->log, "");
    tfree(t);
}

static void test_batch_removal_entries(void **state)
{
    struct tctx *t = tnew(16 * DAX_RANGE_SIZE, 0);
    struct fuse_removemapping_one e[DAX_REMOVE_MAX_ENTRIES];

    for (unsigned i = 0; i < 16; i++)
        assert_int_equal(fake_setup(&t->fe, t->w, i % 3, i * 2 * MiB, 2 * MiB, i * 2 * MiB, RD), 0);
    /* 256 entries: every slot, page by page at the start, then whole slots */
    for (unsigned i = 0; i < DAX_REMOVE_MAX_ENTRIES; i++)
        e[i] = (struct fuse_removemapping_one){ (i % 16) * 2 * MiB, 2 * MiB };
    assert_int_equal(dax_removemapping(t->w, e, DAX_REMOVE_MAX_ENTRIES), 0);
    assert_int_equal(fake_count(&t->fe), 0);
    tfree(t);
}

static void test_reset(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct dax_window_stats st;

    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(fake_setup(&t->fe, t->w, 1, i * 2 * MiB, 2 * MiB, i * 2 * MiB, RD), 0);
    log_clear(t);
    dax_window_reset(t->w);
    assert_string_equal(t->log, ""); /* the frontend is not called */
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.extents, 0);
    assert_int_equal(st.bytes_mapped, 0);
    assert_int_equal(st.slots_used, 0);
    assert_int_equal(st.ghost_entries, 0);
    for (uint32_t s = 0; s < t->w->nslots; s++)
        assert_int_equal(t->w->slots[s].state, DAX_SLOT_FREE);
    /* the frontend dropped its maps on reset too */
    pthread_mutex_lock(&t->fe.lock);
    fake_reset_locked(&t->fe);
    pthread_mutex_unlock(&t->fe.lock);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RD), 0);
    tfree(t);
}

static void test_reset_during_call(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct dax_window_stats st;

    /* reset while the map of a new mapping is in flight */
    t->reset_in_call = true;
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RD), -ECONNRESET);
    assert_int_equal(t->w->slots[0].state, DAX_SLOT_FREE);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.extents, 0);
    pthread_mutex_lock(&t->fe.lock);
    fake_reset_locked(&t->fe);
    pthread_mutex_unlock(&t->fe.lock);
    /* reset while a split's unmap is in flight: survivors are not re-mapped */
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 2 * MiB, RD), 0);
    t->reset_in_call = true;
    t->watch = 1;
    log_clear(t);
    struct fuse_removemapping_one e = { 2 * MiB, 4096 };
    assert_int_equal(dax_removemapping(t->w, &e, 1), -ECONNRESET);
    assert_string_equal(t->log, "o2u3");
    assert_int_equal(t->w->slots[1].state, DAX_SLOT_FREE);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.extents, 0);
    pthread_mutex_lock(&t->fe.lock);
    fake_reset_locked(&t->fe);
    pthread_mutex_unlock(&t->fe.lock);
    tfree(t);
}

static void test_remove_inode(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    struct dax_inode_stats is;

    /* files 1 and 2 interleaved, also inside one slot */
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 1 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 0, 1 * MiB, 1 * MiB, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 2 * MiB, 2 * MiB, 2 * MiB, RW), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 2 * MiB, 2 * MiB, 4 * MiB, RW), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 4 * MiB, 2 * MiB, 6 * MiB, RW), 0);
    assert_int_equal(dax_inode_forget(t->w, 1), -EBUSY);
    assert_int_equal(dax_remove_inode(t->w, 1), 0);
    assert_int_equal(fake_count(&t->fe), 2);
    assert_int_equal(fake_at(&t->fe, 1 * MiB)->key, 2);
    assert_int_equal(fake_at(&t->fe, 4 * MiB)->key, 2);
    assert_int_equal(fake_inode_stats(t->w, 1, &is), 0);
    assert_int_equal(is.extents, 0);
    assert_int_equal(is.unmaps, 3);
    assert_int_equal(dax_remove_inode(t->w, 1), 0);
    assert_int_equal(dax_remove_inode(t->w, 77), 0);
    assert_int_equal(dax_inode_forget(t->w, 1), 0);
    assert_int_equal(dax_inode_forget(t->w, 1), -ENOENT);
    assert_int_equal(fake_inode_stats(t->w, 1, &is), -ENOENT);
    tfree(t);
}

static void test_ghost_bounded(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 4);
    struct fuse_removemapping_one e = { 0, 2 * MiB };
    struct dax_window_stats st;

    for (unsigned i = 0; i < 6; i++) {
        assert_int_equal(fake_setup(&t->fe, t->w, 1, i * 2 * MiB, 2 * MiB, 0, RD), 0);
        assert_int_equal(dax_removemapping(t->w, &e, 1), 0);
    }
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.ghost_entries, 4);
    /* ranges 0 and 1 fell off; 2..5 are remembered */
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 0, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 2 * MiB, 2 * MiB, 2 * MiB, RD), 0);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.ghost_hits, 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 10 * MiB, 2 * MiB, 4 * MiB, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 1, 4 * MiB, 2 * MiB, 6 * MiB, RD), 0);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.ghost_hits, 2);
    assert_int_equal(st.ghost_entries, 2);
    /* a different file at the same range index is not a hit */
    assert_int_equal(fake_setup(&t->fe, t->w, 2, 6 * MiB, 2 * MiB, 8 * MiB, RD), 0);
    dax_window_get_stats(t->w, &st);
    assert_int_equal(st.ghost_hits, 2);
    tfree(t);
}

static void test_window_new_rejects(void **state)
{
    struct fake_fe fe;
    struct dax_window *w = (void *)1;
    struct dax_config cfg = { .window_size = 0 };
    struct dax_ops no_unmap = { .map = fake_ops.map };

    fake_init(&fe, 4096, 4096);
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &fe, &w), -EINVAL);
    assert_null(w);
    cfg.window_size = 4097;
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &fe, &w), -EINVAL);
    cfg.window_size = 8192;
    cfg.page_size = 3000;
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &fe, &w), -EINVAL);
    cfg.page_size = 0;
    assert_int_equal(dax_window_new(&cfg, &no_unmap, &fe, &w), -EINVAL);
    assert_int_equal(dax_window_new(&cfg, NULL, &fe, &w), -EINVAL);
    cfg.policy = (enum dax_policy)7;
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &fe, &w), -EINVAL);
    cfg.policy = DAX_POLICY_NEVER;
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &fe, &w), 0);
    assert_int_equal(w->size, 8192);
    assert_int_equal(dax_window_map_alignment(w), 12);
    assert_int_equal(w->nslots, 1);
    dax_window_free(w);
    dax_window_free(NULL);
    cfg.window_size = 4 * DAX_RANGE_SIZE;
    cfg.page_size = 65536;
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &fe, &w), 0);
    assert_int_equal(dax_window_map_alignment(w), 16);
    assert_int_equal(fake_check(w, 4096, 65536, 0, 0), -EINVAL);
    assert_int_equal(fake_check(w, 65536, 65536, 65536, 0), 0);
    dax_window_free(w);
    fake_fini(&fe);
}

static void restore_cb(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset,
                       uint64_t len, bool writable, enum dax_backing backing)
{
    struct dax_window *w = opaque;
    assert_int_equal(dax_window_restore_mapping(w, key, foffset, moffset, len, writable, backing),
                     0);
}

/*
 * A restart: a new window learns the mappings the frontend still has from
 * the old one, calling nothing; afterwards it drives the same frontend
 * exactly (a removal unmaps what the old window mapped). Untrusted input:
 * misaligned, out of the window, across a slot, overlapping, too many.
 */
static void test_restore(void **state)
{
    struct tctx *t = tnew(8 * DAX_RANGE_SIZE, 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 7, 0, 2 * MiB, 2 * MiB, RW), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 8, 4 * MiB, 64 * KiB, 6 * MiB, RD), 0);
    assert_int_equal(fake_setup(&t->fe, t->w, 8, 0, 64 * KiB, 6 * MiB + 128 * KiB, RD), 0);
    tcheck(t);

    struct tctx *n = calloc(1, sizeof(*n));
    struct dax_config cfg = {.window_size = 8 * DAX_RANGE_SIZE, .policy = DAX_POLICY_AUTO,
                             .decay_interval_ns = UINT64_MAX};
    n->fe = t->fe; /* the same frontend, still holding its maps */
    assert_int_equal(dax_window_new(&cfg, &t_ops, n, &n->w), 0);
    assert_int_equal(dax_for_each_mapping(t->w, restore_cb, n->w), 0);
    assert_int_equal(n->nlog, 0); /* no frontend call */
    assert_int_equal(fake_matches_table(&n->fe, n->w), 0);
    struct dax_window_stats st;
    dax_window_get_stats(n->w, &st);
    assert_int_equal(st.extents, 3);
    assert_int_equal(st.slots_used, 2);

    /* Refused, whatever the frontend holds: */
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 2 * MiB, 4096, false, DAX_BACK_FILE), -EEXIST);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 6 * MiB + 32 * KiB, 64 * KiB, false, DAX_BACK_FILE),
                     -EEXIST);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 5 * MiB + 100, 4096, false, DAX_BACK_FILE), -EINVAL);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 100, 5 * MiB, 4096, false, DAX_BACK_FILE), -EINVAL);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 16 * MiB, 4096, false, DAX_BACK_FILE), -EINVAL);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 14 * MiB, 4 * MiB, false, DAX_BACK_FILE), -EINVAL);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 9 * MiB, 2 * MiB, false, DAX_BACK_FILE), -EINVAL);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 8 * MiB, 0, false, DAX_BACK_FILE), -EINVAL);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, UINT64_MAX - 4095, 8 * MiB, 4096, false, DAX_BACK_FILE),
                     -EOVERFLOW);
    for (unsigned k = 0; k < DAX_SLOT_MAX_EXTENTS - 2; k++)
        assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 6 * MiB + (1 + k) * 512 * KiB,
                                                    4096, false, DAX_BACK_FILE),
                         0);
    assert_int_equal(dax_window_restore_mapping(n->w, 9, 0, 7 * MiB + 512 * KiB, 4096, false, DAX_BACK_FILE),
                     -ENOSPC);
    assert_int_equal(n->nlog, 0);
    for (uint32_t sl = 0; sl < n->w->nslots; sl++)
        dax_slot_check_locked(n->w, sl);
    dax_window_get_stats(n->w, &st);
    assert_int_equal(st.extents, 3 + DAX_SLOT_MAX_EXTENTS - 2);

    /* The restored table drives the real frontend: removing what the old window
     * mapped is one exact unmap the frontend accepts. */
    struct dax_window *keep = n->w;
    struct fuse_removemapping_one e = {2 * MiB, 2 * MiB};
    n->fe = t->fe;
    assert_int_equal(dax_removemapping(keep, &e, 1), 0);
    assert_int_equal(n->fe.violations, 0);
    dax_window_free(keep);
    free(n);
    dax_window_reset(t->w);
    fake_fini(&t->fe);
    dax_window_free(t->w);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restore),
        cmocka_unit_test(test_states_setup_remove),
        cmocka_unit_test(test_states_failure_paths),
        cmocka_unit_test(test_noop_and_upgrade),
        cmocka_unit_test(test_replace_other_file),
        cmocka_unit_test(test_split_middle_prefix_suffix),
        cmocka_unit_test(test_split_open_fails),
        cmocka_unit_test(test_split_open_reenters),
        cmocka_unit_test(test_split_opens_per_file),
        cmocka_unit_test(test_split_second_unmap_fails),
        cmocka_unit_test(test_partial_overlap_setup),
        cmocka_unit_test(test_multi_slot),
        cmocka_unit_test(test_extent_limit),
        cmocka_unit_test(test_bounds_partial_last_slot),
        cmocka_unit_test(test_remove_unmapped_and_count0),
        cmocka_unit_test(test_batch_removal_entries),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_reset_during_call),
        cmocka_unit_test(test_remove_inode),
        cmocka_unit_test(test_ghost_bounded),
        cmocka_unit_test(test_window_new_rejects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
