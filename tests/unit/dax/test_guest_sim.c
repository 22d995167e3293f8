/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The per-file policy against a model of the Linux guest's DAX client, through the
 * real window manager: does 'auto' avoid the slow column of the published table?
 *
 * Guest model (after fs/fuse/dax.c, single-threaded): the window is cut into 2 MiB
 * ranges; free ranges are a FIFO; busy ranges are kept in setup order (use does
 * not reorder them); when fewer than 20% are free a background reclaim frees the
 * oldest, 10 per run, until 20% are free; an access that finds no free range first
 * reclaims the same file's range with the lowest file offset. Files marked DAX by
 * the daemon (FUSE_ATTR_DAX) go through the window, the others through FUSE
 * READ/WRITE. The guest asks for attributes again every EVAL accesses (inode
 * evicted and looked up again); when a file loses DAX its ranges are removed.
 *
 * Cost model, calibrated on the published fio numbers (shared docs, section 5):
 * a 4 KiB access that hits a mapped range costs 5.8 us (173k IOPS), one through
 * FUSE READ/WRITE 51.5 us (19.4k IOPS), one that misses 258 us (a 2 MiB reclaim, a
 * REMOVEMAPPING and a SETUPMAPPING; with it the model predicts 4.9k/6.4k/17.8k IOPS
 * for the 1G/2G/4G windows over 4 GiB where the table shows 4.8k/6.5k/14.9k).
 * This is a model check of the decision logic, not a benchmark: the measured
 * sweep is vufs-bench's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dax.h"
#include "fake_frontend.h"

#define MiB (UINT64_C(1) << 20)
#define NFILES 4
#define FILE_SIZE (64 * MiB)
#define FILE_RANGES (FILE_SIZE / DAX_RANGE_SIZE)
#define WS ((uint64_t)NFILES * FILE_SIZE)
#define ACCESSES 100000
#define EVAL 5000
#define COST_HIT 5.8
#define COST_PLAIN 51.5
#define COST_MISS 258.0
#define RECLAIM_THRESHOLD_PCT 20
#define RECLAIM_CHUNK 10

struct guest {
    struct fake_fe fe;
    struct dax_window *w;
    unsigned nr;                 /* ranges */
    unsigned *free_q, free_head, free_n;
    /* busy list in setup order: head = oldest */
    unsigned *prev, *next, busy_head, busy_tail;
    int *owner_file;             /* per range: file or -1 */
    uint64_t *owner_ridx;
    bool *writable;
    int map[NFILES][FILE_RANGES]; /* file range -> window range, -1 */
    bool dax[NFILES];
    double cost;
    uint64_t rng;
    unsigned misses, hits, plain;
};

#define NONE UINT32_MAX

static void busy_unlink(struct guest *g, unsigned r)
{
    if (g->prev[r] != NONE)
        g->next[g->prev[r]] = g->next[r];
    else
        g->busy_head = g->next[r];
    if (g->next[r] != NONE)
        g->prev[g->next[r]] = g->prev[r];
    else
        g->busy_tail = g->prev[r];
}

static void busy_append(struct guest *g, unsigned r)
{
    g->prev[r] = g->busy_tail;
    g->next[r] = NONE;
    if (g->busy_tail != NONE)
        g->next[g->busy_tail] = r;
    else
        g->busy_head = r;
    g->busy_tail = r;
}

static void free_push(struct guest *g, unsigned r)
{
    g->free_q[(g->free_head + g->free_n++) % g->nr] = r;
}

static unsigned free_pop(struct guest *g)
{
    unsigned r = g->free_q[g->free_head];

    g->free_head = (g->free_head + 1) % g->nr;
    g->free_n--;
    return r;
}

/* REMOVEMAPPING of one range, which goes back to the free FIFO. */
static void guest_remove(struct guest *g, unsigned r)
{
    struct fuse_removemapping_one e = { (uint64_t)r * DAX_RANGE_SIZE, DAX_RANGE_SIZE };

    assert_int_equal(dax_removemapping(g->w, &e, 1), 0);
    busy_unlink(g, r);
    g->map[g->owner_file[r]][g->owner_ridx[r]] = -1;
    g->owner_file[r] = -1;
    free_push(g, r);
}

static void background_reclaim(struct guest *g, bool force)
{
    unsigned thresh = g->nr * RECLAIM_THRESHOLD_PCT / 100;

    if (thresh < 1)
        thresh = 1;
    while ((force || g->free_n < thresh) && g->busy_head != NONE) {
        for (unsigned i = 0; i < RECLAIM_CHUNK && g->busy_head != NONE; i++)
            guest_remove(g, g->busy_head);
        force = false;
    }
}

static unsigned alloc_range(struct guest *g, int f)
{
    if (g->free_n == 0) {
        /* inline: the same file's range with the lowest file offset */
        for (unsigned i = 0; i < FILE_RANGES; i++)
            if (g->map[f][i] >= 0) {
                guest_remove(g, (unsigned)g->map[f][i]);
                break;
            }
        if (g->free_n == 0)
            background_reclaim(g, true); /* waits for the worker */
    }
    return free_pop(g);
}

