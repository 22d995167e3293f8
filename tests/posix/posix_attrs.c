/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: attribute checks (mode, owner, times,
 * user xattrs, statfs, access as root and as nobody).
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

int pt_check_chmod(struct pt_ctx *ctx)
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

int pt_check_chown(struct pt_ctx *ctx)
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

int pt_check_utimensat(struct pt_ctx *ctx)
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

int pt_check_xattr(struct pt_ctx *ctx)
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

int pt_check_statfs(struct pt_ctx *ctx)
{
    struct statfs a, b;

    SYS(ctx, fstatfs(ctx->dirfd, &a));
    SYS(ctx, statfs(ctx->workdir, &b));
    EXPECT(ctx, a.f_bsize > 0 && a.f_blocks > 0, "bsize %ld blocks %llu", (long)a.f_bsize,
           (unsigned long long)a.f_blocks);
    EXPECT(ctx, a.f_bfree <= a.f_blocks && a.f_bavail <= a.f_blocks && a.f_ffree <= a.f_files,
           "free counts exceed totals");
    EXPECT(ctx, a.f_namelen >= 255, "namelen %ld", (long)a.f_namelen);
    /* Free counts are left alone: other writers on the host move them. */
    EXPECT(ctx, a.f_type == b.f_type && a.f_blocks == b.f_blocks && a.f_bsize == b.f_bsize,
           "statfs and fstatfs disagree");
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

int pt_check_access(struct pt_ctx *ctx)
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
