/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Escapes from the shared directory, against the real vufsd binary through the
 * in-tree frontend:
 *
 *   test_escape --vufsd PATH [--extra "OPTIONS"] [--log FILE]
 *
 * Layout on the host (all under one fresh /tmp/vufsd-esc-XXXXXX):
 *   share/             the shared directory
 *   outside/secret     a file the guest must never read or change
 *   outside/empty/     a directory the guest must never list or fill
 *
 * One daemon serves every case (the last case checks it still serves and exits
 * 0 on hang-up). Every case records the state outside the share first and
 * compares it afterwards: listings, contents, link targets and the full lstat
 * (inode, mode, links, size, atime, mtime, ctime). The atimes are set far in
 * the past, so with relatime any read or listing of an outside object moves
 * its atime. Nothing may appear next to the base directory either
 * (/tmp/vufsd-esc-XXXXXX-*).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <glob.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "vfe.h"
#include "../it_util.h"

#define SECRET   "TOP-SECRET-host-data-0123456789"
#define SNAP_MAX 64

static const char *opt_vufsd;
static const char *opt_extra = "";
static const char *opt_log;

struct snap_ent {
    char path[256];
    struct stat st;
    char data[512]; /* file contents, link target, or sorted listing */
    ssize_t dlen;
};

struct snap {
    struct snap_ent e[SNAP_MAX];
    unsigned n;
};

struct env {
    char base[64];
    char share[96];
    char outside[96];
    char secret[128];
    char empty[128];
    char evil[128];    /* an absolute path next to base: must never appear */
    char evil_up[160]; /* "../../<base name>-up": /tmp/<base name>-up from the share */
    char cmd[1024];
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    struct vfe_fuse_init_result init;
    struct snap before;
    bool closed;
};

static struct env *g;

/* ---- Host helpers -------------------------------------------------------------------- */

static const char *spath(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof(buf), "%s/%s", g->share, name);
    return buf;
}

static void write_file(const char *path, const char *data)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted, comma-separated listing of dir into out. */
static void listing(const char *dir, char *out, size_t cap, char **names, unsigned *nnames,
                    unsigned max)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    unsigned n = 0;
    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        assert_true(n < max);
        names[n] = strdup(de->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_str);
    out[0] = '\0';
    for (unsigned k = 0; k < n; k++) {
        strncat(out, names[k], cap - strlen(out) - 1);
        strncat(out, ",", cap - strlen(out) - 1);
    }
    *nnames = n;
}

static void snap_walk(struct snap *s, const char *path, bool skip_share)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(s->n < SNAP_MAX);
    struct snap_ent *e = &s->e[s->n++];
    snprintf(e->path, sizeof(e->path), "%s", path);
    e->dlen = 0;
    if (S_ISREG(st.st_mode)) {
        int fd = open(path, O_RDONLY | O_NOFOLLOW);
        assert_true(fd >= 0);
        e->dlen = read(fd, e->data, sizeof(e->data));
        close(fd);
    } else if (S_ISLNK(st.st_mode)) {
        e->dlen = readlink(path, e->data, sizeof(e->data));
    } else if (S_ISDIR(st.st_mode)) {
        char *names[SNAP_MAX];
        unsigned n;
        listing(path, e->data, sizeof(e->data), names, &n, SNAP_MAX);
        e->dlen = (ssize_t)strlen(e->data);
        for (unsigned k = 0; k < n; k++) {
            if (!(skip_share && !strcmp(names[k], "share"))) {
                char sub[512];
                snprintf(sub, sizeof(sub), "%s/%s", path, names[k]);
                snap_walk(s, sub, false);
            }
            free(names[k]);
        }
    }
}

/* Records everything outside the share, then pushes the atimes into the past
 * and records the final lstat. */
