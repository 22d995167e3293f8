/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Private header of the passthrough filesystem (prefix pt_).
 *
 * Files, one concern each:
 *   fs.c        pt_fs_new/free/reset, INIT flags, the ops table, statfs/syncfs
 *   core.c      what the operations share: attributes and entries, lookups, the
 *               name check, reopening an inode's object, xattr calls on it
 *   inode.c     inode table: O_PATH fd or file handle per inode, key -> index hash, refcounts
 *   fhandle.c   inode file handles, the mount fds they are opened on, pt_inode_fd
 *   handle.c    open-file handle table: lock-free lookup on the READ/WRITE path
 *   slots.c     the slot tables under the inode and handle tables
 *   cred.c      per-thread caller credentials for creating operations, umask
 *   secctx.c    security labels of new inodes
 *   idmap.c     --translate-uid/gid
 *   attr.c      lookup/forget/getattr/setattr/statx/access/readlink
 *   dir.c       mkdir/mknod/symlink/link/unlink/rmdir/rename, opendir/readdir
 *   file.c      open/create/tmpfile/read/write/release/fsync/flush/...
 *   xattr.c     get/set/list/removexattr
 *   xattrmap.c  the --xattrmap rule language
 *   lock.c      POSIX (OFD) locks, flock, the SETLKW waiter thread
 *   pt_dax.c    SETUPMAPPING/REMOVEMAPPING, FUSE_ATTR_DAX, the window's file opens
 *   pt_state_save.c, pt_state_load.c, pt_state_find.c
 *               the saved state: encoding it, decoding it, finding its objects
 *               again on the host (format and shared parts: pt_state_i.h)
 *
 * Calls go down these layers, never up:
 *   1. fs.c, pt_state_*.c              the filesystem as a whole, its saved state
 *   2. attr.c dir.c file.c xattr.c     the operations; they do not call each other,
 *      lock.c pt_dax.c                 but for FLUSH and RELEASE (file.c) dropping
 *                                      locks through lock.c
 *   3. cred.c secctx.c                 helpers of the creating operations
 *   4. core.c
 *   5. inode.c handle.c fhandle.c      the tables
 *   6. slots.c idmap.c xattrmap.c
 * The inode table and the I/O paths reach pt_dax.c through struct pt_dax_hooks.
 *
 * Lock order (take in this order, never the reverse):
 *   1. pt_handle.lock        (per handle: directory stream)
 *   2. pt_locks.lock         (SETLKW waiter list)
 *   3. pt_inode_lock(i)      (per inode, striped: lock owners, open handle count)
 *   4. pt_itab.lock          (inode table)
 *   5. pt_mnts.lock          (mount fds of inode file handles)
 *   6. pt_fdc.lock           (cache of O_PATH fds opened from handles)
 *   7. pt_htab.lock          (handle table free list; allocation only)
 * No lock is held across a blocking syscall on guest-chosen objects except
 * pt_handle.lock around a directory's getdents.
 */
#ifndef VUFSD_PT_I_H
#define VUFSD_PT_I_H

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "passthrough.h"
#include "vufs_util.h"

/* Tables grow in chunks so a slot's address never changes while referenced. */
#define PT_CHUNK_SHIFT 10u
#define PT_CHUNK_SIZE (1u << PT_CHUNK_SHIFT)
#define PT_MAX_CHUNKS 4096u /* 4M inodes / handles: far past any fd budget */
#define PT_MAX_SLOTS (PT_CHUNK_SIZE * PT_MAX_CHUNKS)

/* ---- Slot tables (slots.c) ---------------------------------------------------- */

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

/* fds kept back from RLIMIT_NOFILE for the daemon itself: 64 + 5 %. */
#define PT_FD_HEADROOM_FIXED 64
#define PT_FD_HEADROOM_PERCENT 5

/* Stripes of the per-inode lock (pt_inode_lock). */
#define PT_INODE_LOCK_STRIPES 64u

/* Longest path written for /proc/self/fd/N. */
#define PT_PROC_PATH_MAX 32

struct pt_fs;

/* ---- Inode file handles (fhandle.c) ------------------------------------------ */

/* Handle bytes kept inside the inode; longer handles (btrfs, NFS, overlayfs) go
 * to the heap. ext4 makes 8 bytes, tmpfs 12, XFS 8 to 16. */
#define PT_FH_INLINE 16u
/* The kernel's MAX_HANDLE_SZ: no filesystem encodes more. */
#define PT_FH_MAX 128u

