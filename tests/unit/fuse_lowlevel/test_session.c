/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests: the dispatcher, INIT/DESTROY, and every opcode's decoding, good
 * and bad, through a recording fake filesystem. Requests are cut into small
 * iovecs so decoding crosses buffer boundaries.
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

#define MAXW (128u * 1024u)

static struct fllt_msg m; /* large: not on the stack */

static int setup(void **state)
{
    struct fllt_harness *h = fllt_new(MAXW);
    *state = h;
    return 0;
}

static int setup_ready(void **state)
{
    setup(state);
    struct fllt_harness *h = *state;
    assert_int_equal(fllt_init(h, FLL_KERNEL_MINOR, 0), 0);
    h->fs.calls = 0;
    h->fs.op = NULL;
    return 0;
}

static int teardown(void **state)
{
    fllt_free(*state);
    return 0;
}

/* Exactly one completion, a bare error header for this request, no op call. */
static void expect_err(struct fllt_harness *h, int err)
{
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, sizeof(struct fuse_out_header));
    assert_int_equal(h->oh.len, sizeof(struct fuse_out_header));
    assert_int_equal(h->oh.error, err);
    assert_int_equal(h->oh.unique, m.unique);
}

static void expect_rejected(struct fllt_harness *h, int err)
{
    expect_err(h, err);
    assert_int_equal(h->fs.calls, 0);
}

static void expect_ok(struct fllt_harness *h, size_t body)
{
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->oh.error, 0);
    assert_int_equal(h->out_len, sizeof(struct fuse_out_header) + body);
    assert_int_equal(h->oh.len, h->out_len);
    assert_int_equal(h->oh.unique, m.unique);
}

static void send_small(struct fllt_harness *h)
{
    fllt_send(h, &m, 3, sizeof(h->out), 0);
}

/* ---- Header and dispatch ------------------------------------------------------- */

static void short_header_no_reply(void **state)
{
    struct fllt_harness *h = *state;
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    m.len = sizeof(struct fuse_in_header) - 1;
    fllt_send(h, &m, 7, sizeof(h->out), 0);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.calls, 0);

    m.len = 0;
    fllt_send1(h, &m);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
}

static void len_mismatch(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_set_len(&m, (uint32_t)m.len + 1); /* claims more than the chain */
    send_small(h);
    expect_rejected(h, -EINVAL);

    fllt_msg_set_len(&m, (uint32_t)m.len - 1); /* claims less */
    send_small(h);
    expect_rejected(h, -EINVAL);

    fllt_msg_set_len(&m, 0);
    send_small(h);
    expect_rejected(h, -EINVAL);
}

static void extlen_beyond_request(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    uint16_t ext = 3; /* 24 bytes, only 16 present */
    memcpy(m.b + offsetof(struct fuse_in_header, total_extlen), &ext, sizeof(ext));
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);
}

static void opcode_bounds(void **state)
{
    struct fllt_harness *h = *state;
    static const uint32_t bad[] = {
        0,         53,         1000,      4096 /* CUSE_INIT */, UINT32_MAX,
        FUSE_BMAP, FUSE_IOCTL, FUSE_POLL, FUSE_NOTIFY_REPLY};
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fllt_msg_init(&m, bad[i], 1);
        fllt_msg_put(&m, "0123456789abcdef", 16);
        fllt_msg_end(&m);
        send_small(h);
        expect_rejected(h, -ENOSYS);
    }
}

static void ops_null_enosys(void **state)
{
    struct fllt_harness *h = *state;
    struct fll_ops ops = fllt_fake_ops;
    ops.getattr = NULL;
    ops.forget = NULL;
    struct fll_session_config cfg = {
        .ops = &ops,
        .fs = &h->fs,
        .transport = &h->tr,
        .max_write = MAXW,
    };
    fll_session_free(h->se);
    assert_int_equal(fll_session_new(&cfg, &h->se), 0);
    assert_int_equal(fllt_init(h, 41, 0), 0);
    h->fs.calls = 0;

    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -ENOSYS);

    /* FORGET is never answered, not even with ENOSYS. */
    struct fuse_forget_in fin = {1};
    fllt_msg_init(&m, FUSE_FORGET, 1);
    fllt_msg_put(&m, &fin, sizeof(fin));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
}

static void before_init_eio(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EIO);

    fllt_msg_init(&m, FUSE_DESTROY, 0);
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EIO);
    assert_false(fll_session_initialized(h->se));

    /* A FORGET before INIT: dropped silently. */
    struct fuse_forget_in fin = {1};
    fllt_msg_init(&m, FUSE_FORGET, 1);
    fllt_msg_put(&m, &fin, sizeof(fin));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.calls, 0);
}

static void no_room_for_header(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header) - 1, 0);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.calls, 0);

    /* Room for a header but not for fuse_attr_out: EIO, fs not called. */
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out) - 1, 5);
    expect_rejected(h, -EIO);
}

/* ---- INIT / DESTROY ------------------------------------------------------------------ */

static void init_negotiates(void **state)
{
    struct fllt_harness *h = *state;
    h->fs.want = FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS | FUSE_SECURITY_CTX | FUSE_POSIX_ACL;
    h->fs.max_pages = 256;
    h->fs.map_alignment = 12;
    uint64_t offered = FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS | FUSE_MAX_PAGES | FUSE_MAP_ALIGNMENT |
                       FUSE_SECURITY_CTX;
    assert_int_equal(fllt_init(h, 44, offered), 0);
    assert_int_equal(h->out_len, sizeof(struct fuse_out_header) + sizeof(struct fuse_init_out));
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.major, 7);
    assert_int_equal(out.minor, FLL_KERNEL_MINOR); /* min(ours, theirs) */
    /* POSIX_ACL was not offered: dropped. MAX_PAGES/MAP_ALIGNMENT follow the values. */
    uint64_t flags = out.flags | ((uint64_t)out.flags2 << 32);
    assert_int_equal(flags, FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS | FUSE_SECURITY_CTX |
                                FUSE_MAX_PAGES | FUSE_MAP_ALIGNMENT | FUSE_INIT_EXT);
    assert_int_equal(out.max_write, MAXW);
    assert_int_equal(out.max_pages, 256);
    assert_int_equal(out.map_alignment, 12);
    assert_int_equal(out.max_readahead, 65536);
    assert_int_equal(out.time_gran, 1);
    /* The filesystem saw what the client offered. */
    assert_int_equal(h->fs.conn.capable, offered | FUSE_INIT_EXT);
    assert_int_equal(h->fs.conn.proto_minor, 44);
    assert_int_equal(h->fs.conn.max_write, MAXW);
    assert_true(fll_session_initialized(h->se));
}

/* DAX: FUSE_HAS_INODE_DAX travels in flags2 (with INIT_EXT); map_alignment and the
 * per-file flag only when the client offered them. */
static void init_dax_flags(void **state)
{
    struct fllt_harness *h = *state;
    h->fs.want = FUSE_HAS_INODE_DAX;
    h->fs.map_alignment = 12;
    assert_int_equal(fllt_init(h, 41, FUSE_MAP_ALIGNMENT | FUSE_HAS_INODE_DAX), 0);
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.flags2 & (FUSE_HAS_INODE_DAX >> 32), FUSE_HAS_INODE_DAX >> 32);
    assert_true(out.flags & FUSE_INIT_EXT);
    assert_true(out.flags & FUSE_MAP_ALIGNMENT);
    assert_int_equal(out.map_alignment, 12);
}