static void snap_take(struct snap *s)
{
    s->n = 0;
    snap_walk(s, g->base, true);
    for (unsigned k = 0; k < s->n; k++) {
        struct timespec ts[2] = {{.tv_sec = 1}, {.tv_nsec = UTIME_OMIT}};
        assert_int_equal(utimensat(AT_FDCWD, s->e[k].path, ts, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(lstat(s->e[k].path, &s->e[k].st), 0);
    }
}

static bool ts_eq(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Nothing next to base (absolute names like /tmp/<base>-evil). */
static void assert_nothing_next_to_base(void)
{
    char pat[96];
    glob_t gl;
    snprintf(pat, sizeof(pat), "%s?*", g->base);
    int rc = glob(pat, GLOB_NOSORT, NULL, &gl);
    if (rc == 0)
        fprintf(stderr, "escape: %s appeared on the host\n", gl.gl_pathv[0]);
    assert_int_equal(rc, GLOB_NOMATCH);
    globfree(&gl);
}

/* Compares the outside with g->before, then takes a new baseline. */
static void check_outside_(const char *what, int line)
{
    struct snap *now = malloc(sizeof(*now));
    assert_non_null(now);
    for (unsigned k = 0; k < g->before.n; k++) {
        const struct snap_ent *b = &g->before.e[k];
        struct stat st;
        if (lstat(b->path, &st) != 0) {
            fprintf(stderr, "escape (%s, line %d): %s vanished\n", what, line, b->path);
            fail();
        }
        bool same = st.st_ino == b->st.st_ino && st.st_mode == b->st.st_mode &&
                    st.st_nlink == b->st.st_nlink && st.st_uid == b->st.st_uid &&
                    st.st_gid == b->st.st_gid && st.st_size == b->st.st_size &&
                    ts_eq(st.st_atim, b->st.st_atim) && ts_eq(st.st_mtim, b->st.st_mtim) &&
                    ts_eq(st.st_ctim, b->st.st_ctim);
        if (!same) {
            fprintf(stderr,
                    "escape (%s, line %d): %s changed (ino %lu/%lu mode %o/%o nlink %lu/%lu "
                    "size %ld/%ld atime %ld/%ld mtime %ld/%ld ctime %ld/%ld)\n",
                    what, line, b->path, (unsigned long)b->st.st_ino, (unsigned long)st.st_ino,
                    b->st.st_mode, st.st_mode, (unsigned long)b->st.st_nlink,
                    (unsigned long)st.st_nlink, (long)b->st.st_size, (long)st.st_size,
                    (long)b->st.st_atime, (long)st.st_atime, (long)b->st.st_mtime,
                    (long)st.st_mtime, (long)b->st.st_ctime, (long)st.st_ctime);
            fail();
        }
    }
    snap_take(now);
    if (now->n != g->before.n) {
        fprintf(stderr, "escape (%s, line %d): %u objects outside, was %u\n", what, line, now->n,
                g->before.n);
        fail();
    }
    for (unsigned k = 0; k < now->n; k++) {
        const struct snap_ent *a = &g->before.e[k], *b = &now->e[k];
        if (strcmp(a->path, b->path) || a->dlen != b->dlen ||
            (a->dlen > 0 && memcmp(a->data, b->data, (size_t)a->dlen))) {
            fprintf(stderr, "escape (%s, line %d): %s differs (was %.*s)\n", what, line, a->path,
                    (int)(a->dlen > 0 ? a->dlen : 0), a->data);
            fail();
        }
    }
    g->before = *now;
    free(now);
    assert_nothing_next_to_base();
}
#define check_outside(what) check_outside_((what), __LINE__)

/* ---- FUSE helpers -------------------------------------------------------------------- */

static int call(uint32_t opcode, uint64_t nodeid, const void *arg, uint32_t arg_len,
                const char *name, const char *name2, void *out, uint32_t out_len)
{
    struct vfe_fuse_op op = {.opcode = opcode,
                             .nodeid = nodeid,
                             .arg = arg,
                             .arg_len = arg_len,
                             .name = name,
                             .name2 = name2,
                             .out_arg = out,
                             .out_arg_len = out_len};
    return vfe_fuse_call(g->fuse, 1, &op);
}

static void forget(uint64_t nodeid, uint64_t n)
{
    assert_int_equal(vfe_fuse_forget(g->fuse, nodeid, n), 0);
}

static void assert_alive(void)
{
    struct fuse_attr_out ao;
    int status;
    assert_int_equal(vfe_fuse_getattr(g->fuse, FUSE_ROOT_ID, &ao), 0);
    assert_true(S_ISDIR(ao.attr.mode));
    assert_false(vfe_conn_backend_exited(vfe_dev_conn(g->dev), &status));
}

static bool contains_secret(const char *buf, ssize_t len)
{
    return len >= (ssize_t)strlen(SECRET) && memmem(buf, (size_t)len, SECRET, strlen(SECRET));
}

/*
 * OPEN (flags) and READ of a node that must not lead outside: either OPEN is
 * refused, or the read fails or returns something else than the secret.
 */
static void assert_open_read_safe(uint64_t nodeid, uint32_t flags)
{
    struct fuse_open_out oo;
    char buf[256];
    int rc = vfe_fuse_open(g->fuse, nodeid, flags, &oo);
    if (rc < 0) {
        assert_true(rc == -ELOOP || rc == -EACCES || rc == -EINVAL || rc == -EPERM ||
                    rc == -ENXIO || rc == -EISDIR || rc == -ENOENT);
        return;
    }
    ssize_t n = vfe_fuse_read(g->fuse, nodeid, oo.fh, 0, buf, sizeof(buf));
    if (n > 0 && contains_secret(buf, n))
        fprintf(stderr, "escape: node %lu read the outside secret\n", (unsigned long)nodeid);
    assert_false(n > 0 && contains_secret(buf, n));
    vfe_fuse_release(g->fuse, nodeid, oo.fh, flags);
}

/* ---- Setup ----------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    g = calloc(1, sizeof(*g));
    if (!g)
        return -1;
    strcpy(g->base, "/tmp/vufsd-esc-XXXXXX");
    if (!mkdtemp(g->base))
        return -1;
    chmod(g->base, 0755);
    snprintf(g->share, sizeof(g->share), "%s/share", g->base);
    snprintf(g->outside, sizeof(g->outside), "%s/outside", g->base);
    snprintf(g->secret, sizeof(g->secret), "%s/secret", g->outside);
    snprintf(g->empty, sizeof(g->empty), "%s/empty", g->outside);
    snprintf(g->evil, sizeof(g->evil), "%s-evil", g->base);
    snprintf(g->evil_up, sizeof(g->evil_up), "../../%s-up", g->base + strlen("/tmp/"));
    if (mkdir(g->share, 0755) || mkdir(g->outside, 0755) || mkdir(g->empty, 0755))
        return -1;
    int fd = open(g->secret, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || write(fd, SECRET, strlen(SECRET)) != (ssize_t)strlen(SECRET))
        return -1;
    close(fd);

    snprintf(g->cmd, sizeof(g->cmd),
             "%s --socket-path={socket} --shared-dir={dir} --log-level=warn --xattr %s", opt_vufsd,
             opt_extra);
    struct vfe_dev_config cfg = {
        .conn = {.backend_cmd = g->cmd,
                 .dir = g->share,
                 .backend_log = opt_log,
                 .timeout_ms = 20000},
        .request_queues = 1,
        .queue_size = 128,
    };
    if (vfe_dev_connect(&cfg, &g->dev) || vfe_dev_start(g->dev))
        return -1;
    struct vfe_fuse_config fc = {.depth = 16,
                                 .timeout_ms = 20000,
                                 .pid = 77,
                                 .init_flags = FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS};
    if (vfe_fuse_new(g->dev, &fc, &g->fuse) || vfe_fuse_init(g->fuse, &g->init))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (!g)
        return 0;
    if (!g->closed) {
        vfe_fuse_free(g->fuse);
        vfe_dev_close(g->dev);
    }
    char pat[96];
    glob_t gl;
    snprintf(pat, sizeof(pat), "%s?*", g->base);
    if (glob(pat, GLOB_NOSORT, NULL, &gl) == 0) {
        for (size_t k = 0; k < gl.gl_pathc; k++)
            it_rm_tree(gl.gl_pathv[k]);
        globfree(&gl);
    }
    it_rm_tree(g->base);
    free(g);
    g = NULL;
    return 0;
}

/* Each case: a known share content and a fresh baseline of the outside. */
static int case_setup(void **state)
{
    (void)state;
    if (g->closed)
        return -1;
    snap_take(&g->before);
    return 0;
}

/* ---- 1. Path-like names in every name-taking op ----------------------------------------- */

struct create_out {
    struct fuse_entry_out e;
    struct fuse_open_out o;
};

static void test_bad_names_everywhere(void **state)
{
    (void)state;
    struct fuse_entry_out eo, fo, dobj;
    struct create_out co;
    char abs_secret[160], abs_empty[160];
    snprintf(abs_secret, sizeof(abs_secret), "%s", g->secret);
    snprintf(abs_empty, sizeof(abs_empty), "%s", g->empty);

    write_file(spath("f"), "file-in-share");
    assert_int_equal(mkdir(spath("d"), 0755), 0);
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "f", &fo), 0);
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "d", &dobj), 0);
    check_outside("setup");

    const char *bad[] = {"..",
                         ".",
                         g->evil,
                         g->evil_up,
                         "../outside/evil",
                         "../outside/secret",
                         "../outside/empty",
                         abs_secret,
                         abs_empty,
                         "a/b",
                         "d/",
                         "/",
                         "//",
                         "f/..",
                         "../share/f"};
    const uint64_t parents[] = {FUSE_ROOT_ID, dobj.nodeid};
    for (size_t p = 0; p < 2; p++) {
        uint64_t par = parents[p];
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
            const char *n = bad[k];
            struct fuse_mknod_in mn = {.mode = S_IFREG | 0644};
            struct fuse_mknod_in mf = {.mode = S_IFIFO | 0644};
            struct fuse_mkdir_in md = {.mode = 0755};
            struct fuse_link_in li = {.oldnodeid = fo.nodeid};
            struct fuse_rename_in rn = {.newdir = par};
            struct fuse_rename2_in r2 = {.newdir = par};
            struct fuse_create_in ci = {.flags = O_RDWR | O_CREAT | O_TRUNC, .mode = 0644};

            assert_int_equal(call(FUSE_LOOKUP, par, NULL, 0, n, NULL, &eo, sizeof(eo)), -EINVAL);
            assert_int_equal(call(FUSE_CREATE, par, &ci, sizeof(ci), n, NULL, &co, sizeof(co)),
                             -EINVAL);
            assert_int_equal(call(FUSE_MKNOD, par, &mn, sizeof(mn), n, NULL, &eo, sizeof(eo)),
                             -EINVAL);
            assert_int_equal(call(FUSE_MKNOD, par, &mf, sizeof(mf), n, NULL, &eo, sizeof(eo)),
                             -EINVAL);
            assert_int_equal(call(FUSE_MKDIR, par, &md, sizeof(md), n, NULL, &eo, sizeof(eo)),
                             -EINVAL);
            /* CVE-2026-47243: the NAME of a SYMLINK is a host path. */
            assert_int_equal(call(FUSE_SYMLINK, par, NULL, 0, n, abs_secret, &eo, sizeof(eo)),
                             -EINVAL);
            assert_int_equal(call(FUSE_LINK, par, &li, sizeof(li), n, NULL, &eo, sizeof(eo)),
                             -EINVAL);
            /* Both names of RENAME and RENAME2 (every flag). */
            assert_int_equal(call(FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), "f", n, NULL, 0),
                             -EINVAL);
            assert_int_equal(call(FUSE_RENAME, par, &rn, sizeof(rn), n, "g", NULL, 0), -EINVAL);
            const uint32_t r2flags[] = {0, RENAME_NOREPLACE, RENAME_EXCHANGE};
            for (size_t fl = 0; fl < 3; fl++) {
                r2.flags = r2flags[fl];
                assert_int_equal(call(FUSE_RENAME2, FUSE_ROOT_ID, &r2, sizeof(r2), "f", n, NULL, 0),
                                 -EINVAL);
                assert_int_equal(call(FUSE_RENAME2, par, &r2, sizeof(r2), n, "g", NULL, 0),
                                 -EINVAL);
            }
            assert_int_equal(call(FUSE_UNLINK, par, NULL, 0, n, NULL, NULL, 0), -EINVAL);
            assert_int_equal(call(FUSE_RMDIR, par, NULL, 0, n, NULL, NULL, 0), -EINVAL);
            /*
             * TMPFILE's name is the kernel's placeholder for an unnamed dentry
             * (fll.h: bounded, NUL-terminated, never a path): it may succeed,
             * but only as an unnamed file in the parent, so nothing named
             * appears anywhere (the share's listing is checked at the end).
             */
            struct fuse_create_in ti = {.flags = O_RDWR, .mode = 0644};
            int rc = call(FUSE_TMPFILE, par, &ti, sizeof(ti), n, NULL, &co, sizeof(co));
            if (rc == 0) {
                assert_true(S_ISREG(co.e.attr.mode));
                assert_int_equal(co.e.attr.nlink, 0);
                assert_int_equal(vfe_fuse_write(g->fuse, co.e.nodeid, co.o.fh, 0, "tmp", 3), 3);
                assert_int_equal(vfe_fuse_release(g->fuse, co.e.nodeid, co.o.fh, O_RDWR), 0);
                forget(co.e.nodeid, 1);
            } else {
                assert_true(rc == -EINVAL || rc == -ENOSYS || rc == -EOPNOTSUPP);
            }
            check_outside(n);
        }
    }

    /* xattr names that look like paths are names, not paths: whatever the
     * daemon answers, nothing outside moves and no such path appears. */
    char absx[192];
    snprintf(absx, sizeof(absx), "%s-xattr", g->base);
    const char *xn[] = {"user./../../x", "user.../outside/secret",     "trusted./../x", absx,
                        "user./tmp/x",   "security./../outside/secret"};
    for (size_t k = 0; k < sizeof(xn) / sizeof(xn[0]); k++) {
        struct fuse_setxattr_in si = {.size = 3};
        struct vfe_fuse_op set = {.opcode = FUSE_SETXATTR,
                                  .nodeid = FUSE_ROOT_ID,
                                  .arg = &si,
                                  .arg_len = 8,
                                  .name = xn[k],
                                  .extra = "val",
                                  .extra_len = 3};
        int rc = vfe_fuse_call(g->fuse, 1, &set);
        char buf[64];
        struct fuse_getxattr_in gi = {.size = sizeof(buf)};
        struct vfe_fuse_op get = {.opcode = FUSE_GETXATTR,
                                  .nodeid = FUSE_ROOT_ID,
                                  .arg = &gi,
                                  .arg_len = sizeof(gi),
                                  .name = xn[k],
                                  .out_arg = buf,
                                  .out_arg_len = sizeof(buf)};
        int grc = vfe_fuse_call(g->fuse, 1, &get);
        if (rc == 0) {
            /* Stored as an attribute of the share's root, nowhere else. */
            assert_int_equal(grc, 0);
            assert_int_equal(get.out_arg_got, 3);
            assert_memory_equal(buf, "val", 3);
            assert_int_equal(call(FUSE_REMOVEXATTR, FUSE_ROOT_ID, NULL, 0, xn[k], NULL, NULL, 0),
                             0);
        } else {
            assert_true(grc < 0);
        }
        check_outside(xn[k]);
    }
    assert_false(access(absx, F_OK) == 0);

    /* The share holds exactly what it held. */
    char list[512], *names[16];
    unsigned nn;
    listing(g->share, list, sizeof(list), names, &nn, 16);
    for (unsigned k = 0; k < nn; k++)
        free(names[k]);
    assert_string_equal(list, "d,f,");
    listing(spath("d"), list, sizeof(list), names, &nn, 16);
    for (unsigned k = 0; k < nn; k++)
        free(names[k]);
    assert_int_equal(nn, 0);
    forget(fo.nodeid, 1);
    forget(dobj.nodeid, 1);
    check_outside("end");
    assert_alive();
}