/* A struct file_handle the daemon made with name_to_handle_at (never one from the client). */
struct pt_fh {
    int32_t type;      /* handle_type */
    uint8_t len;       /* handle_bytes, <= PT_FH_MAX */
    union {
        unsigned char inl[PT_FH_INLINE]; /* len <= PT_FH_INLINE */
        unsigned char *ext;              /* len > PT_FH_INLINE: malloc'd */
    } u;
};

/*
 * An fd open_by_handle_at() interprets handles against: a non-O_PATH fd on an
 * object of the mount (the kernel refuses O_PATH). One per mount the share
 * spans, created from the first object the daemon meets on it (the share's
 * root, or a submount's root directory), freed with the last inode on it.
 */
struct pt_mount {
    struct pt_mount *next; /* protected by pt_mnts.lock */
    uint64_t mnt_id;       /* immutable */
    int fd;                /* immutable */
    unsigned refs;         /* inodes with a handle on this mount; protected by pt_mnts.lock */
};

struct pt_mnts {
    pthread_mutex_t lock;
    struct pt_mount *head; /* protected by lock */
    unsigned count;        /* protected by lock */
};

int pt_mnts_init(struct pt_mnts *m);
void pt_mnts_destroy(struct pt_fs *fs);

/*
 * A small cache of O_PATH fds opened from inode handles, so that a directory
 * many LOOKUPs go through, or a file that is looked at again and again, is not
 * reopened each time (open_by_handle_at costs about as much as the lookup it
 * serves). Bounded: PT_FDC_SIZE fds and at most 1/PT_FDC_BUDGET_SHARE of the
 * fd budget (which counts them); an entry in use is never evicted, the least
 * recently used idle one is.
 */
#define PT_FDC_SIZE 128u
#define PT_FDC_BUDGET_SHARE 8

struct pt_fdc_entry {
    struct pt_inode *ino; /* NULL: free */
    int fd;
    unsigned users;       /* pt_ifd borrowing fd now */
    uint64_t used;        /* clock of the last use */
};

struct pt_fdc {
    pthread_mutex_t lock;
    struct pt_fdc_entry e[PT_FDC_SIZE]; /* protected by lock */
    uint64_t clock;                     /* protected by lock */
    unsigned count;                     /* entries in use; protected by lock */
    uint64_t hits, misses;              /* protected by lock */
};

void pt_fdc_init(struct pt_fdc *c);
void pt_fdc_destroy(struct pt_fs *fs);
/* Under pt_itab.lock, for an inode being freed (no users): its cached fd, or -1. */
int pt_fdc_drop_locked(struct pt_fs *fs, struct pt_inode *i);

/*
 * The handle of the object behind fd (O_PATH is fine) and a referenced mount fd
 * for its mount, created on first use from fd itself when fd is a directory or
 * a regular file. -EOPNOTSUPP when the filesystem makes no handles, or when
 * its mount can be reached only through a special file.
 */
int pt_fh_make(struct pt_fs *fs, int fd, mode_t type, uint64_t mnt_id, struct pt_fh *fh,
               struct pt_mount **mnt);
bool pt_fh_equal(const struct pt_fh *a, const struct pt_fh *b);
void pt_fh_free(struct pt_fh *fh);
void pt_mnt_put(struct pt_fs *fs, struct pt_mount *m);
/* Restore (pt_state_load.c): a mount fd handed over by the previous process, referenced
 * once (the caller's); NULL when out of memory or the fd budget (fd closed). */
struct pt_mount *pt_mnt_adopt(struct pt_fs *fs, uint64_t mnt_id, int fd);
/* open_by_handle_at(m->fd, fh, flags | O_CLOEXEC): a new fd or -errno (-ESTALE: gone). */
int pt_fh_open(const struct pt_mount *m, const struct pt_fh *fh, int flags);

/* ---- Inodes (inode.c) ------------------------------------------------------ */

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

/*
 * An O_PATH fd on the object of inode i for *at() calls and /proc/self/fd
 * paths: the inode's own fd (borrowed), or one opened from its handle (owned,
 * closed by the cleanup). Open it before pt_cred_enter: open_by_handle_at
 * needs CAP_DAC_READ_SEARCH, which a switched thread no longer has.
 */