static void init_dax_flags_not_offered(void **state)
{
    struct fllt_harness *h = *state;
    h->fs.want = FUSE_HAS_INODE_DAX;
    h->fs.map_alignment = 12;
    assert_int_equal(fllt_init(h, 41, FUSE_ASYNC_READ), 0);
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.flags2, 0);
    assert_false(out.flags & (FUSE_INIT_EXT | FUSE_MAP_ALIGNMENT));
    assert_int_equal(out.map_alignment, 0);
}

/* h's session again, over a transport with these limits (0: none). */
static void reopen_session(struct fllt_harness *h, uint16_t max_pages, uint16_t max_background)
{
    struct fll_session_config cfg = {
        .ops = &fllt_fake_ops,
        .fs = &h->fs,
        .transport = &h->tr,
        .max_write = MAXW,
        .max_pages = max_pages,
        .max_background = max_background,
    };
    fll_session_free(h->se);
    assert_int_equal(fll_session_new(&cfg, &h->se), 0);
}

static void init_max_pages_capped(void **state)
{
    struct fllt_harness *h = *state;
    reopen_session(h, 64, 0);
    h->fs.max_pages = 1024;
    assert_int_equal(fllt_init(h, 41, FUSE_MAX_PAGES), 0);
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.max_pages, 64);
    assert_true(out.flags & FUSE_MAX_PAGES);

    /* Not offered by the client: neither the flag nor the value. */
    setup(state);
    struct fllt_harness *h2 = *state;
    h2->fs.max_pages = 128;
    assert_int_equal(fllt_init(h2, 41, 0), 0);
    memcpy(&out, fllt_body(h2), sizeof(out));
    assert_int_equal(out.max_pages, 0);
    assert_false(out.flags & FUSE_MAX_PAGES);
    fllt_free(h);
}

/* max_background is the transport's (0: the client keeps its default, 12),
 * with the congestion threshold at 3/4 of it. */
static void init_max_background(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_init_out out;
    assert_int_equal(fllt_init(h, 41, FUSE_ASYNC_DIO), 0);
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.max_background, 0);
    assert_int_equal(out.congestion_threshold, 0);

    reopen_session(h, 0, 1000);
    assert_int_equal(fllt_init(h, 41, FUSE_ASYNC_DIO), 0);
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.max_background, 1000);
    assert_int_equal(out.congestion_threshold, 750);
}

/* A filesystem that leaves max_pages alone still gets whole-size requests: a
 * FUSE_MAX_PAGES reply with max_pages 0 would mean one page per request. */
static void init_max_pages_defaults_to_transport(void **state)
{
    struct fllt_harness *h = *state;
    h->fs.max_pages = 0;
    assert_int_equal(fllt_init(h, 41, FUSE_MAX_PAGES), 0);
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_true(out.flags & FUSE_MAX_PAGES);
    assert_int_equal(out.max_pages, MAXW / 4096);
    assert_true(out.max_pages > 1);
}

static void init_old_minor_is_kept(void **state)
{
    struct fllt_harness *h = *state;
    assert_int_equal(fllt_init(h, 31, FUSE_ASYNC_READ), 0);
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.minor, 31);
    assert_int_equal(out.flags, 0); /* the fake asks for nothing */
}

static void init_without_ext(void **state)
{
    struct fllt_harness *h = *state;
    /* A 7.35 client: 16 bytes of fuse_init_in, no flags2. */
    struct fuse_init_in in = {
        .major = 7, .minor = 35, .max_readahead = 4096, .flags = FUSE_ASYNC_READ};
    h->fs.want = FUSE_ASYNC_READ;
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, offsetof(struct fuse_init_in, flags2));
    fllt_msg_end(&m);
    fllt_send(h, &m, 5, sizeof(h->out), 0);
    expect_ok(h, sizeof(struct fuse_init_out));
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), sizeof(out));
    assert_int_equal(out.flags, FUSE_ASYNC_READ);
    assert_int_equal(out.flags2, 0);

    /* FUSE_INIT_EXT set but the extension missing: EINVAL. */
    setup(state);
    struct fllt_harness *h2 = *state;
    in.flags |= FUSE_INIT_EXT;
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, offsetof(struct fuse_init_in, flags2) + 4);
    fllt_msg_end(&m);
    fllt_send1(h2, &m);
    expect_rejected(h2, -EINVAL);
    assert_false(fll_session_initialized(h2->se));
    fllt_free(h);
}

static void init_versions(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_init_in in = {.major = 7, .minor = 30};

    /* Too old a minor: EPROTO, still not initialized. */
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_rejected(h, -EPROTO);
    assert_false(fll_session_initialized(h->se));

    in.major = 6;
    in.minor = 40;
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_rejected(h, -EPROTO);

    /* A newer major: we answer with ours only and wait for another INIT. */
    in.major = 8;
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_ok(h, FUSE_COMPAT_INIT_OUT_SIZE);
    struct fuse_init_out out;
    memcpy(&out, fllt_body(h), FUSE_COMPAT_INIT_OUT_SIZE);
    assert_int_equal(out.major, 7);
    assert_int_equal(out.minor, FLL_KERNEL_MINOR);
    assert_false(fll_session_initialized(h->se));
    assert_int_equal(h->fs.calls, 0);

    /* Too short. */
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, 8);
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_rejected(h, -EINVAL);

    /* The filesystem refuses. */
    h->fs.ret = -ENOMEM;
    assert_int_equal(fllt_init(h, 41, 0), -ENOMEM);
    assert_false(fll_session_initialized(h->se));
    h->fs.ret = 0;
    assert_int_equal(fllt_init(h, 41, 0), 0);
    assert_true(fll_session_initialized(h->se));
}

static void init_twice_and_destroy(void **state)
{
    struct fllt_harness *h = *state;
    h->fs.calls = 0;
    assert_int_equal(fllt_init(h, 41, 0), -EPROTO);
    assert_int_equal(h->fs.calls, 0);
    assert_true(fll_session_initialized(h->se));

    fllt_msg_init(&m, FUSE_DESTROY, 0);
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 0);
    assert_true(h->fs.destroyed);
    assert_false(h->fs.reset); /* a DESTROY is not a reset */
    assert_false(fll_session_initialized(h->se));

    /* After DESTROY only INIT is served again. */
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    send_small(h);
    expect_err(h, -EIO);
    assert_int_equal(fllt_init(h, 41, 0), 0);
}

/* A driver reset: the transport says its driver stopped, and the first request
 * since is INIT: the old session ends as on DESTROY and the new INIT is served. */
static void init_after_driver_stop_starts_new_session(void **state)
{
    struct fllt_harness *h = *state;
    h->fs.destroyed = false;
    fll_session_driver_stopped(h->se);
    assert_true(fll_session_initialized(h->se)); /* nothing ends before the INIT */
    assert_false(h->fs.destroyed);
    assert_int_equal(fllt_init(h, 41, 0), 0);
    assert_true(h->fs.destroyed);
    assert_true(h->fs.reset); /* the reset op, not destroy: the driver was reset */
    assert_true(fll_session_initialized(h->se));
    /* Once only: a further INIT of the new driver is refused. */
    h->fs.destroyed = false;
    assert_int_equal(fllt_init(h, 41, 0), -EPROTO);
    assert_false(h->fs.destroyed);
    assert_true(fll_session_initialized(h->se));
}

/* A pause of the same driver: the first request after the stop is not INIT, so
 * the session goes on and a later INIT is refused as always. */
static void request_after_driver_stop_keeps_session(void **state)
{
    struct fllt_harness *h = *state;
    h->fs.destroyed = false;
    fll_session_driver_stopped(h->se);
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->oh.error, 0);
    assert_int_equal(fllt_init(h, 41, 0), -EPROTO);
    assert_false(h->fs.destroyed);
    assert_true(fll_session_initialized(h->se));
}

