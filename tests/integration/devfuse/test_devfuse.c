/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Integration test of the /dev/fuse transport: a tiny read-only filesystem
 * (a root directory holding one file) is mounted on a temporary directory and
 * used through the host kernel with ordinary system calls; then it is stopped
 * three ways: fll_devfuse_stop(), SIGTERM to a process in devfuse_run(),
 * and an unmount from outside.
 *
 * Needs root and /dev/fuse; without them the test exits 77 (skipped).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fll.h"

/* ---- The filesystem: / (node 1) and /hello (node 2) ---------------------------- */

static const char hello_data[] = "hello from vufsd over /dev/fuse\n";
#define HELLO_ID 2
/* /big (node 3): BIG_SIZE bytes of a pattern computed from the offset. */
#define BIG_ID   3
#define BIG_SIZE (3u * 1024u * 1024u + 123u)

/* /scratch (node 4): a writable in-memory file of at most SCRATCH_MAX bytes. */
#define SCRATCH_ID  4
#define SCRATCH_MAX (4u * 1024u * 1024u)
static unsigned char scratch[SCRATCH_MAX];
static uint64_t scratch_size; /* under scratch_lock */
static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned char big_byte(uint64_t off)
{
    return (unsigned char)((off * 2654435761u) >> 13);
}

struct tinyfs {
    int lookups; /* hello lookups not yet forgotten; atomic */
    int reads;   /* atomic */
    bool inited;
    int destroyed;          /* atomic */
    struct fll_req *parked; /* a SETLKW kept with FLL_ASYNC; atomic */
};

static struct tinyfs *TFS(struct fll_req *r)
{
    return fll_req_userdata(r);
}

static void fill_attr(struct fuse_attr *a, uint64_t id)
{
    memset(a, 0, sizeof(*a));
    a->ino = id;
    a->nlink = id == FUSE_ROOT_ID ? 2 : 1;
    a->mode = id == FUSE_ROOT_ID ? (S_IFDIR | 0755) : (S_IFREG | 0444);
    a->size = id == FUSE_ROOT_ID ? 0 : id == BIG_ID ? BIG_SIZE : sizeof(hello_data) - 1;
    if (id == SCRATCH_ID) {
        a->mode = S_IFREG | 0644;
        pthread_mutex_lock(&scratch_lock);
        a->size = scratch_size;
        pthread_mutex_unlock(&scratch_lock);
    }
    a->blksize = 4096;
}

static int t_init(void *fs, struct fll_conn *conn)
{
    ((struct tinyfs *)fs)->inited = true;
    conn->want = conn->capable & (FUSE_ASYNC_READ | FUSE_POSIX_LOCKS | FUSE_BIG_WRITES);
    conn->max_pages = 256; /* fll adds FUSE_MAX_PAGES when the kernel offers it */
    return 0;
}

/* The connection ends: answer the request we kept, as a real fs must. */
static void t_destroy(void *fsp)
{
    struct tinyfs *fs = fsp;
    struct fll_req *r = __atomic_exchange_n(&fs->parked, NULL, __ATOMIC_ACQ_REL);
    if (r)
        fll_reply_err(r, -ENOLCK);
    __atomic_fetch_add(&fs->destroyed, 1, __ATOMIC_RELEASE);
}

/* Non-blocking locks always succeed; a blocking one waits forever (parked). */
static int t_setlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in, bool sleep)
{
    if (!sleep)
        return 0;
    __atomic_store_n(&TFS(r)->parked, r, __ATOMIC_RELEASE);
    return FLL_ASYNC;
}

static int t_lookup(struct fll_req *r, uint64_t parent, const char *name,
                    struct fuse_entry_out *out)
{
    if (parent == FUSE_ROOT_ID && strcmp(name, "big") == 0) {
        out->nodeid = BIG_ID;
        fill_attr(&out->attr, BIG_ID);
        return 0;
    }
    if (parent == FUSE_ROOT_ID && strcmp(name, "scratch") == 0) {
        out->nodeid = SCRATCH_ID;
        fill_attr(&out->attr, SCRATCH_ID);
        return 0;
    }
    if (parent != FUSE_ROOT_ID || strcmp(name, "hello") != 0)
        return -ENOENT;
    __atomic_fetch_add(&TFS(r)->lookups, 1, __ATOMIC_RELAXED);
    out->nodeid = HELLO_ID;
    out->entry_valid = 1;
    out->attr_valid = 1;
    fill_attr(&out->attr, HELLO_ID);
    return 0;
}

