/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: runs a list of checks inside a directory (a virtio-fs
 * mount in a guest, a vufsd --mount FUSE mount on the host, or any local
 * filesystem as a reference) and prints one line per check:
 *
 *     PASS name
 *     FAIL name: what differed
 *     XFAIL name: ...        (failed, but listed with -x as a known gap)
 *
 * then "N passed, M failed, K expected failures". Exit status 0 only when M == 0.
 *
 * Every check verifies what it did by reading it back (data, stat fields, errno
 * of the operation that must be refused), so each one can fail.
 *
 * Files the caller should compare against the backing store are left in place
 * and announced as "VUFS-KEEP relative/path" (relative to DIR).
 *
 * usage: posix_suite [-k] [-x name,...] [-o name,...] [-l] DIR
 *   -k  keep the work directory      -x  expected failures
 *   -o  run only these checks        -l  list the checks
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

/* ---- helpers shared by the checks ---- */

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
static long long pt_pattern_diff(const void *buf, size_t len, uint64_t off, uint64_t seed)
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

static int pt_write_all(int fd, const void *buf, size_t len, off_t off)
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
static ssize_t pt_read_all(int fd, void *buf, size_t len, off_t off)
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
static int pt_truncate(struct pt_ctx *ctx, const char *name, off_t len)
{
    char path[sizeof(ctx->workdir) + 256];

    snprintf(path, sizeof(path), "%s/%s", ctx->workdir, name);
    return truncate(path, len);
}

/* Create (or replace) a file holding exactly the given bytes. */
static int pt_put(struct pt_ctx *ctx, const char *name, const void *data, size_t len)
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
static int pt_expect_content(struct pt_ctx *ctx, const char *name, const void *data, size_t len)
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

/* ---- data: create/read/write, append, excl, truncate, large, sparse ---- */

static int check_create_write_read(struct pt_ctx *ctx)
{
    char data[10000];
    struct stat st;

    pt_pattern(data, sizeof(data), 0, 1);
    _cleanup_close_ int fd = openat(ctx->dirfd, "cwr", O_RDWR | O_CREAT | O_EXCL, 0640);
    SYS(ctx, fd);
    int r = pt_write_all(fd, data, sizeof(data), 0);
    EXPECT(ctx, r == 0, "write: %s", strerror(-r));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640,
           "mode %o, expected regular 0640", st.st_mode);
    EXPECT(ctx, st.st_size == (off_t)sizeof(data), "size %lld", (long long)st.st_size);
    /* Read through the same descriptor, then through a fresh one. */
    char back[sizeof(data)];
    ssize_t n = pt_read_all(fd, back, sizeof(back), 0);
    EXPECT(ctx, n == (ssize_t)sizeof(back) && memcmp(back, data, sizeof(data)) == 0,
           "read back through the writing fd differs");
    /* Overwrite a middle part, read around it. */
    memset(data + 4000, 'Z', 100);
    r = pt_write_all(fd, data + 4000, 100, 4000);
    EXPECT(ctx, r == 0, "pwrite: %s", strerror(-r));
    return pt_expect_content(ctx, "cwr", data, sizeof(data));
}

static int check_o_excl(struct pt_ctx *ctx)
{
    _cleanup_close_ int fd = openat(ctx->dirfd, "excl", O_WRONLY | O_CREAT | O_EXCL, 0600);
    SYS(ctx, fd);
    SYS_ERR(ctx, openat(ctx->dirfd, "excl", O_WRONLY | O_CREAT | O_EXCL, 0600), EEXIST);
    /* O_EXCL refuses a dangling symlink too (it must not create its target). */
    SYS(ctx, symlinkat("excl-target", ctx->dirfd, "excl-link"));
    SYS_ERR(ctx, openat(ctx->dirfd, "excl-link", O_WRONLY | O_CREAT | O_EXCL, 0600), EEXIST);
    SYS_ERR(ctx, faccessat(ctx->dirfd, "excl-target", F_OK, 0), ENOENT);
    return 0;
}

static int check_o_append(struct pt_ctx *ctx)
{
    EXPECT(ctx, pt_put(ctx, "app", "abc", 3) == 0, "setup");
    _cleanup_close_ int fd = openat(ctx->dirfd, "app", O_WRONLY | O_APPEND);
    SYS(ctx, fd);
    SYS(ctx, write(fd, "def", 3));
    /* Linux: pwrite on an O_APPEND descriptor appends regardless of offset. */
    SYS(ctx, pwrite(fd, "gh", 2, 0));
    /* Another writer extends the file; the next append goes after it. */
    _cleanup_close_ int fd2 = openat(ctx->dirfd, "app", O_WRONLY);
    SYS(ctx, fd2);
    SYS(ctx, pwrite(fd2, "XY", 2, 5));
    SYS(ctx, write(fd, "ij", 2));
    return pt_expect_content(ctx, "app", "abcdeXYhij", 10);
}

static int check_truncate(struct pt_ctx *ctx)
{
    char data[8192], want[20000];

    pt_pattern(data, sizeof(data), 0, 2);
    EXPECT(ctx, pt_put(ctx, "tr", data, sizeof(data)) == 0, "setup");
    SYS(ctx, pt_truncate(ctx, "tr", 3));
    if (pt_expect_content(ctx, "tr", data, 3) < 0)
        return -1;
    SYS(ctx, pt_truncate(ctx, "tr", 20000));
    memset(want, 0, sizeof(want));
    memcpy(want, data, 3);
    if (pt_expect_content(ctx, "tr", want, sizeof(want)) < 0)
        return -1;
    SYS(ctx, pt_truncate(ctx, "tr", 0));
    return pt_expect_content(ctx, "tr", "", 0);
}

static int check_ftruncate(struct pt_ctx *ctx)
{
    char data[5000], want[9000];
    struct stat st;

    pt_pattern(data, sizeof(data), 0, 3);
    _cleanup_close_ int fd = openat(ctx->dirfd, "ftr", O_RDWR | O_CREAT | O_TRUNC, 0644);
    SYS(ctx, fd);
    EXPECT(ctx, pt_write_all(fd, data, sizeof(data), 0) == 0, "write");
    SYS(ctx, ftruncate(fd, 1000));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_size == 1000, "size after shrink %lld", (long long)st.st_size);
    SYS(ctx, ftruncate(fd, 9000));
    /* Bytes past the old end read as zeros, not as the data that was cut. */
    memset(want, 0, sizeof(want));
    memcpy(want, data, 1000);
    if (pt_expect_content(ctx, "ftr", want, sizeof(want)) < 0)
        return -1;
    _cleanup_close_ int ro = openat(ctx->dirfd, "ftr", O_RDONLY);
    SYS(ctx, ro);
    SYS_ERR2(ctx, ftruncate(ro, 0), EINVAL, EBADF);
    SYS_ERR(ctx, ftruncate(fd, -1), EINVAL);
    return 0;
}

