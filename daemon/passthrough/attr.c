/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Names and attributes: LOOKUP, FORGET, GETATTR, SETATTR, STATX, ACCESS,
 * READLINK (the helpers they share with the other operations are in core.c).
 */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "pt_core_i.h"
#include "pt_cred_i.h"
#include "pt_dax_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_idmap_i.h"
#include "pt_inode_i.h"
#include "pt_ops_i.h"
#include "vufs_util.h"

int pt_op_lookup(struct fll_req *r, uint64_t parent, const char *name, struct fuse_entry_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *p = NULL;
    int ret;

    ret = pt_inode_get(fs, parent, &p);
    if (ret < 0)
        return ret;
    /* "." and ".." (NFS export) never leave the shared directory. */
    if (strcmp(name, ".") == 0 || (strcmp(name, "..") == 0 && p == fs->root))
        return pt_do_lookup(fs, p, ".", out);
    if (strcmp(name, "..") == 0)
        return pt_do_lookup(fs, p, "..", out);
    ret = pt_check_name(name);
    if (ret < 0)
        return ret;
    return pt_do_lookup(fs, p, name, out);
}

void pt_op_forget(struct fll_req *r, uint64_t nodeid, uint64_t nlookup)
{
    pt_inode_forget(pt_fs_of(r), nodeid, nlookup);
}

/* fd: an fd of inode i (pt_inode_fd, or an open handle). */
static int pt_attr_reply(struct pt_fs *fs, const struct pt_inode *i, int fd,
                         struct fuse_attr_out *out)
{
    struct statx st;
    int ret = pt_statx_fd(fd, &st);

    if (ret < 0)
        return ret;
    memset(out, 0, sizeof(*out));
    pt_set_timeout(fs->timeout, &out->attr_valid, &out->attr_valid_nsec);
    pt_fill_attr(&st, &out->attr);
    pt_attr_to_guest(fs, &out->attr);
    pt_dax_attr(fs, i, &out->attr);
    return 0;
}

int pt_op_getattr(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                  struct fuse_attr_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    int ret = pt_inode_get_fd(fs, nodeid, &i, &f);

    if (ret < 0)
        return ret;
    return pt_attr_reply(fs, i, f.fd, out);
}

static int pt_setattr_times(struct pt_fs *fs, struct pt_inode *i, int fd, int pfd,
                            const struct fuse_setattr_in *in)
{
    struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
    char path[PT_PROC_PATH_MAX];
    int ret;

    if (in->valid & FATTR_ATIME_NOW) {
        tv[0].tv_nsec = UTIME_NOW;
    } else if (in->valid & FATTR_ATIME) {
        if (in->atimensec >= 1000000000u || in->atime > (uint64_t)INT64_MAX)
            return -EINVAL;
        tv[0].tv_sec = (time_t)in->atime;
        tv[0].tv_nsec = in->atimensec;
    }
    if (in->valid & FATTR_MTIME_NOW) {
        tv[1].tv_nsec = UTIME_NOW;
    } else if (in->valid & FATTR_MTIME) {
        if (in->mtimensec >= 1000000000u || in->mtime > (uint64_t)INT64_MAX)
            return -EINVAL;
        tv[1].tv_sec = (time_t)in->mtime;
        tv[1].tv_nsec = in->mtimensec;
    }
    if (fd >= 0)
        ret = futimens(fd, tv);
    else {
        ret = utimensat(pfd, "", tv, AT_EMPTY_PATH);
        if (ret < 0 && errno == EINVAL && i->type != S_IFLNK)
            ret = utimensat(fs->proc_self_fd, pt_proc_name(path, pfd), tv, 0);
    }
    return ret < 0 ? -errno : 0;
}

