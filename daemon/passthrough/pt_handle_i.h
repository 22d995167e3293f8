/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The open-file handle table (handle.c), and the POSIX lock owners an inode keeps. */
#ifndef VUFSD_PT_HANDLE_I_H
#define VUFSD_PT_HANDLE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pt_slots_i.h"

struct pt_fs;
struct pt_inode;

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

#endif
