/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dax/: the DAX window manager (prefix dax_).
 *
 * Keeps the table of what the frontend has mapped into the DAX window (virtio
 * shared memory region 0), turns the guest's FUSE_SETUPMAPPING/REMOVEMAPPING into
 * exact map/unmap calls the frontend accepts, keeps recency and thrash statistics,
 * decides per file whether DAX pays (FUSE_ATTR_DAX), can place mappings itself with
 * LRU reclaim, and encodes the two frontend wire protocols.
 *
 * It uses no other vufsd module and no glib. The frontend is reached only through
 * struct dax_ops, provided by the daemon (or by a unit test's fake frontend).
 *
 * Errors are negative errno values. Nothing here logs.
 * Design and tuning: docs/dax.md.
 */
#ifndef VUFSD_DAX_H
#define VUFSD_DAX_H

#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The window is cut into 2 MiB slots because the Linux guest (fs/fuse/dax.c) maps
 * it in ranges of 1 << FUSE_DAX_SHIFT bytes with FUSE_DAX_SHIFT = 21, a compile-time
 * constant of the guest kernel that neither the device nor the mount can change.
 * Tracking state per 2 MiB slot therefore matches every request a Linux guest sends.
 */
#define DAX_RANGE_SHIFT 21
#define DAX_RANGE_SIZE (UINT64_C(1) << DAX_RANGE_SHIFT)

/* FUSE_REMOVEMAPPING_MAX_ENTRY: one guest page of 16-byte entries. */
#define DAX_REMOVE_MAX_ENTRIES 256u

/* Flags FUSE_SETUPMAPPING may carry; anything else is rejected. */
#define DAX_SETUP_KNOWN_FLAGS (FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE)

enum dax_policy {
    DAX_POLICY_NEVER,
    DAX_POLICY_ALWAYS,
    DAX_POLICY_AUTO,
};

/*
 * The frontend, as the daemon sees it. Called WITHOUT the window lock held, by the
 * thread that owns the slot being changed (see "Locking" in dax_i.h). Several
 * threads may be inside callbacks at once, but never for the same slot, and the
 * ranges passed never overlap a range another thread is working on.
 *
 * Every call is one operation the mainline frontend accepts: map never overlaps an
 * existing mapping; unmap covers exactly one whole earlier map. A callback returns 0
 * or -errno; on failure the manager assumes the frontend changed nothing.
 * Callbacks must not call into the same window.
 */
struct dax_ops {
    /* Map len bytes of the file 'key' at foffset into the window at moffset. */
    int (*map)(void *ctx, uint64_t key, uint64_t foffset, uint64_t moffset, uint64_t len,
               bool writable);
    int (*unmap)(void *ctx, uint64_t moffset, uint64_t len);
    /*
     * Optional: unmap n (<= DAX_UNMAP_BATCH) exact mappings in one round trip (the
     * legacy protocol carries 8 per message). All or nothing. NULL: unmap() each.
     */
    int (*unmap_batch)(void *ctx, const struct fuse_removemapping_one *ranges, unsigned n);
};

#define DAX_UNMAP_BATCH 8u

struct dax_config {
    uint64_t window_size;   /* bytes, a non-zero multiple of page_size */
    uint64_t page_size;     /* mapping alignment; 0 = 4096. A power of two <= 2 MiB */
    enum dax_policy policy;
    unsigned ghost_capacity; /* remembered removed ranges; 0 = one per slot (min 64) */
    /* Recent-activity counters also halve every this many ns of wall time, read
     * when the policy runs, so a quiet window forgets old thrash. 0 = 1 s;
     * UINT64_MAX = only by activity (deterministic, for tests). */
    uint64_t decay_interval_ns;
};

struct dax_window;

/* 0 or -EINVAL (bad config) / -ENOMEM. */
int dax_window_new(const struct dax_config *cfg, const struct dax_ops *ops, void *ctx,
                   struct dax_window **out);
/* The caller guarantees no other thread uses the window. Calls no callback. */
void dax_window_free(struct dax_window *w);

uint64_t dax_window_size(const struct dax_window *w);
/* log2 of the page size: FUSE_INIT's map_alignment (12 for 4 KiB pages). */
unsigned dax_window_map_alignment(const struct dax_window *w);
unsigned dax_window_nslots(const struct dax_window *w);

/*
 * Frontend reset, FUSE_DESTROY or disconnect: forget every mapping without calling
 * the frontend (it drops its maps itself). Operations in flight finish against the
 * old frontend and their results are discarded (they return -ECONNRESET).
 * Statistics counters survive; the ghost list is cleared.
 */
void dax_window_reset(struct dax_window *w);

/* ---- Validation of guest requests (pure, no lock) ------------------------------ */

/*
 * FUSE_SETUPMAPPING arguments: len > 0; moffset, len and foffset multiples of the
 * page size; [moffset, moffset + len) inside the window; foffset + len representable
 * as an off_t; flags only READ|WRITE (no flag = read-only). 0, -EINVAL, -EOVERFLOW.
 */
int dax_setup_check(const struct dax_window *w, uint64_t moffset, uint64_t len,
                    uint64_t foffset, uint64_t flags);
/*
 * FUSE_REMOVEMAPPING entries (already copied out of the guest buffer): count <=
 * DAX_REMOVE_MAX_ENTRIES and each entry aligned, non-empty and inside the window.
 * Count 0 is a valid no-op. 0 or -EINVAL.
 */
int dax_remove_check(const struct dax_window *w, const struct fuse_removemapping_one *e,
                     unsigned count);

/* ---- The guest's requests ------------------------------------------------------- */

/*
 * FUSE_SETUPMAPPING: after dax_setup_check(), make [moffset, moffset + len) of the
 * window show file 'key' from foffset. Whatever was mapped there before is unmapped
 * first (the read->write upgrade, a replacement); parts of old mappings outside the
 * range survive (re-mapped as their own extents). An identical existing mapping with
 * enough rights is a no-op. A range crossing 2 MiB slots is mapped one slot at a
 * time; slots done before an error stay done.
 * -ENOSPC: a slot would need more than DAX_SLOT_MAX_EXTENTS mappings (nothing done
 * in that slot). -ENOMEM, -ECONNRESET (reset meanwhile), or the callback's error.
 */
int dax_setupmapping(struct dax_window *w, uint64_t key, uint64_t foffset, uint64_t len,
                     uint64_t moffset, uint64_t flags);

/*
 * FUSE_REMOVEMAPPING: after dax_remove_check(), unmap every entry's range; mappings
 * partly covered are split (the whole old mapping is unmapped and the surviving
 * pieces mapped again). Removing unmapped space is not an error. Entries are done in
 * order; the first error stops. -ENOSPC as above (a split that does not fit).
 */
int dax_removemapping(struct dax_window *w, const struct fuse_removemapping_one *e,
                      unsigned count);

/* Unmap everything of file 'key' (inode eviction, file truncated). 0 or -errno. */
int dax_remove_inode(struct dax_window *w, uint64_t key);

/*
 * The daemon forgets file 'key': drop its statistics and policy state. -EBUSY while
 * it still has mappings (call dax_remove_inode() first), -ENOENT when unknown.
 */
int dax_inode_forget(struct dax_window *w, uint64_t key);

/* ---- Placement by the manager (the emulated recency-aware guest) ------------- */

/*
 * Find or make a whole-slot mapping of the 2 MiB range of 'key' containing foffset,
 * writable if asked (upgrading a read-only one). Takes a free slot, else reclaims
 * the least recently used unpinned slots, up to a batch at a time. The slot comes
 * back PINNED: *moffset is its window offset; call dax_unpin() when done with it.
 * -ENOSPC when every slot is pinned, or a callback error.
 */
int dax_place(struct dax_window *w, uint64_t key, uint64_t foffset, bool writable,
              uint64_t *moffset);
/* Pins taken here or by dax_place() keep a mapped slot from reclaim. */
int dax_pin(struct dax_window *w, uint64_t moffset);   /* -EINVAL, -ENOENT (not mapped) */
int dax_unpin(struct dax_window *w, uint64_t moffset); /* -EINVAL (not pinned) */

/* ---- Statistics ------------------------------------------------------------------- */

struct dax_inode_stats {
    uint64_t key;
    uint64_t extents;       /* current mappings */
    uint64_t bytes_mapped;  /* current */
    uint64_t maps;          /* new mappings made for this file */
    uint64_t upgrades;      /* read->write at the same place */
    uint64_t unmaps;        /* mappings removed */
    uint64_t ghost_hits;    /* maps of ranges recently removed: thrash misses */
    /* Halved every activity period (see DAX_POLICY_PERIOD_SLOTS): recent demand. */
    uint64_t recent_maps;
    uint64_t recent_ghost_hits;
    uint64_t admitted_bytes; /* window demand charged while the policy says DAX */
    bool dax;               /* the policy's last answer */
    bool revoked;           /* off because it thrashed (re-admission needs calm) */
};

struct dax_window_stats {
    uint64_t window_size;
    uint64_t nslots;
    uint64_t slots_used;    /* occupancy: slots with at least one mapping or busy */
    uint64_t extents;
    uint64_t bytes_mapped;
    uint64_t maps, upgrades, noops, unmaps, remaps, reclaims, ghost_hits;
    uint64_t map_errors, unmap_errors;
    uint64_t map_lat_count, map_lat_sum_ns, map_lat_max_ns; /* around ops->map */
    uint64_t recent_maps, recent_ghost_hits;
    uint64_t admitted_bytes; /* sum over files the policy admitted */
    uint64_t ghost_entries;
    uint64_t inodes;
    enum dax_policy policy;
};

void dax_window_get_stats(struct dax_window *w, struct dax_window_stats *st);
int dax_inode_get_stats(struct dax_window *w, uint64_t key, struct dax_inode_stats *st);

/* One JSON object {"window": {...}, "inodes": [...]}, newline-terminated. 0/-errno. */
int dax_stats_json(struct dax_window *w, FILE *f);

/*
 * A daemon restart: the frontend still has a mapping the previous process made
 * (the guest keeps using it), and the new window learns of it without calling
 * the frontend. The arguments are untrusted (a saved state): they must pass
 * dax_setup_check (flags FUSE_SETUPMAPPING_FLAG_WRITE for writable), lie in one
 * slot, overlap nothing restored before, and fit the slot's extents. Call
 * before the window serves requests. 0, -EINVAL, -EOVERFLOW, -EEXIST (overlap),
 * -ENOSPC (the slot is full), -ENOMEM.
 */
int dax_window_restore_mapping(struct dax_window *w, uint64_t key, uint64_t foffset,
                               uint64_t moffset, uint64_t len, bool writable);

/* Visit every mapping (a consistent snapshot), in window order. */
typedef void (*dax_mapping_fn)(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset,
                               uint64_t len, bool writable);
int dax_for_each_mapping(struct dax_window *w, dax_mapping_fn fn, void *opaque);

/* ---- Per-file DAX policy ------------------------------------------------------------ */

/* Thresholds; the reasons are in policy.c and docs/dax.md. */
#define DAX_POLICY_MIN_FILE_SIZE (UINT64_C(512) << 10)
#define DAX_POLICY_ADMIT_PCT 80u
#define DAX_POLICY_MIN_SAMPLES 16u
#define DAX_POLICY_REVOKE_PCT 25u
#define DAX_POLICY_READMIT_PCT 5u
#define DAX_POLICY_PERIOD_SLOTS 2u

struct dax_policy_input {
    enum dax_policy policy;
    bool is_regular;
    uint64_t file_size;
    struct dax_inode_stats ino;  /* recent_* already decayed */
    struct dax_window_stats win; /* recent_* already decayed */
};

/* The decision alone: a pure function of its input. true = set FUSE_ATTR_DAX. */
bool dax_policy_decide(const struct dax_policy_input *in);

/*
 * What the passthrough calls when filling a fuse_attr: decides (dax_policy_decide),
 * remembers the answer for hysteresis and charges the file's size against the
 * window's demand while it is admitted. Under 'auto' an unknown regular file gets a
 * record (dropped by dax_inode_forget()); 'never', 'always' and non-regular files
 * keep no state.
 */
bool dax_policy_attr_dax(struct dax_window *w, uint64_t key, uint64_t file_size,
                         bool is_regular);

const char *dax_policy_name(enum dax_policy p);
/* "never" | "always" | "auto" -> 0 and *out, else -EINVAL. */
int dax_policy_parse(const char *s, enum dax_policy *out);

/* ---- Wire formats of the two frontend protocols (wire.c) ---------------------- */
/*
 * All integers little-endian (vhost-user is little-endian). These encode payloads
 * only; the 12-byte vhost-user header, NEED_REPLY and the SCM_RIGHTS fd belong to
 * the daemon. Layouts are spelled out in docs/dax.md.
 */
#define DAX_VHOST_USER_PROTOCOL_F_SHMEM 22u
#define DAX_VHOST_USER_GET_SHMEM_CONFIG 44u       /* front -> back */
#define DAX_VHOST_USER_BACKEND_SHMEM_MAP 9u       /* back -> front, fd attached */
#define DAX_VHOST_USER_BACKEND_SHMEM_UNMAP 10u
#define DAX_VHOST_USER_SLAVE_FS_MAP 6u            /* legacy, fd attached */
#define DAX_VHOST_USER_SLAVE_FS_UNMAP 7u          /* legacy */

#define DAX_SHMEM_MAX_REGIONS 256u
#define DAX_SHMEM_CONFIG_SIZE (8u + 8u * DAX_SHMEM_MAX_REGIONS) /* 2056 */
#define DAX_SHMEM_MSG_SIZE 40u
#define DAX_SHMEM_FLAG_RW UINT64_C(1)

#define DAX_LEGACY_ENTRIES 8u
#define DAX_LEGACY_MSG_SIZE (4u * 8u * DAX_LEGACY_ENTRIES) /* 256 */
#define DAX_LEGACY_FLAG_R UINT64_C(1)
#define DAX_LEGACY_FLAG_W UINT64_C(2)
#define DAX_LEGACY_UNMAP_ALL UINT64_MAX /* len of an UNMAP entry: the whole window */

struct dax_shmem_msg {
    uint8_t shmid;
    uint64_t fd_offset;
    uint64_t shm_offset;
    uint64_t len;
    uint64_t flags;
};

struct dax_legacy_entry {
    uint64_t fd_offset;
    uint64_t c_offset;  /* window offset */
    uint64_t len;
    uint64_t flags;     /* DAX_LEGACY_FLAG_* */
};

/* GET_SHMEM_CONFIG reply: nregions regions, sizes[i] for shmid i. -EINVAL if > 256. */
int dax_wire_shmem_config_encode(uint8_t out[DAX_SHMEM_CONFIG_SIZE], const uint64_t *sizes,
                                 unsigned nregions);
void dax_wire_shmem_encode(uint8_t out[DAX_SHMEM_MSG_SIZE], const struct dax_shmem_msg *m);
/* -EINVAL: short, padding not zero, or unknown flags. */
int dax_wire_shmem_decode(const uint8_t *buf, size_t len, struct dax_shmem_msg *m);

/*
 * Encode up to DAX_LEGACY_ENTRIES entries (unused slots zero, which the frontend
 * skips). Returns how many were taken (the caller sends the rest in the next
 * message), or -EINVAL for an entry with len 0 (it would be skipped silently) or
 * unknown flags.
 */
int dax_wire_legacy_encode(uint8_t out[DAX_LEGACY_MSG_SIZE], const struct dax_legacy_entry *e,
                           unsigned n);
/* Decode the non-empty entries into e[8]; returns their count. -EINVAL: short. */
int dax_wire_legacy_decode(const uint8_t *buf, size_t len,
                           struct dax_legacy_entry e[DAX_LEGACY_ENTRIES]);
/* A legacy frontend's 8-byte reply: 0 = success, anything else (often 1) = -EIO. */
int dax_wire_legacy_reply(uint64_t value);

#endif
