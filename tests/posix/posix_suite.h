/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: shared declarations.
 *   posix_main.c    the check table, argument parsing, the run loop, the summary
 *   posix_util.c    helpers: failure messages, deterministic data, I/O, children
 *   posix_data.c    file data checks
 *   posix_names.c   name and directory checks
 *   posix_attrs.c   attribute checks
 *   posix_locks.c   fcntl and flock checks (several processes)
 * Names: pt_ prefix. A check returns 0 (pass) or -1 after pt_fail() recorded why.
 */
#ifndef POSIX_SUITE_H
#define POSIX_SUITE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

struct pt_ctx {
    int dirfd;             /* the check's own empty directory */
    char workdir[4096 + 256]; /* its absolute path (for path-based calls) */
    char relwork[512];     /* its path relative to the suite's DIR argument */
    mode_t umask;
    char failed_msg[512];  /* first failure reason of the running check */
};

struct pt_check {
    const char *name;
    int (*fn)(struct pt_ctx *ctx);
};

/* posix_util.c */
int pt_fail(struct pt_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pt_pattern(void *buf, size_t len, uint64_t off, uint64_t seed);
long long pt_pattern_diff(const void *buf, size_t len, uint64_t off, uint64_t seed);
int pt_write_all(int fd, const void *buf, size_t len, off_t off);
ssize_t pt_read_all(int fd, void *buf, size_t len, off_t off);
int pt_truncate(struct pt_ctx *ctx, const char *name, off_t len);
int pt_put(struct pt_ctx *ctx, const char *name, const void *data, size_t len);
int pt_expect_content(struct pt_ctx *ctx, const char *name, const void *data, size_t len);
int pt_read_byte(int fd, int timeout_ms);
int pt_reap(pid_t pid);

/* posix_main.c */
void pt_keep(struct pt_ctx *ctx, const char *name);

/* posix_data.c */
int pt_check_create_write_read(struct pt_ctx *ctx);
int pt_check_o_excl(struct pt_ctx *ctx);
int pt_check_o_append(struct pt_ctx *ctx);
int pt_check_truncate(struct pt_ctx *ctx);
int pt_check_ftruncate(struct pt_ctx *ctx);
int pt_check_large_file(struct pt_ctx *ctx);
int pt_check_sparse_seek(struct pt_ctx *ctx);
int pt_check_fsync(struct pt_ctx *ctx);
int pt_check_fallocate(struct pt_ctx *ctx);
int pt_check_copy_file_range(struct pt_ctx *ctx);

/* posix_names.c */
int pt_check_rename(struct pt_ctx *ctx);
int pt_check_rename_noreplace(struct pt_ctx *ctx);
int pt_check_rename_exchange(struct pt_ctx *ctx);
int pt_check_rename_dir_across(struct pt_ctx *ctx);
int pt_check_unlink(struct pt_ctx *ctx);
int pt_check_unlink_open_file(struct pt_ctx *ctx);
int pt_check_hard_links(struct pt_ctx *ctx);
int pt_check_symlink(struct pt_ctx *ctx);
int pt_check_mkdir_rmdir(struct pt_ctx *ctx);
int pt_check_mknod_fifo(struct pt_ctx *ctx);
int pt_check_readdir_10k(struct pt_ctx *ctx);
int pt_check_o_tmpfile(struct pt_ctx *ctx);

/* posix_attrs.c */
int pt_check_chmod(struct pt_ctx *ctx);
int pt_check_chown(struct pt_ctx *ctx);
int pt_check_utimensat(struct pt_ctx *ctx);
int pt_check_xattr(struct pt_ctx *ctx);
int pt_check_statfs(struct pt_ctx *ctx);
int pt_check_access(struct pt_ctx *ctx);

/* posix_locks.c */
int pt_check_posix_lock_conflict(struct pt_ctx *ctx);
int pt_check_posix_getlk(struct pt_ctx *ctx);
int pt_check_posix_setlkw(struct pt_ctx *ctx);
int pt_check_flock(struct pt_ctx *ctx);

static inline void pt_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
#define _cleanup_close_ __attribute__((cleanup(pt_closep)))

void pt_freep(void *p);
#define _cleanup_free_ __attribute__((cleanup(pt_freep)))

#define FAILF(ctx, ...) pt_fail(ctx, __VA_ARGS__)
/* Fail the check unless cond holds. */
#define EXPECT(ctx, cond, ...) \
    do { \
        if (!(cond)) \
            return pt_fail(ctx, __VA_ARGS__); \
    } while (0)
/* A call that must succeed. */
#define SYS(ctx, call) \
    do { \
        if ((call) < 0) \
            return pt_fail(ctx, "%s: %s", #call, strerror(errno)); \
    } while (0)
/* A call that must fail with errno e1 (or e2). */
#define SYS_ERR2(ctx, call, e1, e2) \
    do { \
        errno = 0; \
        long r_ = (long)(call); \
        if (r_ >= 0 || (errno != (e1) && errno != (e2))) \
            return pt_fail(ctx, "%s: expected %s, got %s", #call, strerror(e1), \
                           r_ >= 0 ? "success" : strerror(errno)); \
    } while (0)
#define SYS_ERR(ctx, call, e) SYS_ERR2(ctx, call, e, e)

#endif
