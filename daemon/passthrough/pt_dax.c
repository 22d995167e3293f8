/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * DAX in the passthrough: FUSE_SETUPMAPPING / FUSE_REMOVEMAPPING, FUSE_ATTR_DAX,
 * the INIT flags, and the file opens the window needs. The window manager (dax/)
 * keeps the table; node ids are its file keys (index and generation, so a reused
 * inode slot is a new key). The inode table, the attribute replies and the file
 * I/O reach this file only through struct pt_dax_hooks (pt_dax_i.h), which
 * pt_fs_set_dax sets when it is given a window.
 *
 * The request path runs one way, passthrough -> dax -> backend -> device:
 * pt_op_setupmapping asks the window whether a frontend can map
 * (dax_window_usable), has it check the guest's arguments once
 * (dax_setup_check), looks the node up, decides whether the frontend may map
 * the file itself (pt_dax_direct), opens the file as the caller with the
 * access the mapping needs (the caller's access check and the fd the window
 * fills its store from or the frontend maps, in one open) and hands that fd
 * down (dax_setupmapping -> the backend's map -> the device's backend channel).
 * The window opens a file itself (pt_fs_dax_open, through dax_ops.open) only to
 * re-map the surviving piece of a mapping a request split, and to write back a
 * mapping a restart carried over.
 *
 * Where the pages come from (dax.h, enum dax_backing): the window store, unless
 * the operator said the guest alone changes the share (--share-writers guest)
 * and the range lies inside a file on a local file system that allocates in
 * place (ext2/3/4, XFS, tmpfs): then the file itself. A host process can
 * truncate a file or fill its file system under a direct mapping, and the
 * frontend faults on the page it lost; no host event can take a store page.
 *
 * What a guest gets:
 *   - no window, or a frontend that cannot map (no backend channel, REPLY_ACK,
 *     BACKEND_SEND_FD, or SHMEM for the mainline protocol): both requests ENOSYS,
 *     INIT without map_alignment and FUSE_HAS_INODE_DAX;
 *   - SETUPMAPPING: the window's checks (EINVAL, EOVERFLOW), ESTALE for an
 *     unknown node, EINVAL for anything but a regular file, EROFS for a write
 *     mapping of a --readonly share, and the caller must be able to open the
 *     file with the mapping's access (O_RDONLY, or O_RDWR for a write mapping),
 *     else that open's error (EACCES); ENOSPC or EDQUOT for a write mapping whose
 *     blocks the file system cannot allocate; EIO when the file cannot be read.
 *     Any range of any regular file may be mapped, past its end included (the
 *     store shows zeros there). fh is not used: the daemon opens the inode;
 *   - REMOVEMAPPING: the window's checks; the node id is not used (mappings are
 *     named by their window range).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "dax.h"
#include "passthrough.h"
#include "pt_core_i.h"
#include "pt_cred_i.h"
#include "pt_dax_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_inode_i.h"
#include "pt_ops_i.h"
#include "vufs_util.h"

static bool pt_dax_on(struct pt_fs *fs)
{
    return fs->dax && dax_window_usable(fs->dax);
}

static bool pt_dax_mapped(struct pt_fs *fs, const struct pt_inode *i)
{
    return fs->dax && atomic_load_explicit(&i->dax_mapped, memory_order_acquire);
}

static void pt_dax_hook_inode_gone(struct pt_fs *fs, uint64_t nodeid)
{
    if (!fs->dax)
        return;
    dax_remove_inode(fs->dax, nodeid);
    dax_inode_forget(fs->dax, nodeid);
}

static void pt_dax_hook_inode_forget(struct pt_fs *fs, uint64_t nodeid)
{
    if (fs->dax)
        dax_inode_forget(fs->dax, nodeid);
}

static void pt_dax_unmap_one(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset,
                             uint64_t len, bool writable, enum dax_backing backing)
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

