/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Decoders for attributes, extended attributes, directories and the rest.
 */
#include <errno.h>
#include <linux/limits.h>
#include <stdlib.h>
#include <string.h>

#include "fll_ops_i.h"

#define FLL_XATTR_NAME_MAX 255   /* XATTR_NAME_MAX */
#define FLL_XATTR_SIZE_MAX 65536 /* XATTR_SIZE_MAX */
#define FLL_XATTR_LIST_MAX 65536 /* XATTR_LIST_MAX */
/* A READDIR never asks for more than max_pages (at most 256) pages. */
#define FLL_READDIR_MAX (256u * 4096u)

/* The wire layouts of STATX (7.39), as the kernel's uapi header has them. */
_Static_assert(sizeof(struct fuse_sx_time) == 16, "fuse_sx_time layout");
_Static_assert(sizeof(struct fuse_statx) == 256, "fuse_statx layout");
_Static_assert(offsetof(struct fuse_statx, ino) == 32, "fuse_statx layout");
_Static_assert(offsetof(struct fuse_statx, atime) == 64, "fuse_statx layout");
_Static_assert(offsetof(struct fuse_statx, rdev_major) == 128, "fuse_statx layout");
_Static_assert(sizeof(struct fuse_statx_in) == 24, "fuse_statx_in layout");
_Static_assert(offsetof(struct fuse_statx_in, sx_mask) == 20, "fuse_statx_in layout");
_Static_assert(sizeof(struct fuse_statx_out) == 288, "fuse_statx_out layout");
_Static_assert(offsetof(struct fuse_statx_out, stat) == 32, "fuse_statx_out layout");

FLL_DECODER_STRUCT(getattr, struct fuse_getattr_in, struct fuse_attr_out)

FLL_DECODER_STRUCT(setattr, struct fuse_setattr_in, struct fuse_attr_out)

FLL_DECODER_STRUCT(statx, struct fuse_statx_in, struct fuse_statx_out)

FLL_DECODER(statfs)
{
    if (!fll_out_fits(r, sizeof(struct fuse_statfs_out)))
        return -EIO;
    struct fuse_statfs_out out = {0};
    int ret = fll_ops_of(r)->statfs(r, r->hdr.nodeid, &out);
    return fll_reply_struct(r, ret, &out, sizeof(out));
}

FLL_DECODER_STATUS(access, struct fuse_access_in)

FLL_DECODER(syncfs)
{
    struct fuse_syncfs_in in;
    FLL_ARG(c, in);
    return fll_reply_status(r, fll_ops_of(r)->syncfs(r, r->hdr.nodeid));
}

/* ---- Extended attributes ------------------------------------------------------- */

static int xattr_name(struct fll_cursor *c, char name[FLL_XATTR_NAME_MAX + 1])
{
    int ret = fll_cursor_cstr(c, name, FLL_XATTR_NAME_MAX + 1, -ERANGE);
    if (ret < 0)
        return ret;
    return name[0] ? 0 : -ERANGE;
}

/*
 * SETXATTR: the 8-byte fuse_setxattr_in, or the 16-byte one when
 * FUSE_SETXATTR_EXT was negotiated (fs/fuse/xattr.c); the name; then exactly
 * in.size bytes of value.
 */
FLL_DECODER(setxattr)
{
    struct fuse_setxattr_in in = {0};
    bool ext = fll_setxattr_ext(r->se);
    size_t insize = ext ? sizeof(in) : FUSE_COMPAT_SETXATTR_IN_SIZE;
    char name[FLL_XATTR_NAME_MAX + 1];

    if (!fll_cursor_copy(c, &in, insize))
        return -EINVAL;
    int ret = xattr_name(c, name);
    if (ret < 0)
        return ret;
    if (in.size > FLL_XATTR_SIZE_MAX)
        return -E2BIG;
    if (in.size != fll_cursor_left(c))
        return -EINVAL;
    _cleanup_free_ void *value = malloc(in.size ? in.size : 1);
    if (value == NULL)
        return -ENOMEM;
    if (!fll_cursor_copy(c, value, in.size))
        return -EINVAL;
    ret = fll_ops_of(r)->setxattr(r, r->hdr.nodeid, name, value, in.size, (int)in.flags,
                                  ext ? in.setxattr_flags : 0);
    return fll_reply_status(r, ret);
}

