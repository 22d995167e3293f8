/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs-probe: the guest side of the checks that fio and busybox cannot do (DAX
 * mappings, flock). Built static and put in the guest's initramfs; each command
 * prints one line and exits 0 on success, 1 on a mismatch or error.
 *
 *   vufs-probe fill FILE OFF LEN SEED     MAP_SHARED store of a pattern, msync
 *   vufs-probe check FILE OFF LEN SEED    the pattern read through a mapping
 *   vufs-probe dio-write SRC DST LEN      O_DIRECT write of DST from a buffer that
 *                                        is SRC's shared mapping
 *   vufs-probe dio-read SRC DST LEN       O_DIRECT read of DST into SRC's shared
 *                                        mapping, then msync
 *   vufs-probe unlink-mapped FILE LEN SEED  map, unlink, check the mapping, unmap
 *   vufs-probe truncate-mapped FILE LEN SEED  map, truncate to half, read the first
 *                                        half (the second would be SIGBUS)
 *   vufs-probe is-dax FILE                statx STATX_ATTR_DAX: prints dax or plain
 *   vufs-probe hold FILE SECONDS          takes an exclusive flock and keeps it
 *   vufs-probe trylock FILE               an exclusive flock without waiting: 0 if
 *                                        taken, 1 if someone holds it
 *   vufs-probe meta DIR N PHASE           one metadata phase over DIR/f0..f(N-1),
 *                                        timed: create (O_CREAT|O_EXCL, close),
 *                                        stat, or unlink; prints "VUFS-META
 *                                        phase=PHASE n=N seconds=S ops_per_s=R"
 *   vufs-probe posix-hold FILE SECONDS    takes a POSIX write lock on the whole
 *                                        file (fcntl F_SETLKW) and keeps it
 *   vufs-probe posix-try FILE             a POSIX write lock without waiting: 0 if
 *                                        taken, 1 if another process holds it
 *   vufs-probe xattr-set FILE NAME VALUE  setxattr, then getxattr and listxattr must
 *                                        give it back
 *   vufs-probe xattr-get FILE NAME        prints the attribute's value
 *
 * The pattern of byte i at file offset o is (o * 131 + o / 4096 + SEED) & 0xff, so
 * a block written to the wrong place or stale data never matches.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

static uint8_t pat(uint64_t off, unsigned seed)
{
    return (uint8_t)(off * 131 + off / 4096 + seed);
}

static int die(const char *what)
{
    printf("vufs-probe: %s: %s\n", what, strerror(errno));
    return 1;
}

static void *map(const char *path, uint64_t off, uint64_t len, int *fdp)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return NULL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
    if (p == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    *fdp = fd;
    return p;
}

static int check_buf(const uint8_t *p, uint64_t off, uint64_t len, unsigned seed,
                     const char *what)
{
    for (uint64_t i = 0; i < len; i++)
        if (p[i] != pat(off + i, seed)) {
            printf("vufs-probe: %s: byte %llu is %u, not %u\n", what,
                   (unsigned long long)(off + i), p[i], pat(off + i, seed));
            return 1;
        }
    return 0;
}

static int fill(const char *path, uint64_t off, uint64_t len, unsigned seed)
{
    int fd;
    uint8_t *p = map(path, off, len, &fd);
    if (!p)
        return die("map");
    for (uint64_t i = 0; i < len; i++)
        p[i] = pat(off + i, seed);
    if (msync(p, len, MS_SYNC) < 0)
        return die("msync");
    munmap(p, len);
    if (fsync(fd) < 0)
        return die("fsync");
    close(fd);
    printf("vufs-probe: filled %s [%llu, +%llu)\n", path, (unsigned long long)off,
           (unsigned long long)len);
    return 0;
}

static int check(const char *path, uint64_t off, uint64_t len, unsigned seed)
{
    int fd;
    uint8_t *p = map(path, off, len, &fd);
    if (!p)
        return die("map");
    int r = check_buf(p, off, len, seed, path);
    munmap(p, len);
    close(fd);
    if (!r)
        printf("vufs-probe: %s [%llu, +%llu) matches\n", path, (unsigned long long)off,
               (unsigned long long)len);
    return r;
}

