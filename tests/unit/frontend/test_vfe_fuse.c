/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The FUSE client's request layout and reply checking, with the device side
 * played by the test on the rings: well-formed replies are parsed, malformed
 * ones (a backend is not trusted either) become -EPROTO.
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <linux/virtio_ring.h>

#include "vfe.h"

struct seg {
    uint64_t gpa;
    uint32_t len;
};

struct fix {
    struct vfe_mem *mem;
    struct vfe_vq *vq[2];
    struct vfe_fuse *f;
    uint16_t dev_avail[2];
};

/* A request as the device sees it. */
struct dreq {
    uint16_t head;
    struct seg rd[16], wr[16];
    unsigned nrd, nwr;
    uint8_t bytes[8192]; /* the readable part, concatenated */
    uint32_t nbytes;
};

static int setup(void **state)
{
    struct fix *x = calloc(1, sizeof(*x));
    assert_int_equal(vfe_mem_new(NULL, &x->mem), 0);
    for (unsigned i = 0; i < 2; i++) {
        struct vfe_vq_config qc = { .index = i, .size = 16, .indirect = true };
        assert_int_equal(vfe_vq_new(x->mem, &qc, &x->vq[i]), 0);
    }
    struct vfe_fuse_config fc = { .depth = 4, .uid = 11, .gid = 22, .pid = 33 };
    assert_int_equal(vfe_fuse_new_on(x->mem, x->vq, 2, &fc, &x->f), 0);
    assert_int_equal(vfe_fuse_depth(x->f), 4);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fix *x = *state;
    vfe_fuse_free(x->f);
    vfe_vq_free(x->vq[0]);
    vfe_vq_free(x->vq[1]);
    vfe_mem_free(x->mem);
    free(x);
    return 0;
}

static struct vring_desc *table(struct fix *x, unsigned q, uint64_t *gpa_out)
{
    uint64_t d, a, u;
    vfe_vq_gpas(x->vq[q], &d, &a, &u);
    return vfe_mem_gpa_to_hva(x->mem, d, 16 * 16);
}

/* Device: pops the next request of queue q and walks its chain. */
static void dev_pop(struct fix *x, unsigned q, struct dreq *r)
{
    uint64_t d, a, u;
    vfe_vq_gpas(x->vq[q], &d, &a, &u);
    struct vring_avail *avail = vfe_mem_gpa_to_hva(x->mem, a, 6 + 2 * 16);
    assert_true(__atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE) != x->dev_avail[q]);
    memset(r, 0, sizeof(*r));
    r->head = avail->ring[x->dev_avail[q]++ % 16];
    struct vring_desc *t = table(x, q, NULL);
    unsigned i = r->head, max = 16;
    if (t[i].flags & VRING_DESC_F_INDIRECT) {
        max = t[i].len / 16;
        t = vfe_mem_gpa_to_hva(x->mem, t[i].addr, t[i].len);
        assert_non_null(t);
        i = 0;
    }
    for (unsigned n = 0;; n++) {
        assert_true(n < max);
        struct seg s = { t[i].addr, t[i].len };
        if (t[i].flags & VRING_DESC_F_WRITE) {
            r->wr[r->nwr++] = s;
        } else {
            assert_int_equal(r->nwr, 0); /* readable before writable */
            r->rd[r->nrd++] = s;
            assert_true(r->nbytes + s.len <= sizeof(r->bytes));
            assert_int_equal(vfe_mem_read(x->mem, s.gpa, r->bytes + r->nbytes, s.len), 0);
            r->nbytes += s.len;
        }
        if (!(t[i].flags & VRING_DESC_F_NEXT))
            break;
        i = t[i].next;
    }
}

/* Device: writes reply bytes over the writable segments and publishes len. */
static void dev_reply(struct fix *x, unsigned q, const struct dreq *r, const void *rep,
                      uint32_t replen, uint32_t used_len)
{
    const uint8_t *p = rep;
    uint32_t left = replen;
    for (unsigned k = 0; k < r->nwr && left; k++) {
        uint32_t n = left < r->wr[k].len ? left : r->wr[k].len;
        assert_int_equal(vfe_mem_write(x->mem, r->wr[k].gpa, p, n), 0);
        p += n;
        left -= n;
    }
    uint64_t d, a, u;
    vfe_vq_gpas(x->vq[q], &d, &a, &u);
    struct vring_used *used = vfe_mem_gpa_to_hva(x->mem, u, 6 + 8 * 16);
    uint16_t ui = __atomic_load_n(&used->idx, __ATOMIC_RELAXED);
    used->ring[ui % 16].id = r->head;
    used->ring[ui % 16].len = used_len;
    __atomic_store_n(&used->idx, (uint16_t)(ui + 1), __ATOMIC_RELEASE);
}