struct pt_ifd {
    int fd;
    bool owned;           /* a temporary fd to close */
    uint8_t fdc_slot;     /* borrowed from the fd cache: entry + 1 */
    struct pt_fs *fs;
};
#define PT_IFD_NONE { .fd = -1, .owned = false, .fdc_slot = 0, .fs = NULL }
int pt_inode_fd(struct pt_fs *fs, struct pt_inode *i, struct pt_ifd *out);
/* pt_inode_get, then pt_inode_fd: the inode and an O_PATH fd on its object. */
int pt_inode_get_fd(struct pt_fs *fs, uint64_t nodeid, struct pt_inode **i, struct pt_ifd *f);
void pt_fdc_unborrow(struct pt_fs *fs, uint8_t slot);
static inline void pt_ifd_close(struct pt_ifd *f)
{
    if (f->owned && f->fd >= 0) {
        int saved = errno;
        close(f->fd);
        errno = saved;
    }
    if (f->fdc_slot)
        pt_fdc_unborrow(f->fs, f->fdc_slot);
    f->fd = -1;
    f->owned = false;
    f->fdc_slot = 0;
}
#define _cleanup_ifd_ __attribute__((cleanup(pt_ifd_close)))

static inline void pt_inode_putp(struct pt_inode **i)
{
    if (*i)
        pt_inode_put(*i);
}
#define _cleanup_inode_ __attribute__((cleanup(pt_inode_putp)))

/* ---- Handles (handle.c) ---------------------------------------------------- */

/*
 * A POSIX lock owner's open file description on an inode (lock.c makes them;
 * the inode's last handle closes them, handle.c). Protected by pt_inode_lock.
 */
struct pt_lock_owner {
    struct pt_lock_owner *next;
    uint64_t owner;
    int fd;
    uint32_t pid;  /* the client pid of its last granted lock, for GETLK */
};

/*
 * An open file or directory. fh = index | generation << 32.
 *
 * state packs generation (bits 63..32), CLOSING (bit 31) and the reference
 * count (bits 30..0). Life: FREE (refs 0) --pt_handle_new()--> OPEN (refs >= 1,
 * the base reference) --pt_handle_close() (RELEASE) sets CLOSING and drops the
 * base--> CLOSING --the last pt_handle_put()--> FREE with generation + 1
 * (pt_handle_free(); pt_handle_put() asserts CLOSING in debug builds). Lookups only succeed in OPEN, with a CAS that
 * checks the generation, so READ/WRITE take no table lock.
 */
struct pt_handle {
    struct pt_fs *fs;                /* immutable */
    uint32_t idx;                    /* immutable */
    _Atomic uint64_t state;
    /* Immutable while OPEN/CLOSING: */
    int fd;
    int flags;                       /* flags the host fd was opened with */
    bool is_dir;
    struct pt_inode *ino;            /* referenced */
    uint64_t nodeid;
    /* Protected by lock: the directory stream position */
    pthread_mutex_t lock;
    /* Protected by pt_htab.lock: */
    uint32_t fnext;
};

#define PT_H_CLOSING (1ull << 31)
#define PT_H_REFMASK (PT_H_CLOSING - 1)

struct pt_htab {
    pthread_mutex_t lock;  /* allocation and free list */
    struct pt_slots slots; /* of struct pt_handle; allocated and freed under lock */
    atomic_size_t count;
    uint32_t gen_base; /* generation of never-used slots (a restore raises it); lock */
};

int pt_htab_init(struct pt_fs *fs);
void pt_htab_destroy(struct pt_fs *fs);

/* Adds a handle for fd (ownership taken; already counted in the fd budget). */
int pt_handle_new(struct pt_fs *fs, struct pt_inode *ino, int fd, int flags, bool is_dir,
                  uint64_t *fh_out);
/* References the handle fh of node nodeid; -EBADF when unknown or closing. */
int pt_handle_get(struct pt_fs *fs, uint64_t fh, uint64_t nodeid, struct pt_handle **out);
void pt_handle_put(struct pt_handle *h);
/* RELEASE: -EBADF when fh is unknown or already closing. */
int pt_handle_close(struct pt_fs *fs, uint64_t fh, uint64_t nodeid);
static inline bool pt_handle_closing(const struct pt_handle *h)
{
    return atomic_load(&h->state) & PT_H_CLOSING;
}
void pt_htab_reset(struct pt_fs *fs);
/* Restore (pt_state_load.c): an OPEN handle at exactly idx and gen, on ino (referenced
 * here), owning fd (already counted in the fd budget). -EEXIST, -EINVAL, -ENOMEM. */