#define PT_LARGE_SIZE (64u << 20)
#define PT_LARGE_CHUNK (1u << 20)

static int check_large_file(struct pt_ctx *ctx)
{
    _cleanup_free_ char *buf = malloc(PT_LARGE_CHUNK);
    struct stat st;
    uint64_t seed = 0x1a4e;

    EXPECT(ctx, buf != NULL, "out of memory");
    SYS(ctx, mkdirat(ctx->dirfd, "large", 0755));
    {
        _cleanup_close_ int fd = openat(ctx->dirfd, "large/big.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        SYS(ctx, fd);
        for (uint64_t off = 0; off < PT_LARGE_SIZE; off += PT_LARGE_CHUNK) {
            pt_pattern(buf, PT_LARGE_CHUNK, off, seed);
            int r = pt_write_all(fd, buf, PT_LARGE_CHUNK, (off_t)off);
            EXPECT(ctx, r == 0, "write at %" PRIu64 ": %s", off, strerror(-r));
        }
        SYS(ctx, fsync(fd));
    }
    /* Try to make the read come from the backend, not from the page cache. */
    {
        _cleanup_close_ int dc = open("/proc/sys/vm/drop_caches", O_WRONLY);
        if (dc >= 0 && write(dc, "3", 1) < 0) {
            /* not root or not allowed: the read still checks the data */
        }
    }
    _cleanup_close_ int fd = openat(ctx->dirfd, "large/big.bin", O_RDONLY);
    SYS(ctx, fd);
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_size == PT_LARGE_SIZE, "size %lld", (long long)st.st_size);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    for (uint64_t off = 0; off < PT_LARGE_SIZE; off += PT_LARGE_CHUNK) {
        ssize_t n = pt_read_all(fd, buf, PT_LARGE_CHUNK, (off_t)off);
        EXPECT(ctx, n == PT_LARGE_CHUNK, "short read at %" PRIu64, off);
        long long bad = pt_pattern_diff(buf, PT_LARGE_CHUNK, off, seed);
        EXPECT(ctx, bad < 0, "data differs at offset %lld", bad);
    }
    char end;
    EXPECT(ctx, pread(fd, &end, 1, PT_LARGE_SIZE) == 0, "read past EOF returned data");
    pt_keep(ctx, "large/big.bin");
    return 0;
}

static int check_sparse_seek(struct pt_ctx *ctx)
{
    const off_t size = 16 << 20, data_at = 8 << 20;
    char buf[4096];
    struct stat st;

    _cleanup_close_ int fd = openat(ctx->dirfd, "sparse", O_RDWR | O_CREAT | O_TRUNC, 0644);
    SYS(ctx, fd);
    SYS(ctx, ftruncate(fd, size));
    pt_pattern(buf, sizeof(buf), (uint64_t)data_at, 4);
    EXPECT(ctx, pt_write_all(fd, buf, sizeof(buf), data_at) == 0, "write");
    SYS(ctx, fsync(fd));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_size == size, "size %lld", (long long)st.st_size);
    EXPECT(ctx, (off_t)st.st_blocks * 512 < size / 2,
           "st_blocks %lld: the file is not sparse", (long long)st.st_blocks);

    off_t d = lseek(fd, 0, SEEK_DATA);
    EXPECT(ctx, d >= 0, "SEEK_DATA from 0: %s", strerror(errno));
    EXPECT(ctx, d <= data_at && d > 0,
           "SEEK_DATA from 0 returned %lld, expected the data near %lld", (long long)d,
           (long long)data_at);
    off_t h = lseek(fd, 0, SEEK_HOLE);
    EXPECT(ctx, h == 0, "SEEK_HOLE from 0 returned %lld, expected 0", (long long)h);
    h = lseek(fd, data_at, SEEK_HOLE);
    EXPECT(ctx, h >= data_at + 4096 && h < size,
           "SEEK_HOLE from the data returned %lld, expected just past %lld", (long long)h,
           (long long)(data_at + 4096));
    /* Past the last data there is only the implicit hole at EOF. */
    errno = 0;
    d = lseek(fd, h, SEEK_DATA);
    EXPECT(ctx, d < 0 && errno == ENXIO, "SEEK_DATA after the last data returned %lld (%s)",
           (long long)d, strerror(errno));
    errno = 0;
    d = lseek(fd, size, SEEK_DATA);
    EXPECT(ctx, d < 0 && errno == ENXIO, "SEEK_DATA at EOF: expected ENXIO");
    /* Contents: zeros in the hole, the data where it was written. */
    char back[4096], zero[4096] = { 0 };
    EXPECT(ctx, pt_read_all(fd, back, sizeof(back), 4 << 20) == 4096 &&
                    memcmp(back, zero, sizeof(zero)) == 0, "hole does not read as zeros");
    EXPECT(ctx, pt_read_all(fd, back, sizeof(back), data_at) == 4096 &&
                    memcmp(back, buf, sizeof(buf)) == 0, "data in the sparse file differs");
    return 0;
}

static int check_fsync(struct pt_ctx *ctx)
{
    char data[65536];

    pt_pattern(data, sizeof(data), 0, 5);
    _cleanup_close_ int fd = openat(ctx->dirfd, "sync", O_RDWR | O_CREAT | O_TRUNC, 0644);
    SYS(ctx, fd);
    EXPECT(ctx, pt_write_all(fd, data, sizeof(data), 0) == 0, "write");
    SYS(ctx, fsync(fd));
    EXPECT(ctx, pt_write_all(fd, data, 4096, sizeof(data)) == 0, "write");
    SYS(ctx, fdatasync(fd));
    _cleanup_close_ int dfd = openat(ctx->dirfd, ".", O_RDONLY | O_DIRECTORY);
    SYS(ctx, dfd);
    SYS(ctx, fsync(dfd));
    char want[sizeof(data) + 4096];
    memcpy(want, data, sizeof(data));
    memcpy(want + sizeof(data), data, 4096);
    return pt_expect_content(ctx, "sync", want, sizeof(want));
}

