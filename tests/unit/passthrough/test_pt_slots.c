/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The slot table under the inode and handle tables (daemon/passthrough/slots.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pt_slots_i.h"

struct thing {
    uint32_t idx;
    uint32_t link;
    uint64_t payload;
};

static unsigned inits;

static void thing_init(void *slot, uint32_t idx, void *arg)
{
    struct thing *t = slot;

    t->idx = idx;
    t->payload = (uint64_t)(uintptr_t)arg;
    inits++;
}

static unsigned finis;

static void thing_fini(void *slot)
{
    finis++;
}

static void test_alloc_free_reuse(void **state)
{
    struct pt_slots s;
    struct thing *a, *b, *c;

    inits = finis = 0;
    pt_slots_init(&s, sizeof(struct thing), offsetof(struct thing, link), thing_init,
                  (void *)(uintptr_t)42);
    assert_null(pt_slots_at(&s, 1)); /* nothing allocated yet */
    a = pt_slots_alloc_locked(&s);
    b = pt_slots_alloc_locked(&s);
    /* index 0 is never handed out; a new chunk's slots are all initialised */
    assert_int_equal(a->idx, 1);
    assert_int_equal(b->idx, 2);
    assert_int_equal(a->payload, 42);
    assert_int_equal(inits, PT_CHUNK_SIZE);
    assert_ptr_equal(pt_slots_at(&s, 2), b);
    assert_ptr_equal(pt_slots_get_locked(&s, 1), a);
    /* freed slots come back last in, first out, with their link cleared */
    pt_slots_free_locked(&s, 1);
    pt_slots_free_locked(&s, 2);
    c = pt_slots_alloc_locked(&s);
    assert_ptr_equal(c, b);
    assert_int_equal(c->link, 0);
    assert_ptr_equal(pt_slots_alloc_locked(&s), a);
    assert_int_equal(((struct thing *)pt_slots_alloc_locked(&s))->idx, 3);
    pt_slots_destroy(&s, thing_fini);
    assert_int_equal(finis, PT_CHUNK_SIZE);
    assert_null(pt_slots_at(&s, 1));
}

/* Slots never move: a second chunk leaves the first where it was. */
static void test_chunks_grow(void **state)
{
    struct pt_slots s;
    struct thing *first, *t = NULL;

    inits = 0;
    pt_slots_init(&s, sizeof(struct thing), offsetof(struct thing, link), thing_init, NULL);
    first = pt_slots_alloc_locked(&s);
    for (uint32_t i = 2; i <= PT_CHUNK_SIZE + 1; i++) {
        t = pt_slots_alloc_locked(&s);
        assert_non_null(t);
        assert_int_equal(t->idx, i);
    }
    assert_int_equal(inits, 2 * PT_CHUNK_SIZE);
    assert_ptr_equal(pt_slots_at(&s, 1), first);
    assert_ptr_equal(pt_slots_at(&s, PT_CHUNK_SIZE + 1), t);
    assert_null(pt_slots_at(&s, 2 * PT_CHUNK_SIZE)); /* third chunk never made */
    assert_null(pt_slots_at(&s, PT_MAX_SLOTS));      /* out of range, however asked */
    assert_null(pt_slots_at(&s, UINT32_MAX));
    pt_slots_destroy(&s, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_free_reuse),
        cmocka_unit_test(test_chunks_grow),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
