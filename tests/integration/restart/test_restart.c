/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufsd restarted under a running "guest" (the in-tree frontend), end to end:
 *
 *   test_restart --vufsd "CMD" [--extra "OPTIONS"]
 *
 *   - SIGHUP while four request queues write and read back verified data,
 *     with a POSIX lock held, a SETLKW parked behind it, files and a
 *     directory open: the frontend never sees a disconnect, every byte reads
 *     back, the lock stays held (the host cannot take it at any moment), the
 *     parked SETLKW is granted when the holder unlocks after the restart,
 *     node ids and handles answer as before, and the serving process holds
 *     as many fds after as before;
 *   - an upgrade: the binary at the daemon's path is replaced; SIGHUP runs
 *     the new file (same keeper pid);
 *   - a restart that cannot happen (the binary is gone) is refused and the
 *     daemon serves on;
 *   - DAX mappings survive: the frontend's window keeps them and the new
 *     daemon removes them exactly;
 *   - --save-state / --restore-state: the daemon stops on SIGTERM writing its
 *     state, a new daemon starts from it, the frontend reconnects as a VMM
 *     would (no INIT): node ids, open files and the lock go on.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "vfe.h"
#include "../it_util.h"

#define MiB (1ull << 20)
#define KiB (1ull << 10)
#define NQ 4u
/* The test's own requests (and the parked SETLKW) go on queue 2; the load runs
 * on the others, one thread each (vfe_fuse serves one caller per queue). */
#define MAINQ 2u
#define BLOCK (64 * KiB)
#define FILE_SIZE (4 * MiB)

static const char *opt_vufsd;
static const char *opt_extra = "";

struct env {
    char dir[64];
    char log[64];
    char cmd[2048];
    struct vfe_dax *dax;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
};

static const char *hpath(struct env *e, const char *name)
{
    return it_hpath(e->dir, name);
}

/* The whole file (a debug log grows large), NUL-terminated. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Waits until the log has needle; fails with the log otherwise. */
static void wait_log(struct env *e, const char *needle, int timeout_s)
{
    for (int i = 0; i < timeout_s * 20; i++) {
        char *t = slurp(e->log);
        bool found = strstr(t, needle) != NULL;
        free(t);
        if (found)
            return;
        usleep(50000);
    }
    char *t = slurp(e->log);
    size_t n = strlen(t);
    fprintf(stderr, "daemon log (last 4000 bytes):\n%s\n", t + (n > 4000 ? n - 4000 : 0));
    fail_msg("no '%s' in the daemon's log %s", needle, e->log);
}

static unsigned count_in_log(struct env *e, const char *needle)
{
    char *t = slurp(e->log), *p = t;
    unsigned n = 0;
    while ((p = strstr(p, needle))) {
        n++;
        p++;
    }
    free(t);
    return n;
}

/* The serving process: the keeper's one child. */
static pid_t serving_pid(pid_t keeper)
{
    char path[64], buf[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", keeper, keeper);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return (pid_t)atoi(buf);
}

/* "N -> target" per fd of pid, for a report. */
static void fd_list(pid_t pid, const char *label)
{
    char path[64], target[256], lpath[320];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    fprintf(stderr, "%s (pid %d):\n", label, pid);
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(lpath, sizeof(lpath), "%s/%s", path, de->d_name);
        ssize_t n = readlink(lpath, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        fprintf(stderr, "  %s -> %s\n", de->d_name, target);
    }
    closedir(d);
}

/* Whether fd of pid is an O_PATH fd (its fdinfo's flags). */
static bool fd_is_path(pid_t pid, const char *fd)
{
    char path[320], line[128];
    snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", pid, fd);
    FILE *f = fopen(path, "r");
    bool is_path = false;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "flags:", 6) == 0)
            is_path = strtoul(line + 6, NULL, 8) & O_PATH;
    if (f)
        fclose(f);
    return is_path;
}

/* fds of pid; with no_path, O_PATH ones are not counted (a cache of them). */
static int fd_count_of(pid_t pid, bool no_path)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.' && !(no_path && fd_is_path(pid, de->d_name));
    closedir(d);
    return n;
}

/* Whether someone on the host can take a write lock on [start, start+len) now. */
static bool host_can_lock(struct env *e, const char *name, off_t start, off_t len)
{
    int fd = open(hpath(e, name), O_RDWR);
    assert_true(fd >= 0);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    bool ok = fcntl(fd, F_OFD_SETLK, &fl) == 0;
    close(fd);
    return ok;
}