void pt_fs_dax_mapped(struct pt_fs *fs, uint64_t nodeid)
{
    _cleanup_inode_ struct pt_inode *i = NULL;

    if (pt_inode_get(fs, nodeid, &i) == 0)
        atomic_store_explicit(&i->dax_mapped, true, memory_order_release);
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

static void pt_dax_check(struct pt_fs *fs, const struct pt_inode *i,
                         const struct dax_file_stamp *now)
{
    if (pt_dax_mapped(fs, i))
        dax_inode_attr(fs->dax, pt_inode_nodeid(i), now);
}

static void pt_dax_hook_attr(struct pt_fs *fs, const struct pt_inode *i, struct fuse_attr *a)
{
    struct dax_file_stamp now = {
        .size = a->size,
        .mtime_ns = (int64_t)a->mtime * 1000000000 + a->mtimensec,
        .ctime_ns = (int64_t)a->ctime * 1000000000 + a->ctimensec,
    };

    pt_dax_check(fs, i, &now);
    if (!atomic_load(&fs->dax_attr))
        return;
    if (dax_policy_attr_dax(fs->dax, pt_inode_nodeid(i), a->size, i->type == S_IFREG))
        a->flags |= FUSE_ATTR_DAX;
}

static void pt_dax_hook_statx(struct pt_fs *fs, const struct pt_inode *i, const struct statx *st)
{
    struct dax_file_stamp now = {
        .size = st->stx_size,
        .mtime_ns = (int64_t)st->stx_mtime.tv_sec * 1000000000 + st->stx_mtime.tv_nsec,
        .ctime_ns = (int64_t)st->stx_ctime.tv_sec * 1000000000 + st->stx_ctime.tv_nsec,
    };

    pt_dax_check(fs, i, &now);
}

static int pt_dax_hook_before(struct pt_fs *fs, struct pt_inode *i, uint64_t off, uint64_t len,
                              struct pt_dax_io *io)
{
    io->mapped = pt_dax_mapped(fs, i);
    if (!io->mapped)
        return 0;
    return dax_inode_before_io(fs->dax, pt_inode_nodeid(i), off, len);
}

static void pt_dax_hook_after(struct pt_fs *fs, struct pt_inode *i, uint64_t off, uint64_t len,
                              const struct pt_dax_io *io)
{
    if (io->mapped)
        dax_inode_after_change(fs->dax, pt_inode_nodeid(i), off, len);
}

static int pt_dax_hook_sync(struct pt_fs *fs, struct pt_inode *i)
{
    return pt_dax_mapped(fs, i) ? dax_inode_sync(fs->dax, pt_inode_nodeid(i)) : 0;
}

/* How the inode table, the attribute replies and the file I/O reach DAX (pt_dax_i.h). */
static const struct pt_dax_hooks pt_dax_hooks = {
    .attr = pt_dax_hook_attr,
    .statx = pt_dax_hook_statx,
    .before = pt_dax_hook_before,
    .after = pt_dax_hook_after,
    .sync = pt_dax_hook_sync,
    .inode_gone = pt_dax_hook_inode_gone,
    .inode_forget = pt_dax_hook_inode_forget,
};

void pt_fs_set_dax(struct pt_fs *fs, struct dax_window *w, bool qemu_rules)
{
    fs->dax = w;
    fs->dax_hooks = w ? &pt_dax_hooks : NULL;
    fs->dax_qemu_rules = qemu_rules;
}

/* The fd a frontend maps from a file: read-write for a writable mapping, and for
 * every mapping under QEMU's rules (it maps each one PROT_READ | PROT_WRITE). */
static bool pt_dax_rw(const struct pt_fs *fs, bool writable, bool for_frontend)
{
    return writable || (for_frontend && fs->dax_qemu_rules);
}

int pt_fs_dax_open(struct pt_fs *fs, uint64_t nodeid, bool writable, bool for_frontend)
{
    _cleanup_inode_ struct pt_inode *i = NULL;
    int ret = pt_inode_get_type(fs, nodeid, S_IFREG, -EINVAL, &i);
    bool rw = pt_dax_rw(fs, writable, for_frontend);

    if (ret < 0)
        return ret;
    if (rw && fs->readonly)
        return -EROFS;
    return pt_reopen(fs, i, rw ? O_RDWR : O_RDONLY);
}

/*
 * File systems a direct mapping is safe on while the guest alone changes the
 * file: local ones that allocate a block once and overwrite it in place, so
 * blocks allocated before the map (dax_setupmapping) are there for every store.
 * Not copy-on-write ones (Btrfs, where an overwrite allocates), nor network or
 * FUSE file systems (a page can fail to come back from the server).
 */
static bool pt_dax_direct_fs(long type)
{
    switch ((unsigned long)type) {
    case 0xEF53:     /* ext2, ext3, ext4 */
    case 0x58465342: /* XFS */
    case 0x01021994: /* tmpfs */
        return true;
    }
    return false;
}

/*
 * Whether the frontend may map the file itself: the operator said the guest
 * alone changes the share, the file's file system is one of the above, and
 * under QEMU's rules the range lies inside the file (QEMU maps only that) and
 * the share is writable (QEMU needs a read-write fd). fd: any fd of the inode.
 */
static bool pt_dax_direct(struct pt_fs *fs, int fd, const struct dax_setup *req)
{
    struct statfs sfs;
    struct stat st;

    if (fs->writers != PT_WRITERS_GUEST || (fs->dax_qemu_rules && fs->readonly))
        return false;
    if (fstatfs(fd, &sfs) < 0 || !pt_dax_direct_fs((long)sfs.f_type) || fstat(fd, &st) < 0)
        return false;
    return !fs->dax_qemu_rules ||
           (st.st_size > 0 && req->foffset <= (uint64_t)st.st_size &&
            req->len <= (uint64_t)st.st_size - req->foffset);
}

/*
 * The one open of a SETUPMAPPING: the file as the caller opens it with the
 * access the mapping gives (the caller's access check), which is also the fd
 * the window's store is filled from, or the frontend maps. A direct read
 * mapping under QEMU's rules needs a read-write fd all the same: the caller's
 * read-write open serves when the caller may write; else the caller's
 * read-only open is the check and the daemon opens that file read-write for
 * the frontend. The new fd, or -errno.
 */
static int pt_dax_open_as_caller(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *i,
                                 const struct dax_setup *req)
{
    /* Before the switch: opening a file handle needs a capability the caller lacks. */
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    _cleanup_close_ int fd = -1;
    char name[PT_PROC_PATH_MAX];
    bool rw = pt_dax_rw(fs, req->writable, req->direct), reopen_rw = false;
    int ret = pt_inode_fd(fs, i, &f);

    if (ret < 0)
        return ret;
    pt_proc_name(name, f.fd);
    fd = pt_openat_as_caller(fs, r, fs->proc_self_fd, name, rw ? O_RDWR : O_RDONLY, 0);
    if (fd < 0 && rw && !req->writable) {
        fd = pt_openat_as_caller(fs, r, fs->proc_self_fd, name, O_RDONLY, 0);
        reopen_rw = true;
    }
    if (fd < 0)
        return fd;
    if (reopen_rw) {
        int fd_rw = openat(fs->proc_self_fd, pt_proc_name(name, fd), O_RDWR | O_CLOEXEC);
        if (fd_rw < 0)
            return -errno;
        close(fd);
        fd = fd_rw;
    }
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
    ret = pt_inode_get_type(fs, nodeid, S_IFREG, -EINVAL, &i);
    if (ret < 0)
        return ret;
    if (req.writable && fs->readonly)
        return -EROFS;
    if (fs->writers == PT_WRITERS_GUEST) {
        _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
        if (pt_inode_fd(fs, i, &f) == 0)
            req.direct = pt_dax_direct(fs, f.fd, &req);
    }
    fd = pt_dax_open_as_caller(fs, r, i, &req);
    if (fd < 0)
        return fd;
    atomic_store_explicit(&i->dax_mapped, true, memory_order_release);
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
