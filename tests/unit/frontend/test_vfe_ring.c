/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Split ring bookkeeping; the test plays the device side on the shared memory. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <linux/virtio_ring.h>

#include "vfe.h"

struct fix {
    struct vfe_mem *mem;
    struct vfe_vq *vq;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    unsigned num;
    uint16_t dev_avail; /* device's last_avail */
};

static int make(void **state, bool event_idx, bool indirect)
{
    struct fix *f = calloc(1, sizeof(*f));
    assert_int_equal(vfe_mem_new(NULL, &f->mem), 0);
    struct vfe_vq_config qc = { .index = 1, .size = 8, .event_idx = event_idx,
                                .indirect = indirect };
    assert_int_equal(vfe_vq_new(f->mem, &qc, &f->vq), 0);
    f->num = 8;
    uint64_t d, a, u;
    vfe_vq_gpas(f->vq, &d, &a, &u);
    f->desc = vfe_mem_gpa_to_hva(f->mem, d, 16 * 8);
    f->avail = vfe_mem_gpa_to_hva(f->mem, a, 6 + 2 * 8);
    f->used = vfe_mem_gpa_to_hva(f->mem, u, 6 + 8 * 8);
    assert_non_null(f->desc);
    assert_non_null(f->avail);
    assert_non_null(f->used);
    /* SET_VRING_ADDR carries our virtual addresses of the same memory. */
    struct vfe_vu_addr va;
    vfe_vq_addr(f->vq, &va);
    assert_int_equal(va.index, 1);
    assert_int_equal(va.desc_user_addr, (uintptr_t)f->desc);
    assert_int_equal(va.avail_user_addr, (uintptr_t)f->avail);
    assert_int_equal(va.used_user_addr, (uintptr_t)f->used);
    *state = f;
    return 0;
}

static int setup_plain(void **state)
{
    return make(state, false, true);
}

static int setup_event_idx(void **state)
{
    return make(state, true, true);
}

static int teardown(void **state)
{
    struct fix *f = *state;
    vfe_vq_free(f->vq);
    vfe_mem_free(f->mem);
    free(f);
    return 0;
}

/* Device: takes the next available head. */
static uint16_t dev_pop(struct fix *f)
{
    assert_true(f->avail->idx != f->dev_avail);
    return f->avail->ring[f->dev_avail++ % f->num];
}

static void dev_push(struct fix *f, uint32_t id, uint32_t len)
{
    struct vring_used_elem *e = &f->used->ring[f->used->idx % f->num];
    e->id = id;
    e->len = len;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    f->used->idx++;
}

static uint64_t kicks(struct fix *f)
{
    uint64_t v = 0;
    if (read(vfe_vq_kick_fd(f->vq), &v, sizeof(v)) != sizeof(v))
        return 0;
    return v;
}

static void test_direct_chain(void **state)
{
    struct fix *f = *state;
    struct vfe_sg out[2] = { { 0x1000, 40 }, { 0x2000, 100 } };
    struct vfe_sg in[2] = { { 0x3000, 16 }, { 0x4000, 4096 } };
    int token = 5;
    assert_int_equal(vfe_vq_free_descs(f->vq), 8);
    assert_int_equal(vfe_vq_add(f->vq, out, 2, in, 2, false, &token), 0);
    assert_int_equal(vfe_vq_free_descs(f->vq), 4);
    assert_int_equal(vfe_vq_in_flight(f->vq), 1);
    /* Not published before the kick. */
    assert_int_equal(f->avail->idx, 0);
    assert_true(vfe_vq_kick(f->vq, false));
    assert_int_equal(kicks(f), 1);
    assert_int_equal(f->avail->idx, 1);
    uint16_t head = dev_pop(f);
    /* Walk the chain as a device would. */
    const struct vfe_sg *want[4] = { &out[0], &out[1], &in[0], &in[1] };
    uint16_t i = head;
    for (unsigned k = 0; k < 4; k++) {
        assert_int_equal(f->desc[i].addr, want[k]->gpa);
        assert_int_equal(f->desc[i].len, want[k]->len);
        assert_int_equal(!!(f->desc[i].flags & VRING_DESC_F_WRITE), k >= 2);
        assert_int_equal(!!(f->desc[i].flags & VRING_DESC_F_NEXT), k < 3);
        assert_false(f->desc[i].flags & VRING_DESC_F_INDIRECT);
        i = f->desc[i].next;
    }
    void *tok;
    uint32_t len;
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), -EAGAIN);
    dev_push(f, head, 1234);
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
    assert_ptr_equal(tok, &token);
    assert_int_equal(len, 1234);
    assert_int_equal(vfe_vq_free_descs(f->vq), 8);
    assert_int_equal(vfe_vq_in_flight(f->vq), 0);
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), -EAGAIN);
}

