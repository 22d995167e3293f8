/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The adaptive poll rules (daemon/qpoll.h), QEMU's AioContext rule: a hit keeps
 * the window, a miss a longer window would have caught doubles it (from 4 us)
 * up to the cap, a gap longer than the cap halves it down to 0, from where the
 * first short gap brings it back; 0 without polling. And the free-CPU rule:
 * /proc/loadavg's running count parsed, polling only while it leaves a CPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "qpoll.h"

#define US 1000u
#define CAP (32 * US)
#define QUIET UINT64_MAX

static void test_off(void **state)
{
    (void)state;
    assert_int_equal(vqt_poll_next(0, 0, 0), 0);
    assert_int_equal(vqt_poll_next(0, 0, 5 * US), 0);
    assert_int_equal(vqt_poll_next(40 * US, 0, 0), 0); /* cap 0 wins over any window */
}

static void test_hit_keeps(void **state)
{
    (void)state;
    /* The sweet spot: a request within the window leaves the window alone, so a
     * steady stream of short gaps does not push it (and its cost) to the cap. */
    assert_int_equal(vqt_poll_next(8 * US, CAP, 0), 8 * US);
    assert_int_equal(vqt_poll_next(8 * US, CAP, 5 * US), 8 * US);
    assert_int_equal(vqt_poll_next(8 * US, CAP, 8 * US), 8 * US);
    assert_int_equal(vqt_poll_next(CAP, CAP, CAP), CAP);
    /* A window above the cap (the cap was lowered) is clamped first. */
    assert_int_equal(vqt_poll_next(4 * CAP, CAP, 0), CAP);
}

static void test_short_miss_grows(void **state)
{
    (void)state;
    /* From 0 (not polling): the first gap within the cap starts it at 4 us. */
    assert_int_equal(vqt_poll_next(0, CAP, 0), VQT_POLL_START_NS);
    assert_int_equal(vqt_poll_next(0, CAP, 10 * US), VQT_POLL_START_NS);
    /* Slept, and the request came within the cap: a longer window would have caught it. */
    assert_int_equal(vqt_poll_next(4 * US, CAP, 5 * US), 8 * US);
    assert_int_equal(vqt_poll_next(8 * US, CAP, 20 * US), 16 * US);
    assert_int_equal(vqt_poll_next(16 * US, CAP, CAP), CAP);
    assert_int_equal(vqt_poll_next(24 * US, CAP, 30 * US), CAP); /* never past the cap */
    /* A cap below the start value: the window is the cap. */
    assert_int_equal(vqt_poll_next(0, 2 * US, 1 * US), 2 * US);
    /* Overflow: a huge cap does not wrap the doubling. */
    assert_int_equal(vqt_poll_next(0x90000000u, UINT32_MAX, 0x9fffffffu), UINT32_MAX);
}

static void test_quiet_shrinks_to_zero(void **state)
{
    (void)state;
    assert_int_equal(vqt_poll_next(CAP, CAP, CAP + 1), CAP / 2);
    assert_int_equal(vqt_poll_next(CAP, CAP, QUIET), CAP / 2);
    /* Below the start value the window is off rather than a pointless short spin. */
    assert_int_equal(vqt_poll_next(VQT_POLL_START_NS, CAP, QUIET), 0);
    assert_int_equal(vqt_poll_next(2 * VQT_POLL_START_NS - 1, CAP, QUIET), 0);
    assert_int_equal(vqt_poll_next(0, CAP, QUIET), 0);
    /* A quiet thread stops polling after a few gaps and spends < 2 x cap doing so. */
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
    assert_true(gaps <= 5);
}

static void test_settles_on_the_gap(void **state)
{
    (void)state;
    /* Gaps of 5 us: the window climbs 0, 4, 8 and stays at 8 (the smallest step
     * that covers them), not at the cap. */
    uint32_t w = 0;
    for (int i = 0; i < 20; i++)
        w = vqt_poll_next(w, CAP, 5 * US);
    assert_int_equal(w, 8 * US);
    /* Bursts of short gaps, then long pauses: back within a few requests. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2; i++)
            w = vqt_poll_next(w, CAP, QUIET);
        assert_true(w < 8 * US);
        unsigned steps = 0;
        while (w < 8 * US) {
            w = vqt_poll_next(w, CAP, 6 * US);
            steps++;
        }
        assert_true(steps <= 3);
        assert_int_equal(w, 8 * US);
    }
}

static void test_parse_running(void **state)
{
    (void)state;
    unsigned r = 0;
    const char *t = "0.41 0.30 0.25 3/412 9876\n";
    assert_true(vqt_poll_parse_running(t, strlen(t), &r));
    assert_int_equal(r, 3);
    t = "12.00 9.71 5.02 17/1204 123456\n";
    assert_true(vqt_poll_parse_running(t, strlen(t), &r));
    assert_int_equal(r, 17);
    /* Only len bytes count: a buffer cut before the '/' is no answer. */
    assert_false(vqt_poll_parse_running(t, 17, &r));
    const char *bad[] = {"", "0.41 0.30 0.25", "0.41 0.30 0.25 /412", "0.41 0.30 0.25 x/4",
                         "0.41 0.30 0.25 3", "0.41 0.30 0.25 99999999999/4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(vqt_poll_parse_running(bad[i], strlen(bad[i]), &r));
}

static void test_cpu_free(void **state)
{
    (void)state;
    /* The poller counts itself: on 2 CPUs, itself and one more (the guest's
     * halt-polling vCPU) leave each a CPU; a third running task would wait. */
    assert_true(vqt_poll_cpu_free(1, 2));
    assert_true(vqt_poll_cpu_free(2, 2));
    assert_false(vqt_poll_cpu_free(3, 2));
    assert_false(vqt_poll_cpu_free(9, 2));
    assert_true(vqt_poll_cpu_free(16, 16));
    assert_false(vqt_poll_cpu_free(17, 16));
    assert_true(vqt_poll_cpu_free(100, 0)); /* CPUs not known: allowed */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_hit_keeps),
        cmocka_unit_test(test_short_miss_grows),
        cmocka_unit_test(test_quiet_shrinks_to_zero),
        cmocka_unit_test(test_settles_on_the_gap),
        cmocka_unit_test(test_parse_running),
        cmocka_unit_test(test_cpu_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
