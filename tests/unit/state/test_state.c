/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The saved state's container (state/state.c): what the writer produces
 * reads back, and every way a damaged or hostile state can be wrong is
 * refused with a reason: magic, version, flags, length, fd count, CRC,
 * section order, unknown sections, sections past the end, trailing bytes.
 * The fd list: each fd taken once, the rest closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "state.h"

/* A small valid state: sections 1 (u32 7) and 4 (u64 + bytes). */
static void build(struct vst_writer *w, uint32_t flags, uint32_t nfds)
{
    vst_writer_init(w);
    vst_section_begin(w, VST_SEC_ORIGIN, 1);
    vst_put_u32(w, 7);
    vst_section_end(w);
    vst_section_begin(w, VST_SEC_FS_INODES, 3);
    vst_put_u64(w, 0x1122334455667788ull);
    vst_put_bytes(w, "abc", 3);
    vst_section_end(w);
    assert_int_equal(vst_writer_finish(w, flags, nfds), 0);
}

/* Re-seals a buffer changed by a test, so only the change itself is judged. */
static void reseal(uint8_t *b, size_t len)
{
    uint32_t crc = vst_crc32c(0, b + VST_HEADER_SIZE, len - VST_HEADER_SIZE);
    for (int i = 0; i < 4; i++)
        b[32 + i] = (uint8_t)(crc >> (8 * i));
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_roundtrip(void **state)
{
    struct vst_writer w;
    struct vst_state st;
    struct vst_err err = {""};
    struct vst_reader r;
    uint32_t ver, u32;
    uint64_t u64;
    char abc[3];

    build(&w, VST_F_FDS, 3);
    assert_int_equal(vst_open(w.buf, w.len, &st, &err), 0);
    assert_int_equal(st.flags, VST_F_FDS);
    assert_int_equal(st.nfds, 3);
    assert_int_equal(st.nsections, 2);
    assert_true(vst_section(&st, VST_SEC_ORIGIN, &r, &ver));
    assert_int_equal(ver, 1);
    assert_true(vst_get_u32(&r, &u32));
    assert_int_equal(u32, 7);
    assert_true(vst_reader_done(&r));
    assert_true(vst_section(&st, VST_SEC_FS_INODES, &r, &ver));
    assert_int_equal(ver, 3);
    assert_true(vst_get_u64(&r, &u64));
    assert_true(u64 == 0x1122334455667788ull);
    assert_false(vst_reader_done(&r));
    assert_true(vst_get_bytes(&r, abc, 3));
    assert_memory_equal(abc, "abc", 3);
    assert_true(vst_reader_done(&r));
    /* Reading past the end fails, zeroes, and stays failed. */
    assert_false(vst_get_u32(&r, &u32));
    assert_int_equal(u32, 0);
    assert_false(vst_reader_done(&r));
    assert_false(vst_section(&st, VST_SEC_DAX, &r, &ver));
    vst_writer_free(&w);
}

/* Every byte is little-endian and the header says what the docs say. */
static void test_layout(void **state)
{
    struct vst_writer w;
    build(&w, 0, 0);
    assert_memory_equal(w.buf, "VUFSDST", 8);
    assert_int_equal(w.buf[8], VST_VERSION);
    assert_int_equal(w.buf[16], w.len & 0xff);
    assert_int_equal(w.buf[28], 2); /* nsections */
    /* First section header: type 1, version 1, length 4, then the payload. */
    const uint8_t *s = w.buf + VST_HEADER_SIZE;
    static const uint8_t want[] = {1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0};
    assert_memory_equal(s, want, sizeof(want));
    vst_writer_free(&w);
}

static void expect_refused(uint8_t *b, size_t len, const char *why_part)
{
    struct vst_state st;
    struct vst_err err = {""};
    int ret = vst_open(b, len, &st, &err);
    assert_true(ret < 0);
    if (!strstr(err.msg, why_part))
        fail_msg("refused for '%s', expected '%s'", err.msg, why_part);
}

static void test_refusals(void **state)
{
    struct vst_writer w;
    build(&w, 0, 0);
    uint8_t *b = malloc(w.len + 64);
    size_t len = w.len;
    assert_non_null(b);

#define FRESH() memcpy(b, w.buf, w.len)
    FRESH();
    expect_refused(b, VST_HEADER_SIZE - 1, "shorter than its header");
    FRESH();
    b[0] = 'X';
    expect_refused(b, len, "bad magic");
    FRESH();
    put_le(b + 8, 2, 4);
    expect_refused(b, len, "format version 2");
    FRESH();
    put_le(b + 12, 0x80, 4);
    expect_refused(b, len, "unknown flags");
    FRESH();
    expect_refused(b, len - 1, "header says");
    FRESH();
    put_le(b + 16, len + 1, 8);
    expect_refused(b, len, "header says");
    FRESH();
    put_le(b + 24, 2, 4); /* fds without VST_F_FDS */
    expect_refused(b, len, "without VST_F_FDS");
    FRESH();
    put_le(b + 12, VST_F_FDS, 4);
    put_le(b + 24, VST_MAX_FDS + 1, 4);
    expect_refused(b, len, "fds announced");
    FRESH();
    put_le(b + 28, VST_MAX_SECTIONS + 1, 4);
    expect_refused(b, len, "sections");
    FRESH();
    put_le(b + 36, 1, 4);
    expect_refused(b, len, "reserved");
    /* Corruption anywhere after the header: the checksum says so. */
    for (size_t off = VST_HEADER_SIZE; off < len; off++) {
        FRESH();
        b[off] ^= 0x40;
        expect_refused(b, len, "checksum");
    }
    /* Sealed again, structural lies are still caught. */
    size_t s2 = VST_HEADER_SIZE + 16 + 4; /* the second section's header */
    FRESH();
    put_le(b + s2, VST_SEC_ORIGIN, 4); /* repeated type */
    reseal(b, len);
    expect_refused(b, len, "out of order or repeated");
    FRESH();
    put_le(b + s2 + 8, 1000, 8); /* runs past the end */
    reseal(b, len);
    expect_refused(b, len, "runs past the end");
    FRESH();
    put_le(b + s2 + 8, UINT64_MAX, 8); /* length that would wrap an offset */
    reseal(b, len);
    expect_refused(b, len, "runs past the end");
    FRESH();
    put_le(b + s2 + 8, 10, 8); /* shorter: bytes left after the last section */
    reseal(b, len);
    expect_refused(b, len, "after the last section");
    FRESH();
    put_le(b + s2, 77, 4); /* a type nobody knows, not optional */
    reseal(b, len);
    expect_refused(b, len, "unknown section type");
    FRESH();
    put_le(b + 28, 3, 4); /* one more section than there is */
    reseal(b, len);
    expect_refused(b, len, "past the end");
    /* An unknown optional section is skipped. */
    FRESH();
    put_le(b + s2, VST_SEC_OPTIONAL | 77, 4);
    reseal(b, len);
    struct vst_state st;
    struct vst_err err = {""};
    assert_int_equal(vst_open(b, len, &st, &err), 0);
    assert_int_equal(st.nsections, 1);
#undef FRESH
    free(b);
    vst_writer_free(&w);
}

static void test_bool_strict(void **state)
{
    uint8_t two = 2;
    struct vst_reader r = {.p = &two, .left = 1};
    bool v = true;
    assert_false(vst_get_bool(&r, &v));
    assert_false(v);
    assert_false(vst_reader_done(&r));
}

/* The writer refuses sections out of order (a programming error, never a
 * state that reads back differently). */
static void test_writer_order(void **state)
{
    struct vst_writer w;
    vst_writer_init(&w);
    vst_section_begin(&w, VST_SEC_FS, 1);
    vst_section_end(&w);
    vst_section_begin(&w, VST_SEC_ORIGIN, 1);
    vst_section_end(&w);
    assert_int_equal(vst_writer_finish(&w, 0, 0), -ENOMEM);
    vst_writer_free(&w);
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static void test_fds(void **state)
{
    int p[2], q[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(q), 0);
    int recv[4] = {p[0], p[1], q[0], q[1]};
    struct vst_fds f;
    assert_int_equal(vst_fds_adopt(&f, recv, 4), 0);
    int fd;
    assert_int_equal(vst_fd_take(&f, 1, &fd), 0);
    assert_int_equal(fd, p[1]);
    assert_int_equal(vst_fd_take(&f, 1, &fd), -EBADF); /* once only */
    assert_int_equal(fd, -1);
    assert_int_equal(vst_fd_take(&f, 4, &fd), -EBADF);
    assert_int_equal(vst_fd_take(&f, VST_NO_FD, &fd), -EBADF);
    assert_int_equal(vst_fd_take(NULL, 0, &fd), -EBADF);
    vst_fds_free(&f);
    /* Taken: the taker's; not taken: closed with the set. */
    assert_true(fd_open(p[1]));
    assert_false(fd_open(p[0]));
    assert_false(fd_open(q[0]));
    assert_false(fd_open(q[1]));
    close(p[1]);

    /* Saving: indices in order, borrowed (nothing closed); none without a set. */
    uint32_t idx;
    assert_int_equal(vst_fd_add(NULL, 0, &idx), 0);
    assert_int_equal(idx, VST_NO_FD);
    vst_fds_init(&f);
    assert_int_equal(vst_fd_add(&f, 0, &idx), 0);
    assert_int_equal(idx, 0);
    assert_int_equal(vst_fd_add(&f, -1, &idx), 0);
    assert_int_equal(idx, VST_NO_FD);
    assert_int_equal(vst_fd_add(&f, 2, &idx), 0);
    assert_int_equal(idx, 1);
    vst_fds_free(&f);
    assert_true(fd_open(0) && fd_open(2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),   cmocka_unit_test(test_layout),
        cmocka_unit_test(test_refusals),    cmocka_unit_test(test_bool_strict),
        cmocka_unit_test(test_writer_order), cmocka_unit_test(test_fds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