/* A stop before any session: INIT is served as usual, nothing to destroy. */
static void driver_stop_before_init(void **state)
{
    struct fllt_harness *h = *state;
    fll_session_driver_stopped(h->se);
    assert_int_equal(fllt_init(h, 41, 0), 0);
    assert_false(h->fs.destroyed);
    assert_int_equal(fllt_init(h, 41, 0), -EPROTO);
}

static void shutdown_without_destroy(void **state)
{
    struct fllt_harness *h = *state;
    /* Not initialized: nothing to tell the filesystem. */
    fll_session_shutdown(h->se);
    assert_false(h->fs.destroyed);

    assert_int_equal(fllt_init(h, 41, 0), 0);
    fll_session_shutdown(h->se);
    assert_true(h->fs.destroyed);
    assert_false(fll_session_initialized(h->se));
    /* and a new client may INIT again */
    assert_int_equal(fllt_init(h, 41, 0), 0);
}

/*
 * A restart: a session saved after INIT, restored into a new session, serves
 * the same client with no INIT of its own (INIT again is refused as on the old
 * session), answers with the negotiated limits, and keeps a pending driver
 * stop. A state this session could not have answered is refused.
 */
static void save_restore(void **state)
{
    struct fllt_harness *h = *state;
    struct fll_session_state st, st2;
    fll_session_save(h->se, &st);
    assert_false(st.initialized);
    assert_int_equal(fllt_init(h, 38, FUSE_ASYNC_READ | FUSE_MAX_PAGES | FUSE_INIT_EXT), 0);
    fll_session_driver_stopped(h->se);
    fll_session_save(h->se, &st);
    assert_true(st.initialized && st.driver_stopped);
    assert_int_equal(st.client_minor, 38);
    assert_int_equal(st.proto_minor, 38);

    struct fllt_harness *n = fllt_new(MAXW);
    assert_int_equal(fll_session_restore(n->se, &st), 0);
    assert_true(fll_session_initialized(n->se));
    assert_int_equal(fll_session_restore(n->se, &st), -EBUSY);
    fll_session_save(n->se, &st2);
    assert_memory_equal(&st, &st2, sizeof(st));
    /* Requests are served at once; no init op ran in the new session. */
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    send_small(n);
    expect_ok(n, sizeof(struct fuse_attr_out));
    assert_int_equal(fllt_init(n, 41, 0), -EPROTO);
    /* The driver stop travelled: an INIT right after a restore starts anew. */
    struct fllt_harness *n2 = fllt_new(MAXW);
    assert_int_equal(fll_session_restore(n2->se, &st), 0);
    assert_int_equal(fllt_init(n2, 41, 0), 0);
    assert_true(n2->fs.reset);
    fllt_free(n2);
    fllt_free(n);
}

static void restore_refuses_what_init_never_answers(void **state)
{
    struct fllt_harness *h = *state;
    assert_int_equal(fllt_init(h, 41, FUSE_ASYNC_READ | FUSE_MAX_PAGES), 0);
    struct fll_session_state good, bad;
    fll_session_save(h->se, &good);
    struct fllt_harness *n = fllt_new(MAXW);
#define REFUSED(field, value)                                                                    \
    do {                                                                                         \
        bad = good;                                                                              \
        bad.field = value;                                                                       \
        assert_int_equal(fll_session_restore(n->se, &bad), -EINVAL);                             \
        assert_false(fll_session_initialized(n->se));                                            \
    } while (0)
    REFUSED(client_minor, 30);
    REFUSED(proto_minor, 40);
    REFUSED(want, good.want | FUSE_WRITEBACK_CACHE); /* not offered */
    REFUSED(max_write, MAXW + 1);
    REFUSED(max_write, 0);
    REFUSED(time_gran, 0);
    REFUSED(time_gran, 1000000001u);
    REFUSED(map_alignment, 12); /* FUSE_MAP_ALIGNMENT not answered */
    REFUSED(want, good.want & ~(uint64_t)FUSE_MAX_PAGES); /* max_pages without the flag */
    bad = good;
    bad.capable |= 1ull << 40;
    bad.want |= 1ull << 40; /* a flags2 bit without FUSE_INIT_EXT */
    assert_int_equal(fll_session_restore(n->se, &bad), -EINVAL);
    /* Not initialized means all zero. */
    memset(&bad, 0, sizeof(bad));
    bad.max_write = 4096;
    assert_int_equal(fll_session_restore(n->se, &bad), -EINVAL);
    memset(&bad, 0, sizeof(bad));
    assert_int_equal(fll_session_restore(n->se, &bad), 0);
    assert_false(fll_session_initialized(n->se));
    assert_int_equal(fll_session_restore(n->se, &good), 0);
#undef REFUSED
    fllt_free(n);
}

static void session_config_checked(void **state)
{
    struct fll_transport tr = {0};
    struct fll_session_config cfg = {.ops = &fllt_fake_ops, .transport = NULL};
    struct fll_session *se = (void *)1;
    assert_int_equal(fll_session_new(NULL, &se), -EINVAL);
    assert_null(se);
    assert_int_equal(fll_session_new(&cfg, &se), -EINVAL);
    cfg.transport = &tr; /* without complete() */
    assert_int_equal(fll_session_new(&cfg, &se), -EINVAL);
    cfg.ops = NULL;
    assert_int_equal(fll_session_new(&cfg, &se), -EINVAL);
}

static void init_reply_too_small(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_init_in in = {.major = 7, .minor = 41, .flags = FUSE_INIT_EXT};
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header) + 24, 0);
    expect_err(h, -EIO);
    assert_false(fll_session_initialized(h->se));
}

/* ---- Fixed-size argument opcodes: one table ------------------------------------------ */

struct simple_case {
    uint32_t opcode;
    size_t insize;    /* the argument struct */
    const char *op;   /* fake op name expected to run */
    size_t replysize; /* reply body */
};

static const struct simple_case simple_cases[] = {
    {FUSE_GETATTR, sizeof(struct fuse_getattr_in), "getattr", sizeof(struct fuse_attr_out)},
    {FUSE_SETATTR, sizeof(struct fuse_setattr_in), "setattr", sizeof(struct fuse_attr_out)},
    {FUSE_OPEN, sizeof(struct fuse_open_in), "open", sizeof(struct fuse_open_out)},
    {FUSE_OPENDIR, sizeof(struct fuse_open_in), "opendir", sizeof(struct fuse_open_out)},
    {FUSE_RELEASE, sizeof(struct fuse_release_in), "release", 0},
    {FUSE_RELEASEDIR, sizeof(struct fuse_release_in), "releasedir", 0},
    {FUSE_FLUSH, sizeof(struct fuse_flush_in), "flush", 0},
    {FUSE_FSYNC, sizeof(struct fuse_fsync_in), "fsync", 0},
    {FUSE_FSYNCDIR, sizeof(struct fuse_fsync_in), "fsyncdir", 0},
    {FUSE_ACCESS, sizeof(struct fuse_access_in), "access", 0},
    {FUSE_FALLOCATE, sizeof(struct fuse_fallocate_in), "fallocate", 0},
    {FUSE_GETLK, sizeof(struct fuse_lk_in), "getlk", sizeof(struct fuse_lk_out)},
    {FUSE_SETLK, sizeof(struct fuse_lk_in), "setlk", 0},
    {FUSE_SETLKW, sizeof(struct fuse_lk_in), "setlkw", 0},
    {FUSE_LSEEK, sizeof(struct fuse_lseek_in), "lseek", sizeof(struct fuse_lseek_out)},
    {FUSE_COPY_FILE_RANGE, sizeof(struct fuse_copy_file_range_in), "copy_file_range",
     sizeof(struct fuse_write_out)},
    {FUSE_SYNCFS, sizeof(struct fuse_syncfs_in), "syncfs", 0},
    {FUSE_STATX, sizeof(struct fuse_statx_in), "statx", sizeof(struct fuse_statx_out)},
    {FUSE_SETUPMAPPING, sizeof(struct fuse_setupmapping_in), "setupmapping", 0},
    {FUSE_STATFS, 0, "statfs", sizeof(struct fuse_statfs_out)},
};