int pt_handle_restore(struct pt_fs *fs, uint32_t idx, uint32_t gen, struct pt_inode *ino, int fd,
                      int flags, bool is_dir);
void pt_htab_restore_finish(struct pt_fs *fs, uint32_t gen_floor);
/* Calls fn on every OPEN handle; *gen_floor as pt_itab_image's. */
void pt_htab_image(struct pt_fs *fs, void (*fn)(void *ctx, const struct pt_handle *h), void *ctx,
                   uint32_t *gen_floor);

static inline void pt_handle_putp(struct pt_handle **h)
{
    if (*h)
        pt_handle_put(*h);
}
#define _cleanup_handle_ __attribute__((cleanup(pt_handle_putp)))

/* ---- Credentials (cred.c) --------------------------------------------------- */

struct pt_cred {
    bool switched;
};

/* Runs the calling thread as the request's uid/gid until pt_cred_leave. */
int pt_cred_enter(struct pt_fs *fs, const struct fll_req *r, struct pt_cred *c);
void pt_cred_leave(struct pt_cred *c);
#define _cleanup_cred_ __attribute__((cleanup(pt_cred_leave)))
/* openat(dirfd, name, flags | O_CLOEXEC, mode) as the request's caller: a new
 * fd, or -errno (of the switch or the open). */
int pt_openat_as_caller(struct pt_fs *fs, const struct fll_req *r, int dirfd, const char *name,
                        int flags, mode_t mode);
/* The mode to create with, given the client's umask (FUSE_DONT_MASK). */
mode_t pt_create_mode(struct pt_fs *fs, struct pt_inode *parent, mode_t mode, uint32_t umask);

/* ---- uid/gid translation (idmap.c) ------------------------------------------ */

enum pt_idmap_kind { PT_ID_RANGE, PT_ID_SQUASH, PT_ID_FAIL };

/* [from, from + count) -> to + (id - from) (RANGE), to (SQUASH) or EPERM (FAIL). */
struct pt_idmap_ent {
    uint32_t from;
    uint64_t count;
    uint32_t to;
    enum pt_idmap_kind kind;
};

struct pt_idmap_dir {
    struct pt_idmap_ent *e;
    size_t n;
};

/* One of uids or gids: the two directions are independent tables. */
struct pt_idmap {
    struct pt_idmap_dir to_host;
    struct pt_idmap_dir to_guest;
};

/* Adds one --translate-uid/gid rule; -EINVAL with a message in err. */
int pt_idmap_add(struct pt_idmap *m, const char *spec, char *err, size_t errlen);
/* Adds space-separated rules (repeated options, as the option parser joins them). */
int pt_idmap_parse(struct pt_idmap *m, const char *specs, char *err, size_t errlen);
void pt_idmap_free(struct pt_idmap *m);
/* 0 and *host, or -EPERM for a forbidden guest id. Unmapped ids map to themselves. */
int pt_idmap_to_host(const struct pt_idmap *m, uint32_t guest, uint32_t *host);
uint32_t pt_idmap_to_guest(const struct pt_idmap *m, uint32_t host);
/* The request's caller as host ids; -EPERM when a rule forbids either. */
int pt_req_host_ids(const struct pt_fs *fs, const struct fll_req *r, uid_t *uid, gid_t *gid);
/* Host uid/gid of an attribute reply, as the guest sees them. */
void pt_attr_to_guest(const struct pt_fs *fs, struct fuse_attr *a);

/* ---- Security labels of new inodes (secctx.c) -------------------------------- */

/*
 * Sets the request's security context (if any, and --security-label) on the
 * new object i, through fd when the caller has it open (CREATE, TMPFILE),
 * else through pt_xattr_call. 0 or the host's -errno.
 */
int pt_secctx_apply(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *i, int fd);
/*
 * MKDIR, MKNOD, SYMLINK: labels the entry name of parent that e was just
 * filled for; on failure removes it again (unlinkat with unlink_flags), drops
 * the lookup e counted and returns the error.
 */
int pt_secctx_finish(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *parent,
                     const char *name, struct fuse_entry_out *e, int unlink_flags);

/* ---- xattr mapping (xattrmap.c) --------------------------------------------- */

enum pt_xmap_type { PT_XMAP_PREFIX, PT_XMAP_OK, PT_XMAP_BAD, PT_XMAP_UNSUPPORTED };
#define PT_XMAP_CLIENT 1u
#define PT_XMAP_SERVER 2u

