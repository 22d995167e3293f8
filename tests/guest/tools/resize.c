/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs-resize: one file resized while it is read and written every way a
 * program can, every byte checked against a model kept in memory. What a local
 * file system answers is the reference: a write inside the file never fails,
 * a mapped access below EOF never raises SIGBUS, a read returns exactly the
 * bytes the model holds.
 *
 *   vufs-resize [options] FILE
 *     --ops N          operations (default 20000)
 *     --seed N         the random sequence (default 1)
 *     --max-size N     largest size the file gets, bytes (default 12 MiB)
 *     --verify-every N a whole-file check every N operations (default 500)
 *     --reopen-every N close everything and open FILE again every N
 *                      operations (default 200): the guest then looks the file
 *                      up afresh, which is when a per-file DAX flag it
 *                      carries takes effect
 *     --corrupt-at N   negative control: after operation N write one byte
 *                      behind the model's back; the run must then fail
 *     --no-direct      O_DIRECT reads and writes become buffered ones (for a
 *                      file system without O_DIRECT, such as tmpfs before
 *                      Linux 6.6)
 *
 *   vufs-resize --map-read FILE [READY UNTIL]
 *     A reader of a file someone else changes: maps FILE at the size fstat
 *     gives and reads every page. Exit status 0 when it read them all, 3 on a
 *     SIGBUS (printed with the size fstat gives after it: a local file system
 *     raises it past EOF when the file shrank under the mapping), 1 on an error.
 *     With READY and UNTIL: then creates READY, waits for UNTIL to exist and
 *     reads every page of the same mapping again.
 *
 * Operations, each picked at random: ftruncate up and down (to sizes that are
 * page multiples, 2 MiB multiples or anything), fallocate (extending and
 * KEEP_SIZE), punch hole, copy_file_range from a second file, buffered pwrite,
 * O_DIRECT pwrite and pread (4 KiB aligned), buffered pread, reads and stores
 * through a MAP_SHARED mapping (msync now and then), fstat. Sizes are chosen so
 * that the file passes through multiples of 2 MiB often.
 *
 * Prints one line per 1000 operations, and at the end
 *   vufs-resize: N operations, 0 errors, final size S
 * Exit status 0 when every check passed; 1 at the first mismatch, failed call
 * or SIGBUS below EOF, after printing the operation, the offsets and the last
 * operations before it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

#define PAGE 4096ULL
#define RANGE (2ULL << 20)
#define SRC_SIZE (4ULL << 20)
#define MAX_IO (256ULL << 10)
#define HISTORY 64

static uint8_t *model;      /* the file's bytes as a local file system keeps them */
static uint64_t msize;      /* the file's size in the model */
static uint64_t max_size = 12ULL << 20;
static uint8_t *srcdata;    /* the copy_file_range source's bytes */
static uint8_t *iobuf;      /* MAX_IO, page aligned (O_DIRECT) */
static const char *path;
static char srcpath[4096];
static int fd = -1, dfd = -1, sfd = -1;
static int no_direct;
static uint64_t rng_state;
static unsigned long op_no;
static char history[HISTORY][160];

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    va_list ap;
    char *h = history[op_no % HISTORY];
    int n = snprintf(h, sizeof(history[0]), "op %lu (size %llu): ", op_no,
                     (unsigned long long)msize);
    va_start(ap, fmt);
    vsnprintf(h + n, sizeof(history[0]) - (size_t)n, fmt, ap);
    va_end(ap);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    printf("vufs-resize: FAIL at operation %lu of %s: ", op_no, path);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\nvufs-resize: the last operations:\n");
    for (unsigned long k = op_no >= HISTORY ? op_no - HISTORY + 1 : 0; k <= op_no; k++)
        if (history[k % HISTORY][0])
            printf("  %s\n", history[k % HISTORY]);
    fflush(stdout);
    exit(1);
}