static void simple_ops(void **state)
{
    struct fllt_harness *h = *state;
    unsigned char arg[256];
    for (unsigned i = 0; i < sizeof(simple_cases) / sizeof(simple_cases[0]); i++) {
        const struct simple_case *sc = &simple_cases[i];
        for (unsigned k = 0; k < sizeof(arg); k++)
            arg[k] = (unsigned char)(i * 7 + k);
        /* copy_file_range: a sane len so the fake's byte count is small */
        if (sc->opcode == FUSE_COPY_FILE_RANGE) {
            uint64_t len = 4096;
            memcpy(arg + offsetof(struct fuse_copy_file_range_in, len), &len, 8);
        }

        /* Good: reaches the op with the right node and the exact argument bytes. */
        fllt_fake_reset(&h->fs);
        fllt_msg_init(&m, sc->opcode, 1000 + i);
        fllt_msg_put(&m, arg, sc->insize);
        fllt_msg_end(&m);
        send_small(h);
        expect_ok(h, sc->replysize);
        assert_int_equal(h->fs.calls, 1);
        assert_string_equal(h->fs.op, sc->op);
        assert_int_equal(h->fs.nodeid, 1000 + i);
        if (sc->opcode == FUSE_COPY_FILE_RANGE) {
            struct fuse_write_out wo;
            memcpy(&wo, fllt_body(h), sizeof(wo));
            assert_int_equal(wo.size, 4096);
        }
        if (sc->insize && sc->opcode != FUSE_SYNCFS) { /* syncfs gets no struct */
            assert_int_equal(h->fs.in_len, sc->insize);
            assert_memory_equal(h->fs.in, arg, sc->insize);
        }

        /* The filesystem fails: its errno, header only. */
        fllt_fake_reset(&h->fs);
        h->fs.ret = -EACCES;
        send_small(h);
        expect_err(h, -EACCES);
        assert_int_equal(h->fs.calls, 1);

        if (sc->insize == 0)
            continue;

        /* One byte short: EINVAL, op not called. */
        fllt_fake_reset(&h->fs);
        fllt_msg_init(&m, sc->opcode, 1000 + i);
        fllt_msg_put(&m, arg, sc->insize - 1);
        fllt_msg_end(&m);
        send_small(h);
        expect_rejected(h, -EINVAL);
    }
}

static void simple_reply_too_small(void **state)
{
    struct fllt_harness *h = *state;
    unsigned char arg[256] = {0};
    for (unsigned i = 0; i < sizeof(simple_cases) / sizeof(simple_cases[0]); i++) {
        const struct simple_case *sc = &simple_cases[i];
        if (sc->replysize == 0)
            continue;
        fllt_fake_reset(&h->fs);
        fllt_msg_init(&m, sc->opcode, 5);
        fllt_msg_put(&m, arg, sc->insize);
        fllt_msg_end(&m);
        fllt_send(h, &m, 0, sizeof(struct fuse_out_header) + sc->replysize - 1, 4);
        expect_rejected(h, -EIO);
    }
}

/* ---- Names ----------------------------------------------------------------------------- */

static void lookup_good(void **state)
{
    struct fllt_harness *h = *state;
    fllt_msg_init(&m, FUSE_LOOKUP, 1);
    fllt_msg_str(&m, "hello.txt");
    fllt_msg_end(&m);
    fllt_send(h, &m, 1, sizeof(h->out), 7);
    expect_ok(h, sizeof(struct fuse_entry_out));
    assert_string_equal(h->fs.op, "lookup");
    assert_string_equal(h->fs.name, "hello.txt");
    assert_int_equal(h->fs.nodeid, 1);
    /* the caller as the header names it (fllt_msg_init: uid 1, gid 2, pid 3) */
    assert_int_equal(h->fs.uid, 1);
    assert_int_equal(h->fs.gid, 2);
    assert_int_equal(h->fs.pid, 3);
    struct fuse_entry_out e;
    memcpy(&e, fllt_body(h), sizeof(e));
    assert_int_equal(e.nodeid, 42);
    assert_int_equal(e.generation, 7);
}

/* Sends opcode with prefix bytes then the given name, expects err and no call. */
static void bad_name(struct fllt_harness *h, uint32_t opcode, const void *pre, size_t prelen,
                     const char *name, size_t namelen, int err)
{
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, opcode, 1);
    fllt_msg_put(&m, pre, prelen);
    fllt_msg_put(&m, name, namelen);
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, err);
}

static void names_rejected(void **state)
{
    struct fllt_harness *h = *state;
    static const uint32_t opcodes[] = {FUSE_LOOKUP, FUSE_UNLINK, FUSE_RMDIR, FUSE_MKNOD,
                                       FUSE_MKDIR,  FUSE_CREATE, FUSE_LINK};
    unsigned char pre[64] = {0};
    char longname[300];
    memset(longname, 'x', sizeof(longname));
    longname[256] = '\0'; /* 256 chars: one too many */

    for (unsigned i = 0; i < sizeof(opcodes) / sizeof(opcodes[0]); i++) {
        size_t prelen = 0;
        switch (opcodes[i]) {
        case FUSE_MKNOD:
            prelen = sizeof(struct fuse_mknod_in);
            break;
        case FUSE_MKDIR:
            prelen = sizeof(struct fuse_mkdir_in);
            break;
        case FUSE_CREATE:
            prelen = sizeof(struct fuse_create_in);
            break;
        case FUSE_LINK:
            prelen = sizeof(struct fuse_link_in);
            break;
        default:
            break;
        }
        bad_name(h, opcodes[i], pre, prelen, ".", 2, -EINVAL);
        bad_name(h, opcodes[i], pre, prelen, "..", 3, -EINVAL);
        bad_name(h, opcodes[i], pre, prelen, "a/b", 4, -EINVAL);
        bad_name(h, opcodes[i], pre, prelen, "", 1, -EINVAL);
        bad_name(h, opcodes[i], pre, prelen, "abc", 3, -EINVAL); /* no NUL */
        bad_name(h, opcodes[i], pre, prelen, longname, 257, -ENAMETOOLONG);
        bad_name(h, opcodes[i], pre, prelen - (prelen ? 1 : 0), "", 0, -EINVAL);
    }
    /* 255 characters is fine. */
    longname[255] = '\0';
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_LOOKUP, 1);
    fllt_msg_str(&m, longname);
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_entry_out));
    assert_int_equal(strlen(h->fs.name), 255);
}

