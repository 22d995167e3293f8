/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Operations against a real temporary share: names, special files, creds, flags. */
#include <limits.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "pt_test.h"

static struct fuse_entry_out do_mkdir(struct pt_t *t, uint64_t parent, const char *name,
                                      mode_t mode, int *ret, uint32_t uid, uint32_t gid)
{
    struct pt_t_req q;
    struct fuse_mkdir_in in = { .mode = mode, .umask = 0 };
    struct fuse_entry_out e = { 0 };

    pt_t_req_init(t, &q, uid, gid);
    *ret = t->ops->mkdir(&q.r, parent, name, &in, &e);
    return e;
}

static int do_create(struct pt_t *t, uint64_t parent, const char *name, uint32_t flags,
                     mode_t mode, uint32_t uid, uint32_t gid, struct fuse_entry_out *e,
                     struct fuse_open_out *o)
{
    struct pt_t_req q;
    struct fuse_create_in in = { .flags = flags, .mode = mode, .umask = 022 };

    pt_t_req_init(t, &q, uid, gid);
    return t->ops->create(&q.r, parent, name, &in, e, o);
}

static int do_mknod(struct pt_t *t, const char *name, mode_t mode, dev_t rdev,
                    struct fuse_entry_out *e)
{
    PT_REQ(t, q);
    struct fuse_mknod_in in = { .mode = mode,
                                .rdev = (uint32_t)((minor(rdev) & 0xff) | (major(rdev) << 8)) };
    return t->ops->mknod(&q.r, FUSE_ROOT_ID, name, &in, e);
}

static int do_open(struct pt_t *t, uint64_t node, uint32_t flags, uint64_t *fh)
{
    PT_REQ(t, q);
    struct fuse_open_in in = { .flags = flags };
    struct fuse_open_out out = { 0 };
    int ret = t->ops->open(&q.r, node, &in, &out);
    *fh = out.fh;
    return ret;
}

static bool host_exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* ---- Names (CVE-2026-47243 and friends) ----------------------------------------- */

static void test_names_are_validated(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_entry_out e;
    struct fuse_open_out o;
    char longname[300];
    char victim[128];
    int ret;

    snprintf(victim, sizeof(victim), "%s-victim", t->dir);
    unlink(victim);
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';

    /* A symlink whose NAME is an absolute host path creates nothing on the host. */
    assert_int_equal(t->ops->symlink(&q.r, FUSE_ROOT_ID, victim, "/etc/passwd", &e), -EINVAL);
    assert_false(host_exists(victim));
    assert_int_equal(t->ops->symlink(&q.r, FUSE_ROOT_ID, "../x", "/", &e), -EINVAL);
    assert_int_equal(t->ops->symlink(&q.r, FUSE_ROOT_ID, "..", "/", &e), -EINVAL);
    assert_int_equal(t->ops->symlink(&q.r, FUSE_ROOT_ID, "", "/", &e), -EINVAL);
    assert_int_equal(t->ops->symlink(&q.r, FUSE_ROOT_ID, longname, "/", &e), -ENAMETOOLONG);
    do_mkdir(t, FUSE_ROOT_ID, "a/b", 0755, &ret, 0, 0);
    assert_int_equal(ret, -EINVAL);
    do_mkdir(t, FUSE_ROOT_ID, ".", 0755, &ret, 0, 0);
    assert_int_equal(ret, -EINVAL);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, victim, O_RDWR, 0644, 0, 0, &e, &o), -EINVAL);
    assert_false(host_exists(victim));
    assert_int_equal(t->ops->unlink(&q.r, FUSE_ROOT_ID, "../etc"), -EINVAL);
    assert_int_equal(t->ops->rename(&q.r, FUSE_ROOT_ID, "a", FUSE_ROOT_ID, "/tmp/x", 0), -EINVAL);
    assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "a/../..", &e), -EINVAL);
    /* ".." at the root stays at the root. */
    assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "..", &e), 0);
    assert_int_equal(e.nodeid, FUSE_ROOT_ID);
    /* A name op on a non-directory parent. */
    pt_t_write_file(t, "f", "x");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    assert_int_equal(t->ops->lookup(&q.r, f, "x", &e), -ENOTDIR);
    do_mkdir(t, f, "x", 0755, &ret, 0, 0);
    assert_int_equal(ret, -ENOTDIR);
    /* An unknown parent. */
    assert_int_equal(t->ops->lookup(&q.r, 999999, "x", &e), -ESTALE);
    /* A symlink target may be anything; it is only resolved by the client. */
    assert_int_equal(t->ops->symlink(&q.r, FUSE_ROOT_ID, "ln", "/etc/passwd", &e), 0);
    char buf[64];
    PT_REQ(t, q2);
    assert_int_equal(t->ops->readlink(&q2.r, e.nodeid, buf, sizeof(buf)), 11);
    assert_memory_equal(buf, "/etc/passwd", 11);
    /* ... but a path: not empty, shorter than PATH_MAX; and the parent's errors come first. */
    char *far = malloc(PATH_MAX + 1);
    assert_non_null(far);
    memset(far, 'a', PATH_MAX);
    far[PATH_MAX] = '\0';
    PT_REQ(t, q3);
    assert_int_equal(t->ops->symlink(&q3.r, FUSE_ROOT_ID, "ln2", "", &e), -ENOENT);
    assert_int_equal(t->ops->symlink(&q3.r, FUSE_ROOT_ID, "ln2", far, &e), -ENAMETOOLONG);
    assert_int_equal(t->ops->symlink(&q3.r, f, "ln2", "", &e), -ENOTDIR);
    assert_int_equal(t->ops->symlink(&q3.r, FUSE_ROOT_ID, "ln2", far + 1, &e), 0);
    free(far);
    pt_t_down(t);
}

/* ---- Special files are never opened (CVE-2020-35517) ----------------------------- */

