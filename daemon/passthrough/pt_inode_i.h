/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The inode table (inode.c): host objects the client knows, by node id; statx of an fd. */
#ifndef VUFSD_PT_INODE_I_H
#define VUFSD_PT_INODE_I_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "pt_fhandle_i.h"
#include "pt_slots_i.h"

struct pt_fs;
struct pt_lock_owner;

/*
 * One host object the client may know. Node id = index | generation << 32;
 * the root is index 1 generation 0 = FUSE_ROOT_ID.
 *
 * An inode holds either an O_PATH fd (fd >= 0; the root always, and every
 * inode with --inode-file-handles never) or a file handle (mnt != NULL), which
 * costs no fd: pt_inode_fd() gives operations an O_PATH fd either way.
 *
 * Life: FREE --pt_inode_intern()--> LIVE (refs>0 or nlookup>0) --the last
 * pt_inode_put() or pt_inode_forget()--> FREE (pt_inode_free_locked(), which
 * asserts both counts are zero: gen incremented, fd closed or handle freed). refs is ours (in-flight
 * operations, open handles, the root's permanent reference); nlookup is the
 * client's, untrusted. A LIVE inode found to be stale (its handle no longer
 * matches what its key names: the host reused the inode number) is unhashed
 * and lives on only for the node id the client has.
 */
struct pt_inode {
    struct pt_fs *fs;    /* immutable */
    uint32_t idx;        /* immutable */
    /* Immutable while LIVE: */
    int fd;              /* O_PATH|O_NOFOLLOW, or -1 with a handle */
    dev_t dev;
    ino_t ino;
    uint64_t mnt_id;
    struct pt_mount *mnt; /* referenced; non-NULL iff the inode keeps fh */
    struct pt_fh fh;
    /*
     * The reference word: gen << 32 | PT_I_LIVE | refs, where refs counts the
     * in-flight operations and open handles (bounded by the fd budget). An
     * operation takes and drops a reference with atomics alone (pt_inode_get,
     * pt_inode_ref, pt_inode_put: a request on a known node id takes no table
     * lock, which every queue thread would otherwise write); gen and PT_I_LIVE
     * change only under pt_itab.lock, together with gen and live below, and an inode is freed only by a compare-and-swap of
     * gen | PT_I_LIVE | 0 to 0 under that lock (pt_inode_try_free_locked), which
     * fails when a reference was taken meanwhile. Not LIVE: 0.
     */
    _Atomic uint64_t rs;
    /* Written under pt_itab.lock; read without it by pt_inode_put, whose last
     * reference and a FORGET's last lookup each see the other's write
     * (sequentially consistent), so one of them frees the inode. */
    _Atomic uint64_t nlookup;
    /* Protected by pt_itab.lock: */
    uint32_t gen;
    uint32_t hnext;      /* hash chain, 0 = end */
    uint32_t fnext;      /* free list, 0 = end */
    uint16_t type;       /* S_IFMT bits (immutable while LIVE): the type never changes */
    bool live;
    bool hashed;         /* findable by its key */
    uint8_t fdc_slot;    /* pt_fdc entry + 1, 0 = none; protected by pt_fdc.lock */
    /* Lock-free: the remapped security.capability is known to be absent. */
    atomic_bool cap_clean;
    /* A lock the guest held through this inode could not be taken again when
     * a saved state was loaded: its reads, writes and lock requests get EIO
     * until its last handle closes (never data another lock holder wrote). */
    atomic_bool lock_lost;
    /* Lock-free: the DAX window may have mappings of this inode (set by a
     * SETUPMAPPING or a restore, never cleared while LIVE): its reads and
     * changes go by the window (pt_dax_before/after). */
    atomic_bool dax_mapped;
    /* Protected by pt_inode_lock(i): */
    unsigned nhandles;            /* open handles on this inode */
    struct pt_lock_owner *owners; /* POSIX lock owners' open file descriptions */
};

#define PT_I_LIVE (1ull << 31)
#define PT_I_REFMASK (PT_I_LIVE - 1)

struct pt_itab {
    pthread_mutex_t lock;
    struct pt_slots slots; /* of struct pt_inode; protected by lock */
    size_t count;         /* LIVE inodes; protected by lock */
    uint32_t *buckets;    /* protected by lock */
    size_t nbuckets;      /* power of two; protected by lock */
    uint32_t gen_base;    /* generation of never-used slots (a restore raises it); lock */
};

