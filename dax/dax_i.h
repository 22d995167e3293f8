/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dax/ internals: the slot table, the per-inode index, the ghost list.
 *
 * Slot states (one slot = DAX_RANGE_SIZE bytes of the window):
 *
 *                 setup claims            map done, >= 1 extent
 *     +------+ ---------------> +---------+ -----------------> +--------+
 *     | FREE |                  | MAPPING |                    | MAPPED |
 *     +------+ <--------------- +---------+ <----------------- +--------+
 *       ^  ^    failed, 0 extents            setup over a mapped   |  ^
 *       |  |                                 slot claims           |  |
 *       |  |     all extents gone  +-----------+  remove/evict     |  |
 *       |  +---------------------- | UNMAPPING | <-----------------+  |
 *       |                          +-----------+   evict claims       |
 *       |                                |  survivors remain          |
 *       |                                +----------------------------+
 *       |  reset (idle MAPPED slots only; busy slots are finished by
 *       +---------------------------------------------- their owner)
 *
 * FREE and MAPPED are idle; MAPPING and UNMAPPING are busy: exactly one thread owns
 * the slot and calls the frontend for it without the window lock.
 *   FREE   => no extents
 *   MAPPED => at least one extent
 * Asserted by dax_slot_set_state_locked() and dax_slot_check_locked() in debug
 * builds.
 *
 * A slot holds up to DAX_SLOT_MAX_EXTENTS extents: page-aligned, non-overlapping
 * pieces of the slot, each exactly one frontend mapping. The Linux guest only ever
 * uses one whole-slot extent; sub-slot extents exist because the device spec allows
 * page-aligned requests and partial REMOVEMAPPING splits. An extent never crosses a
 * slot boundary.
 *
 * Locking:
 *   1. w->lock protects everything below: slots (state, extents), the inode
 *      table, the ghost list, the statistics, w->epoch.
 *   2. The frontend callbacks run without w->lock: map and unmap by the owner of
 *      a busy slot; open (a survivor's file) by a thread that owns no slot, as
 *      it may call into the window itself (slot_change_locked plans again after
 *      it).
 *   3. A thread that needs a busy slot waits on w->cond (broadcast whenever a slot
 *      becomes idle). A thread never waits for a slot while it owns another, so
 *      there is no lock order between slots and no deadlock.
 *   4. dax_window_reset() bumps w->epoch; an owner that finds the epoch changed
 *      before or after a callback drops its work (the frontend it talked to is
 *      gone). The daemon resets after its queue threads stopped, as vhost-user
 *      requires; a call in flight across a reset must not reach a frontend
 *      connected after it (the daemon's backend channel is per connection).
 * Functions named *_locked require w->lock.
 */
#ifndef VUFSD_DAX_I_H
#define VUFSD_DAX_I_H

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

#include "dax.h"
#include "vufs_util.h"

/*
 * Extents per slot. One is all a Linux guest uses; four leaves room for a
 * hostile or unusual guest's sub-slot requests and one split without letting it
 * grow the table: 4 x 48 bytes per 2 MiB of window.
 */
#define DAX_SLOT_MAX_EXTENTS 4u

#define DAX_NONE UINT32_MAX

enum dax_slot_state {
    DAX_SLOT_FREE,
    DAX_SLOT_MAPPING,
    DAX_SLOT_MAPPED,
    DAX_SLOT_UNMAPPING,
};

struct dax_inode;

struct dax_extent {
    struct dax_inode *ino;   /* NULL = unused */
    uint64_t foffset;
    uint32_t off;            /* inside the slot, bytes */
    uint32_t len;            /* bytes, > 0 */
    bool writable;
    uint32_t ino_prev, ino_next; /* extent ids (slot * MAX + i) in ino's list */
};

struct dax_slot {
    enum dax_slot_state state;
    uint64_t claim_epoch;    /* w->epoch when the owner claimed it (busy states) */
    uint32_t nextents;
    struct dax_extent ext[DAX_SLOT_MAX_EXTENTS];
};

struct dax_inode {
    uint64_t key;
    struct dax_inode *hnext;
    uint32_t ext_head;       /* first extent id, DAX_NONE */
    uint32_t refs;           /* operations in progress; forget waits for 0 */
    uint64_t decay_epoch;    /* w->decay_epoch when recent_* were last decayed */
    struct dax_inode_stats st;
};

struct dax_ghost {
    uint64_t key;
    uint64_t ridx;           /* file range index: foffset >> DAX_RANGE_SHIFT */
    uint32_t hnext;          /* hash chain */
    bool live;
};

struct dax_window {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const struct dax_ops *ops;
    void *ctx;
    uint64_t size;
    uint64_t page_size;
    enum dax_policy policy;
    uint32_t nslots;
    uint64_t epoch;          /* bumped by reset */

    struct dax_slot *slots;
    uint32_t nfree;          /* slots in FREE */
    uint32_t busy;           /* slots in MAPPING/UNMAPPING */

    struct dax_inode **ino_hash;
    uint32_t ino_buckets;    /* power of two */
    uint32_t ninodes;

    struct dax_ghost *ghosts; /* ring, oldest at ghost_pos when full */
    uint32_t *ghost_hash;
    uint32_t ghost_cap, ghost_buckets, ghost_pos, ghost_live;

    /* Recent-activity decay: halve recent_* every period_events maps. */
    uint64_t decay_epoch;
    uint64_t period_events, events_in_period;
    uint64_t decay_interval_ns, last_decay_ns;

    struct dax_window_stats st; /* counters; derived fields filled on read */
};

/* window.c */
void dax_slot_set_state_locked(struct dax_window *w, uint32_t s, enum dax_slot_state to);
void dax_slot_check_locked(const struct dax_window *w, uint32_t s);
struct dax_inode *dax_inode_find_locked(struct dax_window *w, uint64_t key);
struct dax_inode *dax_inode_get_locked(struct dax_window *w, uint64_t key);
void dax_inode_decay_locked(struct dax_window *w, struct dax_inode *ino);
void dax_window_decay_locked(struct dax_window *w);
void dax_activity_locked(struct dax_window *w);
void dax_decay_by_time_locked(struct dax_window *w);
int dax_extent_add_locked(struct dax_window *w, uint32_t s, struct dax_inode *ino,
                          uint64_t foffset, uint32_t off, uint32_t len, bool writable);
void dax_extent_del_locked(struct dax_window *w, uint32_t s, unsigned i);
void dax_slot_release_locked(struct dax_window *w, uint32_t s);
void dax_slot_wait_idle_locked(struct dax_window *w, uint32_t s);

static inline uint32_t dax_ext_id(uint32_t s, unsigned i)
{
    return s * DAX_SLOT_MAX_EXTENTS + i;
}

static inline bool dax_slot_busy(const struct dax_slot *sl)
{
    return sl->state == DAX_SLOT_MAPPING || sl->state == DAX_SLOT_UNMAPPING;
}

static inline uint64_t dax_div_round_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* A consistent copy of what the JSON dump prints; *inodes is malloc'ed. */
int dax_stats_snapshot(struct dax_window *w, struct dax_window_stats *ws,
                       struct dax_inode_stats **inodes, size_t *n);

/* ghost.c */
int dax_ghost_init(struct dax_window *w, unsigned cap);
void dax_ghost_fini(struct dax_window *w);
void dax_ghost_add_locked(struct dax_window *w, uint64_t key, uint64_t ridx);
/* Removes the entry if present: true = a ghost hit. */
bool dax_ghost_take_locked(struct dax_window *w, uint64_t key, uint64_t ridx);
void dax_ghost_clear_locked(struct dax_window *w);

/* policy.c */
void dax_policy_release_locked(struct dax_window *w, struct dax_inode *ino);

#endif
