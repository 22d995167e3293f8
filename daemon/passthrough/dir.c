/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Directory operations: MKDIR, MKNOD, SYMLINK, LINK, UNLINK, RMDIR, RENAME(2),
 * OPENDIR, READDIR(PLUS), RELEASEDIR, FSYNCDIR.
 *
 * Every name is used only relative to its parent's O_PATH fd with an *at()
 * call, after pt_check_name() (no '/', not "." or "..", not empty), whatever
 * the sandbox: a name can never reach outside its parent directory.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "fll.h"
#include "passthrough.h"
#include "pt_core_i.h"
#include "pt_cred_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_inode_i.h"
#include "pt_ops_i.h"
#include "pt_secctx_i.h"
#include "vufs_util.h"

#define PT_DIRBUF_MAX (64u * 1024u)

/*
 * References the parent directory of a modifying operation on name, and gives
 * an fd on it for the *at() call (opened now, before any credential switch).
 */
static int pt_parent_for_change(struct pt_fs *fs, uint64_t parent, const char *name,
                                struct pt_inode **out, struct pt_ifd *pf)
{
    int ret = pt_check_name(name);

    *out = NULL;
    if (ret < 0)
        return ret;
    ret = pt_inode_get(fs, parent, out);
    if (ret < 0)
        return ret;
    if ((*out)->type != S_IFDIR)
        return -ENOTDIR; /* the caller's cleanup drops the reference */
    if (fs->readonly)
        return -EROFS;
    return pt_inode_fd(fs, *out, pf);
}

/* FUSE carries rdev in the kernel's 32-bit new_encode_dev() form. */
static dev_t pt_decode_dev(uint32_t dev)
{
    return makedev((dev & 0xfff00u) >> 8, (dev & 0xffu) | ((dev >> 12) & 0xfff00u));
}

/* What MKDIR, MKNOD and SYMLINK make: S_IFDIR, MKNOD's type or S_IFLNK; the
 * client's mode and umask (not for a symlink), MKNOD's rdev, SYMLINK's target. */
struct pt_new_entry {
    mode_t type;
    bool mknod;
    uint32_t mode, umask, rdev;
    const char *target;
};