static void entry_ops_good(void **state)
{
    struct fllt_harness *h = *state;

    struct fuse_mknod_in mk = {.mode = 010644, .rdev = 5, .umask = 022};
    fllt_msg_init(&m, FUSE_MKNOD, 2);
    fllt_msg_put(&m, &mk, sizeof(mk));
    fllt_msg_str(&m, "fifo");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_entry_out));
    assert_string_equal(h->fs.op, "mknod");
    assert_string_equal(h->fs.name, "fifo");
    assert_memory_equal(h->fs.in, &mk, sizeof(mk));

    struct fuse_mkdir_in md = {.mode = 0755, .umask = 022};
    fllt_msg_init(&m, FUSE_MKDIR, 3);
    fllt_msg_put(&m, &md, sizeof(md));
    fllt_msg_str(&m, "dir");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_entry_out));
    assert_string_equal(h->fs.op, "mkdir");
    assert_int_equal(h->fs.nodeid, 3);
    assert_memory_equal(h->fs.in, &md, sizeof(md));

    fllt_msg_init(&m, FUSE_UNLINK, 4);
    fllt_msg_str(&m, "gone");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 0);
    assert_string_equal(h->fs.op, "unlink");
    assert_string_equal(h->fs.name, "gone");

    fllt_msg_init(&m, FUSE_RMDIR, 4);
    fllt_msg_str(&m, "gonedir");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 0);
    assert_string_equal(h->fs.op, "rmdir");

    struct fuse_link_in li = {.oldnodeid = 77};
    fllt_msg_init(&m, FUSE_LINK, 5);
    fllt_msg_put(&m, &li, sizeof(li));
    fllt_msg_str(&m, "hard");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_entry_out));
    assert_string_equal(h->fs.op, "link");
    assert_int_equal(h->fs.nodeid, 77);
    assert_int_equal(h->fs.newparent, 5);
    assert_string_equal(h->fs.newname, "hard");
}

static void symlink_target(void **state)
{
    struct fllt_harness *h = *state;
    fllt_msg_init(&m, FUSE_SYMLINK, 6);
    fllt_msg_str(&m, "ln");
    fllt_msg_str(&m, "../some/where/..");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_entry_out));
    assert_string_equal(h->fs.name, "ln");
    assert_string_equal(h->fs.target, "../some/where/..");

    /* Target without NUL */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_SYMLINK, 6);
    fllt_msg_str(&m, "ln");
    fllt_msg_put(&m, "abc", 3);
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);

    /* Target of PATH_MAX bytes plus NUL: too long. */
    static char big[FLL_PATH_MAX + 1];
    memset(big, 'p', FLL_PATH_MAX);
    big[FLL_PATH_MAX] = '\0';
    fllt_msg_init(&m, FUSE_SYMLINK, 6);
    fllt_msg_str(&m, "ln");
    fllt_msg_str(&m, big);
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -ENAMETOOLONG);

    /* The name is a name: "a/b" refused even though the target may hold '/'. */
    fllt_msg_init(&m, FUSE_SYMLINK, 6);
    fllt_msg_str(&m, "a/b");
    fllt_msg_str(&m, "t");
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);
}

static void rename_both_names(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_rename_in rn = {.newdir = 9};
    fllt_msg_init(&m, FUSE_RENAME, 8);
    fllt_msg_put(&m, &rn, sizeof(rn));
    fllt_msg_str(&m, "old");
    fllt_msg_str(&m, "new");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 0);
    assert_string_equal(h->fs.name, "old");
    assert_string_equal(h->fs.newname, "new");
    assert_int_equal(h->fs.nodeid, 8);
    assert_int_equal(h->fs.newparent, 9);
    assert_int_equal(h->fs.flags, 0);

    struct fuse_rename2_in r2 = {.newdir = 10, .flags = 2 /* RENAME_EXCHANGE */};
    fllt_msg_init(&m, FUSE_RENAME2, 8);
    fllt_msg_put(&m, &r2, sizeof(r2));
    fllt_msg_str(&m, "x");
    fllt_msg_str(&m, "y");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 0);
    assert_int_equal(h->fs.newparent, 10);
    assert_int_equal(h->fs.flags, 2);

    /* Either name bad */
    bad_name(h, FUSE_RENAME2, &r2, sizeof(r2), "ok\0..", 6, -EINVAL);
    bad_name(h, FUSE_RENAME2, &r2, sizeof(r2), "..\0ok", 6, -EINVAL);
    bad_name(h, FUSE_RENAME, &rn, sizeof(rn), "ok\0a/b", 7, -EINVAL);
    bad_name(h, FUSE_RENAME, &rn, sizeof(rn), "ok\0nonul", 8, -EINVAL);
    bad_name(h, FUSE_RENAME, &rn, sizeof(rn), "ok", 3, -EINVAL); /* second missing */
}

static void create_and_tmpfile(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_create_in ci = {.flags = 0101, .mode = 0644, .umask = 022};
    fllt_msg_init(&m, FUSE_CREATE, 11);
    fllt_msg_put(&m, &ci, sizeof(ci));
    fllt_msg_str(&m, "new.txt");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
    assert_string_equal(h->fs.op, "create");
    assert_memory_equal(h->fs.in, &ci, sizeof(ci));
    struct fuse_entry_out e;
    struct fuse_open_out o;
    memcpy(&e, fllt_body(h), sizeof(e));
    memcpy(&o, (const char *)fllt_body(h) + sizeof(e), sizeof(o));
    assert_int_equal(e.nodeid, 46);
    assert_int_equal(o.fh, 100);

    /* Reply room for the entry but not the open_out: EIO before the fs runs. */
    fllt_fake_reset(&h->fs);
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header) + sizeof(e) + sizeof(o) - 1, 0);
    expect_rejected(h, -EIO);

    /* TMPFILE: the kernel's placeholder "/" is accepted and passed on. */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_TMPFILE, 12);
    fllt_msg_put(&m, &ci, sizeof(ci));
    fllt_msg_str(&m, "/");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
    assert_string_equal(h->fs.op, "tmpfile");
    assert_string_equal(h->fs.name, "/");
    assert_int_equal(h->fs.nodeid, 12);

    /* but it must still be NUL-terminated */
    fllt_fake_reset(&h->fs);
    bad_name(h, FUSE_TMPFILE, &ci, sizeof(ci), "/", 1, -EINVAL);
}

static void readlink_no_nul(void **state)
{
    struct fllt_harness *h = *state;
    fllt_msg_init(&m, FUSE_READLINK, 13);
    fllt_msg_end(&m);
    fllt_send(h, &m, 0, sizeof(h->out), 5);
    expect_ok(h, strlen("some/target"));
    assert_memory_equal(fllt_body(h), "some/target", strlen("some/target"));
    assert_int_equal(h->fs.buf_size, FLL_PATH_MAX);

    /* Room for the header only: EIO, and the filesystem never sees a buffer of
     * nothing (found by fuzz_fll: the op got a NULL buffer). */
    fllt_fake_reset(&h->fs);
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header), 5);
    expect_rejected(h, -EIO);
}

/* ---- FORGET / BATCH_FORGET / INTERRUPT ------------------------------------------------ */

static void forgets(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_forget_in fi = {.nlookup = 3};
    fllt_msg_init(&m, FUSE_FORGET, 50);
    fllt_msg_put(&m, &fi, sizeof(fi));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.nforgets, 1);
    assert_int_equal(h->fs.forget_ids[0], 50);
    assert_int_equal(h->fs.forget_counts[0], 3);

    /* short FORGET: dropped without reply or call */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_FORGET, 50);
    fllt_msg_put(&m, &fi, 7);
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.calls, 0);

    /* BATCH_FORGET of 3, entries copied out */
    fllt_fake_reset(&h->fs);
    struct fuse_batch_forget_in bi = {.count = 3};
    struct fuse_forget_one one[3] = {{60, 1}, {61, 2}, {62, 3}};
    fllt_msg_init(&m, FUSE_BATCH_FORGET, 0);
    fllt_msg_put(&m, &bi, sizeof(bi));
    fllt_msg_put(&m, one, sizeof(one));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.nforgets, 3);
    assert_int_equal(h->fs.forget_ids[2], 62);
    assert_int_equal(h->fs.forget_counts[1], 2);

    /* count larger than the bytes present: nothing forgotten, no reply */
    fllt_fake_reset(&h->fs);
    bi.count = 4;
    fllt_msg_init(&m, FUSE_BATCH_FORGET, 0);
    fllt_msg_put(&m, &bi, sizeof(bi));
    fllt_msg_put(&m, one, sizeof(one));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.calls, 0);

    /* a huge count that would overflow 32-bit arithmetic */
    bi.count = UINT32_MAX;
    fllt_msg_init(&m, FUSE_BATCH_FORGET, 0);
    fllt_msg_put(&m, &bi, sizeof(bi));
    fllt_msg_put(&m, one, sizeof(one));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.calls, 0);

    /* count smaller than the bytes present */
    bi.count = 2;
    fllt_msg_init(&m, FUSE_BATCH_FORGET, 0);
    fllt_msg_put(&m, &bi, sizeof(bi));
    fllt_msg_put(&m, one, sizeof(one));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->out_len, 0);
    assert_int_equal(h->fs.calls, 0);
}

