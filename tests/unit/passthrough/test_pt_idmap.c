/* SPDX-License-Identifier: GPL-2.0-or-later */
/* --translate-uid/--translate-gid: the rule grammar and both directions. */
#include "pt_test.h"
#include "pt_idmap_i.h"

static uint32_t host_of(const struct pt_idmap *m, uint32_t guest)
{
    uint32_t h = 0xdeadbeef;
    assert_int_equal(pt_idmap_to_host(m, guest, &h), 0);
    return h;
}

static void test_map_both_ways(void **state)
{
    struct pt_idmap m = {0};
    char err[256];
    (void)state;

    assert_int_equal(pt_idmap_add(&m, "map:1000:5000:10", err, sizeof(err)), 0);
    assert_int_equal(host_of(&m, 1000), 5000);
    assert_int_equal(host_of(&m, 1009), 5009);
    /* Outside the range: identity, both ways. */
    assert_int_equal(host_of(&m, 1010), 1010);
    assert_int_equal(host_of(&m, 999), 999);
    assert_int_equal(host_of(&m, 0), 0);
    assert_int_equal(pt_idmap_to_guest(&m, 5000), 1000);
    assert_int_equal(pt_idmap_to_guest(&m, 5009), 1009);
    assert_int_equal(pt_idmap_to_guest(&m, 5010), 5010);
    assert_int_equal(pt_idmap_to_guest(&m, 1000), 1000);
    pt_idmap_free(&m);
}

static void test_one_way_and_squash(void **state)
{
    struct pt_idmap m = {0};
    (void)state;

    assert_int_equal(pt_idmap_add(&m, "guest:0:100000:65536", NULL, 0), 0);
    assert_int_equal(pt_idmap_add(&m, "host:100000:0:65536", NULL, 0), 0);
    assert_int_equal(host_of(&m, 0), 100000);
    assert_int_equal(host_of(&m, 65535), 165535);
    assert_int_equal(pt_idmap_to_guest(&m, 165535), 65535);
    pt_idmap_free(&m);

    /* Rootless style: every guest id onto one host user, that user shown as root. */
    assert_int_equal(pt_idmap_add(&m, "squash-guest:0:1000:4294967295", NULL, 0), 0);
    assert_int_equal(pt_idmap_add(&m, "squash-host:1000:0:1", NULL, 0), 0);
    assert_int_equal(host_of(&m, 0), 1000);
    assert_int_equal(host_of(&m, 4294967294u), 1000);
    assert_int_equal(pt_idmap_to_guest(&m, 1000), 0);
    assert_int_equal(pt_idmap_to_guest(&m, 1001), 1001);
    /* A squash-host range of several host ids onto one guest id. */
    assert_int_equal(pt_idmap_add(&m, "squash-host:2000:65534:100", NULL, 0), 0);
    assert_int_equal(pt_idmap_to_guest(&m, 2099), 65534);
    assert_int_equal(pt_idmap_to_guest(&m, 2100), 2100);
    pt_idmap_free(&m);
}

static void test_forbid(void **state)
{
    struct pt_idmap m = {0};
    uint32_t h = 7;
    (void)state;

    assert_int_equal(pt_idmap_add(&m, "forbid-guest:0:1000", NULL, 0), 0);
    assert_int_equal(pt_idmap_add(&m, "map:1000:1000:1", NULL, 0), 0);
    assert_int_equal(pt_idmap_add(&m, "forbid-guest:1001:4294966294", NULL, 0), 0);
    assert_int_equal(pt_idmap_to_host(&m, 0, &h), -EPERM);
    assert_int_equal(pt_idmap_to_host(&m, 999, &h), -EPERM);
    assert_int_equal(pt_idmap_to_host(&m, 1001, &h), -EPERM);
    assert_int_equal(pt_idmap_to_host(&m, 4294967294u, &h), -EPERM);
    assert_int_equal(h, 7); /* untouched on failure */
    assert_int_equal(host_of(&m, 1000), 1000);
    /* forbid-guest says nothing about host ids. */
    assert_int_equal(pt_idmap_to_guest(&m, 0), 0);
    pt_idmap_free(&m);
}