static struct env *prepare(const char *daemon_opts)
{
    struct env *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    strcpy(e->dir, "/tmp/vufsd-restart-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    chmod(e->dir, 0755);
    strcpy(e->log, "/tmp/vufsd-restart-log-XXXXXX");
    int lfd = mkstemp(e->log);
    assert_true(lfd >= 0);
    close(lfd);
    snprintf(e->cmd, sizeof(e->cmd), "%s --socket-path={socket} --shared-dir={dir} %s %s",
             opt_vufsd, opt_extra, daemon_opts ? daemon_opts : "");
    return e;
}

static void attach(struct env *e, const char *socket, bool dax)
{
    /* What QEMU 11.1's vhost-user-fs-pci negotiates (0x9a42b): the device
     * state transfer and dirty logging too, offered only without a window. */
    uint64_t pf = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_LOG_SHMFD) |
                  (1ull << VFE_VU_PF_REPLY_ACK) | (1ull << VFE_VU_PF_BACKEND_REQ) |
                  (1ull << VFE_VU_PF_BACKEND_SEND_FD) | (1ull << VFE_VU_PF_RESET_DEVICE) |
                  (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS) | (1ull << VFE_VU_PF_STATUS) |
                  (1ull << VFE_VU_PF_DEVICE_STATE);
    if (dax) {
        assert_int_equal(vfe_dax_new(16 * MiB, VFE_DAX_SHMEM, &e->dax), 0);
        pf |= 1ull << VFE_VU_PF_SHMEM;
    }
    struct vfe_dev_config cfg = {
        .conn = {.backend_cmd = socket ? NULL : e->cmd, .socket_path = socket, .dir = e->dir,
                 .backend_log = socket ? NULL : e->log, .timeout_ms = 30000},
        .request_queues = NQ,
        .queue_size = 128,
        .protocol_features = pf,
        .backend_req = dax ? vfe_dax_handle : NULL,
        .backend_req_opaque = e->dax,
    };
    assert_int_equal(vfe_dev_connect(&cfg, &e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct vfe_fuse_config fc = {.depth = 8, .timeout_ms = 30000,
                                 .init_flags = FUSE_POSIX_LOCKS | FUSE_MAP_ALIGNMENT |
                                               FUSE_HAS_INODE_DAX | FUSE_MAX_PAGES};
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    struct vfe_fuse_init_result init;
    assert_int_equal(vfe_fuse_init(e->fuse, &init), 0);
    vfe_fuse_set_queue(e->fuse, MAINQ);
}

static void finish(struct env *e)
{
    if (e->fuse)
        vfe_fuse_free(e->fuse);
    if (e->dev)
        vfe_dev_close(e->dev);
    if (e->dax)
        vfe_dax_free(e->dax);
    it_rm_tree(e->dir);
    unlink(e->log);
    free(e);
}

static uint64_t lookup(struct env *e, uint64_t parent, const char *name)
{
    struct fuse_entry_out out;
    assert_int_equal(vfe_fuse_lookup(e->fuse, parent, name, &out), 0);
    return out.nodeid;
}

static uint64_t open_file(struct env *e, uint64_t nodeid, uint32_t flags)
{
    struct fuse_open_out out;
    assert_int_equal(vfe_fuse_open(e->fuse, nodeid, flags, &out), 0);
    return out.fh;
}

/* A FUSE lock request on queue q (submitted; the caller reaps or waits). */
struct lk {
    struct fuse_lk_in in;
    struct vfe_fuse_op op;
};

static void lk_prep(struct lk *l, uint32_t opcode, uint64_t nodeid, uint64_t fh, uint64_t owner,
                    uint32_t type, uint64_t start, uint64_t end)
{
    memset(l, 0, sizeof(*l));
    l->in = (struct fuse_lk_in){.fh = fh, .owner = owner,
                                .lk = {.start = start, .end = end, .type = type, .pid = 99}};
    l->op = (struct vfe_fuse_op){.opcode = opcode, .nodeid = nodeid, .arg = &l->in,
                                 .arg_len = sizeof(l->in)};
}

static int setlk(struct env *e, uint64_t nodeid, uint64_t fh, uint64_t owner, uint32_t type,
                 uint64_t start, uint64_t end)
{
    struct lk l;
    lk_prep(&l, FUSE_SETLK, nodeid, fh, owner, type, start, end);
    return vfe_fuse_call(e->fuse, MAINQ, &l.op);
}

static int getattr(struct env *e, uint64_t nodeid)
{
    struct fuse_attr_out out;
    return vfe_fuse_getattr(e->fuse, nodeid, &out);
}

/* ---- The verified load: one thread per request queue -------------------------------- */

struct loader {
    struct env *e;
    unsigned q;
    uint64_t nodeid, fh;
    uint64_t gpa; /* BLOCK bytes of guest memory for this queue */
    volatile bool *stop;
    uint64_t ops, errors, mismatches;
    int first_error;
};

/* Block b of queue q, round r: every 8 bytes say who wrote them. */
static void fill(uint8_t *p, unsigned q, uint64_t b, uint64_t r)
{
    for (size_t i = 0; i < BLOCK; i += 8) {
        uint64_t v = ((uint64_t)q << 56) ^ (b << 32) ^ (r << 16) ^ i;
        memcpy(p + i, &v, 8);
    }
}

static int rw_call(struct env *e, unsigned q, uint32_t opcode, uint64_t nodeid, uint64_t fh,
                   uint64_t off, uint64_t gpa)
{
    struct vfe_sg sg = {.gpa = gpa, .len = BLOCK};
    union {
        struct fuse_read_in r;
        struct fuse_write_in w;
    } in;
    struct fuse_write_out wout = {0};
    struct vfe_fuse_op op = {.opcode = opcode, .nodeid = nodeid, .arg = &in};
    if (opcode == FUSE_WRITE) {
        in.w = (struct fuse_write_in){.fh = fh, .offset = off, .size = BLOCK};
        op.arg_len = sizeof(in.w);
        op.in_data = &sg;
        op.in_data_cnt = 1;
        op.out_arg = &wout;
        op.out_arg_len = sizeof(wout);
    } else {
        in.r = (struct fuse_read_in){.fh = fh, .offset = off, .size = BLOCK};
        op.arg_len = sizeof(in.r);
        op.out_data = &sg;
        op.out_data_cnt = 1;
    }
    int r = vfe_fuse_call(e->fuse, q, &op);
    if (r < 0)
        return r;
    if (opcode == FUSE_WRITE)
        return wout.size == BLOCK ? 0 : -EIO;
    return op.data_len == BLOCK ? 0 : -EIO;
}

static void *loader_run(void *arg)
{
    struct loader *l = arg;
    struct vfe_mem *mem = vfe_dev_mem(l->e->dev);
    uint8_t *want = malloc(BLOCK), *got = malloc(BLOCK);
    /* Each queue owns a quarter of the file: blocks q-1, q-1+NQ, ... */
    uint64_t nblocks = FILE_SIZE / BLOCK / NQ;
    for (uint64_t round = 1; !*l->stop; round++) {
        for (uint64_t k = 0; k < nblocks && !*l->stop; k++) {
            uint64_t b = k * NQ + (l->q - 1);
            fill(want, l->q, b, round);
            assert_int_equal(vfe_mem_write(mem, l->gpa, want, BLOCK), 0);
            int r = rw_call(l->e, l->q, FUSE_WRITE, l->nodeid, l->fh, b * BLOCK, l->gpa);
            if (r == 0) {
                vfe_mem_fill(mem, l->gpa, 0, BLOCK);
                r = rw_call(l->e, l->q, FUSE_READ, l->nodeid, l->fh, b * BLOCK, l->gpa);
            }
            l->ops += 2;
            if (r < 0) {
                if (!l->errors++)
                    l->first_error = r;
                continue;
            }
            assert_int_equal(vfe_mem_read(mem, l->gpa, got, BLOCK), 0);
            if (memcmp(want, got, BLOCK) != 0)
                l->mismatches++;
        }
    }
    free(want);
    free(got);
    return NULL;
}

/*
 * SIGHUP under load with a held lock, a parked SETLKW, open files and a
 * directory stream. The frontend's connection is never replaced.
 */
static void test_restart_under_load(void **state)
{
    struct env *e = prepare("--log-level debug");
    int hfd = open(hpath(e, "data"), O_RDWR | O_CREAT, 0644);
    assert_true(hfd >= 0 && ftruncate(hfd, FILE_SIZE) == 0);
    close(hfd);
    hfd = open(hpath(e, "locked"), O_RDWR | O_CREAT, 0644);
    assert_true(hfd >= 0 && write(hfd, "0123456789", 10) == 10);
    close(hfd);
    assert_int_equal(mkdir(hpath(e, "dir"), 0755), 0);
    attach(e, NULL, false);
    pid_t keeper = vfe_conn_backend_pid(vfe_dev_conn(e->dev));
    int conn_fd = vfe_conn_fd(vfe_dev_conn(e->dev));

    uint64_t data = lookup(e, FUSE_ROOT_ID, "data");
    uint64_t fdata = open_file(e, data, O_RDWR);
    uint64_t locked = lookup(e, FUSE_ROOT_ID, "locked");
    uint64_t fa = open_file(e, locked, O_RDWR);
    uint64_t fb = open_file(e, locked, O_RDWR);
    uint64_t dir = lookup(e, FUSE_ROOT_ID, "dir");
    struct fuse_open_out dout;
    assert_int_equal(vfe_fuse_opendir(e->fuse, dir, &dout), 0);

    /* Owner A holds [0, 99]; owner B waits for it (parked in the daemon). */
    assert_int_equal(setlk(e, locked, fa, 0xa, F_WRLCK, 0, 99), 0);
    assert_false(host_can_lock(e, "locked", 0, 100));
    struct lk waiter;
    lk_prep(&waiter, FUSE_SETLKW, locked, fb, 0xb, F_WRLCK, 0, 99);
    assert_int_equal(vfe_fuse_submit(e->fuse, MAINQ, &waiter.op), 0);
    vfe_fuse_kick(e->fuse, MAINQ);
    usleep(200000);
    assert_false(waiter.op.done);

    volatile bool stop = false;
    struct loader ld[NQ];
    pthread_t th[NQ];
    for (unsigned q = 1; q <= NQ; q++) {
        ld[q - 1] = (struct loader){.e = e, .q = q, .nodeid = data, .fh = fdata, .stop = &stop};
        assert_int_equal(vfe_mem_alloc(vfe_dev_mem(e->dev), BLOCK, 4096, &ld[q - 1].gpa), 0);
    }
    for (unsigned q = 1; q <= NQ; q++)
        if (q != MAINQ)
            assert_int_equal(pthread_create(&th[q - 1], NULL, loader_run, &ld[q - 1]), 0);
    usleep(500000);
    pid_t before = serving_pid(keeper);
    assert_true(before > 0);
    /* With file handles, O_PATH fds are only the root's and a cache, which
     * starts empty in the new process: those are not compared. */
    bool cache = strstr(opt_extra, "file-handles") != NULL;
    int fds_before = fd_count_of(before, cache);

    assert_int_equal(kill(keeper, SIGHUP), 0);
    /* The lock is held at every moment of the restart: probe until it is over. */
    for (int i = 0; i < 600 && count_in_log(e, "restart: serving the frontend on") == 0; i++) {
        assert_false(host_can_lock(e, "locked", 0, 100));
        usleep(10000);
    }
    wait_log(e, "restart: serving the frontend on", 60);
    assert_false(host_can_lock(e, "locked", 0, 100));
    /* The main queue is served by the new process too. */
    assert_int_equal(getattr(e, locked), 0);
    usleep(1000000); /* load on the new process */
    stop = true;
    uint64_t ops = 0;
    for (unsigned q = 0; q < NQ; q++) {
        if (q + 1 == MAINQ)
            continue;
        pthread_join(th[q], NULL);
        ops += ld[q].ops;
        if (ld[q].errors || ld[q].mismatches)
            fail_msg("queue %u: %llu errors (first %d), %llu mismatches", q + 1,
                     (unsigned long long)ld[q].errors, ld[q].first_error,
                     (unsigned long long)ld[q].mismatches);
    }
    assert_true(ops > 100);
    pid_t after = serving_pid(keeper);
    assert_true(after > 0 && after != before);
    assert_int_equal(vfe_conn_fd(vfe_dev_conn(e->dev)), conn_fd);
    assert_false(vfe_conn_backend_exited(vfe_dev_conn(e->dev), NULL));
    /* Nothing was lost or leaked on the way: the same fds in the new process. */
    int fds_after = fd_count_of(after, cache);
    if (fds_after != fds_before) {
        fd_list(before, "fds before the restart");
        fd_list(after, "fds after the restart");
        fail_msg("%d fds before the restart, %d after", fds_before, fds_after);
    }

    /* The parked SETLKW is still parked, and is granted when A unlocks. */
    assert_false(waiter.op.done);
    assert_int_equal(setlk(e, locked, fa, 0xa, F_UNLCK, 0, 99), 0);
    struct vfe_fuse_op *done[1];
    int n = 0;
    /* A wake-up may be for an earlier completion: reap until it comes. */
    for (int i = 0; i < 100 && n == 0; i++)
        n = vfe_fuse_reap(e->fuse, MAINQ, done, 1, 100);
    assert_int_equal(n, 1);
    assert_ptr_equal(done[0], &waiter.op);
    assert_int_equal(waiter.op.error, 0);
    assert_false(host_can_lock(e, "locked", 0, 100)); /* B holds it now */

    /* Node ids and handles as before; the directory reads on. */
    assert_int_equal(getattr(e, data), 0);
    assert_int_equal(getattr(e, dir), 0);
    char buf[10];
    assert_int_equal(vfe_fuse_read(e->fuse, locked, fa, 0, buf, 10), 10);
    assert_memory_equal(buf, "0123456789", 10);
    assert_int_equal(vfe_fuse_releasedir(e->fuse, dir, dout.fh), 0);
    assert_int_equal(count_in_log(e, "frontend disconnected"), 0);
    /* The owners' locks go with the file's last handle (no FLUSH was sent). */
    assert_int_equal(vfe_fuse_release(e->fuse, locked, fb, 0), 0);
    assert_false(host_can_lock(e, "locked", 0, 100));
    assert_int_equal(vfe_fuse_release(e->fuse, locked, fa, 0), 0);
    assert_true(host_can_lock(e, "locked", 0, 100));
    assert_int_equal(vfe_fuse_release(e->fuse, data, fdata, 0), 0);
    finish(e);
}

/* ---- Upgrade and refusal: the binary at the path is what runs ----------------------- */

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        assert_int_equal(write(out, buf, n), n);
    close(in);
    close(out);
}

/* Where the daemon's binary stands in the --vufsd command (after any env
 * prefix such as the sanitizer tree's "/usr/bin/env ASAN_OPTIONS=..."): the
 * word that names vufsd. */
static const char *vufsd_word(size_t *len)
{
    const char *bin = strstr(opt_vufsd, "vufsd");
    assert_non_null(bin);
    while (bin > opt_vufsd && bin[-1] != ' ')
        bin--;
    *len = strcspn(bin, " ");
    return bin;
}

/* The daemon command with its binary replaced by path exe (env prefix kept). */
static void cmd_with_exe(struct env *e, const char *exe, const char *opts)
{
    size_t len;
    const char *bin = vufsd_word(&len);
    snprintf(e->cmd, sizeof(e->cmd), "%.*s%s%s --socket-path={socket} --shared-dir={dir} %s %s",
             (int)(bin - opt_vufsd), opt_vufsd, exe, bin + len, opt_extra, opts);
}

static void test_upgrade_and_refusal(void **state)
{
    struct env *e = prepare(NULL);
    char exe[128], real[512];
    snprintf(exe, sizeof(exe), "%s-bin", e->dir);
    size_t len;
    const char *bin = vufsd_word(&len);
    snprintf(real, sizeof(real), "%.*s", (int)len, bin);
    copy_file(real, exe);
    cmd_with_exe(e, exe, "--log-level debug");
    int hfd = open(hpath(e, "f"), O_RDWR | O_CREAT, 0644);
    assert_true(hfd >= 0 && write(hfd, "upgrade", 7) == 7);
    close(hfd);
    attach(e, NULL, false);
    pid_t keeper = vfe_conn_backend_pid(vfe_dev_conn(e->dev));
    uint64_t f = lookup(e, FUSE_ROOT_ID, "f");
    uint64_t fh = open_file(e, f, O_RDONLY);

    /* The upgrade: a new file at the path (another inode); SIGHUP runs it. */
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.new", exe);
    copy_file(real, tmp);
    assert_int_equal(rename(tmp, exe), 0);
    struct stat want;
    assert_int_equal(stat(exe, &want), 0);
    assert_int_equal(kill(keeper, SIGHUP), 0);
    wait_log(e, "restart: serving the frontend on", 60);
    char link[64];
    struct stat now;
    snprintf(link, sizeof(link), "/proc/%d/exe", keeper);
    assert_int_equal(stat(link, &now), 0);
    assert_int_equal(now.st_ino, want.st_ino); /* the keeper runs the new file */
    char buf[8];
    assert_int_equal(vfe_fuse_read(e->fuse, f, fh, 0, buf, 7), 7);
    assert_memory_equal(buf, "upgrade", 7);

    /* No binary at the path: the restart is refused, the daemon serves on. */
    assert_int_equal(unlink(exe), 0);
    pid_t serving = serving_pid(keeper);
    assert_int_equal(kill(keeper, SIGHUP), 0);
    wait_log(e, "restart did not happen", 30);
    assert_int_equal(serving_pid(keeper), serving);
    assert_int_equal(vfe_fuse_read(e->fuse, f, fh, 0, buf, 7), 7);
    assert_memory_equal(buf, "upgrade", 7);
    assert_int_equal(getattr(e, f), 0);
    assert_int_equal(vfe_fuse_release(e->fuse, f, fh, 0), 0);
    finish(e);
}

/* ---- DAX mappings across a restart --------------------------------------------------- */

static void test_restart_dax(void **state)
{
    struct env *e = prepare("--dax-window 16M --dax-policy always");
    int hfd = open(hpath(e, "m"), O_RDWR | O_CREAT, 0644);
    assert_true(hfd >= 0 && ftruncate(hfd, 4 * MiB) == 0 && pwrite(hfd, "mapped!", 7, 4096) == 7);
    close(hfd);
    attach(e, NULL, true);
    pid_t keeper = vfe_conn_backend_pid(vfe_dev_conn(e->dev));
    uint64_t m = lookup(e, FUSE_ROOT_ID, "m");
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, m, ~0ull, 0, 2 * MiB,
                                           FUSE_SETUPMAPPING_FLAG_READ, 0),
                     0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, m, ~0ull, 2 * MiB, 2 * MiB,
                                           FUSE_SETUPMAPPING_FLAG_READ |
                                               FUSE_SETUPMAPPING_FLAG_WRITE,
                                           4 * MiB),
                     0);
    /* A guest store the old daemon has not written back: the hand-over carries
     * the window store, so the new daemon writes it back. */
    char *w = vfe_dax_window(e->dax);
    memcpy(w + 4 * MiB + 100, "stored!", 7);
    assert_int_equal(kill(keeper, SIGHUP), 0);
    wait_log(e, "restart: serving the frontend on", 60);
    assert_memory_equal(w + 4096, "mapped!", 7);
    /* The new daemon knows both: removing one is one exact unmap, and a map over
     * the other first unmaps what the old daemon mapped. */
    uint64_t r[1][2] = {{0, 2 * MiB}};
    assert_int_equal(vfe_fuse_removemapping(e->fuse, m, r, 1), 0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, m, ~0ull, 0, 2 * MiB,
                                           FUSE_SETUPMAPPING_FLAG_READ, 4 * MiB),
                     0);
    struct vfe_dax_stats st;
    vfe_dax_get_stats(e->dax, &st);
    assert_int_equal(st.rejects, 0);
    assert_int_equal(st.mappings, 1);
    assert_memory_equal(w + 4 * MiB + 4096, "mapped!", 7);
    char got[7] = {0};
    hfd = open(hpath(e, "m"), O_RDONLY);
    assert_true(hfd >= 0);
    assert_int_equal(pread(hfd, got, 7, 2 * MiB + 100), 7);
    close(hfd);
    assert_memory_equal(got, "stored!", 7);
    finish(e);
}