static void t_forget(struct fll_req *r, uint64_t nodeid, uint64_t nlookup)
{
    if (nodeid == HELLO_ID)
        __atomic_fetch_sub(&TFS(r)->lookups, (int)nlookup, __ATOMIC_RELAXED);
}

static int t_getattr(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                     struct fuse_attr_out *out)
{
    if (nodeid != FUSE_ROOT_ID && nodeid != HELLO_ID && nodeid != BIG_ID && nodeid != SCRATCH_ID)
        return -ENOENT;
    out->attr_valid = 1;
    fill_attr(&out->attr, nodeid);
    return 0;
}

static int t_open(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                  struct fuse_open_out *out)
{
    if (nodeid == SCRATCH_ID) {
        out->fh = 8;
        return 0;
    }
    if (nodeid != HELLO_ID && nodeid != BIG_ID)
        return -EISDIR;
    if ((in->flags & O_ACCMODE) != O_RDONLY)
        return -EROFS;
    out->fh = 7;
    return 0;
}

static ssize_t t_read(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                      const struct iovec *dst, unsigned dst_cnt)
{
    const size_t len = sizeof(hello_data) - 1;
    __atomic_fetch_add(&TFS(r)->reads, 1, __ATOMIC_RELAXED);
    if (nodeid == SCRATCH_ID) {
        pthread_mutex_lock(&scratch_lock);
        uint64_t off = in->offset < scratch_size ? in->offset : scratch_size;
        size_t done = 0;
        for (unsigned i = 0; i < dst_cnt && off < scratch_size; i++) {
            size_t n = dst[i].iov_len < scratch_size - off ? dst[i].iov_len : scratch_size - off;
            memcpy(dst[i].iov_base, scratch + off, n);
            off += n;
            done += n;
        }
        pthread_mutex_unlock(&scratch_lock);
        return (ssize_t)done;
    }
    if (nodeid == BIG_ID) {
        uint64_t off = in->offset, done = 0;
        for (unsigned i = 0; i < dst_cnt && off < BIG_SIZE; i++) {
            unsigned char *p = dst[i].iov_base;
            for (size_t k = 0; k < dst[i].iov_len && off < BIG_SIZE; k++, off++, done++)
                p[k] = big_byte(off);
        }
        return (ssize_t)done;
    }
    if (nodeid != HELLO_ID || in->fh != 7)
        return -EBADF;
    size_t off = in->offset < len ? (size_t)in->offset : len;
    size_t done = 0;
    for (unsigned i = 0; i < dst_cnt && off < len; i++) {
        size_t n = dst[i].iov_len < len - off ? dst[i].iov_len : len - off;
        memcpy(dst[i].iov_base, hello_data + off, n);
        off += n;
        done += n;
    }
    return (ssize_t)done;
}

static int t_max_write_seen; /* largest WRITE payload received; atomic */