static int check_fallocate(struct pt_ctx *ctx)
{
    char buf[65536], zero[65536] = { 0 };
    struct stat st;

    _cleanup_close_ int fd = openat(ctx->dirfd, "falloc", O_RDWR | O_CREAT | O_TRUNC, 0644);
    SYS(ctx, fd);
    SYS(ctx, fallocate(fd, 0, 0, 1 << 20));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_size == 1 << 20, "size %lld after fallocate", (long long)st.st_size);
    EXPECT(ctx, (off_t)st.st_blocks * 512 >= 1 << 20,
           "st_blocks %lld: space not allocated", (long long)st.st_blocks);
    EXPECT(ctx, pt_read_all(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) &&
                    memcmp(buf, zero, sizeof(buf)) == 0, "allocated range not zero");
    /* KEEP_SIZE allocates past EOF without changing the size. */
    SYS(ctx, fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_size == 1 << 20, "KEEP_SIZE changed the size to %lld", (long long)st.st_size);
    /* Punching a hole in written data makes it read back as zeros. */
    pt_pattern(buf, sizeof(buf), 0, 6);
    EXPECT(ctx, pt_write_all(fd, buf, sizeof(buf), 0) == 0, "write");
    SYS(ctx, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 16384, 16384));
    char back[65536];
    EXPECT(ctx, pt_read_all(fd, back, sizeof(back), 0) == (ssize_t)sizeof(back), "read");
    EXPECT(ctx, memcmp(back, buf, 16384) == 0, "data before the hole changed");
    EXPECT(ctx, memcmp(back + 16384, zero, 16384) == 0, "punched range is not zero");
    EXPECT(ctx, memcmp(back + 32768, buf + 32768, 32768) == 0, "data after the hole changed");
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_size == 1 << 20, "PUNCH_HOLE changed the size");
    return 0;
}

static int check_copy_file_range(struct pt_ctx *ctx)
{
    const size_t len = 1 << 20;
    _cleanup_free_ char *buf = malloc(len), *back = malloc(len);

    EXPECT(ctx, buf && back, "out of memory");
    pt_pattern(buf, len, 0, 7);
    EXPECT(ctx, pt_put(ctx, "cfr-src", buf, len) == 0, "setup");
    _cleanup_close_ int in = openat(ctx->dirfd, "cfr-src", O_RDONLY);
    _cleanup_close_ int out = openat(ctx->dirfd, "cfr-dst", O_RDWR | O_CREAT | O_TRUNC, 0644);
    SYS(ctx, in);
    SYS(ctx, out);
    /* Copy 512 KiB starting at 4096 of the source to offset 100 of the target. */
    loff_t off_in = 4096, off_out = 100;
    size_t left = 512 << 10;
    while (left > 0) {
        ssize_t n = copy_file_range(in, &off_in, out, &off_out, left, 0);
        EXPECT(ctx, n > 0, "copy_file_range: %s", n < 0 ? strerror(errno) : "returned 0");
        left -= (size_t)n;
    }
    EXPECT(ctx, off_in == 4096 + (512 << 10) && off_out == 100 + (512 << 10),
           "offsets not advanced: in %lld out %lld", (long long)off_in, (long long)off_out);
    ssize_t n = pt_read_all(out, back, len, 0);
    EXPECT(ctx, n == 100 + (512 << 10), "target size %zd", n);
    for (int i = 0; i < 100; i++)
        EXPECT(ctx, back[i] == 0, "gap before the copy is not zero");
    EXPECT(ctx, memcmp(back + 100, buf + 4096, 512 << 10) == 0, "copied data differs");
    return 0;
}

/* ---- names: rename, link, symlink, unlink, directories ---- */

static int check_rename(struct pt_ctx *ctx)
{
    struct stat a, b;

    EXPECT(ctx, pt_put(ctx, "ren-a", "alpha", 5) == 0, "setup");
    EXPECT(ctx, pt_put(ctx, "ren-b", "beta", 4) == 0, "setup");
    SYS(ctx, fstatat(ctx->dirfd, "ren-a", &a, 0));
    SYS(ctx, renameat(ctx->dirfd, "ren-a", ctx->dirfd, "ren-c"));
    SYS_ERR(ctx, faccessat(ctx->dirfd, "ren-a", F_OK, 0), ENOENT);
    SYS(ctx, fstatat(ctx->dirfd, "ren-c", &b, 0));
    EXPECT(ctx, a.st_ino == b.st_ino, "inode changed across rename");
    if (pt_expect_content(ctx, "ren-c", "alpha", 5) < 0)
        return -1;
    /* Replacing an existing target. */
    SYS(ctx, renameat(ctx->dirfd, "ren-c", ctx->dirfd, "ren-b"));
    SYS(ctx, fstatat(ctx->dirfd, "ren-b", &b, 0));
    EXPECT(ctx, a.st_ino == b.st_ino, "replacing rename left the old target");
    SYS_ERR(ctx, renameat(ctx->dirfd, "ren-missing", ctx->dirfd, "ren-x"), ENOENT);
    return pt_expect_content(ctx, "ren-b", "alpha", 5);
}

static int check_rename_noreplace(struct pt_ctx *ctx)
{
    EXPECT(ctx, pt_put(ctx, "nr-a", "one", 3) == 0, "setup");
    EXPECT(ctx, pt_put(ctx, "nr-b", "two", 3) == 0, "setup");
    SYS_ERR(ctx, renameat2(ctx->dirfd, "nr-a", ctx->dirfd, "nr-b", RENAME_NOREPLACE), EEXIST);
    if (pt_expect_content(ctx, "nr-b", "two", 3) < 0 || pt_expect_content(ctx, "nr-a", "one", 3) < 0)
        return -1;
    SYS(ctx, renameat2(ctx->dirfd, "nr-a", ctx->dirfd, "nr-c", RENAME_NOREPLACE));
    SYS_ERR(ctx, faccessat(ctx->dirfd, "nr-a", F_OK, 0), ENOENT);
    return pt_expect_content(ctx, "nr-c", "one", 3);
}

static int check_rename_exchange(struct pt_ctx *ctx)
{
    EXPECT(ctx, pt_put(ctx, "ex-a", "first", 5) == 0, "setup");
    SYS(ctx, mkdirat(ctx->dirfd, "ex-d", 0755));
    EXPECT(ctx, pt_put(ctx, "ex-d/inside", "x", 1) == 0, "setup");
    SYS(ctx, renameat2(ctx->dirfd, "ex-a", ctx->dirfd, "ex-d", RENAME_EXCHANGE));
    struct stat st;
    SYS(ctx, fstatat(ctx->dirfd, "ex-a", &st, 0));
    EXPECT(ctx, S_ISDIR(st.st_mode), "ex-a is not the directory after the exchange");
    if (pt_expect_content(ctx, "ex-a/inside", "x", 1) < 0 || pt_expect_content(ctx, "ex-d", "first", 5) < 0)
        return -1;
    SYS_ERR(ctx, renameat2(ctx->dirfd, "ex-d", ctx->dirfd, "ex-none", RENAME_EXCHANGE), ENOENT);
    return 0;
}

