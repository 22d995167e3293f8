/* SPDX-License-Identifier: GPL-2.0-or-later */
/* --uid-map/--gid-map: the ":INSIDE:OUTSIDE:COUNT:" ranges. (Entering the
 * namespace is exercised on the real daemon by the creds integration suite.) */
#include "sb_test.h"
#include "sandbox_i.h"

static void test_idmap_parse_good(void **state)
{
    struct sb_idmap_line l[SB_IDMAP_MAX];
    unsigned n = 99;
    (void)state;

    assert_int_equal(sb_idmap_parse(NULL, l, SB_IDMAP_MAX, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(sb_idmap_parse(":0:100000:65536:", l, SB_IDMAP_MAX, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(l[0].inside, 0);
    assert_int_equal(l[0].outside, 100000);
    assert_int_equal(l[0].count, 65536);
    /* Repeated options arrive joined with spaces. */
    assert_int_equal(sb_idmap_parse(":0:1000:1: :1:100000:65535:", l, SB_IDMAP_MAX, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(l[1].inside, 1);
    assert_int_equal(l[1].count, 65535);
    assert_int_equal(sb_idmap_parse(":0:0:4294967295:", l, SB_IDMAP_MAX, &n), 0);
    assert_int_equal(l[0].count, 4294967295u);
}

static void test_idmap_parse_bad(void **state)
{
    struct sb_idmap_line l[SB_IDMAP_MAX];
    unsigned n;
    (void)state;

    const char *bad[] = { "0:1:1", ":0:1:1", "0:1:1:", ":0:1:", ":0:1:1:1:", ":a:1:1:",
                          ":0:-1:1:", ":0:1:0:", ":4294967296:0:1:", ":1:0:4294967295:",
                          ":0:4294967295:2:", "::1:1:", ":0:1:1:x", " x" };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        if (sb_idmap_parse(bad[k], l, SB_IDMAP_MAX, &n) != -EINVAL)
            fail_msg("'%s' accepted", bad[k]);
    /* An empty map, like NULL, is no range at all (the option parser refuses an
     * empty --uid-map before it gets here). */
    n = 7;
    assert_int_equal(sb_idmap_parse("", l, SB_IDMAP_MAX, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(sb_idmap_parse("  ", l, SB_IDMAP_MAX, &n), 0);
    assert_int_equal(n, 0);
    /* More ranges than the kernel's 340-line map is never needed; 16 is the cap. */
    char many[1024] = "";
    for (int k = 0; k < SB_IDMAP_MAX + 1; k++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), ":%d:%d:1: ", k, k);
    assert_int_equal(sb_idmap_parse(many, l, SB_IDMAP_MAX, &n), -E2BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idmap_parse_good),
        cmocka_unit_test(test_idmap_parse_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