static void reply_hdr(struct fix *x, unsigned q, const struct dreq *r, int32_t error,
                      const void *body, uint32_t blen)
{
    struct fuse_in_header ih;
    memcpy(&ih, r->bytes, sizeof(ih));
    uint8_t buf[4096];
    struct fuse_out_header oh = { .len = (uint32_t)sizeof(oh) + blen, .error = error,
                                  .unique = ih.unique };
    memcpy(buf, &oh, sizeof(oh));
    if (blen)
        memcpy(buf + sizeof(oh), body, blen);
    dev_reply(x, q, r, buf, oh.len, oh.len);
}

static struct vfe_fuse_op *reap_one(struct fix *x, unsigned q)
{
    struct vfe_fuse_op *done[4];
    int n = vfe_fuse_reap(x->f, q, done, 4, 0);
    assert_int_equal(n, 1);
    return done[0];
}

static void test_lookup_layout_and_reply(void **state)
{
    struct fix *x = *state;
    struct fuse_entry_out out;
    struct vfe_fuse_op op = { .opcode = FUSE_LOOKUP, .nodeid = 5, .name = "abc",
                              .out_arg = &out, .out_arg_len = sizeof(out) };
    assert_int_equal(vfe_fuse_submit(x->f, 1, &op), 0);
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 1);
    vfe_fuse_kick(x->f, 1);
    struct dreq r;
    dev_pop(x, 1, &r);
    assert_int_equal(r.nrd, 1);
    assert_int_equal(r.nbytes, sizeof(struct fuse_in_header) + 4);
    struct fuse_in_header ih;
    memcpy(&ih, r.bytes, sizeof(ih));
    assert_int_equal(ih.len, r.nbytes);
    assert_int_equal(ih.opcode, FUSE_LOOKUP);
    assert_int_equal(ih.nodeid, 5);
    assert_int_equal(ih.uid, 11);
    assert_int_equal(ih.gid, 22);
    assert_int_equal(ih.pid, 33);
    assert_int_equal(ih.unique, op.unique);
    assert_memory_equal(r.bytes + sizeof(ih), "abc", 4);
    assert_int_equal(r.nwr, 1);
    assert_int_equal(r.wr[0].len, sizeof(struct fuse_out_header) + sizeof(out));
    struct fuse_entry_out e = { .nodeid = 77, .attr = { .ino = 1234, .size = 99 } };
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 1);
    reply_hdr(x, 1, &r, 0, &e, sizeof(e));
    assert_ptr_equal(reap_one(x, 1), &op);
    assert_true(op.done);
    assert_int_equal(op.error, 0);
    assert_int_equal(op.out_arg_got, sizeof(out));
    assert_int_equal(out.nodeid, 77);
    assert_int_equal(out.attr.size, 99);
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 0);
}

static void test_write_with_data_indirect(void **state)
{
    struct fix *x = *state;
    uint64_t g1, g2;
    assert_int_equal(vfe_mem_alloc(x->mem, 100, 64, &g1), 0);
    assert_int_equal(vfe_mem_alloc(x->mem, 50, 64, &g2), 0);
    struct vfe_sg data[2] = { { g1, 100 }, { g2, 50 } };
    struct fuse_write_in in = { .fh = 3, .offset = 8, .size = 150 };
    struct fuse_write_out out;
    struct vfe_fuse_op op = { .opcode = FUSE_WRITE, .nodeid = 9, .arg = &in, .arg_len = sizeof(in),
                              .in_data = data, .in_data_cnt = 2, .out_arg = &out,
                              .out_arg_len = sizeof(out), .flags = VFE_OP_INDIRECT };
    assert_int_equal(vfe_fuse_submit(x->f, 1, &op), 0);
    vfe_fuse_kick(x->f, 1);
    struct dreq r;
    dev_pop(x, 1, &r);
    assert_int_equal(r.nrd, 3);
    assert_int_equal(r.rd[1].gpa, g1);
    assert_int_equal(r.rd[2].len, 50);
    struct fuse_in_header ih;
    memcpy(&ih, r.bytes, sizeof(ih));
    assert_int_equal(ih.len, sizeof(ih) + sizeof(in) + 150);
    struct fuse_write_out wo = { .size = 150 };
    reply_hdr(x, 1, &r, 0, &wo, sizeof(wo));
    reap_one(x, 1);
    assert_int_equal(op.error, 0);
    assert_int_equal(out.size, 150);
}

