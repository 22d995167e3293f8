/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX behaviour suite: command line, run loop, summary.
 *
 * usage: posix_suite [-k] [-x name,...] [-o name,...] [-l] DIR
 *   -k          keep the work directory (DIR/posix-suite.PID)
 *   -x names    expected failures: reported as XFAIL, not counted as failed;
 *               one that passes is reported as a normal PASS
 *   -o names    run only these checks
 *   -l          list the checks and exit
 *
 * Each check runs in its own empty directory DIR/posix-suite.PID/NAME. Output:
 * one "PASS name", "FAIL name: why" or "XFAIL name: why" line per check, kept
 * files as "VUFS-KEEP path" (relative to DIR), then "N passed, M failed, K
 * expected failures". Exit status: 0 when nothing failed, 1 otherwise, 2 on
 * usage errors.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "posix_suite.h"

/* In the order they run: cheap checks first, the slow 10k readdir and the
 * 64 MiB file last so a quick failure shows up early. */
static const struct pt_check pt_checks[] = {
    { "create_write_read", pt_check_create_write_read },
    { "o_excl", pt_check_o_excl },
    { "o_append", pt_check_o_append },
    { "truncate", pt_check_truncate },
    { "ftruncate", pt_check_ftruncate },
    { "rename", pt_check_rename },
    { "rename_noreplace", pt_check_rename_noreplace },
    { "rename_exchange", pt_check_rename_exchange },
    { "rename_dir_across", pt_check_rename_dir_across },
    { "unlink", pt_check_unlink },
    { "unlink_open_file", pt_check_unlink_open_file },
    { "hard_links", pt_check_hard_links },
    { "symlink_readlink", pt_check_symlink },
    { "mkdir_rmdir", pt_check_mkdir_rmdir },
    { "mknod_fifo", pt_check_mknod_fifo },
    { "chmod", pt_check_chmod },
    { "chown", pt_check_chown },
    { "utimensat", pt_check_utimensat },
    { "xattr_user", pt_check_xattr },
    { "statfs", pt_check_statfs },
    { "access", pt_check_access },
    { "fsync_fdatasync", pt_check_fsync },
    { "fallocate", pt_check_fallocate },
    { "copy_file_range", pt_check_copy_file_range },
    { "sparse_seek_data_hole", pt_check_sparse_seek },
    { "o_tmpfile_linkat", pt_check_o_tmpfile },
    { "posix_lock_conflict", pt_check_posix_lock_conflict },
    { "posix_lock_getlk", pt_check_posix_getlk },
    { "posix_lock_setlkw", pt_check_posix_setlkw },
    { "flock", pt_check_flock },
    { "readdir_10k", pt_check_readdir_10k },
    { "large_file_64m", pt_check_large_file },
};

void pt_freep(void *p)
{
    free(*(void **)p);
}

void pt_keep(struct pt_ctx *ctx, const char *name)
{
    printf("VUFS-KEEP %s/%s\n", ctx->relwork, name);
}

static bool pt_in_list(const char *list, const char *name)
{
    size_t len = strlen(name);

    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

/* Every name in list must be a check; catches typos in -x / -o. */
static bool pt_list_valid(const char *list, const struct pt_check *checks, size_t n)
{
    char buf[4096];

    if (!list)
        return true;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found |= strcmp(checks[i].name, tok) == 0;
        if (!found) {
            fprintf(stderr, "posix_suite: unknown check '%s'\n", tok);
            return false;
        }
    }
    return true;
}

/* Remove a tree below dirfd/name (depth-first, no symlink following). */
static int pt_rmtree(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    int ret = 0;

    if (fd < 0)
        return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int r = pt_rmtree(dirfd(d), de->d_name);
        if (r < 0)
            ret = r;
    }
    closedir(d);
    if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && ret == 0)
        ret = -errno;
    return ret;
}

