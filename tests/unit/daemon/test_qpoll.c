/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The adaptive poll window (daemon/qpoll.h): grows on hits and on misses a
 * longer window would have caught, shrinks to 0 when the queue goes quiet,
 * comes back from 0, never exceeds the cap, and is 0 without --poll-us.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "qpoll.h"

#define US 1000u
#define CAP (50 * US)
#define QUIET UINT64_MAX

static void test_off(void **state)
{
    (void)state;
    assert_int_equal(vqt_poll_next(0, 0, 0), 0);
    assert_int_equal(vqt_poll_next(0, 0, 5 * US), 0);
    assert_int_equal(vqt_poll_next(40 * US, 0, 0), 0); /* cap 0 wins over any window */
}

static void test_hits_grow_to_cap(void **state)
{
    (void)state;
    /* Hits double the window, from at least VQT_POLL_MIN_NS, and stop at the cap. */
    assert_int_equal(vqt_poll_next(0, CAP, 0), VQT_POLL_MIN_NS);
    assert_int_equal(vqt_poll_next(VQT_POLL_MIN_NS, CAP, 0), 2 * VQT_POLL_MIN_NS);
    assert_int_equal(vqt_poll_next(8 * US, CAP, 3 * US), 16 * US);
    assert_int_equal(vqt_poll_next(32 * US, CAP, 3 * US), CAP);
    assert_int_equal(vqt_poll_next(CAP, CAP, 0), CAP);
    /* A window above the cap (the cap was lowered) is clamped. */
    assert_int_equal(vqt_poll_next(4 * CAP, CAP, 0), CAP);
    /* Overflow: a huge cap does not wrap the doubling. */
    assert_int_equal(vqt_poll_next(0x90000000u, UINT32_MAX, 0), UINT32_MAX);
}

static void test_short_miss_grows(void **state)
{
    (void)state;
    /* Slept, and the request came within the cap: a longer window would have caught it. */
    assert_int_equal(vqt_poll_next(4 * US, CAP, 20 * US), 8 * US);
    assert_int_equal(vqt_poll_next(4 * US, CAP, CAP), 8 * US);
    /* From 0 (not polling): the first short gap brings polling back. */
    assert_int_equal(vqt_poll_next(0, CAP, 10 * US), VQT_POLL_MIN_NS);
}

static void test_quiet_shrinks_to_zero(void **state)
{
    (void)state;
    assert_int_equal(vqt_poll_next(CAP, CAP, CAP + 1), CAP / 2);
    assert_int_equal(vqt_poll_next(CAP, CAP, QUIET), CAP / 2);
    /* Below the minimum the window is off rather than a pointless short spin. */
    assert_int_equal(vqt_poll_next(VQT_POLL_MIN_NS, CAP, QUIET), 0);
    assert_int_equal(vqt_poll_next(VQT_POLL_MIN_NS + 1, CAP, QUIET), 0);
    assert_int_equal(vqt_poll_next(0, CAP, QUIET), 0);
    /* A quiet queue stops polling after a few gaps and spends < 2 x cap doing so. */
    uint32_t w = CAP;
    uint64_t spent = 0;
    unsigned gaps = 0;
    while (w) {
        spent += w;
        w = vqt_poll_next(w, CAP, QUIET);
        gaps++;
        assert_true(gaps < 32);
    }
    assert_true(spent < 2ull * CAP);
    assert_true(gaps <= 6);
}

static void test_alternating(void **state)
{
    (void)state;
    /* A queue that sees bursts of short gaps then long pauses returns to the cap
     * after each pause within a handful of requests. */
    uint32_t w = CAP;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++)
            w = vqt_poll_next(w, CAP, QUIET);
        assert_true(w < CAP);
        unsigned steps = 0;
        while (w < CAP) {
            w = vqt_poll_next(w, CAP, 8 * US);
            steps++;
        }
        assert_true(steps <= 8);
        assert_int_equal(w, CAP);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_hits_grow_to_cap),
        cmocka_unit_test(test_short_miss_grows),
        cmocka_unit_test(test_quiet_shrinks_to_zero),
        cmocka_unit_test(test_alternating),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
