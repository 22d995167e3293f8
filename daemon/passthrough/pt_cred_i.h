/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Caller credentials for the creating operations, and their umask (cred.c). */
#ifndef VUFSD_PT_CRED_I_H
#define VUFSD_PT_CRED_I_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fll.h"

struct pt_fs;
struct pt_inode;

struct pt_cred {
    bool switched;
};

/* Runs the calling thread as the request's uid/gid until pt_cred_leave. */
int pt_cred_enter(struct pt_fs *fs, const struct fll_req *r, struct pt_cred *c);
void pt_cred_leave(struct pt_cred *c);
#define _cleanup_cred_ __attribute__((cleanup(pt_cred_leave)))
/* openat(dirfd, name, flags | O_CLOEXEC, mode) as the request's caller: a new
 * fd, or -errno (of the switch or the open). */
int pt_openat_as_caller(struct pt_fs *fs, const struct fll_req *r, int dirfd, const char *name,
                        int flags, mode_t mode);
/* The mode to create with, given the client's umask (FUSE_DONT_MASK). */
mode_t pt_create_mode(struct pt_fs *fs, struct pt_inode *parent, mode_t mode, uint32_t umask);

#endif
