/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Inode and handle tables: counts, clamping, generations, races, fd budget, reset. */
#include "pt_test.h"

#include "pt_fs_i.h"
#include "pt_inode_i.h"

static void test_lookup_counts_and_forget_clamps(void **state)
{
    struct pt_t *t = pt_t_up();

    pt_t_write_file(t, "a", "hello");
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    uint64_t a1 = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    uint64_t a2 = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    assert_true(a1 == a2);
    assert_int_equal(pt_t_inode_count(t->fs), 2);

    /* One of two lookups forgotten: still known. */
    pt_t_forget(t, a1, 1);
    assert_int_equal(pt_t_inode_count(t->fs), 2);
    /* A count far larger than the lookups clamps at zero and frees. */
    pt_t_forget(t, a1, UINT64_MAX);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    {
        PT_REQ(t, q);
        struct fuse_getattr_in in = { 0 };
        struct fuse_attr_out out;
        assert_int_equal(t->ops->getattr(&q.r, a1, &in, &out), -ESTALE);
    }
    /* Forgetting again, or unknown ids, changes nothing. */
    pt_t_forget(t, a1, UINT64_MAX);
    pt_t_forget(t, 0, 1);
    pt_t_forget(t, 0xffffffffffffffffull, 5);
    pt_t_forget(t, 12345678, 5);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    pt_t_down(t);
}

/* A repeated lookup finds the known inode by a statx of the name (no fd opened);
 * a name that now names another object, or nothing, must not find the old one. */
static void test_lookup_known_swapped_missing(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_entry_out e;
    struct fuse_getattr_in gin = { 0 };
    struct fuse_attr_out out;

    pt_t_write_file(t, "a", "1");
    pt_t_write_file(t, "b", "22");
    assert_int_equal(symlink("a", pt_t_path(t, "l")), 0);
    uint64_t a = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    uint64_t l = pt_t_lookup(t, FUSE_ROOT_ID, "l");
    assert_true(l != a); /* the link itself, never its target */
    assert_int_equal(pt_t_lookup(t, FUSE_ROOT_ID, "l"), l);
    assert_int_equal(pt_t_lookup(t, FUSE_ROOT_ID, "a"), a);
    assert_int_equal(pt_t_inode_count(t->fs), 3);

    /* b renamed over a: the name a is b's inode now; the old a lives on by its id. */
    char from[512];
    snprintf(from, sizeof(from), "%s", pt_t_path(t, "b")); /* pt_t_path: one buffer */
    assert_int_equal(rename(from, pt_t_path(t, "a")), 0);
    uint64_t a2 = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    assert_true(a2 != a);
    assert_int_equal(t->ops->getattr(&q.r, a2, &gin, &out), 0);
    assert_int_equal(out.attr.size, 2);
    /* An O_PATH fd keeps the renamed-over file alive; a file handle does not. */
    int r = t->ops->getattr(&q.r, a, &gin, &out);
    bool pinned = r == 0;
    if (pinned)
        assert_int_equal(out.attr.size, 1);
    else
        assert_int_equal(r, -ESTALE);
    assert_int_equal(pt_t_inode_count(t->fs), 4);

    /* Gone from the host: ENOENT, and the known inode is not handed out again. */
    assert_int_equal(unlink(pt_t_path(t, "a")), 0);
    assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "a", &e), -ENOENT);
    assert_int_equal(pt_t_inode_count(t->fs), 4);
    /* The two lookups of a are both counted: one FORGET leaves it known. */
    pt_t_forget(t, a, 1);
    assert_int_equal(t->ops->getattr(&q.r, a, &gin, &out), pinned ? 0 : -ESTALE);
    pt_t_forget(t, a, 1);
    assert_int_equal(t->ops->getattr(&q.r, a, &gin, &out), -ESTALE);
    pt_t_down(t);
}

static void test_root_survives_forget(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_getattr_in in = { 0 };
    struct fuse_attr_out out;

    pt_t_forget(t, FUSE_ROOT_ID, UINT64_MAX);
    assert_int_equal(t->ops->getattr(&q.r, FUSE_ROOT_ID, &in, &out), 0);
    assert_true(S_ISDIR(out.attr.mode));
    pt_t_down(t);
}

