/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: file data checks (create, read, write,
 * O_APPEND, O_EXCL, truncation, sync, fallocate, copy_file_range, sparse files,
 * a 64 MiB file).
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

int pt_check_create_write_read(struct pt_ctx *ctx)
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

int pt_check_o_excl(struct pt_ctx *ctx)
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

int pt_check_o_append(struct pt_ctx *ctx)
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

int pt_check_truncate(struct pt_ctx *ctx)
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

int pt_check_ftruncate(struct pt_ctx *ctx)
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

int pt_check_large_file(struct pt_ctx *ctx)
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

int pt_check_sparse_seek(struct pt_ctx *ctx)
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

int pt_check_fsync(struct pt_ctx *ctx)
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

int pt_check_fallocate(struct pt_ctx *ctx)
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

int pt_check_copy_file_range(struct pt_ctx *ctx)
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
