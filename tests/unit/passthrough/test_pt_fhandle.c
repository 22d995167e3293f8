/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inode file handles (--inode-file-handles): inodes without fds, objects that
 * go away or whose inode number is reused, mounts inside the share (their own
 * mount fds), filesystems and mount roots without handles, and the capability
 * check.
 */
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "pt_test.h"

#ifndef EXT4_SUPER_MAGIC
#define EXT4_SUPER_MAGIC 0xEF53
#endif

static struct pt_t *up_with(enum pt_inode_handles mode, uint64_t nofile)
{
    struct pt_t *t = pt_t_new();

    t->cfg.inode_file_handles = mode;
    t->cfg.rlimit_nofile = nofile;
    assert_int_equal(pt_t_start(t), 0);
    assert_int_equal(pt_t_handles(t->fs), mode);
    return t;
}

static int getattr(struct pt_t *t, uint64_t node, struct fuse_attr_out *out)
{
    PT_REQ(t, q);
    struct fuse_getattr_in in = {0};
    return t->ops->getattr(&q.r, node, &in, out);
}

static int lookup(struct pt_t *t, uint64_t parent, const char *name, struct fuse_entry_out *e)
{
    PT_REQ(t, q);
    return t->ops->lookup(&q.r, parent, name, e);
}

/* ---- No fd per inode ------------------------------------------------------------- */

static void test_many_inodes_few_fds(void **state)
{
    /* A budget of 31 fds (100 - 64 - 5 %) and 3000 inodes. */
    struct pt_t *t = up_with(PT_HANDLES_MANDATORY, 100);
    enum { N = 3000 };
    uint64_t *nodes = calloc(N, sizeof(*nodes));
    char name[32], data[8] = "1234567";

    assert_non_null(nodes);
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof(name), "f%04d", k);
        int fd = open(pt_t_path(t, name), O_WRONLY | O_CREAT | O_EXCL, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, (size_t)(k % 7)), k % 7);
        close(fd);
    }
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof(name), "f%04d", k);
        nodes[k] = pt_t_lookup(t, FUSE_ROOT_ID, name);
    }
    assert_int_equal(pt_t_inode_count(t->fs), N + 1);
    assert_int_equal(pt_t_fds_in_use(t->fs),
                     2 + pt_t_fds_cached(t)); /* the root's fd, the share's mount fd */
    /* Every node still reaches its own file. */
    for (int k = 0; k < N; k += 7) {
        struct fuse_attr_out ao;
        assert_int_equal(getattr(t, nodes[k], &ao), 0);
        assert_int_equal(ao.attr.size, k % 7);
    }
    /* Looking a name up again finds the same node, by key, without a new fd. */
    assert_int_equal(pt_t_lookup(t, FUSE_ROOT_ID, "f0042"), nodes[42]);
    for (int k = 0; k < N; k++)
        pt_t_forget(t, nodes[k], UINT64_MAX);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    assert_int_equal(pt_t_fds_in_use(t->fs), 2 + pt_t_fds_cached(t));
    free(nodes);
    pt_t_down(t);
}

/* ---- The fd cache --------------------------------------------------------------------- */

static void cache_stats(struct pt_t *t, uint64_t *hits, uint64_t *misses, unsigned *cached)
{
    pt_t_fd_cache_stats(t->fs, hits, misses, cached);
}