/*
 * GETXATTR / LISTXATTR: size 0 asks for the needed size (fuse_getxattr_out);
 * otherwise the value itself, at most min(size, the reply buffer) bytes.
 */
static int xattr_reply(struct fll_req *r, const char *name, uint32_t size, size_t max)
{
    const struct fll_ops *ops = fll_ops_of(r);
    ssize_t ret;

    if (size == 0) {
        if (!fll_out_fits(r, sizeof(struct fuse_getxattr_out)))
            return -EIO;
        ret = name ? ops->getxattr(r, r->hdr.nodeid, name, NULL, 0)
                   : ops->listxattr(r, r->hdr.nodeid, NULL, 0);
        if (ret > UINT32_MAX)
            return -E2BIG;
        return fll_reply_count(r, ret, UINT32_MAX);
    }

    size_t room = fll_out_room(r);
    size_t n = size < room ? size : room;
    if (n > max)
        n = max;
    struct fll_outbuf ob;
    if (!fll_outbuf_get(r, &ob, n))
        return -ENOMEM;
    ret = name ? ops->getxattr(r, r->hdr.nodeid, name, ob.p, n)
               : ops->listxattr(r, r->hdr.nodeid, ob.p, n);
    if (ret < 0 || (size_t)ret > n) {
        fll_outbuf_release(&ob);
        return ret < 0 ? fll_op_err(ret) : -ERANGE;
    }
    fll_outbuf_reply(r, &ob, (size_t)ret);
    return 0;
}

FLL_DECODER(getxattr)
{
    struct fuse_getxattr_in in;
    char name[FLL_XATTR_NAME_MAX + 1];
    FLL_ARG(c, in);
    int ret = xattr_name(c, name);
    if (ret < 0)
        return ret;
    return xattr_reply(r, name, in.size, FLL_XATTR_SIZE_MAX);
}

FLL_DECODER(listxattr)
{
    struct fuse_getxattr_in in;
    FLL_ARG(c, in);
    return xattr_reply(r, NULL, in.size, FLL_XATTR_LIST_MAX);
}

FLL_DECODER(removexattr)
{
    char name[FLL_XATTR_NAME_MAX + 1];
    int ret = xattr_name(c, name);
    if (ret < 0)
        return ret;
    return fll_reply_status(r, fll_ops_of(r)->removexattr(r, r->hdr.nodeid, name));
}

/* ---- Directories ------------------------------------------------------------------ */

FLL_DECODER_STRUCT(opendir, struct fuse_open_in, struct fuse_open_out)

static int readdir_common(struct fll_req *r, struct fll_cursor *c, bool plus)
{
    struct fuse_read_in in;
    FLL_ARG(c, in);
    size_t room = fll_out_room(r);
    size_t n = in.size < room ? in.size : room;
    if (n > FLL_READDIR_MAX)
        n = FLL_READDIR_MAX;

    struct fll_outbuf ob;
    if (!fll_outbuf_get(r, &ob, n))
        return -ENOMEM;
    struct fll_dirbuf db = {.buf = ob.p, .size = n, .len = 0, .plus = plus};
    int ret = fll_op_err(fll_ops_of(r)->readdir(r, r->hdr.nodeid, &in, &db));
    if (ret < 0 || db.len > n) {
        fll_outbuf_release(&ob);
        return ret < 0 ? ret : -EIO;
    }
    fll_outbuf_reply(r, &ob, db.len);
    return 0;
}

FLL_DECODER(readdir)
{
    return readdir_common(r, c, false);
}

FLL_DECODER(readdirplus)
{
    return readdir_common(r, c, true);
}

FLL_DECODER_STATUS(releasedir, struct fuse_release_in)

FLL_DECODER_STATUS(fsyncdir, struct fuse_fsync_in)