/* SIGBUS: a mapped access the file could not back. siglongjmp back to the
 * access with the faulting address; the caller decides whether the address
 * was below EOF (an error: a local file system backs it) or not. */
static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;
static void *volatile bus_addr;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (!bus_armed) {
        static const char msg[] = "vufs-resize: SIGBUS outside a checked access\n";
        ssize_t w = write(1, msg, sizeof(msg) - 1);
        (void)w;
        _exit(1);
    }
    bus_addr = si->si_addr;
    siglongjmp(bus_jmp, 1);
}

static void fill_random(uint8_t *p, uint64_t len)
{
    uint64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = rnd();
        memcpy(p + i, &v, 8);
    }
    for (; i < len; i++)
        p[i] = (uint8_t)rnd();
}

static void set_size(uint64_t size)
{
    if (size > msize)
        memset(model + msize, 0, size - msize);
    msize = size;
}

static void compare(const uint8_t *got, uint64_t off, uint64_t len, const char *how)
{
    if (memcmp(got, model + off, len) == 0)
        return;
    for (uint64_t i = 0; i < len; i++)
        if (got[i] != model[off + i])
            fail("%s: byte at %llu is 0x%02x, the model says 0x%02x (read of %llu bytes at %llu)",
                 how, (unsigned long long)(off + i), got[i], model[off + i],
                 (unsigned long long)len, (unsigned long long)off);
}

/* The model after LEN bytes of DATA landed at OFF (a gap before them reads
 * as zeros, as a write past EOF leaves it). */
static void model_write(uint64_t off, const uint8_t *data, uint64_t len)
{
    if (off > msize)
        set_size(off);
    memcpy(model + off, data, len);
    if (off + len > msize)
        msize = off + len;
}

/* A write of LEN random bytes at OFF through WFD, HOW naming it. */
static void write_at(int wfd, const char *how, uint64_t off, uint64_t len)
{
    note("%s %llu+%llu", how, (unsigned long long)off, (unsigned long long)len);
    fill_random(iobuf, len);
    ssize_t n = pwrite(wfd, iobuf, len, (off_t)off);
    if (n != (ssize_t)len)
        fail("%s %llu+%llu: %s", how, (unsigned long long)off, (unsigned long long)len,
             n < 0 ? strerror(errno) : "short write");
    model_write(off, iobuf, len);
}

/* A read of LEN bytes at OFF through RFD: exactly what the model holds there,
 * short at EOF. */
static void read_at(int rfd, const char *how, uint64_t off, uint64_t len)
{
    uint64_t want = off < msize ? (msize - off < len ? msize - off : len) : 0;
    note("%s %llu+%llu", how, (unsigned long long)off, (unsigned long long)len);
    ssize_t n = pread(rfd, iobuf, len, (off_t)off);
    if (n < 0)
        fail("%s %llu+%llu: %s", how, (unsigned long long)off, (unsigned long long)len,
             strerror(errno));
    if ((uint64_t)n != want)
        fail("%s %llu+%llu returned %zd bytes, the file has %llu there", how,
             (unsigned long long)off, (unsigned long long)len, n, (unsigned long long)want);
    compare(iobuf, off, want, how);
}

/* A new size: a page multiple, a 2 MiB multiple (the size DAX admits today)
 * or any byte count, up to max_size. */
static uint64_t pick_size(void)
{
    switch (below(4)) {
    case 0: return below(max_size / RANGE + 1) * RANGE;
    case 1: return below(max_size / PAGE + 1) * PAGE;
    case 2: return below(max_size + 1);
    default: /* near a range boundary */
        {
            uint64_t r = (below(max_size / RANGE) + 1) * RANGE;
            uint64_t d = below(3 * PAGE);
            return below(2) ? r - d : (r + d <= max_size ? r + d : r);
        }
    }
}