static void test_grammar(void **state)
{
    struct pt_idmap m = {0};
    char err[256];
    (void)state;

    /* Any case, any separator but '-' and '_', the same one throughout. */
    assert_int_equal(pt_idmap_add(&m, "MAP/10/20/1", err, sizeof(err)), 0);
    assert_int_equal(host_of(&m, 10), 20);
    assert_int_equal(pt_idmap_add(&m, "Squash-Guest,30,40,2", err, sizeof(err)), 0);
    assert_int_equal(host_of(&m, 31), 40);
    pt_idmap_free(&m);

    const char *bad[] = {
        "",                       /* nothing */
        "map",                    /* no fields */
        "map:1:2",                /* too few */
        "map:1:2:3:4",            /* too many */
        "forbid-guest:1:2:3",     /* forbid takes two */
        "squash-guest:1:2",
        "map:1:2:3:",             /* trailing separator: an empty field */
        "map:1:x:3",
        "map:-1:2:3",
        "map:1:2:+3",
        "map:4294967296:0:1",     /* past u32 */
        "map:1:2:0",              /* empty range */
        "map:4294967295:0:2",     /* runs past the last id */
        "map:0:4294967295:2",     /* the target too */
        "guest:1/2/3",            /* mixed separators */
        "mapp:1:2:3",             /* unknown type */
        "uid:1:2:3",
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        err[0] = '\0';
        if (pt_idmap_add(&m, bad[k], err, sizeof(err)) != -EINVAL)
            fail_msg("'%s' accepted", bad[k]);
        assert_true(err[0] != '\0');
        assert_int_equal(m.to_host.n, 0);
        assert_int_equal(m.to_guest.n, 0);
    }
    /* squash-guest's target is one id: any value, no range check on it. */
    assert_int_equal(pt_idmap_add(&m, "squash-guest:0:4294967295:10", err, sizeof(err)), 0);
    pt_idmap_free(&m);
}

static void test_overlap(void **state)
{
    struct pt_idmap m = {0};
    char err[256];
    (void)state;

    assert_int_equal(pt_idmap_add(&m, "map:1000:5000:10", err, sizeof(err)), 0);
    /* The guest range intersects. */
    assert_int_equal(pt_idmap_add(&m, "guest:1009:1:1", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "intersects"));
    assert_int_equal(pt_idmap_add(&m, "forbid-guest:0:1001", err, sizeof(err)), -EINVAL);
    /* The host range intersects: map is all or nothing (its guest half is not kept). */
    assert_int_equal(pt_idmap_add(&m, "map:2000:5005:1", err, sizeof(err)), -EINVAL);
    assert_int_equal(host_of(&m, 2000), 2000);
    assert_int_equal(m.to_host.n, 1);
    /* Adjacent ranges are fine; the other direction is a separate table. */
    assert_int_equal(pt_idmap_add(&m, "guest:1010:1:5", err, sizeof(err)), 0);
    assert_int_equal(pt_idmap_add(&m, "forbid-guest:0:1000", err, sizeof(err)), 0);
    assert_int_equal(pt_idmap_add(&m, "host:1000:7:1", err, sizeof(err)), 0);
    assert_int_equal(pt_idmap_to_guest(&m, 1000), 7);
    pt_idmap_free(&m);

    /* Repeated options arrive joined with spaces. */
    assert_int_equal(pt_idmap_parse(&m, "map:1000:5000:10 squash-host:0:65534:1", err,
                                    sizeof(err)),
                     0);
    assert_int_equal(pt_idmap_to_guest(&m, 0), 65534);
    assert_int_equal(pt_idmap_to_guest(&m, 5001), 1001);
    pt_idmap_free(&m);
    assert_int_equal(pt_idmap_parse(&m, "map:1:1:1 map:1:2:1", err, sizeof(err)), -EINVAL);
    pt_idmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_both_ways),
        cmocka_unit_test(test_one_way_and_squash),
        cmocka_unit_test(test_forbid),
        cmocka_unit_test(test_grammar),
        cmocka_unit_test(test_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