/* ---- 2. Symlinks pointing outside --------------------------------------------------- */

static void test_symlinks_out(void **state)
{
    (void)state;
    char rel_dir_secret[64];
    snprintf(rel_dir_secret, sizeof(rel_dir_secret), "../../outside/secret");
    assert_int_equal(mkdir(spath("sub"), 0755), 0);
    assert_int_equal(symlink(g->secret, spath("abs")), 0);
    assert_int_equal(symlink("../outside/secret", spath("rel")), 0);
    assert_int_equal(symlink(rel_dir_secret, spath("sub/rel2")), 0);
    assert_int_equal(symlink("rel", spath("chain")), 0);
    assert_int_equal(symlink(g->outside, spath("absdir")), 0);
    assert_int_equal(symlink("../outside", spath("reldir")), 0);
    /* The same made by the guest (SYMLINK's target is any string). */
    struct fuse_entry_out gl;
    assert_int_equal(call(FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, "gabs", g->secret, &gl, sizeof(gl)),
                     0);
    forget(gl.nodeid, 1);
    assert_int_equal(
        call(FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, "grel", "../outside/secret", &gl, sizeof(gl)), 0);
    forget(gl.nodeid, 1);
    assert_int_equal(
        call(FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, "gdir", "../outside", &gl, sizeof(gl)), 0);
    forget(gl.nodeid, 1);
    check_outside("setup");

    struct {
        const char *path, *target;
        bool dir;
    } links[] = {
        {"abs", g->secret, false},           {"rel", "../outside/secret", false},
        {"sub/rel2", rel_dir_secret, false}, {"chain", "rel", false},
        {"absdir", g->outside, true},        {"reldir", "../outside", true},
        {"gabs", g->secret, false},          {"grel", "../outside/secret", false},
        {"gdir", "../outside", true},
    };
    for (size_t k = 0; k < sizeof(links) / sizeof(links[0]); k++) {
        struct fuse_entry_out eo, x;
        assert_int_equal(vfe_fuse_lookup_path(g->fuse, links[k].path, &eo), 0);
        assert_true(S_ISLNK(eo.attr.mode));
        uint64_t n = eo.nodeid;

        assert_open_read_safe(n, O_RDONLY);
        assert_open_read_safe(n, O_RDWR);
        assert_open_read_safe(n, O_WRONLY | O_TRUNC);
        check_outside(links[k].path);

        /* READLINK may tell the target: it is only a string. */
        char tgt[256];
        struct vfe_fuse_op rl = {
            .opcode = FUSE_READLINK, .nodeid = n, .out_arg = tgt, .out_arg_len = sizeof(tgt) - 1};
        assert_int_equal(vfe_fuse_call(g->fuse, 1, &rl), 0);
        tgt[rl.out_arg_got] = '\0';
        assert_string_equal(tgt, links[k].target);

        /* The symlink as a directory: never followed. */
        struct fuse_open_out oo;
        int rc = vfe_fuse_opendir(g->fuse, n, &oo);
        assert_true(rc < 0);
        assert_true(vfe_fuse_lookup(g->fuse, n, "secret", &x) < 0);
        assert_true(vfe_fuse_lookup(g->fuse, n, "empty", &x) < 0);
        struct fuse_create_in ci = {.flags = O_RDWR | O_CREAT, .mode = 0644};
        struct create_out co;
        assert_true(call(FUSE_CREATE, n, &ci, sizeof(ci), "planted", NULL, &co, sizeof(co)) < 0);
        struct fuse_mkdir_in md = {.mode = 0755};
        assert_true(call(FUSE_MKDIR, n, &md, sizeof(md), "planted", NULL, &x, sizeof(x)) < 0);
        assert_true(call(FUSE_SYMLINK, n, NULL, 0, "planted", "x", &x, sizeof(x)) < 0);
        assert_true(call(FUSE_UNLINK, n, NULL, 0, "secret", NULL, NULL, 0) < 0);
        assert_true(call(FUSE_RMDIR, n, NULL, 0, "empty", NULL, NULL, 0) < 0);
        struct fuse_rename_in rn = {.newdir = n};
        write_file(spath("mv"), "moving");
        assert_true(call(FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), "mv", "moved", NULL, 0) < 0);
        assert_true(call(FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), "mv", "secret", NULL, 0) < 0);
        assert_int_equal(unlink(spath("mv")), 0);
        struct fuse_mknod_in mn = {.mode = S_IFREG | 0644};
        assert_true(call(FUSE_MKNOD, n, &mn, sizeof(mn), "planted", NULL, &x, sizeof(x)) < 0);
        check_outside(links[k].path);

        /* Attribute changes on the link node must not reach the target. */
        struct fuse_setattr_in sa = {.valid = FATTR_SIZE, .size = 0};
        struct fuse_attr_out ao;
        call(FUSE_SETATTR, n, &sa, sizeof(sa), NULL, NULL, &ao, sizeof(ao));
        struct fuse_setattr_in sm = {.valid = FATTR_MODE, .mode = 0777};
        call(FUSE_SETATTR, n, &sm, sizeof(sm), NULL, NULL, &ao, sizeof(ao));
        struct fuse_setattr_in st = {
            .valid = FATTR_MTIME | FATTR_ATIME, .mtime = 12345, .atime = 12345};
        call(FUSE_SETATTR, n, &st, sizeof(st), NULL, NULL, &ao, sizeof(ao));
        struct fuse_setxattr_in si = {.size = 3};
        struct vfe_fuse_op set = {.opcode = FUSE_SETXATTR,
                                  .nodeid = n,
                                  .arg = &si,
                                  .arg_len = 8,
                                  .name = "user.k",
                                  .extra = "val",
                                  .extra_len = 3};
        vfe_fuse_call(g->fuse, 1, &set);
        char xb[64];
        struct fuse_getxattr_in gi = {.size = sizeof(xb)};
        struct vfe_fuse_op get = {.opcode = FUSE_GETXATTR,
                                  .nodeid = n,
                                  .arg = &gi,
                                  .arg_len = sizeof(gi),
                                  .name = "user.k",
                                  .out_arg = xb,
                                  .out_arg_len = sizeof(xb)};
        assert_true(vfe_fuse_call(g->fuse, 1, &get) < 0);
        check_outside(links[k].path);

        /* A hard link of the symlink is still only a symlink. */
        struct fuse_link_in li = {.oldnodeid = n};
        char hl[32];
        snprintf(hl, sizeof(hl), "hl%zu", k);
        if (call(FUSE_LINK, FUSE_ROOT_ID, &li, sizeof(li), hl, NULL, &x, sizeof(x)) == 0) {
            assert_true(S_ISLNK(x.attr.mode));
            assert_open_read_safe(x.nodeid, O_RDONLY);
            assert_int_equal(call(FUSE_UNLINK, FUSE_ROOT_ID, NULL, 0, hl, NULL, NULL, 0), 0);
            forget(x.nodeid, 1);
        }
        check_outside(links[k].path);
    }
    /* A regular file next to them still works (the checks are not blanket refusals). */
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    char buf[64];
    write_file(spath("plain"), "plain-content");
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "plain", &eo), 0);
    assert_int_equal(vfe_fuse_open(g->fuse, eo.nodeid, O_RDONLY, &oo), 0);
    assert_int_equal(vfe_fuse_read(g->fuse, eo.nodeid, oo.fh, 0, buf, sizeof(buf)), 13);
    assert_memory_equal(buf, "plain-content", 13);
    vfe_fuse_release(g->fuse, eo.nodeid, oo.fh, O_RDONLY);
    check_outside("end");
    assert_alive();
}