static void test_indirect(void **state)
{
    struct fix *f = *state;
    struct vfe_sg out[3] = { { 0x1000, 40 }, { 0x2000, 8 }, { 0x2100, 8 } };
    struct vfe_sg in[1] = { { 0x3000, 16 } };
    assert_int_equal(vfe_vq_add(f->vq, out, 3, in, 1, true, NULL), 0);
    assert_int_equal(vfe_vq_free_descs(f->vq), 7); /* one ring descriptor */
    vfe_vq_kick(f->vq, false);
    uint16_t head = dev_pop(f);
    assert_int_equal(f->desc[head].flags, VRING_DESC_F_INDIRECT);
    assert_int_equal(f->desc[head].len, 4 * 16);
    struct vring_desc *t = vfe_mem_gpa_to_hva(f->mem, f->desc[head].addr, 4 * 16);
    assert_non_null(t);
    assert_int_equal(t[0].addr, 0x1000);
    assert_int_equal(t[0].next, 1);
    assert_int_equal(t[2].flags, VRING_DESC_F_NEXT);
    assert_int_equal(t[3].addr, 0x3000);
    assert_int_equal(t[3].flags, VRING_DESC_F_WRITE);
    dev_push(f, head, 16);
    void *tok;
    uint32_t len;
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
    assert_int_equal(vfe_vq_free_descs(f->vq), 8);
    /* Too many for a table, or no tables at all. */
    struct vfe_sg many[VFE_VQ_INDIRECT_MAX + 1];
    for (unsigned k = 0; k < VFE_VQ_INDIRECT_MAX + 1; k++)
        many[k] = (struct vfe_sg){ 0x1000, 1 };
    assert_int_equal(vfe_vq_add(f->vq, many, VFE_VQ_INDIRECT_MAX + 1, NULL, 0, true, NULL),
                     -EINVAL);
}

static void test_full_and_out_of_order(void **state)
{
    struct fix *f = *state;
    struct vfe_sg sg[2] = { { 0x1000, 40 }, { 0x3000, 100 } };
    int tokens[4];
    for (int k = 0; k < 4; k++)
        assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, &tokens[k]), 0);
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), -ENOSPC);
    assert_int_equal(vfe_vq_add(f->vq, NULL, 0, NULL, 0, false, NULL), -EINVAL);
    vfe_vq_kick(f->vq, false);
    uint16_t heads[4];
    for (int k = 0; k < 4; k++)
        heads[k] = dev_pop(f);
    /* Complete 2, 0, 3, 1. */
    int order[4] = { 2, 0, 3, 1 };
    for (int k = 0; k < 4; k++)
        dev_push(f, heads[order[k]], 10 + (uint32_t)k);
    for (int k = 0; k < 4; k++) {
        void *tok;
        uint32_t len;
        assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
        assert_ptr_equal(tok, &tokens[order[k]]);
        assert_int_equal(len, 10 + (uint32_t)k);
    }
    assert_int_equal(vfe_vq_free_descs(f->vq), 8);
    /* The recycled descriptors form valid chains again. */
    for (int k = 0; k < 4; k++)
        assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, &tokens[k]), 0);
    assert_int_equal(vfe_vq_free_descs(f->vq), 0);
}

static void test_bad_used_entries(void **state)
{
    struct fix *f = *state;
    struct vfe_sg sg[2] = { { 0x1000, 40 }, { 0x3000, 100 } };
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    vfe_vq_kick(f->vq, false);
    uint16_t head = dev_pop(f);
    void *tok;
    uint32_t len;
    /* Longer than the writable space we offered. */
    dev_push(f, head, 101);
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), -EPROTO);
    assert_true(vfe_vq_broken(f->vq));
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), -EIO);
    vfe_vq_reset(f->vq, 0);
    f->dev_avail = 0;
    assert_false(vfe_vq_broken(f->vq));
    /* A head that is not in flight (a chain's second descriptor). */
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    vfe_vq_kick(f->vq, false);
    head = dev_pop(f);
    dev_push(f, f->desc[head].next, 0);
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), -EPROTO);
    vfe_vq_reset(f->vq, 0);
    f->dev_avail = 0;
    /* An id past the ring, and a used index running ahead. */
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    dev_push(f, 4000, 0);
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), -EPROTO);
    vfe_vq_reset(f->vq, 0);
    f->used->idx = 100;
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), -EPROTO);
}