/* Each malformed reply turns into -EPROTO for that op only. */
static void test_bad_replies(void **state)
{
    struct fix *x = *state;
    struct fuse_attr_out ao;
    for (int kind = 0; kind < 6; kind++) {
        struct vfe_fuse_op op = { .opcode = FUSE_GETATTR, .nodeid = 1, .out_arg = &ao,
                                  .out_arg_len = sizeof(ao) };
        assert_int_equal(vfe_fuse_submit(x->f, 1, &op), 0);
        vfe_fuse_kick(x->f, 1);
        struct dreq r;
        dev_pop(x, 1, &r);
        struct fuse_out_header oh = { .len = 16, .error = 0, .unique = op.unique };
        uint32_t used = 16;
        int32_t want = -EPROTO;
        switch (kind) {
        case 0: /* someone else's unique */
            oh.unique ^= 2;
            break;
        case 1: /* header length disagrees with the used length */
            oh.len = 20;
            break;
        case 2: /* a positive error */
            oh.error = 5;
            break;
        case 3: /* an error with a body */
            oh.error = -ENOENT;
            oh.len = used = 24;
            break;
        case 4: /* fine: a plain error */
            oh.error = -ENOENT;
            want = -ENOENT;
            break;
        case 5: /* too short for a header */
            oh.len = used = 8;
            break;
        }
        uint8_t buf[64] = { 0 };
        memcpy(buf, &oh, sizeof(oh));
        dev_reply(x, 1, &r, buf, used, used);
        reap_one(x, 1);
        assert_true(op.done);
        assert_int_equal(op.error, want);
    }
    /* The queue itself is still fine. */
    assert_false(vfe_vq_broken(x->vq[1]));
}

static void test_depth_and_out_of_order(void **state)
{
    struct fix *x = *state;
    struct vfe_fuse_op ops[5];
    for (int i = 0; i < 5; i++)
        ops[i] = (struct vfe_fuse_op){ .opcode = FUSE_STATFS, .nodeid = 1 };
    for (int i = 0; i < 4; i++)
        assert_int_equal(vfe_fuse_submit(x->f, 1, &ops[i]), 0);
    assert_int_equal(vfe_fuse_submit(x->f, 1, &ops[4]), -EAGAIN);
    vfe_fuse_kick(x->f, 1);
    struct dreq r[4];
    for (int i = 0; i < 4; i++)
        dev_pop(x, 1, &r[i]);
    int order[4] = { 3, 1, 0, 2 };
    for (int k = 0; k < 4; k++)
        reply_hdr(x, 1, &r[order[k]], -(k + 1), NULL, 0);
    struct vfe_fuse_op *done[4];
    assert_int_equal(vfe_fuse_reap(x->f, 1, done, 4, 0), 4);
    for (int k = 0; k < 4; k++) {
        assert_ptr_equal(done[k], &ops[order[k]]);
        assert_int_equal(done[k]->error, -(k + 1));
    }
    /* Slots are free again. */
    assert_int_equal(vfe_fuse_submit(x->f, 1, &ops[4]), 0);
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 1);
}

static void test_forget_has_no_reply_part(void **state)
{
    struct fix *x = *state;
    struct fuse_forget_in in = { .nlookup = 3 };
    struct vfe_fuse_op op = { .opcode = FUSE_FORGET, .nodeid = 8, .arg = &in,
                              .arg_len = sizeof(in), .flags = VFE_OP_NO_REPLY };
    assert_int_equal(vfe_fuse_submit(x->f, 0, &op), 0);
    vfe_fuse_kick(x->f, 0);
    struct dreq r;
    dev_pop(x, 0, &r);
    assert_int_equal(r.nwr, 0);
    assert_int_equal(r.nbytes, sizeof(struct fuse_in_header) + sizeof(in));
    dev_reply(x, 0, &r, NULL, 0, 0);
    reap_one(x, 0);
    assert_int_equal(op.error, 0);
    /* A backend claiming it wrote into a request with no writable part breaks
     * the queue rather than being believed. */
    assert_int_equal(vfe_fuse_submit(x->f, 0, &op), 0);
    vfe_fuse_kick(x->f, 0);
    dev_pop(x, 0, &r);
    dev_reply(x, 0, &r, NULL, 0, 4);
    struct vfe_fuse_op *done[1];
    assert_int_equal(vfe_fuse_reap(x->f, 0, done, 1, 0), -EPROTO);
    assert_true(vfe_vq_broken(x->vq[0]));
}

