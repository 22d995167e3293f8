/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Thousands of random SETUPMAPPING/REMOVEMAPPING/inode-removal/reset operations,
 * checked after every step against a reference model: one record per window page
 * of what the guest asked to see there (file, file offset, rights). The fake
 * frontend enforces the mainline rules (no overlapping map, exact unmaps), so any
 * plan the manager gets wrong fails the test, and the table must equal the
 * frontend's mappings at every step.
 *
 *  - exact:   512 KiB granularity, so a slot never needs more than 4 extents and
 *             every operation must succeed and match the model exactly;
 *  - pages:   4 KiB granularity; -ENOSPC is allowed, and then each page inside
 *             the request must show its old or its new content, and every page
 *             outside it must be unchanged;
 *  - faults:  the frontend fails 10% of calls; the table must still equal the
 *             frontend at every step, with no rule broken.
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

#define PAGE 4096u
#define NSLOTS 16u
#define WIN ((uint64_t)NSLOTS * DAX_RANGE_SIZE)
#define NPAGES (WIN / PAGE)

struct mpage {
    bool valid;
    bool writable;
    uint64_t key, foff;
};

struct model {
    struct fake_fe fe;
    struct dax_window *w;
    struct mpage *pg, *old;
    uint64_t rng;
    uint64_t gran;
    uint64_t last_mo, last_len, last_key, last_foff; /* for the guest's upgrade pattern */
    unsigned ok, enospc, other_err;
};

static void model_init(struct model *m, uint64_t gran, uint64_t seed)
{
    struct dax_config cfg = { .window_size = WIN, .policy = DAX_POLICY_AUTO,
                              .decay_interval_ns = UINT64_MAX };

    memset(m, 0, sizeof(*m));
    fake_init(&m->fe, WIN, PAGE);
    assert_int_equal(dax_window_new(&cfg, &fake_ops_batch, &m->fe, &m->w), 0);
    m->pg = calloc(NPAGES, sizeof(*m->pg));
    m->old = calloc(NPAGES, sizeof(*m->old));
    assert_non_null(m->pg);
    assert_non_null(m->old);
    m->rng = seed;
    m->gran = gran;
}

static void model_fini(struct model *m)
{
    dax_window_free(m->w);
    fake_fini(&m->fe);
    free(m->pg);
    free(m->old);
}

static uint64_t rnd(struct model *m, uint64_t n)
{
    return fake_rand(&m->rng) % n;
}

/* What the frontend shows at page p, in model terms. */
static struct mpage observed(const struct model *m, uint64_t p)
{
    const struct fake_map *f = fake_at(&m->fe, p * PAGE);

    if (!f)
        return (struct mpage){ 0 };
    return (struct mpage){ true, f->writable, f->key, f->foffset + (p * PAGE - f->moffset) };
}

/* Same file and offset; the frontend may grant more rights than asked, never fewer. */
static bool page_eq(struct mpage seen, struct mpage want)
{
    if (!want.valid)
        return !seen.valid;
    return seen.valid && seen.key == want.key && seen.foff == want.foff &&
           (seen.writable || !want.writable);
}

static void check_frontend(struct model *m)
{
    if (m->fe.violations)
        fail_msg("frontend rule broken: %s", m->fe.last_violation);
    assert_int_equal(fake_matches_table(&m->fe, m->w), 0);
}

static void check_exact(struct model *m)
{
    check_frontend(m);
    for (uint64_t p = 0; p < NPAGES; p++)
        if (!page_eq(observed(m, p), m->pg[p]))
            fail_msg("page %#llx differs from the model", (unsigned long long)p);
}

/*
 * After a failed request over pages [lo, hi): pages inside show old or new
 * content, pages outside are unchanged. Then the model adopts what is there.
 */
static void check_partial(struct model *m, uint64_t lo, uint64_t hi)
{
    check_frontend(m);
    for (uint64_t p = 0; p < NPAGES; p++) {
        struct mpage seen = observed(m, p);

        if (p >= lo && p < hi) {
            if (!page_eq(seen, m->old[p]) && !page_eq(seen, m->pg[p]))
                fail_msg("page %#llx neither old nor new", (unsigned long long)p);
        } else if (!page_eq(seen, m->old[p])) {
            fail_msg("page %#llx outside the request changed", (unsigned long long)p);
        }
        m->pg[p] = seen;
    }
}

static void random_range(struct model *m, uint64_t *mo, uint64_t *len)
{
    uint64_t units = WIN / m->gran;

    if (rnd(m, 3) == 0) {
        /* guest-like: whole slots */
        *mo = rnd(m, NSLOTS) * DAX_RANGE_SIZE;
        *len = DAX_RANGE_SIZE * (1 + rnd(m, 2));
    } else {
        *mo = rnd(m, units) * m->gran;
        *len = m->gran * (1 + rnd(m, m->gran >= DAX_RANGE_SIZE / 4 ? 6 : 40));
    }
    if (*len > WIN - *mo)
        *len = WIN - *mo;
}