static void test_generation_distinguishes_reuse(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_getattr_in in = { 0 };
    struct fuse_attr_out out;

    pt_t_write_file(t, "a", "1");
    pt_t_write_file(t, "b", "22");
    uint64_t a = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    pt_t_forget(t, a, 1);
    uint64_t b = pt_t_lookup(t, FUSE_ROOT_ID, "b");
    /* Same slot, new generation: the stale id must not reach b. */
    assert_true((a & 0xffffffffu) == (b & 0xffffffffu));
    assert_true(a != b);
    assert_int_equal(t->ops->getattr(&q.r, a, &in, &out), -ESTALE);
    assert_int_equal(t->ops->getattr(&q.r, b, &in, &out), 0);
    assert_int_equal(out.attr.size, 2);
    pt_t_down(t);
}

static void test_handle_keeps_inode(void **state)
{
    struct pt_t *t = pt_t_up();
    char buf[16] = "";

    pt_t_write_file(t, "a", "hello");
    uint64_t a = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    uint64_t fh = pt_t_open(t, a, O_RDONLY);
    pt_t_forget(t, a, 1);
    /* Forgotten by the client but still open: the inode and handle live on. */
    assert_int_equal(pt_t_inode_count(t->fs), 2);
    assert_int_equal(pt_t_pread(t, a, fh, buf, 5, 0), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(pt_t_release(t, a, fh), 0);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    /* The handle is gone: a second RELEASE and a READ are EBADF. */
    assert_int_equal(pt_t_release(t, a, fh), -EBADF);
    assert_int_equal(pt_t_pread(t, a, fh, buf, 5, 0), -EBADF);
    pt_t_down(t);
}

static void test_bad_handles(void **state)
{
    struct pt_t *t = pt_t_up();
    char buf[8];

    pt_t_write_file(t, "a", "x");
    pt_t_write_file(t, "b", "y");
    uint64_t a = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    uint64_t b = pt_t_lookup(t, FUSE_ROOT_ID, "b");
    uint64_t fh = pt_t_open(t, a, O_RDONLY);
    assert_int_equal(pt_t_pread(t, a, 0, buf, 1, 0), -EBADF);
    assert_int_equal(pt_t_pread(t, a, fh + 1, buf, 1, 0), -EBADF);
    assert_int_equal(pt_t_pread(t, a, fh | (7ull << 32), buf, 1, 0), -EBADF);
    assert_int_equal(pt_t_pread(t, a, UINT64_MAX, buf, 1, 0), -EBADF);
    /* A handle used with another node's id is refused. */
    assert_int_equal(pt_t_pread(t, b, fh, buf, 1, 0), -EBADF);
    /* Offsets past INT64_MAX are refused, not wrapped. */
    assert_int_equal(pt_t_pread(t, a, fh, buf, 1, 1ull << 63), -EINVAL);
    assert_int_equal(pt_t_pread(t, a, fh, buf, 1, 0), 1);
    assert_int_equal(pt_t_release(t, a, fh), 0);
    pt_t_down(t);
}

/* ---- FORGET racing GETATTR / READ (run under ASan) ---------------------------- */

struct race {
    struct pt_t *t;
    uint64_t node; /* __atomic */
    uint64_t fh;
    uint64_t fh_node;
    int failures;  /* __atomic: cmocka asserts belong to the main thread */
};

static void *race_user(void *arg)
{
    struct race *rc = arg;
    struct pt_t *t = rc->t;
    char buf[8];

    for (int k = 0; k < 3000; k++) {
        PT_REQ(t, q);
        struct fuse_getattr_in in = { 0 };
        struct fuse_attr_out out;
        struct fuse_entry_out e;
        uint64_t node = __atomic_load_n(&rc->node, __ATOMIC_RELAXED);
        int ret = t->ops->getattr(&q.r, node, &in, &out);
        if (ret != 0 && ret != -ESTALE)
            __atomic_add_fetch(&rc->failures, 1, __ATOMIC_RELAXED);
        /* The handle pins its inode whatever FORGET does. */
        if (pt_t_pread(t, rc->fh_node, rc->fh, buf, 4, 0) != 4)
            __atomic_add_fetch(&rc->failures, 1, __ATOMIC_RELAXED);
        if (t->ops->lookup(&q.r, FUSE_ROOT_ID, "g", &e) == 0)
            __atomic_store_n(&rc->node, e.nodeid, __ATOMIC_RELAXED);
        else
            __atomic_add_fetch(&rc->failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *race_forget(void *arg)
{
    struct race *rc = arg;

    for (int k = 0; k < 3000; k++)
        pt_t_forget(rc->t, __atomic_load_n(&rc->node, __ATOMIC_RELAXED), k & 1 ? UINT64_MAX : 3);
    return NULL;
}

static void test_forget_races_getattr_read(void **state)
{
    struct pt_t *t = pt_t_up();
    struct race rc = { .t = t };
    pthread_t th[3];

    /* "f" is open (its handle pins it); "g" is looked up and forgotten over and over. */
    pt_t_write_file(t, "f", "data");
    pt_t_write_file(t, "g", "data");
    rc.fh_node = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    rc.fh = pt_t_open(t, rc.fh_node, O_RDONLY);
    pt_t_forget(t, rc.fh_node, 1);
    rc.node = pt_t_lookup(t, FUSE_ROOT_ID, "g");
    pthread_create(&th[0], NULL, race_user, &rc);
    pthread_create(&th[1], NULL, race_user, &rc);
    pthread_create(&th[2], NULL, race_forget, &rc);
    for (int k = 0; k < 3; k++)
        pthread_join(th[k], NULL);
    assert_int_equal(rc.failures, 0);
    pt_t_forget(t, rc.node, UINT64_MAX);
    assert_int_equal(pt_t_release(t, rc.fh_node, rc.fh), 0);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, 1)); /* the root's */
    pt_t_down(t);
}

/* ---- Lock-free references ------------------------------------------------------ */

/* A known node id is referenced and released without the table lock: here the
 * lock is held by the test's main thread while a helper takes and drops
 * references, which would block forever if either step took the lock. */
struct held_lock_refs {
    struct pt_fs *fs;
    uint64_t node;
    int got, stale;
};

static void *refs_under_held_lock(void *arg)
{
    struct held_lock_refs *h = arg;
    struct pt_inode *i;

    for (int k = 0; k < 1000; k++) {
        if (pt_inode_get(h->fs, h->node, &i) == 0) {
            h->got++;
            pt_inode_ref(i);
            pt_inode_put(i);
            pt_inode_put(i);
        }
    }
    /* A generation that is not the inode's, and a slot never used. */
    if (pt_inode_get(h->fs, h->node + (1ull << 32), &i) == -ESTALE)
        h->stale++;
    if (pt_inode_get(h->fs, 1000, &i) == -ESTALE)
        h->stale++;
    return NULL;
}

static void test_refs_take_no_table_lock(void **state)
{
    struct pt_t *t = pt_t_up();
    struct held_lock_refs h = { .fs = t->fs };
    pthread_t th;
    struct timespec until;

    pt_t_write_file(t, "a", "x");
    h.node = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    pthread_mutex_lock(&t->fs->itab.lock);
    assert_int_equal(pthread_create(&th, NULL, refs_under_held_lock, &h), 0);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    int r = pthread_timedjoin_np(th, NULL, &until);
    pthread_mutex_unlock(&t->fs->itab.lock);
    if (r != 0)
        pthread_join(th, NULL); /* it blocked on the lock: fail below, after it ends */
    assert_int_equal(r, 0);
    assert_int_equal(h.got, 1000);
    assert_int_equal(h.stale, 2);
    /* The client's lookup still holds it; forgetting it frees it. */
    assert_int_equal(pt_t_inode_count(t->fs), 2);
    pt_t_forget(t, h.node, 1);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, 1));
    pt_t_down(t);
}