static void test_oversized_request(void **state)
{
    struct fix *x = *state;
    static char big[9000];
    memset(big, 'x', sizeof(big) - 1);
    struct vfe_fuse_op op = { .opcode = FUSE_LOOKUP, .nodeid = 1, .name = big };
    assert_int_equal(vfe_fuse_submit(x->f, 1, &op), -E2BIG);
    assert_int_equal(vfe_fuse_submit(x->f, 7, &op), -EINVAL);
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 0);
}

/* A device thread answering one request on queue 1 with an empty success, so
 * the synchronous helpers (which wait) can be checked. */
struct one {
    struct fix *x;
    struct dreq r;
};

static void *serve_one(void *arg)
{
    struct one *o = arg;
    uint64_t d, a, u;
    vfe_vq_gpas(o->x->vq[1], &d, &a, &u);
    volatile struct vring_avail *avail = vfe_mem_gpa_to_hva(o->x->mem, a, 6 + 2 * 16);
    while (__atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE) == o->x->dev_avail[1])
        usleep(1000);
    dev_pop(o->x, 1, &o->r);
    reply_hdr(o->x, 1, &o->r, 0, NULL, 0);
    uint64_t one = 1;
    if (write(vfe_vq_call_fd(o->x->vq[1]), &one, sizeof(one)) != sizeof(one))
        abort();
    return NULL;
}

static void test_dax_requests(void **state)
{
    struct fix *x = *state;
    struct one o = { .x = x };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve_one, &o), 0);
    assert_int_equal(vfe_fuse_setupmapping(x->f, 5, UINT64_MAX, 2 << 20, 2 << 20, 3, 4 << 20), 0);
    pthread_join(t, NULL);
    struct fuse_in_header ih;
    memcpy(&ih, o.r.bytes, sizeof(ih));
    assert_int_equal(ih.opcode, FUSE_SETUPMAPPING);
    struct fuse_setupmapping_in si;
    assert_int_equal(o.r.nbytes, sizeof(ih) + sizeof(si));
    memcpy(&si, o.r.bytes + sizeof(ih), sizeof(si));
    assert_int_equal(si.fh, UINT64_MAX);
    assert_int_equal(si.moffset, 4 << 20);
    assert_int_equal(si.flags, 3);

    /* REMOVEMAPPING: u32 count then packed (unaligned) 16-byte entries. */
    uint64_t ranges[2][2] = { { 0, 2 << 20 }, { 6 << 20, 2 << 20 } };
    assert_int_equal(pthread_create(&t, NULL, serve_one, &o), 0);
    assert_int_equal(vfe_fuse_removemapping(x->f, 1, ranges, 2), 0);
    pthread_join(t, NULL);
    assert_int_equal(o.r.nbytes, sizeof(ih) + 4 + 2 * 16);
    uint32_t count;
    memcpy(&count, o.r.bytes + sizeof(ih), 4);
    assert_int_equal(count, 2);
    uint64_t moff;
    memcpy(&moff, o.r.bytes + sizeof(ih) + 4 + 16, 8);
    assert_int_equal(moff, 6 << 20);
    assert_int_equal(vfe_fuse_removemapping(x->f, 1, ranges, 0), -EINVAL);
}

/* A synchronous call that times out must not leave the backend a pointer
 * into the caller's stack: the late reply is absorbed and the slot freed. */