static void op_setup(struct model *m, bool exact)
{
    uint64_t mo, len, key = 1 + rnd(m, 4), foff = rnd(m, 64) * m->gran;
    uint64_t flags = rnd(m, 3) == 0 ? 0 : rnd(m, 2) ? FUSE_SETUPMAPPING_FLAG_READ
                     : FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE;
    int r;

    random_range(m, &mo, &len);
    if (m->last_len && rnd(m, 4) == 0) {
        /* the guest writes where it read: same request, now read-write */
        mo = m->last_mo;
        len = m->last_len;
        key = m->last_key;
        foff = m->last_foff;
        flags = FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE;
    }
    m->last_mo = mo;
    m->last_len = len;
    m->last_key = key;
    m->last_foff = foff;
    memcpy(m->old, m->pg, NPAGES * sizeof(*m->pg));
    for (uint64_t p = mo / PAGE; p < (mo + len) / PAGE; p++)
        m->pg[p] = (struct mpage){ true, (flags & FUSE_SETUPMAPPING_FLAG_WRITE) != 0, key,
                                   foff + (p * PAGE - mo) };
    r = fake_setup(&m->fe, m->w, key, foff, len, mo, flags);
    if (r == 0) {
        m->ok++;
        check_exact(m);
        return;
    }
    if (exact || r != -ENOSPC)
        fail_msg("setupmapping failed: %d", r);
    m->enospc++;
    check_partial(m, mo / PAGE, (mo + len) / PAGE);
}

static void op_remove(struct model *m, bool exact)
{
    struct fuse_removemapping_one e[4];
    unsigned n = 1 + (unsigned)rnd(m, 4);
    uint64_t lo = NPAGES, hi = 0;
    int r;

    memcpy(m->old, m->pg, NPAGES * sizeof(*m->pg));
    for (unsigned i = 0; i < n; i++) {
        random_range(m, &e[i].moffset, &e[i].len);
        for (uint64_t p = e[i].moffset / PAGE; p < (e[i].moffset + e[i].len) / PAGE; p++)
            m->pg[p].valid = false;
        if (e[i].moffset / PAGE < lo)
            lo = e[i].moffset / PAGE;
        if ((e[i].moffset + e[i].len) / PAGE > hi)
            hi = (e[i].moffset + e[i].len) / PAGE;
    }
    r = dax_removemapping(m->w, e, n);
    if (r == 0) {
        m->ok++;
        check_exact(m);
        return;
    }
    if (exact || r != -ENOSPC)
        fail_msg("removemapping failed: %d", r);
    m->enospc++;
    /* entries may overlap and each may have stopped midway: only the hull is known */
    check_partial(m, lo, hi);
}

static void op_remove_inode(struct model *m)
{
    uint64_t key = 1 + rnd(m, 4);

    assert_int_equal(dax_remove_inode(m->w, key), 0);
    for (uint64_t p = 0; p < NPAGES; p++)
        if (m->pg[p].valid && m->pg[p].key == key)
            m->pg[p].valid = false;
    check_exact(m);
}

static void op_reset(struct model *m)
{
    dax_window_reset(m->w);
    /* the frontend drops its mappings on reset too */
    fake_fini(&m->fe);
    fake_init(&m->fe, WIN, PAGE);
    memset(m->pg, 0, NPAGES * sizeof(*m->pg));
    check_exact(m);
}

static void run(struct model *m, unsigned ops, bool exact)
{
    for (unsigned i = 0; i < ops; i++) {
        uint64_t x = rnd(m, 100);

        if (x < 55)
            op_setup(m, exact);
        else if (x < 95)
            op_remove(m, exact);
        else if (x < 99)
            op_remove_inode(m);
        else
            op_reset(m);
    }
}

static void test_model_exact(void **state)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        struct model m;
        struct dax_window_stats st;

        model_init(&m, DAX_RANGE_SIZE / 4, seed * 0x1234567);
        run(&m, 3000, true);
        dax_window_get_stats(m.w, &st);
        /* the run exercised splits, upgrades and ghosts, not just easy paths */
        assert_true(st.remaps > 50);
        assert_true(st.upgrades > 10);
        assert_true(st.ghost_hits > 10);
        assert_true(m.ok > 2500);
        model_fini(&m);
    }
}

static void test_model_pages(void **state)
{
    for (uint64_t seed = 1; seed <= 2; seed++) {
        struct model m;

        model_init(&m, PAGE * 16, seed * 0xfeedbeef);
        run(&m, 3000, false);
        assert_true(m.ok > 1500);
        model_fini(&m);
    }
}

static void test_model_faults(void **state)
{
    struct model m;
    unsigned errors = 0;

    model_init(&m, DAX_RANGE_SIZE / 4, 0xabcdef);
    m.fe.fail_pct = 10;
    for (unsigned i = 0; i < 3000; i++) {
        uint64_t mo, len;
        int r;

        random_range(&m, &mo, &len);
        if (rnd(&m, 2)) {
            r = fake_setup(&m.fe, m.w, 1 + rnd(&m, 3), rnd(&m, 32) * m.gran, len, mo,
                                 FUSE_SETUPMAPPING_FLAG_READ |
                                     (rnd(&m, 2) ? FUSE_SETUPMAPPING_FLAG_WRITE : 0));
        } else {
            struct fuse_removemapping_one e = { mo, len };

            r = dax_removemapping(m.w, &e, 1);
        }
        if (r == -EIO)
            errors++;
        else
            assert_int_equal(r, 0);
        check_frontend(&m);
    }
    assert_true(m.fe.injected > 100);
    assert_true(errors > 100);
    model_fini(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_exact),
        cmocka_unit_test(test_model_pages),
        cmocka_unit_test(test_model_faults),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
