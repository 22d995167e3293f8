/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Inode file handles, their mount fds, the fd cache and pt_inode_fd (fhandle.c). */
#ifndef VUFSD_PT_FHANDLE_I_H
#define VUFSD_PT_FHANDLE_I_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

struct pt_fs;
struct pt_inode;

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

#endif
