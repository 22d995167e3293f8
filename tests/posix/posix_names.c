/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: name checks (rename and renameat2,
 * unlink, hard links, symlinks, directories, FIFOs, a 10k-entry readdir, O_TMPFILE).
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

int pt_check_rename(struct pt_ctx *ctx)
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

int pt_check_rename_noreplace(struct pt_ctx *ctx)
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

int pt_check_rename_exchange(struct pt_ctx *ctx)
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

int pt_check_rename_dir_across(struct pt_ctx *ctx)
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

int pt_check_unlink(struct pt_ctx *ctx)
{
    EXPECT(ctx, pt_put(ctx, "ul", "bye", 3) == 0, "setup");
    SYS(ctx, unlinkat(ctx->dirfd, "ul", 0));
    SYS_ERR(ctx, faccessat(ctx->dirfd, "ul", F_OK, 0), ENOENT);
    SYS_ERR(ctx, unlinkat(ctx->dirfd, "ul", 0), ENOENT);
    SYS(ctx, mkdirat(ctx->dirfd, "ul-dir", 0755));
    SYS_ERR2(ctx, unlinkat(ctx->dirfd, "ul-dir", 0), EISDIR, EPERM);
    return 0;
}

int pt_check_unlink_open_file(struct pt_ctx *ctx)
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

int pt_check_hard_links(struct pt_ctx *ctx)
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

int pt_check_symlink(struct pt_ctx *ctx)
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

int pt_check_mkdir_rmdir(struct pt_ctx *ctx)
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

int pt_check_mknod_fifo(struct pt_ctx *ctx)
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

int pt_check_readdir_10k(struct pt_ctx *ctx)
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

int pt_check_o_tmpfile(struct pt_ctx *ctx)
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
