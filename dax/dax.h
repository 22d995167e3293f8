/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dax/: the DAX window manager (prefix dax_).
 *
 * Keeps the table of what the frontend has mapped into the DAX window (virtio
 * shared memory region 0), turns the guest's FUSE_SETUPMAPPING/REMOVEMAPPING into
 * exact map/unmap calls the frontend accepts, keeps activity and thrash statistics,
 * and decides per file whether DAX pays (FUSE_ATTR_DAX). Where mappings go is the
 * guest's choice; the frontend's wire formats are the daemon's.
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
 * Where the pages the frontend maps for a mapping come from (docs/dax.md,
 * "What the host can do to a mapped file"):
 *   DAX_BACK_STORE  the window store, the daemon's own memory (store.c): the
 *                   file's bytes are copied in when the range is mapped, the
 *                   guest's stores are written back to the file (sync, removal,
 *                   reset, periodically) and the file's changes merged in.
 *                   Nothing that happens to the file can take a page away from
 *                   the frontend, and a range may run past the file's end.
 *   DAX_BACK_FILE   the file itself, as the guest asked: no copy and no
 *                   write-back, but a page the file loses (a truncate by
 *                   another process, a block that cannot be allocated, a read
 *                   error) faults in the frontend. Only where the daemon was
 *                   told the guest alone changes the files (struct dax_setup).
 */
enum dax_backing {
    DAX_BACK_STORE,
    DAX_BACK_FILE,
};

/*
 * The frontend, as the daemon sees it. Called WITHOUT the window lock held.
 *
 * map, unmap and unmap_batch run on the thread that owns the slot being changed
 * (see "Locking" in dax_i.h). Several threads may be inside them at once, but
 * never for the same slot, and the ranges passed never overlap a range another
 * thread is working on. Each is one operation the mainline frontend accepts: map
 * never overlaps an existing mapping; unmap covers exactly one whole earlier map.
 * They return 0 or -errno; on failure the manager assumes the frontend changed
 * nothing. They must not call into the same window.
 *
 * open and usable run on a thread that owns no slot, and may call into the
 * window (the daemon may drop an inode, which unmaps its mappings).
 */
struct dax_ops {
    /*
     * Map len bytes of the open file fd at foffset into the window at moffset.
     * fd is lent for the call: a frontend that keeps the mapping takes its own
     * reference (vhost-user passes it with SCM_RIGHTS).
     */
    int (*map)(void *ctx, int fd, uint64_t foffset, uint64_t moffset, uint64_t len,
               bool writable);
    int (*unmap)(void *ctx, uint64_t moffset, uint64_t len);
    /*
     * Optional: unmap n (<= DAX_UNMAP_BATCH) exact mappings in one round trip (the
     * legacy protocol carries 8 per message). All or nothing. NULL: unmap() each.
     */
    int (*unmap_batch)(void *ctx, const struct fuse_removemapping_one *ranges, unsigned n);
    /*
     * Open file key again as the daemon (read-write when writable) for the
     * window's own use: the file of a mapping's survivor after a split (for the
     * frontend to map: for_frontend), or the file a store mapping is written
     * back to and merged from (a mapping restored after a restart). A new fd,
     * which the window closes, or -errno (a survivor is then lost on both sides,
     * as when its map fails; a write-back waits for the next try).
     */
    int (*open)(void *ctx, uint64_t key, bool writable, bool for_frontend);
    /* Optional: whether a frontend that can take mappings is there now. NULL: always. */
    bool (*usable)(void *ctx);
};

#define DAX_UNMAP_BATCH 8u

/* The largest window: the store maps two memfds of its size. */
#define DAX_STORE_MAX_SIZE (UINT64_C(1) << 40)

struct dax_config {
    uint64_t window_size;   /* bytes, a non-zero multiple of page_size, <= DAX_STORE_MAX_SIZE */
    uint64_t page_size;     /* mapping alignment; 0 = 4096. A power of two <= 2 MiB */
    enum dax_policy policy;
    unsigned ghost_capacity; /* remembered removed ranges; 0 = one per slot (min 64) */
    /* Recent-activity counters also halve every this many ns of wall time, read
     * when the policy runs, so a quiet window forgets old thrash. 0 = 1 s;
     * UINT64_MAX = only by activity (deterministic, for tests). */
    uint64_t decay_interval_ns;
    /* A look at a file counts (the store is taken to hold the file as the look
     * saw it) only once the file's last change is this old when the look is
     * taken: a write stamps the file before it copies its bytes, so the bytes of
     * a write stamped just before a merge may land after the merge read the
     * file, under the stamp the look saw. 0 = 1 s. */
    uint64_t settle_ns;
};