struct pt_xmap_rule {
    enum pt_xmap_type type;
    unsigned scope;
    char *key;
    char *prepend;
};

struct pt_xattrmap {
    struct pt_xmap_rule *rules;
    size_t n;
};

/* Parses rules; -EINVAL with a message in err (if non-NULL) on bad syntax. */
int pt_xattrmap_parse(const char *spec, struct pt_xattrmap *map, char *err, size_t errlen);
void pt_xattrmap_free(struct pt_xattrmap *map);
/*
 * Client name -> host name (malloc'd in *out). -EPERM for a 'bad' rule,
 * -EOPNOTSUPP for 'unsupported', -ENOMEM.
 */
int pt_xattrmap_to_server(const struct pt_xattrmap *map, const char *name, char **out);
/*
 * Host name -> client name for listxattr: 1 and *out (malloc'd) when visible,
 * 0 when hidden, -ENOMEM.
 */
int pt_xattrmap_to_client(const struct pt_xattrmap *map, const char *name, char **out);

/* ---- Locks (lock.c) ---------------------------------------------------------- */

struct pt_waiter;

struct pt_locks {
    pthread_mutex_t lock;
    pthread_cond_t cond;      /* new waiter, cancel, or stop */
    struct pt_waiter *head;   /* protected by lock */
    unsigned count;           /* protected by lock */
    unsigned max;             /* immutable */
    bool thread_started;      /* protected by lock */
    bool stop;                /* protected by lock */
    pthread_t thread;
};

int pt_locks_init(struct pt_locks *l);
/* Completes every pending SETLKW with err (reset) and, with stop, ends the thread. */
void pt_locks_cancel_all(struct pt_fs *fs, int err, bool stop);
/* Something may have been unlocked: parked SETLKWs retry now. */
void pt_locks_kick(struct pt_fs *fs);
/* Takes every parked SETLKW off the list unanswered, hands its request to fn
 * (a restart runs it again in the next process) and drops the waiter. */
void pt_locks_detach_all(struct pt_fs *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx);
/* Restore (pt_state_load.c): the POSIX lock owners of inode i; a restored owner takes fd
 * (counted in the fd budget). -EBADF without an open handle, -EEXIST, -ENOMEM. */
void pt_lock_owners_image(struct pt_inode *i,
                          void (*fn)(void *ctx, uint64_t owner, int fd, uint32_t pid), void *ctx);
int pt_lock_owner_restore(struct pt_inode *i, uint64_t owner, int fd, uint32_t pid);
/* A lock an open file description holds, from /proc/self/fdinfo. */
struct pt_held_lock {
    bool flock;     /* flock (else an OFD lock) */
    bool write;     /* exclusive / write lock */
    uint64_t start;
    uint64_t len;   /* 0: to the end of the file */
};
/* The locks fd holds (at most max): their count, -E2BIG past max, or -errno. */
int pt_fd_locks(struct pt_fs *fs, int fd, struct pt_held_lock *out, unsigned max);

/* ---- The filesystem ---------------------------------------------------------- */

struct pt_fs {
    int proc_self_fd;         /* O_PATH of /proc/self/fd, opened before the sandbox */
    struct pt_inode *root;    /* permanently referenced */
    /* --inode-file-handles; written by pt_fs_new and pt_fs_check_handles, before serving */
    enum pt_inode_handles handles;
    struct pt_fh root_fh;      /* with handles: the root's, for pt_fs_check_handles */
    struct pt_mount *root_mnt; /* with handles: the share's mount, referenced */

    /* Settings, immutable after pt_fs_new */
    enum pt_cache cache;
    bool writeback_opt;
    bool readdirplus;
    bool allow_direct_io;
    bool allow_mmap;
    bool xattr;
    bool posix_acl;
    bool killpriv_v2_opt;
    bool announce_submounts;
    bool no_posix_lock;
    bool no_flock;
    bool readonly;
    bool security_label;      /* --security-label: FUSE_SECURITY_CTX */
    struct pt_idmap uidmap;   /* --translate-uid (empty: identity) */
    struct pt_idmap gidmap;   /* --translate-gid */
    bool switch_creds;        /* running as root: creating ops take the caller's ids */
    double timeout;           /* entry/attr timeout, seconds */
    struct pt_xattrmap xmap;
    bool have_xmap;
    char *cap_mapped;         /* host name of the client's security.capability if remapped */

    /* Negotiated at INIT (written by init before any other request) */
    _Atomic bool writeback;
    _Atomic bool dont_mask;
    _Atomic bool killpriv_v2;