/* An I/O: offset in [0, limit), length in [1, MAX_IO], unaligned. */
static void pick_io(uint64_t limit, uint64_t *off, uint64_t *len)
{
    *off = below(limit);
    *len = 1 + below(MAX_IO);
    if (below(4) == 0)
        *len = 1 + below(64);
}

static void check_size(const char *when)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        fail("fstat: %s", strerror(errno));
    if ((uint64_t)st.st_size != msize)
        fail("%s: fstat says %lld bytes, the model %llu", when, (long long)st.st_size,
             (unsigned long long)msize);
}

static void open_all(void)
{
    fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        fail("open %s: %s", path, strerror(errno));
    dfd = open(path, O_RDWR | (no_direct ? 0 : O_DIRECT));
    if (dfd < 0)
        fail("open %s O_DIRECT: %s", path, strerror(errno));
    sfd = open(srcpath, O_RDONLY);
    if (sfd < 0)
        fail("open %s: %s", srcpath, strerror(errno));
}

static void close_all(void)
{
    close(fd);
    close(dfd);
    close(sfd);
    fd = dfd = sfd = -1;
}

static void op_truncate(void)
{
    uint64_t size = pick_size();
    note("ftruncate to %llu", (unsigned long long)size);
    if (ftruncate(fd, (off_t)size) < 0)
        fail("ftruncate to %llu: %s", (unsigned long long)size, strerror(errno));
    set_size(size);
}

static void op_fallocate(void)
{
    uint64_t off, len;
    int keep = below(3) == 0;
    pick_io(max_size, &off, &len);
    if (off + len > max_size)
        len = max_size - off;
    if (!len)
        return;
    note("fallocate%s %llu+%llu", keep ? " KEEP_SIZE" : "", (unsigned long long)off,
         (unsigned long long)len);
    if (fallocate(fd, keep ? FALLOC_FL_KEEP_SIZE : 0, (off_t)off, (off_t)len) < 0)
        fail("fallocate%s %llu+%llu: %s", keep ? " KEEP_SIZE" : "", (unsigned long long)off,
             (unsigned long long)len, strerror(errno));
    if (!keep && off + len > msize)
        set_size(off + len);
}

static void op_punch(void)
{
    uint64_t off, len;
    if (!msize)
        return;
    pick_io(msize, &off, &len);
    note("punch hole %llu+%llu", (unsigned long long)off, (unsigned long long)len);
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
        fail("punch hole %llu+%llu: %s", (unsigned long long)off, (unsigned long long)len,
             strerror(errno));
    uint64_t end = off + len < msize ? off + len : msize;
    memset(model + off, 0, end - off);
}

static void op_copy_range(void)
{
    uint64_t in = below(SRC_SIZE), out, len;
    pick_io(msize + 1 < max_size ? msize + 1 : max_size, &out, &len);
    if (len > SRC_SIZE - in)
        len = SRC_SIZE - in;
    if (out + len > max_size)
        len = max_size - out;
    if (!len)
        return;
    note("copy_file_range %llu bytes from %llu to %llu", (unsigned long long)len,
         (unsigned long long)in, (unsigned long long)out);
    loff_t oin = (loff_t)in, oout = (loff_t)out;
    uint64_t done = 0;
    while (done < len) {
        ssize_t n = copy_file_range(sfd, &oin, fd, &oout, len - done, 0);
        if (n < 0)
            fail("copy_file_range %llu bytes to %llu: %s", (unsigned long long)len,
                 (unsigned long long)out, strerror(errno));
        if (n == 0)
            fail("copy_file_range copied 0 bytes at %llu", (unsigned long long)(out + done));
        done += (uint64_t)n;
    }
    model_write(out, srcdata + in, len);
}

static void op_pwrite(void)
{
    uint64_t off, len;
    pick_io(msize + 1 < max_size ? msize + 1 : max_size, &off, &len);
    if (off + len > max_size)
        len = max_size - off;
    if (len)
        write_at(fd, "pwrite", off, len);
}