static void test_special_files_never_opened(void **state)
{
    struct pt_t *t = pt_t_up();
    struct fuse_entry_out e, e2;
    struct fuse_open_out o;
    uint64_t fh;

    /*
     * A FIFO. The test holds both ends open on the host so that a daemon that
     * wrongly opened it would succeed (and fail the assertions) instead of
     * blocking the test.
     */
    assert_int_equal(do_mknod(t, "fifo", S_IFIFO | 0666, 0, &e), 0);
    assert_true(S_ISFIFO(e.attr.mode));
    int hold = open(pt_t_path(t, "fifo"), O_RDWR | O_NONBLOCK);
    assert_true(hold >= 0);
    assert_int_equal(do_open(t, e.nodeid, O_RDONLY, &fh), -ENXIO);
    assert_int_equal(do_open(t, e.nodeid, O_WRONLY, &fh), -ENXIO);
    /* CREATE of an existing FIFO name without O_EXCL must not open it either. */
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "fifo", O_RDONLY, 0644, 0, 0, &e2, &o), -ENXIO);
    {
        PT_REQ(t, q);
        struct fuse_setattr_in si = { .valid = FATTR_SIZE, .size = 0 };
        struct fuse_attr_out ao;
        assert_int_equal(t->ops->setattr(&q.r, e.nodeid, &si, &ao), -EINVAL);
        assert_int_equal(t->ops->syncfs(&q.r, e.nodeid), -ENXIO);
        struct fuse_open_in oi = { 0 };
        assert_int_equal(t->ops->opendir(&q.r, e.nodeid, &oi, &o), -ENOTDIR);
    }
    if (geteuid() == 0) {
        /* A device node the client made (as root): never opened either. */
        assert_int_equal(do_mknod(t, "null", S_IFCHR | 0666, makedev(1, 3), &e), 0);
        struct stat st;
        assert_int_equal(lstat(pt_t_path(t, "null"), &st), 0);
        assert_true(S_ISCHR(st.st_mode));
        assert_int_equal(major(st.st_rdev), 1);
        assert_int_equal(minor(st.st_rdev), 3);
        assert_int_equal(do_open(t, e.nodeid, O_RDWR, &fh), -ENXIO);
    }
    close(hold);
    /* A symlink is not followed by OPEN. */
    assert_int_equal(symlink("fifo", pt_t_path(t, "lnk")), 0);
    uint64_t l = pt_t_lookup(t, FUSE_ROOT_ID, "lnk");
    assert_int_equal(do_open(t, l, O_RDONLY, &fh), -ELOOP);
    /* Unknown types from MKNOD. */
    assert_int_equal(do_mknod(t, "bad", 0170000 | 0644, 0, &e), -EINVAL);
    assert_int_equal(do_mknod(t, "bad", S_IFDIR | 0755, 0, &e), -EINVAL);
    assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, (long)pt_t_inode_count(t->fs)));
    pt_t_down(t);
}

/* ---- Credentials and SGID (CVE-2022-0358) ------------------------------------------ */

static void test_sgid_dir_caller_not_in_group(void **state)
{
    if (geteuid() != 0) {
        print_message("SKIP: needs root to act as another uid\n");
        skip();
    }
    struct pt_t *t = pt_t_up();
    struct fuse_entry_out e;
    struct fuse_open_out o;
    struct stat st;
    int ret;

    /* Root-owned 03777 directory (sticky + SGID, world-writable). */
    assert_int_equal(mkdir(pt_t_path(t, "sg"), 0777), 0);
    assert_int_equal(chown(pt_t_path(t, "sg"), 0, 0), 0);
    assert_int_equal(chmod(pt_t_path(t, "sg"), 03777), 0);
    uint64_t sg = pt_t_lookup(t, FUSE_ROOT_ID, "sg");

    assert_int_equal(do_create(t, sg, "f", O_RDWR, S_IFREG | 02755, 1000, 1000, &e, &o), 0);
    assert_int_equal(stat(pt_t_path(t, "sg/f"), &st), 0);
    assert_int_equal(st.st_uid, 1000);
    assert_int_equal(st.st_gid, 0);             /* inherited from the SGID dir */
    assert_int_equal(st.st_mode & S_ISGID, 0);  /* not an SGID-root file */
    assert_int_equal(e.attr.mode & S_ISGID, 0);

    /* MKNOD of a regular file and MKDIR: same rules as a local filesystem. */
    {
        struct pt_t_req q;
        struct fuse_mknod_in mi = { .mode = S_IFREG | 02755 };
        pt_t_req_init(t, &q, 1000, 1000);
        assert_int_equal(t->ops->mknod(&q.r, sg, "g", &mi, &e), 0);
        assert_int_equal(stat(pt_t_path(t, "sg/g"), &st), 0);
        assert_int_equal(st.st_mode & S_ISGID, 0);
        assert_int_equal(st.st_gid, 0);
    }
    do_mkdir(t, sg, "d", 0755, &ret, 1000, 1000);
    assert_int_equal(ret, 0);
    assert_int_equal(stat(pt_t_path(t, "sg/d"), &st), 0);
    assert_true(st.st_mode & S_ISGID); /* directories inherit SGID */
    assert_int_equal(st.st_uid, 1000);
    assert_int_equal(st.st_gid, 0);

    /* The caller's permissions apply: uid 1000 cannot create in a 0755 root dir. */
    do_mkdir(t, FUSE_ROOT_ID, "nope", 0755, &ret, 1000, 1000);
    assert_int_equal(ret, -EACCES);
    /* And the daemon thread is root again afterwards. */
    assert_int_equal(geteuid(), 0);
    assert_int_equal(getegid(), 0);
    do_mkdir(t, FUSE_ROOT_ID, "yes", 0755, &ret, 0, 0);
    assert_int_equal(ret, 0);

    /* ACCESS as the caller. */
    {
        struct pt_t_req q;
        struct fuse_access_in ai = { .mask = R_OK };
        pt_t_write_file(t, "secret", "x");
        chmod(pt_t_path(t, "secret"), 0600);
        uint64_t s = pt_t_lookup(t, FUSE_ROOT_ID, "secret");
        pt_t_req_init(t, &q, 1000, 1000);
        assert_int_equal(t->ops->access(&q.r, s, &ai), -EACCES);
        pt_t_req_init(t, &q, 0, 0);
        assert_int_equal(t->ops->access(&q.r, s, &ai), 0);
    }
    pt_t_down(t);
}

/* ---- Read-only ------------------------------------------------------------------------ */

static void test_readonly(void **state)
{
    struct pt_t *t = pt_t_new();
    struct fuse_entry_out e;
    struct fuse_open_out o;
    uint64_t fh;
    char buf[8];
    int ret;

    t->cfg.readonly = true;
    assert_int_equal(pt_t_start(t), 0);
    pt_t_write_file(t, "f", "data");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    PT_REQ(t, q);
    do_mkdir(t, FUSE_ROOT_ID, "d", 0755, &ret, 0, 0);
    assert_int_equal(ret, -EROFS);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "n", O_RDWR, 0644, 0, 0, &e, &o), -EROFS);
    assert_int_equal(do_mknod(t, "n", S_IFREG | 0644, 0, &e), -EROFS);
    assert_int_equal(t->ops->symlink(&q.r, FUSE_ROOT_ID, "s", "f", &e), -EROFS);
    assert_int_equal(t->ops->unlink(&q.r, FUSE_ROOT_ID, "f"), -EROFS);
    assert_int_equal(t->ops->rename(&q.r, FUSE_ROOT_ID, "f", FUSE_ROOT_ID, "g", 0), -EROFS);
    assert_int_equal(t->ops->link(&q.r, f, FUSE_ROOT_ID, "g", &e), -EROFS);
    assert_int_equal(do_open(t, f, O_WRONLY, &fh), -EROFS);
    assert_int_equal(do_open(t, f, O_RDONLY | O_TRUNC, &fh), -EROFS);
    struct fuse_setattr_in si = { .valid = FATTR_MODE, .mode = 0600 };
    struct fuse_attr_out ao;
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), -EROFS);
    assert_int_equal(t->ops->setxattr(&q.r, f, "user.x", "1", 1, 0, 0), -EROFS);
    assert_int_equal(t->ops->removexattr(&q.r, f, "user.x"), -EROFS);
    /* Reading still works. */
    assert_int_equal(do_open(t, f, O_RDONLY, &fh), 0);
    assert_int_equal(pt_t_pread(t, f, fh, buf, 4, 0), 4);
    assert_int_equal(pt_t_pwrite(t, f, fh, "zz", 2, 0, 0), -EROFS);
    struct fuse_fallocate_in fi = { .fh = fh, .length = 10 };
    assert_int_equal(t->ops->fallocate(&q.r, f, &fi), -EROFS);
    assert_true(host_exists(pt_t_path(t, "f")));
    pt_t_down(t);
}