/* WRITE: the data straight from the kernel's request buffer, as iovecs. */
static ssize_t t_write(struct fll_req *r, uint64_t nodeid, const struct fuse_write_in *in,
                       const struct iovec *src, unsigned src_cnt)
{
    if (nodeid != SCRATCH_ID || in->fh != 8)
        return -EBADF;
    if (in->offset > SCRATCH_MAX || in->size > SCRATCH_MAX - in->offset)
        return -EFBIG;
    pthread_mutex_lock(&scratch_lock);
    uint64_t off = in->offset;
    for (unsigned i = 0; i < src_cnt; i++) {
        memcpy(scratch + off, src[i].iov_base, src[i].iov_len);
        off += src[i].iov_len;
    }
    if (off > scratch_size)
        scratch_size = off;
    pthread_mutex_unlock(&scratch_lock);
    int seen = __atomic_load_n(&t_max_write_seen, __ATOMIC_RELAXED);
    while ((int)in->size > seen &&
           !__atomic_compare_exchange_n(&t_max_write_seen, &seen, (int)in->size, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return (ssize_t)in->size;
}

/* SETATTR: only truncation of /scratch (O_TRUNC, ftruncate). */
static int t_setattr(struct fll_req *r, uint64_t nodeid, const struct fuse_setattr_in *in,
                     struct fuse_attr_out *out)
{
    if (nodeid != SCRATCH_ID)
        return -EPERM;
    if (in->valid & FATTR_SIZE) {
        if (in->size > SCRATCH_MAX)
            return -EFBIG;
        pthread_mutex_lock(&scratch_lock);
        if (in->size > scratch_size)
            memset(scratch + scratch_size, 0, in->size - scratch_size);
        scratch_size = in->size;
        pthread_mutex_unlock(&scratch_lock);
    }
    fill_attr(&out->attr, nodeid);
    return 0;
}

static int t_release(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in)
{
    return 0;
}

static int t_opendir(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                     struct fuse_open_out *out)
{
    return nodeid == FUSE_ROOT_ID ? 0 : -ENOTDIR;
}

static int t_readdir(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                     struct fll_dirbuf *db)
{
    static const struct {
        const char *name;
        uint64_t ino;
        uint32_t type;
    } ents[] = {{".", 1, DT_DIR}, {"..", 1, DT_DIR}, {"hello", HELLO_ID, DT_REG}};
    for (uint64_t i = in->offset; i < 3; i++) {
        /* "." and ".." are fine in a listing; only client names are checked */
        if (!fll_dirbuf_add(db, ents[i].name, ents[i].ino, ents[i].type, i + 1, NULL))
            break;
    }
    return 0;
}

static int t_releasedir(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in)
{
    return 0;
}

static int t_statfs(struct fll_req *r, uint64_t nodeid, struct fuse_statfs_out *out)
{
    out->st.bsize = 4096;
    out->st.namelen = 255;
    out->st.blocks = 1;
    out->st.files = 2;
    return 0;
}

static const struct fll_ops tiny_ops = {
    .init = t_init,
    .destroy = t_destroy,
    .setlk = t_setlk,
    .lookup = t_lookup,
    .forget = t_forget,
    .getattr = t_getattr,
    .open = t_open,
    .write = t_write,
    .setattr = t_setattr,
    .read = t_read,
    .release = t_release,
    .opendir = t_opendir,
    .readdir = t_readdir,
    .releasedir = t_releasedir,
    .statfs = t_statfs,
};

/* ---- Helpers --------------------------------------------------------------------- */

static char mnt[64];

static bool is_mounted(const char *path)
{
    FILE *f = fopen("/proc/self/mounts", "r");
    char line[1024];
    bool found = false;
    if (f == NULL)
        return false;
    while (fgets(line, sizeof(line), f)) {
        char dev[256], dir[512], type[64];
        if (sscanf(line, "%255s %511s %63s", dev, dir, type) == 3 && strcmp(dir, path) == 0 &&
            strcmp(type, "fuse.vufsd") == 0)
            found = true;
    }
    fclose(f);
    return found;
}

/* Waits (bounded, generously) until the mount appears or disappears. */
static bool wait_mounted(const char *path, bool want)
{
    for (int i = 0; i < 3000; i++) {
        if (is_mounted(path) == want)
            return true;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Everything a user would do with the mount; all through the host kernel. */
static void use_the_mount(void)
{
    char path[128];
    struct stat st;

    assert_int_equal(stat(mnt, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_ino, FUSE_ROOT_ID);

    snprintf(path, sizeof(path), "%s/hello", mnt);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, sizeof(hello_data) - 1);
    assert_int_equal(st.st_ino, HELLO_ID);

    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    char buf[256];
    ssize_t n = read(fd, buf, sizeof(buf));
    assert_int_equal(n, sizeof(hello_data) - 1);
    assert_memory_equal(buf, hello_data, sizeof(hello_data) - 1);
    /* at an offset, via pread */
    n = pread(fd, buf, 4, 6);
    assert_int_equal(n, 4);
    assert_memory_equal(buf, hello_data + 6, 4);
    close(fd);

    /* read-only: writing is refused by the filesystem (or the permissions) */
    fd = open(path, O_WRONLY);
    assert_true(fd < 0);

    snprintf(path, sizeof(path), "%s/missing", mnt);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(errno, ENOENT);

    DIR *d = opendir(mnt);
    assert_non_null(d);
    bool seen = false;
    int count = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL; count++) {
        if (strcmp(de->d_name, "hello") == 0) {
            seen = true;
            assert_int_equal(de->d_ino, HELLO_ID);
        }
    }
    closedir(d);
    assert_true(seen);
    assert_int_equal(count, 3);

    /* A multi-megabyte file read in 1 MiB calls: many READs, each zero copy. */
    snprintf(path, sizeof(path), "%s/big", mnt);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    static unsigned char bigbuf[1u << 20];
    uint64_t total = 0;
    for (;;) {
        n = read(fd, bigbuf, sizeof(bigbuf));
        assert_true(n >= 0);
        if (n == 0)
            break;
        for (ssize_t k = 0; k < n; k++) {
            if (bigbuf[k] != big_byte(total + (uint64_t)k))
                fail_msg("big: wrong byte at %llu", (unsigned long long)(total + (uint64_t)k));
        }
        total += (uint64_t)n;
    }
    close(fd);
    assert_int_equal(total, BIG_SIZE);

    struct statfs sfs;
    assert_int_equal(statfs(mnt, &sfs), 0);
    assert_int_equal(sfs.f_namelen, 255);
}

/* Whether an unprivileged user (nobody) can stat path: 0 or an errno. */
static int stat_as_nobody(const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct stat st;
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(100);
        _exit(stat(path, &st) == 0 ? 0 : (errno & 0x7f));
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static int make_mnt(void **state)
{
    snprintf(mnt, sizeof(mnt), "/tmp/vufsd-devfuse-XXXXXX");
    assert_non_null(mkdtemp(mnt));
    return 0;
}

static int remove_mnt(void **state)
{
    if (is_mounted(mnt))
        umount2(mnt, MNT_DETACH);
    rmdir(mnt);
    return 0;
}

/* ---- Tests ------------------------------------------------------------------------ */

struct loop_arg {
    struct fll_devfuse *h;
    int ret;
};

static void *loop_thread(void *p)
{
    struct loop_arg *la = p;
    la->ret = fll_devfuse_loop(la->h);
    return NULL;
}

static void serve_and_stop(void **state)
{
    struct tinyfs fs = {0};
    struct fll_devfuse_config cfg = {
        .ops = &tiny_ops,
        .fs = &fs,
        .mountpoint = mnt,
        .fsname = "vufsd-test",
        .mount_opts = "default_permissions",
        .nthreads = 3,
    };
    struct loop_arg la = {0};
    assert_int_equal(fll_devfuse_new(&cfg, &la.h), 0);
    assert_true(is_mounted(mnt));

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, loop_thread, &la), 0);
    use_the_mount();
    use_the_mount();
    assert_true(fs.inited);
    /* mounted without allow_other: the kernel lets no other user in */
    char path[128];
    snprintf(path, sizeof(path), "%s/hello", mnt);
    assert_int_equal(stat_as_nobody(path), EACCES);
    assert_true(__atomic_load_n(&fs.reads, __ATOMIC_RELAXED) >= 2);

    fll_devfuse_stop(la.h);
    pthread_join(t, NULL);
    assert_int_equal(la.ret, 0);
    fll_devfuse_free(la.h);
    assert_false(is_mounted(mnt));
}

/*
 * The /dev/fuse transport in one call, as vufsd --mount drives it: mounts (with
 * allow_other as root), serves until SIGTERM, SIGINT or SIGHUP (the previous
 * handlers are restored after), unmounts. *handle_out is set while it serves.
 */

static struct fll_devfuse *df_signal_target; /* atomic; the running devfuse_run */

static void df_on_signal(int sig)
{
    (void)sig;
    fll_devfuse_stop(__atomic_load_n(&df_signal_target, __ATOMIC_ACQUIRE));
}

static int devfuse_run(const struct fll_ops *ops, void *fs, const char *mountpoint, const char *fsname,
                    unsigned nthreads, struct fll_devfuse **handle_out)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction old[3];
    struct fll_devfuse_config cfg = {
        .ops = ops,
        .fs = fs,
        .mountpoint = mountpoint,
        .fsname = fsname,
        /*
         * Every host user may use the mount when root serves it (as every guest
         * user may use a virtio-fs share); the filesystem checks each request
         * as its caller. Without it the kernel refuses everyone but root.
         */
        .mount_opts = geteuid() == 0 ? "allow_other" : NULL,
        .nthreads = nthreads,
    };
    struct fll_devfuse *h;

    int ret = fll_devfuse_new(&cfg, &h);
    if (ret < 0)
        return ret;
    if (handle_out)
        *handle_out = h;

    __atomic_store_n(&df_signal_target, h, __ATOMIC_RELEASE);
    struct sigaction sa = {.sa_handler = df_on_signal};
    sigemptyset(&sa.sa_mask);
    for (unsigned i = 0; i < 3; i++)
        sigaction(sigs[i], &sa, &old[i]);

    ret = fll_devfuse_loop(h);

    for (unsigned i = 0; i < 3; i++)
        sigaction(sigs[i], &old[i], NULL);
    __atomic_store_n(&df_signal_target, NULL, __ATOMIC_RELEASE);
    if (handle_out)
        *handle_out = NULL;
    fll_devfuse_free(h);
    return ret;
}

static void sigterm_unmounts(void **state)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static struct tinyfs fs;
        int ret = devfuse_run(&tiny_ops, &fs, mnt, "vufsd-test", 2, NULL);
        _exit(ret == 0 ? 0 : 10);
    }
    assert_true(wait_mounted(mnt, true));
    use_the_mount();
    /* devfuse_run mounts with allow_other as root: other users get in */
    char path[128];
    snprintf(path, sizeof(path), "%s/hello", mnt);
    assert_int_equal(stat_as_nobody(path), 0);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_false(is_mounted(mnt));
}