/* ---- 3. Rename and link across the boundary ----------------------------------------- */

static void test_rename_link_boundary(void **state)
{
    (void)state;
    struct fuse_entry_out fo, dobj, x, sl;
    write_file(spath("rf"), "rename-me");
    assert_int_equal(mkdir(spath("rd"), 0755), 0);
    assert_int_equal(symlink(g->outside, spath("outlink")), 0);
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "rf", &fo), 0);
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "rd", &dobj), 0);
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "outlink", &sl), 0);
    check_outside("setup");

    const char *up[] = {"../x", "../outside/x", "../outside/secret", g->evil_up, g->evil};
    for (size_t k = 0; k < sizeof(up) / sizeof(up[0]); k++) {
        struct fuse_link_in li = {.oldnodeid = fo.nodeid};
        assert_int_equal(call(FUSE_LINK, FUSE_ROOT_ID, &li, sizeof(li), up[k], NULL, &x, sizeof(x)),
                         -EINVAL);
        struct fuse_rename_in rn = {.newdir = FUSE_ROOT_ID};
        assert_int_equal(call(FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), "rf", up[k], NULL, 0),
                         -EINVAL);
        assert_int_equal(call(FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), "rd", up[k], NULL, 0),
                         -EINVAL);
        struct fuse_rename2_in r2 = {.newdir = FUSE_ROOT_ID, .flags = RENAME_EXCHANGE};
        assert_int_equal(call(FUSE_RENAME2, FUSE_ROOT_ID, &r2, sizeof(r2), "rf", up[k], NULL, 0),
                         -EINVAL);
        check_outside(up[k]);
    }

    /* The root itself: it has no name in the share, so nothing can name it. */
    struct fuse_rename_in rn = {.newdir = FUSE_ROOT_ID};
    assert_int_equal(call(FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), ".", "x", NULL, 0), -EINVAL);
    assert_int_equal(call(FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), "..", "x", NULL, 0), -EINVAL);
    assert_int_equal(call(FUSE_RENAME, dobj.nodeid, &rn, sizeof(rn), "..", "x", NULL, 0), -EINVAL);
    struct fuse_rename_in rnd = {.newdir = dobj.nodeid};
    assert_int_equal(call(FUSE_RENAME, FUSE_ROOT_ID, &rnd, sizeof(rnd), "..", "x", NULL, 0),
                     -EINVAL);
    /* A directory into itself. */
    assert_true(call(FUSE_RENAME, FUSE_ROOT_ID, &rnd, sizeof(rnd), "rd", "inside", NULL, 0) < 0);
    /* Hard links of the root, or of a directory. */
    struct fuse_link_in lr = {.oldnodeid = FUSE_ROOT_ID};
    assert_true(call(FUSE_LINK, dobj.nodeid, &lr, sizeof(lr), "rootlink", NULL, &x, sizeof(x)) < 0);
    assert_true(call(FUSE_LINK, FUSE_ROOT_ID, &lr, sizeof(lr), "rootlink", NULL, &x, sizeof(x)) <
                0);
    /* Into a directory reached through a symlink to the outside. */
    struct fuse_rename_in ro = {.newdir = sl.nodeid};
    assert_true(call(FUSE_RENAME, FUSE_ROOT_ID, &ro, sizeof(ro), "rf", "x", NULL, 0) < 0);
    struct fuse_link_in lf = {.oldnodeid = fo.nodeid};
    assert_true(call(FUSE_LINK, sl.nodeid, &lf, sizeof(lf), "x", NULL, &x, sizeof(x)) < 0);
    /* Unknown or bogus parents. */
    struct fuse_rename_in rb = {.newdir = 0xdead0000beefULL};
    assert_true(call(FUSE_RENAME, FUSE_ROOT_ID, &rb, sizeof(rb), "rf", "x", NULL, 0) < 0);
    struct fuse_rename_in rz = {.newdir = 0};
    assert_true(call(FUSE_RENAME, FUSE_ROOT_ID, &rz, sizeof(rz), "rf", "x", NULL, 0) < 0);
    struct fuse_link_in lb = {.oldnodeid = 0xdead0000beefULL};
    assert_true(call(FUSE_LINK, FUSE_ROOT_ID, &lb, sizeof(lb), "x", NULL, &x, sizeof(x)) < 0);
    check_outside("root");

    /* The share still holds its objects where they were; the root is the root. */
    struct stat st;
    assert_int_equal(lstat(spath("rf"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(lstat(spath("rd"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_false(access(spath("x"), F_OK) == 0);
    assert_false(access(spath("rd/inside"), F_OK) == 0);
    assert_false(access(spath("rd/rootlink"), F_OK) == 0);
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "rf", &x), 0);
    assert_int_equal(x.nodeid, fo.nodeid);
    forget(fo.nodeid, 2);
    forget(dobj.nodeid, 1);
    forget(sl.nodeid, 1);
    check_outside("end");
    assert_alive();
}

/* ---- 3b. ".." in READDIRPLUS: an entry must never be a node for the parent ------------ */

struct dplus_seen {
    uint64_t base_ino, outside_ino, share_ino;
    unsigned entries, nodes;
};

/* One READDIRPLUS pass over dir (opened here), checking every entry's node. */
static void readdirplus_check(uint64_t dir, struct dplus_seen *seen)
{
    struct fuse_open_out oo;
    struct vfe_mem *mem = vfe_dev_mem(g->dev);
    const uint32_t cap = 16384;
    uint64_t gpa, off = 0;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    assert_int_equal(vfe_mem_alloc(mem, cap, 64, &gpa), 0);
    assert_int_equal(vfe_fuse_opendir(g->fuse, dir, &oo), 0);
    for (int rounds = 0; rounds < 64; rounds++) {
        struct fuse_read_in in = {.fh = oo.fh, .offset = off, .size = cap};
        struct vfe_sg sg = {gpa, cap};
        struct vfe_fuse_op op = {.opcode = FUSE_READDIRPLUS,
                                 .nodeid = dir,
                                 .arg = &in,
                                 .arg_len = sizeof(in),
                                 .out_data = &sg,
                                 .out_data_cnt = 1};
        assert_int_equal(vfe_fuse_call(g->fuse, 1, &op), 0);
        if (op.data_len == 0)
            break;
        assert_true(op.data_len <= cap);
        assert_int_equal(vfe_mem_read(mem, gpa, buf, op.data_len), 0);
        size_t pos = 0;
        while (pos + FUSE_NAME_OFFSET_DIRENTPLUS <= op.data_len) {
            struct fuse_direntplus dp;
            memcpy(&dp, buf + pos, sizeof(dp));
            size_t rec = FUSE_DIRENTPLUS_SIZE(&dp);
            assert_true(dp.dirent.namelen > 0 && dp.dirent.namelen <= 255);
            assert_true(pos + rec <= op.data_len);
            char name[256];
            memcpy(name, buf + pos + FUSE_NAME_OFFSET_DIRENTPLUS, dp.dirent.namelen);
            name[dp.dirent.namelen] = '\0';
            seen->entries++;
            /* No entry names the host directory above the share, not even by
             * number: the root's ".." is the root itself. */
            assert_true(dp.dirent.ino != seen->base_ino);
            assert_true(dp.dirent.ino != seen->outside_ino);
            if (dir == FUSE_ROOT_ID && strcmp(name, "..") == 0)
                assert_int_equal(dp.dirent.ino, seen->share_ino);
            if (dp.entry_out.nodeid != 0) {
                struct fuse_entry_out x;
                seen->nodes++;
                assert_true(dp.entry_out.attr.ino != seen->base_ino);
                assert_true(dp.entry_out.attr.ino != seen->outside_ino);
                /* A node for the share's parent would find "outside" in it. */
                assert_true(vfe_fuse_lookup(g->fuse, dp.entry_out.nodeid, "outside", &x) < 0);
                assert_true(vfe_fuse_lookup(g->fuse, dp.entry_out.nodeid, "secret", &x) < 0);
                if (strcmp(name, ".") && strcmp(name, ".."))
                    forget(dp.entry_out.nodeid, 1);
            }
            off = dp.dirent.off;
            pos += rec;
        }
    }
    assert_int_equal(vfe_fuse_releasedir(g->fuse, dir, oo.fh), 0);
    assert_int_equal(vfe_mem_free_block(mem, gpa), 0);
    free(buf);
}

static void test_dotdot_in_readdirplus(void **state)
{
    (void)state;
    struct stat st;
    struct dplus_seen seen = {0};
    struct fuse_entry_out d;
    assert_int_equal(lstat(g->base, &st), 0);
    seen.base_ino = st.st_ino;
    assert_int_equal(lstat(g->outside, &st), 0);
    seen.outside_ino = st.st_ino;
    assert_int_equal(lstat(g->share, &st), 0);
    seen.share_ino = st.st_ino;
    write_file(spath("plus-f"), "x");
    assert_int_equal(mkdir(spath("plus-d"), 0755), 0);
    write_file(spath("plus-d/g"), "y");
    check_outside("setup");
    readdirplus_check(FUSE_ROOT_ID, &seen);
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "plus-d", &d), 0);
    readdirplus_check(d.nodeid, &seen);
    forget(d.nodeid, 1);
    /* The entries were there (the check looked at something), with nodes. */
    assert_true(seen.entries >= 4);
    assert_true(seen.nodes >= 2);
    check_outside("end");
    assert_alive();
}

/* ---- 4. /proc/self tricks ---------------------------------------------------------------- */

static void test_proc_self_tricks(void **state)
{
    (void)state;
    struct fuse_entry_out p, s, fd, x, eo;
    struct fuse_mkdir_in md = {.mode = 0755};
    char tgt[256];

    /* The guest builds a fake proc/self/fd inside the share. */
    assert_int_equal(call(FUSE_MKDIR, FUSE_ROOT_ID, &md, sizeof(md), "proc", NULL, &p, sizeof(p)),
                     0);
    assert_int_equal(call(FUSE_MKDIR, p.nodeid, &md, sizeof(md), "self", NULL, &s, sizeof(s)), 0);
    assert_int_equal(call(FUSE_MKDIR, s.nodeid, &md, sizeof(md), "fd", NULL, &fd, sizeof(fd)), 0);
    snprintf(tgt, sizeof(tgt), "/proc/self/root%s", g->secret);
    for (int k = 0; k < 64; k++) {
        char nm[16];
        snprintf(nm, sizeof(nm), "%d", k);
        assert_int_equal(call(FUSE_SYMLINK, fd.nodeid, NULL, 0, nm, tgt, &x, sizeof(x)), 0);
        forget(x.nodeid, 1);
    }
    assert_int_equal(call(FUSE_SYMLINK, s.nodeid, NULL, 0, "root", "/", &x, sizeof(x)), 0);
    forget(x.nodeid, 1);
    assert_int_equal(call(FUSE_SYMLINK, s.nodeid, NULL, 0, "cwd", g->outside, &x, sizeof(x)), 0);
    forget(x.nodeid, 1);
    /* The host sees them where the guest made them. */
    struct stat st;
    assert_int_equal(lstat(spath("proc/self/fd/3"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    check_outside("planted");

    /* Ordinary work on ordinary files must go on, and land in the share. */
    struct fuse_create_in ci = {.flags = O_RDWR | O_CREAT, .mode = 0644};
    struct create_out co;
    assert_int_equal(call(FUSE_CREATE, FUSE_ROOT_ID, &ci, sizeof(ci), "w", NULL, &co, sizeof(co)),
                     0);
    assert_int_equal(vfe_fuse_write(g->fuse, co.e.nodeid, co.o.fh, 0, "guest-data", 10), 10);
    assert_int_equal(vfe_fuse_fsync(g->fuse, co.e.nodeid, co.o.fh, false), 0);
    char buf[256];
    assert_int_equal(vfe_fuse_read(g->fuse, co.e.nodeid, co.o.fh, 0, buf, sizeof(buf)), 10);
    assert_memory_equal(buf, "guest-data", 10);
    vfe_fuse_release(g->fuse, co.e.nodeid, co.o.fh, O_RDWR);
    struct fuse_open_out oo;
    assert_int_equal(vfe_fuse_open(g->fuse, co.e.nodeid, O_RDONLY, &oo), 0);
    ssize_t n = vfe_fuse_read(g->fuse, co.e.nodeid, oo.fh, 0, buf, sizeof(buf));
    assert_int_equal(n, 10);
    assert_memory_equal(buf, "guest-data", 10);
    vfe_fuse_release(g->fuse, co.e.nodeid, oo.fh, O_RDONLY);
    /* SETATTR without a handle (daemons reopen by /proc path for that). */
    struct fuse_setattr_in sa = {.valid = FATTR_SIZE | FATTR_MODE, .size = 5, .mode = 0600};
    struct fuse_attr_out ao;
    assert_int_equal(call(FUSE_SETATTR, co.e.nodeid, &sa, sizeof(sa), NULL, NULL, &ao, sizeof(ao)),
                     0);
    assert_int_equal(ao.attr.size, 5);
    assert_int_equal(lstat(spath("w"), &st), 0);
    assert_int_equal(st.st_size, 5);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* Xattrs without a handle. */
    struct fuse_setxattr_in si = {.size = 3};
    struct vfe_fuse_op set = {.opcode = FUSE_SETXATTR,
                              .nodeid = co.e.nodeid,
                              .arg = &si,
                              .arg_len = 8,
                              .name = "user.k",
                              .extra = "val",
                              .extra_len = 3};
    assert_int_equal(vfe_fuse_call(g->fuse, 1, &set), 0);
    char xb[16];
    struct fuse_getxattr_in gi = {.size = sizeof(xb)};
    struct vfe_fuse_op get = {.opcode = FUSE_GETXATTR,
                              .nodeid = co.e.nodeid,
                              .arg = &gi,
                              .arg_len = sizeof(gi),
                              .name = "user.k",
                              .out_arg = xb,
                              .out_arg_len = sizeof(xb)};
    assert_int_equal(vfe_fuse_call(g->fuse, 1, &get), 0);
    assert_memory_equal(xb, "val", 3);
    /* LINK by node (linkat through an fd or /proc). */
    struct fuse_link_in li = {.oldnodeid = co.e.nodeid};
    assert_int_equal(call(FUSE_LINK, fd.nodeid, &li, sizeof(li), "linked", NULL, &x, sizeof(x)), 0);
    assert_int_equal(x.nodeid, co.e.nodeid);
    assert_int_equal(lstat(spath("proc/self/fd/linked"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    check_outside("ordinary work");

    /* Links through /proc/self to the outside, made by the guest and by the host. */
    assert_int_equal(call(FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, "pr", tgt, &x, sizeof(x)), 0);
    forget(x.nodeid, 1);
    char t2[256];
    snprintf(t2, sizeof(t2), "/proc/self/cwd/../outside/secret");
    assert_int_equal(symlink(t2, spath("pcwd")), 0);
    snprintf(t2, sizeof(t2), "/proc/%d/root%s", (int)getpid(), g->secret);
    assert_int_equal(symlink(t2, spath("ppid")), 0);
    assert_int_equal(symlink("/proc/self/fd", spath("pfd")), 0);
    const char *paths[] = {
        "pr",           "pcwd", "ppid", "proc/self/fd/3", "proc/self/fd/0", "proc/self/root",
        "proc/self/cwd"};
    for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
        assert_int_equal(vfe_fuse_lookup_path(g->fuse, paths[k], &eo), 0);
        assert_true(S_ISLNK(eo.attr.mode));
        assert_open_read_safe(eo.nodeid, O_RDONLY);
        assert_open_read_safe(eo.nodeid, O_RDWR | O_TRUNC);
        assert_true(vfe_fuse_lookup(g->fuse, eo.nodeid, "secret", &x) < 0);
        forget(eo.nodeid, 1);
        check_outside(paths[k]);
    }
    assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "pfd", &eo), 0);
    for (int k = 0; k < 16; k++) {
        char nm[16];
        snprintf(nm, sizeof(nm), "%d", k);
        assert_true(vfe_fuse_lookup(g->fuse, eo.nodeid, nm, &x) < 0);
    }
    forget(eo.nodeid, 1);
    check_outside("end");
    assert_alive();
}

/* ---- 5. A symlink swapped in between LOOKUP and OPEN -------------------------------------- */

/* READDIR callback: sets *opaque when outside/empty shows up (the original
 * directory may hold a "secret" the guest created in it, never an "empty"). */
static void dirent_outside(void *opaque, const char *name, size_t namelen, uint64_t ino,
                           uint32_t type, uint64_t off)
{
    (void)ino;
    (void)type;
    (void)off;
    if (namelen == 5 && !memcmp(name, "empty", 5))
        *(bool *)opaque = true;
}

struct swapper {
    atomic_bool stop;
    atomic_uint swaps;
};

/* Replaces "race" by a symlink to the secret and back, over and over. */
static void *swap_thread(void *arg)
{
    struct swapper *sw = arg;
    char reg[512], lnk[512], dst[512];
    snprintf(reg, sizeof(reg), "%s/race.reg", g->share);
    snprintf(lnk, sizeof(lnk), "%s/race.lnk", g->share);
    snprintf(dst, sizeof(dst), "%s/race", g->share);
    while (!atomic_load(&sw->stop)) {
        unlink(lnk);
        if (symlink(g->secret, lnk) == 0)
            rename(lnk, dst);
        int fd = open(reg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            if (write(fd, "original", 8) != 8)
                break;
            close(fd);
            rename(reg, dst);
        }
        atomic_fetch_add(&sw->swaps, 1);
    }
    return NULL;
}

static void test_symlink_swap_race(void **state)
{
    (void)state;
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s/f.tmp", g->share);

    /* Deterministic: swap after LOOKUP (even) or after OPEN (odd). */
    for (int i = 0; i < 200; i++) {
        char want[32], buf[256];
        struct fuse_entry_out eo;
        struct fuse_open_out oo;
        snprintf(want, sizeof(want), "original-%d", i);
        write_file(tmp, want);
        assert_int_equal(rename(tmp, spath("f")), 0);
        assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "f", &eo), 0);
        assert_true(S_ISREG(eo.attr.mode));
        unlink(tmp);
        assert_int_equal(symlink(g->secret, tmp), 0);
        if (i % 2 == 0)
            assert_int_equal(rename(tmp, spath("f")), 0);
        int rc = vfe_fuse_open(g->fuse, eo.nodeid, O_RDONLY, &oo);
        if (i % 2 == 1)
            assert_int_equal(rename(tmp, spath("f")), 0);
        if (rc == 0) {
            ssize_t n = vfe_fuse_read(g->fuse, eo.nodeid, oo.fh, 0, buf, sizeof(buf));
            assert_false(n > 0 && contains_secret(buf, n));
            if (n >= 0) {
                /* The inode LOOKUP found, unlinked since, still readable. */
                assert_int_equal(n, (ssize_t)strlen(want));
                assert_memory_equal(buf, want, strlen(want));
            }
            vfe_fuse_release(g->fuse, eo.nodeid, oo.fh, O_RDONLY);
        }
        /* GETATTR of the node describes the original file, not the link's target. */
        struct fuse_attr_out ao;
        rc = vfe_fuse_getattr(g->fuse, eo.nodeid, &ao);
        if (rc == 0) {
            assert_true(S_ISREG(ao.attr.mode));
            assert_int_equal(ao.attr.size, strlen(want));
        }
        forget(eo.nodeid, 1);
        unlink(spath("f"));
    }
    check_outside("sequential");

    /* Concurrent: a host thread swaps while the guest looks up, opens and reads. */
    struct swapper sw = {0};
    pthread_t th;
    write_file(spath("race"), "original");
    assert_int_equal(pthread_create(&th, NULL, swap_thread, &sw), 0);
    unsigned reads = 0;
    /* At least 200 rounds, and on until the host swapped 200 times (bounded,
     * should the swapper stall). */
    for (int i = 0; i < 200 || (atomic_load(&sw.swaps) < 200 && i < 200000); i++) {
        struct fuse_entry_out eo;
        struct fuse_open_out oo;
        char buf[256];
        if (vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "race", &eo) != 0)
            continue;
        if (vfe_fuse_open(g->fuse, eo.nodeid, O_RDONLY, &oo) == 0) {
            ssize_t n = vfe_fuse_read(g->fuse, eo.nodeid, oo.fh, 0, buf, sizeof(buf));
            if (n > 0 && contains_secret(buf, n))
                fprintf(stderr, "escape: race read the outside secret at iteration %d\n", i);
            assert_false(n > 0 && contains_secret(buf, n));
            if (n > 0) {
                assert_int_equal(n, 8);
                assert_memory_equal(buf, "original", 8);
                reads++;
            }
            vfe_fuse_release(g->fuse, eo.nodeid, oo.fh, O_RDONLY);
        }
        forget(eo.nodeid, 1);
    }
    atomic_store(&sw.stop, true);
    pthread_join(th, NULL);
    assert_true(atomic_load(&sw.swaps) >= 200);
    fprintf(stderr, "escape: race: %u swaps, %u successful reads of the original\n",
            atomic_load(&sw.swaps), reads);
    check_outside("race");

    /*
     * A directory swapped for a symlink to the outside between LOOKUP and the
     * ops that take it as a parent: they act in the directory LOOKUP found
     * (renamed away, still held by the daemon) or fail, never outside.
     */
    char dold[512];
    unsigned landed = 0;
    for (int i = 0; i < 100; i++) {
        struct fuse_entry_out d, x;
        struct fuse_mkdir_in md = {.mode = 0755};
        struct fuse_create_in ci = {.flags = O_RDWR | O_CREAT, .mode = 0644};
        struct create_out co;
        snprintf(dold, sizeof(dold), "%s/sd.old%d", g->share, i);
        assert_int_equal(mkdir(spath("sd"), 0755), 0);
        assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "sd", &d), 0);
        assert_int_equal(rename(spath("sd"), dold), 0);
        assert_int_equal(symlink(i % 2 ? g->outside : "../outside", spath("sd")), 0);
        assert_true(vfe_fuse_lookup(g->fuse, d.nodeid, "secret", &x) < 0);
        switch (i % 4) {
        case 0:
            if (call(FUSE_CREATE, d.nodeid, &ci, sizeof(ci), "secret", NULL, &co, sizeof(co)) ==
                0) {
                vfe_fuse_release(g->fuse, co.e.nodeid, co.o.fh, O_RDWR);
                forget(co.e.nodeid, 1);
                char where[600];
                snprintf(where, sizeof(where), "%s/secret", dold);
                assert_int_equal(access(where, F_OK), 0);
                landed++;
            }
            break;
        case 1:
            if (call(FUSE_MKDIR, d.nodeid, &md, sizeof(md), "planted", NULL, &x, sizeof(x)) == 0) {
                forget(x.nodeid, 1);
                char where[600];
                snprintf(where, sizeof(where), "%s/planted", dold);
                assert_int_equal(access(where, F_OK), 0);
                landed++;
            }
            break;
        case 2:
            assert_true(call(FUSE_UNLINK, d.nodeid, NULL, 0, "secret", NULL, NULL, 0) < 0);
            assert_true(call(FUSE_RMDIR, d.nodeid, NULL, 0, "empty", NULL, NULL, 0) < 0);
            break;
        case 3: {
            struct fuse_rename_in rn = {.newdir = FUSE_ROOT_ID};
            assert_true(call(FUSE_RENAME, d.nodeid, &rn, sizeof(rn), "secret", "stolen", NULL, 0) <
                        0);
            assert_false(access(spath("stolen"), F_OK) == 0);
            break;
        }
        }
        /* A READDIR of the node lists the original directory, not the outside. */
        bool outside_seen = false;
        assert_true(vfe_fuse_readdir_all(g->fuse, d.nodeid, dirent_outside, &outside_seen) >= 2);
        assert_false(outside_seen);
        forget(d.nodeid, 1);
        assert_int_equal(unlink(spath("sd")), 0);
        check_outside("directory swap");
    }
    fprintf(stderr, "escape: directory swap: %u of 50 creations landed in the original\n", landed);

    /*
     * Handle-less attribute work on a node whose name was swapped for a symlink
     * to the outside after LOOKUP: SETATTR (truncate, chmod, utimes), xattrs,
     * LINK. They reach the inode LOOKUP found (we hold it open to check) or
     * fail; the secret never changes.
     */
    unsigned reached = 0;
    for (int i = 0; i < 60; i++) {
        struct fuse_entry_out eo, x;
        struct fuse_attr_out ao;
        struct stat st;
        char tmp2[512];
        snprintf(tmp2, sizeof(tmp2), "%s/a.tmp", g->share);
        write_file(spath("a"), "original-attr");
        int hfd = open(spath("a"), O_RDONLY);
        assert_true(hfd >= 0);
        assert_int_equal(vfe_fuse_lookup(g->fuse, FUSE_ROOT_ID, "a", &eo), 0);
        assert_int_equal(symlink(i % 2 ? g->secret : "../outside/secret", tmp2), 0);
        assert_int_equal(rename(tmp2, spath("a")), 0);
        switch (i % 3) {
        case 0: {
            struct fuse_setattr_in sa = {.valid = FATTR_SIZE | FATTR_MODE | FATTR_MTIME,
                                         .size = 3,
                                         .mode = 0600,
                                         .mtime = 12345};
            if (call(FUSE_SETATTR, eo.nodeid, &sa, sizeof(sa), NULL, NULL, &ao, sizeof(ao)) == 0) {
                assert_int_equal(fstat(hfd, &st), 0);
                assert_int_equal(st.st_size, 3);
                assert_int_equal(st.st_mode & 07777, 0600);
                assert_int_equal(st.st_mtime, 12345);
                reached++;
            }
            break;
        }
        case 1: {
            struct fuse_setxattr_in si = {.size = 3};
            struct vfe_fuse_op set = {.opcode = FUSE_SETXATTR,
                                      .nodeid = eo.nodeid,
                                      .arg = &si,
                                      .arg_len = 8,
                                      .name = "user.k",
                                      .extra = "val",
                                      .extra_len = 3};
            if (vfe_fuse_call(g->fuse, 1, &set) == 0) {
                char xb[8];
                assert_int_equal(fgetxattr(hfd, "user.k", xb, sizeof(xb)), 3);
                assert_memory_equal(xb, "val", 3);
                reached++;
            }
            break;
        }
        case 2: {
            struct fuse_link_in li = {.oldnodeid = eo.nodeid};
            if (call(FUSE_LINK, FUSE_ROOT_ID, &li, sizeof(li), "a-link", NULL, &x, sizeof(x)) ==
                0) {
                struct stat hs;
                assert_int_equal(fstat(hfd, &hs), 0);
                assert_int_equal(lstat(spath("a-link"), &st), 0);
                assert_true(S_ISREG(st.st_mode));
                assert_int_equal(st.st_ino, hs.st_ino);
                assert_int_equal(unlink(spath("a-link")), 0);
                forget(x.nodeid, 1);
                reached++;
            }
            break;
        }
        }
        close(hfd);
        forget(eo.nodeid, 1);
        assert_int_equal(unlink(spath("a")), 0);
        check_outside("attributes after a swap");
    }
    fprintf(stderr, "escape: attribute swap: %u of 60 reached the original inode\n", reached);
    assert_alive();
}