static void test_fd_cache_bounded(void **state)
{
    struct pt_t *t = up_with(PT_HANDLES_MANDATORY, 20000);
    uint64_t hits, misses, h0, m0;
    unsigned cached;
    uint64_t dirs[300];
    struct fuse_attr_out ao;
    char name[32];

    /* A directory many lookups go through is opened once. */
    assert_int_equal(mkdir(pt_t_path(t, "big"), 0755), 0);
    for (int k = 0; k < 50; k++) {
        snprintf(name, sizeof(name), "big/f%d", k);
        pt_t_write_file(t, name, "");
    }
    uint64_t big = pt_t_lookup(t, FUSE_ROOT_ID, "big");
    cache_stats(t, &h0, &m0, &cached);
    for (int k = 0; k < 50; k++) {
        snprintf(name, sizeof(name), "f%d", k);
        pt_t_lookup(t, big, name);
    }
    cache_stats(t, &hits, &misses, &cached);
    assert_int_equal(misses - m0, 1);
    assert_int_equal(hits - h0, 49);
    assert_int_equal(cached, 1);

    /* Many inodes in use one after the other: never more than PT_FDC_SIZE (128) fds. */
    for (int k = 0; k < 300; k++) {
        snprintf(name, sizeof(name), "d%d", k);
        assert_int_equal(mkdir(pt_t_path(t, name), 0755), 0);
        dirs[k] = pt_t_lookup(t, FUSE_ROOT_ID, name);
        assert_int_equal(getattr(t, dirs[k], &ao), 0);
    }
    cache_stats(t, &hits, &misses, &cached);
    assert_int_equal(cached, 128);
    assert_int_equal(pt_t_fds_in_use(t->fs), 2 + 128);
    /* The most recent ones are cached: GETATTR on them is a hit. */
    cache_stats(t, &h0, &m0, &cached);
    assert_int_equal(getattr(t, dirs[299], &ao), 0);
    assert_int_equal(getattr(t, dirs[250], &ao), 0);
    cache_stats(t, &hits, &misses, &cached);
    assert_int_equal(hits - h0, 2);
    assert_int_equal(misses, m0);
    /* Forgotten inodes take their cached fds along. */
    for (int k = 0; k < 300; k++)
        pt_t_forget(t, dirs[k], 1);
    cache_stats(t, &hits, &misses, &cached);
    assert_int_equal(cached, 0); /* "big", still known, was pushed out long ago */
    assert_int_equal(pt_t_fds_in_use(t->fs), 2);
    pt_t_down(t);

    /* A small fd budget: the cache takes at most an eighth of it (31 / 8 = 3). */
    t = up_with(PT_HANDLES_MANDATORY, 100);
    for (int k = 0; k < 20; k++) {
        snprintf(name, sizeof(name), "d%d", k);
        assert_int_equal(mkdir(pt_t_path(t, name), 0755), 0);
        assert_int_equal(getattr(t, pt_t_lookup(t, FUSE_ROOT_ID, name), &ao), 0);
    }
    cache_stats(t, &hits, &misses, &cached);
    assert_int_equal(cached, 3);
    assert_int_equal(pt_t_fds_in_use(t->fs), 2 + 3);
    pt_t_down(t);
}

/* Lookups, GETATTRs and FORGETs from several threads over more inodes than the
 * cache holds: entries are evicted and dropped while others borrow (run under ASan). */
struct churn {
    struct pt_t *t;
    unsigned seed;
    int failures; /* __atomic */
};

static void *churn_thread(void *arg)
{
    struct churn *c = arg;
    struct pt_t *t = c->t;
    char name[32];

    for (int k = 0; k < 3000; k++) {
        struct fuse_entry_out d, x;
        struct fuse_attr_out ao;
        snprintf(name, sizeof(name), "c%u", rand_r(&c->seed) % 200);
        if (lookup(t, FUSE_ROOT_ID, name, &d) != 0 || getattr(t, d.nodeid, &ao) != 0 ||
            lookup(t, d.nodeid, "x", &x) != 0 || getattr(t, x.nodeid, &ao) != 0 ||
            ao.attr.size != 1) {
            __atomic_add_fetch(&c->failures, 1, __ATOMIC_RELAXED);
            continue;
        }
        pt_t_forget(t, x.nodeid, 1);
        pt_t_forget(t, d.nodeid, 1);
    }
    return NULL;
}

static void test_fd_cache_concurrent(void **state)
{
    struct pt_t *t = up_with(PT_HANDLES_MANDATORY, 20000);
    struct churn c[4];
    pthread_t th[4];
    char name[32];
    uint64_t hits, misses;
    unsigned cached;

    for (int k = 0; k < 200; k++) {
        snprintf(name, sizeof(name), "c%d", k);
        assert_int_equal(mkdir(pt_t_path(t, name), 0755), 0);
        snprintf(name, sizeof(name), "c%d/x", k);
        pt_t_write_file(t, name, "x");
    }
    for (int k = 0; k < 4; k++) {
        c[k] = (struct churn){.t = t, .seed = (unsigned)k + 1};
        pthread_create(&th[k], NULL, churn_thread, &c[k]);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        assert_int_equal(c[k].failures, 0);
    }
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    cache_stats(t, &hits, &misses, &cached);
    assert_int_equal(cached, 0); /* every inode forgotten: every cached fd dropped */
    assert_true(hits > 0 && misses > 0);
    assert_int_equal(pt_t_fds_in_use(t->fs), 2);
    pt_t_down(t);
}

/* ---- Objects that go away --------------------------------------------------------- */

