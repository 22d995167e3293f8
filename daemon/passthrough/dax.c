/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * DAX in the passthrough: FUSE_SETUPMAPPING / FUSE_REMOVEMAPPING, FUSE_ATTR_DAX,
 * the INIT flags, and the file opens the window needs. The window manager (dax/)
 * keeps the table; node ids are its file keys (index and generation, so a reused
 * inode slot is a new key).
 *
 * The request path runs one way, passthrough -> dax -> backend -> device:
 * pt_op_setupmapping asks the window whether a frontend can map
 * (dax_window_usable), has it check the guest's arguments once
 * (dax_setup_check), looks the node up, opens the file as the caller with the
 * access the mapping needs (the caller's access check and the fd the frontend
 * maps in one open) and hands that fd down (dax_setupmapping -> the backend's
 * map -> the device's backend channel). Nothing below calls back up on this
 * path; the window opens a file itself (pt_fs_dax_open, through dax_ops.open)
 * only to re-map the surviving piece of a mapping a request split.
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
 *     that open's error (EACCES); under QEMU's rules EINVAL for a range that is
 *     not inside the file. fh is not used: the daemon opens the inode;
 *   - REMOVEMAPPING: the window's checks; the node id is not used (mappings are
 *     named by their window range).
 */
#include <fcntl.h>
#include <stdlib.h>

#include "dax.h"
#include "pt_i.h"

void pt_fs_set_dax(struct pt_fs *fs, struct dax_window *w, bool qemu_rules)
{
    fs->dax = w;
    fs->dax_qemu_rules = qemu_rules;
}

static bool pt_dax_on(struct pt_fs *fs)
{
    return fs->dax && dax_window_usable(fs->dax);
}

void pt_dax_inode_gone(struct pt_fs *fs, uint64_t nodeid)
{
    if (!fs->dax)
        return;
    dax_remove_inode(fs->dax, nodeid);
    dax_inode_forget(fs->dax, nodeid);
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
    if (fs->dax)
        dax_for_each_mapping(fs->dax, pt_dax_unmap_one, fs->dax);
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

/* The fd a frontend maps: read-write for a writable mapping, and for every
 * mapping under QEMU's rules (it maps each one PROT_READ | PROT_WRITE). */
static bool pt_dax_rw(const struct pt_fs *fs, bool writable)
{
    return writable || fs->dax_qemu_rules;
}

int pt_fs_dax_open(struct pt_fs *fs, uint64_t nodeid, bool writable)
{
    _cleanup_inode_ struct pt_inode *i = NULL;
    int ret = pt_inode_get(fs, nodeid, &i);

    if (ret < 0)
        return ret;
    if (i->type != S_IFREG)
        return -EINVAL;
    if (pt_dax_rw(fs, writable) && fs->readonly)
        return -EROFS;
    return pt_reopen(fs, i, pt_dax_rw(fs, writable) ? O_RDWR : O_RDONLY);
}

/*
 * The one open of a SETUPMAPPING: the file as the caller opens it with the
 * access the mapping gives (the caller's access check), which is also the fd
 * the frontend maps. Under QEMU's rules a read mapping needs a read-write fd
 * all the same: the caller's read-write open serves when the caller may write;
 * else the caller's read-only open is the check and the daemon opens that file
 * read-write for the frontend. Under QEMU's rules the range must lie inside the
 * file (pt_fs_set_dax). The new fd, or -errno.
 */
static int pt_dax_open_as_caller(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *i,
                                 const struct dax_setup *req)
{
    /* Before the switch: opening a file handle needs a capability the caller lacks. */
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    _cleanup_close_ int fd = -1;
    char name[PT_PROC_PATH_MAX];
    bool reopen_rw = false;
    int ret = pt_inode_fd(fs, i, &f);

    if (ret < 0)
        return ret;
    {
        _cleanup_cred_ struct pt_cred cred = {0};
        ret = pt_cred_enter(fs, r, &cred);
        if (ret < 0)
            return ret;
        pt_proc_name(name, f.fd);
        fd = openat(fs->proc_self_fd, name, (pt_dax_rw(fs, req->writable) ? O_RDWR : O_RDONLY) |
                                                 O_CLOEXEC);
        if (fd < 0 && !req->writable && fs->dax_qemu_rules) {
            fd = openat(fs->proc_self_fd, name, O_RDONLY | O_CLOEXEC);
            reopen_rw = true;
        }
        if (fd < 0)
            return -errno;
    }
    if (reopen_rw) {
        int rw = openat(fs->proc_self_fd, pt_proc_name(name, fd), O_RDWR | O_CLOEXEC);
        if (rw < 0)
            return -errno;
        close(fd);
        fd = rw;
    }
    struct stat st;
    if (fs->dax_qemu_rules && fstat(fd, &st) == 0 &&
        (st.st_size <= 0 || req->foffset > (uint64_t)st.st_size ||
         req->len > (uint64_t)st.st_size - req->foffset))
        return -EINVAL;
    return TAKE_FD(fd);
}

int pt_op_setupmapping(struct fll_req *r, uint64_t nodeid, const struct fuse_setupmapping_in *in)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_close_ int fd = -1;
    struct dax_setup req;
    int ret;

    if (!pt_dax_on(fs))
        return -ENOSYS;
    ret = dax_setup_check(fs->dax, in, &req);
    if (ret < 0)
        return ret;
    ret = pt_inode_get(fs, nodeid, &i);
    if (ret < 0)
        return ret;
    if (i->type != S_IFREG)
        return -EINVAL;
    if (pt_dax_rw(fs, req.writable) && fs->readonly)
        return -EROFS;
    fd = pt_dax_open_as_caller(fs, r, i, &req);
    if (fd < 0)
        return fd;
    return dax_setupmapping(fs->dax, nodeid, fd, &req);
}

int pt_op_removemapping(struct fll_req *r, const struct fuse_removemapping_one *entries,
                        unsigned count)
{
    struct pt_fs *fs = pt_fs_of(r);

    if (!pt_dax_on(fs))
        return -ENOSYS;
    return dax_removemapping(fs->dax, entries, count);
}