/* ---- RENAME2 ----------------------------------------------------------------------- */

static void read_host(struct pt_t *t, const char *name, char *buf, size_t n)
{
    int fd = open(pt_t_path(t, name), O_RDONLY);
    assert_true(fd >= 0);
    ssize_t k = read(fd, buf, n - 1);
    assert_true(k >= 0);
    buf[k] = '\0';
    close(fd);
}

static void test_rename2_flags(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    char buf[16];

    pt_t_write_file(t, "a", "A");
    pt_t_write_file(t, "b", "B");
    assert_int_equal(t->ops->rename(&q.r, FUSE_ROOT_ID, "a", FUSE_ROOT_ID, "b", RENAME_NOREPLACE),
                     -EEXIST);
    assert_int_equal(t->ops->rename(&q.r, FUSE_ROOT_ID, "a", FUSE_ROOT_ID, "b", RENAME_EXCHANGE),
                     0);
    read_host(t, "a", buf, sizeof(buf));
    assert_string_equal(buf, "B");
    read_host(t, "b", buf, sizeof(buf));
    assert_string_equal(buf, "A");
    assert_int_equal(t->ops->rename(&q.r, FUSE_ROOT_ID, "a", FUSE_ROOT_ID, "c", 1u << 7), -EINVAL);
    assert_int_equal(t->ops->rename(&q.r, FUSE_ROOT_ID, "a", FUSE_ROOT_ID, "c", 0), 0);
    assert_false(host_exists(pt_t_path(t, "a")));
    if (geteuid() == 0) {
        assert_int_equal(
            t->ops->rename(&q.r, FUSE_ROOT_ID, "c", FUSE_ROOT_ID, "d", RENAME_WHITEOUT), 0);
        struct stat st;
        assert_int_equal(lstat(pt_t_path(t, "c"), &st), 0);
        assert_true(S_ISCHR(st.st_mode)); /* the whiteout: a 0/0 char device */
        assert_int_equal(st.st_rdev, makedev(0, 0));
    }
    pt_t_down(t);
}

/* ---- TMPFILE, LINK ----------------------------------------------------------------- */

static void test_tmpfile_then_link(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_create_in ci = { .flags = O_RDWR, .mode = S_IFREG | 0600 };
    struct fuse_entry_out e, le;
    struct fuse_open_out o;
    char buf[16];

    assert_int_equal(t->ops->tmpfile(&q.r, FUSE_ROOT_ID, "tmp", &ci, &e, &o), 0);
    assert_true(e.nodeid != 0);
    assert_int_equal(e.attr.nlink, 0);
    assert_int_equal(pt_t_pwrite(t, e.nodeid, o.fh, "secret", 6, 0, 0), 6);
    assert_int_equal(t->ops->link(&q.r, e.nodeid, FUSE_ROOT_ID, "named", &le), 0);
    assert_int_equal(le.nodeid, e.nodeid);
    read_host(t, "named", buf, sizeof(buf));
    assert_string_equal(buf, "secret");
    assert_int_equal(pt_t_release(t, e.nodeid, o.fh), 0);
    /* Read-only tmpfiles make no sense. */
    ci.flags = O_RDONLY;
    assert_int_equal(t->ops->tmpfile(&q.r, FUSE_ROOT_ID, "tmp", &ci, &e, &o), -EINVAL);
    pt_t_down(t);
}

/* ---- LSEEK, COPY_FILE_RANGE, FALLOCATE, STATX ---------------------------------------------- */

static void test_lseek_data_hole(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_entry_out e;
    struct fuse_open_out o;
    char blk[4096];

    memset(blk, 'x', sizeof(blk));
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "sparse", O_RDWR, 0644, 0, 0, &e, &o), 0);
    assert_int_equal(pt_t_pwrite(t, e.nodeid, o.fh, blk, sizeof(blk), 0, 0), 4096);
    assert_int_equal(pt_t_pwrite(t, e.nodeid, o.fh, blk, sizeof(blk), 1 << 20, 0), 4096);
    struct fuse_lseek_in li = { .fh = o.fh, .offset = 0, .whence = SEEK_DATA };
    struct fuse_lseek_out lo;
    assert_int_equal(t->ops->lseek(&q.r, e.nodeid, &li, &lo), 0);
    assert_int_equal(lo.offset, 0);
    li.whence = SEEK_HOLE;
    assert_int_equal(t->ops->lseek(&q.r, e.nodeid, &li, &lo), 0);
    assert_true(lo.offset >= 4096 && lo.offset < (1 << 20));
    li.whence = SEEK_DATA;
    li.offset = 8192;
    assert_int_equal(t->ops->lseek(&q.r, e.nodeid, &li, &lo), 0);
    assert_true(lo.offset > 8192 && lo.offset <= (1 << 20));
    li.offset = (1 << 20) + 8192;
    assert_int_equal(t->ops->lseek(&q.r, e.nodeid, &li, &lo), -ENXIO);
    li.whence = SEEK_END;
    assert_int_equal(t->ops->lseek(&q.r, e.nodeid, &li, &lo), -EINVAL);
    pt_t_down(t);
}

