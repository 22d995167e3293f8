/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Decoders for names and the namespace. Every directory entry name is copied
 * out NUL-terminated (at most FLL_NAME_MAX bytes, else ENAMETOOLONG) and must
 * pass fll_name_valid() (else EINVAL). Replies carrying a fuse_entry_out are
 * checked to fit before the filesystem runs: a lookup whose reply could not
 * be delivered would leak a reference the client never learns of.
 */
#include <errno.h>
#include <string.h>

#include "fll_ops_i.h"

static int entry_reply(struct fll_req *r, int ret, const struct fuse_entry_out *e)
{
    return fll_reply_struct(r, ret, e, sizeof(*e));
}

/* A name, for a request whose reply is an entry: that must fit before the
 * filesystem runs (see the top of the file). */
static int entry_name(struct fll_req *r, struct fll_cursor *c, char name[FLL_NAME_MAX + 1])
{
    int ret = fll_cursor_name(c, name);

    if (ret == 0 && !fll_out_fits(r, sizeof(struct fuse_entry_out)))
        ret = -EIO;
    return ret;
}

FLL_DECODER(lookup)
{
    char name[FLL_NAME_MAX + 1];
    int ret = entry_name(r, c, name);
    if (ret < 0)
        return ret;
    struct fuse_entry_out e = {0};
    ret = fll_ops_of(r)->lookup(r, r->hdr.nodeid, name, &e);
    return entry_reply(r, ret, &e);
}

/* FORGET and BATCH_FORGET: never answered, so every failure is silent. */
FLL_DECODER(forget)
{
    struct fuse_forget_in in;
    FLL_ARG(c, in);
    fll_ops_of(r)->forget(r, r->hdr.nodeid, in.nlookup);
    fll_complete(r, 0);
    return 0;
}

FLL_DECODER(batch_forget)
{
    struct fuse_batch_forget_in in;
    FLL_ARG(c, in);
    /* The count must describe exactly the bytes that follow. */
    if ((uint64_t)in.count * sizeof(struct fuse_forget_one) != fll_cursor_left(c))
        return -EINVAL;
    for (uint32_t i = 0; i < in.count; i++) {
        struct fuse_forget_one one;
        if (!fll_cursor_copy(c, &one, sizeof(one)))
            break; /* cannot happen: the count was checked above */
        fll_ops_of(r)->forget(r, one.nodeid, one.nlookup);
    }
    fll_complete(r, 0);
    return 0;
}

/*
 * MKNOD, MKDIR and SYMLINK make an entry: the argument struct (not SYMLINK's),
 * the entry name, SYMLINK's target (a path, not a name: only bounded), then
 * the security context; the entry reply is checked to fit before the
 * filesystem runs.
 */
static int make_entry(struct fll_req *r, struct fll_cursor *c, uint32_t opcode)
{
    union {
        struct fuse_mknod_in mknod;
        struct fuse_mkdir_in mkdir;
    } in;
    char name[FLL_NAME_MAX + 1];
    char target[FLL_PATH_MAX];
    const struct fll_ops *ops = fll_ops_of(r);
    struct fll_secctx_buf sb;
    struct fuse_entry_out e = {0};
    int ret;

    if (opcode == FUSE_MKNOD)
        FLL_ARG(c, in.mknod);
    else if (opcode == FUSE_MKDIR)
        FLL_ARG(c, in.mkdir);
    ret = fll_cursor_name(c, name);
    if (ret == 0 && opcode == FUSE_SYMLINK)
        ret = fll_cursor_cstr(c, target, sizeof(target), -ENAMETOOLONG);
    if (ret < 0)
        return ret;
    if (!fll_out_fits(r, sizeof(struct fuse_entry_out)))
        return -EIO;
    ret = fll_secctx_take(r, c, &sb);
    if (ret < 0)
        return ret;
    if (opcode == FUSE_MKNOD)
        ret = ops->mknod(r, r->hdr.nodeid, name, &in.mknod, &e);
    else if (opcode == FUSE_MKDIR)
        ret = ops->mkdir(r, r->hdr.nodeid, name, &in.mkdir, &e);
    else
        ret = ops->symlink(r, r->hdr.nodeid, name, target, &e);
    fll_secctx_drop(r, &sb);
    return entry_reply(r, ret, &e);
}

FLL_DECODER(mknod)
{
    return make_entry(r, c, FUSE_MKNOD);
}

FLL_DECODER(mkdir)
{
    return make_entry(r, c, FUSE_MKDIR);
}

FLL_DECODER(symlink)
{
    return make_entry(r, c, FUSE_SYMLINK);
}