static void external_unmount_ends_loop(void **state)
{
    struct tinyfs fs = {0};
    struct fll_devfuse_config cfg = {
        .ops = &tiny_ops,
        .fs = &fs,
        .mountpoint = mnt,
        .nthreads = 2,
    };
    struct loop_arg la = {0};
    assert_int_equal(fll_devfuse_new(&cfg, &la.h), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, loop_thread, &la), 0);
    use_the_mount();
    assert_int_equal(umount2(mnt, 0), 0);
    pthread_join(t, NULL); /* returns because the connection went away */
    assert_int_equal(la.ret, 0);
    fll_devfuse_free(la.h);
    assert_false(is_mounted(mnt));
}

struct locker {
    int fd;
    int ret;
    int err;
};

static void *locker_thread(void *p)
{
    struct locker *lk = p;
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    lk->ret = fcntl(lk->fd, F_SETLKW, &fl);
    lk->err = errno;
    return NULL;
}

/*
 * A SETLKW the filesystem keeps (FLL_ASYNC) must not hold up the worker: with
 * one thread, the mount keeps answering while the lock waits. Stopping tells
 * the filesystem (destroy), which answers the kept request before unmount.
 */
static void async_setlkw(void **state)
{
    struct tinyfs fs = {0};
    struct fll_devfuse_config cfg = {
        .ops = &tiny_ops,
        .fs = &fs,
        .mountpoint = mnt,
        .nthreads = 1,
    };
    struct loop_arg la = {0};
    assert_int_equal(fll_devfuse_new(&cfg, &la.h), 0);
    pthread_t t, lt;
    assert_int_equal(pthread_create(&t, NULL, loop_thread, &la), 0);

    char path[128];
    snprintf(path, sizeof(path), "%s/hello", mnt);
    struct locker lk = {.fd = open(path, O_RDONLY)};
    assert_true(lk.fd >= 0);
    assert_int_equal(pthread_create(&lt, NULL, locker_thread, &lk), 0);
    bool parked = false;
    for (int i = 0; i < 3000 && !parked; i++) {
        parked = __atomic_load_n(&fs.parked, __ATOMIC_ACQUIRE) != NULL;
        if (!parked) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    assert_true(parked);
    use_the_mount(); /* the only worker is free again */

    fll_devfuse_stop(la.h);
    pthread_join(t, NULL);
    assert_int_equal(la.ret, 0);
    fll_devfuse_free(la.h);
    pthread_join(lt, NULL);
    assert_int_equal(lk.ret, -1);
    assert_int_equal(lk.err, ENOLCK);
    close(lk.fd);
    assert_int_equal(__atomic_load_n(&fs.destroyed, __ATOMIC_ACQUIRE), 1);
    assert_false(is_mounted(mnt));
}

/*
 * WRITE through the kernel: a 3 MiB file written in 1 MiB calls arrives as
 * WRITEs of up to max_pages (the fs asked for 256) pages, each handed to the
 * filesystem straight from the request buffer; read back and compared.
 */
static void write_through_kernel(void **state)
{
    struct tinyfs fs = {0};
    struct fll_devfuse_config cfg = {
        .ops = &tiny_ops,
        .fs = &fs,
        .mountpoint = mnt,
        .nthreads = 2,
    };
    struct loop_arg la = {0};
    assert_int_equal(fll_devfuse_new(&cfg, &la.h), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, loop_thread, &la), 0);

    static unsigned char data[3u << 20], back[3u << 20];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 7 + (i >> 12));
    char path[128];
    snprintf(path, sizeof(path), "%s/scratch", mnt);
    int fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    for (size_t off = 0; off < sizeof(data); off += 1u << 20)
        assert_int_equal(write(fd, data + off, 1u << 20), 1u << 20);
    assert_int_equal(close(fd), 0);

    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, sizeof(data));
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    size_t got = 0;
    for (ssize_t n; (n = read(fd, back + got, sizeof(back) - got)) > 0;)
        got += (size_t)n;
    close(fd);
    assert_int_equal(got, sizeof(data));
    assert_memory_equal(back, data, sizeof(data));
    /* bigger than one page: the WRITE data really came in large pieces */
    int maxw = __atomic_load_n(&t_max_write_seen, __ATOMIC_RELAXED);
    print_message("largest WRITE received: %d bytes\n", maxw);
    assert_true(maxw > 4096);

    fll_devfuse_stop(la.h);
    pthread_join(t, NULL);
    fll_devfuse_free(la.h);
    assert_false(is_mounted(mnt));
}