/* Operations take and drop references on a node while another thread looks
 * it up and forgets it again and again: every reference taken finds the whole
 * inode of the generation asked for, and when all is over nothing leaks (each
 * free happened once: the last reference or the last FORGET, never both). */
struct ref_storm {
    struct pt_t *t;
    uint64_t node;       /* __atomic: the node id of the current lookup, 0 between */
    ino_t ino;           /* the file's inode number */
    int stop;            /* __atomic */
    int failures;        /* __atomic */
    uint64_t got;        /* __atomic */
};

static void *storm_user(void *arg)
{
    struct ref_storm *s = arg;
    struct pt_inode *i;

    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        uint64_t node = __atomic_load_n(&s->node, __ATOMIC_ACQUIRE);
        if (!node)
            continue;
        int r = pt_inode_get(s->t->fs, node, &i);
        if (r == 0) {
            if (pt_inode_nodeid(i) != node || i->ino != s->ino || !i->live)
                __atomic_add_fetch(&s->failures, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&s->got, 1, __ATOMIC_RELAXED);
            pt_inode_put(i);
        } else if (r != -ESTALE) {
            __atomic_add_fetch(&s->failures, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static void test_refs_race_lookup_forget(void **state)
{
    struct pt_t *t = pt_t_up();
    struct ref_storm s = { .t = t };
    pthread_t th[3];
    struct stat st;

    pt_t_write_file(t, "g", "data");
    assert_int_equal(stat(pt_t_path(t, "g"), &st), 0);
    s.ino = st.st_ino;
    for (int k = 0; k < 3; k++)
        assert_int_equal(pthread_create(&th[k], NULL, storm_user, &s), 0);
    for (int k = 0; k < 3000; k++) {
        uint64_t node = pt_t_lookup(t, FUSE_ROOT_ID, "g");
        __atomic_store_n(&s.node, node, __ATOMIC_RELEASE);
        if (k % 3 == 0)
            pt_t_lookup(t, FUSE_ROOT_ID, "g"); /* nlookup 2: two FORGETs */
        sched_yield();
        __atomic_store_n(&s.node, 0, __ATOMIC_RELEASE);
        pt_t_forget(t, node, 1);
        if (k % 3 == 0)
            pt_t_forget(t, node, 1);
        /* Unknown again once the users let go: a get of that id now fails. */
    }
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    for (int k = 0; k < 3; k++)
        pthread_join(th[k], NULL);
    assert_int_equal(s.failures, 0);
    assert_true(s.got > 0);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, 1)); /* the root's */
    pt_t_down(t);
}

/* ---- fd budget (CVE-2020-10717) ------------------------------------------------ */

static void test_fd_budget_lookup_storm(void **state)
{
    struct pt_t *t = pt_t_new();
    char name[32];
    int ok = 0, emfile = 0;

    /* 100 fds: 64 + 5 % kept back, 31 for the fs (one of them the root). */
    t->cfg.rlimit_nofile = 100;
    assert_int_equal(pt_t_start(t), 0);
    if (pt_t_handles(t->fs) != PT_HANDLES_NEVER) {
        /* Inodes with handles hold no fd: the storm is served, the budget untouched. */
        for (int k = 0; k < 60; k++) {
            snprintf(name, sizeof(name), "f%d", k);
            pt_t_write_file(t, name, "x");
            pt_t_lookup(t, FUSE_ROOT_ID, name);
        }
        assert_int_equal(pt_t_inode_count(t->fs), 61);
        assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, 61));
        long room = 31 - pt_t_fds_in_use(t->fs);
        /* Opens still take fds from the budget, and are refused past it. */
        uint64_t f0 = pt_t_lookup(t, FUSE_ROOT_ID, "f0");
        for (int k = 0; k < 40; k++) {
            PT_REQ(t, q);
            struct fuse_open_in oi = { .flags = O_RDONLY };
            struct fuse_open_out oo;
            int ret = t->ops->open(&q.r, f0, &oi, &oo);
            if (ret == 0) {
                ok++;
            } else {
                assert_int_equal(ret, -EMFILE);
                emfile++;
            }
        }
        assert_int_equal(ok, room);
        assert_int_equal(emfile, 40 - room);
        pt_t_down(t);
        return;
    }
    for (int k = 0; k < 60; k++) {
        snprintf(name, sizeof(name), "f%d", k);
        pt_t_write_file(t, name, "x");
    }
    uint64_t first = 0;
    for (int k = 0; k < 60; k++) {
        PT_REQ(t, q);
        struct fuse_entry_out e;
        snprintf(name, sizeof(name), "f%d", k);
        int ret = t->ops->lookup(&q.r, FUSE_ROOT_ID, name, &e);
        if (ret == 0) {
            ok++;
            if (!first)
                first = e.nodeid;
        } else {
            assert_int_equal(ret, -EMFILE);
            emfile++;
        }
    }
    assert_int_equal(ok, 30);
    assert_int_equal(emfile, 30);
    assert_true(pt_t_fds_in_use(t->fs) <= 31);
    /* The daemon keeps serving: known nodes, known names, STATFS, GETATTR. */
    {
        PT_REQ(t, q);
        struct fuse_getattr_in gi = { 0 };
        struct fuse_attr_out ao;
        struct fuse_statfs_out so;
        assert_int_equal(t->ops->getattr(&q.r, FUSE_ROOT_ID, &gi, &ao), 0);
        assert_int_equal(t->ops->statfs(&q.r, FUSE_ROOT_ID, &so), 0);
        assert_int_equal(pt_t_lookup(t, FUSE_ROOT_ID, "f0"), first);
        /* OPEN needs a new fd: refused the same way. */
        struct fuse_open_in oi = { .flags = O_RDONLY };
        struct fuse_open_out oo;
        assert_int_equal(t->ops->open(&q.r, first, &oi, &oo), -EMFILE);
    }
    /* FORGET gives the budget back. */
    pt_t_forget(t, first, UINT64_MAX);
    assert_true(pt_t_lookup(t, FUSE_ROOT_ID, "f59") != 0);
    pt_t_down(t);
}

