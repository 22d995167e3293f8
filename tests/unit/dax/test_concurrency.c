/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Several queue threads at once: random SETUPMAPPING/REMOVEMAPPING (whole slots and
 * sub-slot extents, and the whole ranges a Linux guest maps), inode removals,
 * statistics dumps and the odd device reset, on a small window, with a frontend
 * whose calls sleep so that requests really overlap. With store mappings also
 * write-backs (FSYNC, the flusher), the daemon's own I/O around the window,
 * attribute replies and host writes to the files, which make merges. The fake frontend fails the
 * test on any overlapping map, inexact unmap or two calls in flight on one slot;
 * at the end the table must equal the frontend and every slot must be idle.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dax_i.h"
#include "fake_frontend.h"

#define NTHREADS 4
#define OPS 1500
#define NSLOTS 8u
#define WIN ((uint64_t)NSLOTS * DAX_RANGE_SIZE)
#define GRAN (DAX_RANGE_SIZE / 4)

struct shared {
    struct fake_fe fe;
    struct dax_window *w;
    bool with_reset;
    bool store;
};

struct worker {
    struct shared *sh;
    unsigned id;
    uint64_t rng;
    unsigned ok, resets_seen, bad;
    int bad_rc;
};

/*
 * With resets, the frontend refuses calls of an operation claimed before the last
 * reset, as the daemon's per-connection backend channel does. Checked under the
 * fake's lock, which the resetting thread holds across the reset.
 */
static bool stale(void *arg, uint64_t moffset)
{
    struct dax_window *w = arg;
    bool r;

    pthread_mutex_lock(&w->lock);
    r = w->slots[moffset / DAX_RANGE_SIZE].claim_epoch != w->epoch;
    pthread_mutex_unlock(&w->lock);
    return r;
}

static uint64_t rnd(struct worker *k, uint64_t n)
{
    return fake_rand(&k->rng) % n;
}

static bool rc_ok(struct worker *k, int r)
{
    if (r == 0) {
        k->ok++;
        return true;
    }
    /* a reset voids calls in flight: the manager reports it, the frontend refuses */
    if (k->sh->with_reset && (r == -ECONNRESET || r == -EIO)) {
        k->resets_seen++;
        return true;
    }
    k->bad++;
    k->bad_rc = r;
    return false;
}

/* The file side of store mappings: one of the calls around the window. */
static void store_op(struct worker *k, uint64_t key, uint64_t which)
{
    struct shared *sh = k->sh;
    struct dax_file_stamp now;
    int fd = fake_fd(&sh->fe, key);
    uint8_t b = (uint8_t)rnd(k, 256);

    if (fd < 0) {
        k->bad++;
        return;
    }
    switch (which) {
    case 0: /* a host process writes, then an attribute reply shows it */
        if (pwrite(fd, &b, 1, (off_t)rnd(k, 16 * GRAN)) != 1 || dax_stamp_fd(fd, &now) < 0)
            k->bad++;
        else
            dax_inode_attr(sh->w, key, &now);
        break;
    case 1: /* FUSE_WRITE */
        if (dax_inode_before_io(sh->w, key, 0, GRAN) < 0 || pwrite(fd, &b, 1, 7) != 1)
            k->bad++;
        dax_inode_after_change(sh->w, key, 0, GRAN);
        break;
    default: /* FSYNC, and the flusher */
        rc_ok(k, dax_inode_sync(sh->w, key));
        rc_ok(k, dax_window_sync(sh->w, DAX_SYNC_WRITEBACK | DAX_SYNC_CHECK));
        break;
    }
}