static void interrupt(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_interrupt_in ii = {.unique = 4242};
    fllt_msg_init(&m, FUSE_INTERRUPT, 0);
    fllt_msg_put(&m, &ii, sizeof(ii));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 1);
    assert_int_equal(h->out_len, 0);
    assert_string_equal(h->fs.op, "interrupt");
    assert_int_equal(h->fs.nodeid, 4242);

    /* "not seen yet": the error goes back */
    h->fs.ret = -EAGAIN;
    send_small(h);
    expect_err(h, -EAGAIN);
}

/* ---- READ / WRITE ---------------------------------------------------------------------- */

static void read_zero_copy(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_read_in ri = {.fh = 1, .offset = 3, .size = 100};
    fllt_msg_init(&m, FUSE_READ, 20);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_end(&m);
    /* Reply buffers of 7 bytes each: the header itself spans three of them. */
    fllt_send(h, &m, 0, sizeof(h->out), 7);
    expect_ok(h, 100);
    assert_int_equal(h->fs.iov_bytes, 100);
    /* 16 header bytes end 2 bytes into the third iovec: 5 + 13 * 7 + 4 = 100 */
    assert_int_equal(h->fs.iov_cnt, 15);
    const unsigned char *body = fllt_body(h);
    for (unsigned i = 0; i < 100; i++)
        assert_int_equal(body[i], 'a' + (3 + i) % 26);
    assert_int_equal(h->out[16 + 100], 0xee); /* nothing past the data */

    /* Short read: the header says so. */
    h->fs.count = 10;
    fllt_send(h, &m, 0, sizeof(h->out), 7);
    expect_ok(h, 10);

    /* Buffers smaller than in.size: cut to what is there. */
    h->fs.count = -1;
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header) + 40, 9);
    expect_ok(h, 40);
    assert_int_equal(h->fs.iov_bytes, 40);

    /* A filesystem claiming more than it was given: EIO. */
    h->fs.count = 41;
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header) + 40, 9);
    expect_err(h, -EIO);

    /* Error from the fs */
    h->fs.count = -1;
    h->fs.ret = -EBADF;
    fllt_send1(h, &m);
    expect_err(h, -EBADF);

    /* Size 0 reads nothing. */
    fllt_fake_reset(&h->fs);
    ri.size = 0;
    fllt_msg_init(&m, FUSE_READ, 20);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_ok(h, 0);
    assert_int_equal(h->fs.iov_cnt, 0);

    /* Short argument */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_READ, 20);
    fllt_msg_put(&m, &ri, sizeof(ri) - 1);
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);
}

static void read_too_many_iovecs(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_read_in ri = {.size = 4000};
    fllt_msg_init(&m, FUSE_READ, 20);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_end(&m);
    /* 4000 bytes in 1-byte buffers: more than FLL_IOV_MAX pieces */
    fllt_send(h, &m, 0, 16 + 4000, 1);
    expect_rejected(h, -EINVAL);
}

static void write_exact_size(void **state)
{
    struct fllt_harness *h = *state;
    static unsigned char data[5000];
    for (unsigned i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 13);
    struct fuse_write_in wi = {.fh = 3, .offset = 7, .size = sizeof(data)};
    fllt_msg_init(&m, FUSE_WRITE, 21);
    fllt_msg_put(&m, &wi, sizeof(wi));
    fllt_msg_put(&m, data, sizeof(data));
    fllt_msg_end(&m);
    fllt_send(h, &m, 1000, sizeof(h->out), 0);
    expect_ok(h, sizeof(struct fuse_write_out));
    struct fuse_write_out wo;
    memcpy(&wo, fllt_body(h), sizeof(wo));
    assert_int_equal(wo.size, sizeof(data));
    assert_int_equal(h->fs.data_len, sizeof(data));
    assert_memory_equal(h->fs.data, data, sizeof(data));
    assert_int_equal(h->fs.iov_cnt, 6); /* 1000-byte chunks, data starts at 80 */
    assert_memory_equal(h->fs.in, &wi, sizeof(wi));

    /* size says more than is there */
    fllt_fake_reset(&h->fs);
    wi.size = sizeof(data) + 1;
    fllt_msg_init(&m, FUSE_WRITE, 21);
    fllt_msg_put(&m, &wi, sizeof(wi));
    fllt_msg_put(&m, data, sizeof(data));
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);

    /* size says less than is there */
    wi.size = sizeof(data) - 1;
    fllt_msg_init(&m, FUSE_WRITE, 21);
    fllt_msg_put(&m, &wi, sizeof(wi));
    fllt_msg_put(&m, data, sizeof(data));
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);

    /* more than max_write */
    static unsigned char big[MAXW + 1];
    wi.size = sizeof(big);
    fllt_msg_init(&m, FUSE_WRITE, 21);
    fllt_msg_put(&m, &wi, sizeof(wi));
    fllt_msg_put(&m, big, sizeof(big));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_rejected(h, -EINVAL);

    /* exactly max_write is fine */
    wi.size = MAXW;
    fllt_msg_init(&m, FUSE_WRITE, 21);
    fllt_msg_put(&m, &wi, sizeof(wi));
    fllt_msg_put(&m, big, MAXW);
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_ok(h, sizeof(struct fuse_write_out));

    /* short write_in */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_WRITE, 21);
    fllt_msg_put(&m, &wi, sizeof(wi) - 8);
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);

    /* fs claims more than given */
    fllt_fake_reset(&h->fs);
    h->fs.count = 10;
    wi.size = 5;
    fllt_msg_init(&m, FUSE_WRITE, 21);
    fllt_msg_put(&m, &wi, sizeof(wi));
    fllt_msg_put(&m, data, 5);
    fllt_msg_end(&m);
    send_small(h);
    expect_err(h, -EIO);
}

/* ---- xattrs -------------------------------------------------------------------------- */

static void setxattr_forms(void **state)
{
    struct fllt_harness *h = *state;
    /* Compat form (SETXATTR_EXT not negotiated): 8 bytes */
    struct fuse_setxattr_in si = {.size = 5, .flags = 1};
    fllt_msg_init(&m, FUSE_SETXATTR, 30);
    fllt_msg_put(&m, &si, FUSE_COMPAT_SETXATTR_IN_SIZE);
    fllt_msg_str(&m, "user.k");
    fllt_msg_put(&m, "vvvvv", 5);
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 0);
    assert_string_equal(h->fs.name, "user.k");
    assert_int_equal(h->fs.data_len, 5);
    assert_memory_equal(h->fs.data, "vvvvv", 5);
    assert_int_equal(h->fs.flags, 1);
    assert_int_equal(h->fs.setxattr_flags, 0);

    /* value size disagreeing with the bytes */
    bad_name(h, FUSE_SETXATTR, &si, FUSE_COMPAT_SETXATTR_IN_SIZE, "user.k\0vvvv", 11, -EINVAL);
    /* name without NUL */
    bad_name(h, FUSE_SETXATTR, &si, FUSE_COMPAT_SETXATTR_IN_SIZE, "user.kvvvvv", 11, -EINVAL);
    /* empty name */
    bad_name(h, FUSE_SETXATTR, &si, FUSE_COMPAT_SETXATTR_IN_SIZE, "\0vvvvv", 6, -ERANGE);
    /* too big a value */
    struct fuse_setxattr_in big = {.size = 65537};
    bad_name(h, FUSE_SETXATTR, &big, FUSE_COMPAT_SETXATTR_IN_SIZE, "user.k", 7, -E2BIG);
    /* name longer than XATTR_NAME_MAX */
    char name[300];
    memset(name, 'n', sizeof(name));
    bad_name(h, FUSE_SETXATTR, &si, FUSE_COMPAT_SETXATTR_IN_SIZE, name, 257, -ERANGE);
}