static double pt_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    const char *xfail = NULL, *only = NULL;
    bool keep = false, list = false;
    const struct pt_check *checks = pt_checks;
    size_t n = sizeof(pt_checks) / sizeof(pt_checks[0]);
    int opt;

    while ((opt = getopt(argc, argv, "kx:o:l")) != -1) {
        switch (opt) {
        case 'k': keep = true; break;
        case 'x': xfail = optarg; break;
        case 'o': only = optarg; break;
        case 'l': list = true; break;
        default:
            fprintf(stderr, "usage: %s [-k] [-x name,...] [-o name,...] [-l] DIR\n", argv[0]);
            return 2;
        }
    }
    if (list) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", checks[i].name);
        return 0;
    }
    if (optind != argc - 1 || !pt_list_valid(xfail, checks, n) || !pt_list_valid(only, checks, n)) {
        fprintf(stderr, "usage: %s [-k] [-x name,...] [-o name,...] [-l] DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    char top[PATH_MAX];
    if (!realpath(argv[optind], top)) {
        fprintf(stderr, "posix_suite: %s: %s\n", argv[optind], strerror(errno));
        return 2;
    }
    char base[64];
    snprintf(base, sizeof(base), "posix-suite.%d", (int)getpid());
    int topfd = open(top, O_RDONLY | O_DIRECTORY);
    if (topfd < 0 || mkdirat(topfd, base, 0755) < 0) {
        fprintf(stderr, "posix_suite: cannot create %s/%s: %s\n", top, base, strerror(errno));
        return 2;
    }
    int basefd = openat(topfd, base, O_RDONLY | O_DIRECTORY);
    if (basefd < 0) {
        fprintf(stderr, "posix_suite: open %s/%s: %s\n", top, base, strerror(errno));
        return 2;
    }
    mode_t um = umask(022);
    umask(um);

    unsigned passed = 0, failed = 0, xfailed = 0;
    double t0 = pt_now();
    for (size_t i = 0; i < n; i++) {
        const struct pt_check *c = &checks[i];
        struct pt_ctx ctx = { .umask = um };

        if (only && !pt_in_list(only, c->name))
            continue;
        snprintf(ctx.workdir, sizeof(ctx.workdir), "%s/%s/%s", top, base, c->name);
        snprintf(ctx.relwork, sizeof(ctx.relwork), "%s/%s", base, c->name);
        int r;
        double t = pt_now();
        if (mkdirat(basefd, c->name, 0755) < 0 ||
            (ctx.dirfd = openat(basefd, c->name, O_RDONLY | O_DIRECTORY)) < 0) {
            r = pt_fail(&ctx, "cannot create the work directory: %s", strerror(errno));
            ctx.dirfd = -1;
        } else {
            r = c->fn(&ctx);
            if (r < 0 && ctx.failed_msg[0] == '\0')
                pt_fail(&ctx, "failed without a reason");
        }
        if (ctx.dirfd >= 0)
            close(ctx.dirfd);
        if (r == 0) {
            passed++;
            printf("PASS %s (%.1f s)\n", c->name, pt_now() - t);
        } else if (xfail && pt_in_list(xfail, c->name)) {
            xfailed++;
            printf("XFAIL %s: %s\n", c->name, ctx.failed_msg);
        } else {
            failed++;
            printf("FAIL %s: %s\n", c->name, ctx.failed_msg);
        }
    }

    if (!keep) {
        /* Keep only what was announced with VUFS-KEEP: the large file. */
        DIR *d = fdopendir(dup(basefd));
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
                !strcmp(de->d_name, "large_file_64m"))
                continue;
            int r = pt_rmtree(basefd, de->d_name);
            if (r < 0)
                printf("warning: cleaning %s: %s\n", de->d_name, strerror(-r));
        }
        if (d)
            closedir(d);
    }
    close(basefd);
    if (!keep)
        unlinkat(topfd, base, AT_REMOVEDIR); /* fails (fine) while a kept file is in it */
    close(topfd);
    printf("%u passed, %u failed, %u expected failures (%.1f s)\n", passed, failed, xfailed,
           pt_now() - t0);
    return failed ? 1 : 0;
}
