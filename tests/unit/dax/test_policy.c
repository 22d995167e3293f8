/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The per-file DAX policy: the pure decision across scenarios (sizes, demand,
 * thrash, hysteresis, overflow), then the stateful wrapper driven by real
 * SETUPMAPPING/REMOVEMAPPING traffic: admission by demand, revocation of a
 * thrashing file, re-admission once activity has decayed the thrash away.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dax.h"
#include "fake_frontend.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define RD FUSE_SETUPMAPPING_FLAG_READ

static struct dax_policy_input auto_in(uint64_t window, uint64_t file_size)
{
    struct dax_policy_input in = { .policy = DAX_POLICY_AUTO, .is_regular = true,
                                   .file_size = file_size };

    in.win.window_size = window;
    in.win.nslots = window / DAX_RANGE_SIZE;
    return in;
}

static void test_never_always(void **state)
{
    struct dax_policy_input in = auto_in(GiB, 100 * MiB);

    in.policy = DAX_POLICY_NEVER;
    assert_false(dax_policy_decide(&in));
    in.policy = DAX_POLICY_ALWAYS;
    assert_true(dax_policy_decide(&in));
    in.file_size = 1; /* always means always, even tiny or thrashing files */
    in.ino.dax = true;
    in.ino.recent_maps = 1000;
    in.ino.recent_ghost_hits = 1000;
    assert_true(dax_policy_decide(&in));
    in.is_regular = false;
    assert_false(dax_policy_decide(&in));
    in.is_regular = true;
    in.win.window_size = 0;
    assert_false(dax_policy_decide(&in));
    in.policy = (enum dax_policy)42;
    assert_false(dax_policy_decide(&in));
}

static void test_auto_size_and_type(void **state)
{
    struct dax_policy_input in = auto_in(GiB, DAX_POLICY_MIN_FILE_SIZE);

    assert_true(dax_policy_decide(&in));
    in.file_size = DAX_POLICY_MIN_FILE_SIZE - 1;
    assert_false(dax_policy_decide(&in));
    in.file_size = 0;
    assert_false(dax_policy_decide(&in));
    in.file_size = 100 * MiB;
    in.is_regular = false; /* directories, FIFOs, devices */
    assert_false(dax_policy_decide(&in));
    in.is_regular = true;
    in.win.window_size = 0;
    assert_false(dax_policy_decide(&in));
}

static void test_auto_demand_fit(void **state)
{
    /* 1250 MiB window: 80% (DAX_POLICY_ADMIT_PCT) is exactly 1000 MiB */
    struct dax_policy_input in = auto_in(1250 * MiB, 100 * MiB);

    assert_int_equal(DAX_POLICY_ADMIT_PCT, 80);
    /* others have 900 MiB admitted: 100 MiB more fits ... */
    in.win.admitted_bytes = 900 * MiB;
    assert_true(dax_policy_decide(&in));
    /* ... 102 MiB does not */
    in.file_size = 102 * MiB;
    assert_false(dax_policy_decide(&in));
    /* sizes count in whole 2 MiB ranges: 124 MiB + 1 byte needs 126 MiB */
    in.win.admitted_bytes = 876 * MiB;
    in.file_size = 124 * MiB + 1;
    assert_false(dax_policy_decide(&in));
    in.file_size = 124 * MiB;
    assert_true(dax_policy_decide(&in));
    /* a file larger than the usable 80% never gets DAX, even alone */
    in.win.admitted_bytes = 0;
    in.file_size = 1000 * MiB + 1;
    assert_false(dax_policy_decide(&in));
    in.file_size = 1000 * MiB;
    assert_true(dax_policy_decide(&in));
    /* an admitted file's own charge is not counted against it */
    in.ino.dax = true;
    in.ino.admitted_bytes = 500 * MiB;
    in.win.admitted_bytes = 1000 * MiB;
    in.file_size = 500 * MiB;
    assert_true(dax_policy_decide(&in));
    /* but it loses DAX when it grows past what is left */
    in.file_size = 502 * MiB;
    assert_false(dax_policy_decide(&in));
}