/* The checks of what is made, after the parent's (so their errors come first). */
static int pt_new_entry_check(const struct pt_new_entry *e)
{
    if (e->mknod)
        return e->type == S_IFREG || e->type == S_IFIFO || e->type == S_IFSOCK ||
                       e->type == S_IFCHR || e->type == S_IFBLK
                   ? 0
                   : -EINVAL;
    if (e->type != S_IFLNK)
        return 0;
    /* The target is only ever resolved by the client; it just has to be a path. */
    if (e->target[0] == '\0')
        return -ENOENT;
    return strlen(e->target) >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* MKDIR, MKNOD and SYMLINK: made as the caller, then looked up and labelled. */
static int pt_make_entry(struct fll_req *r, uint64_t parent, const char *name,
                         const struct pt_new_entry *e, struct fuse_entry_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *p = NULL;
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    int ret = pt_parent_for_change(fs, parent, name, &p, &pf);

    if (ret < 0)
        return ret;
    ret = pt_new_entry_check(e);
    if (ret < 0)
        return ret;
    mode_t mode = e->type == S_IFLNK ? 0 : pt_create_mode(fs, p, e->mode, e->umask);
    {
        _cleanup_cred_ struct pt_cred cred = { 0 };
        ret = pt_cred_enter(fs, r, &cred);
        if (ret < 0)
            return ret;
        if (e->type == S_IFDIR)
            ret = mkdirat(pf.fd, name, mode);
        else if (e->type == S_IFLNK)
            ret = symlinkat(e->target, pf.fd, name);
        else
            ret = mknodat(pf.fd, name, e->type | mode,
                          e->type == S_IFCHR || e->type == S_IFBLK ? pt_decode_dev(e->rdev) : 0);
        if (ret < 0)
            return -errno;
    }
    ret = pt_do_lookup_at(fs, p, pf.fd, name, out);
    if (ret < 0)
        return ret;
    return pt_secctx_finish(fs, r, p, name, out, e->type == S_IFDIR ? AT_REMOVEDIR : 0);
}

int pt_op_mkdir(struct fll_req *r, uint64_t parent, const char *name,
                const struct fuse_mkdir_in *in, struct fuse_entry_out *out)
{
    struct pt_new_entry e = { .type = S_IFDIR, .mode = in->mode, .umask = in->umask };

    return pt_make_entry(r, parent, name, &e, out);
}

int pt_op_mknod(struct fll_req *r, uint64_t parent, const char *name,
                const struct fuse_mknod_in *in, struct fuse_entry_out *out)
{
    struct pt_new_entry e = { .type = in->mode & S_IFMT, .mknod = true, .mode = in->mode,
                              .umask = in->umask, .rdev = in->rdev };

    return pt_make_entry(r, parent, name, &e, out);
}

int pt_op_symlink(struct fll_req *r, uint64_t parent, const char *name, const char *target,
                  struct fuse_entry_out *out)
{
    struct pt_new_entry e = { .type = S_IFLNK, .target = target };

    return pt_make_entry(r, parent, name, &e, out);
}

int pt_op_link(struct fll_req *r, uint64_t nodeid, uint64_t newparent, const char *newname,
               struct fuse_entry_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *p = NULL;
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    char path[PT_PROC_PATH_MAX];
    int ret = pt_parent_for_change(fs, newparent, newname, &p, &pf);

    if (ret < 0)
        return ret;
    ret = pt_inode_get(fs, nodeid, &i);
    if (ret < 0)
        return ret;
    if (i->type == S_IFDIR)
        return -EPERM;
    ret = pt_inode_fd(fs, i, &f);
    if (ret < 0)
        return ret;
    /* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc link works without. */
    if (linkat(f.fd, "", pf.fd, newname, AT_EMPTY_PATH) < 0) {
        if (errno != ENOENT && errno != EPERM)
            return -errno;
        if (linkat(fs->proc_self_fd, pt_proc_name(path, f.fd), pf.fd, newname,
                   AT_SYMLINK_FOLLOW) < 0)
            return -errno;
    }
    return pt_do_lookup_at(fs, p, pf.fd, newname, out);
}

/* UNLINK and RMDIR: unlinkat with flags 0 or AT_REMOVEDIR. */
static int pt_remove(struct fll_req *r, uint64_t parent, const char *name, int flags)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *p = NULL;
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    int ret = pt_parent_for_change(fs, parent, name, &p, &pf);

    if (ret < 0)
        return ret;
    return unlinkat(pf.fd, name, flags) < 0 ? -errno : 0;
}

int pt_op_unlink(struct fll_req *r, uint64_t parent, const char *name)
{
    return pt_remove(r, parent, name, 0);
}

int pt_op_rmdir(struct fll_req *r, uint64_t parent, const char *name)
{
    return pt_remove(r, parent, name, AT_REMOVEDIR);
}

int pt_op_rename(struct fll_req *r, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname, uint32_t flags)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *p = NULL;
    _cleanup_inode_ struct pt_inode *np = NULL;
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    _cleanup_ifd_ struct pt_ifd npf = PT_IFD_NONE;
    int ret;

    if (flags & ~(uint32_t)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
        return -EINVAL;
    ret = pt_parent_for_change(fs, parent, name, &p, &pf);
    if (ret < 0)
        return ret;
    ret = pt_parent_for_change(fs, newparent, newname, &np, &npf);
    if (ret < 0)
        return ret;
    if (syscall(SYS_renameat2, pf.fd, name, npf.fd, newname, flags) < 0)
        return -errno;
    return 0;
}

/* ---- Listing ---------------------------------------------------------------- */

