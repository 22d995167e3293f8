/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Security labels of new inodes (secctx.c). */
#ifndef VUFSD_PT_SECCTX_I_H
#define VUFSD_PT_SECCTX_I_H

#include "fll.h"

struct pt_fs;
struct pt_inode;

/*
 * Sets the request's security context (if any, and --security-label) on the
 * new object i, through fd when the caller has it open (CREATE, TMPFILE),
 * else through pt_xattr_call. 0 or the host's -errno.
 */
int pt_secctx_apply(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *i, int fd);
/*
 * MKDIR, MKNOD, SYMLINK: labels the entry name of parent that e was just
 * filled for; on failure removes it again (unlinkat with unlink_flags), drops
 * the lookup e counted and returns the error.
 */
int pt_secctx_finish(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *parent,
                     const char *name, struct fuse_entry_out *e, int unlink_flags);

#endif
