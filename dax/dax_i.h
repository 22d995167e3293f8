/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dax/ internals: the slot table, the per-inode index, the ghost list.
 *
 * Slot states (one slot = DAX_RANGE_SIZE bytes of the window):
 *
 *     +------+   (1)   +---------+   (2)   +--------+
 *     | FREE | ------> | MAPPING | ------> | MAPPED |
 *     +------+ <------ +---------+ <------ +--------+
 *       ^  ^     (3)                 (4)    |  ^  |
 *       |  |          +-----------+   (5)   |  |  |
 *       |  +--------- | UNMAPPING | <-------+  |  |
 *       |     (6)     +-----------+            |  |
 *       |                   |        (7)       |  |
 *       |                   +------------------+  |
 *       |                     (8)                 |
 *       +-----------------------------------------+
 *
 *   (1) apply_locked(): a setup claims a free slot
 *   (2) dax_slot_release_locked(): the map is done, at least one extent
 *   (3) dax_slot_release_locked(): the map failed, no extent
 *   (4) apply_locked(): a setup over a mapped slot claims it
 *   (5) apply_locked() for a remove; dax_remove_inode() for a freed inode
 *   (6) dax_slot_release_locked(): every extent gone
 *   (7) dax_slot_release_locked(): survivors of a split remain
 *   (8) dax_window_reset(): idle MAPPED slots only; a busy slot is released
 *       by its owner, who finds the epoch changed
 *
 *   MAPPED --(9)--> SYNCING --(10)--> MAPPED
 *   (9)  sync.c: a write-back or merge of the slot's store extents claims it
 *   (10) dax_slot_release_locked(): done; the extents are the same
 *
 * FREE and MAPPED are idle; MAPPING, UNMAPPING and SYNCING are busy: exactly one
 * thread owns the slot and works on it without the window lock (calls the
 * frontend, or reads, writes back and merges the slot's store pages).
 *   FREE    => no extents
 *   MAPPED  => at least one extent
 *   SYNCING => at least one extent, and they do not change
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
 *      A reset waits for SYNCING slots (their owners call no frontend and
 *      finish), then writes back the store extents it forgets; no slot is
 *      claimed from its epoch bump to its end (w->resetting), as it may drop
 *      the lock in between.
 *   5. A file's fds (dax_inode.fd, fd_rw) are set once while it has extents and
 *      closed when its last extent goes (after the lock is dropped: a close can
 *      block on a network file system). A thread uses them without the lock
 *      only while it owns a slot holding one of the file's extents.
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
    DAX_SLOT_SYNCING,
};

struct dax_inode;

/* store.c: the window store (see there). */
struct dax_store {
    int fd, shadow_fd;      /* memfds of size bytes; the frontend maps fd */
    uint8_t *mem, *shadow;  /* both mapped here */
    uint64_t size;
};

/* What a write-back or merge did. */
struct dax_store_sync {
    uint64_t pages;          /* blocks that differed */
    uint64_t bytes, runs;    /* write-back: bytes and runs written */
};

int dax_store_init(struct dax_store *st, uint64_t size);
void dax_store_fini(struct dax_store *st);
/* Replaces st's memfds by fd and shadow_fd (taken on success). */
int dax_store_adopt(struct dax_store *st, int fd, int shadow_fd);
/* [foffset, foffset + len) of fd into the store at m; past the file's end, zeros.
 * With shadow, the shadow takes the same. -errno (a read error) drops the range. */
int dax_store_fill(struct dax_store *st, int fd, uint64_t foffset, uint64_t m, uint64_t len,
                   bool shadow);
/* The shadow of [m, m + len) takes the store's bytes (a read mapping made writable). */
void dax_store_shadow_take(struct dax_store *st, uint64_t m, uint64_t len);
/* Gives [m, m + len) of the store and/or the shadow back to the system. */
void dax_store_drop(struct dax_store *st, uint64_t m, uint64_t len, bool store, bool shadow);
/* The guest's stores in [m, m + len) (store != shadow) to fd at foffset, clipped
 * to the file's size. 0 or the first write error (the rest stays to be written). */
int dax_store_writeback(struct dax_store *st, int fd, uint64_t foffset, uint64_t m,
                        uint64_t len, struct dax_store_sync *out);
/* The file's changes under [m, m + len) into the store (and the shadow when
 * writable); past the file's end the file reads as zeros. 0 or a read error. */
int dax_store_merge(struct dax_store *st, int fd, uint64_t foffset, uint64_t m, uint64_t len,
                    bool writable, struct dax_store_sync *out);