static int check_rename_dir_across(struct pt_ctx *ctx)
{
    struct stat d1, d2, s1, s2;

    SYS(ctx, mkdirat(ctx->dirfd, "rd1", 0755));
    SYS(ctx, mkdirat(ctx->dirfd, "rd2", 0755));
    SYS(ctx, mkdirat(ctx->dirfd, "rd1/sub", 0755));
    EXPECT(ctx, pt_put(ctx, "rd1/sub/file", "payload", 7) == 0, "setup");
    SYS(ctx, fstatat(ctx->dirfd, "rd1", &d1, 0));
    SYS(ctx, fstatat(ctx->dirfd, "rd2", &d2, 0));
    SYS(ctx, fstatat(ctx->dirfd, "rd1/sub", &s1, 0));
    SYS(ctx, renameat(ctx->dirfd, "rd1/sub", ctx->dirfd, "rd2/moved"));
    SYS_ERR(ctx, faccessat(ctx->dirfd, "rd1/sub", F_OK, 0), ENOENT);
    SYS(ctx, fstatat(ctx->dirfd, "rd2/moved", &s2, 0));
    EXPECT(ctx, s1.st_ino == s2.st_ino, "directory inode changed");
    if (pt_expect_content(ctx, "rd2/moved/file", "payload", 7) < 0)
        return -1;
    /* '..' of the moved directory is its new parent. */
    struct stat dotdot, nd1, nd2;
    SYS(ctx, fstatat(ctx->dirfd, "rd2/moved/..", &dotdot, 0));
    EXPECT(ctx, dotdot.st_ino == d2.st_ino, "'..' still points to the old parent");
    /* Parents' link counts follow the subdirectory (directories on ext4/xfs/tmpfs). */
    SYS(ctx, fstatat(ctx->dirfd, "rd1", &nd1, 0));
    SYS(ctx, fstatat(ctx->dirfd, "rd2", &nd2, 0));
    EXPECT(ctx, nd1.st_nlink == d1.st_nlink - 1 && nd2.st_nlink == d2.st_nlink + 1,
           "parent nlink %ju->%ju and %ju->%ju, expected -1 and +1", (uintmax_t)d1.st_nlink,
           (uintmax_t)nd1.st_nlink, (uintmax_t)d2.st_nlink, (uintmax_t)nd2.st_nlink);
    /* A directory cannot move below itself. */
    SYS_ERR(ctx, renameat(ctx->dirfd, "rd2", ctx->dirfd, "rd2/moved/inner"), EINVAL);
    return 0;
}

static int check_unlink(struct pt_ctx *ctx)
{
    EXPECT(ctx, pt_put(ctx, "ul", "bye", 3) == 0, "setup");
    SYS(ctx, unlinkat(ctx->dirfd, "ul", 0));
    SYS_ERR(ctx, faccessat(ctx->dirfd, "ul", F_OK, 0), ENOENT);
    SYS_ERR(ctx, unlinkat(ctx->dirfd, "ul", 0), ENOENT);
    SYS(ctx, mkdirat(ctx->dirfd, "ul-dir", 0755));
    SYS_ERR2(ctx, unlinkat(ctx->dirfd, "ul-dir", 0), EISDIR, EPERM);
    return 0;
}

static int check_unlink_open_file(struct pt_ctx *ctx)
{
    char data[20000], back[20000];
    struct stat st;

    pt_pattern(data, sizeof(data), 0, 8);
    EXPECT(ctx, pt_put(ctx, "uo", data, sizeof(data)) == 0, "setup");
    _cleanup_close_ int fd = openat(ctx->dirfd, "uo", O_RDWR);
    SYS(ctx, fd);
    SYS(ctx, unlinkat(ctx->dirfd, "uo", 0));
    SYS_ERR(ctx, faccessat(ctx->dirfd, "uo", F_OK, 0), ENOENT);
    EXPECT(ctx, pt_read_all(fd, back, sizeof(back), 0) == (ssize_t)sizeof(back) &&
                    memcmp(back, data, sizeof(data)) == 0, "unlinked file no longer readable");
    /* Still writable, and a new file of the same name is a different one. */
    EXPECT(ctx, pt_write_all(fd, "NEW", 3, 0) == 0, "write to unlinked file");
    EXPECT(ctx, pt_read_all(fd, back, 3, 0) == 3 && memcmp(back, "NEW", 3) == 0,
           "write to the unlinked file not read back");
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_nlink == 0, "nlink %ju on an unlinked file", (uintmax_t)st.st_nlink);
    EXPECT(ctx, pt_put(ctx, "uo", "other", 5) == 0, "recreate");
    EXPECT(ctx, pt_read_all(fd, back, 3, 0) == 3 && memcmp(back, "NEW", 3) == 0,
           "the open file changed when the name was reused");
    return pt_expect_content(ctx, "uo", "other", 5);
}

static int check_hard_links(struct pt_ctx *ctx)
{
    struct stat a, b;

    EXPECT(ctx, pt_put(ctx, "hl-a", "shared", 6) == 0, "setup");
    SYS(ctx, linkat(ctx->dirfd, "hl-a", ctx->dirfd, "hl-b", 0));
    SYS(ctx, linkat(ctx->dirfd, "hl-a", ctx->dirfd, "hl-c", 0));
    SYS(ctx, fstatat(ctx->dirfd, "hl-a", &a, 0));
    SYS(ctx, fstatat(ctx->dirfd, "hl-b", &b, 0));
    EXPECT(ctx, a.st_ino == b.st_ino, "links have different inodes");
    EXPECT(ctx, a.st_nlink == 3 && b.st_nlink == 3, "nlink %ju/%ju, expected 3",
           (uintmax_t)a.st_nlink, (uintmax_t)b.st_nlink);
    /* A write through one name is visible through the other. */
    {
        _cleanup_close_ int fd = openat(ctx->dirfd, "hl-b", O_WRONLY);
        SYS(ctx, fd);
        EXPECT(ctx, pt_write_all(fd, "SH", 2, 0) == 0, "write");
    }
    if (pt_expect_content(ctx, "hl-a", "SHared", 6) < 0)
        return -1;
    SYS(ctx, unlinkat(ctx->dirfd, "hl-a", 0));
    SYS(ctx, unlinkat(ctx->dirfd, "hl-c", 0));
    SYS(ctx, fstatat(ctx->dirfd, "hl-b", &b, 0));
    EXPECT(ctx, b.st_nlink == 1, "nlink %ju after unlinking two names", (uintmax_t)b.st_nlink);
    SYS_ERR(ctx, linkat(ctx->dirfd, "hl-b", ctx->dirfd, "hl-b", 0), EEXIST);
    SYS(ctx, mkdirat(ctx->dirfd, "hl-dir", 0755));
    SYS_ERR(ctx, linkat(ctx->dirfd, "hl-dir", ctx->dirfd, "hl-dir2", 0), EPERM);
    return pt_expect_content(ctx, "hl-b", "SHared", 6);
}

