/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests: security contexts of new inodes (FUSE_SECURITY_CTX), in both
 * wire forms (7.38+ request extensions, the trailing argument of 7.36/7.37),
 * good and hostile, through the recording fake filesystem. Requests are cut
 * into 3-byte iovecs so every field crosses a buffer boundary.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fll_fake.h"
#include "fll_i.h"

#define MAXW      (128u * 1024u)
#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)

static struct fllt_msg m;
static unsigned char blob[FLL_SECCTX_VALUE_MAX + 1024];

static struct fllt_harness *ready(uint32_t minor, bool fs_wants)
{
    struct fllt_harness *h = fllt_new(MAXW);
    h->fs.want = fs_wants ? FUSE_SECURITY_CTX : 0;
    assert_int_equal(fllt_init(h, minor, FUSE_SECURITY_CTX), 0);
    fllt_fake_reset(&h->fs);
    return h;
}

/* A secctx blob as Linux builds it: header, then nr entries of (fuse_secctx, name, value, pad). */
static size_t make_blob(unsigned char *b, uint32_t nr, const char *name, const void *value,
                        uint32_t vsize)
{
    size_t len = sizeof(struct fuse_secctx_header);
    for (uint32_t k = 0; k < nr; k++) {
        struct fuse_secctx one = {.size = vsize};
        size_t nl = strlen(name) + 1;
        size_t e = ALIGN8(sizeof(one) + nl + vsize);
        memset(b + len, 0, e);
        memcpy(b + len, &one, sizeof(one));
        memcpy(b + len + sizeof(one), name, nl);
        memcpy(b + len + sizeof(one) + nl, value, vsize);
        len += e;
    }
    struct fuse_secctx_header hdr = {.size = (uint32_t)len, .nr_secctx = nr};
    memcpy(b, &hdr, sizeof(hdr));
    return len;
}

/* MKDIR "d" with ext (a multiple of 8 bytes) as the request extensions. */
static void mkdir_ext(struct fllt_harness *h, const void *ext, size_t extlen)
{
    struct fuse_mkdir_in mi = {.mode = 0755};
    fllt_msg_init(&m, FUSE_MKDIR, 1);
    fllt_msg_put(&m, &mi, sizeof(mi));
    fllt_msg_str(&m, "d");
    fllt_msg_put(&m, ext, extlen);
    ((struct fuse_in_header *)m.b)->total_extlen = (uint16_t)(extlen / 8);
    fllt_msg_end(&m);
    /* 3-byte pieces, or larger ones where 3 would pass FAKE_IOV_MAX. */
    fllt_send(h, &m, m.len / 3 < FAKE_IOV_MAX ? 3 : 61, sizeof(h->out), 0);
}

static void expect_entry(struct fllt_harness *h, const char *op)
{
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->oh.error, 0);
    assert_int_equal(h->fs.calls, 1);
    assert_string_equal(h->fs.op, op);
}

static void expect_einval(struct fllt_harness *h)
{
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->oh.error, -EINVAL);
    assert_int_equal(h->fs.calls, 0);
}

static const char label[] = "system_u:object_r:user_home_t:s0";

static void ext_good(void **state)
{
    (void)state;
    struct fllt_harness *h = ready(41, true);
    size_t n = make_blob(blob, 1, "security.selinux", label, sizeof(label));
    mkdir_ext(h, blob, n);
    expect_entry(h, "mkdir");
    assert_true(h->fs.secctx_seen);
    assert_string_equal(h->fs.secctx_name, "security.selinux");
    assert_int_equal(h->fs.secctx_size, sizeof(label));
    assert_memory_equal(h->fs.secctx_value, label, sizeof(label));
    assert_string_equal(h->fs.name, "d");
    /* The context is gone once the operation returned. */
    assert_null(h->fr.req.secctx);

    /* nr_secctx 0: the client's LSM has no label for it; the op runs without. */
    fllt_fake_reset(&h->fs);
    n = make_blob(blob, 0, NULL, NULL, 0);
    assert_int_equal(n, 8);
    mkdir_ext(h, blob, n);
    expect_entry(h, "mkdir");
    assert_false(h->fs.secctx_seen);

    /* No extensions at all (a 7.38+ client whose LSM sent none). */
    fllt_fake_reset(&h->fs);
    mkdir_ext(h, NULL, 0);
    expect_entry(h, "mkdir");
    assert_false(h->fs.secctx_seen);

    /* The largest value the kernel sends (XATTR_SIZE_MAX), and one byte more. */
    fllt_fake_reset(&h->fs);
    static unsigned char big[FLL_SECCTX_VALUE_MAX + 1];
    memset(big, 'v', sizeof(big));
    n = make_blob(blob, 1, "security.big", big, FLL_SECCTX_VALUE_MAX);
    mkdir_ext(h, blob, n);
    expect_entry(h, "mkdir");
    assert_int_equal(h->fs.secctx_size, FLL_SECCTX_VALUE_MAX);
    assert_memory_equal(h->fs.secctx_value, big, FLL_SECCTX_VALUE_MAX);
    fllt_fake_reset(&h->fs);
    n = make_blob(blob, 1, "security.big", big, FLL_SECCTX_VALUE_MAX + 1);
    mkdir_ext(h, blob, n);
    expect_einval(h);
    fllt_free(h);
}

