/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * DAX in the passthrough: FUSE_SETUPMAPPING / FUSE_REMOVEMAPPING, FUSE_ATTR_DAX,
 * the INIT flags, and the file opens the window's map callback needs. The window
 * manager (dax/) keeps the table; node ids are its file keys (index and
 * generation, so a reused inode slot is a new key).
 *
 * What a guest gets:
 *   - no window, or a frontend that cannot map (no backend channel, REPLY_ACK,
 *     BACKEND_SEND_FD, or SHMEM for the mainline protocol): both requests ENOSYS,
 *     INIT without map_alignment and FUSE_HAS_INODE_DAX;
 *   - SETUPMAPPING: the window's checks (EINVAL, EOVERFLOW), ESTALE for an
 *     unknown node, EINVAL for anything but a regular file, EROFS for a write
 *     mapping of a --readonly share (for any mapping where the frontend needs
 *     read-write fds: QEMU 11.1), and the caller must be able to open the file
 *     with the mapping's access (O_RDONLY, or O_RDWR for a write mapping), else
 *     that open's error (EACCES). fh is not used: the daemon opens the inode;
 *   - REMOVEMAPPING: the window's checks; the node id is not used (mappings are
 *     named by their window range).
 *
 * Re-entrancy: a map callback opens a file by node id and drops its inode
 * reference, which may free an inode the guest forgot meanwhile. Freeing one
 * means unmapping its extents, which must not happen inside a window call, so
 * such keys are parked per thread and handled when the outermost window call of
 * this thread returns (pt_dax_leave).
 */
#include <fcntl.h>
#include <stdlib.h>

#include "dax.h"
#include "pt_i.h"

static __thread unsigned pt_dax_depth;   /* window calls running on this thread */
static __thread uint64_t *pt_dax_parked; /* keys freed inside them */
static __thread size_t pt_dax_nparked, pt_dax_cap;

void pt_fs_set_dax(struct pt_fs *fs, struct dax_window *w, bool (*usable)(void *ctx), void *ctx,
                   bool qemu_rules)
{
    fs->dax = w;
    fs->dax_qemu_rules = qemu_rules;
    fs->dax_usable = usable;
    fs->dax_ctx = ctx;
}

static bool pt_dax_on(struct pt_fs *fs)
{
    return fs->dax && fs->dax_usable(fs->dax_ctx);
}

static void pt_dax_drop(struct pt_fs *fs, uint64_t nodeid)
{
    dax_remove_inode(fs->dax, nodeid);
    dax_inode_forget(fs->dax, nodeid);
}

static void pt_dax_enter(void)
{
    pt_dax_depth++;
}

static void pt_dax_leave(struct pt_fs *fs)
{
    while (pt_dax_depth == 1 && pt_dax_nparked)
        pt_dax_drop(fs, pt_dax_parked[--pt_dax_nparked]);
    if (--pt_dax_depth)
        return;
    free(pt_dax_parked);
    pt_dax_parked = NULL;
    pt_dax_cap = 0;
}

/* false when out of memory: the key's mappings then stay until the next reset. */
static bool pt_dax_park(uint64_t nodeid)
{
    if (pt_dax_nparked == pt_dax_cap) {
        size_t cap = pt_dax_cap ? 2 * pt_dax_cap : 8;
        uint64_t *p = realloc(pt_dax_parked, cap * sizeof(*p));
        if (!p)
            return false;
        pt_dax_parked = p;
        pt_dax_cap = cap;
    }
    pt_dax_parked[pt_dax_nparked++] = nodeid;
    return true;
}

void pt_dax_inode_gone(struct pt_fs *fs, uint64_t nodeid)
{
    if (!fs->dax)
        return;
    if (pt_dax_depth) {
        pt_dax_park(nodeid);
        return;
    }
    pt_dax_enter();
    pt_dax_drop(fs, nodeid);
    pt_dax_leave(fs);
}

void pt_dax_inode_forget(struct pt_fs *fs, uint64_t nodeid)
{
    if (fs->dax)
        dax_inode_forget(fs->dax, nodeid);
}

static void pt_dax_unmap_one(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset,
                             uint64_t len, bool writable)
{
    struct fuse_removemapping_one e = {.moffset = moffset, .len = len};
    dax_removemapping(opaque, &e, 1);
}

void pt_dax_unmap_all(struct pt_fs *fs)
{
    if (!fs->dax)
        return;
    pt_dax_enter();
    dax_for_each_mapping(fs->dax, pt_dax_unmap_one, fs->dax);
    pt_dax_leave(fs);
}

