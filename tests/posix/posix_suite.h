/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: shared declarations.
 *   posix_main.c    argument parsing, the run loop, the summary
 *   posix_suite.c   data, name and attribute checks + the check table
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

const struct pt_check *pt_check_table(size_t *n);

int pt_fail(struct pt_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pt_keep(struct pt_ctx *ctx, const char *name);
void pt_pattern(void *buf, size_t len, uint64_t off, uint64_t seed);
int pt_read_byte(int fd, int timeout_ms);
int pt_reap(pid_t pid);

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