static void *work(void *arg)
{
    struct worker *k = arg;
    struct shared *sh = k->sh;

    for (unsigned i = 0; i < OPS; i++) {
        uint64_t x = rnd(k, 100), key = 1 + rnd(k, 6);
        uint64_t mo = rnd(k, WIN / GRAN) * GRAN;
        uint64_t len = rnd(k, 2) ? DAX_RANGE_SIZE - mo % DAX_RANGE_SIZE : GRAN;

        if (x < 40) {
            uint64_t flags = FUSE_SETUPMAPPING_FLAG_READ |
                             (rnd(k, 2) ? FUSE_SETUPMAPPING_FLAG_WRITE : 0);

            rc_ok(k, fake_setup(&sh->fe, sh->w, key, rnd(k, 16) * GRAN, len, mo, flags));
        } else if (x < 70) {
            struct fuse_removemapping_one e[2] = { { mo, len },
                                                   { rnd(k, NSLOTS) * DAX_RANGE_SIZE,
                                                     DAX_RANGE_SIZE } };

            rc_ok(k, dax_removemapping(sh->w, e, 1 + (unsigned)rnd(k, 2)));
        } else if (x < 90) {
            /* what a Linux guest sends: one whole 2 MiB range of a file */
            uint64_t flags = FUSE_SETUPMAPPING_FLAG_READ |
                             (rnd(k, 2) ? FUSE_SETUPMAPPING_FLAG_WRITE : 0);

            rc_ok(k, fake_setup(&sh->fe, sh->w, key, rnd(k, 32) * DAX_RANGE_SIZE, DAX_RANGE_SIZE,
                                      rnd(k, NSLOTS) * DAX_RANGE_SIZE, flags));
        } else if (sh->store && x < 93) {
            store_op(k, key, x - 90);
        } else if (x < 96) {
            rc_ok(k, dax_remove_inode(sh->w, key));
        } else if (x < 99) {
            FILE *f = fopen("/dev/null", "w");

            if (!f || dax_stats_json(sh->w, f) != 0)
                k->bad++;
            if (f)
                fclose(f);
            (void)dax_policy_attr_dax(sh->w, key, 8 * DAX_RANGE_SIZE, true);
        } else if (sh->with_reset && k->id == 0) {
            /* device reset: the frontend drops its maps, the manager forgets them */
            pthread_mutex_lock(&sh->fe.lock);
            dax_window_reset(sh->w);
            fake_reset_locked(&sh->fe);
            pthread_mutex_unlock(&sh->fe.lock);
        }
    }
    return NULL;
}

static void run(bool with_reset, bool batch, bool store)
{
    struct dax_config cfg = { .window_size = WIN, .policy = DAX_POLICY_AUTO };
    struct shared sh = { .with_reset = with_reset, .store = store };
    struct worker k[NTHREADS];
    pthread_t th[NTHREADS];
    struct dax_window_stats st;
    unsigned ok = 0;

    fake_init(&sh.fe, WIN, 4096);
    sh.fe.sleep_us = 20;
    assert_int_equal(dax_window_new(&cfg, batch ? &fake_ops_batch : &fake_ops, &sh.fe, &sh.w), 0);
    if (with_reset) {
        sh.fe.stale = stale;
        sh.fe.stale_arg = sh.w;
    }
    if (store)
        fake_use_store(&sh.fe, sh.w);
    for (unsigned i = 0; i < NTHREADS; i++) {
        k[i] = (struct worker){ .sh = &sh, .id = i, .rng = 0x51ed27 * (i + 1) };
        assert_int_equal(pthread_create(&th[i], NULL, work, &k[i]), 0);
    }
    for (unsigned i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        if (k[i].bad)
            fail_msg("thread %u: %u bad results (last rc %d)", i, k[i].bad, k[i].bad_rc);
        ok += k[i].ok;
    }
    if (sh.fe.violations)
        fail_msg("frontend rule broken: %s", sh.fe.last_violation);
    assert_true(ok > NTHREADS * OPS / 2);
    assert_int_equal(fake_matches_table(&sh.fe, sh.w), 0);
    for (uint32_t s = 0; s < sh.w->nslots; s++) {
        assert_false(dax_slot_busy(&sh.w->slots[s]));
        dax_slot_check_locked(sh.w, s);
    }
    dax_window_get_stats(sh.w, &st);
    assert_int_equal(st.extents, fake_count(&sh.fe));
    assert_true(st.maps > 100);
    assert_true(st.unmaps > 0 && st.remaps > 0);
    if (store) {
        assert_true(st.store_maps > 100 && st.merges > 0);
        assert_int_equal(st.writeback_errors, 0);
    }
    assert_int_equal(fake_leaked_fds(&sh.fe, sh.w), 0);
    dax_window_free(sh.w);
    fake_fini(&sh.fe);
}

static void test_threads(void **state)
{
    run(false, false, false);
}

static void test_threads_store(void **state)
{
    run(false, false, true);
}

static void test_threads_store_with_resets(void **state)
{
    run(true, true, true);
}

static void test_threads_batched_unmaps(void **state)
{
    run(false, true, false);
}

static void test_threads_with_resets(void **state)
{
    run(true, true, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_threads_batched_unmaps),
        cmocka_unit_test(test_threads_with_resets),
        cmocka_unit_test(test_threads_store),
        cmocka_unit_test(test_threads_store_with_resets),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