static void op_dio_write(void)
{
    uint64_t lim = msize / PAGE + 1, off, len;
    if (lim * PAGE >= max_size)
        lim = max_size / PAGE - 1;
    off = below(lim + 1) * PAGE;
    len = (1 + below(MAX_IO / PAGE)) * PAGE;
    if (off + len > max_size)
        len = (max_size - off) / PAGE * PAGE;
    if (len)
        write_at(dfd, "O_DIRECT pwrite", off, len);
}

static void op_dio_read(void)
{
    uint64_t off = below(msize / PAGE + 1) * PAGE;
    read_at(dfd, "O_DIRECT pread", off, (1 + below(MAX_IO / PAGE)) * PAGE);
}

static void op_pread(void)
{
    uint64_t off, len;
    pick_io(msize + 1, &off, &len);
    read_at(fd, "pread", off, len);
}

/* A mapped read or store of [off, off + len) inside the file; msync sometimes. */
static void op_mapped(int store)
{
    uint64_t off, len;
    if (!msize)
        return;
    pick_io(msize, &off, &len);
    if (off + len > msize)
        len = msize - off;
    uint64_t moff = off / PAGE * PAGE;
    uint64_t mlen = off + len - moff;
    int sync = store && below(4) == 0;
    note("mmap %s %llu+%llu%s", store ? "store" : "read", (unsigned long long)off,
         (unsigned long long)len, sync ? " msync" : "");
    uint8_t *p = mmap(NULL, mlen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)moff);
    if (p == MAP_FAILED)
        fail("mmap %llu+%llu: %s", (unsigned long long)moff, (unsigned long long)mlen,
             strerror(errno));
    uint8_t *q = p + (off - moff);
    if (store)
        fill_random(iobuf, len);
    bus_armed = 1;
    if (sigsetjmp(bus_jmp, 1)) {
        bus_armed = 0;
        uint64_t at = (uint64_t)((uint8_t *)bus_addr - p) + moff;
        fail("SIGBUS on a mapped %s at file offset %llu, below EOF (%llu): a local file "
             "system backs every page inside the file",
             store ? "store" : "read", (unsigned long long)at, (unsigned long long)msize);
    }
    if (store)
        memcpy(q, iobuf, len);
    else
        memcpy(iobuf, q, len);
    bus_armed = 0;
    if (sync && msync(p, mlen, MS_SYNC) < 0)
        fail("msync %llu+%llu: %s", (unsigned long long)moff, (unsigned long long)mlen,
             strerror(errno));
    munmap(p, mlen);
    if (store)
        memcpy(model + off, iobuf, len);
    else
        compare(iobuf, off, len, "mapped read");
}

/* The whole file, through read() and through a mapping. */
static void verify_all(const char *when)
{
    check_size(when);
    note("whole-file check (%s)", when);
    for (uint64_t off = 0; off < msize; off += MAX_IO) {
        uint64_t len = msize - off < MAX_IO ? msize - off : MAX_IO;
        ssize_t n = pread(fd, iobuf, len, (off_t)off);
        if (n != (ssize_t)len)
            fail("%s: pread %llu+%llu: %s", when, (unsigned long long)off,
                 (unsigned long long)len, n < 0 ? strerror(errno) : "short read");
        compare(iobuf, off, len, when);
    }
    if (!msize)
        return;
    uint8_t *p = mmap(NULL, msize, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        fail("%s: mmap of %llu bytes: %s", when, (unsigned long long)msize, strerror(errno));
    bus_armed = 1;
    if (sigsetjmp(bus_jmp, 1)) {
        bus_armed = 0;
        fail("%s: SIGBUS on a mapped read at file offset %llu, below EOF (%llu)", when,
             (unsigned long long)((uint8_t *)bus_addr - p), (unsigned long long)msize);
    }
    for (uint64_t off = 0; off < msize; off += MAX_IO) {
        uint64_t len = msize - off < MAX_IO ? msize - off : MAX_IO;
        memcpy(iobuf, p + off, len);
        compare(iobuf, off, len, "whole-file mapped read");
    }
    bus_armed = 0;
    munmap(p, msize);
}

static int is_dax(void)
{
    struct statx sx;
    if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &sx) < 0)
        return -1;
    return !!(sx.stx_attributes & 0x00200000 /* STATX_ATTR_DAX */);
}