static void test_notify_suppression(void **state)
{
    struct fix *f = *state;
    struct vfe_sg sg[2] = { { 0x1000, 40 }, { 0x3000, 100 } };
    f->used->flags = VRING_USED_F_NO_NOTIFY;
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    assert_false(vfe_vq_kick(f->vq, false));
    assert_int_equal(kicks(f), 0);
    assert_true(vfe_vq_kick(f->vq, true));
    assert_int_equal(kicks(f), 1);
    /* Polling mode asks the device not to interrupt. */
    vfe_vq_disable_cb(f->vq);
    assert_int_equal(f->avail->flags, VRING_AVAIL_F_NO_INTERRUPT);
    assert_int_equal(vfe_vq_wait(f->vq, 0), -ETIMEDOUT);
    assert_int_equal(f->avail->flags, 0);
}

static void test_event_idx(void **state)
{
    struct fix *f = *state;
    struct vfe_sg sg[2] = { { 0x1000, 40 }, { 0x3000, 100 } };
    __virtio16 *avail_event = (__virtio16 *)&f->used->ring[f->num];
    __virtio16 *used_event = &f->avail->ring[f->num];
    /* Device wants a kick when avail passes 0: this publish (0 -> 1) kicks. */
    *avail_event = 0;
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    assert_true(vfe_vq_kick(f->vq, false));
    assert_int_equal(kicks(f), 1);
    /* Device now only wants a kick past 5: publishing 1 -> 2 stays quiet. */
    *avail_event = 5;
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    assert_false(vfe_vq_kick(f->vq, false));
    assert_int_equal(kicks(f), 0);
    /* used_event follows what we consumed, so the device knows when to call. */
    uint16_t h0 = dev_pop(f);
    uint16_t h1 = dev_pop(f);
    dev_push(f, h0, 0);
    dev_push(f, h1, 0);
    void *tok;
    uint32_t len;
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
    assert_int_equal(*used_event, 1);
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
    assert_int_equal(*used_event, 2);
    /* Nothing more: wait times out with zero timeout, used_event stays armed. */
    assert_int_equal(vfe_vq_wait(f->vq, 0), -ETIMEDOUT);
    assert_int_equal(*used_event, 2);
}

static void test_wait_wakes(void **state)
{
    struct fix *f = *state;
    struct vfe_sg sg[2] = { { 0x1000, 40 }, { 0x3000, 100 } };
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    vfe_vq_kick(f->vq, false);
    uint16_t h = dev_pop(f);
    dev_push(f, h, 0);
    /* A completion already there: no need for the eventfd. */
    assert_int_equal(vfe_vq_wait(f->vq, -1), 0);
    void *tok;
    uint32_t len;
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
    /* A call with nothing new returns (spurious wake-ups are allowed). */
    uint64_t one = 1;
    assert_int_equal(write(vfe_vq_call_fd(f->vq), &one, sizeof(one)), 8);
    assert_int_equal(vfe_vq_wait(f->vq, -1), 0);
    /* The call was consumed. */
    struct pollfd p = { .fd = vfe_vq_call_fd(f->vq), .events = POLLIN };
    assert_int_equal(poll(&p, 1, 0), 0);
}

/* The device side of test_halt_poll: completes, and only later notifies. */
struct late_call {
    struct fix *f;
    uint16_t head;
    bool called;
};

/* With two CPUs or more the waiter and the device thread get one each: the
 * waiter's halt poll then does not give its CPU away and stop early. */
static void one_cpu(cpu_set_t *set, int cpu)
{
    CPU_ZERO(set);
    CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) > 1 ? cpu : 0, set);
}

static void *complete_then_call(void *arg)
{
    struct late_call *lc = arg;
    usleep(500);
    dev_push(lc->f, lc->head, 0);
    usleep(20000); /* the waiter halt-polls across this */
    __atomic_store_n(&lc->called, true, __ATOMIC_RELEASE);
    uint64_t one = 1;
    assert_int_equal(write(vfe_vq_call_fd(lc->f->vq), &one, sizeof(one)), 8);
    return NULL;
}

static void test_halt_poll(void **state)
{
    struct fix *f = *state;
    struct vfe_sg sg[2] = { { 0x1000, 40 }, { 0x3000, 100 } };
    /* Nothing comes: the poll is bounded by the window, the wait by its timeout. */
    vfe_vq_set_halt_poll(f->vq, 1000 * 1000);
    assert_int_equal(vfe_vq_wait(f->vq, 0), -ETIMEDOUT);
    /* A completion seen while polling does not end the wait: its notification
     * does (a few rounds: a poll cut short by a busy CPU proves nothing). */
    vfe_vq_set_halt_poll(f->vq, 5ull * 1000 * 1000 * 1000);
    cpu_set_t was, mine, its;
    assert_int_equal(sched_getaffinity(0, sizeof(was), &was), 0);
    one_cpu(&mine, 0);
    one_cpu(&its, 1);
    assert_int_equal(sched_setaffinity(0, sizeof(mine), &mine), 0);
    for (int round = 0; round < 5; round++) {
        assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
        vfe_vq_kick(f->vq, false);
        struct late_call lc = { .f = f, .head = dev_pop(f) };
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        assert_int_equal(pthread_attr_setaffinity_np(&attr, sizeof(its), &its), 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, &attr, complete_then_call, &lc), 0);
        pthread_attr_destroy(&attr);
        assert_int_equal(vfe_vq_wait(f->vq, -1), 0);
        assert_true(__atomic_load_n(&lc.called, __ATOMIC_ACQUIRE));
        pthread_join(t, NULL);
        /* ... and the notification was taken. */
        struct pollfd p = { .fd = vfe_vq_call_fd(f->vq), .events = POLLIN };
        assert_int_equal(poll(&p, 1, 0), 0);
        void *tok;
        uint32_t len;
        assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
    }
    assert_int_equal(sched_setaffinity(0, sizeof(was), &was), 0);
}