static void setxattr_ext(void **state)
{
    struct fllt_harness *h = fllt_new(MAXW);
    h->fs.want = FUSE_SETXATTR_EXT;
    assert_int_equal(fllt_init(h, 41, FUSE_SETXATTR_EXT), 0);
    struct fuse_setxattr_in si = {.size = 2, .flags = 0, .setxattr_flags = 1};
    fllt_msg_init(&m, FUSE_SETXATTR, 30);
    fllt_msg_put(&m, &si, sizeof(si));
    fllt_msg_str(&m, "system.posix_acl_access");
    fllt_msg_put(&m, "ab", 2);
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    expect_ok(h, 0);
    assert_string_equal(h->fs.name, "system.posix_acl_access");
    assert_int_equal(h->fs.setxattr_flags, 1);
    assert_memory_equal(h->fs.data, "ab", 2);

    /* The compat 8-byte form is now misparsed as short: the value is off. */
    fllt_fake_reset(&h->fs);
    fllt_msg_init(&m, FUSE_SETXATTR, 30);
    fllt_msg_put(&m, &si, FUSE_COMPAT_SETXATTR_IN_SIZE);
    fllt_msg_str(&m, "user.x");
    fllt_msg_put(&m, "ab", 2);
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_rejected(h, -EINVAL);
    fllt_free(h);
}

static void getxattr_sizes(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_getxattr_in gi = {.size = 0};
    fllt_msg_init(&m, FUSE_GETXATTR, 31);
    fllt_msg_put(&m, &gi, sizeof(gi));
    fllt_msg_str(&m, "user.k");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_getxattr_out));
    struct fuse_getxattr_out go;
    memcpy(&go, fllt_body(h), sizeof(go));
    assert_int_equal(go.size, strlen("value-of-xattr"));
    assert_int_equal(h->fs.buf_size, 0);

    gi.size = 100;
    fllt_msg_init(&m, FUSE_GETXATTR, 31);
    fllt_msg_put(&m, &gi, sizeof(gi));
    fllt_msg_str(&m, "user.k");
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 5); /* split reply: goes through a copy */
    expect_ok(h, strlen("value-of-xattr"));
    assert_memory_equal(fllt_body(h), "value-of-xattr", strlen("value-of-xattr"));
    assert_int_equal(h->fs.buf_size, 100);

    /* contiguous reply buffer: written in place */
    fllt_send1(h, &m);
    expect_ok(h, strlen("value-of-xattr"));
    assert_memory_equal(fllt_body(h), "value-of-xattr", strlen("value-of-xattr"));

    /* too small a buffer: ERANGE from the fs */
    gi.size = 4;
    fllt_msg_init(&m, FUSE_GETXATTR, 31);
    fllt_msg_put(&m, &gi, sizeof(gi));
    fllt_msg_str(&m, "user.k");
    fllt_msg_end(&m);
    send_small(h);
    expect_err(h, -ERANGE);

    /* reply buffer smaller than size: the fs is offered only what fits */
    gi.size = 100;
    fllt_msg_init(&m, FUSE_GETXATTR, 31);
    fllt_msg_put(&m, &gi, sizeof(gi));
    fllt_msg_str(&m, "user.k");
    fllt_msg_end(&m);
    fllt_send(h, &m, 0, sizeof(struct fuse_out_header) + 8, 0);
    expect_err(h, -ERANGE);
    assert_int_equal(h->fs.buf_size, 8);

    /* name without NUL */
    bad_name(h, FUSE_GETXATTR, &gi, sizeof(gi), "user.k", 6, -EINVAL);

    /* LISTXATTR */
    fllt_fake_reset(&h->fs);
    gi.size = 0;
    fllt_msg_init(&m, FUSE_LISTXATTR, 32);
    fllt_msg_put(&m, &gi, sizeof(gi));
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, sizeof(struct fuse_getxattr_out));
    memcpy(&go, fllt_body(h), sizeof(go));
    assert_int_equal(go.size, 14);
    gi.size = 4096;
    fllt_msg_init(&m, FUSE_LISTXATTR, 32);
    fllt_msg_put(&m, &gi, sizeof(gi));
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 14);
    assert_memory_equal(fllt_body(h), "user.a\0user.b", 14);

    /* REMOVEXATTR */
    fllt_msg_init(&m, FUSE_REMOVEXATTR, 33);
    fllt_msg_str(&m, "user.gone");
    fllt_msg_end(&m);
    send_small(h);
    expect_ok(h, 0);
    assert_string_equal(h->fs.op, "removexattr");
    assert_string_equal(h->fs.name, "user.gone");
}

/* ---- Directories ----------------------------------------------------------------------- */

static void readdir_entries(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_read_in ri = {.fh = 77, .offset = 0, .size = 4096};
    fllt_msg_init(&m, FUSE_READDIR, 40);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_end(&m);
    fllt_send(h, &m, 3, sizeof(h->out), 0);
    /* "a" (32), "bb" (32), "ccc" (32) */
    expect_ok(h, 96);
    struct fuse_dirent d;
    memcpy(&d, (const char *)fllt_body(h) + 64, sizeof(d));
    assert_int_equal(d.ino, 102);
    assert_int_equal(d.namelen, 3);
    assert_memory_equal((const char *)fllt_body(h) + 64 + FUSE_NAME_OFFSET, "ccc", 3);

    /* Small size: only what fits, never a partial record. */
    ri.size = 70;
    fllt_msg_init(&m, FUSE_READDIR, 40);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_end(&m);
    fllt_send(h, &m, 0, sizeof(h->out), 11); /* split: built in a copy */
    expect_ok(h, 64);
    assert_int_equal(h->fs.buf_size, 70);
    memcpy(&d, (const char *)fllt_body(h) + 32, sizeof(d));
    assert_int_equal(d.namelen, 2);

    /* READDIRPLUS */
    ri.size = 4096;
    fllt_msg_init(&m, FUSE_READDIRPLUS, 40);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_end(&m);
    send_small(h);
    size_t rec = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + 1);
    expect_ok(h, 3 * rec);
    assert_string_equal(h->fs.op, "readdirplus");
    struct fuse_direntplus dp;
    memcpy(&dp, fllt_body(h), sizeof(dp));
    assert_int_equal(dp.entry_out.nodeid, 100);
    assert_int_equal(dp.dirent.namelen, 1);
}

/* ---- Locks, async ------------------------------------------------------------------------ */

static void setlkw_async(void **state)
{
    struct fllt_harness *h = *state;
    struct fuse_lk_in li = {.fh = 1, .lk = {.start = 0, .end = 10, .type = 1}};
    h->fs.async = true;
    fllt_msg_init(&m, FUSE_SETLKW, 50);
    fllt_msg_put(&m, &li, sizeof(li));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 0); /* kept by the fs */
    assert_non_null(h->fs.pending);
    assert_int_equal(h->fs.flags, 1);
    fll_reply_err(h->fs.pending, -EDEADLK);
    expect_err(h, -EDEADLK);

    fllt_msg_init(&m, FUSE_SETLKW, 50);
    fllt_msg_put(&m, &li, sizeof(li));
    fllt_msg_end(&m);
    send_small(h);
    assert_int_equal(h->completions, 0);
    fll_reply_err(h->fs.pending, 0);
    expect_ok(h, 0);
}