static void test_unlinked_while_open(void **state)
{
    struct pt_t *t = up_with(PT_HANDLES_MANDATORY, 0);
    struct fuse_attr_out ao;
    char buf[8];

    pt_t_write_file(t, "f", "hello");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    uint64_t fh = pt_t_open(t, f, O_RDONLY);
    assert_int_equal(unlink(pt_t_path(t, "f")), 0);
    /* Open: the object lives, and its handle still opens. */
    assert_int_equal(getattr(t, f, &ao), 0);
    assert_int_equal(ao.attr.nlink, 0);
    assert_int_equal(ao.attr.size, 5);
    assert_int_equal(pt_t_pread(t, f, fh, buf, 5, 0), 5);
    assert_int_equal(pt_t_release(t, f, fh), 0);
    /* The fd cache may still hold it: GETATTR on other inodes pushes it out. */
    for (int k = 0; k < 2 * 128; k++) {
        char name[16];
        snprintf(name, sizeof(name), "o%d", k);
        pt_t_write_file(t, name, "");
        assert_int_equal(getattr(t, pt_t_lookup(t, FUSE_ROOT_ID, name), &ao), 0);
    }
    /* Gone for good: the node is stale, never another object. */
    assert_int_equal(getattr(t, f, &ao), -ESTALE);
    pt_t_forget(t, f, 1);
    pt_t_down(t);
}

static void test_inode_number_reused(void **state)
{
    struct pt_t *t = up_with(PT_HANDLES_MANDATORY, 0);
    struct fuse_attr_out ao;
    struct fuse_entry_out e;
    struct statfs sf;
    struct stat st;
    char name[32];
    bool reused = false;

    pt_t_write_file(t, "old", "o");
    assert_int_equal(stat(pt_t_path(t, "old"), &st), 0);
    ino_t ino = st.st_ino;
    uint64_t old = pt_t_lookup(t, FUSE_ROOT_ID, "old");
    assert_int_equal(unlink(pt_t_path(t, "old")), 0);
    /* ext4 hands the freed inode number to the next file at once. */
    for (int k = 0; k < 64 && !reused; k++) {
        snprintf(name, sizeof(name), "new%d", k);
        pt_t_write_file(t, name, "newer");
        assert_int_equal(stat(pt_t_path(t, name), &st), 0);
        reused = st.st_ino == ino;
    }
    assert_int_equal(statfs(t->dir, &sf), 0);
    if (sf.f_type == EXT4_SUPER_MAGIC)
        assert_true(reused);
    /* The new object gets its own node; the old node never reaches it. */
    assert_int_equal(lookup(t, FUSE_ROOT_ID, name, &e), 0);
    assert_true(e.nodeid != old);
    assert_int_equal(e.attr.size, 5);
    assert_int_equal(getattr(t, old, &ao), -ESTALE);
    assert_int_equal(getattr(t, e.nodeid, &ao), 0);
    assert_int_equal(ao.attr.size, 5);
    assert_int_equal(pt_t_lookup(t, FUSE_ROOT_ID, name), e.nodeid);
    /* Both go away cleanly: the unhashed old inode and the new one. */
    pt_t_forget(t, old, 1);
    pt_t_forget(t, e.nodeid, 2);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    pt_t_down(t);
}

/* ---- Mounts inside the share ------------------------------------------------------- */

static bool try_mount(struct pt_t *t, const char *src, const char *name, const char *type,
                      unsigned long flags)
{
    return mount(src, pt_t_path(t, name), type, flags, NULL) == 0;
}