int pt_itab_init(struct pt_fs *fs);
void pt_itab_destroy(struct pt_fs *fs);

/*
 * Restore (pt_state_load.c): an inode placed at exactly the index and generation the
 * guest knows it by. fd (owned) xor mnt+fh (a referenced mount; fh is taken).
 */
struct pt_inode_image {
    uint32_t idx, gen;
    uint64_t nlookup;
    mode_t type;
    dev_t dev;
    ino_t ino;
    uint64_t mnt_id;
    bool hashed;
    int fd;
    struct pt_mount *mnt;
    struct pt_fh fh;
};
/* -EEXIST when the slot is taken or (hashed) the key is known; -EINVAL, -ENOMEM.
 * On success the inode holds what im gave; on failure nothing is taken. */
int pt_inode_restore(struct pt_fs *fs, const struct pt_inode_image *im, struct pt_inode **out);
/* After the last pt_inode_restore: the free slots get generation gen_floor at least. */
void pt_itab_restore_finish(struct pt_fs *fs, uint32_t gen_floor);
/* Calls fn on every LIVE inode under the table lock (fn takes no pt lock);
 * *gen_floor: one more than the highest generation of any slot. */
void pt_itab_image(struct pt_fs *fs, void (*fn)(void *ctx, const struct pt_inode *i), void *ctx,
                   uint32_t *gen_floor);

static inline uint64_t pt_inode_nodeid(const struct pt_inode *i)
{
    return (uint64_t)i->idx | ((uint64_t)i->gen << 32);
}

/* Takes a reference on the inode behind nodeid; -ESTALE when unknown. */
int pt_inode_get(struct pt_fs *fs, uint64_t nodeid, struct pt_inode **out);
/* pt_inode_get of an inode of type (S_IFREG...); wrong_type when it is another. */
int pt_inode_get_type(struct pt_fs *fs, uint64_t nodeid, mode_t type, int wrong_type,
                      struct pt_inode **out);
/* Takes another reference on an inode already referenced by the caller. */
void pt_inode_ref(struct pt_inode *i);
void pt_inode_put(struct pt_inode *i);
/*
 * The known inode st (a statx with STATX_MNT_ID) describes, referenced, and with
 * count_lookup its client count grown by one; -ENOENT when it is not known or is
 * kept by a file handle rather than an O_PATH fd (its number proves nothing).
 */
int pt_inode_find(struct pt_fs *fs, const struct statx *st, bool count_lookup,
                  struct pt_inode **out);
/*
 * Finds the inode of the object fd (O_PATH, ownership taken) refers to, or adds
 * it. Returns it referenced; with count_lookup, the client's count grows by one.
 * -EMFILE when a new inode would pass the fd budget. With file handles the
 * inode keeps a handle and fd is closed; with mandatory handles, an object
 * without one fails with the errno of name_to_handle_at (or -EOPNOTSUPP).
 */
int pt_inode_intern(struct pt_fs *fs, int fd, const struct statx *st, bool count_lookup,
                    struct pt_inode **out);
/* pt_inode_intern after a statx of fd (into st): fd is taken in every case. */
int pt_inode_intern_fd(struct pt_fs *fs, int fd, struct statx *st, bool count_lookup,
                       struct pt_inode **out);
/* Drops n of the client's lookups, clamped at zero. */
void pt_inode_forget(struct pt_fs *fs, uint64_t nodeid, uint64_t n);
/* Drops every inode but the root (reset). */
void pt_itab_reset(struct pt_fs *fs);

/* pt_inode_get, then pt_inode_fd: the inode and an O_PATH fd on its object. */
int pt_inode_get_fd(struct pt_fs *fs, uint64_t nodeid, struct pt_inode **i, struct pt_ifd *f);

static inline void pt_inode_putp(struct pt_inode **i)
{
    if (*i)
        pt_inode_put(*i);
}
#define _cleanup_inode_ __attribute__((cleanup(pt_inode_putp)))

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

#define PT_STATX_MASK (STATX_BASIC_STATS | STATX_MNT_ID)

/* The attributes of the object behind fd (O_PATH is fine), with its mount id. */
static inline int pt_statx_fd(int fd, struct statx *st)
{
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, PT_STATX_MASK, st) < 0)
        return -errno;
    return 0;
}

#endif
