/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Slot tables (slots.c): the fixed-size slots under the inode and handle tables. */
#ifndef VUFSD_PT_SLOTS_I_H
#define VUFSD_PT_SLOTS_I_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tables grow in chunks so a slot's address never changes while referenced. */
#define PT_CHUNK_SHIFT 10u
#define PT_CHUNK_SIZE (1u << PT_CHUNK_SHIFT)
#define PT_MAX_CHUNKS 4096u /* 4M inodes / handles: far past any fd budget */
#define PT_MAX_SLOTS (PT_CHUNK_SIZE * PT_MAX_CHUNKS)

/*
 * The table under the inode and the handle tables: fixed-size slots addressed
 * by index, grown PT_CHUNK_SIZE at a time so a slot never moves while it is
 * referenced; index 0 is never handed out (0 ends hash chains and free lists).
 * A freed slot keeps its memory and goes on a free list threaded through the
 * uint32_t at offset 'link' of each slot. Allocation and freeing are under the
 * owner's lock; pt_slots_at() needs no lock (chunk pointers are published with
 * release ordering and freed only by pt_slots_destroy), so the handle table's
 * READ/WRITE path takes none.
 */
struct pt_slots {
    _Atomic(char *) chunks[PT_MAX_CHUNKS]; /* written under the owner's lock */
    size_t size;                           /* bytes per slot; immutable */
    size_t link;                           /* offset of the free-list link; immutable */
    void (*init)(void *slot, uint32_t idx, void *arg); /* each slot of a new chunk */
    void *arg;
    uint32_t next_fresh;                   /* first never-used index; owner's lock */
    uint32_t free_head;                    /* owner's lock */
};

void pt_slots_init(struct pt_slots *t, size_t size, size_t link,
                   void (*init)(void *slot, uint32_t idx, void *arg), void *arg);
/* The slot at idx, or NULL when its chunk was never allocated (inline: the
 * READ/WRITE path finds its handle here). */
static inline void *pt_slots_at(const struct pt_slots *t, uint32_t idx)
{
    char *chunk;

    if (idx >= PT_MAX_SLOTS)
        return NULL;
    chunk = atomic_load_explicit(&t->chunks[idx >> PT_CHUNK_SHIFT], memory_order_acquire);
    return chunk ? chunk + (size_t)(idx & (PT_CHUNK_SIZE - 1)) * t->size : NULL;
}

/* The slot at an index below next_fresh, whose chunk exists (owner's lock held). */
static inline void *pt_slots_get_locked(const struct pt_slots *t, uint32_t idx)
{
    char *chunk = atomic_load_explicit(&t->chunks[idx >> PT_CHUNK_SHIFT], memory_order_relaxed);

    assert(idx < t->next_fresh && chunk);
    return chunk + (size_t)(idx & (PT_CHUNK_SIZE - 1)) * t->size;
}
/* A free slot (its link cleared), or NULL: out of memory or PT_MAX_SLOTS used. */
void *pt_slots_alloc_locked(struct pt_slots *t);
void pt_slots_free_locked(struct pt_slots *t, uint32_t idx);
/* Restore: every slot up to idx exists (next_fresh past it); the slots skipped
 * are on no free list until the owner rebuilds it. 0, -EINVAL, -ENOMEM. */
int pt_slots_reach_locked(struct pt_slots *t, uint32_t idx);
/* Restore, at the end: the free list rebuilt from every slot below next_fresh
 * that unused says is free (never-used slots too: the old process may have used
 * them); unused raises a free slot's generation to gen_floor first. */
void pt_slots_refree_locked(struct pt_slots *t, bool (*unused)(void *slot, uint32_t gen_floor),
                            uint32_t gen_floor);
/* Frees every chunk, after fini on each slot of it (fini may be NULL). */
void pt_slots_destroy(struct pt_slots *t, void (*fini)(void *slot));

#endif