/* ---- A device reset leaves nothing of the old session ------------------------------- */

/* The serving process's fds on the shared directory (inodes, open files, lock
 * owners) and the locks those open file descriptions hold (fdinfo "lock:"). */
static void share_usage(struct env *e, pid_t pid, int *share_fds, int *locks)
{
    char path[64], lpath[320], target[512], line[256];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    *share_fds = *locks = 0;
    size_t dl = strlen(e->dir);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(lpath, sizeof(lpath), "%s/%s", path, de->d_name);
        ssize_t n = readlink(lpath, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        if (strncmp(target, e->dir, dl) != 0 || (target[dl] != '\0' && target[dl] != '/'))
            continue; /* not the share's (the pid file has its own flock) */
        (*share_fds)++;
        snprintf(lpath, sizeof(lpath), "/proc/%d/fdinfo/%s", pid, de->d_name);
        FILE *f = fopen(lpath, "r");
        while (f && fgets(line, sizeof(line), f))
            *locks += strncmp(line, "lock:", 5) == 0;
        if (f)
            fclose(f);
    }
    closedir(d);
}

/* Lines of /proc/locks on the inode of the share's name. */
static int proc_locks_on(struct env *e, const char *name)
{
    struct stat st;
    assert_int_equal(stat(hpath(e, name), &st), 0);
    char want[64], line[256];
    snprintf(want, sizeof(want), ":%lu ", (unsigned long)st.st_ino);
    FILE *f = fopen("/proc/locks", "r");
    assert_non_null(f);
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, want) != NULL;
    fclose(f);
    return n;
}