struct dax_window;

/* 0 or -EINVAL (bad config) / -ENOMEM. */
int dax_window_new(const struct dax_config *cfg, const struct dax_ops *ops, void *ctx,
                   struct dax_window **out);
/* The caller guarantees no other thread uses the window. Calls no callback. */
void dax_window_free(struct dax_window *w);

/* log2 of the page size: FUSE_INIT's map_alignment (12 for 4 KiB pages). */
unsigned dax_window_map_alignment(const struct dax_window *w);
enum dax_policy dax_window_policy(const struct dax_window *w);

/*
 * Frontend reset, FUSE_DESTROY or disconnect: forget every mapping without calling
 * the frontend (it drops its maps itself). Operations in flight finish against the
 * old frontend and their results are discarded (they return -ECONNRESET).
 * Statistics counters survive; the ghost list is cleared.
 */
void dax_window_reset(struct dax_window *w);

/*
 * Whether the window can be used now: ops->usable says a frontend that can take
 * mappings is connected. Without one, the daemon answers the mapping requests
 * ENOSYS and offers no map_alignment at INIT.
 */
bool dax_window_usable(struct dax_window *w);

/* ---- Validation of guest requests (pure, no lock) ------------------------------ */

/* A FUSE_SETUPMAPPING that passed dax_setup_check(). */
struct dax_setup {
    uint64_t foffset, len, moffset;
    bool writable;
    /*
     * Set by the daemon, not the guest (dax_setup_check leaves it false): the
     * frontend may map the file itself (DAX_BACK_FILE) because nothing but the
     * guest changes it and the range lies inside it. Otherwise, and wherever the
     * range is not inside the file, the window store backs it.
     */
    bool direct;
};

/*
 * The guest's FUSE_SETUPMAPPING arguments, checked once, before anything else
 * looks at them: len > 0; moffset, len and foffset multiples of the page size;
 * [moffset, moffset + len) inside the window; foffset + len representable as an
 * off_t; flags only READ|WRITE (no flag = read-only). 0 and *out, -EINVAL or
 * -EOVERFLOW.
 */
int dax_setup_check(const struct dax_window *w, const struct fuse_setupmapping_in *in,
                    struct dax_setup *out);
/*
 * FUSE_REMOVEMAPPING entries (already copied out of the guest buffer): count <=
 * DAX_REMOVE_MAX_ENTRIES and each entry aligned, non-empty and inside the window.
 * Count 0 is a valid no-op. 0 or -EINVAL.
 */
int dax_remove_check(const struct dax_window *w, const struct fuse_removemapping_one *e,
                     unsigned count);

/* ---- The guest's requests ------------------------------------------------------- */

/*
 * FUSE_SETUPMAPPING req, checked by dax_setup_check(): make [moffset, moffset +
 * len) of the window show file 'key' from foffset. fd is the file as the daemon
 * opened it for this request (lent for the call; read-write for a writable
 * mapping): the frontend maps it (DAX_BACK_FILE, req->direct) or the window
 * store is filled from it (DAX_BACK_STORE), and the window keeps a duplicate
 * to write back to and merge from. A writable mapping first has the file's
 * blocks under the range (inside the file) allocated, so a full file system
 * answers -ENOSPC (or -EDQUOT) here, where the guest's write returns it,
 * instead of failing a store later. Whatever was mapped there before is
 * written back and unmapped first (the
 * read->write upgrade, a replacement); parts of old mappings outside the range
 * survive (re-mapped as their own extents, through ops->open). An identical
 * existing mapping with enough rights is a no-op. A range crossing 2 MiB slots
 * is mapped one slot at a time; slots done before an error stay done.
 * -ENOSPC: a slot would need more than DAX_SLOT_MAX_EXTENTS mappings (nothing done
 * in that slot). -ENOMEM, -ECONNRESET (reset meanwhile), or the callback's error.
 */
