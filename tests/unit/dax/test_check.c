/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Hostile SETUPMAPPING/REMOVEMAPPING arguments: outside the window, misaligned,
 * offset + length overflow, unknown flags, too many entries. Each must be refused
 * with an errno by the check AND by the request functions, without a frontend call.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "dax.h"
#include "fake_frontend.h"

#define MiB (UINT64_C(1) << 20)
#define WIN (16 * MiB)
#define RD FUSE_SETUPMAPPING_FLAG_READ
#define RW (FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE)

struct fx {
    struct fake_fe fe;
    struct dax_window *w;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct dax_config cfg = { .window_size = WIN, .policy = DAX_POLICY_AUTO };

    fake_init(&f->fe, WIN, 4096);
    if (dax_window_new(&cfg, &fake_ops, &f->fe, &f->w) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    dax_window_free(f->w);
    fake_fini(&f->fe);
    free(f);
    return 0;
}

/* Both the check and the request function refuse, and nothing reaches the frontend. */
static void refuse_setup(struct fx *f, uint64_t moffset, uint64_t len, uint64_t foffset,
                         uint64_t flags, int err)
{
    unsigned calls = f->fe.map_calls + f->fe.unmap_calls;

    assert_int_equal(fake_check(f->w, moffset, len, foffset, flags), err);
    assert_int_equal(fake_setup(&f->fe, f->w, 1, foffset, len, moffset, flags), err);
    assert_int_equal(f->fe.map_calls + f->fe.unmap_calls, calls);
}

static void test_setup_bounds(void **state)
{
    struct fx *f = *state;

    refuse_setup(f, WIN, 2 * MiB, 0, RD, -EINVAL);            /* starts at the end */
    refuse_setup(f, WIN - 2 * MiB, 4 * MiB, 0, RD, -EINVAL);  /* runs past the end */
    refuse_setup(f, UINT64_MAX & ~4095ull, 2 * MiB, 0, RD, -EINVAL);
    refuse_setup(f, 2 * MiB, UINT64_MAX & ~4095ull, 0, RD, -EINVAL); /* moffset+len wraps */
    refuse_setup(f, 0, 0, 0, RD, -EINVAL);                     /* empty */
    refuse_setup(f, 0, WIN + 4096, 0, RD, -EINVAL);
    /* the exact window is fine */
    assert_int_equal(fake_check(f->w, 0, WIN, 0, RD), 0);
    assert_int_equal(fake_check(f->w, WIN - 4096, 4096, 0, RD), 0);
}

static void test_setup_alignment(void **state)
{
    struct fx *f = *state;

    refuse_setup(f, 1, 2 * MiB, 0, RD, -EINVAL);
    refuse_setup(f, 2048, 2 * MiB, 0, RD, -EINVAL);
    refuse_setup(f, 0, 2 * MiB - 1, 0, RD, -EINVAL);
    refuse_setup(f, 0, 100, 0, RD, -EINVAL);
    refuse_setup(f, 0, 2 * MiB, 512, RD, -EINVAL);
    refuse_setup(f, 0, 2 * MiB, 4095, RD, -EINVAL);
    /* page alignment is enough (map_alignment = 12) */
    assert_int_equal(fake_check(f->w, 4096, 8192, 12288, RD), 0);
}

static void test_setup_file_overflow(void **state)
{
    struct fx *f = *state;

    refuse_setup(f, 0, 2 * MiB, UINT64_MAX & ~4095ull, RD, -EOVERFLOW);
    refuse_setup(f, 0, 2 * MiB, (uint64_t)INT64_MAX + 1, RD, -EOVERFLOW);
    refuse_setup(f, 0, 2 * MiB, ((uint64_t)INT64_MAX & ~4095ull) - 4096, RD, -EOVERFLOW);
    assert_int_equal(fake_check(f->w, 0, 4096, ((uint64_t)INT64_MAX & ~4095ull) - 4096, RD),
                     0);
}

static void test_setup_flags(void **state)
{
    struct fx *f = *state;

    refuse_setup(f, 0, 2 * MiB, 0, 1u << 2, -EINVAL);
    refuse_setup(f, 0, 2 * MiB, 0, RW | (1ull << 63), -EINVAL);
    refuse_setup(f, 0, 2 * MiB, 0, UINT64_MAX, -EINVAL);
    assert_int_equal(fake_check(f->w, 0, 2 * MiB, 0, 0), 0);
    assert_int_equal(fake_check(f->w, 0, 2 * MiB, 0, FUSE_SETUPMAPPING_FLAG_WRITE), 0);
    assert_int_equal(fake_check(f->w, 0, 2 * MiB, 0, RW), 0);
}

static void refuse_remove(struct fx *f, const struct fuse_removemapping_one *e, unsigned n, int err)
{
    unsigned calls = f->fe.map_calls + f->fe.unmap_calls;

    assert_int_equal(dax_remove_check(f->w, e, n), err);
    assert_int_equal(dax_removemapping(f->w, e, n), err);
    assert_int_equal(f->fe.map_calls + f->fe.unmap_calls, calls);
}

static void test_remove_hostile(void **state)
{
    struct fx *f = *state;
    struct fuse_removemapping_one *e = calloc(DAX_REMOVE_MAX_ENTRIES + 1, sizeof(*e));
    struct fuse_removemapping_one one;

    assert_non_null(e);
    /* a mapping that must survive every refused request */
    assert_int_equal(fake_setup(&f->fe, f->w, 1, 0, 2 * MiB, 0, RD), 0);
    for (unsigned i = 0; i <= DAX_REMOVE_MAX_ENTRIES; i++)
        e[i] = (struct fuse_removemapping_one){ 0, 2 * MiB };
    refuse_remove(f, e, DAX_REMOVE_MAX_ENTRIES + 1, -EINVAL);
    refuse_remove(f, e, UINT32_MAX, -EINVAL);
    one = (struct fuse_removemapping_one){ WIN, 2 * MiB };
    refuse_remove(f, &one, 1, -EINVAL);
    one = (struct fuse_removemapping_one){ 2 * MiB, UINT64_MAX - MiB };
    refuse_remove(f, &one, 1, -EINVAL);
    one = (struct fuse_removemapping_one){ 0, 0 };
    refuse_remove(f, &one, 1, -EINVAL);
    one = (struct fuse_removemapping_one){ 100, 2 * MiB };
    refuse_remove(f, &one, 1, -EINVAL);
    one = (struct fuse_removemapping_one){ 0, 4097 };
    refuse_remove(f, &one, 1, -EINVAL);
    refuse_remove(f, NULL, 3, -EINVAL);
    /* one bad entry among good ones refuses the whole request up front */
    e[200] = (struct fuse_removemapping_one){ WIN - 4096, 8192 };
    refuse_remove(f, e, DAX_REMOVE_MAX_ENTRIES, -EINVAL);
    assert_non_null(fake_at(&f->fe, 0));
    assert_int_equal(fake_count(&f->fe), 1);
    assert_int_equal(f->fe.violations, 0);
    /* 256 valid entries are fine */
    e[200] = e[0];
    assert_int_equal(dax_removemapping(f->w, e, DAX_REMOVE_MAX_ENTRIES), 0);
    assert_int_equal(fake_count(&f->fe), 0);
    free(e);
}

/* A value a hostile guest might send: boundaries, near-misses, or noise. */
static uint64_t hostile(uint64_t *rng)
{
    static const uint64_t edge[] = {
        0, 1, 4095, 4096, 2 * MiB - 4096, 2 * MiB, 2 * MiB + 4096, WIN - 4096, WIN,
        WIN + 4096, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX - 4095,
        UINT64_MAX,
    };
    uint64_t x = fake_rand(rng);

    switch (x % 4) {
    case 0:
        return edge[(x >> 8) % (sizeof(edge) / sizeof(edge[0]))];
    case 1:
        return fake_rand(rng);
    default:
        return (fake_rand(rng) % (WIN / 4096 + 8)) * 4096; /* mostly valid */
    }
}

static void test_random_garbage(void **state)
{
    struct fx *f = *state;
    struct fuse_removemapping_one e[300];
    uint64_t rng = 0xbadc0ffee;
    unsigned accepted = 0, refused = 0;

    for (unsigned i = 0; i < 20000; i++) {
        unsigned calls = f->fe.map_calls + f->fe.unmap_calls;
        int c, r;

        if (fake_rand(&rng) % 2) {
            uint64_t mo = hostile(&rng), len = hostile(&rng), fo = hostile(&rng);
            uint64_t flags = fake_rand(&rng) % 8 ? fake_rand(&rng) % 4 : fake_rand(&rng);

            c = fake_check(f->w, mo, len, fo, flags);
            r = fake_setup(&f->fe, f->w, fake_rand(&rng) % 5, fo, len, mo, flags);
        } else {
            unsigned n = (unsigned)(fake_rand(&rng) % 8 ? fake_rand(&rng) % 4
                                                        : fake_rand(&rng) % 300);

            for (unsigned k = 0; k < n; k++)
                e[k] = (struct fuse_removemapping_one){ hostile(&rng), hostile(&rng) };
            c = dax_remove_check(f->w, e, n);
            r = dax_removemapping(f->w, e, n);
        }
        if (c < 0) {
            /* refused: same answer, and the frontend never heard of it */
            assert_int_equal(r, c);
            assert_int_equal(f->fe.map_calls + f->fe.unmap_calls, calls);
            refused++;
        } else {
            if (r != 0 && r != -ENOSPC)
                fail_msg("accepted request failed with %d", r);
            accepted++;
        }
    }
    if (f->fe.violations)
        fail_msg("frontend rule broken: %s", f->fe.last_violation);
    assert_int_equal(fake_matches_table(&f->fe, f->w), 0);
    assert_true(accepted > 1000);
    assert_true(refused > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_setup_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setup_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setup_file_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setup_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_garbage, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