static int check_symlink(struct pt_ctx *ctx)
{
    const char *target = "some/relative/../target path";
    char buf[PATH_MAX];
    struct stat st;

    SYS(ctx, symlinkat(target, ctx->dirfd, "sl"));
    ssize_t n = readlinkat(ctx->dirfd, "sl", buf, sizeof(buf));
    EXPECT(ctx, n == (ssize_t)strlen(target) && memcmp(buf, target, (size_t)n) == 0,
           "readlink returned %zd bytes, not the target", n);
    SYS(ctx, fstatat(ctx->dirfd, "sl", &st, AT_SYMLINK_NOFOLLOW));
    EXPECT(ctx, S_ISLNK(st.st_mode), "lstat mode %o is not a symlink", st.st_mode);
    EXPECT(ctx, st.st_size == (off_t)strlen(target), "symlink size %lld", (long long)st.st_size);
    SYS_ERR(ctx, fstatat(ctx->dirfd, "sl", &st, 0), ENOENT);
    /* A link to a file is followed. */
    EXPECT(ctx, pt_put(ctx, "sl-file", "via link", 8) == 0, "setup");
    SYS(ctx, symlinkat("sl-file", ctx->dirfd, "sl2"));
    if (pt_expect_content(ctx, "sl2", "via link", 8) < 0)
        return -1;
    SYS_ERR(ctx, readlinkat(ctx->dirfd, "sl-file", buf, sizeof(buf)), EINVAL);
    SYS_ERR(ctx, symlinkat("x", ctx->dirfd, "sl"), EEXIST);
    return 0;
}

static int check_mkdir_rmdir(struct pt_ctx *ctx)
{
    struct stat p0, p1, st;

    SYS(ctx, fstat(ctx->dirfd, &p0));
    SYS(ctx, mkdirat(ctx->dirfd, "md", 0750));
    SYS(ctx, fstatat(ctx->dirfd, "md", &st, 0));
    EXPECT(ctx, S_ISDIR(st.st_mode) && (st.st_mode & 0777) == (0750 & ~ctx->umask),
           "mode %o", st.st_mode);
    EXPECT(ctx, st.st_nlink == 2, "new directory nlink %ju", (uintmax_t)st.st_nlink);
    SYS(ctx, fstat(ctx->dirfd, &p1));
    EXPECT(ctx, p1.st_nlink == p0.st_nlink + 1, "parent nlink %ju -> %ju",
           (uintmax_t)p0.st_nlink, (uintmax_t)p1.st_nlink);
    SYS_ERR(ctx, mkdirat(ctx->dirfd, "md", 0755), EEXIST);
    EXPECT(ctx, pt_put(ctx, "md/f", "", 0) == 0, "setup");
    SYS_ERR2(ctx, unlinkat(ctx->dirfd, "md", AT_REMOVEDIR), ENOTEMPTY, EEXIST);
    SYS_ERR(ctx, unlinkat(ctx->dirfd, "md/f", AT_REMOVEDIR), ENOTDIR);
    SYS(ctx, unlinkat(ctx->dirfd, "md/f", 0));
    SYS(ctx, unlinkat(ctx->dirfd, "md", AT_REMOVEDIR));
    SYS_ERR(ctx, fstatat(ctx->dirfd, "md", &st, 0), ENOENT);
    SYS(ctx, fstat(ctx->dirfd, &p1));
    EXPECT(ctx, p1.st_nlink == p0.st_nlink, "parent nlink %ju after rmdir, expected %ju",
           (uintmax_t)p1.st_nlink, (uintmax_t)p0.st_nlink);
    SYS_ERR(ctx, mkdirat(ctx->dirfd, "missing/child", 0755), ENOENT);
    return 0;
}

static int check_mknod_fifo(struct pt_ctx *ctx)
{
    struct stat st;
    char buf[8];

    SYS(ctx, mkfifoat(ctx->dirfd, "fifo", 0600));
    SYS(ctx, fstatat(ctx->dirfd, "fifo", &st, 0));
    EXPECT(ctx, S_ISFIFO(st.st_mode), "mode %o is not a FIFO", st.st_mode);
    SYS(ctx, mknodat(ctx->dirfd, "fifo2", S_IFIFO | 0640, 0));
    SYS(ctx, fstatat(ctx->dirfd, "fifo2", &st, 0));
    EXPECT(ctx, S_ISFIFO(st.st_mode) && (st.st_mode & 0777) == (0640 & ~ctx->umask),
           "mknod S_IFIFO gave mode %o", st.st_mode);
    /* The FIFO works as a pipe. */
    _cleanup_close_ int r = openat(ctx->dirfd, "fifo", O_RDONLY | O_NONBLOCK);
    SYS(ctx, r);
    _cleanup_close_ int w = openat(ctx->dirfd, "fifo", O_WRONLY | O_NONBLOCK);
    SYS(ctx, w);
    SYS(ctx, write(w, "pipe", 4));
    EXPECT(ctx, read(r, buf, sizeof(buf)) == 4 && memcmp(buf, "pipe", 4) == 0,
           "data through the FIFO differs");
    /* A regular file through mknod. */
    SYS(ctx, mknodat(ctx->dirfd, "nod-reg", S_IFREG | 0600, 0));
    SYS(ctx, fstatat(ctx->dirfd, "nod-reg", &st, 0));
    EXPECT(ctx, S_ISREG(st.st_mode) && st.st_size == 0, "mknod S_IFREG gave mode %o", st.st_mode);
    return 0;
}

