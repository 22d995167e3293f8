/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The passthrough filesystem as a whole (prefix pt_): struct pt_fs and its state.
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
 * Headers, one concern each, included by the files that use it:
 *   pt_fs_i.h        this: struct pt_fs, the fd budget, the per-inode lock
 *   pt_ops_i.h       the operations of attr.c dir.c file.c xattr.c lock.c
 *                    pt_dax.c, for fs.c's ops table
 *   pt_dax_i.h       pt_dax.c, and the hooks the rest reaches it by
 *   pt_lock_i.h      lock.c
 *   pt_cred_i.h pt_secctx_i.h pt_core_i.h
 *                    cred.c, secctx.c, core.c
 *   pt_inode_i.h pt_handle_i.h pt_fhandle_i.h pt_slots_i.h
 *                    inode.c, handle.c, fhandle.c, slots.c: the tables
 *   pt_idmap_i.h pt_xattrmap_i.h
 *                    idmap.c, xattrmap.c
 *   pt_state_i.h     the saved state (pt_state_*.c)
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
#ifndef VUFSD_PT_FS_I_H
#define VUFSD_PT_FS_I_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "passthrough.h"
#include "pt_fhandle_i.h"
#include "pt_handle_i.h"
#include "pt_idmap_i.h"
#include "pt_inode_i.h"
#include "pt_lock_i.h"
#include "pt_xattrmap_i.h"

/* fds kept back from RLIMIT_NOFILE for the daemon itself: 64 + 5 %. */
#define PT_FD_HEADROOM_FIXED 64
#define PT_FD_HEADROOM_PERCENT 5

/* Stripes of the per-inode lock (pt_inode_lock). */
#define PT_INODE_LOCK_STRIPES 64u

/* Longest path written for /proc/self/fd/N. */
#define PT_PROC_PATH_MAX 32

struct dax_window;
struct pt_dax_hooks;

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

#endif