/* Reads every page of the mapping P of FILE, mapped at SIZE bytes: 0 when all
 * were read, 3 on a SIGBUS (printed with the size fstat gives after it). */
static int map_pass(const char *file, int f, volatile uint8_t *p, off_t size, const char *when)
{
    volatile unsigned sum = 0;
    bus_armed = 1;
    if (sigsetjmp(bus_jmp, 1)) {
        bus_armed = 0;
        struct stat now;
        fstat(f, &now);
        printf("vufs-resize: %s: SIGBUS at offset %llu %s, mapped at size %lld, size now %lld\n",
               file, (unsigned long long)((uint8_t *)bus_addr - (uint8_t *)p), when,
               (long long)size, (long long)now.st_size);
        return 3;
    }
    for (off_t o = 0; o < size; o += (off_t)PAGE)
        sum += p[o];
    bus_armed = 0;
    printf("vufs-resize: %s: read %lld bytes mapped %s (%u)\n", file, (long long)size, when, sum);
    return 0;
}

/* READY and UNTIL (optional): after the first pass create READY, wait for
 * UNTIL to exist, and read the same mapping again - a mapping made before
 * somebody else changed the file, which the guest's kernel still backs by the
 * window. */
static int map_read(const char *file, const char *ready, const char *until)
{
    struct stat st;
    int f = open(file, O_RDONLY);
    if (f < 0 || fstat(f, &st) < 0) {
        printf("vufs-resize: %s: %s\n", file, strerror(errno));
        return 1;
    }
    if (st.st_size == 0)
        return 0;
    volatile uint8_t *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, f, 0);
    if (p == MAP_FAILED) {
        printf("vufs-resize: mmap %s: %s\n", file, strerror(errno));
        return 1;
    }
    int rc = map_pass(file, f, p, st.st_size, "");
    if (rc || !ready)
        return rc;
    int r = open(ready, O_WRONLY | O_CREAT, 0644);
    if (r < 0) {
        printf("vufs-resize: %s: %s\n", ready, strerror(errno));
        return 1;
    }
    close(r);
    for (int i = 0; access(until, F_OK) != 0; i++) {
        if (i == 600) {
            printf("vufs-resize: %s never appeared\n", until);
            return 1;
        }
        usleep(100000);
    }
    return map_pass(file, f, p, st.st_size, "after the change");
}

static unsigned long num(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || end == s) {
        fprintf(stderr, "vufs-resize: %s needs a number, not '%s'\n", opt, s);
        exit(2);
    }
    return (unsigned long)v;
}

