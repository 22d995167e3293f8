/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The --xattrmap rule language: parsing and both mapping directions. */
#include "pt_test.h"
#include "pt_xattrmap_i.h"

static void expect_server(const struct pt_xattrmap *m, const char *client, const char *host)
{
    char *out = NULL;
    assert_int_equal(pt_xattrmap_to_server(m, client, &out), 0);
    assert_string_equal(out, host);
    free(out);
}

static void expect_server_err(const struct pt_xattrmap *m, const char *client, int err)
{
    char *out = NULL;
    assert_int_equal(pt_xattrmap_to_server(m, client, &out), err);
    assert_null(out);
}

static void expect_client(const struct pt_xattrmap *m, const char *host, const char *client)
{
    char *out = NULL;
    int ret = pt_xattrmap_to_client(m, host, &out);
    if (!client) {
        assert_int_equal(ret, 0);
        assert_null(out);
        return;
    }
    assert_int_equal(ret, 1);
    assert_string_equal(out, client);
    free(out);
}

static void test_prefix_all(void **state)
{
    struct pt_xattrmap m;

    assert_int_equal(pt_xattrmap_parse(":prefix:all::user.virtiofs.::bad:all:::", &m, NULL, 0), 0);
    expect_server(&m, "security.selinux", "user.virtiofs.security.selinux");
    expect_server(&m, "user.x", "user.virtiofs.user.x");
    expect_client(&m, "user.virtiofs.security.selinux", "security.selinux");
    expect_client(&m, "security.selinux", NULL); /* host's own: hidden */
    expect_client(&m, "user.virtiofs.", NULL);   /* nothing left: hidden */
    pt_xattrmap_free(&m);
}

static void test_four_rules_other_separator(void **state)
{
    struct pt_xattrmap m;
    const char *spec = " /prefix/all/trusted./user.virtiofs./\n"
                       " /bad/server//trusted./\n"
                       " /bad/client/user.virtiofs.//\n"
                       " /ok/all///\n";

    assert_int_equal(pt_xattrmap_parse(spec, &m, NULL, 0), 0);
    expect_server(&m, "trusted.overlay.opaque", "user.virtiofs.trusted.overlay.opaque");
    expect_server(&m, "user.foo", "user.foo");
    expect_server_err(&m, "user.virtiofs.trusted.x", -EPERM);
    expect_client(&m, "user.virtiofs.trusted.overlay.opaque", "trusted.overlay.opaque");
    expect_client(&m, "trusted.hostthing", NULL);
    expect_client(&m, "user.foo", "user.foo");
    pt_xattrmap_free(&m);
}

static void test_map_expansion(void **state)
{
    struct pt_xattrmap m;

    /* :map:key:prepend: = prefix all, hide unprefixed key on the host, refuse the prepend. */
    assert_int_equal(pt_xattrmap_parse(":map:trusted.:user.virtiofs.:", &m, NULL, 0), 0);
    assert_int_equal(m.n, 5); /* 4 expanded + the final catch-all */
    expect_server(&m, "trusted.a", "user.virtiofs.trusted.a");
    expect_server_err(&m, "user.virtiofs.trusted.a", -EPERM);
    expect_server(&m, "user.other", "user.other");
    expect_client(&m, "trusted.hostonly", NULL);
    expect_client(&m, "user.virtiofs.trusted.a", "trusted.a");
    expect_client(&m, "user.other", "user.other");
    pt_xattrmap_free(&m);

    /* Empty key: everything prefixed, nothing else passes. */
    assert_int_equal(pt_xattrmap_parse(":map::user.g.:", &m, NULL, 0), 0);
    expect_server(&m, "security.x", "user.g.security.x");
    expect_client(&m, "user.g.security.x", "security.x");
    expect_client(&m, "user.h", NULL);
    pt_xattrmap_free(&m);
}

static void test_unsupported_and_fallthrough(void **state)
{
    struct pt_xattrmap m;

    assert_int_equal(pt_xattrmap_parse("/unsupported/all/security.selinux/security.selinux/"
                                       "/ok/client/user.//",
                                       &m, NULL, 0),
                     0);
    expect_server_err(&m, "security.selinux", -EOPNOTSUPP);
    expect_client(&m, "security.selinux", NULL);
    expect_server(&m, "user.a", "user.a");
    /* No rule matched: the implicit final 'bad' refuses and hides. */
    expect_server_err(&m, "trusted.a", -EPERM);
    expect_client(&m, "user.a", NULL); /* the ok rule is client-only */
    pt_xattrmap_free(&m);
}

static void test_parse_errors(void **state)
{
    struct pt_xattrmap m;
    char err[128];
    const char *bad[] = {
        "",
        "   ",
        ":prefix:all:a",            /* missing fields */
        ":frob:all:a:b:",           /* unknown type */
        ":prefix:everyone:a:b:",    /* unknown scope */
        ":ok:all::",                /* missing final separator */
        ":map:a",
    };

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        err[0] = '\0';
        assert_int_equal(pt_xattrmap_parse(bad[k], &m, err, sizeof(err)), -EINVAL);
        assert_true(err[0] != '\0');
        assert_null(m.rules);
    }
    /* Through pt_fs_new: a bad map refuses to start. */
    struct pt_t *t = pt_t_new();
    t->cfg.xattrmap = (char *)":frob:all:a:b:";
    assert_int_equal(pt_t_start(t), -EINVAL);
    pt_t_down(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_all),
        cmocka_unit_test(test_four_rules_other_separator),
        cmocka_unit_test(test_map_expansion),
        cmocka_unit_test(test_unsupported_and_fallthrough),
        cmocka_unit_test(test_parse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