/* The supplementary groups extension is stepped over, before or after the context. */
static void ext_groups_skipped(void **state)
{
    (void)state;
    struct fllt_harness *h = ready(41, true);
    size_t n = make_blob(blob, 1, "security.selinux", label, sizeof(label));
    struct {
        struct fuse_ext_header eh;
        uint32_t nr, groups[3];
    } g = {.eh = {.size = 24, .type = FUSE_EXT_GROUPS}, .nr = 2, .groups = {5, 6, 0}};
    memcpy(blob + n, &g, sizeof(g));
    mkdir_ext(h, blob, n + sizeof(g));
    expect_entry(h, "mkdir");
    assert_true(h->fs.secctx_seen);

    fllt_fake_reset(&h->fs);
    unsigned char two[512];
    memcpy(two, &g, sizeof(g));
    n = make_blob(two + sizeof(g), 1, "security.selinux", label, sizeof(label));
    mkdir_ext(h, two, sizeof(g) + n);
    expect_entry(h, "mkdir");
    assert_true(h->fs.secctx_seen);
    assert_string_equal(h->fs.secctx_name, "security.selinux");
    fllt_free(h);
}

static void ext_hostile(void **state)
{
    (void)state;
    struct fllt_harness *h = ready(41, true);
    size_t n = make_blob(blob, 1, "security.selinux", label, sizeof(label));
    struct fuse_secctx_header *hdr = (struct fuse_secctx_header *)blob;
    struct fuse_secctx *one = (struct fuse_secctx *)(blob + sizeof(*hdr));

    /* Truncated: the record claims 8 bytes more than the extensions hold. */
    hdr->size = (uint32_t)n + 8;
    mkdir_ext(h, blob, n);
    expect_einval(h);
    /* A record size that is no multiple of 8, or smaller than its header. */
    fllt_fake_reset(&h->fs);
    hdr->size = (uint32_t)n - 4;
    mkdir_ext(h, blob, n);
    expect_einval(h);
    fllt_fake_reset(&h->fs);
    hdr->size = 0;
    mkdir_ext(h, blob, n);
    expect_einval(h);
    hdr->size = (uint32_t)n;

    /* Oversized value: over XATTR_SIZE_MAX, or more than the record holds. */
    fllt_fake_reset(&h->fs);
    one->size = FLL_SECCTX_VALUE_MAX + 1;
    mkdir_ext(h, blob, n);
    expect_einval(h);
    fllt_fake_reset(&h->fs);
    one->size = sizeof(label) + 8;
    mkdir_ext(h, blob, n);
    expect_einval(h);
    /* A value size of 0 (Linux sends nr_secctx 0 then) and one that leaves
     * unexplained bytes in the record. */
    fllt_fake_reset(&h->fs);
    one->size = 0;
    mkdir_ext(h, blob, n);
    expect_einval(h);
    fllt_fake_reset(&h->fs);
    one->size = sizeof(label) - 9;
    mkdir_ext(h, blob, n);
    expect_einval(h);
    one->size = sizeof(label);

    /* nr_secctx 2: refused, not half applied. nr 0 with bytes after it. */
    fllt_fake_reset(&h->fs);
    size_t n2 = make_blob(blob, 2, "security.selinux", label, sizeof(label));
    mkdir_ext(h, blob, n2);
    expect_einval(h);
    fllt_fake_reset(&h->fs);
    n = make_blob(blob, 1, "security.selinux", label, sizeof(label));
    hdr->nr_secctx = 0;
    mkdir_ext(h, blob, n);
    expect_einval(h);

    /* Two security context records. */
    fllt_fake_reset(&h->fs);
    n = make_blob(blob, 1, "security.selinux", label, sizeof(label));
    memcpy(blob + n, blob, n);
    mkdir_ext(h, blob, 2 * n);
    expect_einval(h);

    /* Unknown extension type. */
    fllt_fake_reset(&h->fs);
    struct fuse_ext_header unk = {.size = 8, .type = 77};
    memcpy(blob + n, &unk, sizeof(unk));
    mkdir_ext(h, blob, n + 8);
    expect_einval(h);
    fllt_free(h);
}