static int check_readdir_10k(struct pt_ctx *ctx)
{
    enum { N = 10000, PROCS = 4 };
    _cleanup_free_ unsigned char *seen = calloc(N, 1);
    char name[32];
    int dots = 0, unknown = 0, dup = 0;

    EXPECT(ctx, seen != NULL, "out of memory");
    SYS(ctx, mkdirat(ctx->dirfd, "many", 0755));
    _cleanup_close_ int dfd = openat(ctx->dirfd, "many", O_RDONLY | O_DIRECTORY);
    SYS(ctx, dfd);
    /* Created by PROCS processes at once: more requests in flight, less time. */
    pid_t kids[PROCS];
    for (int k = 0; k < PROCS; k++) {
        kids[k] = fork();
        if (kids[k] < 0)
            return FAILF(ctx, "fork: %s", strerror(errno));
        if (kids[k] == 0) {
            alarm(600);
            for (int i = k; i < N; i += PROCS) {
                snprintf(name, sizeof(name), "entry-%05d-%s", i, i % 3 ? "x" : "a-longer-name-here");
                if (mknodat(dfd, name, S_IFREG | 0644, 0) < 0) {
                    fprintf(stderr, "create %s: %s\n", name, strerror(errno));
                    _exit(1);
                }
            }
            _exit(0);
        }
    }
    int bad_kids = 0;
    for (int k = 0; k < PROCS; k++)
        bad_kids += pt_reap(kids[k]) != 0;
    EXPECT(ctx, bad_kids == 0, "%d of %d creating processes failed", bad_kids, PROCS);
    int dfd2 = openat(ctx->dirfd, "many", O_RDONLY | O_DIRECTORY);
    SYS(ctx, dfd2);
    DIR *d = fdopendir(dfd2);
    if (!d) {
        close(dfd2);
        return FAILF(ctx, "fdopendir: %s", strerror(errno));
    }
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        int i;
        char tail[32];
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            dots++;
            continue;
        }
        if (sscanf(de->d_name, "entry-%5d-%31s", &i, tail) != 2 || i < 0 || i >= N) {
            unknown++;
            continue;
        }
        snprintf(name, sizeof(name), "entry-%05d-%s", i, i % 3 ? "x" : "a-longer-name-here");
        if (strcmp(name, de->d_name) != 0) {
            unknown++;
            continue;
        }
        if (seen[i]++)
            dup++;
        if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
            unknown++;
    }
    int err = errno;
    closedir(d);
    EXPECT(ctx, err == 0, "readdir: %s", strerror(err));
    int missing = 0;
    for (int i = 0; i < N; i++)
        missing += !seen[i];
    EXPECT(ctx, dots == 2 && unknown == 0 && dup == 0 && missing == 0,
           "%d dot entries, %d unknown, %d duplicates, %d missing", dots, unknown, dup, missing);
    /* Unlinking is left to the end of the run (or to the caller with -k, who
     * can remove the tree on the host far faster than through the mount).
     * One name is removed here to check the directory changes accordingly. */
    SYS(ctx, unlinkat(dfd, "entry-00043-x", 0));
    SYS_ERR(ctx, faccessat(dfd, "entry-00043-x", F_OK, 0), ENOENT);
    return 0;
}

static int check_o_tmpfile(struct pt_ctx *ctx)
{
    char data[3000], path[64];
    struct stat st;

    pt_pattern(data, sizeof(data), 0, 9);
    _cleanup_close_ int fd = openat(ctx->dirfd, ".", O_TMPFILE | O_RDWR, 0600);
    EXPECT(ctx, fd >= 0, "open O_TMPFILE: %s", strerror(errno));
    EXPECT(ctx, pt_write_all(fd, data, sizeof(data), 0) == 0, "write");
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_nlink == 0, "O_TMPFILE nlink %ju", (uintmax_t)st.st_nlink);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    SYS(ctx, linkat(AT_FDCWD, path, ctx->dirfd, "tmpfile-linked", AT_SYMLINK_FOLLOW));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_nlink == 1, "nlink %ju after linkat", (uintmax_t)st.st_nlink);
    /* An O_EXCL tmpfile can never get a name. */
    _cleanup_close_ int ex = openat(ctx->dirfd, ".", O_TMPFILE | O_RDWR | O_EXCL, 0600);
    SYS(ctx, ex);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", ex);
    SYS_ERR(ctx, linkat(AT_FDCWD, path, ctx->dirfd, "tmpfile-excl", AT_SYMLINK_FOLLOW), ENOENT);
    return pt_expect_content(ctx, "tmpfile-linked", data, sizeof(data));
}

/* ---- attributes: chmod, chown, times, xattrs, statfs, access ---- */

static int check_chmod(struct pt_ctx *ctx)
{
    struct stat st;

    EXPECT(ctx, pt_put(ctx, "cm", "x", 1) == 0, "setup");
    SYS(ctx, fchmodat(ctx->dirfd, "cm", 0640, 0));
    SYS(ctx, fstatat(ctx->dirfd, "cm", &st, 0));
    EXPECT(ctx, (st.st_mode & 07777) == 0640, "mode %o after chmod 0640", st.st_mode & 07777);
    _cleanup_close_ int fd = openat(ctx->dirfd, "cm", O_RDONLY);
    SYS(ctx, fd);
    SYS(ctx, fchmod(fd, 04711));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, (st.st_mode & 07777) == 04711, "mode %o after fchmod 04711", st.st_mode & 07777);
    SYS(ctx, fstatat(ctx->dirfd, "cm", &st, 0));
    EXPECT(ctx, (st.st_mode & 07777) == 04711, "stat by name: mode %o", st.st_mode & 07777);
    SYS(ctx, fchmod(fd, 0));
    SYS(ctx, fstatat(ctx->dirfd, "cm", &st, 0));
    EXPECT(ctx, (st.st_mode & 07777) == 0, "mode %o after chmod 0", st.st_mode & 07777);
    return 0;
}

static int check_chown(struct pt_ctx *ctx)
{
    struct stat st;

    if (geteuid() != 0)
        return FAILF(ctx, "needs root (euid %u)", (unsigned)geteuid());
    EXPECT(ctx, pt_put(ctx, "co", "x", 1) == 0, "setup");
    SYS(ctx, fchownat(ctx->dirfd, "co", 1234, 5678, 0));
    SYS(ctx, fstatat(ctx->dirfd, "co", &st, 0));
    EXPECT(ctx, st.st_uid == 1234 && st.st_gid == 5678, "owner %u:%u after chown 1234:5678",
           (unsigned)st.st_uid, (unsigned)st.st_gid);
    _cleanup_close_ int fd = openat(ctx->dirfd, "co", O_RDONLY);
    SYS(ctx, fd);
    SYS(ctx, fchown(fd, (uid_t)-1, 4321));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_uid == 1234 && st.st_gid == 4321, "owner %u:%u after fchown -1:4321",
           (unsigned)st.st_uid, (unsigned)st.st_gid);
    /* A chown of a setuid file clears the bit. */
    SYS(ctx, fchmod(fd, 04755));
    SYS(ctx, fchown(fd, 0, 0));
    SYS(ctx, fstat(fd, &st));
    EXPECT(ctx, st.st_uid == 0 && st.st_gid == 0, "owner %u:%u after chown 0:0",
           (unsigned)st.st_uid, (unsigned)st.st_gid);
    EXPECT(ctx, !(st.st_mode & S_ISUID), "setuid bit survived chown (mode %o)", st.st_mode);
    /* lchown changes the link, not its target. */
    SYS(ctx, symlinkat("co", ctx->dirfd, "co-link"));
    SYS(ctx, fchownat(ctx->dirfd, "co-link", 77, 88, AT_SYMLINK_NOFOLLOW));
    SYS(ctx, fstatat(ctx->dirfd, "co-link", &st, AT_SYMLINK_NOFOLLOW));
    EXPECT(ctx, st.st_uid == 77 && st.st_gid == 88, "link owner %u:%u", (unsigned)st.st_uid,
           (unsigned)st.st_gid);
    SYS(ctx, fstatat(ctx->dirfd, "co", &st, 0));
    EXPECT(ctx, st.st_uid == 0, "lchown changed the target's owner");
    return 0;
}

