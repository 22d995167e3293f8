/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: helpers shared by the checks (failure
 * messages, deterministic data, whole reads and writes, child processes).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "posix_suite.h"

int pt_fail(struct pt_ctx *ctx, const char *fmt, ...)
{
    va_list ap;

    if (ctx->failed_msg[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(ctx->failed_msg, sizeof(ctx->failed_msg), fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Deterministic content: 64-bit words derived from (seed, absolute offset), so
 * any part of a file can be regenerated for comparison without keeping it. */
static uint64_t pt_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void pt_pattern(void *buf, size_t len, uint64_t off, uint64_t seed)
{
    unsigned char *p = buf;

    for (size_t i = 0; i < len; i++) {
        uint64_t o = off + i;
        uint64_t w = pt_mix(seed ^ (o >> 3));
        p[i] = (unsigned char)(w >> ((o & 7) * 8));
    }
}

/* Offset of the first byte that differs from the pattern, or -1. */
long long pt_pattern_diff(const void *buf, size_t len, uint64_t off, uint64_t seed)
{
    unsigned char tmp[4096];
    const unsigned char *p = buf;

    for (size_t done = 0; done < len; done += sizeof(tmp)) {
        size_t n = len - done < sizeof(tmp) ? len - done : sizeof(tmp);
        pt_pattern(tmp, n, off + done, seed);
        for (size_t i = 0; i < n; i++)
            if (tmp[i] != p[done + i])
                return (long long)(off + done + i);
    }
    return -1;
}

int pt_write_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

/* Reads exactly len bytes unless EOF comes first; returns the count or -errno. */
ssize_t pt_read_all(int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t n = pread(fd, p + got, len - got, off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* truncate(2) by name: the path form, not ftruncate. */
int pt_truncate(struct pt_ctx *ctx, const char *name, off_t len)
{
    char path[sizeof(ctx->workdir) + 256];

    snprintf(path, sizeof(path), "%s/%s", ctx->workdir, name);
    return truncate(path, len);
}

/* Create (or replace) a file holding exactly the given bytes. */
int pt_put(struct pt_ctx *ctx, const char *name, const void *data, size_t len)
{
    _cleanup_close_ int fd = openat(ctx->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    if (fd < 0)
        return FAILF(ctx, "create %s: %s", name, strerror(errno));
    int r = pt_write_all(fd, data, len, 0);
    if (r < 0)
        return FAILF(ctx, "write %s: %s", name, strerror(-r));
    return 0;
}

/* Check that a file holds exactly the given bytes. */
int pt_expect_content(struct pt_ctx *ctx, const char *name, const void *data, size_t len)
{
    _cleanup_close_ int fd = openat(ctx->dirfd, name, O_RDONLY);
    _cleanup_free_ char *buf = malloc(len + 16);
    struct stat st;

    if (!buf)
        return FAILF(ctx, "out of memory");
    if (fd < 0)
        return FAILF(ctx, "open %s: %s", name, strerror(errno));
    if (fstat(fd, &st) < 0)
        return FAILF(ctx, "fstat %s: %s", name, strerror(errno));
    if ((size_t)st.st_size != len)
        return FAILF(ctx, "%s: size %lld, expected %zu", name, (long long)st.st_size, len);
    ssize_t n = pt_read_all(fd, buf, len + 16, 0);
    if (n < 0)
        return FAILF(ctx, "read %s: %s", name, strerror((int)-n));
    if ((size_t)n != len)
        return FAILF(ctx, "%s: read %zd bytes, expected %zu", name, n, len);
    if (memcmp(buf, data, len) != 0)
        return FAILF(ctx, "%s: content differs from what was written", name);
    return 0;
}

/* Wait up to timeout_ms for one byte on fd; returns the byte, -ETIMEDOUT or -errno.
 * This is a bound against hangs, not a timing assertion. */
int pt_read_byte(int fd, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    char c;

    for (;;) {
        int r = poll(&pfd, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        ssize_t n = read(fd, &c, 1);
        if (n == 1)
            return (unsigned char)c;
        return n == 0 ? -EPIPE : -errno;
    }
}

/* Reap a child; returns its exit status (0..255) or -1 if it did not exit normally. */
int pt_reap(pid_t pid)
{
    int status;

    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