static void ext_bad_names(void **state)
{
    (void)state;
    struct fllt_harness *h = ready(41, true);
    /* Missing NUL: the name runs to the end of the record. */
    size_t n = make_blob(blob, 1, "security.selinux", "v", 1);
    size_t at = sizeof(struct fuse_secctx_header) + sizeof(struct fuse_secctx);
    memset(blob + at, 'x', n - at);
    mkdir_ext(h, blob, n);
    expect_einval(h);

    /* Not a security.* name, and the bare prefix. */
    const char *bad[] = {"trusted.overlay.opaque", "user.x", "security.", "securityX.a", ""};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        fllt_fake_reset(&h->fs);
        n = make_blob(blob, 1, bad[k], "v", 1);
        mkdir_ext(h, blob, n);
        expect_einval(h);
    }
    /* A name of 256 bytes without its NUL is over XATTR_NAME_MAX. */
    char longname[300];
    memcpy(longname, "security.", 9);
    memset(longname + 9, 'n', 256 - 9);
    longname[256] = '\0';
    fllt_fake_reset(&h->fs);
    n = make_blob(blob, 1, longname, "v", 1);
    mkdir_ext(h, blob, n);
    expect_einval(h);
    longname[255] = '\0';
    fllt_fake_reset(&h->fs);
    n = make_blob(blob, 1, longname, "v", 1);
    mkdir_ext(h, blob, n);
    expect_entry(h, "mkdir");
    assert_int_equal(strlen(h->fs.secctx_name), 255);
    fllt_free(h);
}

/* Every creating opcode takes it; LINK and others never look. */
static void ext_all_creating_ops(void **state)
{
    (void)state;
    struct fllt_harness *h = ready(41, true);
    size_t n = make_blob(blob, 1, "security.selinux", label, sizeof(label));
    uint16_t ext = (uint16_t)(n / 8);

    struct fuse_create_in ci = {.flags = 0101, .mode = 0644};
    fllt_msg_init(&m, FUSE_CREATE, 1);
    fllt_msg_put(&m, &ci, sizeof(ci));
    fllt_msg_str(&m, "f");
    fllt_msg_put(&m, blob, n);
    ((struct fuse_in_header *)m.b)->total_extlen = ext;
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "create");
    assert_true(h->fs.secctx_seen);

    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_TMPFILE, 1);
    fllt_msg_put(&m, &ci, sizeof(ci));
    fllt_msg_str(&m, "/");
    fllt_msg_put(&m, blob, n);
    ((struct fuse_in_header *)m.b)->total_extlen = ext;
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "tmpfile");
    assert_true(h->fs.secctx_seen);

    fllt_fake_reset(&h->fs);
    struct fuse_mknod_in mn = {.mode = 010644};
    fllt_msg_init(&m, FUSE_MKNOD, 1);
    fllt_msg_put(&m, &mn, sizeof(mn));
    fllt_msg_str(&m, "p");
    fllt_msg_put(&m, blob, n);
    ((struct fuse_in_header *)m.b)->total_extlen = ext;
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "mknod");
    assert_true(h->fs.secctx_seen);

    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_SYMLINK, 1);
    fllt_msg_str(&m, "l");
    fllt_msg_str(&m, "target");
    fllt_msg_put(&m, blob, n);
    ((struct fuse_in_header *)m.b)->total_extlen = ext;
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "symlink");
    assert_true(h->fs.secctx_seen);
    assert_string_equal(h->fs.target, "target");
    assert_string_equal(h->fs.secctx_name, "security.selinux");

    /* LOOKUP with extensions: they are not its business. */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_LOOKUP, 1);
    fllt_msg_str(&m, "f");
    fllt_msg_put(&m, blob, n);
    ((struct fuse_in_header *)m.b)->total_extlen = ext;
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "lookup");
    assert_false(h->fs.secctx_seen);
    fllt_free(h);
}