int main(int argc, char **argv)
{
    unsigned long ops = 20000, seed = 1, verify_every = 500, reopen_every = 200;
    unsigned long corrupt_at = 0;
    int i;

    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    if ((argc == 3 || argc == 5) && !strcmp(argv[1], "--map-read"))
        return map_read(argv[2], argc == 5 ? argv[3] : NULL, argc == 5 ? argv[4] : NULL);
    for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "--no-direct")) {
            no_direct = 1;
            i--;
        } else if (!strcmp(argv[i], "--ops"))
            ops = num(argv[i], argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = num(argv[i], argv[i + 1]);
        else if (!strcmp(argv[i], "--max-size"))
            max_size = num(argv[i], argv[i + 1]);
        else if (!strcmp(argv[i], "--verify-every"))
            verify_every = num(argv[i], argv[i + 1]);
        else if (!strcmp(argv[i], "--reopen-every"))
            reopen_every = num(argv[i], argv[i + 1]);
        else if (!strcmp(argv[i], "--corrupt-at"))
            corrupt_at = num(argv[i], argv[i + 1]);
        else
            break;
    }
    if (i + 1 != argc || max_size < 2 * RANGE || max_size % PAGE) {
        fprintf(stderr, "usage: vufs-resize [--ops N] [--seed N] [--max-size N (a page "
                        "multiple >= 4 MiB)] [--verify-every N] [--reopen-every N] "
                        "[--corrupt-at N] [--no-direct] FILE\n");
        return 2;
    }
    path = argv[i];
    rng_state = 0x9E3779B97F4A7C15ULL ^ (seed * 0xD1B54A32D192ED03ULL);
    if (!rng_state)
        rng_state = 1;

    model = malloc(max_size);
    srcdata = malloc(SRC_SIZE);
    if (!model || !srcdata || posix_memalign((void **)&iobuf, PAGE, MAX_IO)) {
        fprintf(stderr, "vufs-resize: out of memory\n");
        return 1;
    }

    /* The copy source: written once, checked by the copies that land in FILE. */
    snprintf(srcpath, sizeof(srcpath), "%s.src", path);
    fill_random(srcdata, SRC_SIZE);
    int s = open(srcpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (s < 0 || write(s, srcdata, SRC_SIZE) != (ssize_t)SRC_SIZE || fsync(s) < 0)
        fail("writing %s: %s", srcpath, strerror(errno));
    close(s);
    unlink(path);
    open_all();
    msize = 0;
    printf("vufs-resize: %s, %lu operations, seed %lu, sizes up to %llu\n", path, ops, seed,
           (unsigned long long)max_size);

    unsigned long dax_ops = 0;
    for (op_no = 1; op_no <= ops; op_no++) {
        history[op_no % HISTORY][0] = '\0';
        unsigned r = (unsigned)below(100);
        if (r < 10)
            op_truncate();
        else if (r < 15)
            op_fallocate();
        else if (r < 20)
            op_punch();
        else if (r < 26)
            op_copy_range();
        else if (r < 38)
            op_pwrite();
        else if (r < 48)
            op_dio_write();
        else if (r < 58)
            op_dio_read();
        else if (r < 70)
            op_pread();
        else if (r < 83)
            op_mapped(0);
        else if (r < 96)
            op_mapped(1);
        else
            check_size("fstat");
        if (corrupt_at && op_no == corrupt_at && msize) {
            /* Behind the model's back: the next check of this byte must fail. */
            uint64_t at = below(msize);
            uint8_t b = (uint8_t)(model[at] ^ 0x5a);
            if (pwrite(fd, &b, 1, (off_t)at) != 1)
                fail("corrupting byte %llu: %s", (unsigned long long)at, strerror(errno));
            printf("vufs-resize: negative control: byte %llu changed behind the model\n",
                   (unsigned long long)at);
            verify_all("check after the planted change");
            fail("the planted change was not caught");
        }
        if (verify_every && op_no % verify_every == 0)
            verify_all("periodic whole-file check");
        if (reopen_every && op_no % reopen_every == 0) {
            note("close and open again");
            close_all();
            struct stat st;
            if (stat(path, &st) < 0)
                fail("stat: %s", strerror(errno));
            open_all();
            check_size("after reopening");
        }
        if (is_dax() == 1)
            dax_ops++;
        if (op_no % 1000 == 0)
            printf("vufs-resize: %lu operations, size %llu, %lu with the file on DAX\n", op_no,
                   (unsigned long long)msize, dax_ops);
    }
    op_no = ops;
    verify_all("final check");
    if (fsync(fd) < 0)
        fail("fsync: %s", strerror(errno));
    close_all();
    unlink(srcpath);
    printf("vufs-resize: %lu operations, 0 errors, final size %llu, %lu with the file on DAX\n",
           ops, (unsigned long long)msize, dax_ops);
    return 0;
}