/* The window's slots in use and extents, from the daemon's statistics file
 * (rewritten at once on SIGUSR1, sent to the keeper). */
static void window_usage(struct env *e, pid_t keeper, const char *stats, long *slots,
                         long *extents)
{
    unlink(stats);
    assert_int_equal(kill(keeper, SIGUSR1), 0);
    char *t = NULL;
    for (int i = 0; i < 200; i++) {
        free(t);
        t = slurp(stats);
        if (strstr(t, "\"extents\":"))
            break;
        usleep(20000);
    }
    const char *p = strstr(t, "\"slots_used\":"), *q = strstr(t, "\"extents\":");
    assert_non_null(p);
    assert_non_null(q);
    *slots = strtol(p + 13, NULL, 10);
    *extents = strtol(q + 10, NULL, 10);
    free(t);
}

/*
 * A driver reset (RESET_DEVICE, as QEMU sends on a guest reset) with open
 * files, a directory, POSIX locks and a flock held, a SETLKW parked and DAX
 * mappings live, on four queues; then the new driver's INIT. From the
 * host's /proc: the serving process holds exactly the fds on the share it
 * held with a fresh session, its open file descriptions no lock, /proc/locks
 * nothing on the files, and the window no mapping.
 */
static void test_reset_leaves_nothing(void **state)
{
    struct env *e = prepare(NULL);
    char stats[96], opts[256];
    snprintf(stats, sizeof(stats), "%s-stats.json", e->dir);
    snprintf(opts, sizeof(opts),
             "--dax-window 16M --dax-policy always --stats-file %s --log-level debug", stats);
    snprintf(e->cmd, sizeof(e->cmd), "%s --socket-path={socket} --shared-dir={dir} %s %s",
             opt_vufsd, opt_extra, opts);
    int hfd = open(hpath(e, "f"), O_RDWR | O_CREAT, 0644);
    assert_true(hfd >= 0 && ftruncate(hfd, 4 * MiB) == 0);
    close(hfd);
    assert_int_equal(mkdir(hpath(e, "d"), 0755), 0);
    attach(e, NULL, true);
    pid_t keeper = vfe_conn_backend_pid(vfe_dev_conn(e->dev));
    pid_t serving = serving_pid(keeper);
    int base_fds, base_locks, fds, locks;
    long slots, extents;
    share_usage(e, serving, &base_fds, &base_locks);
    assert_int_equal(base_locks, 0);

    /* What a guest holds when it is reset: */
    uint64_t f = lookup(e, FUSE_ROOT_ID, "f");
    uint64_t fa = open_file(e, f, O_RDWR), fb = open_file(e, f, O_RDWR);
    uint64_t fc = open_file(e, f, O_RDONLY);
    uint64_t d = lookup(e, FUSE_ROOT_ID, "d");
    struct fuse_open_out dout;
    assert_int_equal(vfe_fuse_opendir(e->fuse, d, &dout), 0);
    assert_int_equal(setlk(e, f, fa, 0xa, F_WRLCK, 0, 99), 0);
    assert_int_equal(setlk(e, f, fa, 0xa, F_RDLCK, 1000, 1999), 0);
    struct lk fl;
    lk_prep(&fl, FUSE_SETLK, f, fc, 0xc, F_RDLCK, 0, 0);
    fl.in.lk_flags = FUSE_LK_FLOCK;
    assert_int_equal(vfe_fuse_call(e->fuse, MAINQ, &fl.op), 0);
    struct lk waiter;
    lk_prep(&waiter, FUSE_SETLKW, f, fb, 0xb, F_WRLCK, 0, 99);
    assert_int_equal(vfe_fuse_submit(e->fuse, 3, &waiter.op), 0);
    vfe_fuse_kick(e->fuse, 3);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, ~0ull, 0, 2 * MiB,
                                           FUSE_SETUPMAPPING_FLAG_READ, 0),
                     0);
    assert_int_equal(vfe_fuse_setupmapping(e->fuse, f, ~0ull, 2 * MiB, 2 * MiB,
                                           FUSE_SETUPMAPPING_FLAG_READ |
                                               FUSE_SETUPMAPPING_FLAG_WRITE,
                                           6 * MiB),
                     0);
    usleep(200000);
    /* The checks see what is held (so that seeing nothing later means something). */
    share_usage(e, serving, &fds, &locks);
    assert_true(fds >= base_fds + 6); /* the inodes, 4 handles, a lock owner */
    assert_true(locks >= 3);          /* two POSIX ranges and the flock */
    assert_true(proc_locks_on(e, "f") >= 3);
    window_usage(e, keeper, stats, &slots, &extents);
    assert_int_equal(slots, 2);
    assert_int_equal(extents, 2);

    /* The reset, as QEMU sends it; the VMM drops its window with it. */
    assert_int_equal(vfe_dev_reset(e->dev), 0);
    vfe_dax_reset(e->dax);
    vfe_fuse_abandon_all(e->fuse, 3);
    vfe_fuse_free(e->fuse);
    e->fuse = NULL;
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct vfe_fuse_config nfc = {.depth = 8, .timeout_ms = 30000,
                                  .init_flags = FUSE_POSIX_LOCKS | FUSE_MAP_ALIGNMENT |
                                                FUSE_HAS_INODE_DAX | FUSE_MAX_PAGES};
    assert_int_equal(vfe_fuse_new(e->dev, &nfc, &e->fuse), 0);
    struct vfe_fuse_init_result init;
    assert_int_equal(vfe_fuse_init(e->fuse, &init), 0);
    vfe_fuse_set_queue(e->fuse, MAINQ);

    share_usage(e, serving, &fds, &locks);
    if (fds != base_fds)
        fd_list(serving, "fds after the reset");
    assert_int_equal(fds, base_fds);
    assert_int_equal(locks, 0);
    assert_int_equal(proc_locks_on(e, "f"), 0);
    assert_true(host_can_lock(e, "f", 0, 0));
    window_usage(e, keeper, stats, &slots, &extents);
    assert_int_equal(slots, 0);
    assert_int_equal(extents, 0);
    /* The same serving process, and the new session works. */
    assert_int_equal(serving_pid(keeper), serving);
    uint64_t f2 = lookup(e, FUSE_ROOT_ID, "f");
    uint64_t fh = open_file(e, f2, O_RDWR);
    assert_int_equal(setlk(e, f2, fh, 0xa, F_WRLCK, 0, 99), 0);
    assert_int_equal(vfe_fuse_release(e->fuse, f2, fh, 0), 0);
    unlink(stats);
    finish(e);
}