static void test_copy_file_range_and_fallocate(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_entry_out ea, eb;
    struct fuse_open_out oa, ob;
    char buf[32];
    struct stat st;

    assert_int_equal(do_create(t, FUSE_ROOT_ID, "a", O_RDWR, 0644, 0, 0, &ea, &oa), 0);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "b", O_RDWR, 0644, 0, 0, &eb, &ob), 0);
    assert_int_equal(pt_t_pwrite(t, ea.nodeid, oa.fh, "0123456789", 10, 0, 0), 10);
    struct fuse_copy_file_range_in ci = { .fh_in = oa.fh, .off_in = 2, .nodeid_out = eb.nodeid,
                                          .fh_out = ob.fh, .off_out = 1, .len = 5 };
    assert_int_equal(t->ops->copy_file_range(&q.r, ea.nodeid, &ci), 5);
    memset(buf, 0, sizeof(buf));
    assert_int_equal(pt_t_pread(t, eb.nodeid, ob.fh, buf, sizeof(buf), 0), 6);
    assert_memory_equal(buf, "\0" "23456", 6);
    ci.flags = 1;
    assert_int_equal(t->ops->copy_file_range(&q.r, ea.nodeid, &ci), -EINVAL);
    ci.flags = 0;
    ci.fh_out = oa.fh; /* handle of another node than nodeid_out */
    assert_int_equal(t->ops->copy_file_range(&q.r, ea.nodeid, &ci), -EBADF);

    struct fuse_fallocate_in fi = { .fh = ob.fh, .offset = 0, .length = 65536 };
    assert_int_equal(t->ops->fallocate(&q.r, eb.nodeid, &fi), 0);
    assert_int_equal(stat(pt_t_path(t, "b"), &st), 0);
    assert_int_equal(st.st_size, 65536);
    fi.mode = 0x4000;
    assert_int_equal(t->ops->fallocate(&q.r, eb.nodeid, &fi), -EOPNOTSUPP);
    fi.mode = 0;
    fi.offset = UINT64_MAX - 10;
    assert_int_equal(t->ops->fallocate(&q.r, eb.nodeid, &fi), -EFBIG);

    struct fuse_fsync_in si = { .fh = ob.fh, .fsync_flags = 1 };
    assert_int_equal(t->ops->fsync(&q.r, eb.nodeid, &si), 0);
    si.fsync_flags = 0;
    assert_int_equal(t->ops->fsync(&q.r, eb.nodeid, &si), 0);
    struct fuse_flush_in fl = { .fh = ob.fh, .lock_owner = 7 };
    assert_int_equal(t->ops->flush(&q.r, eb.nodeid, &fl), 0);
    assert_int_equal(t->ops->syncfs(&q.r, FUSE_ROOT_ID), 0);
    pt_t_down(t);
}

static void test_statx_getattr_statfs(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);

    pt_t_write_file(t, "f", "12345");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    struct fuse_statx_in si = { .sx_mask = STATX_BASIC_STATS | STATX_BTIME };
    struct fuse_statx_out so;
    assert_int_equal(t->ops->statx(&q.r, f, &si, &so), 0);
    assert_int_equal(so.stat.size, 5);
    assert_true(S_ISREG(so.stat.mode));
    assert_true(so.stat.mask & STATX_SIZE);
    struct stat st;
    assert_int_equal(stat(pt_t_path(t, "f"), &st), 0);
    assert_int_equal(so.stat.ino, st.st_ino);
    struct fuse_getattr_in gi = { 0 };
    struct fuse_attr_out ao;
    assert_int_equal(t->ops->getattr(&q.r, f, &gi, &ao), 0);
    assert_int_equal(ao.attr.size, 5);
    assert_int_equal(ao.attr_valid, 1); /* --cache auto */
    struct fuse_statfs_out sfo;
    assert_int_equal(t->ops->statfs(&q.r, f, &sfo), 0);
    assert_true(sfo.st.bsize > 0 && sfo.st.namelen > 0);
    pt_t_down(t);
}

/* ---- SETATTR, WRITE kill flags ------------------------------------------------------ */