static void guest_access(struct guest *g, int f, uint64_t off, bool write)
{
    uint64_t ridx = off / DAX_RANGE_SIZE;
    uint64_t flags = FUSE_SETUPMAPPING_FLAG_READ | (write ? FUSE_SETUPMAPPING_FLAG_WRITE : 0);
    int r;

    if (!g->dax[f]) {
        g->plain++;
        g->cost += COST_PLAIN;
        return;
    }
    r = g->map[f][ridx];
    if (r >= 0 && (!write || g->writable[r])) {
        g->hits++;
        g->cost += COST_HIT;
        return;
    }
    if (r < 0) {
        r = (int)alloc_range(g, f);
        g->owner_file[r] = f;
        g->owner_ridx[r] = ridx;
        g->map[f][ridx] = r;
        busy_append(g, (unsigned)r);
    }
    assert_int_equal(fake_setup(&g->fe, g->w, (uint64_t)f + 1, ridx * DAX_RANGE_SIZE,
                                      DAX_RANGE_SIZE, (uint64_t)r * DAX_RANGE_SIZE, flags), 0);
    g->writable[r] = write;
    g->misses++;
    g->cost += COST_MISS;
    if (g->free_n < g->nr * RECLAIM_THRESHOLD_PCT / 100)
        background_reclaim(g, false);
}

/* The guest looks the files up again; a file that lost DAX drops its ranges. */
static void guest_lookup(struct guest *g)
{
    for (int f = 0; f < NFILES; f++) {
        bool on = dax_policy_attr_dax(g->w, (uint64_t)f + 1, FILE_SIZE, true);

        if (g->dax[f] && !on)
            for (unsigned i = 0; i < FILE_RANGES; i++)
                if (g->map[f][i] >= 0)
                    guest_remove(g, (unsigned)g->map[f][i]);
        g->dax[f] = on;
    }
}

/* IOPS of one run (1e6 / mean cost in us). */
static double run(enum dax_policy pol, uint64_t window, bool write, uint64_t seed)
{
    struct dax_config cfg = { .window_size = window, .policy = pol,
                              .decay_interval_ns = UINT64_MAX };
    struct guest *g = calloc(1, sizeof(*g));
    double iops;

    assert_non_null(g);
    fake_init(&g->fe, window, 4096);
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &g->fe, &g->w), 0);
    g->nr = (unsigned)(window / DAX_RANGE_SIZE);
    g->free_q = calloc(g->nr, sizeof(unsigned));
    g->prev = calloc(g->nr, sizeof(unsigned));
    g->next = calloc(g->nr, sizeof(unsigned));
    g->owner_file = calloc(g->nr, sizeof(int));
    g->owner_ridx = calloc(g->nr, sizeof(uint64_t));
    g->writable = calloc(g->nr, sizeof(bool));
    g->busy_head = g->busy_tail = NONE;
    g->rng = seed;
    for (unsigned r = 0; r < g->nr; r++) {
        g->owner_file[r] = -1;
        free_push(g, r);
    }
    memset(g->map, -1, sizeof(g->map));
    for (unsigned i = 0; i < ACCESSES; i++) {
        int f = (int)(fake_rand(&g->rng) % NFILES);
        uint64_t off = fake_rand(&g->rng) % (FILE_SIZE / 4096) * 4096;

        if (i % EVAL == 0)
            guest_lookup(g);
        guest_access(g, f, off, write);
    }
    assert_int_equal(g->fe.violations, 0);
    assert_int_equal(fake_matches_table(&g->fe, g->w), 0);
    iops = 1e6 / (g->cost / ACCESSES);
    dax_window_free(g->w);
    fake_fini(&g->fe);
    free(g->free_q);
    free(g->prev);
    free(g->next);
    free(g->owner_file);
    free(g->owner_ridx);
    free(g->writable);
    free(g);
    return iops;
}

static void sweep(bool write)
{
    /* window / working set: 1/8, 1/4, 1/2, 1, 2 */
    static const unsigned num[] = { 1, 1, 1, 1, 2 }, den[] = { 8, 4, 2, 1, 1 };

    printf("model, rand%s 4 KiB, 4 x %llu MiB files, kIOPS\n", write ? "write" : "read",
           (unsigned long long)(FILE_SIZE / MiB));
    printf("window/ws   never  always    auto\n");
    for (unsigned i = 0; i < sizeof(num) / sizeof(num[0]); i++) {
        uint64_t window = WS * num[i] / den[i];
        double never = run(DAX_POLICY_NEVER, window, write, 42 + i);
        double always = run(DAX_POLICY_ALWAYS, window, write, 42 + i);
        double autop = run(DAX_POLICY_AUTO, window, write, 42 + i);
        double best = never > always ? never : always;

        printf("%5u/%-3u %7.1f %7.1f %7.1f\n", num[i], den[i], never / 1e3, always / 1e3,
               autop / 1e3);
        if (autop < 0.95 * best)
            fail_msg("auto %.0f < 0.95 x max(never %.0f, always %.0f) at %u/%u", autop, never,
                     always, num[i], den[i]);
        if (num[i] == 1 && den[i] == 4) {
            assert_true(autop >= never);
            /* the model reproduces the problem: always is far below never here */
            assert_true(always < 0.5 * never);
        }
    }
}

static void test_sim_randread(void **state)
{
    sweep(false);
}

static void test_sim_randwrite(void **state)
{
    sweep(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_randread),
        cmocka_unit_test(test_sim_randwrite),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
