/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Unit tests: the bounds-checked cursor, name validation and directory buffers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fll_i.h"

static unsigned char src[64];

/* src[0..63] = 0..63, cut into iovecs of 5, 0 (empty), 10, 1, 48 bytes. */
static unsigned make_iov(struct iovec *iov)
{
    static const size_t lens[] = {5, 0, 10, 1, 48};
    size_t off = 0;
    for (unsigned i = 0; i < 5; i++) {
        iov[i].iov_base = src + off;
        iov[i].iov_len = lens[i];
        off += lens[i];
    }
    for (unsigned i = 0; i < sizeof(src); i++)
        src[i] = (unsigned char)i;
    return 5;
}

static void copy_across_boundaries(void **state)
{
    struct iovec iov[5];
    struct fll_cursor c;
    unsigned char buf[64];
    fll_cursor_init(&c, iov, make_iov(iov), SIZE_MAX);
    assert_int_equal(fll_cursor_left(&c), 64);

    assert_true(fll_cursor_copy(&c, buf, 3));
    assert_memory_equal(buf, src, 3);
    /* 3..20 spans the 5-byte, the empty, the 10-byte and the 1-byte iovecs */
    assert_true(fll_cursor_copy(&c, buf, 17));
    assert_memory_equal(buf, src + 3, 17);
    assert_int_equal(fll_cursor_left(&c), 44);
    assert_true(fll_cursor_skip(&c, 4));
    assert_true(fll_cursor_copy(&c, buf, 40));
    assert_memory_equal(buf, src + 24, 40);
    assert_int_equal(fll_cursor_left(&c), 0);
    assert_true(fll_cursor_copy(&c, buf, 0));
    assert_false(fll_cursor_copy(&c, buf, 1));
}

static void short_read_leaves_cursor(void **state)
{
    struct iovec iov[5];
    struct fll_cursor c;
    unsigned char buf[64];
    fll_cursor_init(&c, iov, make_iov(iov), SIZE_MAX);
    assert_true(fll_cursor_skip(&c, 60));
    memset(buf, 0x5a, sizeof(buf));
    assert_false(fll_cursor_copy(&c, buf, 5));
    assert_int_equal(buf[0], 0x5a); /* nothing copied */
    assert_false(fll_cursor_skip(&c, 5));
    assert_int_equal(fll_cursor_left(&c), 4);
    assert_true(fll_cursor_copy(&c, buf, 4));
    assert_memory_equal(buf, src + 60, 4);
}

static void limit_bounds_everything(void **state)
{
    struct iovec iov[5];
    struct fll_cursor c;
    unsigned char buf[64];
    fll_cursor_init(&c, iov, make_iov(iov), 12);
    assert_int_equal(fll_cursor_left(&c), 12);
    assert_false(fll_cursor_copy(&c, buf, 13));
    assert_true(fll_cursor_copy(&c, buf, 12));
    assert_false(fll_cursor_skip(&c, 1));

    /* A limit above the total is the total. */
    fll_cursor_init(&c, iov, 5, 1000);
    assert_int_equal(fll_cursor_left(&c), 64);

    /* No iovecs at all. */
    fll_cursor_init(&c, NULL, 0, SIZE_MAX);
    assert_int_equal(fll_cursor_left(&c), 0);
    assert_false(fll_cursor_copy(&c, buf, 1));
}

static void sum_saturates(void **state)
{
    struct iovec iov[2] = {
        {src, SIZE_MAX - 10},
        {src, 100},
    };
    struct fll_cursor c;
    fll_cursor_init(&c, iov, 2, SIZE_MAX);
    assert_int_equal(fll_cursor_left(&c), SIZE_MAX);
}

