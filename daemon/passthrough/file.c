/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * File operations: OPEN, CREATE, TMPFILE, READ, WRITE, RELEASE, FSYNC, FLUSH,
 * FALLOCATE, LSEEK, COPY_FILE_RANGE.
 *
 * Only regular files are ever opened for I/O (pt_reopen checks the inode's type
 * before anything is opened): a FIFO, socket or device node in the shared
 * directory is never opened on the host (CVE-2020-35517). CREATE without
 * O_EXCL first tries an exclusive create and, when the name exists, looks it up
 * with O_PATH and reopens it only if it is a regular file.
 */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/uio.h>

#include "passthrough.h"
#include "pt_core_i.h"
#include "pt_cred_i.h"
#include "pt_dax_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_inode_i.h"
#include "pt_lock_i.h"
#include "pt_ops_i.h"
#include "pt_secctx_i.h"
#include "vufs_util.h"

/* Flags the client may pass through to the host open; the rest are ours to decide. */
#define PT_OPEN_PASS (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME | O_DIRECT)

/* Host open flags for a client's open flags, or -errno. */
static int pt_open_flags(struct pt_fs *fs, uint32_t cflags)
{
    int flags = (int)cflags & PT_OPEN_PASS;

    if ((flags & O_ACCMODE) == O_ACCMODE)
        return -EINVAL;
    if (fs->readonly && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)))
        return -EROFS;
    if (!fs->allow_direct_io)
        flags &= ~O_DIRECT;
    if (atomic_load(&fs->writeback)) {
        /* The client's page cache may read to fill a partial page. */
        if ((flags & O_ACCMODE) == O_WRONLY)
            flags = (flags & ~O_ACCMODE) | O_RDWR;
        /* With a writeback cache the client computes the append offset itself. */
        flags &= ~O_APPEND;
    }
    return flags;
}

static void pt_fill_open(struct pt_fs *fs, int flags, uint64_t fh, struct fuse_open_out *out)
{
    memset(out, 0, sizeof(*out));
    out->fh = fh;
    switch (fs->cache) {
    case PT_CACHE_NEVER:
    case PT_CACHE_METADATA:
        out->open_flags |= FOPEN_DIRECT_IO;
        break;
    case PT_CACHE_ALWAYS:
        out->open_flags |= FOPEN_KEEP_CACHE;
        break;
    case PT_CACHE_AUTO:
        break;
    }
    if (fs->allow_direct_io && (flags & O_DIRECT))
        out->open_flags |= FOPEN_DIRECT_IO;
}

/* Opens inode i for I/O and adds a handle for it. kill: FUSE_OPEN_KILL_SUIDGID. */
static int pt_open_inode(struct pt_fs *fs, struct pt_inode *i, int flags, bool kill,
                         struct fuse_open_out *out)
{
    _cleanup_close_ int fd = -1;
    uint64_t fh;
    int ret;

    if (i->type == S_IFDIR)
        return -EISDIR;
    ret = pt_fd_reserve(fs);
    if (ret < 0)
        return ret;
    fd = pt_reopen(fs, i, flags);
    if (fd < 0) {
        pt_fd_unreserve(fs);
        return fd;
    }
    if (flags & O_TRUNC) {
        /* killpriv_v2: an unprivileged client truncating drops set-id bits. */
        if (kill) {
            ret = pt_kill_suidgid(fs, i, fd);
            if (ret < 0) {
                close(TAKE_FD(fd));
                pt_fd_unreserve(fs);
                return ret;
            }
        }
        pt_drop_mapped_capability(fs, i, fd);
    }
    ret = pt_handle_new(fs, i, TAKE_FD(fd), flags, false, &fh);
    if (ret < 0)
        return ret;
    pt_fill_open(fs, flags, fh, out);
    return 0;
}

int pt_op_open(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
               struct fuse_open_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    int flags;
    int ret = pt_inode_get(fs, nodeid, &i);

    if (ret < 0)
        return ret;
    flags = pt_open_flags(fs, in->flags);
    if (flags < 0)
        return flags;
    return pt_open_inode(fs, i, flags,
                         atomic_load(&fs->killpriv_v2) && (in->open_flags & FUSE_OPEN_KILL_SUIDGID),
                         out);
}

/* Interns the object behind an fd opened for I/O and fills the entry. */
static int pt_entry_from_fd(struct pt_fs *fs, struct pt_inode *parent, int fd,
                            struct pt_inode **out_inode, struct fuse_entry_out *entry)
{
    _cleanup_close_ int pfd = -1;
    char num[PT_PROC_PATH_MAX];
    struct statx st;
    int ret;