    /* DAX (pt_dax.c): the window, or NULL; set once by pt_fs_set_dax before serving */
    struct dax_window *dax;
    const struct pt_dax_hooks *dax_hooks; /* with a window; NULL without */
    bool dax_qemu_rules;       /* the frontend maps as QEMU 11.1 (pt_fs_set_dax) */
    enum pt_writers writers;   /* --share-writers: who changes the files */
    _Atomic bool dax_attr;     /* negotiated FUSE_HAS_INODE_DAX: FUSE_ATTR_DAX per file */

    /* Serialises the process-wide working directory for path-form xattr calls. */
    pthread_mutex_t cwd_lock;

    /*
     * The per-inode lock, striped: a mutex in every inode would be a quarter of
     * its memory, and it is only taken around lock owner lists and open counts,
     * one inode at a time (never two stripes at once).
     */
    pthread_mutex_t inode_locks[PT_INODE_LOCK_STRIPES];

    /* fd budget (lock-free) */
    atomic_long fds;
    atomic_long fd_budget;

    struct pt_itab itab;
    struct pt_mnts mnts;
    struct pt_fdc fdc;
    struct pt_htab htab;
    struct pt_locks locks;
};

static inline pthread_mutex_t *pt_inode_lock(const struct pt_inode *i)
{
    return &i->fs->inode_locks[i->idx % PT_INODE_LOCK_STRIPES];
}

/* Reserves / returns one fd of the budget; -EMFILE past it. */
static inline int pt_fd_reserve(struct pt_fs *fs)
{
    long n = atomic_fetch_add(&fs->fds, 1) + 1;

    if (n > atomic_load(&fs->fd_budget)) {
        atomic_fetch_sub(&fs->fds, 1);
        return -EMFILE;
    }
    return 0;
}

static inline void pt_fd_unreserve(struct pt_fs *fs)
{
    atomic_fetch_sub(&fs->fds, 1);
}

static inline struct pt_fs *pt_fs_of(const struct fll_req *r)
{
    return (struct pt_fs *)fll_req_userdata(r);
}

/*
 * "N": the name of fd in fs->proc_self_fd, for *at() calls relative to it. Never
 * an absolute "/proc/self/fd/N": inside the sandbox "/proc" is a directory of
 * the shared tree, which the guest controls. buf holds PT_PROC_PATH_MAX bytes.
 */
static inline const char *pt_proc_name(char *buf, int fd)
{
    snprintf(buf, PT_PROC_PATH_MAX, "%d", fd);
    return buf;
}
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

/* ---- Core (core.c) ------------------------------------------------------------- */

void pt_fill_attr(const struct statx *st, struct fuse_attr *a);
void pt_set_timeout(double t, uint64_t *sec, uint32_t *nsec);
/* Fills an entry for an inode already referenced (counts a lookup). */
int pt_fill_entry(struct pt_fs *fs, struct pt_inode *parent, struct pt_inode *i,
                  const struct statx *st, struct fuse_entry_out *out);
/* Defence in depth: the name rules fll also applies, plus NAME_MAX. */
int pt_check_name(const char *name);
/* Looks name up under parent (counting a lookup) and fills out. */
int pt_do_lookup(struct pt_fs *fs, struct pt_inode *parent, const char *name,
                 struct fuse_entry_out *out);
/* The same with an fd on parent at hand (pt_inode_fd, or an open directory). */
int pt_do_lookup_at(struct pt_fs *fs, struct pt_inode *parent, int pfd, const char *name,
                    struct fuse_entry_out *out);
/* Opens the inode's object for I/O via /proc/self/fd of its O_PATH fd, or from
 * its file handle: regular files and directories only (never a FIFO, socket,
 * device or symlink). A new fd (the caller's) or -errno. */
int pt_reopen(struct pt_fs *fs, const struct pt_inode *i, int flags);
/*
 * Runs an xattr call on the object of inode i itself (a symlink: the link, not
 * its target), without opening a FIFO or device: f*xattr on a reopened fd for
 * regular files and directories, else the path form on the /proc magic link
 * with the working directory in proc_self_fd (under pt_fs.cwd_lock).
 */
enum pt_xop { PT_XGET, PT_XSET, PT_XLIST, PT_XREMOVE };
ssize_t pt_xattr_call(struct pt_fs *fs, struct pt_inode *i, enum pt_xop op,
                      const char *name, void *buf, size_t size, int flags);
