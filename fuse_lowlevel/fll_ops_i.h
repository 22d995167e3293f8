/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The per-opcode decoders (see fll_handler in fll_i.h), by file:
 *   fll_ops_node.c  names and the namespace: lookup, forget, mknod, mkdir,
 *                   symlink, unlink, rmdir, rename, link, create, tmpfile, readlink
 *   fll_ops_file.c  open files: open, read, write, release, flush, fsync,
 *                   fallocate, lseek, copy_file_range, locks, DAX mappings
 *   fll_ops_attr.c  attributes, xattrs, directories and the rest
 */
#ifndef VUFS_FLL_OPS_I_H
#define VUFS_FLL_OPS_I_H

#include "fll_i.h"

#define FLL_DECODER(name) int fll_do_##name(struct fll_req *r, struct fll_cursor *c)

/*
 * The decoders that are nothing but the common shape, written once: the
 * in_type argument, the op of the same name on the request's node, and its
 * out_type struct as the reply (STRUCT, which needs room for it in the reply
 * buffer first) or only a status (STATUS).
 */
#define FLL_DECODER_STRUCT(name, in_type, out_type)                                                \
    FLL_DECODER(name)                                                                              \
    {                                                                                              \
        in_type in;                                                                                \
        FLL_ARG(c, in);                                                                            \
        if (!fll_out_fits(r, sizeof(out_type)))                                                    \
            return -EIO;                                                                           \
        out_type out = {0};                                                                        \
        int ret = fll_ops_of(r)->name(r, r->hdr.nodeid, &in, &out);                                \
        return fll_reply_struct(r, ret, &out, sizeof(out));                                        \
    }

#define FLL_DECODER_STATUS(name, in_type)                                                          \
    FLL_DECODER(name)                                                                              \
    {                                                                                              \
        in_type in;                                                                                \
        FLL_ARG(c, in);                                                                            \
        return fll_reply_status(r, fll_ops_of(r)->name(r, r->hdr.nodeid, &in));                   \
    }

FLL_DECODER(lookup);
FLL_DECODER(forget);
FLL_DECODER(batch_forget);
FLL_DECODER(mknod);
FLL_DECODER(mkdir);
FLL_DECODER(symlink);
FLL_DECODER(unlink);
FLL_DECODER(rmdir);
FLL_DECODER(rename);
FLL_DECODER(rename2);
FLL_DECODER(link);
FLL_DECODER(create);
FLL_DECODER(tmpfile);
FLL_DECODER(readlink);

FLL_DECODER(open);
FLL_DECODER(read);
FLL_DECODER(write);
FLL_DECODER(release);
FLL_DECODER(flush);
FLL_DECODER(fsync);
FLL_DECODER(fallocate);
FLL_DECODER(lseek);
FLL_DECODER(copy_file_range);
FLL_DECODER(getlk);
FLL_DECODER(setlk);
FLL_DECODER(setlkw);
FLL_DECODER(setupmapping);
FLL_DECODER(removemapping);

FLL_DECODER(getattr);
FLL_DECODER(setattr);
FLL_DECODER(statx);
FLL_DECODER(statfs);
FLL_DECODER(access);
FLL_DECODER(setxattr);
FLL_DECODER(getxattr);
FLL_DECODER(listxattr);
FLL_DECODER(removexattr);
FLL_DECODER(syncfs);
FLL_DECODER(opendir);
FLL_DECODER(readdir);
FLL_DECODER(readdirplus);
FLL_DECODER(releasedir);
FLL_DECODER(fsyncdir);

#endif