/* O_DIRECT I/O of dst whose user buffer is src's shared mapping (DAX pages). */
static int dio(const char *src, const char *dst, uint64_t len, int write_dst)
{
    int sfd;
    uint8_t *buf = map(src, 0, len, &sfd);
    if (!buf)
        return die("map src");
    int dfd = open(dst, (write_dst ? O_WRONLY | O_CREAT : O_RDONLY) | O_DIRECT, 0644);
    if (dfd < 0)
        return die("open O_DIRECT");
    ssize_t n = write_dst ? pwrite(dfd, buf, len, 0) : pread(dfd, buf, len, 0);
    if (n != (ssize_t)len) {
        printf("vufs-probe: O_DIRECT %s of %llu bytes: %zd (%s)\n", write_dst ? "write" : "read",
               (unsigned long long)len, n, n < 0 ? strerror(errno) : "short");
        return 1;
    }
    if (fsync(dfd) < 0 || msync(buf, len, MS_SYNC) < 0)
        return die("sync");
    close(dfd);
    munmap(buf, len);
    close(sfd);
    printf("vufs-probe: O_DIRECT %s %s with %s's mapping as the buffer: %llu bytes\n",
           write_dst ? "wrote" : "read", dst, src, (unsigned long long)len);
    return 0;
}

static int unlink_mapped(const char *path, uint64_t len, unsigned seed)
{
    int fd;
    uint8_t *p = map(path, 0, len, &fd);
    if (!p)
        return die("map");
    if (unlink(path) < 0)
        return die("unlink");
    int r = check_buf(p, 0, len, seed, "unlinked file's mapping");
    p[0] ^= 1; /* still writable: the inode lives while mapped */
    p[0] ^= 1;
    munmap(p, len);
    close(fd);
    if (!r)
        printf("vufs-probe: unlinked %s, its mapping still read right\n", path);
    return r;
}

static int truncate_mapped(const char *path, uint64_t len, unsigned seed)
{
    int fd;
    uint8_t *p = map(path, 0, len, &fd);
    if (!p)
        return die("map");
    if (ftruncate(fd, (off_t)(len / 2)) < 0)
        return die("ftruncate");
    int r = check_buf(p, 0, len / 2, seed, "truncated file's mapping");
    munmap(p, len);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return die("fstat");
    close(fd);
    if ((uint64_t)st.st_size != len / 2) {
        printf("vufs-probe: size %lld after truncating to %llu\n", (long long)st.st_size,
               (unsigned long long)(len / 2));
        return 1;
    }
    if (!r)
        printf("vufs-probe: truncated %s to %llu while mapped, the rest reads right\n", path,
               (unsigned long long)(len / 2));
    return r;
}

static int is_dax(const char *path)
{
    struct statx stx;
    if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &stx) < 0)
        return die("statx");
    if (!(stx.stx_attributes_mask & STATX_ATTR_DAX)) {
        printf("unknown\n");
        return 1;
    }
    printf("%s\n", (stx.stx_attributes & STATX_ATTR_DAX) ? "dax" : "plain");
    return 0;
}

static int hold(const char *path, unsigned seconds)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 || flock(fd, LOCK_EX) < 0)
        return die("flock");
    printf("vufs-probe: holding an exclusive flock on %s\n", path);
    fflush(stdout);
    sleep(seconds);
    return 0;
}

static int trylock(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return die("open");
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        printf("vufs-probe: %s is locked: %s\n", path, strerror(errno));
        return 1;
    }
    printf("vufs-probe: took the flock on %s\n", path);
    close(fd);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int meta(const char *dir, unsigned n, const char *phase)
{
    int kind = !strcmp(phase, "create") ? 0 : !strcmp(phase, "stat") ? 1
             : !strcmp(phase, "unlink") ? 2 : -1;
    if (kind < 0 || n == 0) {
        fprintf(stderr, "vufs-probe meta: PHASE is create, stat or unlink; N > 0\n");
        return 2;
    }
    char path[4096];
    double t0 = now_s();
    for (unsigned i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/f%u", dir, i);
        if (kind == 0) {
            int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
            if (fd < 0 || close(fd) < 0)
                return die(path);
        } else if (kind == 1) {
            struct stat st;
            if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
                return die(path);
        } else if (unlink(path) < 0) {
            return die(path);
        }
    }
    double dt = now_s() - t0;
    printf("VUFS-META phase=%s n=%u seconds=%.3f ops_per_s=%.1f\n", phase, n, dt,
           dt > 0 ? n / dt : 0.0);
    return 0;
}