/* Clears the remapped security.capability (CVE-2021-20263) on a write, truncate or chown. */
void pt_drop_mapped_capability(struct pt_fs *fs, struct pt_inode *i, int fd);
/* Clears set-user-ID and (group-executable) set-group-ID bits. */
int pt_kill_suidgid(struct pt_fs *fs, struct pt_inode *i, int fd);

/* pt_dax.c */
/* INIT: map_alignment and FUSE_HAS_INODE_DAX when the window can be used. */
void pt_dax_init(struct pt_fs *fs, struct fll_conn *conn);
/*
 * The window and the file agree around the daemon's own I/O on inode i for the
 * guest: before, the guest's stores in [off, off + len) in the window reach the
 * file (0 or that write-back's error); after a change of the file, the window
 * shows it. Nothing (one atomic load) for an inode the window never mapped.
 */
struct pt_dax_io {
    bool mapped;
};
/*
 * What the rest of the passthrough asks of the DAX feature: the inode table,
 * the attribute replies and the file I/O reach pt_dax.c only through these hooks,
 * which pt_fs_set_dax sets (fs->dax_hooks) when it is given a window. Without
 * one, no inode is ever mapped and no attribute carries FUSE_ATTR_DAX, so each
 * wrapper below does nothing.
 */
struct pt_dax_hooks {
    /* Sets FUSE_ATTR_DAX in a when the policy gives inode i the window; a (the
     * host's attributes, fresh) also tells the window whether someone else
     * changed the file under its mappings. */
    void (*attr)(struct pt_fs *fs, const struct pt_inode *i, struct fuse_attr *a);
    /* The same check from a statx (FUSE_STATX). */
    void (*statx)(struct pt_fs *fs, const struct pt_inode *i, const struct statx *st);
    /* Around the daemon's own I/O (struct pt_dax_io). */
    int (*before)(struct pt_fs *fs, struct pt_inode *i, uint64_t off, uint64_t len,
                  struct pt_dax_io *io);
    void (*after)(struct pt_fs *fs, struct pt_inode *i, uint64_t off, uint64_t len,
                  const struct pt_dax_io *io);
    /* FUSE_FSYNC / FUSE_FLUSH: the guest's stores in the window to the file;
     * the first write-back error since the last call, or 0. */
    int (*sync)(struct pt_fs *fs, struct pt_inode *i);
    /* Inode nodeid was freed: its mappings are unmapped and its DAX state
     * dropped. Called with no pt lock held. */
    void (*inode_gone)(struct pt_fs *fs, uint64_t nodeid);
    /* The same without frontend calls, for pt_itab_reset (the window was reset). */
    void (*inode_forget)(struct pt_fs *fs, uint64_t nodeid);
};

static inline void pt_dax_attr(struct pt_fs *fs, const struct pt_inode *i, struct fuse_attr *a)
{
    if (fs->dax_hooks)
        fs->dax_hooks->attr(fs, i, a);
}

static inline void pt_dax_statx(struct pt_fs *fs, const struct pt_inode *i,
                                const struct statx *st)
{
    if (fs->dax_hooks)
        fs->dax_hooks->statx(fs, i, st);
}

static inline int pt_dax_before(struct pt_fs *fs, struct pt_inode *i, uint64_t off,
                                uint64_t len, struct pt_dax_io *io)
{
    if (fs->dax_hooks)
        return fs->dax_hooks->before(fs, i, off, len, io);
    io->mapped = false;
    return 0;
}

static inline void pt_dax_after(struct pt_fs *fs, struct pt_inode *i, uint64_t off,
                                uint64_t len, const struct pt_dax_io *io)
{
    if (fs->dax_hooks)
        fs->dax_hooks->after(fs, i, off, len, io);
}

static inline int pt_dax_sync(struct pt_fs *fs, struct pt_inode *i)
{
    return fs->dax_hooks ? fs->dax_hooks->sync(fs, i) : 0;
}

static inline void pt_dax_inode_gone(struct pt_fs *fs, uint64_t nodeid)
{
    if (fs->dax_hooks)
        fs->dax_hooks->inode_gone(fs, nodeid);
}

static inline void pt_dax_inode_forget(struct pt_fs *fs, uint64_t nodeid)
{
    if (fs->dax_hooks)
        fs->dax_hooks->inode_forget(fs, nodeid);
}