/* The changes a SETATTR asks for, in order; pfd: an fd of inode i. */
static int pt_setattr_apply(struct pt_fs *fs, uint64_t nodeid, struct pt_inode *i, int pfd,
                            const struct fuse_setattr_in *in)
{
    _cleanup_handle_ struct pt_handle *h = NULL;
    char path[PT_PROC_PATH_MAX];
    int fd = -1;
    int ret;

    if (in->valid & FATTR_FH) {
        ret = pt_handle_get(fs, in->fh, nodeid, &h);
        if (ret < 0)
            return ret;
        if (!h->is_dir)
            fd = h->fd;
    }

    if (in->valid & FATTR_MODE) {
        if (i->type == S_IFLNK)
            return -EOPNOTSUPP; /* Linux has no symlink modes */
        if (fd >= 0)
            ret = fchmod(fd, in->mode & 07777);
        else
            ret = fchmodat(fs->proc_self_fd, pt_proc_name(path, pfd), in->mode & 07777, 0);
        if (ret < 0)
            return -errno;
    }
    if (in->valid & (FATTR_UID | FATTR_GID)) {
        uint32_t uid = (uid_t)-1, gid = (gid_t)-1;
        /* The guest's new owner, as a host id (--translate-uid/gid). */
        if ((in->valid & FATTR_UID) && (ret = pt_idmap_to_host(&fs->uidmap, in->uid, &uid)) < 0)
            return ret;
        if ((in->valid & FATTR_GID) && (ret = pt_idmap_to_host(&fs->gidmap, in->gid, &gid)) < 0)
            return ret;
        if (fchownat(pfd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        pt_drop_mapped_capability(fs, i, fd);
        if (in->valid & FATTR_KILL_SUIDGID) {
            ret = pt_kill_suidgid(fs, i, fd);
            if (ret < 0)
                return ret;
        }
    }
    if (in->valid & FATTR_SIZE) {
        if (in->size > (uint64_t)INT64_MAX)
            return -EFBIG;
        if (i->type == S_IFDIR)
            return -EISDIR;
        if (i->type != S_IFREG)
            return -EINVAL;
        if (in->valid & FATTR_KILL_SUIDGID) {
            ret = pt_kill_suidgid(fs, i, fd);
            if (ret < 0)
                return ret;
        }
        if (fd >= 0) {
            ret = ftruncate(fd, (off_t)in->size);
        } else {
            _cleanup_close_ int wfd = pt_reopen(fs, i, O_WRONLY);
            if (wfd < 0)
                return wfd;
            ret = ftruncate(wfd, (off_t)in->size);
        }
        if (ret < 0)
            return -errno;
        pt_drop_mapped_capability(fs, i, fd);
    }
    if (in->valid & (FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW)) {
        ret = pt_setattr_times(fs, i, fd, pfd, in);
        if (ret < 0)
            return ret;
    }
    return 0;
}

int pt_op_setattr(struct fll_req *r, uint64_t nodeid, const struct fuse_setattr_in *in,
                  struct fuse_attr_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    int ret;

    ret = pt_inode_get(fs, nodeid, &i);
    if (ret < 0)
        return ret;
    if (fs->readonly)
        return -EROFS;
    ret = pt_inode_fd(fs, i, &pf);
    if (ret < 0)
        return ret;
    /* A new size changes what the DAX window shows past it: the guest's stores
     * there reach the file first, so the truncate takes them as it takes the
     * file's own bytes. Any change moves the file's times, which are the
     * window's own doing, not someone else's. */
    uint64_t from = (in->valid & FATTR_SIZE) ? in->size : 0;
    uint64_t span = (in->valid & FATTR_SIZE) ? UINT64_MAX : 0;
    struct pt_dax_io dio;
    ret = pt_dax_before(fs, i, from, span, &dio);
    if (ret < 0)
        return ret;
    ret = pt_setattr_apply(fs, nodeid, i, pf.fd, in);
    pt_dax_after(fs, i, from, span, &dio);
    if (ret < 0)
        return ret;
    return pt_attr_reply(fs, i, pf.fd, out);
}

int pt_op_readlink(struct fll_req *r, uint64_t nodeid, char *buf, size_t size)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    ssize_t n;
    int ret = pt_inode_get_type(fs, nodeid, S_IFLNK, -EINVAL, &i);

    if (ret < 0)
        return ret;
    ret = pt_inode_fd(fs, i, &f);
    if (ret < 0)
        return ret;
    n = readlinkat(f.fd, "", buf, size);
    if (n < 0)
        return -errno;
    return (int)n;
}

int pt_op_access(struct fll_req *r, uint64_t nodeid, const struct fuse_access_in *in)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    _cleanup_cred_ struct pt_cred cred = { 0 };
    char num[PT_PROC_PATH_MAX];
    int ret = pt_inode_get(fs, nodeid, &i);

    if (ret < 0)
        return ret;
    if (in->mask & ~(uint32_t)(R_OK | W_OK | X_OK))
        return -EINVAL;
    if (fs->readonly && (in->mask & W_OK))
        return -EROFS;
    ret = pt_inode_fd(fs, i, &f); /* before the switch: it may need CAP_DAC_READ_SEARCH */
    if (ret < 0)
        return ret;
    ret = pt_cred_enter(fs, r, &cred);
    if (ret < 0)
        return ret;
    pt_proc_name(num, f.fd);
    if (faccessat(fs->proc_self_fd, num, (int)in->mask, AT_EACCESS) < 0)
        return -errno;
    return 0;
}

int pt_op_statx(struct fll_req *r, uint64_t nodeid, const struct fuse_statx_in *in,
                struct fuse_statx_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    struct statx st;
    struct fuse_statx *s = &out->stat;
    int flags = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW;
    int ret = pt_inode_get_fd(fs, nodeid, &i, &f);

    if (ret < 0)
        return ret;
    flags |= (int)(in->sx_flags & AT_STATX_SYNC_TYPE);
    if (statx(f.fd, "", flags, (in->sx_mask & STATX_ALL) | STATX_BASIC_STATS, &st) < 0)
        return -errno;
    pt_dax_statx(fs, i, &st);
    memset(out, 0, sizeof(*out));
    pt_set_timeout(fs->timeout, &out->attr_valid, &out->attr_valid_nsec);
    s->mask = st.stx_mask & (STATX_BASIC_STATS | STATX_BTIME);
    s->blksize = st.stx_blksize;
    s->attributes = st.stx_attributes;
    s->attributes_mask = st.stx_attributes_mask;
    s->nlink = st.stx_nlink;
    s->uid = pt_idmap_to_guest(&fs->uidmap, st.stx_uid);
    s->gid = pt_idmap_to_guest(&fs->gidmap, st.stx_gid);
    s->mode = st.stx_mode;
    s->ino = st.stx_ino;
    s->size = st.stx_size;
    s->blocks = st.stx_blocks;
    s->atime.tv_sec = st.stx_atime.tv_sec;
    s->atime.tv_nsec = st.stx_atime.tv_nsec;
    s->btime.tv_sec = st.stx_btime.tv_sec;
    s->btime.tv_nsec = st.stx_btime.tv_nsec;
    s->ctime.tv_sec = st.stx_ctime.tv_sec;
    s->ctime.tv_nsec = st.stx_ctime.tv_nsec;
    s->mtime.tv_sec = st.stx_mtime.tv_sec;
    s->mtime.tv_nsec = st.stx_mtime.tv_nsec;
    s->rdev_major = st.stx_rdev_major;
    s->rdev_minor = st.stx_rdev_minor;
    s->dev_major = st.stx_dev_major;
    s->dev_minor = st.stx_dev_minor;
    return 0;
}