/* ---- DAX mappings ---------------------------------------------------------------------------- */

static void removemapping(void **state)
{
    struct fllt_harness *h = *state;
    static struct fuse_removemapping_one one[FLL_REMOVEMAPPING_MAX + 1];
    for (unsigned i = 0; i <= FLL_REMOVEMAPPING_MAX; i++) {
        one[i].moffset = (uint64_t)i << 21;
        one[i].len = 1u << 21;
    }
    /* 3 entries starting at the unaligned offset 44 */
    struct fuse_removemapping_in ri = {.count = 3};
    fllt_msg_init(&m, FUSE_REMOVEMAPPING, 0);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_put(&m, one, 3 * sizeof(one[0]));
    fllt_msg_end(&m);
    fllt_send(h, &m, 5, sizeof(h->out), 0);
    expect_ok(h, 0);
    assert_int_equal(h->fs.rm_count, 3);
    assert_memory_equal(h->fs.rm, one, 3 * sizeof(one[0]));

    /* exactly 256: fine */
    ri.count = FLL_REMOVEMAPPING_MAX;
    fllt_msg_init(&m, FUSE_REMOVEMAPPING, 0);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_put(&m, one, FLL_REMOVEMAPPING_MAX * sizeof(one[0]));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_ok(h, 0);
    assert_int_equal(h->fs.rm_count, 256);
    assert_int_equal(h->fs.rm[255].moffset, (uint64_t)255 << 21);

    /* 257: refused */
    fllt_fake_reset(&h->fs);
    ri.count = FLL_REMOVEMAPPING_MAX + 1;
    fllt_msg_init(&m, FUSE_REMOVEMAPPING, 0);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_put(&m, one, (FLL_REMOVEMAPPING_MAX + 1) * sizeof(one[0]));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    expect_rejected(h, -EINVAL);

    /* count larger than the bytes */
    ri.count = 4;
    fllt_msg_init(&m, FUSE_REMOVEMAPPING, 0);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_put(&m, one, 3 * sizeof(one[0]));
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);

    /* count 0 */
    ri.count = 0;
    fllt_msg_init(&m, FUSE_REMOVEMAPPING, 0);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);

    /* a partial entry */
    ri.count = 1;
    fllt_msg_init(&m, FUSE_REMOVEMAPPING, 0);
    fllt_msg_put(&m, &ri, sizeof(ri));
    fllt_msg_put(&m, one, 15);
    fllt_msg_end(&m);
    send_small(h);
    expect_rejected(h, -EINVAL);
}

static void positive_return_is_eio(void **state)
{
    struct fllt_harness *h = *state;
    /* An int op answering 2 (not an errno, not FLL_ASYNC): EIO. */
    h->fs.ret = 2;
    struct fuse_getattr_in in = {0};
    fllt_msg_init(&m, FUSE_GETATTR, 1);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    send_small(h);
    expect_err(h, -EIO);
    /* lookup answering FLL_ASYNC is a bug too: bodies cannot be sent later */
    h->fs.ret = FLL_ASYNC;
    fllt_msg_init(&m, FUSE_LOOKUP, 1);
    fllt_msg_str(&m, "x");
    fllt_msg_end(&m);
    send_small(h);
    expect_err(h, -EIO);
    /* The same rule for every kind of reply: a struct, a header alone, a
     * count; and an "errno" past -4095 is no errno either. */
    static const struct {
        uint32_t op;
        size_t in;
    } ops[] = {
        {FUSE_OPEN, sizeof(struct fuse_open_in)},   {FUSE_LSEEK, sizeof(struct fuse_lseek_in)},
        {FUSE_GETLK, sizeof(struct fuse_lk_in)},    {FUSE_STATFS, 0},
        {FUSE_FSYNC, sizeof(struct fuse_fsync_in)}, {FUSE_GETATTR, sizeof(struct fuse_getattr_in)},
        {FUSE_COPY_FILE_RANGE, sizeof(struct fuse_copy_file_range_in)},
    };
    static const int bad[] = {2, -5000};
    static const uint8_t zeros[sizeof(struct fuse_copy_file_range_in)];
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
            if (bad[b] > 0 && ops[i].op == FUSE_COPY_FILE_RANGE)
                continue; /* a count: a positive value is one */
            fllt_fake_reset(&h->fs);
            h->fs.ret = bad[b];
            fllt_msg_init(&m, ops[i].op, 1);
            fllt_msg_put(&m, zeros, ops[i].in);
            fllt_msg_end(&m);
            send_small(h);
            expect_err(h, -EIO);
        }
}

static void fuzz_entry_smoke(void **state)
{
    /* Deterministic pseudo-random inputs through the fuzz entry point. */
    static uint8_t buf[4096];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (unsigned iter = 0; iter < 3000; iter++) {
        size_t n = 6 + (x % 300);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = (uint8_t)x;
        }
        buf[4] |= 3;                    /* INIT first, fix the length */
        buf[6 + 4] = (uint8_t)(x % 54); /* a real opcode most of the time */
        buf[6 + 5] = buf[6 + 6] = buf[6 + 7] = 0;
        memset(buf + 6 + 36, 0, 2); /* total_extlen: mostly none */
        assert_int_equal(fll_fuzz_one(buf, n), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(save_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(restore_refuses_what_init_never_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(short_header_no_reply, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(len_mismatch, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(extlen_beyond_request, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(opcode_bounds, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(ops_null_enosys, setup, teardown),
        cmocka_unit_test_setup_teardown(before_init_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(no_room_for_header, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(init_negotiates, setup, teardown),
        cmocka_unit_test_setup_teardown(init_dax_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(init_dax_flags_not_offered, setup, teardown),
        cmocka_unit_test_setup_teardown(init_max_pages_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(init_max_background, setup, teardown),
        cmocka_unit_test_setup_teardown(init_max_pages_defaults_to_transport, setup, teardown),
        cmocka_unit_test_setup_teardown(init_old_minor_is_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(init_without_ext, setup, teardown),
        cmocka_unit_test_setup_teardown(init_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(init_twice_and_destroy, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(init_reply_too_small, setup, teardown),
        cmocka_unit_test_setup_teardown(shutdown_without_destroy, setup, teardown),
        cmocka_unit_test_setup_teardown(init_after_driver_stop_starts_new_session, setup_ready,
                                        teardown),
        cmocka_unit_test_setup_teardown(request_after_driver_stop_keeps_session, setup_ready,
                                        teardown),
        cmocka_unit_test_setup_teardown(driver_stop_before_init, setup, teardown),
        cmocka_unit_test(session_config_checked),
        cmocka_unit_test_setup_teardown(simple_ops, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(simple_reply_too_small, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(lookup_good, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(names_rejected, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(entry_ops_good, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(symlink_target, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(rename_both_names, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(create_and_tmpfile, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(readlink_no_nul, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(forgets, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(interrupt, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(read_zero_copy, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(read_too_many_iovecs, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(write_exact_size, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(setxattr_forms, setup_ready, teardown),
        cmocka_unit_test(setxattr_ext),
        cmocka_unit_test_setup_teardown(getxattr_sizes, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(readdir_entries, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(setlkw_async, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(removemapping, setup_ready, teardown),
        cmocka_unit_test_setup_teardown(positive_return_is_eio, setup_ready, teardown),
        cmocka_unit_test(fuzz_entry_smoke),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
