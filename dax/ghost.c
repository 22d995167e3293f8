/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The ghost list: the last ghost_cap file ranges removed from the window, keyed by
 * (inode key, file range index). A SETUPMAPPING that finds its range here was
 * evicted too early: a thrash miss. Like ARC's ghost lists, it remembers about as
 * many ranges as the window holds, so a hit means "a window twice this size would
 * have kept it".
 *
 * A ring of entries (the oldest is overwritten) with a chained hash over it.
 * All functions require w->lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "dax_i.h"

static uint32_t ghost_hash(const struct dax_window *w, uint64_t key, uint64_t ridx)
{
    uint64_t h = key * UINT64_C(0x9e3779b97f4a7c15) ^ ridx * UINT64_C(0xc2b2ae3d27d4eb4f);

    h ^= h >> 29;
    return (uint32_t)h & (w->ghost_buckets - 1);
}

int dax_ghost_init(struct dax_window *w, unsigned cap)
{
    uint32_t b = 16;

    while (b < cap && b < (1u << 30))
        b <<= 1;
    w->ghosts = calloc(cap, sizeof(*w->ghosts));
    w->ghost_hash = malloc(b * sizeof(*w->ghost_hash));
    if (!w->ghosts || !w->ghost_hash) {
        free(w->ghosts);
        free(w->ghost_hash);
        w->ghosts = NULL;
        w->ghost_hash = NULL;
        return -ENOMEM;
    }
    w->ghost_cap = cap;
    w->ghost_buckets = b;
    dax_ghost_clear_locked(w);
    return 0;
}

void dax_ghost_fini(struct dax_window *w)
{
    free(w->ghosts);
    free(w->ghost_hash);
}

void dax_ghost_clear_locked(struct dax_window *w)
{
    for (uint32_t i = 0; i < w->ghost_buckets; i++)
        w->ghost_hash[i] = DAX_NONE;
    for (uint32_t i = 0; i < w->ghost_cap; i++)
        w->ghosts[i].live = false;
    w->ghost_pos = 0;
    w->ghost_live = 0;
}

/* Unlink entry idx from its hash chain. */
static void ghost_unlink(struct dax_window *w, uint32_t idx)
{
    struct dax_ghost *g = &w->ghosts[idx];
    uint32_t *pp = &w->ghost_hash[ghost_hash(w, g->key, g->ridx)];

    while (*pp != idx) {
        assert(*pp != DAX_NONE);
        pp = &w->ghosts[*pp].hnext;
    }
    *pp = g->hnext;
    g->live = false;
    w->ghost_live--;
}

static uint32_t ghost_find(struct dax_window *w, uint64_t key, uint64_t ridx)
{
    uint32_t i = w->ghost_hash[ghost_hash(w, key, ridx)];

    while (i != DAX_NONE && (w->ghosts[i].key != key || w->ghosts[i].ridx != ridx))
        i = w->ghosts[i].hnext;
    return i;
}

void dax_ghost_add_locked(struct dax_window *w, uint64_t key, uint64_t ridx)
{
    uint32_t idx = ghost_find(w, key, ridx), b;
    struct dax_ghost *g;

    if (idx != DAX_NONE)
        ghost_unlink(w, idx); /* re-added as the newest */
    idx = w->ghost_pos;
    w->ghost_pos = (w->ghost_pos + 1) % w->ghost_cap;
    g = &w->ghosts[idx];
    if (g->live)
        ghost_unlink(w, idx); /* the oldest falls off */
    b = ghost_hash(w, key, ridx);
    g->key = key;
    g->ridx = ridx;
    g->hnext = w->ghost_hash[b];
    g->live = true;
    w->ghost_hash[b] = idx;
    w->ghost_live++;
}

bool dax_ghost_take_locked(struct dax_window *w, uint64_t key, uint64_t ridx)
{
    uint32_t idx = ghost_find(w, key, ridx);

    if (idx == DAX_NONE)
        return false;
    ghost_unlink(w, idx);
    return true;
}
