/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Host-side helpers the integration tests share: temporary share trees. */
#ifndef VUFSD_IT_UTIL_H
#define VUFSD_IT_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <sys/stat.h>

static inline int it_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

/* Removes a directory tree without following symlinks out of it. */
static inline void it_rm_tree(const char *dir)
{
    nftw(dir, it_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * A fresh share: a 0755 directory /tmp/PREFIX-XXXXXX holding data.bin, size
 * bytes of pattern(offset). The directory (malloc'd; free it, remove it with
 * it_rm_tree), or NULL on failure.
 */
static inline char *it_make_data_share(const char *prefix, size_t size,
                                       uint8_t (*pattern)(uint64_t))
{
    char tmpl[256];
    snprintf(tmpl, sizeof(tmpl), "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(tmpl) || chmod(tmpl, 0755) < 0)
        return NULL;
    char *dir = strdup(tmpl);
    char path[300];
    snprintf(path, sizeof(path), "%s/data.bin", tmpl);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    uint8_t buf[4096];
    size_t done = 0;
    while (fd >= 0 && done < size) {
        size_t n = size - done < sizeof(buf) ? size - done : sizeof(buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(done + i);
        if (write(fd, buf, n) != (ssize_t)n)
            break;
        done += n;
    }
    if (fd < 0 || done < size || close(fd) < 0 || !dir) {
        it_rm_tree(tmpl);
        free(dir);
        return NULL;
    }
    return dir;
}

/* DIR/NAME in a static buffer: valid until the next call. */
static inline const char *it_hpath(const char *dir, const char *name)
{
    static char buf[256];
    snprintf(buf, sizeof(buf), "%s/%s", dir, name);
    return buf;
}

/*
 * The arguments every integration test takes: --vufsd PATH (the path may carry
 * extra daemon options after it, "PATH --log-level=debug") and --log FILE.
 * 0, or the exit status for main: 2 for a bad option, 1 without a usable vufsd.
 */
static inline int it_parse_args(int argc, char **argv, const char *test,
                                const char **vufsd, const char **log)
{
    static const struct option lo[] = {
        { "vufsd", required_argument, NULL, 'v' },
        { "log", required_argument, NULL, 'l' },
        { 0 },
    };
    char exe[512] = "";
    int c;

    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'v')
            *vufsd = optarg;
        else if (c == 'l')
            *log = optarg;
        else
            return 2;
    }
    if (*vufsd)
        snprintf(exe, sizeof(exe), "%.*s", (int)strcspn(*vufsd, " "), *vufsd);
    if (!*vufsd || access(exe, X_OK) != 0) {
        fprintf(stderr, "%s: --vufsd PATH to an executable vufsd is required\n", test);
        return 1;
    }
    return 0;
}

/*
 * The argument of the frontend tests that spawn their backend: --backend
 * 'CMD {socket} {dir}' (its first word must be an executable). 0, or the exit
 * status for main (2) after saying why.
 */
static inline int it_backend_arg(int argc, char **argv, const char **backend)
{
    static const struct option lo[] = {
        { "backend", required_argument, NULL, 'b' },
        { 0 },
    };
    char exe[512] = "";
    int c;

    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c != 'b')
            break;
        *backend = optarg;
    }
    if (*backend)
        snprintf(exe, sizeof(exe), "%.*s", (int)strcspn(*backend, " "), *backend);
    if (c != -1 || !*backend || access(exe, X_OK) != 0) {
        fprintf(stderr, "%s: --backend CMD (an executable) is required\n", argv[0]);
        return 2;
    }
    return 0;
}

#endif
