/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vufs-bench's statistics and report: medians, ratios, the JSON keys. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench_vb.h"

/* One variant's objects as a JSON array, as vufs-bench --json prints them. */
static void vb_report_json(const struct vb_opts *o, const struct vb_series *s, FILE *to,
                    const char *workload)
{
    bool first = true;
    fputs("[\n", to);
    vb_report_json_objects(o, s, to, workload, &first);
    fputs("\n]\n", to);
}

static void test_stats_odd_even(void **state)
{
    (void)state;
    double odd[] = { 3, 1, 2 };
    double med, min, max;
    vb_stats(odd, 3, &med, &min, &max);
    assert_true(med == 2 && min == 1 && max == 3);
    assert_true(odd[0] == 3 && odd[1] == 1 && odd[2] == 2); /* not sorted in place */
    double even[] = { 4, 1, 3, 2 };
    vb_stats(even, 4, &med, &min, &max);
    assert_true(med == 2.5 && min == 1 && max == 4);
    double one[] = { 7 };
    vb_stats(one, 1, &med, &min, &max);
    assert_true(med == 7 && min == 7 && max == 7);
}

static char *report(const struct vb_opts *o, const struct vb_series *s, bool json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    if (json)
        vb_report_json(o, s, f, "randread");
    else
        vb_report(o, s, f, "randread");
    fclose(f);
    return buf;
}

static void setup(struct vb_opts *o, struct vb_series *s, struct vb_run runs[2][3])
{
    memset(o, 0, sizeof(*o));
    o->nbackends = 2;
    o->backends[0] = (struct vb_backend){ .name = (char *)"vufsd", .cmd = (char *)"x" };
    o->backends[1] = (struct vb_backend){ .name = (char *)"ho\"st", .host = true };
    o->bs = 4096;
    o->queues = 4;
    o->depth = 16;
    o->runtime_s = 1;
    o->repeat = 3;
    static const double iops[2][3] = { { 100, 300, 200 }, { 50, 50, 80 } };
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < 3; i++)
            runs[b][i] = (struct vb_run){ .queues = b ? 1 : 4, .depth = b ? 64 : 16,
                                          .ops = 10, .iops = iops[b][i], .mib_s = 1,
                                          .p50_us = 2, .p99_us = 9, .cpu_s = b ? -1 : 0.5, .secs = 2,
                                          .rss_kib = b ? 0 : 1000 };
        s[b] = (struct vb_series){ .runs = runs[b], .nruns = 3 };
    }
}

static void test_json_keys_and_ratio(void **state)
{
    (void)state;
    struct vb_opts o;
    struct vb_series s[2];
    struct vb_run runs[2][3];
    setup(&o, s, runs);
    char *j = report(&o, s, true);
    assert_int_equal(j[0], '[');
    assert_string_equal(j + strlen(j) - 2, "]\n");
    static const char *const keys[] = { "\"backend\": ", "\"workload\": \"randread\"",
                                        "\"bs\": 4096", "\"queues\": 4", "\"depth\": 16",
                                        "\"iops\": 200.000", "\"mib_s\": ", "\"p50_us\": ",
                                        "\"p99_us\": ", "\"ratio\": 1.000",
                                        "\"queues\": 1, \"depth\": 64",
                                        "\"ratio\": 0.250", "\"iops_min\": 100.000",
                                        "\"iops_max\": 300.000", "\"cpu_us_per_op\": 50000.000",
                                        "\"cpu_pct\": 25.000", "\"cpu_pct\": -1.000",
                                        "\"ho\\\"st\"" };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        assert_non_null(strstr(j, keys[i]));
    assert_null(strstr(j, "dax_window"));
    free(j);

    o.dax_window = 1 << 20;
    o.dax_policy = "always";
    o.dax_guest = "lru";
    j = report(&o, s, true);
    assert_non_null(strstr(j, "\"dax_window\": 1048576"));
    assert_non_null(strstr(j, "\"dax_policy\": \"always\""));
    assert_non_null(strstr(j, "\"dax_guest\": \"lru\""));
    free(j);
}

static void test_table(void **state)
{
    (void)state;
    struct vb_opts o;
    struct vb_series s[2];
    struct vb_run runs[2][3];
    setup(&o, s, runs);
    runs[0][1].errors = 4;
    runs[0][1].first_error = -24;
    char *t = report(&o, s, false);
    assert_non_null(strstr(t, "vufsd"));
    assert_non_null(strstr(t, "0.25x"));
    assert_non_null(strstr(t, "cpu %"));
    assert_non_null(strstr(t, "|    25 |")); /* 0.5 s of CPU over 2 s */
    assert_non_null(strstr(t, "4 requests failed"));
    free(t);
}

static void test_cpu_lists(void **state)
{
    (void)state;
    cpu_set_t set;
    char buf[64];
    assert_int_equal(vb_parse_cpus("0-3,8,10-11", &set), 0);
    assert_int_equal(CPU_COUNT(&set), 7);
    assert_true(CPU_ISSET(8, &set) && !CPU_ISSET(9, &set));
    vb_format_cpus(&set, buf, sizeof(buf));
    assert_string_equal(buf, "0-3,8,10-11");
    assert_int_equal(vb_parse_cpus("5", &set), 0);
    vb_format_cpus(&set, buf, sizeof(buf));
    assert_string_equal(buf, "5");
    static const char *const bad[] = { "", "x", "3-1", "1,", "1-", "-1", "0-99999", "1:2" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(vb_parse_cpus(bad[i], &set), -EINVAL);
}

/* Pinned runs say so in the table, and the JSON carries both sets and what the
 * backend was seen allowed. */
static void test_pinned_report(void **state)
{
    (void)state;
    struct vb_opts o;
    struct vb_series s[2];
    struct vb_run runs[2][3];
    setup(&o, s, runs);
    char *t = report(&o, s, false);
    assert_non_null(strstr(t, "not pinned"));
    free(t);
    o.pin = true;
    assert_int_equal(vb_parse_cpus("1", &o.frontend_cpus), 0);
    assert_int_equal(vb_parse_cpus("0", &o.backend_cpus), 0);
    for (unsigned b = 0; b < 2; b++)
        for (unsigned i = 0; i < 3; i++)
            strcpy(runs[b][i].backend_cpus, "0");
    t = report(&o, s, false);
    assert_non_null(strstr(t, "pinned: frontend threads on CPUs 1, backends on CPUs 0"));
    assert_non_null(strstr(t, "allowed CPUs 0"));
    free(t);
    t = report(&o, s, true);
    assert_non_null(strstr(t, "\"frontend_cpus\": \"1\""));
    assert_non_null(strstr(t, "\"backend_cpus\": \"0\""));
    assert_non_null(strstr(t, "\"backend_cpus_seen\": \"0\""));
    assert_non_null(strstr(t, "\"create_dirs\": \"shared\""));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_odd_even),
        cmocka_unit_test(test_json_keys_and_ratio),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_cpu_lists),
        cmocka_unit_test(test_pinned_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
