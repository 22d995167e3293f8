/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunked slot tables behind the inode and handle tables (see struct
 * pt_slots in pt_slots_i.h): indices handed out from a free list or fresh, slots that
 * never move, chunk pointers readable without the owner's lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pt_slots_i.h"

void pt_slots_init(struct pt_slots *t, size_t size, size_t link,
                   void (*init)(void *slot, uint32_t idx, void *arg), void *arg)
{
    memset(t, 0, sizeof(*t));
    t->size = size;
    t->link = link;
    t->init = init;
    t->arg = arg;
    t->next_fresh = 1; /* index 0 is never used: 0 ends hash chains and free lists */
}

static uint32_t *pt_slots_link(const struct pt_slots *t, void *slot)
{
    return (uint32_t *)(void *)((char *)slot + t->link);
}

void *pt_slots_alloc_locked(struct pt_slots *t)
{
    void *slot;

    if (t->free_head) {
        slot = pt_slots_get_locked(t, t->free_head);
        t->free_head = *pt_slots_link(t, slot);
        *pt_slots_link(t, slot) = 0;
        return slot;
    }
    if (t->next_fresh >= PT_MAX_SLOTS)
        return NULL;
    uint32_t c = t->next_fresh >> PT_CHUNK_SHIFT;
    char *chunk = atomic_load_explicit(&t->chunks[c], memory_order_relaxed);
    if (!chunk) {
        chunk = calloc(PT_CHUNK_SIZE, t->size);
        if (!chunk)
            return NULL;
        for (uint32_t k = 0; k < PT_CHUNK_SIZE; k++)
            t->init(chunk + (size_t)k * t->size, (c << PT_CHUNK_SHIFT) | k, t->arg);
        atomic_store_explicit(&t->chunks[c], chunk, memory_order_release);
    }
    return chunk + (size_t)(t->next_fresh++ & (PT_CHUNK_SIZE - 1)) * t->size;
}

int pt_slots_reach_locked(struct pt_slots *t, uint32_t idx)
{
    if (idx >= PT_MAX_SLOTS)
        return -EINVAL;
    for (uint32_t c = t->next_fresh >> PT_CHUNK_SHIFT; c <= idx >> PT_CHUNK_SHIFT; c++) {
        if (atomic_load_explicit(&t->chunks[c], memory_order_relaxed))
            continue;
        char *chunk = calloc(PT_CHUNK_SIZE, t->size);
        if (!chunk)
            return -ENOMEM;
        for (uint32_t k = 0; k < PT_CHUNK_SIZE; k++)
            t->init(chunk + (size_t)k * t->size, (c << PT_CHUNK_SHIFT) | k, t->arg);
        atomic_store_explicit(&t->chunks[c], chunk, memory_order_release);
    }
    if (idx >= t->next_fresh)
        t->next_fresh = idx + 1;
    return 0;
}

void pt_slots_free_locked(struct pt_slots *t, uint32_t idx)
{
    *pt_slots_link(t, pt_slots_get_locked(t, idx)) = t->free_head;
    t->free_head = idx;
}

void pt_slots_refree_locked(struct pt_slots *t, bool (*unused)(void *slot, uint32_t gen_floor),
                            uint32_t gen_floor)
{
    t->free_head = 0;
    /* Highest first, so the lowest free index is reused first. */
    for (uint32_t idx = t->next_fresh; idx-- > 1;) {
        if (unused(pt_slots_get_locked(t, idx), gen_floor))
            pt_slots_free_locked(t, idx);
    }
}

void pt_slots_destroy(struct pt_slots *t, void (*fini)(void *slot))
{
    for (uint32_t c = 0; c < PT_MAX_CHUNKS; c++) {
        char *chunk = atomic_load(&t->chunks[c]);
        if (!chunk)
            continue;
        for (uint32_t k = 0; fini && k < PT_CHUNK_SIZE; k++)
            fini(chunk + (size_t)k * t->size);
        free(chunk);
        atomic_store(&t->chunks[c], NULL);
    }
}
