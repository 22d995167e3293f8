/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The DAX feature (pt_dax.c) and the hooks the rest of the passthrough reaches it by. */
#ifndef VUFSD_PT_DAX_I_H
#define VUFSD_PT_DAX_I_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fll.h"
#include "pt_fs_i.h"

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

#endif