static int posix_lock(const char *path, int cmd)
{
    int fd = open(path, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fd < 0)
        return die("open");
    if (fcntl(fd, cmd, &fl) < 0) {
        printf("vufs-probe: %s is locked: %s\n", path, strerror(errno));
        return 1;
    }
    return fd;
}

static int posix_hold(const char *path, unsigned seconds)
{
    if (posix_lock(path, F_SETLKW) <= 1)
        return 1;
    printf("vufs-probe: holding a POSIX write lock on %s\n", path);
    fflush(stdout);
    sleep(seconds);
    return 0;
}

static int posix_try(const char *path)
{
    int fd = posix_lock(path, F_SETLK);
    if (fd <= 1)
        return 1;
    printf("vufs-probe: took the POSIX lock on %s\n", path);
    close(fd);
    return 0;
}

static int xattr_set(const char *path, const char *name, const char *value)
{
    char got[256], names[4096];
    size_t len = strlen(value);

    if (setxattr(path, name, value, len, 0) < 0)
        return die("setxattr");
    ssize_t n = getxattr(path, name, got, sizeof(got));
    if (n < 0)
        return die("getxattr");
    if ((size_t)n != len || memcmp(got, value, len) != 0) {
        printf("vufs-probe: %s read back as '%.*s', set '%s'\n", name, (int)n, got, value);
        return 1;
    }
    ssize_t ln = listxattr(path, names, sizeof(names));
    if (ln < 0)
        return die("listxattr");
    for (ssize_t i = 0; i < ln; i += (ssize_t)strlen(names + i) + 1) {
        if (!strcmp(names + i, name)) {
            printf("vufs-probe: %s=%s set, read back and listed on %s\n", name, value, path);
            return 0;
        }
    }
    printf("vufs-probe: %s not in listxattr of %s\n", name, path);
    return 1;
}

static int xattr_get(const char *path, const char *name)
{
    char got[256];
    ssize_t n = getxattr(path, name, got, sizeof(got) - 1);

    if (n < 0)
        return die("getxattr");
    got[n] = 0;
    printf("%s\n", got);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "xattr-set"))
        return xattr_set(argv[2], argv[3], argv[4]);
    if (argc >= 4 && !strcmp(argv[1], "xattr-get"))
        return xattr_get(argv[2], argv[3]);
    if (argc >= 5 && !strcmp(argv[1], "meta"))
        return meta(argv[2], (unsigned)strtoul(argv[3], NULL, 0), argv[4]);
    if (argc >= 4 && !strcmp(argv[1], "posix-hold"))
        return posix_hold(argv[2], (unsigned)atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "posix-try"))
        return posix_try(argv[2]);
    if (argc >= 4 && !strcmp(argv[1], "hold"))
        return hold(argv[2], (unsigned)atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "trylock"))
        return trylock(argv[2]);
    if (argc >= 6 && !strcmp(argv[1], "fill"))
        return fill(argv[2], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
                    (unsigned)atoi(argv[5]));
    if (argc >= 6 && !strcmp(argv[1], "check"))
        return check(argv[2], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
                     (unsigned)atoi(argv[5]));
    if (argc >= 5 && !strcmp(argv[1], "dio-write"))
        return dio(argv[2], argv[3], strtoull(argv[4], NULL, 0), 1);
    if (argc >= 5 && !strcmp(argv[1], "dio-read"))
        return dio(argv[2], argv[3], strtoull(argv[4], NULL, 0), 0);
    if (argc >= 5 && !strcmp(argv[1], "unlink-mapped"))
        return unlink_mapped(argv[2], strtoull(argv[3], NULL, 0), (unsigned)atoi(argv[4]));
    if (argc >= 5 && !strcmp(argv[1], "truncate-mapped"))
        return truncate_mapped(argv[2], strtoull(argv[3], NULL, 0), (unsigned)atoi(argv[4]));
    if (argc >= 3 && !strcmp(argv[1], "is-dax"))
        return is_dax(argv[2]);
    fprintf(stderr, "usage: see the comment at the top of tests/guest/tools/probe.c\n");
    return 2;
}