static void test_auto_revoke_on_thrash(void **state)
{
    struct dax_policy_input in = auto_in(GiB, 100 * MiB);

    in.ino.dax = true;
    in.ino.admitted_bytes = 100 * MiB;
    in.win.admitted_bytes = 100 * MiB;
    in.ino.recent_maps = 100;
    in.ino.recent_ghost_hits = DAX_POLICY_REVOKE_PCT;     /* exactly the threshold */
    assert_false(dax_policy_decide(&in));
    in.ino.recent_ghost_hits = DAX_POLICY_REVOKE_PCT - 1; /* just under */
    assert_true(dax_policy_decide(&in));
    /* too few samples: cold misses of a new file are not thrash */
    in.ino.recent_maps = DAX_POLICY_MIN_SAMPLES - 1;
    in.ino.recent_ghost_hits = DAX_POLICY_MIN_SAMPLES - 1;
    assert_true(dax_policy_decide(&in));
    in.ino.recent_maps = DAX_POLICY_MIN_SAMPLES;
    in.ino.recent_ghost_hits = DAX_POLICY_MIN_SAMPLES;
    assert_false(dax_policy_decide(&in));
    /* huge counters do not overflow the ratio */
    in.ino.recent_maps = UINT64_MAX;
    in.ino.recent_ghost_hits = UINT64_MAX / 2;
    assert_false(dax_policy_decide(&in));
    in.ino.recent_ghost_hits = UINT64_MAX / 5;
    assert_true(dax_policy_decide(&in));
}

static void test_auto_hysteresis(void **state)
{
    struct dax_policy_input in = auto_in(GiB, 100 * MiB);

    /* 10%: between re-admit (5%) and revoke (25%): each side keeps its state */
    in.ino.recent_maps = 100;
    in.ino.recent_ghost_hits = 10;
    in.ino.dax = true;
    in.ino.admitted_bytes = 100 * MiB;
    in.win.admitted_bytes = 100 * MiB;
    assert_true(dax_policy_decide(&in));
    in.ino.dax = false;
    in.ino.admitted_bytes = 0;
    in.win.admitted_bytes = 0;
    in.ino.revoked = true;
    assert_false(dax_policy_decide(&in));
    /* calm file, but the window as a whole still thrashing: stay out */
    in.ino.recent_ghost_hits = DAX_POLICY_READMIT_PCT;
    in.win.recent_maps = 1000;
    in.win.recent_ghost_hits = 200;
    assert_false(dax_policy_decide(&in));
    /* both calm: back in */
    in.win.recent_ghost_hits = 50;
    assert_true(dax_policy_decide(&in));
    /* forgotten history (decayed below the sample floor) counts as calm */
    in.ino.recent_maps = 3;
    in.ino.recent_ghost_hits = 3;
    in.win.recent_maps = 3;
    in.win.recent_ghost_hits = 3;
    assert_true(dax_policy_decide(&in));
    /* a file that was never revoked is admitted whatever the window's thrash */
    in.ino.revoked = false;
    in.win.recent_maps = 1000;
    in.win.recent_ghost_hits = 1000;
    assert_true(dax_policy_decide(&in));
    /* but re-admission still needs room */
    in.ino.revoked = true;
    in.win.recent_ghost_hits = 0;
    in.win.admitted_bytes = GiB - 98 * MiB;
    assert_false(dax_policy_decide(&in));
}

static void test_auto_overflow(void **state)
{
    struct dax_policy_input in = auto_in(UINT64_MAX & ~4095ull, UINT64_MAX);

    in.win.admitted_bytes = UINT64_MAX;
    assert_false(dax_policy_decide(&in));
    in.win.admitted_bytes = 0;
    in.ino.admitted_bytes = UINT64_MAX; /* inconsistent input: no wrap-around */
    in.file_size = GiB;
    assert_true(dax_policy_decide(&in));
}

static void test_names(void **state)
{
    enum dax_policy p;

    assert_int_equal(dax_policy_parse("never", &p), 0);
    assert_int_equal(p, DAX_POLICY_NEVER);
    assert_int_equal(dax_policy_parse("always", &p), 0);
    assert_int_equal(p, DAX_POLICY_ALWAYS);
    assert_int_equal(dax_policy_parse("auto", &p), 0);
    assert_int_equal(p, DAX_POLICY_AUTO);
    assert_int_equal(dax_policy_parse("inode", &p), -EINVAL);
    assert_int_equal(dax_policy_parse(NULL, &p), -EINVAL);
    assert_string_equal(dax_policy_name(DAX_POLICY_AUTO), "auto");
    assert_string_equal(dax_policy_name((enum dax_policy)9), "?");
}

/* ---- The wrapper, with real traffic ------------------------------------------- */

struct fx {
    struct fake_fe fe;
    struct dax_window *w;
};

static void fx_new(struct fx *f, uint64_t size, enum dax_policy pol)
{
    struct dax_config cfg = { .window_size = size, .policy = pol,
                              .decay_interval_ns = UINT64_MAX };

    fake_init(&f->fe, size, 4096);
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &f->fe, &f->w), 0);
}

