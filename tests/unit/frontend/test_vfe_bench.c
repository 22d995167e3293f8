/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The benchmark loop's latency histogram. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vfe.h"

static void test_buckets_monotonic_and_tight(void **state)
{
    unsigned prev = 0;
    for (uint64_t v = 0; v < (1ull << 40); v = v < 64 ? v + 1 : v + v / 7 + 1) {
        unsigned b = vfe_hist_bucket(v);
        assert_true(b >= prev);
        assert_true(b < VFE_HIST_BUCKETS);
        prev = b;
        /* The bucket's low edge is at most v and within 1/16 of it. */
        uint64_t lo = vfe_hist_bucket_low(b);
        assert_true(lo <= v);
        assert_true(v - lo <= v / 16);
        assert_int_equal(vfe_hist_bucket(lo), b);
    }
    /* Small values are exact, the largest lands in the last bucket. */
    for (uint64_t v = 0; v < 16; v++)
        assert_int_equal(vfe_hist_bucket_low(vfe_hist_bucket(v)), v);
    assert_int_equal(vfe_hist_bucket(UINT64_MAX), VFE_HIST_BUCKETS - 1);
}

static void test_percentiles(void **state)
{
    struct vfe_hist *h = calloc(1, sizeof(*h));
    assert_int_equal(vfe_hist_percentile(h, 50), 0);
    /* 1..1000 us */
    for (uint64_t i = 1; i <= 1000; i++)
        vfe_hist_add(h, i * 1000);
    assert_int_equal(h->total, 1000);
    assert_int_equal(h->min, 1000);
    assert_int_equal(h->max, 1000000);
    assert_int_equal(h->sum, 1000ull * 1001 / 2 * 1000);
    uint64_t p50 = vfe_hist_percentile(h, 50);
    uint64_t p99 = vfe_hist_percentile(h, 99);
    assert_true(p50 <= 500000 && p50 >= 500000 - 500000 / 16);
    assert_true(p99 <= 990000 && p99 >= 990000 - 990000 / 16);
    uint64_t p100 = vfe_hist_percentile(h, 100);
    assert_true(p100 <= h->max && p100 >= h->max - h->max / 16);
    assert_true(vfe_hist_percentile(h, 0.0001) >= h->min);

    /* Merging two halves gives the same answers as one histogram. */
    struct vfe_hist *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    for (uint64_t i = 1; i <= 1000; i++)
        vfe_hist_add(i % 2 ? a : b, i * 1000);
    vfe_hist_merge(a, b);
    assert_int_equal(a->total, h->total);
    assert_int_equal(a->min, h->min);
    assert_int_equal(a->max, h->max);
    assert_int_equal(a->sum, h->sum);
    assert_memory_equal(a->count, h->count, sizeof(h->count));
    struct vfe_hist *empty = calloc(1, sizeof(*empty));
    vfe_hist_merge(a, empty);
    assert_int_equal(a->min, h->min);
    free(empty);
    free(a);
    free(b);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets_monotonic_and_tight),
        cmocka_unit_test(test_percentiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
