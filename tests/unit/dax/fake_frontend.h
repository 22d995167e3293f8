/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A fake frontend for dax/ unit tests. It ENFORCES the mainline frontend's rules:
 * a map must be aligned, inside the window, within one 2 MiB slot and must not
 * overlap any existing mapping; an unmap must exactly match one existing mapping;
 * no two calls may be in flight for the same slot; every map names a file by an
 * fd the fake handed out (fake_fd, or through ops->open, whose fds the window
 * must close), or the window's store (fake_use_store: mapped at its own window
 * offset, recorded with key FAKE_STORE_KEY). Every breach is counted in
 * 'violations' (with the last one described) and the tests require 0.
 */
#ifndef DAX_FAKE_FRONTEND_H
#define DAX_FAKE_FRONTEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dax.h"

#define FAKE_STORE_KEY UINT64_MAX

struct fake_map {
    uint64_t key, foffset, moffset, len;
    bool writable;
    bool live;
};

/* A file of the fake: an anonymous file standing for the daemon's file 'key'. */
struct fake_file {
    uint64_t key;
    int fd;      /* owned by the fake */
    ino_t ino;   /* how a map recognises any fd of this file */
};
#define FAKE_FILES 256

struct fake_fe {
    pthread_mutex_t lock;
    struct fake_file files[FAKE_FILES];
    unsigned nfiles;
    unsigned open_calls;    /* ops->open */
    int open_fail;          /* fail this many ops->open calls with -EIO */
    unsigned fds_at_init;   /* the process's open fds when the fake started */
    uint64_t size, page;
    uint32_t *owner;        /* per page: index + 1 into maps, 0 = unmapped */
    uint32_t *inflight;     /* per slot: calls in progress */
    struct fake_map *maps;
    size_t nmaps, cap;
    unsigned violations;
    char last_violation[256];
    unsigned map_calls, unmap_calls, batch_calls;
    unsigned fail_pct;      /* inject -EIO in this % of calls (no change made) */
    unsigned injected;
    uint64_t rng;
    unsigned sleep_us;      /* sleep inside each call */
    uint64_t gen;           /* bumped by fake_reset(); calls spanning it fail -EIO */
    /* Optional, called under lock at the start of a call: true = the call belongs
     * to a connection before the last reset, refuse it with -EIO. */
    bool (*stale)(void *arg, uint64_t moffset);
    void *stale_arg;
    /* fake_use_store: setups are store mappings (not direct), and maps of the
     * window store's fd are the window's own. */
    bool use_store;
    ino_t store_ino;
};

extern const struct dax_ops fake_ops;       /* map + unmap + open */
extern const struct dax_ops fake_ops_batch; /* map + unmap + unmap_batch + open */

void fake_init(struct fake_fe *fe, uint64_t size, uint64_t page);
void fake_fini(struct fake_fe *fe);
/* The frontend drops every mapping (device reset). Caller holds fe->lock. */
void fake_reset_locked(struct fake_fe *fe);
/* The mapping covering page-aligned window offset moffset, or NULL. */
const struct fake_map *fake_at(const struct fake_fe *fe, uint64_t moffset);
unsigned fake_count(const struct fake_fe *fe);
uint64_t fake_rand(uint64_t *state);

/* The fd of file key (made on first use, kept by the fake): what the daemon
 * hands dax_setupmapping. -errno when no file can be made. */
int fake_fd(struct fake_fe *fe, uint64_t key);
/* fds the process holds beyond those at fake_init, the fake's own files and
 * those w keeps (its store and the files it has mappings of): fds the window
 * did not close. Also checks that w keeps no fd of a file without mappings. */
int fake_leaked_fds(struct fake_fe *fe, struct dax_window *w);
/* From now on setups of w are store mappings (the default: direct ones). */
void fake_use_store(struct fake_fe *fe, struct dax_window *w);

/* A guest's FUSE_SETUPMAPPING as the daemon serves it: dax_setup_check(), then
 * dax_setupmapping() with file key's fd. */
int fake_setup(struct fake_fe *fe, struct dax_window *w, uint64_t key, uint64_t foffset,
               uint64_t len, uint64_t moffset, uint64_t flags);
/* dax_setup_check() on the arguments of a FUSE_SETUPMAPPING. */
int fake_check(const struct dax_window *w, uint64_t moffset, uint64_t len, uint64_t foffset,
               uint64_t flags);

/* Compares dax_for_each_mapping() with the fake's mappings; 0 = identical. */
int fake_matches_table(struct fake_fe *fe, struct dax_window *w);

/* The statistics of file key as the JSON dump has them (recent_* decayed):
 * 0, or -ENOENT when the window keeps no record of it. */
int fake_inode_stats(struct dax_window *w, uint64_t key, struct dax_inode_stats *st);

#endif