static int check_utimensat(struct pt_ctx *ctx)
{
    struct stat st;
    struct timespec ts[2] = {
        { .tv_sec = 1000000000, .tv_nsec = 123456789 }, /* 2001-09-09 */
        { .tv_sec = 1100000000, .tv_nsec = 987654321 },
    };

    EXPECT(ctx, pt_put(ctx, "ut", "x", 1) == 0, "setup");
    SYS(ctx, utimensat(ctx->dirfd, "ut", ts, 0));
    SYS(ctx, fstatat(ctx->dirfd, "ut", &st, 0));
    EXPECT(ctx, st.st_atim.tv_sec == ts[0].tv_sec && st.st_mtim.tv_sec == ts[1].tv_sec,
           "times %lld/%lld, expected %lld/%lld", (long long)st.st_atim.tv_sec,
           (long long)st.st_mtim.tv_sec, (long long)ts[0].tv_sec, (long long)ts[1].tv_sec);
    /* Nanoseconds: exact on ext4/xfs/tmpfs, which are what the suite runs over. */
    EXPECT(ctx, st.st_atim.tv_nsec == ts[0].tv_nsec && st.st_mtim.tv_nsec == ts[1].tv_nsec,
           "nanoseconds %ld/%ld lost", st.st_atim.tv_nsec, st.st_mtim.tv_nsec);

    /* UTIME_OMIT keeps atime, mtime changes. */
    struct timespec omit[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = 1200000000 } };
    SYS(ctx, utimensat(ctx->dirfd, "ut", omit, 0));
    SYS(ctx, fstatat(ctx->dirfd, "ut", &st, 0));
    EXPECT(ctx, st.st_atim.tv_sec == ts[0].tv_sec && st.st_atim.tv_nsec == ts[0].tv_nsec,
           "UTIME_OMIT changed atime to %lld", (long long)st.st_atim.tv_sec);
    EXPECT(ctx, st.st_mtim.tv_sec == 1200000000 && st.st_mtim.tv_nsec == 0,
           "mtime %lld.%09ld, expected 1200000000.0", (long long)st.st_mtim.tv_sec,
           st.st_mtim.tv_nsec);

    /* UTIME_NOW on mtime only: mtime leaves 2008 for the present day (the host's
     * clock may differ from ours, so only "much later than 2008" is checked),
     * atime stays. */
    struct timespec now[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_NOW } };
    _cleanup_close_ int fd = openat(ctx->dirfd, "ut", O_RDONLY);
    SYS(ctx, fd);
    SYS(ctx, futimens(fd, now));
    SYS(ctx, fstatat(ctx->dirfd, "ut", &st, 0));
    EXPECT(ctx, st.st_mtim.tv_sec > 1600000000, "UTIME_NOW left mtime at %lld",
           (long long)st.st_mtim.tv_sec);
    EXPECT(ctx, st.st_atim.tv_sec == ts[0].tv_sec, "UTIME_OMIT atime changed to %lld",
           (long long)st.st_atim.tv_sec);
    /* NULL times: both now. */
    SYS(ctx, utimensat(ctx->dirfd, "ut", NULL, 0));
    SYS(ctx, fstatat(ctx->dirfd, "ut", &st, 0));
    EXPECT(ctx, st.st_atim.tv_sec > 1600000000 && st.st_mtim.tv_sec > 1600000000,
           "utimensat(NULL) left %lld/%lld", (long long)st.st_atim.tv_sec,
           (long long)st.st_mtim.tv_sec);
    /* Symlink's own times with AT_SYMLINK_NOFOLLOW. */
    SYS(ctx, symlinkat("ut", ctx->dirfd, "ut-link"));
    SYS(ctx, utimensat(ctx->dirfd, "ut-link", ts, AT_SYMLINK_NOFOLLOW));
    struct stat lst;
    SYS(ctx, fstatat(ctx->dirfd, "ut-link", &lst, AT_SYMLINK_NOFOLLOW));
    EXPECT(ctx, lst.st_mtim.tv_sec == ts[1].tv_sec, "symlink mtime %lld",
           (long long)lst.st_mtim.tv_sec);
    return 0;
}

static int check_xattr(struct pt_ctx *ctx)
{
    char path[sizeof(ctx->workdir) + 64], val[256], list[1024];
    const char big[] = "a value with\0embedded zero and more bytes";

    EXPECT(ctx, pt_put(ctx, "xa", "x", 1) == 0, "setup");
    snprintf(path, sizeof(path), "%s/xa", ctx->workdir);
    SYS(ctx, setxattr(path, "user.vufs.one", "1", 1, 0));
    SYS(ctx, setxattr(path, "user.vufs.two", big, sizeof(big), 0));
    ssize_t n = getxattr(path, "user.vufs.two", NULL, 0);
    EXPECT(ctx, n == (ssize_t)sizeof(big), "size query returned %zd", n);
    n = getxattr(path, "user.vufs.two", val, sizeof(val));
    EXPECT(ctx, n == (ssize_t)sizeof(big) && memcmp(val, big, sizeof(big)) == 0,
           "value read back differs (%zd bytes)", n);
    SYS_ERR(ctx, getxattr(path, "user.vufs.two", val, 3), ERANGE);
    SYS_ERR(ctx, setxattr(path, "user.vufs.one", "2", 1, XATTR_CREATE), EEXIST);
    SYS_ERR(ctx, setxattr(path, "user.vufs.none", "2", 1, XATTR_REPLACE), ENODATA);
    SYS(ctx, setxattr(path, "user.vufs.one", "22", 2, XATTR_REPLACE));
    n = getxattr(path, "user.vufs.one", val, sizeof(val));
    EXPECT(ctx, n == 2 && memcmp(val, "22", 2) == 0, "XATTR_REPLACE value not stored");

    n = listxattr(path, list, sizeof(list));
    EXPECT(ctx, n > 0, "listxattr: %s", strerror(errno));
    int found = 0;
    for (ssize_t off = 0; off < n; off += (ssize_t)strlen(list + off) + 1)
        found += !strcmp(list + off, "user.vufs.one") || !strcmp(list + off, "user.vufs.two");
    EXPECT(ctx, found == 2, "listxattr shows %d of the 2 names", found);
    EXPECT(ctx, listxattr(path, NULL, 0) == n, "listxattr size query differs");

    SYS(ctx, removexattr(path, "user.vufs.one"));
    SYS_ERR(ctx, getxattr(path, "user.vufs.one", val, sizeof(val)), ENODATA);
    SYS_ERR(ctx, removexattr(path, "user.vufs.one"), ENODATA);
    _cleanup_close_ int fd = openat(ctx->dirfd, "xa", O_RDONLY);
    SYS(ctx, fd);
    SYS(ctx, fsetxattr(fd, "user.vufs.fd", "f", 1, 0));
    n = fgetxattr(fd, "user.vufs.fd", val, sizeof(val));
    EXPECT(ctx, n == 1 && val[0] == 'f', "fgetxattr returned %zd", n);
    /* Directories carry xattrs too. */
    SYS(ctx, setxattr(ctx->workdir, "user.vufs.dir", "d", 1, 0));
    n = getxattr(ctx->workdir, "user.vufs.dir", val, sizeof(val));
    EXPECT(ctx, n == 1 && val[0] == 'd', "directory xattr read back %zd", n);
    return 0;
}