/* ---- --save-state / --restore-state with a reconnecting frontend --------------------- */

static pid_t spawn_daemon(struct env *e, const char *sock, const char *opts)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "exec %s --socket-path=%s --shared-dir=%s %s %s >>%s 2>&1",
             opt_vufsd, sock, e->dir, opt_extra, opts, e->log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 600 && access(sock, F_OK) != 0; i++)
        usleep(50000);
    assert_int_equal(access(sock, F_OK), 0);
    return pid;
}

static int wait_exit(pid_t pid)
{
    int st;
    for (int i = 0; i < 600; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    fail_msg("the daemon did not exit");
    return -1;
}

static void test_save_restore(void **state)
{
    struct env *e = prepare(NULL);
    char sock[96], st_file[96], opts[256];
    snprintf(sock, sizeof(sock), "%s-sock", e->dir);
    snprintf(st_file, sizeof(st_file), "%s-state", e->dir);
    int hfd = open(hpath(e, "g"), O_RDWR | O_CREAT, 0644);
    assert_true(hfd >= 0 && write(hfd, "restored", 8) == 8);
    close(hfd);
    snprintf(opts, sizeof(opts), "--save-state %s --log-level debug", st_file);
    pid_t d1 = spawn_daemon(e, sock, opts);
    attach(e, sock, false);
    uint64_t g = lookup(e, FUSE_ROOT_ID, "g");
    uint64_t fh = open_file(e, g, O_RDWR);
    assert_int_equal(setlk(e, g, fh, 0xc, F_WRLCK, 0, 3), 0);
    assert_false(host_can_lock(e, "g", 0, 4));
    /* Another owner waits for that lock. */
    uint64_t fh2 = open_file(e, g, O_RDWR);
    struct lk waiter;
    lk_prep(&waiter, FUSE_SETLKW, g, fh2, 0xd, F_WRLCK, 0, 3);
    assert_int_equal(vfe_fuse_submit(e->fuse, MAINQ, &waiter.op), 0);
    vfe_fuse_kick(e->fuse, MAINQ);
    assert_int_equal(getattr(e, g), 0); /* served after the SETLKW: it is parked */
    assert_false(waiter.op.done);

    /* The daemon stops (an operator, or before a host update): it saves. The
     * waiter is answered (EINTR), not left in the ring outside the file. */
    assert_int_equal(kill(d1, SIGTERM), 0);
    assert_int_equal(wait_exit(d1), 0);
    wait_log(e, "state saved to", 10);
    struct vfe_fuse_op *done[1];
    assert_int_equal(vfe_fuse_reap(e->fuse, MAINQ, done, 1, 5000), 1);
    assert_ptr_equal(done[0], &waiter.op);
    assert_int_equal(waiter.op.error, -EINTR);
    /* The lock went with the process; nobody took it meanwhile. */
    assert_true(host_can_lock(e, "g", 0, 4));

    snprintf(opts, sizeof(opts), "--restore-state %s --log-level debug", st_file);
    pid_t d2 = spawn_daemon(e, sock, opts);
    struct vfe_conn_config cc = {.socket_path = sock, .timeout_ms = 30000};
    assert_int_equal(vfe_dev_reconnect(e->dev, &cc), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    /* No INIT: the session goes on. */
    assert_int_equal(getattr(e, g), 0);
    char buf[8];
    assert_int_equal(vfe_fuse_read(e->fuse, g, fh, 0, buf, 8), 8);
    assert_memory_equal(buf, "restored", 8);
    assert_false(host_can_lock(e, "g", 0, 4)); /* taken again for owner 0xc */
    assert_int_equal(setlk(e, g, fh, 0xc, F_UNLCK, 0, 3), 0);
    assert_true(host_can_lock(e, "g", 0, 4));
    assert_int_equal(lookup(e, FUSE_ROOT_ID, "g"), g);
    wait_log(e, "--restore-state: 1 node id(s), 2 open file(s), 2 lock owner(s) restored", 5);
    /* The waiter asks again (a guest's fcntl would fail or be restarted). */
    assert_int_equal(setlk(e, g, fh2, 0xd, F_WRLCK, 0, 3), 0);
    assert_int_equal(setlk(e, g, fh2, 0xd, F_UNLCK, 0, 3), 0);
    assert_int_equal(vfe_fuse_release(e->fuse, g, fh2, 0), 0);
    assert_int_equal(vfe_fuse_release(e->fuse, g, fh, 0), 0);
    vfe_fuse_free(e->fuse);
    e->fuse = NULL;
    vfe_dev_close(e->dev);
    e->dev = NULL;
    assert_int_equal(wait_exit(d2), 0);
    unlink(sock);
    unlink(st_file);
    finish(e);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"vufsd", required_argument, NULL, 'v'},
        {"extra", required_argument, NULL, 'x'},
        {0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'v')
            opt_vufsd = optarg;
        else if (c == 'x')
            opt_extra = optarg;
        else
            return 2;
    }
    if (!opt_vufsd) {
        fprintf(stderr, "test_restart: --vufsd CMD is required\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_under_load),
        cmocka_unit_test(test_upgrade_and_refusal),
        cmocka_unit_test(test_restart_dax),
        cmocka_unit_test(test_save_restore),
        cmocka_unit_test(test_reset_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