/* ---- 6. Still serving; a clean exit on hang-up ------------------------------------------ */

static void test_alive_and_clean_exit(void **state)
{
    (void)state;
    int status = 0;
    bool own = false;
    assert_alive();
    check_outside("before hang-up");
    vfe_fuse_free(g->fuse);
    vfe_dev_close_status(g->dev, &status, &own);
    g->closed = true;
    assert_true(own);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    check_outside("after exit");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"vufsd", required_argument, NULL, 'v'},
        {"extra", required_argument, NULL, 'x'},
        {"log", required_argument, NULL, 'l'},
        {0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'v')
            opt_vufsd = optarg;
        else if (c == 'x')
            opt_extra = optarg;
        else if (c == 'l')
            opt_log = optarg;
        else
            return 2;
    }
    if (!opt_vufsd)
        opt_vufsd = getenv("VUFSD");
    if (!opt_vufsd || access(opt_vufsd, X_OK) != 0) {
        fprintf(stderr, "test_escape: --vufsd PATH (or VUFSD) to an executable vufsd\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_bad_names_everywhere, case_setup),
        cmocka_unit_test_setup(test_symlinks_out, case_setup),
        cmocka_unit_test_setup(test_rename_link_boundary, case_setup),
        cmocka_unit_test_setup(test_dotdot_in_readdirplus, case_setup),
        cmocka_unit_test_setup(test_proc_self_tricks, case_setup),
        cmocka_unit_test_setup(test_symlink_swap_race, case_setup),
        cmocka_unit_test_setup(test_alive_and_clean_exit, case_setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
