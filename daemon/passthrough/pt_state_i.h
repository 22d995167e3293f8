/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The passthrough's part of a saved state (state.h): sections VST_SEC_FS,
 * VST_SEC_FS_INODES, VST_SEC_FS_HANDLES and VST_SEC_FS_LOCKS, written by
 * pt_state_save.c, read by pt_state_load.c, whose objects pt_state_find.c finds
 * again on the host.
 *
 * What is saved, per kind (version 1 of each section):
 *
 *   FS       u8 writeback, dont_mask, killpriv_v2, dax_attr (what INIT negotiated)
 *            u32 inode generation floor, u32 handle generation floor (one more
 *              than any generation handed out: freed node ids and handles stay
 *              stale in the next process)
 *            u32 nmounts, then per mount u64 mnt_id + u32 fd index (with fds:
 *              the mount fds inode file handles are opened on)
 *   INODES   u32 count, then per inode
 *              u32 idx, u32 gen, u64 nlookup, u32 type (S_IFMT bits), u8 flags,
 *              u64 dev, u64 ino, u64 mnt_id,
 *              [PT_REC_FD] u32 fd index of its O_PATH fd
 *              [PT_REC_FH] u32 handle type, u8 len (<= 128), len bytes
 *              [PT_REC_PATH] u16 len (1..4095), len bytes: the path from the
 *                share's root, '/'-separated names
 *   HANDLES  u32 count, then per handle
 *              u32 idx, u32 gen, u64 nodeid, u32 host open flags, u8 flags,
 *              [PT_REC_FD] u32 fd index
 *   LOCKS    u32 count, then per POSIX lock owner
 *              u64 nodeid, u64 owner, u32 pid, u8 flags, [PT_REC_FD] u32 fd index,
 *              u16 nlocks, then per lock u8 write, u64 start, u64 len (0 = to EOF)
 */
#ifndef VUFSD_PT_STATE_I_H
#define VUFSD_PT_STATE_I_H

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "pt_fhandle_i.h"
#include "state.h"

struct pt_fs;
struct pt_state_report;

#define PT_REC_FD 0x1u
#define PT_REC_FH 0x2u
#define PT_REC_PATH 0x4u
#define PT_REC_HASHED 0x8u
#define PT_REC_INODE_KNOWN (PT_REC_FD | PT_REC_FH | PT_REC_PATH | PT_REC_HASHED)

#define PT_HREC_DIR 0x1u
#define PT_HREC_FD 0x2u
#define PT_HREC_FLOCK_SH 0x4u
#define PT_HREC_FLOCK_EX 0x8u
#define PT_HREC_KNOWN (PT_HREC_DIR | PT_HREC_FD | PT_HREC_FLOCK_SH | PT_HREC_FLOCK_EX)

#define PT_OREC_FD 0x1u

/* Locks one owner may bring (a state without fds); more is refused. */
#define PT_STATE_MAX_LOCKS 4096u
/* Longest saved path, without NUL. */
#define PT_STATE_PATH_MAX 4095u
/* Host open flags a handle can have (pt_open_flags, opendir). */
#define PT_STATE_OPEN_FLAGS                                                                        \
    (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME | O_DIRECT | O_DIRECTORY)

/* Smallest encoded record of each kind: counts are checked against what is left. */
#define PT_IREC_MIN (4 + 4 + 8 + 4 + 1 + 8 + 8 + 8)
#define PT_HREC_MIN (4 + 4 + 8 + 4 + 1)
#define PT_OREC_MIN (8 + 8 + 4 + 1 + 2)

/* An inode record as read (pt_state_load.c). */
struct pt_irec {
    uint32_t idx, gen;
    uint64_t nlookup;
    uint32_t type;
    uint8_t flags;
    uint64_t dev, ino, mnt_id;
    uint32_t fdi;
    struct pt_fh fh;  /* PT_REC_FH */
    char *path;       /* PT_REC_PATH, NUL-terminated copy */
};

/* One load in progress. */
struct pt_load {
    struct pt_fs *fs;
    struct vst_fds *fds;
    struct pt_state_report *rep;
    struct vst_err *err;
    char root_path[PATH_MAX + 1]; /* the root as /proc shows it (handle fallback) */
    int handle_mnt_fd;            /* a mount fd for the share's mount, -1 */
    struct pt_mount **mounts;     /* held while inodes are restored */
    unsigned nmounts;
};

/* pt_state_find.c */
/* The bytes of a file handle. */
const unsigned char *pt_fh_data(const struct pt_fh *fh);
/* The path of the object behind fd from the share's root (root: as /proc shows
 * it), or false. */
bool pt_save_path(struct pt_fs *fs, int fd, const char *root, char *out, size_t size);
/* A file handle for the object behind fd (a state without fds names inodes by it). */
bool pt_save_fh(int fd, struct pt_fh *fh);
/* Whether the object behind fd is the one r describes; *st gets its attributes. */
bool pt_same_object(int fd, const struct pt_irec *r, struct statx *st);
/* The object of a record without fds, found again from the share: an O_PATH fd
 * of the same object, or -ESTALE. */
int pt_find_again(struct pt_load *L, const struct pt_irec *r, struct statx *st);

#endif
