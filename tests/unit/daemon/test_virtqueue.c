/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The descriptor chain walker and ring operations against well-formed and
 * malicious chains. Guest memory is two adjacent regions of plain heap memory
 * (gpa 0x10000-0x1ffff and 0x20000-0x2ffff) backed by separate allocations, so a
 * buffer crossing 0x20000 must come back as two iovecs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>

#include "virtqueue.h"

#define RA     0x10000u
#define RB     0x20000u
#define RSZ    0x10000u
#define RING   8u
#define MAXIOV 16u

struct fixture {
    struct vq_mem mem;
    uint8_t *a, *b;
    struct vring_desc *table; /* RING descriptors at gpa RA */
    struct iovec rd[MAXIOV], wr[MAXIOV];
    unsigned rd_cnt, wr_cnt;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    f->a = aligned_alloc(4096, RSZ);
    f->b = aligned_alloc(4096, RSZ);
    memset(f->a, 0, RSZ);
    memset(f->b, 0, RSZ);
    f->mem.nregions = 2;
    f->mem.r[0] = (struct vmem_region){.gpa = RA, .size = RSZ, .uva = 0x7000000, .host = f->a};
    f->mem.r[1] = (struct vmem_region){.gpa = RB, .size = RSZ, .uva = 0x9000000, .host = f->b};
    f->table = (struct vring_desc *)(void *)f->a;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    free(f->a);
    free(f->b);
    free(f);
    return 0;
}

static void set_desc(struct vring_desc *t, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
                     uint16_t next)
{
    t[i] = (struct vring_desc){.addr = addr, .len = len, .flags = flags, .next = next};
}

static int walk(struct fixture *f, uint16_t head, unsigned max)
{
    return vq_walk_chain(&f->mem, f->table, RING, head, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, max);
}

static void test_simple_chain(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, RA + 0x1000, 40, VRING_DESC_F_NEXT, 3);
    set_desc(f->table, 3, RA + 0x2000, 100, VRING_DESC_F_NEXT, 5);
    set_desc(f->table, 5, RB + 0x100, 4096, VRING_DESC_F_WRITE, 0);
    assert_int_equal(walk(f, 0, MAXIOV), 0);
    assert_int_equal(f->rd_cnt, 2);
    assert_int_equal(f->wr_cnt, 1);
    assert_ptr_equal(f->rd[0].iov_base, f->a + 0x1000);
    assert_int_equal(f->rd[0].iov_len, 40);
    assert_ptr_equal(f->rd[1].iov_base, f->a + 0x2000);
    assert_ptr_equal(f->wr[0].iov_base, f->b + 0x100);
    assert_int_equal(f->wr[0].iov_len, 4096);
}

static void test_loop(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, RA + 0x1000, 8, VRING_DESC_F_NEXT, 1);
    set_desc(f->table, 1, RA + 0x1000, 8, VRING_DESC_F_NEXT, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -ELOOP);
    /* A descriptor pointing at itself. */
    set_desc(f->table, 2, RA + 0x1000, 8, VRING_DESC_F_NEXT, 2);
    assert_int_equal(walk(f, 2, MAXIOV), -ELOOP);
    /* Zero-length descriptors in a loop must not escape the count either. */
    set_desc(f->table, 4, RA, 0, VRING_DESC_F_NEXT, 4);
    assert_int_equal(walk(f, 4, MAXIOV), -ELOOP);
}

static void test_max_length_chain_ok(void **state)
{
    struct fixture *f = *state;
    for (unsigned i = 0; i < RING; i++)
        set_desc(f->table, i, RA + 0x1000 + i * 16, 16, i + 1 < RING ? VRING_DESC_F_NEXT : 0,
                 (uint16_t)(i + 1));
    assert_int_equal(walk(f, 0, MAXIOV), 0);
    assert_int_equal(f->rd_cnt, RING);
}