static void test_fd_budget_setter(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_entry_out e;

    pt_t_write_file(t, "a", "x");
    pt_t_write_file(t, "b", "x");
    pt_t_set_fd_budget(t->fs, pt_t_fds_in_use(t->fs) + 1);
    assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "a", &e), 0);
    if (pt_t_handles(t->fs) == PT_HANDLES_NEVER) {
        assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "b", &e), -EMFILE);
    } else {
        /* No fd per inode: only the open takes the last fd. */
        struct fuse_open_in oi = { .flags = O_RDONLY };
        struct fuse_open_out oo;
        assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "b", &e), 0);
        assert_int_equal(t->ops->open(&q.r, e.nodeid, &oi, &oo), 0);
        assert_int_equal(t->ops->open(&q.r, e.nodeid, &oi, &oo), -EMFILE);
    }
    pt_t_down(t);
}

static void test_reset_keeps_root_only(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_getattr_in gi = { 0 };
    struct fuse_attr_out ao;

    pt_t_write_file(t, "a", "x");
    mkdir(pt_t_path(t, "d"), 0755);
    uint64_t a = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    uint64_t d = pt_t_lookup(t, FUSE_ROOT_ID, "d");
    uint64_t fh = pt_t_open(t, a, O_RDWR);
    {
        struct fuse_open_in oi = { 0 };
        struct fuse_open_out oo;
        assert_int_equal(t->ops->opendir(&q.r, d, &oi, &oo), 0);
    }
    assert_int_equal(pt_t_inode_count(t->fs), 3);
    pt_fs_reset(t->fs);
    assert_int_equal(pt_t_inode_count(t->fs), 1);
    assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, 1));
    assert_int_equal(t->ops->getattr(&q.r, a, &gi, &ao), -ESTALE);
    assert_int_equal(pt_t_release(t, a, fh), -EBADF);
    assert_int_equal(t->ops->getattr(&q.r, FUSE_ROOT_ID, &gi, &ao), 0);
    pt_t_down(t);
}