static void iov_describes_without_copy(void **state)
{
    struct iovec iov[5];
    struct iovec out[8];
    struct fll_cursor c;
    fll_cursor_init(&c, iov, make_iov(iov), SIZE_MAX);
    assert_true(fll_cursor_skip(&c, 2));
    int n = fll_cursor_iov(&c, out, 8, 15); /* 3 of iov0, 10 of iov2, 1 of iov3, 1 of iov4 */
    assert_int_equal(n, 4);
    assert_ptr_equal(out[0].iov_base, src + 2);
    assert_int_equal(out[0].iov_len, 3);
    assert_ptr_equal(out[1].iov_base, src + 5);
    assert_int_equal(out[1].iov_len, 10);
    assert_int_equal(out[2].iov_len, 1);
    assert_ptr_equal(out[3].iov_base, src + 16);
    assert_int_equal(out[3].iov_len, 1);
    assert_int_equal(fll_cursor_left(&c), 64 - 17);

    /* Too many pieces: -E2BIG and the cursor does not move. */
    fll_cursor_init(&c, iov, 5, SIZE_MAX);
    assert_int_equal(fll_cursor_iov(&c, out, 2, 20), -E2BIG);
    assert_int_equal(fll_cursor_left(&c), 64);
    /* Too short: -EINVAL. */
    assert_int_equal(fll_cursor_iov(&c, out, 8, 65), -EINVAL);
    assert_int_equal(fll_cursor_left(&c), 64);
    /* Zero bytes: zero iovecs. */
    assert_int_equal(fll_cursor_iov(&c, out, 8, 0), 0);
}

static void put_writes_across_boundaries(void **state)
{
    unsigned char a[3], b[0 + 1], d[10];
    struct iovec iov[3] = {{a, 3}, {b, 0}, {d, 10}};
    unsigned char msg[13];
    struct fll_cursor c;
    for (unsigned i = 0; i < sizeof(msg); i++)
        msg[i] = (unsigned char)(0xa0 + i);
    fll_cursor_init(&c, iov, 3, SIZE_MAX);
    assert_false(fll_cursor_put(&c, msg, 14));
    assert_true(fll_cursor_put(&c, msg, 13));
    assert_memory_equal(a, msg, 3);
    assert_memory_equal(d, msg + 3, 10);
    assert_false(fll_cursor_put(&c, msg, 1));
}

static void str_needs_nul_within_bounds(void **state)
{
    char s1[] = "hel";
    char s2[] = "lo\0rest";
    struct iovec iov[2] = {{s1, 3}, {s2, 7}};
    struct fll_cursor c;
    char dst[16];

    fll_cursor_init(&c, iov, 2, SIZE_MAX);
    assert_int_equal(fll_cursor_cstr(&c, dst, sizeof(dst), -ENAMETOOLONG), 0);
    assert_string_equal(dst, "hello");
    assert_int_equal(fll_cursor_left(&c), 4); /* "rest" */
    /* "rest" has no NUL: refused, cursor unchanged. */
    assert_true(fll_cursor_cstr(&c, dst, sizeof(dst), -ENAMETOOLONG) < 0);
    assert_int_equal(fll_cursor_left(&c), 4);

    /* max too small for "hello\0" (needs 6). */
    fll_cursor_init(&c, iov, 2, SIZE_MAX);
    assert_int_equal(fll_cursor_cstr(&c, dst, 6 - 1, -ENAMETOOLONG), -ENAMETOOLONG);
    assert_int_equal(fll_cursor_cstr(&c, dst, 6, -ENAMETOOLONG), 0);

    /* The NUL beyond the limit does not count. */
    fll_cursor_init(&c, iov, 2, 5);
    assert_true(fll_cursor_cstr(&c, dst, sizeof(dst), -ENAMETOOLONG) < 0);
}

static void names(void **state)
{
    assert_true(fll_name_valid("a"));
    assert_true(fll_name_valid("..."));
    assert_true(fll_name_valid(".hidden"));
    assert_true(fll_name_valid("a..b"));
    assert_false(fll_name_valid(""));
    assert_false(fll_name_valid("."));
    assert_false(fll_name_valid(".."));
    assert_false(fll_name_valid("a/b"));
    assert_false(fll_name_valid("/"));
    assert_false(fll_name_valid("../x"));
    assert_false(fll_name_valid(NULL));
}

