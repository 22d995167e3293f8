/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The passthrough's core: what the operation files share. Host attributes as
 * FUSE attributes and entries, the name check and the lookup of a name under a
 * directory, opening an inode's object for I/O, xattr calls on an inode's
 * object, and the privileges a change clears.
 *
 * The operation files call this file, the helpers and the tables rather than
 * each other; this file calls only the tables and the leaves below it (pt_fs_i.h
 * lists the layers).
 */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/xattr.h>

#include "fll.h"
#include "pt_core_i.h"
#include "pt_dax_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_idmap_i.h"
#include "pt_inode_i.h"
#include "vufs_util.h"

/* ---- Attributes and entries ------------------------------------------------ */

static uint32_t pt_encode_dev(uint32_t major, uint32_t minor)
{
    /* The kernel's new_encode_dev(): what FUSE carries in a 32-bit rdev. */
    return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xffu) << 12);
}

void pt_set_timeout(double t, uint64_t *sec, uint32_t *nsec)
{
    *sec = (uint64_t)t;
    *nsec = (uint32_t)((t - (double)(uint64_t)t) * 1e9);
}

void pt_fill_attr(const struct statx *st, struct fuse_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->ino = st->stx_ino;
    a->size = st->stx_size;
    a->blocks = st->stx_blocks;
    a->atime = (uint64_t)st->stx_atime.tv_sec;
    a->atimensec = st->stx_atime.tv_nsec;
    a->mtime = (uint64_t)st->stx_mtime.tv_sec;
    a->mtimensec = st->stx_mtime.tv_nsec;
    a->ctime = (uint64_t)st->stx_ctime.tv_sec;
    a->ctimensec = st->stx_ctime.tv_nsec;
    a->mode = st->stx_mode;
    a->nlink = st->stx_nlink;
    a->uid = st->stx_uid;
    a->gid = st->stx_gid;
    a->rdev = pt_encode_dev(st->stx_rdev_major, st->stx_rdev_minor);
    a->blksize = st->stx_blksize;
}

int pt_fill_entry(struct pt_fs *fs, struct pt_inode *parent, struct pt_inode *i,
                  const struct statx *st, struct fuse_entry_out *out)
{
    memset(out, 0, sizeof(*out));
    out->nodeid = pt_inode_nodeid(i);
    out->generation = i->gen;
    pt_set_timeout(fs->timeout, &out->entry_valid, &out->entry_valid_nsec);
    pt_set_timeout(fs->timeout, &out->attr_valid, &out->attr_valid_nsec);
    pt_fill_attr(st, &out->attr);
    pt_attr_to_guest(fs, &out->attr);
    pt_dax_attr(fs, i, &out->attr);
    if (fs->announce_submounts && parent && i->type == S_IFDIR &&
        (i->dev != parent->dev || i->mnt_id != parent->mnt_id))
        out->attr.flags |= FUSE_ATTR_SUBMOUNT;
    return 0;
}

/* ---- Names and lookups ------------------------------------------------------ */

int pt_check_name(const char *name)
{
    if (!fll_name_valid(name))
        return -EINVAL;
    if (strlen(name) > NAME_MAX)
        return -ENAMETOOLONG;
    return 0;
}

int pt_do_lookup(struct pt_fs *fs, struct pt_inode *parent, const char *name,
                 struct fuse_entry_out *out)
{
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    int ret;

    if (parent->type != S_IFDIR)
        return -ENOTDIR;
    ret = pt_inode_fd(fs, parent, &pf);
    if (ret < 0)
        return ret;
    return pt_do_lookup_at(fs, parent, pf.fd, name, out);
}

int pt_do_lookup_at(struct pt_fs *fs, struct pt_inode *parent, int pfd, const char *name,
                    struct fuse_entry_out *out)
{
    _cleanup_close_ int fd = -1;
    _cleanup_inode_ struct pt_inode *i = NULL;
    struct statx st;
    int ret;

    if (parent->type != S_IFDIR)
        return -ENOTDIR;
    /*
     * Most lookups name an inode the client knows already (revalidation) or
     * nothing: a statx by name settles both without opening and closing an fd.
     * A known (dev, ino, mnt_id) is pinned by its O_PATH fd, so it cannot be a
     * reused inode number. Any other answer takes the opening path below.
     */
    if (statx(pfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, PT_STATX_MASK, &st) == 0) {
        if ((st.stx_mask & STATX_MNT_ID) && pt_inode_find(fs, &st, true, &i) == 0)
            return pt_fill_entry(fs, parent, i, &st, out);
    } else if (errno == ENOENT) {
        return -ENOENT;
    }
    fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ret = pt_inode_intern_fd(fs, TAKE_FD(fd), &st, true, &i);
    if (ret < 0)
        return ret;
    return pt_fill_entry(fs, parent, i, &st, out);
}

/* ---- An inode's object: I/O opens and xattr calls --------------------------- */