/* UNLINK and RMDIR: the entry name alone. */
static int remove_entry(struct fll_req *r, struct fll_cursor *c, bool dir)
{
    const struct fll_ops *ops = fll_ops_of(r);
    char name[FLL_NAME_MAX + 1];
    int ret = fll_cursor_name(c, name);

    if (ret < 0)
        return ret;
    ret = dir ? ops->rmdir(r, r->hdr.nodeid, name) : ops->unlink(r, r->hdr.nodeid, name);
    return fll_reply_status(r, ret);
}

FLL_DECODER(unlink)
{
    return remove_entry(r, c, false);
}

FLL_DECODER(rmdir)
{
    return remove_entry(r, c, true);
}

static int rename_common(struct fll_req *r, struct fll_cursor *c, uint64_t newdir, uint32_t flags)
{
    char name[FLL_NAME_MAX + 1];
    char newname[FLL_NAME_MAX + 1];
    int ret = fll_cursor_name(c, name);
    if (ret < 0)
        return ret;
    ret = fll_cursor_name(c, newname);
    if (ret < 0)
        return ret;
    ret = fll_ops_of(r)->rename(r, r->hdr.nodeid, name, newdir, newname, flags);
    return fll_reply_status(r, ret);
}

FLL_DECODER(rename)
{
    struct fuse_rename_in in;
    FLL_ARG(c, in);
    return rename_common(r, c, in.newdir, 0);
}

FLL_DECODER(rename2)
{
    struct fuse_rename2_in in;
    FLL_ARG(c, in);
    return rename_common(r, c, in.newdir, in.flags);
}

/* LINK: the header's node is the new parent; the argument names the old node. */
FLL_DECODER(link)
{
    struct fuse_link_in in;
    char newname[FLL_NAME_MAX + 1];
    FLL_ARG(c, in);
    int ret = entry_name(r, c, newname);
    if (ret < 0)
        return ret;
    struct fuse_entry_out e = {0};
    ret = fll_ops_of(r)->link(r, in.oldnodeid, r->hdr.nodeid, newname, &e);
    return entry_reply(r, ret, &e);
}

typedef int (*create_fn)(struct fll_req *r, uint64_t parent, const char *name,
                         const struct fuse_create_in *in, struct fuse_entry_out *entry,
                         struct fuse_open_out *open);

static int create_common(struct fll_req *r, struct fll_cursor *c, bool tmpfile)
{
    struct fuse_create_in in;
    char name[FLL_NAME_MAX + 1];
    FLL_ARG(c, in);
    /*
     * TMPFILE carries the placeholder name of an unnamed dentry (the VFS uses
     * "/"), which is no directory entry name: it is only bounded and
     * NUL-terminated, and the filesystem must not use it as a path.
     */
    int ret =
        tmpfile ? fll_cursor_cstr(c, name, sizeof(name), -ENAMETOOLONG) : fll_cursor_name(c, name);
    if (ret < 0)
        return ret;
    if (!fll_out_fits(r, sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)))
        return -EIO;
    struct fll_secctx_buf sb;
    ret = fll_secctx_take(r, c, &sb);
    if (ret < 0)
        return ret;
    struct fuse_entry_out e = {0};
    struct fuse_open_out o = {0};
    create_fn fn = tmpfile ? fll_ops_of(r)->tmpfile : fll_ops_of(r)->create;
    ret = fn(r, r->hdr.nodeid, name, &in, &e, &o);
    fll_secctx_drop(r, &sb);
    ret = fll_op_err(ret);
    if (ret < 0)
        return ret;
    fll_reply_ok2(r, &e, sizeof(e), &o, sizeof(o));
    return 0;
}

FLL_DECODER(create)
{
    return create_common(r, c, false);
}

FLL_DECODER(tmpfile)
{
    return create_common(r, c, true);
}

/* READLINK: the target's bytes, without a NUL. */
FLL_DECODER(readlink)
{
    size_t room = fll_out_room(r);
    if (room == 0)
        return -EIO; /* no byte of the target fits: the reply buffer is too small */
    if (room > FLL_PATH_MAX)
        room = FLL_PATH_MAX;
    struct fll_outbuf ob;
    if (!fll_outbuf_get(r, &ob, room))
        return -ENOMEM;
    int ret = fll_ops_of(r)->readlink(r, r->hdr.nodeid, ob.p, room);
    if (ret < 0 || (size_t)ret > room) {
        fll_outbuf_release(&ob);
        return ret < 0 ? ret : -EIO;
    }
    fll_outbuf_reply(r, &ob, (size_t)ret);
    return 0;
}