void pt_dax_forget_all(struct pt_fs *fs)
{
    if (fs->dax)
        dax_window_reset(fs->dax);
}

void pt_dax_init(struct pt_fs *fs, struct fll_conn *conn)
{
    bool on = pt_dax_on(fs);
    bool attr = on && (conn->capable & FUSE_HAS_INODE_DAX) &&
                dax_window_policy(fs->dax) != DAX_POLICY_NEVER;

    if (on && (conn->capable & FUSE_MAP_ALIGNMENT))
        conn->map_alignment = (uint16_t)dax_window_map_alignment(fs->dax);
    if (attr)
        conn->want |= FUSE_HAS_INODE_DAX;
    atomic_store(&fs->dax_attr, attr);
}

void pt_dax_attr(struct pt_fs *fs, const struct pt_inode *i, struct fuse_attr *a)
{
    if (!atomic_load(&fs->dax_attr))
        return;
    /* Under QEMU's rules (pt_fs_set_dax): a --readonly share has no read-write
     * fds, and the last range of a file whose size is not a whole number of
     * ranges passes its end: such files stay off the window. */
    bool mappable = i->type == S_IFREG &&
                    !(fs->dax_qemu_rules && (fs->readonly || a->size == 0 ||
                                             a->size % DAX_RANGE_SIZE != 0));
    if (dax_policy_attr_dax(fs->dax, pt_inode_nodeid(i), a->size, mappable))
        a->flags |= FUSE_ATTR_DAX;
}

int pt_fs_dax_open(struct pt_fs *fs, uint64_t nodeid, bool writable)
{
    _cleanup_inode_ struct pt_inode *i = NULL;
    int ret = pt_inode_get(fs, nodeid, &i);

    if (ret < 0)
        return ret;
    if (i->type != S_IFREG)
        return -EINVAL;
    if ((writable || fs->dax_qemu_rules) && fs->readonly)
        return -EROFS;
    return pt_reopen(fs, i, writable || fs->dax_qemu_rules ? O_RDWR : O_RDONLY);
}

/* The caller may open the file with the access the mapping gives; under QEMU's
 * rules the range must lie inside the file (see pt_fs_set_dax). */
static int pt_dax_check_access(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *i,
                               const struct fuse_setupmapping_in *in)
{
    bool writable = in->flags & FUSE_SETUPMAPPING_FLAG_WRITE;
    /* Before the switch: opening a file handle needs a capability the caller lacks. */
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    int ret = pt_inode_fd(fs, i, &f);

    if (ret < 0)
        return ret;
    _cleanup_cred_ struct pt_cred cred = {0};
    ret = pt_cred_enter(fs, r, &cred);
    if (ret < 0)
        return ret;
    char name[PT_PROC_PATH_MAX];
    int fd = openat(fs->proc_self_fd, pt_proc_name(name, f.fd),
                    (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    ret = 0;
    if (fs->dax_qemu_rules && fstat(fd, &st) == 0 &&
        (st.st_size <= 0 || in->foffset > (uint64_t)st.st_size ||
         in->len > (uint64_t)st.st_size - in->foffset))
        ret = -EINVAL;
    close(fd);
    return ret;
}

int pt_op_setupmapping(struct fll_req *r, uint64_t nodeid, const struct fuse_setupmapping_in *in)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    bool writable = in->flags & FUSE_SETUPMAPPING_FLAG_WRITE;
    int ret;

    if (!pt_dax_on(fs))
        return -ENOSYS;
    ret = dax_setup_check(fs->dax, in->moffset, in->len, in->foffset, in->flags);
    if (ret < 0)
        return ret;
    ret = pt_inode_get(fs, nodeid, &i);
    if (ret < 0)
        return ret;
    if (i->type != S_IFREG)
        return -EINVAL;
    if ((writable || fs->dax_qemu_rules) && fs->readonly)
        return -EROFS;
    ret = pt_dax_check_access(fs, r, i, in);
    if (ret < 0)
        return ret;
    pt_dax_enter();
    ret = dax_setupmapping(fs->dax, nodeid, in->foffset, in->len, in->moffset, in->flags);
    pt_dax_leave(fs);
    return ret;
}

int pt_op_removemapping(struct fll_req *r, const struct fuse_removemapping_one *entries,
                        unsigned count)
{
    struct pt_fs *fs = pt_fs_of(r);
    int ret;

    if (!pt_dax_on(fs))
        return -ENOSYS;
    ret = dax_remove_check(fs->dax, entries, count);
    if (ret < 0)
        return ret;
    pt_dax_enter();
    ret = dax_removemapping(fs->dax, entries, count);
    pt_dax_leave(fs);
    return ret;
}