struct pt_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int pt_op_opendir(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                  struct fuse_open_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_close_ int fd = -1;
    uint64_t fh;
    int ret = pt_inode_get_type(fs, nodeid, S_IFDIR, -ENOTDIR, &i);

    if (ret < 0)
        return ret;
    ret = pt_fd_reserve(fs);
    if (ret < 0)
        return ret;
    fd = pt_reopen(fs, i, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        pt_fd_unreserve(fs);
        return fd;
    }
    ret = pt_handle_new(fs, i, TAKE_FD(fd), O_RDONLY | O_DIRECTORY, true, &fh);
    if (ret < 0)
        return ret;
    memset(out, 0, sizeof(*out));
    out->fh = fh;
    if (fs->cache == PT_CACHE_ALWAYS)
        out->open_flags |= FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE;
    return 0;
}

static bool pt_is_dot(const char *n)
{
    return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* Adds one entry; false when it did not fit (the lookup, if any, is undone). */
static bool pt_readdir_add(struct pt_fs *fs, struct pt_handle *h, struct fll_dirbuf *db,
                           const struct pt_dirent64 *d)
{
    struct fuse_entry_out e;
    uint64_t ino = d->d_ino;

    /* The share's root has no parent for the client: its ".." is itself, and
     * the number of the host directory above the share stays on the host. */
    if (h->ino == fs->root && strcmp(d->d_name, "..") == 0)
        ino = fs->root->ino;
    if (!db->plus)
        return fll_dirbuf_add(db, d->d_name, ino, d->d_type, (uint64_t)d->d_off, NULL);
    memset(&e, 0, sizeof(e));
    /* No lookup for "." and "..", nor when it fails (nodeid 0 = attributes unknown).
     * The directory's own open fd is the parent for the lookup. */
    if (!pt_is_dot(d->d_name) && pt_do_lookup_at(fs, h->ino, h->fd, d->d_name, &e) < 0)
        memset(&e, 0, sizeof(e));
    if (fll_dirbuf_add(db, d->d_name, ino, d->d_type, (uint64_t)d->d_off, &e))
        return true;
    if (e.nodeid)
        pt_inode_forget(fs, e.nodeid, 1);
    return false;
}

int pt_op_readdir(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                  struct fll_dirbuf *db)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_handle_ struct pt_handle *h = NULL;
    size_t bufsz = db->size < 4096 ? 4096 : db->size;
    char *buf;
    int ret = pt_handle_get(fs, in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    if (!h->is_dir)
        return -ENOTDIR;
    if (in->offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    if (bufsz > PT_DIRBUF_MAX)
        bufsz = PT_DIRBUF_MAX;
    buf = malloc(bufsz);
    if (!buf)
        return -ENOMEM;

    /* h->lock serialises the directory's file position between READDIRs. */
    pthread_mutex_lock(&h->lock);
    if (lseek(h->fd, (off_t)in->offset, SEEK_SET) < 0) {
        ret = -errno;
        goto unlock;
    }
    for (;;) {
        long n = syscall(SYS_getdents64, h->fd, buf, bufsz);
        if (n < 0) {
            ret = -errno;
            break;
        }
        if (n == 0)
            break;
        bool full = false;
        for (long pos = 0; pos < n;) {
            /* malloc'd, and the kernel pads each record to 8 bytes */
            const struct pt_dirent64 *d = (const void *)(buf + pos);
            if (d->d_reclen == 0 || pos + d->d_reclen > n)
                break; /* the kernel never does this; do not loop on it */
            pos += d->d_reclen;
            if (!pt_readdir_add(fs, h, db, d)) {
                full = true;
                break;
            }
        }
        if (full)
            break;
    }
    /* Entries already added are a valid partial reply; report an error only alone. */
    if (ret < 0 && db->len > 0)
        ret = 0;
unlock:
    pthread_mutex_unlock(&h->lock);
    free(buf);
    return ret;
}

int pt_op_releasedir(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in)
{
    return pt_handle_close(pt_fs_of(r), in->fh, nodeid);
}

int pt_op_fsyncdir(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_handle_ struct pt_handle *h = NULL;
    int ret = pt_handle_get(fs, in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    ret = (in->fsync_flags & 1) ? fdatasync(h->fd) : fsync(h->fd);
    return ret < 0 ? -errno : 0;
}