static void test_unsupported_options_refused(void **state)
{
    struct pt_t *t = pt_t_new();

    /* A --translate-uid rule the grammar refuses. */
    t->cfg.translate_uid = (char *)"map:1000:0";
    assert_int_equal(pt_t_start(t), -EINVAL);
    t->cfg.translate_uid = NULL;
    t->cfg.translate_gid = (char *)"map:1:1:1 map:1:2:1";
    assert_int_equal(pt_t_start(t), -EINVAL);
    t->cfg.translate_gid = NULL;
    t->cfg.xattr = false;
    t->cfg.posix_acl = true;
    assert_int_equal(pt_t_start(t), -EINVAL);
    t->cfg.posix_acl = false;
    t->cfg.shared_dir = (char *)"/nonexistent/vufsd";
    assert_int_equal(pt_t_start(t), -ENOENT);
    t->cfg.shared_dir = t->dir;
    assert_int_equal(pt_t_start(t), 0);
    pt_t_down(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_counts_and_forget_clamps),
        cmocka_unit_test(test_lookup_known_swapped_missing),
        cmocka_unit_test(test_root_survives_forget),
        cmocka_unit_test(test_generation_distinguishes_reuse),
        cmocka_unit_test(test_handle_keeps_inode),
        cmocka_unit_test(test_bad_handles),
        cmocka_unit_test(test_forget_races_getattr_read),
        cmocka_unit_test(test_refs_take_no_table_lock),
        cmocka_unit_test(test_refs_race_lookup_forget),
        cmocka_unit_test(test_fd_budget_lookup_storm),
        cmocka_unit_test(test_fd_budget_setter),
        cmocka_unit_test(test_reset_keeps_root_only),
        cmocka_unit_test(test_unsupported_options_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