static void test_timeout_then_late_reply(void **state)
{
    struct fix *x = *state;
    vfe_fuse_free(x->f);
    struct vfe_fuse_config fc = { .depth = 2, .timeout_ms = 1 };
    assert_int_equal(vfe_fuse_new_on(x->mem, x->vq, 2, &fc, &x->f), 0);
    struct fuse_statfs_out so;
    assert_int_equal(vfe_fuse_statfs(x->f, 1, &so), -ETIMEDOUT);
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 1);
    struct dreq r;
    dev_pop(x, 1, &r);
    struct fuse_statfs_out body = { .st = { .bsize = 4096 } };
    reply_hdr(x, 1, &r, 0, &body, sizeof(body));
    struct vfe_fuse_op *done[2];
    assert_int_equal(vfe_fuse_reap(x->f, 1, done, 2, 0), 0); /* not reported */
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 0);
    /* Both slots usable again. */
    struct vfe_fuse_op ops[2] = { { .opcode = FUSE_STATFS }, { .opcode = FUSE_STATFS } };
    assert_int_equal(vfe_fuse_submit(x->f, 1, &ops[0]), 0);
    assert_int_equal(vfe_fuse_submit(x->f, 1, &ops[1]), 0);
    vfe_fuse_kick(x->f, 1);
    /* One completes (unreported yet), one stays in flight; abandon both. */
    struct dreq r2[2];
    dev_pop(x, 1, &r2[0]);
    dev_pop(x, 1, &r2[1]);
    reply_hdr(x, 1, &r2[0], 0, NULL, 0);
    assert_int_equal(vfe_fuse_reap(x->f, 1, done, 0, 0), 0); /* drained, kept ready */
    vfe_fuse_abandon_all(x->f, 1);
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 1);
    memset(ops, 0xa5, sizeof(ops)); /* the caller may reuse their memory now */
    reply_hdr(x, 1, &r2[1], 0, NULL, 0);
    assert_int_equal(vfe_fuse_reap(x->f, 1, done, 2, 0), 0);
    assert_int_equal(vfe_fuse_in_flight(x->f, 1), 0);
}

struct seen {
    int n;
    char names[8][32];
    uint64_t offs[8];
};

static void on_dirent(void *opaque, const char *name, size_t namelen, uint64_t ino, uint32_t type,
                      uint64_t off)
{
    struct seen *s = opaque;
    if (s->n < 8) {
        memcpy(s->names[s->n], name, namelen);
        s->names[s->n][namelen] = 0;
        s->offs[s->n] = off;
    }
    s->n++;
}

static size_t put_dirent(uint8_t *buf, const char *name, uint64_t ino, uint64_t off)
{
    struct fuse_dirent d = { .ino = ino, .off = off, .namelen = (uint32_t)strlen(name),
                             .type = 8 };
    size_t rec = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + d.namelen);
    memset(buf, 0, rec);
    memcpy(buf, &d, FUSE_NAME_OFFSET);
    memcpy(buf + FUSE_NAME_OFFSET, name, d.namelen);
    return rec;
}

static void test_parse_dirents(void **state)
{
    uint8_t buf[256];
    size_t len = 0;
    len += put_dirent(buf + len, "a", 10, 1);
    len += put_dirent(buf + len, "hello.txt", 11, 2);
    len += put_dirent(buf + len, "0123456789abcdef", 12, 3);
    struct seen s = { 0 };
    uint64_t last = 0;
    assert_int_equal(vfe_fuse_parse_dirents(buf, len, on_dirent, &s, &last), 3);
    assert_string_equal(s.names[1], "hello.txt");
    assert_int_equal(last, 3);
    /* Cut inside the last record, inside a header, a zero or oversized name. */
    assert_int_equal(vfe_fuse_parse_dirents(buf, len - 1, NULL, NULL, NULL), -EPROTO);
    assert_int_equal(vfe_fuse_parse_dirents(buf, 10, NULL, NULL, NULL), -EPROTO);
    struct fuse_dirent d;
    memcpy(&d, buf, sizeof(d));
    d.namelen = 0;
    memcpy(buf, &d, sizeof(d));
    assert_int_equal(vfe_fuse_parse_dirents(buf, len, NULL, NULL, NULL), -EPROTO);
    d.namelen = 0xffffffffu;
    memcpy(buf, &d, sizeof(d));
    assert_int_equal(vfe_fuse_parse_dirents(buf, len, NULL, NULL, NULL), -EPROTO);
    assert_int_equal(vfe_fuse_parse_dirents(buf, 0, NULL, NULL, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lookup_layout_and_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_with_data_indirect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_replies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_and_out_of_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forget_has_no_reply_part, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dax_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_then_late_reply, setup, teardown),
        cmocka_unit_test(test_parse_dirents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