static void test_setattr(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_attr_out ao;
    struct stat st;

    pt_t_write_file(t, "f", "0123456789");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    struct fuse_setattr_in si = { .valid = FATTR_SIZE, .size = 3 };
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
    assert_int_equal(ao.attr.size, 3);
    si = (struct fuse_setattr_in){ .valid = FATTR_MODE, .mode = 0640 };
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
    assert_int_equal(ao.attr.mode & 07777, 0640);
    si = (struct fuse_setattr_in){ .valid = FATTR_ATIME | FATTR_MTIME, .atime = 1000,
                                   .mtime = 2000, .mtimensec = 5 };
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
    assert_int_equal(stat(pt_t_path(t, "f"), &st), 0);
    assert_int_equal(st.st_atime, 1000);
    assert_int_equal(st.st_mtime, 2000);
    assert_int_equal(st.st_mtim.tv_nsec, 5);
    /* MTIME_NOW only: atime stays (UTIME_OMIT). */
    si = (struct fuse_setattr_in){ .valid = FATTR_MTIME | FATTR_MTIME_NOW };
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
    assert_int_equal(stat(pt_t_path(t, "f"), &st), 0);
    assert_int_equal(st.st_atime, 1000);
    assert_true(st.st_mtime > 2000);
    si = (struct fuse_setattr_in){ .valid = FATTR_MTIME, .mtimensec = 1000000000 };
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), -EINVAL);
    /* With a handle. */
    uint64_t fh = pt_t_open(t, f, O_RDWR);
    si = (struct fuse_setattr_in){ .valid = FATTR_SIZE | FATTR_FH, .fh = fh, .size = 1 };
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
    assert_int_equal(ao.attr.size, 1);
    si.fh = fh + 99;
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), -EBADF);
    /* Ownership (root only). */
    if (geteuid() == 0) {
        assert_int_equal(chmod(pt_t_path(t, "f"), 06755), 0);
        si = (struct fuse_setattr_in){ .valid = FATTR_UID | FATTR_GID | FATTR_KILL_SUIDGID,
                                       .uid = 1000, .gid = 1000 };
        assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
        assert_int_equal(ao.attr.uid, 1000);
        assert_int_equal(ao.attr.gid, 1000);
        assert_int_equal(ao.attr.mode & 06000, 0);
    }
    /* WRITE with FUSE_WRITE_KILL_SUIDGID clears set-id bits first. */
    assert_int_equal(chmod(pt_t_path(t, "f"), 06755), 0);
    assert_int_equal(pt_t_pwrite(t, f, fh, "z", 1, 0, 0), 1);
    assert_int_equal(stat(pt_t_path(t, "f"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 06755); /* root writer, no flag: kept */
    assert_int_equal(pt_t_pwrite(t, f, fh, "z", 1, 0, FUSE_WRITE_KILL_SUIDGID), 1);
    assert_int_equal(stat(pt_t_path(t, "f"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(pt_t_release(t, f, fh), 0);
    /* OPEN with O_TRUNC and FUSE_OPEN_KILL_SUIDGID (killpriv_v2 negotiated). */
    pt_t_down(t);
    t = pt_t_new();
    t->cfg.killpriv_v2 = true;
    assert_int_equal(pt_t_start(t), 0);
    struct fll_conn conn = { .capable = FUSE_HANDLE_KILLPRIV_V2 };
    assert_int_equal(t->ops->init(t->fs, &conn), 0);
    pt_t_write_file(t, "k", "data");
    assert_int_equal(chmod(pt_t_path(t, "k"), 06755), 0);
    f = pt_t_lookup(t, FUSE_ROOT_ID, "k");
    {
        PT_REQ(t, q2);
        struct fuse_open_in oi = { .flags = O_RDWR | O_TRUNC };
        struct fuse_open_out oo;
        assert_int_equal(t->ops->open(&q2.r, f, &oi, &oo), 0);
        assert_int_equal(stat(pt_t_path(t, "k"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 06755); /* no flag: kept */
        oi.open_flags = FUSE_OPEN_KILL_SUIDGID;
        assert_int_equal(t->ops->open(&q2.r, f, &oi, &oo), 0);
        assert_int_equal(stat(pt_t_path(t, "k"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
    }
    pt_t_down(t);
}

/* ---- Directories --------------------------------------------------------------------- */

static int count_names(const char *buf, size_t len, bool plus, int *with_node)
{
    int n = 0;
    size_t pos = 0;

    *with_node = 0;
    while (pos < len) {
        const struct fuse_dirent *d;
        if (plus) {
            const struct fuse_direntplus *dp = (const void *)(buf + pos);
            if (dp->entry_out.nodeid)
                (*with_node)++;
            d = &dp->dirent;
            pos += FUSE_DIRENTPLUS_SIZE(dp);
        } else {
            d = (const void *)(buf + pos);
            pos += FUSE_DIRENT_SIZE(d);
        }
        n++;
    }
    return n;
}

/* The inode number of the entry called name in a READDIR(PLUS) reply, or 0. */
static uint64_t entry_ino(const char *buf, size_t len, bool plus, const char *name)
{
    size_t pos = 0;

    while (pos < len) {
        const struct fuse_dirent *d;
        if (plus) {
            const struct fuse_direntplus *dp = (const void *)(buf + pos);
            d = &dp->dirent;
            pos += FUSE_DIRENTPLUS_SIZE(dp);
        } else {
            d = (const void *)(buf + pos);
            pos += FUSE_DIRENT_SIZE(d);
        }
        if (d->namelen == strlen(name) && memcmp(d->name, name, d->namelen) == 0)
            return d->ino;
    }
    return 0;
}

/* The share's root lists ".." as itself: the host directory above stays unnamed. */
static void test_readdir_root_dotdot(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    char *buf = malloc(65536);
    struct stat root, above, sub;
    char up[80];

    snprintf(up, sizeof(up), "%s/..", t->dir);
    assert_int_equal(stat(t->dir, &root), 0);
    assert_int_equal(stat(up, &above), 0);
    assert_true(root.st_ino != above.st_ino);
    assert_int_equal(mkdir(pt_t_path(t, "sub"), 0755), 0);
    assert_int_equal(stat(pt_t_path(t, "sub"), &sub), 0);
    uint64_t d = pt_t_lookup(t, FUSE_ROOT_ID, "sub");
    for (int plus = 0; plus < 2; plus++) {
        struct fuse_open_in oi = { 0 };
        struct fuse_open_out oo;
        struct fll_dirbuf db = { .buf = buf, .size = 65536, .plus = plus };
        struct fuse_read_in ri = { .offset = 0, .size = 65536 };
        assert_int_equal(t->ops->opendir(&q.r, FUSE_ROOT_ID, &oi, &oo), 0);
        ri.fh = oo.fh;
        assert_int_equal(t->ops->readdir(&q.r, FUSE_ROOT_ID, &ri, &db), 0);
        assert_int_equal(entry_ino(buf, db.len, plus, "."), root.st_ino);
        assert_int_equal(entry_ino(buf, db.len, plus, ".."), root.st_ino);
        struct fuse_release_in rel = { .fh = oo.fh };
        assert_int_equal(t->ops->releasedir(&q.r, FUSE_ROOT_ID, &rel), 0);
        /* Below the root, ".." is the real parent: the root. */
        db.len = 0;
        assert_int_equal(t->ops->opendir(&q.r, d, &oi, &oo), 0);
        ri.fh = oo.fh;
        assert_int_equal(t->ops->readdir(&q.r, d, &ri, &db), 0);
        assert_int_equal(entry_ino(buf, db.len, plus, "."), sub.st_ino);
        assert_int_equal(entry_ino(buf, db.len, plus, ".."), root.st_ino);
        rel.fh = oo.fh;
        assert_int_equal(t->ops->releasedir(&q.r, d, &rel), 0);
    }
    free(buf);
    pt_t_down(t);
}

static void test_readdir_and_plus(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    char *buf = malloc(65536);
    int with_node;
    char name[16];

    for (int k = 0; k < 50; k++) {
        snprintf(name, sizeof(name), "file%02d", k);
        pt_t_write_file(t, name, "x");
    }
    struct fuse_open_in oi = { 0 };
    struct fuse_open_out oo;
    assert_int_equal(t->ops->opendir(&q.r, FUSE_ROOT_ID, &oi, &oo), 0);

    /* Plain, in small pieces: every entry exactly once across the pieces. */
    int total = 0;
    uint64_t off = 0;
    for (int round = 0; round < 100; round++) {
        struct fll_dirbuf db = { .buf = buf, .size = 512, .plus = false };
        struct fuse_read_in ri = { .fh = oo.fh, .offset = off, .size = 512 };
        assert_int_equal(t->ops->readdir(&q.r, FUSE_ROOT_ID, &ri, &db), 0);
        if (db.len == 0)
            break;
        total += count_names(buf, db.len, false, &with_node);
        /* Continue after the last entry. */
        size_t pos = 0;
        while (pos < db.len) {
            const struct fuse_dirent *d = (const void *)(buf + pos);
            off = d->off;
            pos += FUSE_DIRENT_SIZE(d);
        }
    }
    assert_int_equal(total, 52); /* 50 + "." + ".." */

    /* Plus: one lookup per real entry. */
    size_t before = pt_t_inode_count(t->fs);
    struct fll_dirbuf db = { .buf = buf, .size = 65536, .plus = true };
    struct fuse_read_in ri = { .fh = oo.fh, .offset = 0, .size = 65536 };
    assert_int_equal(t->ops->readdir(&q.r, FUSE_ROOT_ID, &ri, &db), 0);
    assert_int_equal(count_names(buf, db.len, true, &with_node), 52);
    assert_int_equal(with_node, 50);
    assert_int_equal(pt_t_inode_count(t->fs), before + 50);

    /* Plus into a buffer that ends mid-way: entries not sent cost no lookup. */
    pt_fs_reset(t->fs);
    assert_int_equal(t->ops->opendir(&q.r, FUSE_ROOT_ID, &oi, &oo), 0);
    db = (struct fll_dirbuf){ .buf = buf, .size = 1024, .plus = true };
    ri.fh = oo.fh;
    ri.size = 1024;
    assert_int_equal(t->ops->readdir(&q.r, FUSE_ROOT_ID, &ri, &db), 0);
    count_names(buf, db.len, true, &with_node);
    assert_int_equal(pt_t_inode_count(t->fs), 1 + (size_t)with_node);

    struct fuse_fsync_in fsi = { .fh = oo.fh };
    assert_int_equal(t->ops->fsyncdir(&q.r, FUSE_ROOT_ID, &fsi), 0);
    struct fuse_release_in rel = { .fh = oo.fh };
    assert_int_equal(t->ops->releasedir(&q.r, FUSE_ROOT_ID, &rel), 0);
    assert_int_equal(t->ops->releasedir(&q.r, FUSE_ROOT_ID, &rel), -EBADF);
    /* READDIR on a file handle. */
    pt_t_write_file(t, "plain", "x");
    uint64_t p = pt_t_lookup(t, FUSE_ROOT_ID, "plain");
    uint64_t fh = pt_t_open(t, p, O_RDONLY);
    ri.fh = fh;
    assert_int_equal(t->ops->readdir(&q.r, p, &ri, &db), -ENOTDIR);
    free(buf);
    pt_t_down(t);
}

static void test_dir_ops(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    struct fuse_entry_out e;
    int ret;

    struct fuse_entry_out d = do_mkdir(t, FUSE_ROOT_ID, "d", 0750, &ret, 0, 0);
    assert_int_equal(ret, 0);
    assert_true(S_ISDIR(d.attr.mode));
    assert_int_equal(d.attr.mode & 0777, 0750);
    pt_t_write_file(t, "d/f", "x");
    assert_int_equal(t->ops->rmdir(&q.r, FUSE_ROOT_ID, "d"), -ENOTEMPTY);
    assert_int_equal(t->ops->unlink(&q.r, d.nodeid, "f"), 0);
    assert_int_equal(t->ops->rmdir(&q.r, FUSE_ROOT_ID, "d"), 0);
    assert_false(host_exists(pt_t_path(t, "d")));
    assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "d", &e), -ENOENT);
    /* A directory cannot be opened with OPEN. */
    d = do_mkdir(t, FUSE_ROOT_ID, "d2", 0755, &ret, 0, 0);
    uint64_t fh;
    assert_int_equal(do_open(t, d.nodeid, O_RDONLY, &fh), -EISDIR);
    /* The umask of create/mkdir applies. */
    struct fuse_mkdir_in mi = { .mode = 0777, .umask = 027 };
    assert_int_equal(t->ops->mkdir(&q.r, FUSE_ROOT_ID, "m", &mi, &e), 0);
    assert_int_equal(e.attr.mode & 0777, 0750);
    pt_t_down(t);
}

static void test_create_open_flags(void **state)
{
    struct pt_t *t = pt_t_new();
    struct fuse_entry_out e, e2;
    struct fuse_open_out o, o2;
    char buf[16];

    t->cfg.cache = PT_CACHE_NEVER;
    assert_int_equal(pt_t_start(t), 0);
    {
        PT_REQ(t, q);
        struct fll_conn conn = { .capable = ~0ull };
        assert_int_equal(t->ops->init(t->fs, &conn), 0);
        (void)q;
    }
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "c", O_RDWR, S_IFREG | 0666, 0, 0, &e, &o), 0);
    assert_int_equal(e.attr.mode & 0777, 0644); /* umask 022 */
    assert_true(o.open_flags & FOPEN_DIRECT_IO);
    assert_int_equal(e.entry_valid, 0);
    /* Existing name, no O_EXCL: opened; with O_EXCL: EEXIST; with O_TRUNC: truncated. */
    assert_int_equal(pt_t_pwrite(t, e.nodeid, o.fh, "abc", 3, 0, 0), 3);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "c", O_RDWR, 0644, 0, 0, &e2, &o2), 0);
    assert_int_equal(e2.nodeid, e.nodeid);
    assert_int_equal(pt_t_pread(t, e2.nodeid, o2.fh, buf, 3, 0), 3);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "c", O_RDWR | O_EXCL, 0644, 0, 0, &e2, &o2),
                     -EEXIST);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "c", O_RDWR | O_TRUNC, 0644, 0, 0, &e2, &o2), 0);
    struct stat st;
    assert_int_equal(stat(pt_t_path(t, "c"), &st), 0);
    assert_int_equal(st.st_size, 0);
    /* A symlink with the name: not followed. */
    assert_int_equal(symlink("c", pt_t_path(t, "l")), 0);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "l", O_RDWR, 0644, 0, 0, &e2, &o2), -ELOOP);
    /* Bad access mode, bad type. */
    uint64_t fh;
    assert_int_equal(do_open(t, e.nodeid, O_ACCMODE, &fh), -EINVAL);
    assert_int_equal(do_create(t, FUSE_ROOT_ID, "x", O_RDWR, S_IFDIR | 0644, 0, 0, &e2, &o2),
                     -EINVAL);
    pt_t_down(t);
}