    pt_proc_name(num, fd);
    pfd = openat(fs->proc_self_fd, num, O_PATH | O_CLOEXEC);
    if (pfd < 0)
        return -errno;
    ret = pt_inode_intern_fd(fs, TAKE_FD(pfd), &st, true, out_inode);
    if (ret < 0)
        return ret;
    return pt_fill_entry(fs, parent, *out_inode, &st, entry);
}

static int pt_create_common(struct fll_req *r, uint64_t parent, const char *name,
                            const struct fuse_create_in *in, struct fuse_entry_out *entry,
                            struct fuse_open_out *open, bool tmpfile)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *p = NULL;
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    _cleanup_close_ int fd = -1;
    mode_t type = in->mode & S_IFMT;
    uint64_t fh;
    int flags, ret;

    if (!tmpfile) {
        ret = pt_check_name(name);
        if (ret < 0)
            return ret;
    }
    ret = pt_inode_get(fs, parent, &p);
    if (ret < 0)
        return ret;
    if (p->type != S_IFDIR)
        return -ENOTDIR;
    if (fs->readonly)
        return -EROFS;
    if (type != 0 && type != S_IFREG)
        return -EINVAL;
    flags = pt_open_flags(fs, in->flags);
    if (flags < 0)
        return flags;
    if (tmpfile && (flags & O_ACCMODE) == O_RDONLY)
        return -EINVAL;
    mode_t mode = pt_create_mode(fs, p, in->mode, in->umask);
    ret = pt_inode_fd(fs, p, &pf); /* before the credential switch */
    if (ret < 0)
        return ret;

    ret = pt_fd_reserve(fs);
    if (ret < 0)
        return ret;
    if (tmpfile)
        fd = pt_openat_as_caller(fs, r, pf.fd, ".", (flags & ~O_TRUNC) | O_TMPFILE, mode);
    else
        fd = pt_openat_as_caller(fs, r, pf.fd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
    ret = fd < 0 ? fd : 0;
    if (ret == -EEXIST && !tmpfile && !(in->flags & O_EXCL)) {
        /* The name exists: open it only if it is a regular file. */
        _cleanup_close_ int pfd = openat(pf.fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct statx st;
        if (pfd < 0) {
            ret = -errno;
            goto unreserve;
        }
        ret = pt_inode_intern_fd(fs, TAKE_FD(pfd), &st, true, &i);
        if (ret < 0)
            goto unreserve;
        pt_fill_entry(fs, p, i, &st, entry);
        fd = pt_reopen(fs, i, flags);
        if (fd < 0) {
            ret = fd;
            pt_inode_forget(fs, entry->nodeid, 1);
            goto unreserve;
        }
        if (flags & O_TRUNC) {
            if (atomic_load(&fs->killpriv_v2) && (in->open_flags & FUSE_OPEN_KILL_SUIDGID))
                (void)pt_kill_suidgid(fs, i, fd);
            pt_drop_mapped_capability(fs, i, fd);
        }
    } else if (ret < 0) {
        goto unreserve;
    } else {
        ret = pt_entry_from_fd(fs, p, fd, &i, entry);
        if (ret < 0)
            goto unreserve;
        /* A new inode: its security label, or no inode at all. */
        ret = pt_secctx_apply(fs, r, i, fd);
        if (ret < 0) {
            if (!tmpfile)
                (void)unlinkat(pf.fd, name, 0);
            pt_inode_forget(fs, entry->nodeid, 1);
            goto unreserve;
        }
    }
    ret = pt_handle_new(fs, i, TAKE_FD(fd), flags, false, &fh);
    if (ret < 0) {
        pt_inode_forget(fs, entry->nodeid, 1);
        return ret;
    }
    pt_fill_open(fs, flags, fh, open);
    return 0;

unreserve:
    pt_fd_unreserve(fs);
    return ret;
}

int pt_op_create(struct fll_req *r, uint64_t parent, const char *name,
                 const struct fuse_create_in *in, struct fuse_entry_out *entry,
                 struct fuse_open_out *open)
{
    return pt_create_common(r, parent, name, in, entry, open, false);
}

int pt_op_tmpfile(struct fll_req *r, uint64_t parent, const char *name,
                  const struct fuse_create_in *in, struct fuse_entry_out *entry,
                  struct fuse_open_out *open)
{
    return pt_create_common(r, parent, name, in, entry, open, true);
}

/*
 * Whether data I/O on h at offset with cnt buffers may go ahead: -EIO while a
 * lock of the file is lost (another process took it across a restart), -EINVAL
 * for an offset or a buffer count the host calls cannot take.
 */
static int pt_io_check(const struct pt_handle *h, uint64_t offset, unsigned cnt)
{
    if (atomic_load_explicit(&h->ino->lock_lost, memory_order_relaxed))
        return -EIO;
    if (offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    if (cnt > IOV_MAX)
        return -EINVAL;
    return 0;
}

ssize_t pt_op_read(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                   const struct iovec *dst, unsigned dst_cnt)
{
    _cleanup_handle_ struct pt_handle *h = NULL;
    ssize_t n;
    int ret = pt_handle_get(pt_fs_of(r), in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    if (h->is_dir)
        return -EISDIR;
    ret = pt_io_check(h, in->offset, dst_cnt);
    if (ret < 0)
        return ret;
    struct pt_dax_io dio;
    ret = pt_dax_before(pt_fs_of(r), h->ino, in->offset, in->size, &dio);
    if (ret < 0)
        return ret;
    n = preadv(h->fd, dst, (int)dst_cnt, (off_t)in->offset);
    return n < 0 ? -errno : n;
}

/* The handle fh of nodeid, for a change of its file's data: -EISDIR for a
 * directory's, -EROFS on a --readonly share. */
static int pt_handle_get_to_write(struct pt_fs *fs, uint64_t fh, uint64_t nodeid,
                                  struct pt_handle **out)
{
    int ret = pt_handle_get(fs, fh, nodeid, out);

    if (ret == 0 && ((*out)->is_dir || fs->readonly)) {
        ret = (*out)->is_dir ? -EISDIR : -EROFS;
        pt_handle_put(*out);
        *out = NULL;
    }
    return ret;
}

ssize_t pt_op_write(struct fll_req *r, uint64_t nodeid, const struct fuse_write_in *in,
                    const struct iovec *src, unsigned src_cnt)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_handle_ struct pt_handle *h = NULL;
    ssize_t n;
    int ret = pt_handle_get_to_write(fs, in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    ret = pt_io_check(h, in->offset, src_cnt);
    if (ret < 0)
        return ret;
    if (in->write_flags & FUSE_WRITE_KILL_SUIDGID) {
        ret = pt_kill_suidgid(fs, h->ino, h->fd);
        if (ret < 0)
            return ret;
    }
    struct pt_dax_io dio;
    ret = pt_dax_before(fs, h->ino, in->offset, in->size, &dio);
    if (ret < 0)
        return ret;
    pt_drop_mapped_capability(fs, h->ino, h->fd);
    n = pwritev(h->fd, src, (int)src_cnt, (off_t)in->offset);
    /* An O_APPEND handle wrote at the end, wherever that was. */
    if (h->flags & O_APPEND)
        pt_dax_after(fs, h->ino, 0, UINT64_MAX, &dio);
    else
        pt_dax_after(fs, h->ino, in->offset, n > 0 ? (uint64_t)n : 0, &dio);
    return n < 0 ? -errno : n;
}

int pt_op_release(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in)
{
    struct pt_fs *fs = pt_fs_of(r);

    if (in->release_flags & FUSE_RELEASE_FLOCK_UNLOCK) {
        _cleanup_handle_ struct pt_handle *h = NULL;
        if (pt_handle_get(fs, in->fh, nodeid, &h) == 0)
            (void)flock(h->fd, LOCK_UN);
    }
    /* Closing the handle's fds drops its POSIX (OFD) locks and flock. */
    int ret = pt_handle_close(fs, in->fh, nodeid);
    pt_locks_kick(fs);
    return ret;
}

int pt_op_fsync(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in)
{
    _cleanup_handle_ struct pt_handle *h = NULL;
    int ret = pt_handle_get(pt_fs_of(r), in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    /* The guest's stores in the DAX window first: then they are durable too. */
    int wb = h->is_dir ? 0 : pt_dax_sync(pt_fs_of(r), h->ino);
    ret = (in->fsync_flags & 1) ? fdatasync(h->fd) : fsync(h->fd);
    if (ret < 0)
        return -errno;
    return wb;
}

int pt_op_flush(struct fll_req *r, uint64_t nodeid, const struct fuse_flush_in *in)
{
    _cleanup_handle_ struct pt_handle *h = NULL;
    int ret = pt_handle_get(pt_fs_of(r), in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    /* close() in the client: that process's POSIX locks on the file go. */
    pt_lock_release_owner(h, in->lock_owner);
    /* and the host sees what it stored through the DAX window (close-to-open). */
    return h->is_dir ? 0 : pt_dax_sync(pt_fs_of(r), h->ino);
}

int pt_op_fallocate(struct fll_req *r, uint64_t nodeid, const struct fuse_fallocate_in *in)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_handle_ struct pt_handle *h = NULL;
    const uint32_t known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE |
                           FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE |
                           FALLOC_FL_UNSHARE_RANGE;
    int ret = pt_handle_get_to_write(fs, in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    if (in->mode & ~known)
        return -EOPNOTSUPP;
    if (in->offset > (uint64_t)INT64_MAX || in->length > (uint64_t)INT64_MAX ||
        in->offset + in->length > (uint64_t)INT64_MAX)
        return -EFBIG;
    /* Collapsing or inserting a range moves everything after it. */
    uint64_t span = (in->mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
                        ? UINT64_MAX
                        : in->length;
    struct pt_dax_io dio;
    ret = pt_dax_before(fs, h->ino, in->offset, span, &dio);
    if (ret < 0)
        return ret;
    ret = fallocate(h->fd, (int)in->mode, (off_t)in->offset, (off_t)in->length) < 0 ? -errno : 0;
    pt_dax_after(fs, h->ino, in->offset, span, &dio);
    return ret;
}

int pt_op_lseek(struct fll_req *r, uint64_t nodeid, const struct fuse_lseek_in *in,
                struct fuse_lseek_out *out)
{
    _cleanup_handle_ struct pt_handle *h = NULL;
    off_t off;
    int ret = pt_handle_get(pt_fs_of(r), in->fh, nodeid, &h);

    if (ret < 0)
        return ret;
    if (in->whence != SEEK_DATA && in->whence != SEEK_HOLE)
        return -EINVAL;
    if (in->offset > (uint64_t)INT64_MAX)
        return -ENXIO;
    /* Data the guest stored through the DAX window is data, not a hole. */
    struct pt_dax_io dio;
    ret = pt_dax_before(pt_fs_of(r), h->ino, in->offset, UINT64_MAX, &dio);
    if (ret < 0)
        return ret;
    /* The handle's file position is not used by anything else (pread/pwrite). */
    off = lseek(h->fd, (off_t)in->offset, (int)in->whence);
    if (off < 0)
        return -errno;
    out->offset = (uint64_t)off;
    return 0;
}

ssize_t pt_op_copy_file_range(struct fll_req *r, uint64_t nodeid,
                              const struct fuse_copy_file_range_in *in)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_handle_ struct pt_handle *hin = NULL;
    _cleanup_handle_ struct pt_handle *hout = NULL;
    loff_t off_in, off_out;
    size_t len;
    ssize_t n;
    int ret;

    if (fs->readonly)
        return -EROFS;
    if (in->flags != 0)
        return -EINVAL;
    ret = pt_handle_get(fs, in->fh_in, nodeid, &hin);
    if (ret < 0)
        return ret;
    ret = pt_handle_get(fs, in->fh_out, in->nodeid_out, &hout);
    if (ret < 0)
        return ret;
    if (hin->is_dir || hout->is_dir)
        return -EISDIR;
    if (in->off_in > (uint64_t)INT64_MAX || in->off_out > (uint64_t)INT64_MAX)
        return -EINVAL;
    off_in = (loff_t)in->off_in;
    off_out = (loff_t)in->off_out;
    /* The reply carries a 32-bit count. */
    len = in->len > (1u << 30) ? (1u << 30) : (size_t)in->len;
    struct pt_dax_io din, dout;
    if ((ret = pt_dax_before(fs, hin->ino, in->off_in, len, &din)) < 0 ||
        (ret = pt_dax_before(fs, hout->ino, in->off_out, len, &dout)) < 0)
        return ret;
    pt_drop_mapped_capability(fs, hout->ino, hout->fd);
    n = copy_file_range(hin->fd, &off_in, hout->fd, &off_out, len, 0);
    pt_dax_after(fs, hout->ino, in->off_out, n > 0 ? (uint64_t)n : 0, &dout);
    return n < 0 ? -errno : n;
}