static void test_out_of_range_indices(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(walk(f, RING, MAXIOV), -EINVAL);
    assert_int_equal(walk(f, 0xffff, MAXIOV), -EINVAL);
    set_desc(f->table, 0, RA + 0x1000, 8, VRING_DESC_F_NEXT, RING);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
    set_desc(f->table, 0, RA + 0x1000, 8, VRING_DESC_F_NEXT, 0xffff);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
    /* A ring size that is not a power of two is refused outright. */
    assert_int_equal(
        vq_walk_chain(&f->mem, f->table, 6, 0, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, MAXIOV),
        -EINVAL);
}

static void test_addr_overflow(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, UINT64_MAX - 10, 100, 0, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
    set_desc(f->table, 0, UINT64_MAX, 1, VRING_DESC_F_WRITE, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
    /* Starts inside, length runs off the end of the address space. */
    set_desc(f->table, 0, RB + 0x10, UINT32_MAX, 0, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
}

static void test_outside_memory(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, 0x50000, 16, 0, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
    set_desc(f->table, 0, 0, 16, 0, 0); /* below the first region */
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
    set_desc(f->table, 0, RB + RSZ - 0x10, 0x20, VRING_DESC_F_WRITE, 0); /* runs past the end */
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
    set_desc(f->table, 0, RA - 1, 2, 0, 0); /* starts just before */
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
}

static void test_straddle_split(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, RB - 0x10, 0x30, VRING_DESC_F_WRITE, 0);
    assert_int_equal(walk(f, 0, MAXIOV), 0);
    assert_int_equal(f->wr_cnt, 2);
    assert_ptr_equal(f->wr[0].iov_base, f->a + RSZ - 0x10);
    assert_int_equal(f->wr[0].iov_len, 0x10);
    assert_ptr_equal(f->wr[1].iov_base, f->b);
    assert_int_equal(f->wr[1].iov_len, 0x20);
    /* The split counts against max_iov. */
    assert_int_equal(walk(f, 0, 1), -E2BIG);
}

static void test_readable_after_writable(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, RA + 0x1000, 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
    set_desc(f->table, 1, RA + 0x2000, 8, VRING_DESC_F_NEXT, 2);
    set_desc(f->table, 2, RA + 0x3000, 8, VRING_DESC_F_WRITE, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
}

static void test_zero_length(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, RA + 0x1000, 0, VRING_DESC_F_NEXT, 1);
    set_desc(f->table, 1, 0xdead0000, 0, VRING_DESC_F_NEXT, 2); /* unmapped but empty */
    set_desc(f->table, 2, RA + 0x2000, 8, VRING_DESC_F_WRITE, 0);
    assert_int_equal(walk(f, 0, MAXIOV), 0);
    assert_int_equal(f->rd_cnt, 0);
    assert_int_equal(f->wr_cnt, 1);
}

static void test_huge_counts(void **state)
{
    struct fixture *f = *state;
    /* More iovecs than the caller has room for. */
    for (unsigned i = 0; i < RING; i++)
        set_desc(f->table, i, RA + 0x1000, 16, i + 1 < RING ? VRING_DESC_F_NEXT : 0,
                 (uint16_t)(i + 1));
    assert_int_equal(walk(f, 0, 4), -E2BIG);
    /* A 4 GiB - 1 length inside 64 KiB regions. */
    set_desc(f->table, 0, RA + 0x1000, UINT32_MAX, 0, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
}

/* Places an indirect table of n descriptors at gpa RA + 0x8000 and points desc 0 at it. */
static struct vring_desc *indirect_at(struct fixture *f, uint32_t len_bytes, uint16_t flags)
{
    set_desc(f->table, 0, RA + 0x8000, len_bytes, VRING_DESC_F_INDIRECT | flags, 0);
    return (struct vring_desc *)(void *)(f->a + 0x8000);
}

static void test_indirect_ok(void **state)
{
    struct fixture *f = *state;
    struct vring_desc *it = indirect_at(f, 3 * 16, 0);
    set_desc(it, 0, RA + 0x1000, 40, VRING_DESC_F_NEXT, 2);
    set_desc(it, 2, RB + 0x10, 64, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
    set_desc(it, 1, RB + 0x1000, 64, VRING_DESC_F_WRITE, 0);
    assert_int_equal(walk(f, 0, MAXIOV), 0);
    assert_int_equal(f->rd_cnt, 1);
    assert_int_equal(f->wr_cnt, 2);
    assert_ptr_equal(f->wr[1].iov_base, f->b + 0x1000);
    /* The WRITE flag on the descriptor naming the table is ignored (spec). */
    set_desc(f->table, 0, RA + 0x8000, 3 * 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_WRITE, 0);
    assert_int_equal(walk(f, 0, MAXIOV), 0);
}

static void test_indirect_nested(void **state)
{
    struct fixture *f = *state;
    struct vring_desc *it = indirect_at(f, 2 * 16, 0);
    set_desc(it, 0, RA + 0x1000, 8, VRING_DESC_F_NEXT, 1);
    set_desc(it, 1, RA + 0x8000, 32, VRING_DESC_F_INDIRECT, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
}

static void test_indirect_bad_size(void **state)
{
    struct fixture *f = *state;
    indirect_at(f, 17, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
    indirect_at(f, 0, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
    indirect_at(f, (RING + 1) * 16, 0); /* more entries than the ring */
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
    indirect_at(f, UINT32_MAX & ~15u, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
}

static void test_indirect_with_next(void **state)
{
    struct fixture *f = *state;
    struct vring_desc *it = indirect_at(f, 16, VRING_DESC_F_NEXT);
    set_desc(it, 0, RA + 0x1000, 8, 0, 0);
    f->table[0].next = 1;
    set_desc(f->table, 1, RA + 0x1000, 8, 0, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
}

static void test_indirect_bad_next_and_loop(void **state)
{
    struct fixture *f = *state;
    struct vring_desc *it = indirect_at(f, 2 * 16, 0);
    set_desc(it, 0, RA + 0x1000, 8, VRING_DESC_F_NEXT, 2); /* table has 2 entries */
    assert_int_equal(walk(f, 0, MAXIOV), -EINVAL);
    set_desc(it, 0, RA + 0x1000, 8, VRING_DESC_F_NEXT, 1);
    set_desc(it, 1, RA + 0x1000, 8, VRING_DESC_F_NEXT, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -ELOOP);
}

static void test_indirect_outside_or_straddling(void **state)
{
    struct fixture *f = *state;
    set_desc(f->table, 0, 0x90000, 32, VRING_DESC_F_INDIRECT, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
    set_desc(f->table, 0, RB - 16, 32, VRING_DESC_F_INDIRECT, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
    set_desc(f->table, 0, UINT64_MAX - 15, 32, VRING_DESC_F_INDIRECT, 0);
    assert_int_equal(walk(f, 0, MAXIOV), -EFAULT);
}

/* ---- Ring operations ---------------------------------------------------------- */

static void ring_init(struct fixture *f, struct vq_ring *r, bool event_idx)
{
    memset(r, 0, sizeof(*r));
    r->num = RING;
    r->desc = f->table;
    r->avail = (struct vring_avail *)(void *)(f->a + 0x4000);
    r->used = (struct vring_used *)(void *)(f->a + 0x5000);
    r->event_idx = event_idx;
}

static void test_ring_pop_push(void **state)
{
    struct fixture *f = *state;
    struct vq_ring r;
    uint16_t head = 0xffff;
    ring_init(f, &r, true);

    assert_int_equal(vq_ring_pop(&r, &f->mem, &head, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, MAXIOV),
                     0);
    set_desc(f->table, 2, RA + 0x1000, 40, VRING_DESC_F_NEXT, 3);
    set_desc(f->table, 3, RA + 0x2000, 80, VRING_DESC_F_WRITE, 0);
    r.avail->ring[0] = 2;
    r.avail->idx = 1;
    assert_int_equal(vq_ring_pop(&r, &f->mem, &head, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, MAXIOV),
                     1);
    assert_int_equal(head, 2);
    assert_int_equal(r.last_avail_idx, 1);
    assert_false(vq_ring_has_work(&r));
    assert_int_equal(r.max_pending, 1); /* the depth the driver drove */

    vq_ring_push(&r, head, 16);
    assert_int_equal(r.used->idx, 1);
    assert_int_equal(r.used->ring[0].id, 2);
    assert_int_equal(r.used->ring[0].len, 16);
    /* First decision always notifies; then used_event governs. */
    assert_true(vq_ring_should_notify(&r));
    r.avail->ring[RING] = 5; /* used_event: driver wants a call when used idx passes 5 */
    vq_ring_push(&r, 3, 0);
    assert_false(vq_ring_should_notify(&r));

    /* Sleeping publishes avail_event and reports entries that raced in. */
    assert_false(vq_ring_enable_notify(&r));
    assert_int_equal(*(uint16_t *)&r.used->ring[RING], 1);
    r.avail->idx = 2;
    assert_true(vq_ring_enable_notify(&r));

    /* Three waiting at once: the deepest backlog is 3, and stays so. */
    r.avail->ring[1] = 2;
    r.avail->ring[2] = 2;
    r.avail->ring[3] = 2;
    r.avail->idx = 4;
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            vq_ring_pop(&r, &f->mem, &head, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, MAXIOV), 1);
    assert_int_equal(r.max_pending, 3);
}

static void test_ring_no_event_idx_flags(void **state)
{
    struct fixture *f = *state;
    struct vq_ring r;
    ring_init(f, &r, false);
    vq_ring_disable_notify(&r);
    assert_int_equal(r.used->flags, VRING_USED_F_NO_NOTIFY);
    assert_false(vq_ring_enable_notify(&r));
    assert_int_equal(r.used->flags, 0);
    r.avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
    vq_ring_push(&r, 0, 0);
    assert_false(vq_ring_should_notify(&r));
    r.avail->flags = 0;
    assert_true(vq_ring_should_notify(&r));
}

static void test_ring_malicious_avail(void **state)
{
    struct fixture *f = *state;
    struct vq_ring r;
    uint16_t head;
    ring_init(f, &r, true);
    r.avail->idx = RING + 1; /* more than the ring holds */
    assert_int_equal(vq_ring_pop(&r, &f->mem, &head, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, MAXIOV),
                     -EINVAL);
    r.avail->idx = 1;
    r.avail->ring[0] = RING; /* head out of range */
    assert_int_equal(vq_ring_pop(&r, &f->mem, &head, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, MAXIOV),
                     -EINVAL);
    /* Wrap-around of the 16-bit index is not an error. */
    ring_init(f, &r, true);
    r.last_avail_idx = 0xffff;
    r.avail->idx = 0;
    r.avail->ring[RING - 1] = 1;
    set_desc(f->table, 1, RA + 0x1000, 8, 0, 0);
    assert_int_equal(vq_ring_pop(&r, &f->mem, &head, f->rd, &f->rd_cnt, f->wr, &f->wr_cnt, MAXIOV),
                     1);
    assert_int_equal(head, 1);
}

static void test_sizes(void **state)
{
    (void)state;
    assert_true(vq_size_valid(1));
    assert_true(vq_size_valid(1024));
    assert_true(vq_size_valid(32768));
    assert_false(vq_size_valid(0));
    assert_false(vq_size_valid(65536));
    assert_false(vq_size_valid(100));
    assert_int_equal(vq_used_bytes(RING), 6 + 8 * RING);
    assert_int_equal(vq_avail_bytes(RING), 6 + 2 * RING);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_simple_chain),
        T(test_loop),
        T(test_max_length_chain_ok),
        T(test_out_of_range_indices),
        T(test_addr_overflow),
        T(test_outside_memory),
        T(test_straddle_split),
        T(test_readable_after_writable),
        T(test_zero_length),
        T(test_huge_counts),
        T(test_indirect_ok),
        T(test_indirect_nested),
        T(test_indirect_bad_size),
        T(test_indirect_with_next),
        T(test_indirect_bad_next_and_loop),
        T(test_indirect_outside_or_straddling),
        T(test_ring_pop_push),
        T(test_ring_no_event_idx_flags),
        T(test_ring_malicious_avail),
        cmocka_unit_test(test_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