static void test_writeback_opens_wronly_as_rdwr(void **state)
{
    struct pt_t *t = pt_t_new();
    char buf[8];

    t->cfg.writeback = true;
    assert_int_equal(pt_t_start(t), 0);
    struct fll_conn conn = { .capable = FUSE_WRITEBACK_CACHE | FUSE_ASYNC_READ };
    assert_int_equal(t->ops->init(t->fs, &conn), 0);
    assert_true(conn.want & FUSE_WRITEBACK_CACHE);
    assert_true(conn.want & FUSE_ASYNC_READ);
    assert_false(conn.want & FUSE_POSIX_LOCKS); /* not offered, not wanted */
    pt_t_write_file(t, "f", "abcd");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    uint64_t fh = pt_t_open(t, f, O_WRONLY | O_APPEND);
    /* The client's page cache may read; and O_APPEND is the client's business. */
    assert_int_equal(pt_t_pread(t, f, fh, buf, 4, 0), 4);
    assert_int_equal(pt_t_pwrite(t, f, fh, "X", 1, 0, 0), 1);
    read_host(t, "f", buf, sizeof(buf));
    assert_string_equal(buf, "Xbcd");
    pt_t_down(t);
}

static void test_init_flags(void **state)
{
    struct pt_t *t = pt_t_new();

    t->cfg.readdirplus = false;
    t->cfg.posix_acl = true;
    t->cfg.killpriv_v2 = true;
    t->cfg.announce_submounts = true;
    t->cfg.allow_mmap = true;
    assert_int_equal(pt_t_start(t), 0);
    struct fll_conn conn = { .capable = ~0ull & ~(uint64_t)FUSE_SUBMOUNTS };
    assert_int_equal(t->ops->init(t->fs, &conn), 0);
    assert_false(conn.want & FUSE_DO_READDIRPLUS);
    assert_false(conn.want & FUSE_WRITEBACK_CACHE);
    assert_false(conn.want & FUSE_SUBMOUNTS);
    assert_true(conn.want & FUSE_POSIX_ACL);
    assert_true(conn.want & FUSE_DONT_MASK);
    assert_true(conn.want & FUSE_HANDLE_KILLPRIV_V2);
    assert_true(conn.want & FUSE_DIRECT_IO_ALLOW_MMAP);
    assert_true(conn.want & FUSE_POSIX_LOCKS);
    assert_true(conn.want & FUSE_FLOCK_LOCKS);
    assert_true(conn.want & FUSE_SETXATTR_EXT);
    assert_true(conn.want & FUSE_ASYNC_DIO); /* else the client sends aio one at a time */
    assert_false(conn.want & FUSE_EXPORT_SUPPORT); /* "." and ".." are refused */
    pt_t_down(t);
}

