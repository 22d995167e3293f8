/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The operations, implemented in each file and collected in fs.c's ops table. */
#ifndef VUFSD_PT_OPS_I_H
#define VUFSD_PT_OPS_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fll.h"

struct pt_fs;

/* The filesystem a request is for (the session's userdata). */
static inline struct pt_fs *pt_fs_of(const struct fll_req *r)
{
    return (struct pt_fs *)fll_req_userdata(r);
}

/* Implemented in each file, collected in fs.c */
int pt_op_lookup(struct fll_req *r, uint64_t parent, const char *name, struct fuse_entry_out *out);
void pt_op_forget(struct fll_req *r, uint64_t nodeid, uint64_t nlookup);
int pt_op_getattr(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                  struct fuse_attr_out *out);
int pt_op_setattr(struct fll_req *r, uint64_t nodeid, const struct fuse_setattr_in *in,
                  struct fuse_attr_out *out);
int pt_op_readlink(struct fll_req *r, uint64_t nodeid, char *buf, size_t size);
int pt_op_access(struct fll_req *r, uint64_t nodeid, const struct fuse_access_in *in);
int pt_op_statx(struct fll_req *r, uint64_t nodeid, const struct fuse_statx_in *in,
                struct fuse_statx_out *out);

int pt_op_symlink(struct fll_req *r, uint64_t parent, const char *name, const char *target,
                  struct fuse_entry_out *out);
int pt_op_mknod(struct fll_req *r, uint64_t parent, const char *name,
                const struct fuse_mknod_in *in, struct fuse_entry_out *out);
int pt_op_mkdir(struct fll_req *r, uint64_t parent, const char *name,
                const struct fuse_mkdir_in *in, struct fuse_entry_out *out);
int pt_op_unlink(struct fll_req *r, uint64_t parent, const char *name);
int pt_op_rmdir(struct fll_req *r, uint64_t parent, const char *name);
int pt_op_rename(struct fll_req *r, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname, uint32_t flags);
int pt_op_link(struct fll_req *r, uint64_t nodeid, uint64_t newparent, const char *newname,
               struct fuse_entry_out *out);
int pt_op_opendir(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                  struct fuse_open_out *out);
int pt_op_readdir(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                  struct fll_dirbuf *db);
int pt_op_releasedir(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in);
int pt_op_fsyncdir(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in);

int pt_op_open(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
               struct fuse_open_out *out);
int pt_op_create(struct fll_req *r, uint64_t parent, const char *name,
                 const struct fuse_create_in *in, struct fuse_entry_out *entry,
                 struct fuse_open_out *open);
int pt_op_tmpfile(struct fll_req *r, uint64_t parent, const char *name,
                  const struct fuse_create_in *in, struct fuse_entry_out *entry,
                  struct fuse_open_out *open);
ssize_t pt_op_read(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                   const struct iovec *dst, unsigned dst_cnt);
ssize_t pt_op_write(struct fll_req *r, uint64_t nodeid, const struct fuse_write_in *in,
                    const struct iovec *src, unsigned src_cnt);
int pt_op_release(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in);
int pt_op_fsync(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in);
int pt_op_flush(struct fll_req *r, uint64_t nodeid, const struct fuse_flush_in *in);
int pt_op_fallocate(struct fll_req *r, uint64_t nodeid, const struct fuse_fallocate_in *in);
int pt_op_lseek(struct fll_req *r, uint64_t nodeid, const struct fuse_lseek_in *in,
                struct fuse_lseek_out *out);
ssize_t pt_op_copy_file_range(struct fll_req *r, uint64_t nodeid,
                              const struct fuse_copy_file_range_in *in);

int pt_op_setxattr(struct fll_req *r, uint64_t nodeid, const char *name, const void *value,
                   size_t size, int flags, uint32_t setxattr_flags);
ssize_t pt_op_getxattr(struct fll_req *r, uint64_t nodeid, const char *name, void *buf,
                       size_t size);
ssize_t pt_op_listxattr(struct fll_req *r, uint64_t nodeid, void *buf, size_t size);
int pt_op_removexattr(struct fll_req *r, uint64_t nodeid, const char *name);

int pt_op_getlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in,
                struct fuse_lk_out *out);
int pt_op_setlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in, bool sleep);
int pt_op_interrupt(struct fll_req *r, uint64_t unique);

int pt_op_setupmapping(struct fll_req *r, uint64_t nodeid, const struct fuse_setupmapping_in *in);
int pt_op_removemapping(struct fll_req *r, const struct fuse_removemapping_one *entries,
                        unsigned count);

#endif