static void bad_config(void **state)
{
    struct fll_devfuse *h = (void *)1;
    struct fll_devfuse_config cfg = {.ops = &tiny_ops, .mountpoint = NULL};
    assert_int_equal(fll_devfuse_new(&cfg, &h), -EINVAL);
    assert_null(h);
    cfg.mountpoint = mnt;
    cfg.max_write = 100;
    assert_int_equal(fll_devfuse_new(&cfg, &h), -EINVAL);
    cfg.max_write = 0;
    cfg.mountpoint = "/nonexistent/vufsd/mountpoint";
    assert_true(fll_devfuse_new(&cfg, &h) < 0);
    assert_null(h);
}

int main(void)
{
    if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
        fprintf(stderr, "skipped: needs root and /dev/fuse\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(serve_and_stop, make_mnt, remove_mnt),
        cmocka_unit_test_setup_teardown(sigterm_unmounts, make_mnt, remove_mnt),
        cmocka_unit_test_setup_teardown(external_unmount_ends_loop, make_mnt, remove_mnt),
        cmocka_unit_test_setup_teardown(async_setlkw, make_mnt, remove_mnt),
        cmocka_unit_test_setup_teardown(write_through_kernel, make_mnt, remove_mnt),
        cmocka_unit_test_setup_teardown(bad_config, make_mnt, remove_mnt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