/* 7.36/7.37 clients (Linux 6.1): the blob is one more argument, no total_extlen. */
static void trailing_form(void **state)
{
    (void)state;
    struct fllt_harness *h = ready(37, true);
    size_t n = make_blob(blob, 1, "security.selinux", label, sizeof(label));

    struct fuse_create_in ci = {.flags = 0101, .mode = 0644};
    fllt_msg_init(&m, FUSE_CREATE, 1);
    fllt_msg_put(&m, &ci, sizeof(ci));
    fllt_msg_str(&m, "f");
    fllt_msg_put(&m, blob, n);
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "create");
    assert_true(h->fs.secctx_seen);
    assert_memory_equal(h->fs.secctx_value, label, sizeof(label));

    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_SYMLINK, 1);
    fllt_msg_str(&m, "l");
    fllt_msg_str(&m, "t");
    fllt_msg_put(&m, blob, n);
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "symlink");
    assert_true(h->fs.secctx_seen);

    /* nr 0, as Linux 6.1 sends without an LSM label. */
    fllt_fake_reset(&h->fs);
    size_t z = make_blob(blob, 0, NULL, NULL, 0);
    struct fuse_mkdir_in mi = {.mode = 0755};
    fllt_msg_init(&m, FUSE_MKDIR, 1);
    fllt_msg_put(&m, &mi, sizeof(mi));
    fllt_msg_str(&m, "d");
    fllt_msg_put(&m, blob, z);
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_entry(h, "mkdir");
    assert_false(h->fs.secctx_seen);

    /* The header's size must be exactly what trails: truncated request. */
    fllt_fake_reset(&h->fs);
    n = make_blob(blob, 1, "security.selinux", label, sizeof(label));
    fllt_msg_init(&m, FUSE_MKDIR, 1);
    fllt_msg_put(&m, &mi, sizeof(mi));
    fllt_msg_str(&m, "d");
    fllt_msg_put(&m, blob, n - 8);
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_einval(h);
    /* Garbage after the names. */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_MKDIR, 1);
    fllt_msg_put(&m, &mi, sizeof(mi));
    fllt_msg_str(&m, "d");
    fllt_msg_put(&m, "xyz", 3);
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_einval(h);
    fllt_free(h);
}

/* Not negotiated: nothing is parsed, whatever the request carries. */
static void not_negotiated(void **state)
{
    (void)state;
    /* The filesystem did not ask. */
    struct fllt_harness *h = ready(41, false);
    assert_false(h->fs.conn.want & FUSE_SECURITY_CTX);
    memset(blob, 0xff, 64);
    mkdir_ext(h, blob, 64);
    expect_entry(h, "mkdir");
    assert_false(h->fs.secctx_seen);
    fllt_free(h);

    /* The client did not offer it: the filesystem's wish is dropped. */
    h = fllt_new(MAXW);
    h->fs.want = FUSE_SECURITY_CTX;
    assert_int_equal(fllt_init(h, 41, 0), 0);
    struct fuse_init_out io;
    memcpy(&io, fllt_body(h), sizeof(io));
    assert_false(((uint64_t)io.flags2 << 32) & FUSE_SECURITY_CTX);
    fllt_fake_reset(&h->fs);
    mkdir_ext(h, blob, 64);
    expect_entry(h, "mkdir");
    assert_false(h->fs.secctx_seen);
    fllt_free(h);

    /* Offered and wanted: granted in flags2. */
    h = fllt_new(MAXW);
    h->fs.want = FUSE_SECURITY_CTX;
    assert_int_equal(fllt_init(h, 41, FUSE_SECURITY_CTX), 0);
    memcpy(&io, fllt_body(h), sizeof(io));
    assert_true(((uint64_t)io.flags2 << 32) & FUSE_SECURITY_CTX);
    assert_true(io.flags & FUSE_INIT_EXT);
    fllt_free(h);
}

/* The blob parser alone, on one contiguous buffer. */
static void parse_direct(void **state)
{
    (void)state;
    struct fll_secctx_buf b;
    bool found;
    size_t n = make_blob(blob, 1, "security.SMACK64", "_", 1);
    struct iovec iov = {blob, n};
    struct fll_cursor c;
    fll_cursor_init(&c, &iov, 1, n);
    assert_int_equal(fll_secctx_parse(&c, n, &b, &found), 0);
    assert_true(found);
    assert_string_equal(b.sc.name, "security.SMACK64");
    assert_int_equal(b.sc.size, 1);
    assert_int_equal(fll_cursor_left(&c), 0);
    free(b.value);
    /* len larger than the cursor holds */
    fll_cursor_init(&c, &iov, 1, n);
    assert_int_equal(fll_secctx_parse(&c, n + 8, &b, &found), -EINVAL);
    assert_false(found);
    /* shorter than a header */
    fll_cursor_init(&c, &iov, 1, n);
    assert_int_equal(fll_secctx_parse(&c, 4, &b, &found), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ext_good),
        cmocka_unit_test(ext_groups_skipped),
        cmocka_unit_test(ext_hostile),
        cmocka_unit_test(ext_bad_names),
        cmocka_unit_test(ext_all_creating_ops),
        cmocka_unit_test(trailing_form),
        cmocka_unit_test(not_negotiated),
        cmocka_unit_test(parse_direct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