int pt_reopen(struct pt_fs *fs, const struct pt_inode *i, int flags)
{
    char num[PT_PROC_PATH_MAX];
    int fd;

    /* The type of an inode never changes; its O_PATH fd or handle names one object. */
    if (i->type == S_IFDIR) {
        if ((flags & O_ACCMODE) != O_RDONLY)
            return -EISDIR;
    } else if (i->type != S_IFREG) {
        return i->type == S_IFLNK ? -ELOOP : -ENXIO;
    }
    if (i->fd < 0)
        return pt_fh_open(i->mnt, &i->fh, flags & ~(O_CREAT | O_EXCL | O_NOCTTY));
    pt_proc_name(num, i->fd);
    fd = openat(fs->proc_self_fd, num, (flags & ~(O_CREAT | O_EXCL | O_NOCTTY)) | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/*
 * One xattr call: the f*xattr form on fd, or (path != NULL) the path form on a
 * magic link, which leads to the object itself and stops there.
 */
static ssize_t pt_xattr_do(int fd, const char *path, enum pt_xop op, const char *name, void *buf,
                           size_t size, int flags)
{
    void *out = size ? buf : NULL;
    ssize_t n;

    switch (op) {
    case PT_XGET:
        n = path ? getxattr(path, name, out, size) : fgetxattr(fd, name, out, size);
        break;
    case PT_XSET:
        n = path ? setxattr(path, name, buf, size, flags) : fsetxattr(fd, name, buf, size, flags);
        break;
    case PT_XLIST:
        n = path ? listxattr(path, out, size) : flistxattr(fd, out, size);
        break;
    case PT_XREMOVE:
    default:
        n = path ? removexattr(path, name) : fremovexattr(fd, name);
        break;
    }
    return n < 0 ? -errno : n;
}

ssize_t pt_xattr_call(struct pt_fs *fs, struct pt_inode *i, enum pt_xop op,
                      const char *name, void *buf, size_t size, int flags)
{
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    char num[PT_PROC_PATH_MAX];
    ssize_t n;

    if (i->type == S_IFREG || i->type == S_IFDIR) {
        int fd = pt_reopen(fs, i, i->type == S_IFDIR ? O_RDONLY | O_DIRECTORY : O_RDONLY);
        if (fd < 0)
            return fd;
        n = pt_xattr_do(fd, NULL, op, name, buf, size, flags);
        close(fd);
        return n;
    }
    /*
     * Symlinks and special files cannot be opened (and must not be): no *xattrat
     * call exists, so the working directory goes to proc_self_fd for a relative
     * path. The working directory is process-wide: cwd_lock serialises this, and
     * nothing else in the daemon uses relative paths once serving. It is left at
     * the shared directory (the sandbox's "/"), never at a host directory.
     */
    n = pt_inode_fd(fs, i, &f);
    if (n < 0)
        return n;
    pthread_mutex_lock(&fs->cwd_lock);
    if (fchdir(fs->proc_self_fd) < 0) {
        n = -errno;
    } else {
        n = pt_xattr_do(-1, pt_proc_name(num, f.fd), op, name, buf, size, flags);
        if (fchdir(fs->root->fd) < 0) /* the root always keeps its O_PATH fd */
            n = n < 0 ? n : -errno;
    }
    pthread_mutex_unlock(&fs->cwd_lock);
    return n;
}

/* ---- Privileges a change clears ---------------------------------------------- */

void pt_drop_mapped_capability(struct pt_fs *fs, struct pt_inode *i, int fd)
{
    ssize_t ret;

    if (!fs->cap_mapped || atomic_load(&i->cap_clean))
        return;
    if (fd >= 0 && i->type == S_IFREG)
        ret = fremovexattr(fd, fs->cap_mapped) == 0 ? 0 : -errno;
    else if (i->type == S_IFREG || i->type == S_IFDIR)
        ret = pt_xattr_call(fs, i, PT_XREMOVE, fs->cap_mapped, NULL, 0, 0);
    else
        return;
    if (ret == 0 || ret == -ENODATA)
        atomic_store(&i->cap_clean, true);
}

int pt_kill_suidgid(struct pt_fs *fs, struct pt_inode *i, int fd)
{
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    struct statx st;
    mode_t mode, clear = S_ISUID;
    char path[PT_PROC_PATH_MAX];
    int ret = fd >= 0 ? 0 : pt_inode_fd(fs, i, &f);

    if (ret < 0)
        return ret;
    ret = pt_statx_fd(fd >= 0 ? fd : f.fd, &st);
    if (ret < 0)
        return ret;
    if (i->type != S_IFREG)
        return 0;
    mode = st.stx_mode & 07777;
    if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
        clear |= S_ISGID;
    if (!(mode & clear))
        return 0;
    if (fd >= 0)
        ret = fchmod(fd, mode & ~clear);
    else
        ret = fchmodat(fs->proc_self_fd, pt_proc_name(path, f.fd), mode & ~clear, 0);
    return ret < 0 ? -errno : 0;
}