struct dax_extent {
    struct dax_inode *ino;   /* NULL = unused */
    uint64_t foffset;
    uint32_t off;            /* inside the slot, bytes */
    uint32_t len;            /* bytes, > 0 */
    bool writable;
    uint8_t backing;         /* enum dax_backing; a store extent's pages are at its
                              * window offset in the store (and the shadow when
                              * writable) */
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
    uint32_t refs;           /* operations in progress; forget waits for 0, and the
                              * fds stay while one runs (dax_inode_put_locked) */
    uint64_t decay_epoch;    /* w->decay_epoch when recent_* were last decayed */
    /* The file, for filling, writing back and merging (see "Locking", 5):
     * fd any access, fd_rw read-write; -1 until needed. */
    int fd, fd_rw;
    /* The file as a look took it just before a merge of all its store
     * mappings (merge_all_locked, sync.c): every store page holds the file as
     * it was then or later, so another stamp means the file changed since.
     * Not valid: unknown, or too recent to tell (dax_inode_set_seen_locked). */
    struct dax_file_stamp seen;
    bool seen_valid;
    /* Slot changes under way that bring store extents of this file (fills,
     * survivors): what they read may predate a look taken now (map.c). */
    uint32_t store_coming;
    /* The daemon changed the file itself since the last merge of it all: a
     * new size is not counted as the host's. */
    bool self_changed;
    int wb_err;              /* first write-back error since the last sync, or 0 */
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
    bool resetting;          /* a reset is under way: no slot is claimed */

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
    int64_t settle_ns; /* dax_config.settle_ns */

    struct dax_window_stats st; /* counters; derived fields filled on read */

    struct dax_store store;  /* the pages behind DAX_BACK_STORE extents */
    /* fds of files whose last extent went, closed after the lock is dropped
     * (dax_close_pending). */
    int *closing;
    uint32_t nclosing, closing_cap;
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
                          uint64_t foffset, uint32_t off, uint32_t len, bool writable,
                          enum dax_backing backing);
void dax_extent_del_locked(struct dax_window *w, uint32_t s, unsigned i);
void dax_slot_release_locked(struct dax_window *w, uint32_t s);
void dax_slot_wait_idle_locked(struct dax_window *w, uint32_t s);

static inline uint32_t dax_ext_id(uint32_t s, unsigned i)
{
    return s * DAX_SLOT_MAX_EXTENTS + i;
}

static inline bool dax_slot_busy(const struct dax_slot *sl)
{
    return sl->state == DAX_SLOT_MAPPING || sl->state == DAX_SLOT_UNMAPPING ||
           sl->state == DAX_SLOT_SYNCING;
}

static inline uint64_t dax_slot_base(uint32_t s)
{
    return (uint64_t)s << DAX_RANGE_SHIFT;
}

static inline bool dax_extent_store(const struct dax_extent *e)
{
    return e->backing == DAX_BACK_STORE;
}

static inline uint64_t dax_div_round_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* A consistent copy of what the JSON dump prints; *inodes is malloc'ed. */
int dax_stats_snapshot(struct dax_window *w, struct dax_window_stats *ws,
                       struct dax_inode_stats **inodes, size_t *n);

/* The file's fds go when its last extent does (dax_extent_del_locked); closed
 * by dax_close_pending() once the caller dropped the lock. */
void dax_inode_drop_fds_locked(struct dax_window *w, struct dax_inode *ino);
/* Drops an operation's reference (refs); the last one of a file without
 * extents takes its fds along (an operation in progress may map it again). */
void dax_inode_put_locked(struct dax_window *w, struct dax_inode *ino);
void dax_close_pending(struct dax_window *w);
/* fstat of fd as a stamp. 0 or -errno. */
int dax_stamp_fd(int fd, struct dax_file_stamp *out);
bool dax_stamp_equal(const struct dax_file_stamp *a, const struct dax_file_stamp *b);
/* Records the file's stamp as the window's view of it; kept as valid only
 * when the look was taken once the file system's clock had moved past it (a
 * later change could otherwise carry the same stamp) and the change it
 * shows had settled (w->settle_ns), so the next look merges meanwhile. */
void dax_inode_set_seen_locked(struct dax_window *w, struct dax_inode *ino,
                               const struct dax_file_stamp *s);

/* sync.c */
/*
 * Makes sure ino has the fds a store operation needs (fd, and fd_rw when
 * need_rw), through ops->open: 0 when it had them; 1 when it had to open one,
 * with the lock dropped meanwhile (the caller owns no slot and must look at
 * the table again); -errno when the open failed (also with the lock dropped).
 */
int dax_inode_open_fds_locked(struct dax_window *w, struct dax_inode *ino, bool need_rw);
/* Allocates the blocks under [off, off + len) that lie inside the file: 0, 1
 * when its file system cannot, or -errno (-ENOSPC, -EDQUOT). */
int dax_prealloc(int fd, uint64_t off, uint64_t len);
/* The owner of busy slot s writes back extent i's stores (lock held; dropped
 * around the I/O). 0 or the write error, also kept in ino->wb_err. */
int dax_extent_writeback_locked(struct dax_window *w, uint32_t s, unsigned i);

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