static void test_submount_gets_its_mount_fd(void **state)
{
    struct pt_t *t = pt_t_new();
    struct fuse_entry_out e;
    char buf[8];

    assert_int_equal(mkdir(pt_t_path(t, "mnt"), 0755), 0);
    if (!try_mount(t, "vufsd-test", "mnt", "tmpfs", 0)) {
        pt_t_down(t);
        print_message("SKIP: cannot mount a tmpfs submount here (needs CAP_SYS_ADMIN)\n");
        skip();
    }
    pt_t_write_file(t, "mnt/x", "in tmpfs");
    t->cfg.inode_file_handles = PT_HANDLES_MANDATORY;
    assert_int_equal(pt_t_start(t), 0);
    uint64_t m = pt_t_lookup(t, FUSE_ROOT_ID, "mnt");
    assert_int_equal(pt_t_fds_in_use(t->fs), 3 + pt_t_fds_cached(t)); /* + the tmpfs mount's fd */
    assert_int_equal(lookup(t, m, "x", &e), 0);
    assert_int_equal(pt_t_fds_in_use(t->fs), 3 + pt_t_fds_cached(t));
    uint64_t fh = pt_t_open(t, e.nodeid, O_RDONLY);
    assert_int_equal(pt_t_pread(t, e.nodeid, fh, buf, 8, 0), 8);
    assert_memory_equal(buf, "in tmpfs", 8);
    assert_int_equal(pt_t_release(t, e.nodeid, fh), 0);
    /* ".." of the mount's root leads back to the share. */
    assert_int_equal(pt_t_lookup(t, m, ".."), FUSE_ROOT_ID);
    /* The last inode on the mount takes its mount fd along. */
    pt_t_forget(t, e.nodeid, 1);
    pt_t_forget(t, m, 1);
    assert_int_equal(pt_t_fds_in_use(t->fs), 2 + pt_t_fds_cached(t));
    /* And a new one comes with the next lookup. */
    m = pt_t_lookup(t, FUSE_ROOT_ID, "mnt");
    assert_int_equal(pt_t_fds_in_use(t->fs), 3 + pt_t_fds_cached(t));
    assert_int_equal(lookup(t, m, "x", &e), 0);
    pt_fs_free(t->fs);
    t->fs = NULL;
    assert_int_equal(umount2(pt_t_path(t, "mnt"), MNT_DETACH), 0);
    pt_t_down(t);
}

/* ramfs makes no file handles: mandatory refuses its objects, prefer keeps fds. */
static void test_filesystem_without_handles(void **state)
{
    struct pt_t *t = pt_t_new();
    struct fuse_entry_out e;

    assert_int_equal(mkdir(pt_t_path(t, "ram"), 0755), 0);
    if (!try_mount(t, "vufsd-test", "ram", "ramfs", 0)) {
        pt_t_down(t);
        print_message("SKIP: cannot mount a ramfs here (needs CAP_SYS_ADMIN)\n");
        skip();
    }
    pt_t_write_file(t, "ram/y", "y");
    t->cfg.inode_file_handles = PT_HANDLES_MANDATORY;
    assert_int_equal(pt_t_start(t), 0);
    assert_int_equal(lookup(t, FUSE_ROOT_ID, "ram", &e), -EOPNOTSUPP);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    assert_int_equal(pt_t_fds_in_use(t->fs), 2 + pt_t_fds_cached(t));
    pt_fs_free(t->fs);
    fll_session_free(t->se);
    t->se = NULL;

    t->cfg.inode_file_handles = PT_HANDLES_PREFER;
    assert_int_equal(pt_t_start(t), 0);
    uint64_t r = pt_t_lookup(t, FUSE_ROOT_ID, "ram");
    assert_int_equal(lookup(t, r, "y", &e), 0);
    assert_int_equal(e.attr.size, 1);
    assert_int_equal(pt_t_fds_in_use(t->fs),
                     4 + pt_t_fds_cached(t)); /* root, mount fd, two O_PATH fds */
    pt_t_write_file(t, "z", "z");             /* on the share's ext4 or tmpfs: a handle */
    pt_t_lookup(t, FUSE_ROOT_ID, "z");
    assert_int_equal(pt_t_fds_in_use(t->fs), 4 + pt_t_fds_cached(t));
    pt_fs_free(t->fs);
    t->fs = NULL;
    assert_int_equal(umount2(pt_t_path(t, "ram"), MNT_DETACH), 0);
    pt_t_down(t);
}

/* A share whose own filesystem makes no handles: mandatory cannot start. */
static void test_share_without_handles(void **state)
{
    struct pt_t *t = pt_t_new();

    if (mount("vufsd-test", t->dir, "ramfs", 0, NULL) < 0) {
        pt_t_down(t);
        print_message("SKIP: cannot mount a ramfs share here (needs CAP_SYS_ADMIN)\n");
        skip();
    }
    t->cfg.inode_file_handles = PT_HANDLES_MANDATORY;
    assert_int_equal(pt_t_start(t), -EOPNOTSUPP);
    t->cfg.inode_file_handles = PT_HANDLES_PREFER;
    assert_int_equal(pt_t_start(t), 0);
    assert_int_equal(pt_t_handles(t->fs), PT_HANDLES_NEVER);
    pt_t_write_file(t, "a", "a");
    pt_t_lookup(t, FUSE_ROOT_ID, "a");
    assert_int_equal(pt_t_fds_in_use(t->fs), 2 + pt_t_fds_cached(t)); /* root + a, both O_PATH */
    pt_fs_free(t->fs);
    t->fs = NULL;
    assert_int_equal(umount2(t->dir, MNT_DETACH), 0);
    pt_t_down(t);
}