static void fx_free(struct fx *f)
{
    assert_int_equal(f->fe.violations, 0);
    dax_window_free(f->w);
    fake_fini(&f->fe);
}

static void test_wrapper_admission(void **state)
{
    struct fx f;
    struct dax_window_stats st;
    struct dax_inode_stats is;

    fx_new(&f, 10 * MiB, DAX_POLICY_AUTO); /* 8 MiB admissible */
    assert_true(dax_policy_attr_dax(f.w, 1, 3 * MiB, true));  /* charges 4 MiB */
    assert_true(dax_policy_attr_dax(f.w, 2, 4 * MiB, true));  /* charges 4 MiB */
    assert_false(dax_policy_attr_dax(f.w, 3, 1 * MiB, true)); /* no room left */
    assert_false(dax_policy_attr_dax(f.w, 4, 4096, true));    /* tiny */
    assert_false(dax_policy_attr_dax(f.w, 5, 4 * MiB, false)); /* not regular */
    /* asking again does not charge twice */
    assert_true(dax_policy_attr_dax(f.w, 1, 3 * MiB, true));
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.admitted_bytes, 8 * MiB);
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_true(is.dax);
    assert_int_equal(is.admitted_bytes, 4 * MiB);
    assert_int_equal(fake_inode_stats(f.w, 5, &is), -ENOENT); /* no record */
    /* file 2 is forgotten: its share goes to file 3 */
    assert_int_equal(dax_inode_forget(f.w, 2), 0);
    assert_true(dax_policy_attr_dax(f.w, 3, 1 * MiB, true));
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.admitted_bytes, 6 * MiB);
    /* file 1 shrinks: its charge follows */
    assert_true(dax_policy_attr_dax(f.w, 1, 1 * MiB, true));
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.admitted_bytes, 4 * MiB);
    fx_free(&f);

    fx_new(&f, 8 * MiB, DAX_POLICY_NEVER);
    assert_false(dax_policy_attr_dax(f.w, 1, 3 * MiB, true));
    fx_free(&f);
    fx_new(&f, 8 * MiB, DAX_POLICY_ALWAYS);
    assert_true(dax_policy_attr_dax(f.w, 1, 100 * GiB, true));
    assert_false(dax_policy_attr_dax(f.w, 1, 100 * GiB, false));
    fx_free(&f);
}

/* The guest maps range r of file key into slot 0 and removes it again. */
static void cycle(struct fx *f, uint64_t key, uint64_t r)
{
    struct fuse_removemapping_one e = { 0, DAX_RANGE_SIZE };

    assert_int_equal(fake_setup(&f->fe, f->w, key, r * DAX_RANGE_SIZE, DAX_RANGE_SIZE, 0, RD), 0);
    assert_int_equal(dax_removemapping(f->w, &e, 1), 0);
}

static void test_wrapper_revoke_and_readmit(void **state)
{
    struct fx f;
    struct dax_inode_stats is;
    uint64_t r = 0;

    fx_new(&f, 8 * MiB, DAX_POLICY_AUTO);
    assert_true(dax_policy_attr_dax(f.w, 1, 6 * MiB, true));
    /* file 1 cycles through its 3 ranges through one slot: every re-map is a ghost hit */
    for (unsigned i = 0; i < 40; i++)
        cycle(&f, 1, i % 3);
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_int_equal(is.ghost_hits, 37);
    assert_false(dax_policy_attr_dax(f.w, 1, 6 * MiB, true));
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_true(is.revoked);
    assert_false(is.dax);
    assert_int_equal(is.admitted_bytes, 0);
    /* nothing calmer happened yet: still out */
    assert_false(dax_policy_attr_dax(f.w, 1, 6 * MiB, true));
    /* other traffic without re-use: the activity clock halves the old thrash */
    for (unsigned i = 0; i < 256; i++)
        cycle(&f, 2, r++);
    assert_false(dax_policy_attr_dax(f.w, 1, 6 * MiB, true)); /* 20/18: still thrash */
    for (unsigned i = 0; i < 3 * 256; i++)
        cycle(&f, 2, r++);
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_true(is.recent_maps < DAX_POLICY_MIN_SAMPLES);
    assert_true(dax_policy_attr_dax(f.w, 1, 6 * MiB, true));
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_false(is.revoked);
    assert_true(is.dax);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_always),
        cmocka_unit_test(test_auto_size_and_type),
        cmocka_unit_test(test_auto_demand_fit),
        cmocka_unit_test(test_auto_revoke_on_thrash),
        cmocka_unit_test(test_auto_hysteresis),
        cmocka_unit_test(test_auto_overflow),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_wrapper_admission),
        cmocka_unit_test(test_wrapper_revoke_and_readmit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