int dax_setupmapping(struct dax_window *w, uint64_t key, int fd, const struct dax_setup *req);

/*
 * FUSE_REMOVEMAPPING: checks the entries (dax_remove_check()), then unmaps every
 * entry's range; mappings partly covered are split (the whole old mapping is
 * unmapped and the surviving pieces mapped again, through ops->open). Removing
 * unmapped space is not an error. Entries are done in order; the first error
 * stops. -ENOSPC as above (a split that does not fit).
 */
int dax_removemapping(struct dax_window *w, const struct fuse_removemapping_one *e,
                      unsigned count);

/* Unmap everything of file 'key' (inode eviction, file truncated). 0 or -errno. */
int dax_remove_inode(struct dax_window *w, uint64_t key);

/* ---- The file under store mappings ----------------------------------------------- */

/*
 * What the guest's stores into store mappings must have reached before the
 * daemon acts on file 'key' for the guest, and what the daemon's changes must
 * reach, so the window and the file agree: each is nothing (one look-up) for a
 * file without store mappings.
 */

/*
 * FUSE_FSYNC, FUSE_FLUSH: write the guest's stores back to the file. Returns
 * the first write-back error of the file since the last call (-ENOSPC, -EIO:
 * those bytes stay to be written; a local file system reports a failed
 * write-back at fsync the same way), else 0.
 */
int dax_inode_sync(struct dax_window *w, uint64_t key);

/*
 * Before the daemon reads or changes [off, off + len) of file key through
 * another fd (FUSE_READ, FUSE_WRITE, a truncate, FUSE_FALLOCATE, copy_file_range,
 * SEEK_DATA): the guest's stores there are written back. len UINT64_MAX: to
 * the end. 0 or the write-back's error.
 */
int dax_inode_before_io(struct dax_window *w, uint64_t key, uint64_t off, uint64_t len);

/*
 * After the daemon changed [off, off + len) of file key for the guest: the
 * store mappings there take the file's bytes, and direct writable mappings get
 * their blocks back if the change freed them (a hole punched, a truncate
 * undone), so a store through them cannot fail. The rest of the file's store
 * mappings take the host's changes at the next look (dax_inode_attr): the
 * file's new stamp cannot tell the daemon's change from one made beside it.
 */
void dax_inode_after_change(struct dax_window *w, uint64_t key, uint64_t off, uint64_t len);

/*
 * A file's size and times, as an attribute reply or fstat has them; taken_ns:
 * the coarse real-time clock just before an fstat (dax_stamp_fd), 0 when the
 * stamp comes from elsewhere. Only size and times are compared.
 */
struct dax_file_stamp {
    uint64_t size;
    int64_t mtime_ns, ctime_ns;
    int64_t taken_ns;
};

/*
 * Attributes of file key fresh from the host (an attribute reply is being
 * made): if they differ from what the window last saw of the file after its
 * own writes, the file changed under its store mappings and the changes are
 * merged in (a truncate clears the store past the new end). Counted per file:
 * the auto policy keeps files the host keeps changing off the window.
 */
void dax_inode_attr(struct dax_window *w, uint64_t key, const struct dax_file_stamp *now);

/* What dax_window_sync does; flags. */
enum {
    DAX_SYNC_WRITEBACK = 1 << 0, /* write the guest's stores back */
    DAX_SYNC_CHECK = 1 << 1,     /* merge files whose stamp changed (fstat) */
    DAX_SYNC_MERGE_ALL = 1 << 2, /* merge every store mapping, changed or not */
};

/*
 * Every file with store mappings (the daemon's periodic flusher, shutdown).
 * 0 or the first error (every file is still tried).
 */
int dax_window_sync(struct dax_window *w, unsigned what);

/*
 * The daemon forgets file 'key': drop its statistics and policy state. -EBUSY while
 * it still has mappings (call dax_remove_inode() first), -ENOENT when unknown.
 */