/* A FIFO bind-mounted into the share: its mount has no object to open, and
 * the FIFO is never opened (an open would block). */
static void test_special_file_mount_root(void **state)
{
    struct pt_t *t = pt_t_new();
    struct fuse_entry_out e;
    char fifo[96];

    snprintf(fifo, sizeof(fifo), "%s-fifo", t->dir);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    pt_t_write_file(t, "p", "");
    if (mount(fifo, pt_t_path(t, "p"), NULL, MS_BIND, NULL) < 0) {
        unlink(fifo);
        pt_t_down(t);
        print_message("SKIP: cannot bind-mount over a FIFO here (needs CAP_SYS_ADMIN)\n");
        skip();
    }
    t->cfg.inode_file_handles = PT_HANDLES_MANDATORY;
    assert_int_equal(pt_t_start(t), 0);
    assert_int_equal(lookup(t, FUSE_ROOT_ID, "p", &e), -EOPNOTSUPP);
    pt_fs_free(t->fs);
    fll_session_free(t->se);
    t->se = NULL;
    t->cfg.inode_file_handles = PT_HANDLES_PREFER;
    assert_int_equal(pt_t_start(t), 0);
    assert_int_equal(lookup(t, FUSE_ROOT_ID, "p", &e), 0);
    assert_true(S_ISFIFO(e.attr.mode));
    assert_int_equal(pt_t_fds_in_use(t->fs),
                     3 + pt_t_fds_cached(t)); /* root, mount fd, the FIFO's O_PATH */
    pt_fs_free(t->fs);
    t->fs = NULL;
    assert_int_equal(umount2(pt_t_path(t, "p"), MNT_DETACH), 0);
    unlink(fifo);
    pt_t_down(t);
}

/* ---- The capability -------------------------------------------------------------------- */

/* Drops CAP_DAC_READ_SEARCH from this thread's effective set. */
static int drop_dac_read_search(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];

    if (syscall(SYS_capget, &h, d) < 0)
        return -1;
    d[0].effective &= ~(1u << CAP_DAC_READ_SEARCH);
    return (int)syscall(SYS_capset, &h, d);
}

/* In a child: start with mode, drop the capability, check. Exit status: 0 =
 * refused with EPERM, 1 = fell back to fds (and lookups work), 2 = kept handles,
 * 3 = something else went wrong. */
static int check_without_capability(struct pt_t *t, enum pt_inode_handles mode)
{
    int status;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        bool fell_back = false;
        struct pt_fs *fs = NULL;
        t->cfg.inode_file_handles = mode;
        int err = pt_fs_new(&t->cfg, &fs);
        if (err < 0 || drop_dac_read_search() < 0)
            _exit(3);
        err = pt_fs_check_handles(fs, &fell_back);
        if (err == -EPERM)
            _exit(0);
        if (err == 0 && fell_back && pt_t_handles(fs) == PT_HANDLES_NEVER)
            _exit(1);
        _exit(err == 0 && !fell_back ? 2 : 3);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_capability_check(void **state)
{
    struct pt_t *t = pt_t_new();
    bool fell_back = true;

    if (geteuid() != 0) {
        pt_t_down(t);
        print_message("SKIP: the capability check needs root\n");
        skip();
    }
    /* With the capability: handles stay on. */
    t->cfg.inode_file_handles = PT_HANDLES_MANDATORY;
    assert_int_equal(pt_t_start(t), 0);
    assert_int_equal(pt_fs_check_handles(t->fs, &fell_back), 0);
    assert_false(fell_back);
    assert_int_equal(pt_t_handles(t->fs), PT_HANDLES_MANDATORY);
    /* Without it: mandatory refuses to serve, prefer goes back to fds. */
    assert_int_equal(check_without_capability(t, PT_HANDLES_MANDATORY), 0);
    assert_int_equal(check_without_capability(t, PT_HANDLES_PREFER), 1);
    pt_t_down(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_inodes_few_fds),
        cmocka_unit_test(test_fd_cache_bounded),
        cmocka_unit_test(test_fd_cache_concurrent),
        cmocka_unit_test(test_unlinked_while_open),
        cmocka_unit_test(test_inode_number_reused),
        cmocka_unit_test(test_submount_gets_its_mount_fd),
        cmocka_unit_test(test_filesystem_without_handles),
        cmocka_unit_test(test_share_without_handles),
        cmocka_unit_test(test_special_file_mount_root),
        cmocka_unit_test(test_capability_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