static int check_statfs(struct pt_ctx *ctx)
{
    struct statfs a, b;

    SYS(ctx, fstatfs(ctx->dirfd, &a));
    SYS(ctx, statfs(ctx->workdir, &b));
    EXPECT(ctx, a.f_bsize > 0 && a.f_blocks > 0, "bsize %ld blocks %llu", (long)a.f_bsize,
           (unsigned long long)a.f_blocks);
    EXPECT(ctx, a.f_bfree <= a.f_blocks && a.f_bavail <= a.f_blocks && a.f_ffree <= a.f_files,
           "free counts exceed totals");
    EXPECT(ctx, a.f_namelen >= 255, "namelen %ld", (long)a.f_namelen);
    EXPECT(ctx, a.f_type == b.f_type && a.f_blocks == b.f_blocks, "statfs and fstatfs disagree");
    /* Writing 8 MiB and syncing lowers the free count (other writers aside, it
     * never makes the filesystem look larger). */
    EXPECT(ctx, b.f_blocks == a.f_blocks, "total blocks changed");
    return 0;
}

/* Run fn in a child that dropped to uid/gid 65534; returns its exit status. */
static int pt_as_nobody(struct pt_ctx *ctx, const char *name, int mode)
{
    pid_t pid = fork();

    if (pid < 0)
        return -1;
    if (pid == 0) {
        alarm(60);
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
            _exit(100);
        _exit(faccessat(ctx->dirfd, name, mode, 0) == 0 ? 0 : errno == EACCES ? 13 : 101);
    }
    return pt_reap(pid);
}

static int check_access(struct pt_ctx *ctx)
{
    EXPECT(ctx, pt_put(ctx, "acc", "x", 1) == 0, "setup");
    SYS(ctx, fchmodat(ctx->dirfd, "acc", 0640, 0));
    SYS(ctx, faccessat(ctx->dirfd, "acc", R_OK | W_OK, 0));
    SYS_ERR(ctx, faccessat(ctx->dirfd, "acc-missing", F_OK, 0), ENOENT);
    if (geteuid() != 0)
        return 0;
    /* Root needs at least one x bit to be granted X_OK on a file. */
    SYS_ERR(ctx, faccessat(ctx->dirfd, "acc", X_OK, 0), EACCES);
    SYS(ctx, fchmodat(ctx->dirfd, "acc", 0641, 0));
    SYS(ctx, faccessat(ctx->dirfd, "acc", X_OK, 0));
    /* An unprivileged user: only the "other" bits count. */
    SYS(ctx, fchmod(ctx->dirfd, 0755));
    int r = pt_as_nobody(ctx, "acc", R_OK);
    EXPECT(ctx, r == 13, "nobody R_OK on 0641: status %d, expected EACCES", r);
    r = pt_as_nobody(ctx, "acc", X_OK);
    EXPECT(ctx, r == 0, "nobody X_OK on 0641: status %d, expected success", r);
    SYS(ctx, fchmodat(ctx->dirfd, "acc", 0604, 0));
    r = pt_as_nobody(ctx, "acc", R_OK);
    EXPECT(ctx, r == 0, "nobody R_OK on 0604: status %d, expected success", r);
    r = pt_as_nobody(ctx, "acc", W_OK);
    EXPECT(ctx, r == 13, "nobody W_OK on 0604: status %d, expected EACCES", r);
    return 0;
}

/* Locks are in posix_locks.c. */

static const struct pt_check pt_checks[] = {
    { "create_write_read", check_create_write_read },
    { "o_excl", check_o_excl },
    { "o_append", check_o_append },
    { "truncate", check_truncate },
    { "ftruncate", check_ftruncate },
    { "rename", check_rename },
    { "rename_noreplace", check_rename_noreplace },
    { "rename_exchange", check_rename_exchange },
    { "rename_dir_across", check_rename_dir_across },
    { "unlink", check_unlink },
    { "unlink_open_file", check_unlink_open_file },
    { "hard_links", check_hard_links },
    { "symlink_readlink", check_symlink },
    { "mkdir_rmdir", check_mkdir_rmdir },
    { "mknod_fifo", check_mknod_fifo },
    { "chmod", check_chmod },
    { "chown", check_chown },
    { "utimensat", check_utimensat },
    { "xattr_user", check_xattr },
    { "statfs", check_statfs },
    { "access", check_access },
    { "fsync_fdatasync", check_fsync },
    { "fallocate", check_fallocate },
    { "copy_file_range", check_copy_file_range },
    { "sparse_seek_data_hole", check_sparse_seek },
    { "o_tmpfile_linkat", check_o_tmpfile },
    { "posix_lock_conflict", pt_check_posix_lock_conflict },
    { "posix_lock_getlk", pt_check_posix_getlk },
    { "posix_lock_setlkw", pt_check_posix_setlkw },
    { "flock", pt_check_flock },
    { "readdir_10k", check_readdir_10k },
    { "large_file_64m", check_large_file },
};

const struct pt_check *pt_check_table(size_t *n)
{
    *n = sizeof(pt_checks) / sizeof(pt_checks[0]);
    return pt_checks;
}