/* libvirt's -o no_posix_lock,no_flock: the guest keeps those locks local. */
static void test_init_locks_off(void **state)
{
    struct pt_t *t = pt_t_new();

    t->cfg.no_posix_lock = true;
    t->cfg.no_flock = true;
    assert_int_equal(pt_t_start(t), 0);
    struct fll_conn conn = { .capable = ~0ull };
    assert_int_equal(t->ops->init(t->fs, &conn), 0);
    assert_false(conn.want & FUSE_POSIX_LOCKS);
    assert_false(conn.want & FUSE_FLOCK_LOCKS);
    assert_true(conn.want & FUSE_ASYNC_READ);
    pt_t_down(t);
}

/* ---- xattrs ------------------------------------------------------------------------- */

static void test_xattr_plain(void **state)
{
    struct pt_t *t = pt_t_up();
    PT_REQ(t, q);
    char buf[256];

    pt_t_write_file(t, "f", "x");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    assert_int_equal(t->ops->setxattr(&q.r, f, "user.k", "val", 3, 0, 0), 0);
    assert_int_equal(t->ops->getxattr(&q.r, f, "user.k", NULL, 0), 3);
    assert_int_equal(t->ops->getxattr(&q.r, f, "user.k", buf, sizeof(buf)), 3);
    assert_memory_equal(buf, "val", 3);
    assert_int_equal(t->ops->getxattr(&q.r, f, "user.k", buf, 1), -ERANGE);
    assert_int_equal(t->ops->setxattr(&q.r, f, "user.k", "v", 1, XATTR_CREATE, 0), -EEXIST);
    assert_int_equal(t->ops->setxattr(&q.r, f, "user.k", "v", 1, 0x100, 0), -EINVAL);
    ssize_t n = t->ops->listxattr(&q.r, f, buf, sizeof(buf));
    assert_true(n >= 7);
    assert_non_null(memmem(buf, (size_t)n, "user.k", 7));
    assert_int_equal(t->ops->removexattr(&q.r, f, "user.k"), 0);
    assert_int_equal(t->ops->getxattr(&q.r, f, "user.k", buf, sizeof(buf)), -ENODATA);
    /* ACL names without --posix-acl. */
    assert_int_equal(t->ops->getxattr(&q.r, f, "system.posix_acl_access", buf, sizeof(buf)),
                     -EOPNOTSUPP);
    /*
     * A symlink pointing outside the share: xattr calls act on the link itself,
     * never on its target (the /proc magic link stops at the symlink).
     */
    char outside[128];
    snprintf(outside, sizeof(outside), "%s-outside", t->dir);
    int ofd = open(outside, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(ofd >= 0);
    close(ofd);
    assert_int_equal(setxattr(outside, "user.secret", "s3", 2, 0), 0);
    assert_int_equal(symlink(outside, pt_t_path(t, "out")), 0);
    uint64_t ol = pt_t_lookup(t, FUSE_ROOT_ID, "out");
    assert_int_equal(t->ops->getxattr(&q.r, ol, "user.secret", buf, sizeof(buf)), -ENODATA);
    assert_true(t->ops->setxattr(&q.r, ol, "user.evil", "1", 1, 0, 0) < 0);
    assert_int_equal(t->ops->removexattr(&q.r, ol, "user.secret") < 0, 1);
    assert_int_equal(getxattr(outside, "user.secret", buf, sizeof(buf)), 2);
    assert_int_equal(getxattr(outside, "user.evil", buf, sizeof(buf)), -1);
    n = t->ops->listxattr(&q.r, ol, buf, sizeof(buf));
    assert_true(n <= 0 || memmem(buf, (size_t)n, "user.secret", 11) == NULL);
    unlink(outside);
    /* xattrs on a FIFO are handled through /proc without opening it. */
    struct fuse_entry_out e;
    assert_int_equal(do_mknod(t, "fifo", S_IFIFO | 0644, 0, &e), 0);
    n = t->ops->getxattr(&q.r, e.nodeid, "user.k", buf, sizeof(buf));
    assert_true(n == -ENODATA || n == -EPERM);
    pt_t_down(t);

    /* Without --xattr, ENOSYS so the client stops asking. */
    t = pt_t_new();
    t->cfg.xattr = false;
    assert_int_equal(pt_t_start(t), 0);
    PT_REQ(t, q2);
    assert_int_equal(t->ops->getxattr(&q2.r, FUSE_ROOT_ID, "user.k", buf, 10), -ENOSYS);
    assert_int_equal(t->ops->listxattr(&q2.r, FUSE_ROOT_ID, buf, 10), -ENOSYS);
    pt_t_down(t);
}

static void test_xattr_mapped(void **state)
{
    struct pt_t *t = pt_t_new();
    char buf[256];

    t->cfg.xattrmap = (char *)":prefix:all::user.virtiofs.::bad:all:::";
    assert_int_equal(pt_t_start(t), 0);
    PT_REQ(t, q);
    pt_t_write_file(t, "f", "x");
    assert_int_equal(setxattr(pt_t_path(t, "f"), "user.hostonly", "h", 1, 0), 0);
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    assert_int_equal(t->ops->setxattr(&q.r, f, "user.k", "val", 3, 0, 0), 0);
    ssize_t hn = getxattr(pt_t_path(t, "f"), "user.virtiofs.user.k", buf, sizeof(buf));
    assert_int_equal(hn, 3);
    /* The list shows the client's names only. */
    ssize_t n = t->ops->listxattr(&q.r, f, NULL, 0);
    assert_int_equal(n, 7);
    assert_int_equal(t->ops->listxattr(&q.r, f, buf, sizeof(buf)), 7);
    assert_string_equal(buf, "user.k");
    assert_int_equal(t->ops->listxattr(&q.r, f, buf, 3), -ERANGE);
    assert_int_equal(t->ops->getxattr(&q.r, f, "user.k", buf, sizeof(buf)), 3);
    pt_t_down(t);
}

/* CVE-2021-20263: with a mapping, write/truncate/chown clear the REMAPPED capability. */
static void test_mapped_capability_cleared(void **state)
{
    struct pt_t *t = pt_t_new();
    const char cap[] = "fake-capability-blob";
    const char *mapped = "user.virtiofs.security.capability";
    char buf[64];

    t->cfg.xattrmap = (char *)":map:security.:user.virtiofs.:";
    assert_int_equal(pt_t_start(t), 0);
    PT_REQ(t, q);
    pt_t_write_file(t, "f", "data");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");

    /* WRITE */
    assert_int_equal(t->ops->setxattr(&q.r, f, "security.capability", cap, sizeof(cap), 0, 0), 0);
    assert_int_equal(getxattr(pt_t_path(t, "f"), mapped, buf, sizeof(buf)), (ssize_t)sizeof(cap));
    uint64_t fh = pt_t_open(t, f, O_RDWR);
    assert_int_equal(pt_t_pwrite(t, f, fh, "x", 1, 0, 0), 1);
    assert_int_equal(getxattr(pt_t_path(t, "f"), mapped, buf, sizeof(buf)), -1);
    assert_int_equal(errno, ENODATA);

    /* TRUNCATE (setattr size, no handle) */
    assert_int_equal(t->ops->setxattr(&q.r, f, "security.capability", cap, sizeof(cap), 0, 0), 0);
    struct fuse_setattr_in si = { .valid = FATTR_SIZE, .size = 1 };
    struct fuse_attr_out ao;
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
    assert_int_equal(getxattr(pt_t_path(t, "f"), mapped, buf, sizeof(buf)), -1);

    /* CHOWN */
    assert_int_equal(t->ops->setxattr(&q.r, f, "security.capability", cap, sizeof(cap), 0, 0), 0);
    si = (struct fuse_setattr_in){ .valid = FATTR_UID, .uid = geteuid() };
    assert_int_equal(t->ops->setattr(&q.r, f, &si, &ao), 0);
    assert_int_equal(getxattr(pt_t_path(t, "f"), mapped, buf, sizeof(buf)), -1);

    /* Other mapped names survive writes. */
    assert_int_equal(t->ops->setxattr(&q.r, f, "user.keep", "k", 1, 0, 0), 0);
    assert_int_equal(pt_t_pwrite(t, f, fh, "y", 1, 0, 0), 1);
    assert_int_equal(t->ops->getxattr(&q.r, f, "user.keep", buf, sizeof(buf)), 1);
    assert_int_equal(pt_t_release(t, f, fh), 0);
    pt_t_down(t);
}

/* --posix-acl: FUSE_DONT_MASK; the umask applies only without a default ACL. */
static void test_posix_acl_umask(void **state)
{
    struct pt_t *t = pt_t_new();
    struct fuse_entry_out e;
    /* system.posix_acl_default: version 2, USER_OBJ rwx, GROUP_OBJ rwx, OTHER rwx. */
    const uint32_t acl[] = { 2, 0x00070001, 0xffffffff, 0x00070004, 0xffffffff,
                             0x00070020, 0xffffffff };

    t->cfg.posix_acl = true;
    assert_int_equal(pt_t_start(t), 0);
    struct fll_conn conn = { .capable = FUSE_POSIX_ACL | FUSE_DONT_MASK };
    assert_int_equal(t->ops->init(t->fs, &conn), 0);
    assert_true(conn.want & FUSE_DONT_MASK);
    assert_int_equal(mkdir(pt_t_path(t, "acl"), 0777), 0);
    if (setxattr(pt_t_path(t, "acl"), "system.posix_acl_default", acl, sizeof(acl), 0) < 0) {
        pt_t_down(t);
        print_message("SKIP: no ACL support in this filesystem\n");
        skip();
    }
    uint64_t d = pt_t_lookup(t, FUSE_ROOT_ID, "acl");
    PT_REQ(t, q);
    struct fuse_mkdir_in mi = { .mode = 0777, .umask = 022 };
    assert_int_equal(t->ops->mkdir(&q.r, d, "sub", &mi, &e), 0);
    assert_int_equal(e.attr.mode & 0777, 0777); /* the default ACL decides */
    assert_int_equal(t->ops->mkdir(&q.r, FUSE_ROOT_ID, "plain", &mi, &e), 0);
    assert_int_equal(e.attr.mode & 0777, 0755); /* no default ACL: the umask */
    /* ACL names pass through with --posix-acl. */
    char buf[64];
    assert_true(t->ops->getxattr(&q.r, d, "system.posix_acl_default", buf, sizeof(buf)) > 0);
    pt_t_down(t);
}

/* --announce-submounts: a mount point inside the share is flagged FUSE_ATTR_SUBMOUNT. */
static void test_announce_submounts(void **state)
{
    struct pt_t *t = pt_t_new();
    struct fuse_entry_out e;

    assert_int_equal(mkdir(pt_t_path(t, "mnt"), 0755), 0);
    assert_int_equal(mkdir(pt_t_path(t, "plain"), 0755), 0);
    if (mount("vufsd-test", pt_t_path(t, "mnt"), "tmpfs", 0, "size=64k") < 0) {
        pt_t_down(t);
        print_message("SKIP: no CAP_SYS_ADMIN here\n");
        skip();
    }
    t->cfg.announce_submounts = true;
    assert_int_equal(pt_t_start(t), 0);
    {
        PT_REQ(t, q);
        assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "mnt", &e), 0);
        assert_true(e.attr.flags & FUSE_ATTR_SUBMOUNT);
        assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "plain", &e), 0);
        assert_false(e.attr.flags & FUSE_ATTR_SUBMOUNT);
    }
    pt_fs_free(t->fs);
    t->fs = NULL;
    /* Without the option: never flagged. */
    t->cfg.announce_submounts = false;
    fll_session_free(t->se);
    t->se = NULL;
    assert_int_equal(pt_t_start(t), 0);
    {
        PT_REQ(t, q);
        assert_int_equal(t->ops->lookup(&q.r, FUSE_ROOT_ID, "mnt", &e), 0);
        assert_false(e.attr.flags & FUSE_ATTR_SUBMOUNT);
    }
    pt_fs_free(t->fs);
    t->fs = NULL;
    assert_int_equal(umount2(pt_t_path(t, "mnt"), MNT_DETACH), 0);
    pt_t_down(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_are_validated),
        cmocka_unit_test(test_special_files_never_opened),
        cmocka_unit_test(test_sgid_dir_caller_not_in_group),
        cmocka_unit_test(test_readonly),
        cmocka_unit_test(test_rename2_flags),
        cmocka_unit_test(test_tmpfile_then_link),
        cmocka_unit_test(test_lseek_data_hole),
        cmocka_unit_test(test_copy_file_range_and_fallocate),
        cmocka_unit_test(test_statx_getattr_statfs),
        cmocka_unit_test(test_setattr),
        cmocka_unit_test(test_readdir_and_plus),
        cmocka_unit_test(test_readdir_root_dotdot),
        cmocka_unit_test(test_dir_ops),
        cmocka_unit_test(test_create_open_flags),
        cmocka_unit_test(test_writeback_opens_wronly_as_rdwr),
        cmocka_unit_test(test_init_flags),
        cmocka_unit_test(test_init_locks_off),
        cmocka_unit_test(test_xattr_plain),
        cmocka_unit_test(test_xattr_mapped),
        cmocka_unit_test(test_mapped_capability_cleared),
        cmocka_unit_test(test_announce_submounts),
        cmocka_unit_test(test_posix_acl_umask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