/* DESTROY: unmaps every mapping through the frontend. */
void pt_dax_unmap_all(struct pt_fs *fs);
/* Forgets every mapping without telling the frontend (it dropped them itself). */
void pt_dax_forget_all(struct pt_fs *fs);
int pt_op_setupmapping(struct fll_req *r, uint64_t nodeid, const struct fuse_setupmapping_in *in);
int pt_op_removemapping(struct fll_req *r, const struct fuse_removemapping_one *entries,
                        unsigned count);

/* ops implemented in each file, collected in fs.c */
int pt_op_lookup(struct fll_req *r, uint64_t parent, const char *name, struct fuse_entry_out *out);
void pt_op_forget(struct fll_req *r, uint64_t nodeid, uint64_t nlookup);
int pt_op_getattr(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                  struct fuse_attr_out *out);
int pt_op_setattr(struct fll_req *r, uint64_t nodeid, const struct fuse_setattr_in *in,
                  struct fuse_attr_out *out);
int pt_op_readlink(struct fll_req *r, uint64_t nodeid, char *buf, size_t size);
int pt_op_access(struct fll_req *r, uint64_t nodeid, const struct fuse_access_in *in);
int pt_op_statx(struct fll_req *r, uint64_t nodeid, const struct fuse_statx_in *in,
                struct fuse_statx_out *out);

int pt_op_symlink(struct fll_req *r, uint64_t parent, const char *name, const char *target,
                  struct fuse_entry_out *out);
int pt_op_mknod(struct fll_req *r, uint64_t parent, const char *name,
                const struct fuse_mknod_in *in, struct fuse_entry_out *out);
int pt_op_mkdir(struct fll_req *r, uint64_t parent, const char *name,
                const struct fuse_mkdir_in *in, struct fuse_entry_out *out);
int pt_op_unlink(struct fll_req *r, uint64_t parent, const char *name);
int pt_op_rmdir(struct fll_req *r, uint64_t parent, const char *name);
int pt_op_rename(struct fll_req *r, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname, uint32_t flags);
int pt_op_link(struct fll_req *r, uint64_t nodeid, uint64_t newparent, const char *newname,
               struct fuse_entry_out *out);
int pt_op_opendir(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                  struct fuse_open_out *out);
int pt_op_readdir(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                  struct fll_dirbuf *db);
int pt_op_releasedir(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in);
int pt_op_fsyncdir(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in);

int pt_op_open(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
               struct fuse_open_out *out);
int pt_op_create(struct fll_req *r, uint64_t parent, const char *name,
                 const struct fuse_create_in *in, struct fuse_entry_out *entry,
                 struct fuse_open_out *open);
int pt_op_tmpfile(struct fll_req *r, uint64_t parent, const char *name,
                  const struct fuse_create_in *in, struct fuse_entry_out *entry,
                  struct fuse_open_out *open);
ssize_t pt_op_read(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                   const struct iovec *dst, unsigned dst_cnt);
ssize_t pt_op_write(struct fll_req *r, uint64_t nodeid, const struct fuse_write_in *in,
                    const struct iovec *src, unsigned src_cnt);
int pt_op_release(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in);
int pt_op_fsync(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in);
int pt_op_flush(struct fll_req *r, uint64_t nodeid, const struct fuse_flush_in *in);
int pt_op_fallocate(struct fll_req *r, uint64_t nodeid, const struct fuse_fallocate_in *in);
int pt_op_lseek(struct fll_req *r, uint64_t nodeid, const struct fuse_lseek_in *in,
                struct fuse_lseek_out *out);
ssize_t pt_op_copy_file_range(struct fll_req *r, uint64_t nodeid,
                              const struct fuse_copy_file_range_in *in);

int pt_op_setxattr(struct fll_req *r, uint64_t nodeid, const char *name, const void *value,
                   size_t size, int flags, uint32_t setxattr_flags);
ssize_t pt_op_getxattr(struct fll_req *r, uint64_t nodeid, const char *name, void *buf,
                       size_t size);
ssize_t pt_op_listxattr(struct fll_req *r, uint64_t nodeid, void *buf, size_t size);
int pt_op_removexattr(struct fll_req *r, uint64_t nodeid, const char *name);

int pt_op_getlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in,
                struct fuse_lk_out *out);
int pt_op_setlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in, bool sleep);
int pt_op_interrupt(struct fll_req *r, uint64_t unique);
/* FLUSH / RELEASE: drops the POSIX locks of one owner / the flock of a handle. */
void pt_lock_release_owner(struct pt_handle *h, uint64_t owner);

#endif
