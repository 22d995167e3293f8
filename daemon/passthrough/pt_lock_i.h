/* SPDX-License-Identifier: GPL-2.0-or-later */
/* POSIX (OFD) locks and flock (lock.c): the SETLKW waiter thread, lock owners, held locks. */
#ifndef VUFSD_PT_LOCK_I_H
#define VUFSD_PT_LOCK_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fll.h"

struct pt_fs;
struct pt_handle;
struct pt_inode;
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
/* FLUSH / RELEASE: drops the POSIX locks of one owner / the flock of a handle. */
void pt_lock_release_owner(struct pt_handle *h, uint64_t owner);

#endif
