/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What the operations share (core.c): attributes, entries, lookups, reopening, xattr calls. */
#ifndef VUFSD_PT_CORE_I_H
#define VUFSD_PT_CORE_I_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fll.h"

struct pt_fs;
struct pt_inode;

void pt_fill_attr(const struct statx *st, struct fuse_attr *a);
void pt_set_timeout(double t, uint64_t *sec, uint32_t *nsec);
/* Fills an entry for an inode already referenced (counts a lookup). */
int pt_fill_entry(struct pt_fs *fs, struct pt_inode *parent, struct pt_inode *i,
                  const struct statx *st, struct fuse_entry_out *out);
/* Defence in depth: the name rules fll also applies, plus NAME_MAX. */
int pt_check_name(const char *name);
/* Looks name up under parent (counting a lookup) and fills out. */
int pt_do_lookup(struct pt_fs *fs, struct pt_inode *parent, const char *name,
                 struct fuse_entry_out *out);
/* The same with an fd on parent at hand (pt_inode_fd, or an open directory). */
int pt_do_lookup_at(struct pt_fs *fs, struct pt_inode *parent, int pfd, const char *name,
                    struct fuse_entry_out *out);
/* Opens the inode's object for I/O via /proc/self/fd of its O_PATH fd, or from
 * its file handle: regular files and directories only (never a FIFO, socket,
 * device or symlink). A new fd (the caller's) or -errno. */
int pt_reopen(struct pt_fs *fs, const struct pt_inode *i, int flags);
/*
 * Runs an xattr call on the object of inode i itself (a symlink: the link, not
 * its target), without opening a FIFO or device: f*xattr on a reopened fd for
 * regular files and directories, else the path form on the /proc magic link
 * with the working directory in proc_self_fd (under pt_fs.cwd_lock).
 */
enum pt_xop { PT_XGET, PT_XSET, PT_XLIST, PT_XREMOVE };
ssize_t pt_xattr_call(struct pt_fs *fs, struct pt_inode *i, enum pt_xop op,
                      const char *name, void *buf, size_t size, int flags);
/* Clears the remapped security.capability (CVE-2021-20263) on a write, truncate or chown. */
void pt_drop_mapped_capability(struct pt_fs *fs, struct pt_inode *i, int fd);
/* Clears set-user-ID and (group-executable) set-group-ID bits. */
int pt_kill_suidgid(struct pt_fs *fs, struct pt_inode *i, int fd);

#endif