int dax_inode_forget(struct dax_window *w, uint64_t key);

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
    uint64_t store_extents; /* current mappings backed by the window store */
    uint64_t writeback_bytes; /* guest stores written back to the file */
    uint64_t writeback_errors;
    uint64_t host_changes;  /* times the file changed under store mappings */
    uint64_t recent_host_changes; /* halved like recent_maps */
    bool dax;               /* the policy's last answer */
    bool revoked;           /* off because it thrashed or the host keeps changing it */
};

struct dax_window_stats {
    uint64_t window_size;
    uint64_t nslots;
    uint64_t slots_used;    /* occupancy: slots with at least one mapping or busy */
    uint64_t extents;
    uint64_t bytes_mapped;
    uint64_t maps, upgrades, noops, unmaps, remaps, ghost_hits;
    uint64_t map_errors, unmap_errors;
    uint64_t map_lat_count, map_lat_sum_ns, map_lat_max_ns; /* around ops->map */
    uint64_t recent_maps, recent_ghost_hits;
    uint64_t admitted_bytes; /* sum over files the policy admitted */
    uint64_t ghost_entries;
    uint64_t inodes;
    enum dax_policy policy;
    /* Backing (enum dax_backing): new mappings of each kind, current bytes. */
    uint64_t store_maps, direct_maps;
    uint64_t store_bytes_mapped;
    uint64_t fill_bytes;     /* copied from files into the store */
    uint64_t prealloc_errors; /* writable maps refused: blocks could not be allocated */
    /* Write-back: extents with guest stores, bytes and runs written, failures. */
    uint64_t writebacks, writeback_bytes, writeback_runs, writeback_errors;
    /* Merges: store extents compared with their files, pages that had changed. */
    uint64_t merges, merged_pages, merge_errors;
    uint64_t host_changes;   /* files found changed under store mappings */
};

void dax_window_get_stats(struct dax_window *w, struct dax_window_stats *st);

/* One JSON object {"window": {...}, "inodes": [...]}, newline-terminated. 0/-errno. */
int dax_stats_json(struct dax_window *w, FILE *f);

/*
 * A daemon restart: the frontend still has a mapping the previous process made
 * (the guest keeps using it), and the new window learns of it without calling
 * the frontend. The arguments are untrusted (a saved state): they must pass
 * dax_setup_check (flags FUSE_SETUPMAPPING_FLAG_WRITE for writable), lie in one
 * slot, overlap nothing restored before, and fit the slot's extents; a store
 * mapping needs the old process's store (dax_window_restore_store first). Call
 * before the window serves requests. 0, -EINVAL, -EOVERFLOW, -EEXIST (overlap),
 * -ENOSPC (the slot is full), -ENOMEM.
 */
int dax_window_restore_mapping(struct dax_window *w, uint64_t key, uint64_t foffset,
                               uint64_t moffset, uint64_t len, bool writable,
                               enum dax_backing backing);

/*
 * The window store's two memfds (what the frontend maps, and the shadow), for
 * a restart to hand to the next process; the window keeps them.
 */
void dax_window_store_fds(const struct dax_window *w, int *store_fd, int *shadow_fd);
/*
 * A restart: the store the previous process's store mappings live in. Takes
 * both fds (on success). -EINVAL when they are not memfds of the window's size,
 * or the window already has store mappings.
 */
int dax_window_restore_store(struct dax_window *w, int store_fd, int shadow_fd);

/* Visit every mapping (a consistent snapshot), in window order. */
typedef void (*dax_mapping_fn)(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset,
                               uint64_t len, bool writable, enum dax_backing backing);
int dax_for_each_mapping(struct dax_window *w, dax_mapping_fn fn, void *opaque);

/* ---- Per-file DAX policy ------------------------------------------------------------ */

/* Thresholds; the reasons are in policy.c and docs/dax.md. */
#define DAX_POLICY_MIN_FILE_SIZE (UINT64_C(512) << 10)
#define DAX_POLICY_ADMIT_PCT 80u
#define DAX_POLICY_MIN_SAMPLES 16u
#define DAX_POLICY_REVOKE_PCT 25u
#define DAX_POLICY_READMIT_PCT 5u
#define DAX_POLICY_PERIOD_SLOTS 2u
#define DAX_POLICY_HOST_CHANGES 2u /* recent changes by others under store mappings */

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

#endif