static void dirbuf_layout(void **state)
{
    unsigned char buf[256];
    struct fll_dirbuf db = {(char *)buf, sizeof(buf), 0, false};
    memset(buf, 0xcc, sizeof(buf));

    assert_true(fll_dirbuf_add(&db, "abc", 11, 4, 1, NULL));
    /* 24 bytes of header + 3 of name, padded to 32 */
    assert_int_equal(db.len, 32);
    struct fuse_dirent d;
    memcpy(&d, buf, sizeof(d));
    assert_int_equal(d.ino, 11);
    assert_int_equal(d.off, 1);
    assert_int_equal(d.namelen, 3);
    assert_int_equal(d.type, 4);
    assert_memory_equal(buf + FUSE_NAME_OFFSET, "abc", 3);
    for (unsigned i = FUSE_NAME_OFFSET + 3; i < 32; i++)
        assert_int_equal(buf[i], 0);

    /* exactly 8 bytes of name: no padding */
    assert_true(fll_dirbuf_add(&db, "12345678", 12, 8, 2, NULL));
    assert_int_equal(db.len, 32 + 32);
    assert_int_equal(buf[64], 0xcc);

    /* Does not fit: nothing added. */
    struct fll_dirbuf small = {(char *)buf, 31, 0, false};
    assert_false(fll_dirbuf_add(&small, "abc", 1, 1, 1, NULL));
    assert_int_equal(small.len, 0);
    assert_false(fll_dirbuf_add(&db, "", 1, 1, 1, NULL));
}

static void dirbuf_plus_layout(void **state)
{
    unsigned char buf[512];
    struct fll_dirbuf db = {(char *)buf, sizeof(buf), 0, true};
    struct fuse_entry_out e = {.nodeid = 5, .generation = 6};
    memset(buf, 0xcc, sizeof(buf));

    assert_true(fll_dirbuf_add(&db, "xy", 5, 8, 9, &e));
    size_t rec = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + 2);
    assert_int_equal(db.len, rec);
    struct fuse_direntplus dp;
    memcpy(&dp, buf, sizeof(dp));
    assert_int_equal(dp.entry_out.nodeid, 5);
    assert_int_equal(dp.entry_out.generation, 6);
    assert_int_equal(dp.dirent.ino, 5);
    assert_int_equal(dp.dirent.off, 9);
    assert_int_equal(dp.dirent.namelen, 2);
    assert_memory_equal(buf + FUSE_NAME_OFFSET_DIRENTPLUS, "xy", 2);
    for (size_t i = FUSE_NAME_OFFSET_DIRENTPLUS + 2; i < rec; i++)
        assert_int_equal(buf[i], 0);

    /* No entry: a zeroed entry_out (nodeid 0 = no lookup done). */
    assert_true(fll_dirbuf_add(&db, "z", 7, 8, 10, NULL));
    memcpy(&dp, buf + rec, sizeof(dp));
    assert_int_equal(dp.entry_out.nodeid, 0);
    assert_int_equal(dp.entry_out.attr.ino, 0);
    assert_int_equal(dp.dirent.ino, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copy_across_boundaries),
        cmocka_unit_test(short_read_leaves_cursor),
        cmocka_unit_test(limit_bounds_everything),
        cmocka_unit_test(sum_saturates),
        cmocka_unit_test(iov_describes_without_copy),
        cmocka_unit_test(put_writes_across_boundaries),
        cmocka_unit_test(str_needs_nul_within_bounds),
        cmocka_unit_test(names),
        cmocka_unit_test(dirbuf_layout),
        cmocka_unit_test(dirbuf_plus_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