static void test_reset_and_base(void **state)
{
    struct fix *f = *state;
    struct vfe_sg sg[2] = { { 0x1000, 40 }, { 0x3000, 100 } };
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    vfe_vq_kick(f->vq, false);
    assert_int_equal(vfe_vq_avail_idx(f->vq), 1);
    vfe_vq_reset(f->vq, 300);
    assert_int_equal(vfe_vq_avail_idx(f->vq), 300);
    assert_int_equal(vfe_vq_in_flight(f->vq), 0);
    assert_int_equal(vfe_vq_free_descs(f->vq), 8);
    assert_int_equal(f->avail->idx, 300);
    assert_int_equal(f->used->idx, 300);
    f->dev_avail = 300;
    assert_int_equal(vfe_vq_add(f->vq, &sg[0], 1, &sg[1], 1, false, NULL), 0);
    vfe_vq_kick(f->vq, false);
    uint16_t h = dev_pop(f);
    dev_push(f, h, 5);
    void *tok;
    uint32_t len;
    assert_int_equal(vfe_vq_get_used(f->vq, &tok, &len), 0);
    assert_int_equal(len, 5);
}

static void test_raw(void **state)
{
    struct fix *f = *state;
    vfe_vq_raw_set_desc(f->vq, 3, 0xdead0000, 77, VRING_DESC_F_NEXT, 3); /* a loop */
    assert_int_equal(f->desc[3].addr, 0xdead0000);
    assert_int_equal(f->desc[3].next, 3);
    vfe_vq_raw_publish(f->vq, 3);
    assert_int_equal(f->avail->idx, 1);
    assert_int_equal(f->avail->ring[0], 3);
    vfe_vq_raw_set_avail_idx(f->vq, 200);
    assert_int_equal(f->avail->idx, 200);
    vfe_vq_raw_kick(f->vq);
    assert_int_equal(kicks(f), 1);
    assert_int_equal(vfe_vq_raw_wait_used(f->vq, 0, 0), -ETIMEDOUT);
    dev_push(f, 9, 4);
    assert_int_equal(vfe_vq_raw_wait_used(f->vq, 0, -1), 0);
    assert_int_equal(vfe_vq_raw_used_idx(f->vq), 1);
    uint32_t id, len;
    vfe_vq_raw_used_elem(f->vq, 0, &id, &len);
    assert_int_equal(id, 9);
    assert_int_equal(len, 4);
    assert_ptr_equal(vfe_vq_raw_desc(f->vq), f->desc);
}

static void test_bad_sizes(void **state)
{
    struct vfe_mem *m = NULL;
    struct vfe_vq *vq = NULL;
    assert_int_equal(vfe_mem_new(NULL, &m), 0);
    struct vfe_vq_config qc = { .size = 100 };
    assert_int_equal(vfe_vq_new(m, &qc, &vq), -EINVAL);
    qc.size = 0;
    assert_int_equal(vfe_vq_new(m, &qc, &vq), -EINVAL);
    qc.size = 65536;
    assert_int_equal(vfe_vq_new(m, &qc, &vq), -EINVAL);
    /* A queue without indirect tables refuses indirect requests. */
    qc.size = 4;
    assert_int_equal(vfe_vq_new(m, &qc, &vq), 0);
    struct vfe_sg sg = { 0x1000, 1 };
    assert_int_equal(vfe_vq_add(vq, &sg, 1, NULL, 0, true, NULL), -EINVAL);
    vfe_vq_free(vq);
    vfe_mem_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_direct_chain, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_indirect, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_full_and_out_of_order, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_bad_used_entries, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_notify_suppression, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_event_idx, setup_event_idx, teardown),
        cmocka_unit_test_setup_teardown(test_wait_wakes, setup_event_idx, teardown),
        cmocka_unit_test_setup_teardown(test_halt_poll, setup_event_idx, teardown),
        cmocka_unit_test_setup_teardown(test_halt_poll, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_reset_and_base, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_raw, setup_plain, teardown),
        cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
