/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A hostile guest against the real vufsd binary, through the in-tree frontend:
 *
 *   test_pt_hostile --vufsd PATH
 *
 * Each test spawns vufsd on a fresh shared directory, sends what a malicious
 * guest kernel could send, checks the replies AND the host directory, and
 * finally checks that the daemon still serves and never exited.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "vfe.h"
#include "../it_util.h"

static const char *opt_vufsd;
static const char *opt_log;

struct env {
    char dir[64];
    char cmd[1024];
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    struct vfe_fuse_init_result init;
};

static const char *hpath(struct env *e, const char *name)
{
    return it_hpath(e->dir, name);
}

static void host_file(struct env *e, const char *name, const char *data)
{
    int fd = open(hpath(e, name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
}

/* Spawns vufsd with extra options; the FUSE client sends uid/gid in every header. */
static struct env *start(const char *extra, uint32_t uid, uint32_t gid)
{
    struct env *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    strcpy(e->dir, "/tmp/vufsd-hostile-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    chmod(e->dir, 0755);
    snprintf(e->cmd, sizeof(e->cmd), "%s --socket-path={socket} --shared-dir={dir} %s",
             opt_vufsd, extra ? extra : "");
    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = e->cmd, .dir = e->dir, .backend_log = opt_log,
                  .timeout_ms = 20000 },
        .request_queues = 2,
        .queue_size = 128,
    };
    assert_int_equal(vfe_dev_connect(&cfg, &e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct vfe_fuse_config fc = { .depth = 32, .timeout_ms = 20000, .uid = uid, .gid = gid,
                                  .pid = 77,
                                  .init_flags = FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS |
                                                FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS };
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    assert_int_equal(vfe_fuse_init(e->fuse, &e->init), 0);
    return e;
}

/* The daemon must still answer, and must not have exited (a crash, an abort, a
 * sanitizer report all end the process). */
static void assert_alive(struct env *e)
{
    struct fuse_attr_out ao;
    int status;
    assert_int_equal(vfe_fuse_getattr(e->fuse, FUSE_ROOT_ID, &ao), 0);
    assert_false(vfe_conn_backend_exited(vfe_dev_conn(e->dev), &status));
}

static void stop(struct env *e)
{
    assert_alive(e);
    vfe_fuse_free(e->fuse);
    vfe_dev_close(e->dev);
    it_rm_tree(e->dir);
    free(e);
}

static bool host_exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* A request with a name (and optional second string) and an optional fixed arg. */
static int call_named(struct env *e, uint32_t opcode, uint64_t nodeid, const void *arg,
                      uint32_t arg_len, const char *name, const char *name2, void *out,
                      uint32_t out_len)
{
    struct vfe_fuse_op op = { .opcode = opcode, .nodeid = nodeid, .arg = arg, .arg_len = arg_len,
                              .name = name, .name2 = name2, .out_arg = out,
                              .out_arg_len = out_len };
    return vfe_fuse_call(e->fuse, 1, &op);
}

/* ---- Names ------------------------------------------------------------------------- */

static void test_bad_names(void **state)
{
    struct env *e = start("", 0, 0);
    struct fuse_entry_out eo;
    char victim[128], longname[300];
    snprintf(victim, sizeof(victim), "%s-victim", e->dir);
    unlink(victim);
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    host_file(e, "f", "x");

    const char *bad[] = { "a/b", "..", ".", "", "/etc/passwd", "../../etc" };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        assert_int_equal(call_named(e, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, bad[k], NULL, &eo,
                                    sizeof(eo)),
                         -EINVAL);
        struct fuse_mkdir_in mi = { .mode = 0755 };
        assert_int_equal(call_named(e, FUSE_MKDIR, FUSE_ROOT_ID, &mi, sizeof(mi), bad[k], NULL,
                                    &eo, sizeof(eo)),
                         -EINVAL);
    }
    assert_int_equal(
        call_named(e, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, longname, NULL, &eo, sizeof(eo)),
        -ENAMETOOLONG);
    /* CVE-2026-47243: SYMLINK whose NAME is an absolute host path. */
    assert_int_equal(call_named(e, FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, victim, "/etc/shadow",
                                &eo, sizeof(eo)),
                     -EINVAL);
    assert_false(host_exists(victim));
    /* RENAME to a path outside. */
    struct fuse_rename_in ri = { .newdir = FUSE_ROOT_ID };
    assert_int_equal(call_named(e, FUSE_RENAME, FUSE_ROOT_ID, &ri, sizeof(ri), "f", victim, NULL,
                                0),
                     -EINVAL);
    assert_false(host_exists(victim));
    assert_true(host_exists(hpath(e, "f")));

    /* A name without its NUL: the bytes end where the request ends. */
    struct vfe_fuse_op op = { .opcode = FUSE_LOOKUP, .nodeid = FUSE_ROOT_ID, .arg = "f",
                              .arg_len = 1, .out_arg = &eo, .out_arg_len = sizeof(eo) };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &op), -EINVAL);
    /* Unknown node ids. */
    assert_int_equal(call_named(e, FUSE_LOOKUP, 0xdeadbeef, NULL, 0, "f", NULL, &eo, sizeof(eo)),
                     -ESTALE);
    assert_int_equal(call_named(e, FUSE_LOOKUP, 0, NULL, 0, "f", NULL, &eo, sizeof(eo)), -ESTALE);
    stop(e);
}

/* ---- Header length that disagrees with the descriptor chain --------------------------- */

static int raw_request(struct env *e, uint32_t hdr_len, uint32_t chain_len, int32_t *err)
{
    struct vfe_mem *mem = vfe_dev_mem(e->dev);
    struct vfe_vq *vq = vfe_dev_vq(e->dev, 2);
    uint64_t in_gpa, out_gpa;
    uint8_t buf[512] = { 0 };
    struct fuse_in_header h = { .len = hdr_len, .opcode = FUSE_GETATTR, .unique = 0x1000,
                                .nodeid = FUSE_ROOT_ID };
    struct fuse_out_header oh = { 0 };
    void *tok;
    uint32_t used;

    assert_true(chain_len <= sizeof(buf));
    memcpy(buf, &h, sizeof(h));
    assert_int_equal(vfe_mem_alloc(mem, sizeof(buf), 64, &in_gpa), 0);
    assert_int_equal(vfe_mem_alloc(mem, 4096, 64, &out_gpa), 0);
    assert_int_equal(vfe_mem_write(mem, in_gpa, buf, sizeof(buf)), 0);
    assert_int_equal(vfe_mem_fill(mem, out_gpa, 0, 4096), 0);
    struct vfe_sg out = { in_gpa, chain_len }, in = { out_gpa, 4096 };
    assert_int_equal(vfe_vq_add(vq, &out, 1, &in, 1, false, &h), 0);
    vfe_vq_kick(vq, true);
    int r;
    while ((r = vfe_vq_get_used(vq, &tok, &used)) == -EAGAIN)
        assert_int_equal(vfe_vq_wait(vq, 20000), 0);
    assert_int_equal(r, 0);
    assert_ptr_equal(tok, &h);
    assert_int_equal(vfe_mem_read(mem, out_gpa, &oh, sizeof(oh)), 0);
    vfe_mem_free_block(mem, in_gpa);
    vfe_mem_free_block(mem, out_gpa);
    *err = used >= sizeof(oh) ? oh.error : 1;
    return (int)used;
}

static void test_len_disagrees_with_chain(void **state)
{
    struct env *e = start("", 0, 0);
    int32_t err;
    uint32_t good = sizeof(struct fuse_in_header) + sizeof(struct fuse_getattr_in);

    /* Sanity: a consistent GETATTR through the same path works. */
    raw_request(e, good, good, &err);
    assert_int_equal(err, 0);
    /* Header claims more than the chain carries, or less. */
    raw_request(e, good + 100, good, &err);
    assert_int_equal(err, -EINVAL);
    raw_request(e, good - 8, good, &err);
    assert_int_equal(err, -EINVAL);
    raw_request(e, UINT32_MAX, good, &err);
    assert_int_equal(err, -EINVAL);
    /* Too short to carry a header: no reply at all. */
    assert_int_equal(raw_request(e, good, 8, &err), 0);
    assert_alive(e);
    stop(e);
}

/* ---- Special files (CVE-2020-35517) ------------------------------------------------------ */

static void test_open_fifo_and_device(void **state)
{
    struct env *e = start("", 0, 0);
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    struct fuse_mknod_in mi = { .mode = S_IFIFO | 0666 };

    assert_int_equal(call_named(e, FUSE_MKNOD, FUSE_ROOT_ID, &mi, sizeof(mi), "fifo", NULL, &eo,
                                sizeof(eo)),
                     0);
    /* Both ends held on the host: a wrong open would succeed instead of hanging. */
    int hold = open(hpath(e, "fifo"), O_RDWR | O_NONBLOCK);
    assert_true(hold >= 0);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDONLY, &oo), -ENXIO);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &oo), -ENXIO);
    struct fuse_entry_out ce;
    assert_int_equal(vfe_fuse_create(e->fuse, FUSE_ROOT_ID, "fifo", O_RDWR, 0644, &ce, &oo),
                     -ENXIO);
    close(hold);

    mi.mode = S_IFCHR | 0666;
    mi.rdev = (1u << 8) | 3; /* 1:3, /dev/null */
    assert_int_equal(call_named(e, FUSE_MKNOD, FUSE_ROOT_ID, &mi, sizeof(mi), "null", NULL, &eo,
                                sizeof(eo)),
                     0);
    struct stat st;
    assert_int_equal(lstat(hpath(e, "null"), &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &oo), -ENXIO);
    assert_int_equal(vfe_fuse_opendir(e->fuse, eo.nodeid, &oo), -ENOTDIR);
    stop(e);
}

/* ---- FORGET with huge counts racing GETATTR / READ ------------------------------------------ */

/* FORGETs travel on the hiprio queue, which one thread at a time may drive
 * (vfe.h): this thread sends them all, the test thread uses a request queue. */
struct forgetter {
    struct env *e;
    uint64_t node; /* __atomic */
    uint64_t open_node; /* forgotten once, at round 10, while its file is open */
    int rounds;
    int errors;
};

static void *forget_thread(void *arg)
{
    struct forgetter *fg = arg;
    for (int k = 0; k < fg->rounds; k++) {
        uint64_t n = __atomic_load_n(&fg->node, __ATOMIC_RELAXED);
        if (vfe_fuse_forget(fg->e->fuse, n, k % 3 ? UINT64_MAX : 1) < 0)
            fg->errors++;
        if (k == 10 && vfe_fuse_forget(fg->e->fuse, fg->open_node, UINT64_MAX) < 0)
            fg->errors++;
        /* Garbage ids too. */
        if (vfe_fuse_forget(fg->e->fuse, n ^ (1ull << 40), UINT64_MAX) < 0)
            fg->errors++;
    }
    return NULL;
}

static void test_forget_races_getattr_read(void **state)
{
    struct env *e = start("", 0, 0);
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    char buf[16];

    host_file(e, "f", "0123456789");
    host_file(e, "g", "abc");
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "f", &eo), 0);
    uint64_t f = eo.nodeid;
    assert_int_equal(vfe_fuse_open(e->fuse, f, O_RDONLY, &oo), 0);
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "g", &eo), 0);

    struct forgetter fg = { .e = e, .node = eo.nodeid, .open_node = f, .rounds = 400 };
    pthread_t th;
    pthread_create(&th, NULL, forget_thread, &fg);
    int bad = 0;
    for (int k = 0; k < 400; k++) {
        struct fuse_attr_out ao;
        uint64_t g = __atomic_load_n(&fg.node, __ATOMIC_RELAXED);
        int r = vfe_fuse_getattr(e->fuse, g, &ao);
        if (r != 0 && r != -ESTALE)
            bad++;
        /* f is forgotten too (by the thread), but its open handle keeps it readable. */
        if (vfe_fuse_read(e->fuse, f, oo.fh, 0, buf, 10) != 10)
            bad++;
        if (vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "g", &eo) == 0)
            __atomic_store_n(&fg.node, eo.nodeid, __ATOMIC_RELAXED);
        else
            bad++;
    }
    pthread_join(th, NULL);
    assert_int_equal(bad, 0);
    assert_int_equal(fg.errors, 0);
    assert_int_equal(vfe_fuse_release(e->fuse, f, oo.fh, 0), 0);
    assert_int_not_equal(vfe_fuse_read(e->fuse, f, oo.fh, 0, buf, 10), 10);
    stop(e);
}

/* ---- LOOKUP storm past --rlimit-nofile (CVE-2020-10717) ------------------------------------ */

static void test_lookup_storm_emfile(void **state)
{
    struct env *e = start("--rlimit-nofile=400", 0, 0);
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    char name[32], buf[8];
    int ok = 0, refused = 0;

    host_file(e, "keep", "kept");
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "keep", &eo), 0);
    uint64_t keep = eo.nodeid;
    assert_int_equal(vfe_fuse_open(e->fuse, keep, O_RDONLY, &oo), 0);
    for (int k = 0; k < 500; k++) {
        snprintf(name, sizeof(name), "s%03d", k);
        host_file(e, name, "x");
    }
    for (int k = 0; k < 500; k++) {
        snprintf(name, sizeof(name), "s%03d", k);
        int r = vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, name, &eo);
        if (r == 0)
            ok++;
        else if (r == -EMFILE || r == -ENFILE)
            refused++;
        else
            fail_msg("lookup %s: %d", name, r);
        if (k % 50 == 0) {
            /* Others keep being served while the storm goes on. */
            assert_int_equal(vfe_fuse_read(e->fuse, keep, oo.fh, 0, buf, 4), 4);
            struct fuse_statfs_out so;
            assert_int_equal(vfe_fuse_statfs(e->fuse, FUSE_ROOT_ID, &so), 0);
        }
    }
    assert_true(ok > 100);
    assert_true(refused > 0);
    assert_int_equal(ok + refused, 500);
    assert_alive(e);
    /* FORGET gives the budget back. */
    for (int k = 0; k < 500; k++) {
        snprintf(name, sizeof(name), "s%03d", k);
        if (k < ok) {
            assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, name, &eo), 0);
            vfe_fuse_forget(e->fuse, eo.nodeid, UINT64_MAX);
        }
    }
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "s499", &eo), 0);
    assert_int_equal(vfe_fuse_release(e->fuse, keep, oo.fh, 0), 0);
    stop(e);
}

/*
 * --inode-file-handles: 5000 inodes known without FORGET under a 200-fd limit.
 * Without handles the daemon refuses past its fd budget (EMFILE/ENFILE); with
 * them every lookup succeeds, and the nodes still reach their files.
 */
static void lookup_5000(const char *extra, int *ok, int *refused)
{
    struct env *e = start(extra, 0, 0);
    struct fuse_entry_out eo;
    struct fuse_attr_out ao;
    struct fuse_open_out oo;
    uint64_t first = 0, last = 0;
    char name[32], buf[8];

    *ok = *refused = 0;
    for (int k = 0; k < 5000; k++) {
        snprintf(name, sizeof(name), "n%04d", k);
        host_file(e, name, k % 2 ? "odd" : "even");
    }
    for (int k = 0; k < 5000; k++) {
        snprintf(name, sizeof(name), "n%04d", k);
        int r = vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, name, &eo);
        if (r == 0) {
            (*ok)++;
            if (!first)
                first = eo.nodeid;
            last = eo.nodeid;
            assert_int_equal(eo.attr.size, k % 2 ? 3 : 4);
        } else if (r == -EMFILE || r == -ENFILE) {
            (*refused)++;
        } else {
            fail_msg("lookup %s: %d", name, r);
        }
    }
    /* Known nodes keep working: attributes, a read, the same node on a second lookup. */
    assert_true(first != 0);
    assert_int_equal(vfe_fuse_getattr(e->fuse, first, &ao), 0);
    assert_int_equal(ao.attr.size, 4);
    assert_int_equal(vfe_fuse_getattr(e->fuse, last, &ao), 0);
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "n0000", &eo), 0);
    assert_int_equal(eo.nodeid, first);
    /* An open needs a new fd: FORGET of another node makes room without handles. */
    assert_int_equal(vfe_fuse_forget(e->fuse, last, 1), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, first, O_RDONLY, &oo), 0);
    assert_int_equal(vfe_fuse_read(e->fuse, first, oo.fh, 0, buf, 4), 4);
    assert_memory_equal(buf, "even", 4);
    assert_int_equal(vfe_fuse_release(e->fuse, first, oo.fh, 0), 0);
    stop(e);
}

static void test_lookup_5000_with_file_handles(void **state)
{
    int ok, refused;

    lookup_5000("--rlimit-nofile=200", &ok, &refused);
    assert_true(ok > 0 && ok < 200);
    assert_int_equal(ok + refused, 5000);
    lookup_5000("--rlimit-nofile=200 --inode-file-handles=prefer", &ok, &refused);
    assert_int_equal(ok, 5000);
    lookup_5000("--rlimit-nofile=200 --inode-file-handles=mandatory", &ok, &refused);
    assert_int_equal(ok, 5000);
}

/* ---- SGID (CVE-2022-0358) ------------------------------------------------------------------ */

static void test_sgid_create_as_user(void **state)
{
    if (geteuid() != 0) {
        print_message("SKIP: needs root to create files as uid 1000\n");
        skip();
    }
    struct env *e = start("", 1000, 1000);
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    struct stat st;

    assert_int_equal(mkdir(hpath(e, "sg"), 0777), 0);
    assert_int_equal(chmod(hpath(e, "sg"), 03777), 0);
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "sg", &eo), 0);
    uint64_t sg = eo.nodeid;
    assert_int_equal(vfe_fuse_create(e->fuse, sg, "f", O_RDWR, S_IFREG | 02755, &eo, &oo), 0);
    assert_int_equal(stat(hpath(e, "sg/f"), &st), 0);
    assert_int_equal(st.st_uid, 1000);
    assert_int_equal(st.st_gid, 0);
    assert_int_equal(st.st_mode & S_ISGID, 0);
    assert_int_equal(vfe_fuse_mkdir(e->fuse, sg, "d", 0755, &eo), 0);
    assert_int_equal(stat(hpath(e, "sg/d"), &st), 0);
    assert_true(st.st_mode & S_ISGID);
    /* And uid 1000 cannot write where it may not. */
    assert_int_equal(vfe_fuse_mkdir(e->fuse, FUSE_ROOT_ID, "nope", 0755, &eo), -EACCES);
    assert_false(host_exists(hpath(e, "nope")));
    stop(e);
}

/* ---- Paths through /proc/self/fd inside the default (namespace) sandbox ---------------- */

static void test_proc_paths_in_sandbox(void **state)
{
    struct env *e = start("--xattr", 0, 0);
    struct fuse_entry_out eo;
    char buf[64];
    struct stat st;

    /*
     * Inside the sandbox "/proc" would be the share's own "proc": plant a fake
     * proc/self/fd full of links to a victim. Nothing may ever land on it.
     */
    host_file(e, "victim", "v");
    chmod(hpath(e, "victim"), 0644);
    assert_int_equal(mkdir(hpath(e, "proc"), 0755), 0);
    assert_int_equal(mkdir(hpath(e, "proc/self"), 0755), 0);
    assert_int_equal(mkdir(hpath(e, "proc/self/fd"), 0755), 0);
    for (int k = 0; k < 256; k++) {
        char ln[64];
        snprintf(ln, sizeof(ln), "proc/self/fd/%d", k);
        assert_int_equal(symlink("/victim", hpath(e, ln)), 0);
    }
    host_file(e, "f", "data");
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "f", &eo), 0);
    /* SETXATTR (the compat 8-byte argument: SETXATTR_EXT was not offered). */
    struct fuse_setxattr_in si = { .size = 3 };
    struct vfe_fuse_op set = { .opcode = FUSE_SETXATTR, .nodeid = eo.nodeid, .arg = &si,
                               .arg_len = 8, .name = "user.k", .extra = "val", .extra_len = 3 };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &set), 0);
    assert_int_equal(getxattr(hpath(e, "f"), "user.k", buf, sizeof(buf)), 3);
    struct fuse_getxattr_in gi = { .size = sizeof(buf) };
    struct vfe_fuse_op get = { .opcode = FUSE_GETXATTR, .nodeid = eo.nodeid, .arg = &gi,
                               .arg_len = sizeof(gi), .name = "user.k", .out_arg = buf,
                               .out_arg_len = sizeof(buf) };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &get), 0);
    assert_int_equal(get.out_arg_got, 3);
    assert_memory_equal(buf, "val", 3);
    /* SETATTR mode and times without a handle (chmod / utimensat by /proc path). */
    struct fuse_setattr_in sa = { .valid = FATTR_MODE | FATTR_MTIME, .mode = 0600,
                                  .mtime = 12345 };
    struct fuse_attr_out ao;
    struct vfe_fuse_op setattr = { .opcode = FUSE_SETATTR, .nodeid = eo.nodeid, .arg = &sa,
                                   .arg_len = sizeof(sa), .out_arg = &ao,
                                   .out_arg_len = sizeof(ao) };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &setattr), 0);
    assert_int_equal(stat(hpath(e, "f"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_mtime, 12345);
    /* LINK (linkat by fd, or through /proc). */
    struct fuse_link_in li = { .oldnodeid = eo.nodeid };
    struct fuse_entry_out le;
    assert_int_equal(call_named(e, FUSE_LINK, FUSE_ROOT_ID, &li, sizeof(li), "g", NULL, &le,
                                sizeof(le)),
                     0);
    assert_int_equal(le.nodeid, eo.nodeid);
    assert_true(host_exists(hpath(e, "g")));
    /* A symlink's xattrs: the link itself (path form, relative to the real /proc). */
    assert_int_equal(symlink("/victim", hpath(e, "ln")), 0);
    struct fuse_entry_out lo;
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "ln", &lo), 0);
    struct vfe_fuse_op lget = { .opcode = FUSE_GETXATTR, .nodeid = lo.nodeid, .arg = &gi,
                                .arg_len = sizeof(gi), .name = "user.k", .out_arg = buf,
                                .out_arg_len = sizeof(buf) };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &lget), -ENODATA);
    struct vfe_fuse_op lset = { .opcode = FUSE_SETXATTR, .nodeid = lo.nodeid, .arg = &si,
                                .arg_len = 8, .name = "user.k", .extra = "val", .extra_len = 3 };
    assert_true(vfe_fuse_call(e->fuse, 1, &lset) < 0); /* user.* on a symlink: EPERM */
    /* The victim saw none of it. */
    assert_int_equal(stat(hpath(e, "victim"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_not_equal(st.st_mtime, 12345);
    assert_int_equal(getxattr(hpath(e, "victim"), "user.k", buf, sizeof(buf)), -1);
    stop(e);
}

/* ---- SETLKW through the transport: parked, not holding the queue ------------------------ */

static struct vfe_fuse_op lk_op(uint32_t opcode, uint64_t node, struct fuse_lk_in *in,
                                uint64_t fh, uint64_t owner, uint32_t type, uint32_t pid)
{
    *in = (struct fuse_lk_in){ .fh = fh, .owner = owner,
                               .lk = { .start = 0, .end = 0x7fffffffffffffffull, .type = type,
                                       .pid = pid } };
    return (struct vfe_fuse_op){ .opcode = opcode, .nodeid = node, .arg = in,
                                 .arg_len = sizeof(*in) };
}

static void test_setlkw_does_not_hold_the_queue(void **state)
{
    struct env *e = start("", 0, 0);
    struct fuse_entry_out eo;
    struct fuse_open_out o1, o2;
    struct fuse_lk_in in1, in2, in3;

    host_file(e, "f", "data");
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "f", &eo), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &o1), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &o2), 0);

    struct vfe_fuse_op hold = lk_op(FUSE_SETLK, eo.nodeid, &in1, o1.fh, 1, F_WRLCK, 501);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &hold), 0);
    /* Another owner without waiting: EAGAIN. */
    struct vfe_fuse_op busy = lk_op(FUSE_SETLK, eo.nodeid, &in2, o2.fh, 2, F_WRLCK, 502);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &busy), -EAGAIN);

    /* SETLKW parks; the same queue keeps serving. */
    struct vfe_fuse_op wait = lk_op(FUSE_SETLKW, eo.nodeid, &in2, o2.fh, 2, F_WRLCK, 502);
    struct fuse_lk_out lo;
    assert_int_equal(vfe_fuse_submit(e->fuse, 1, &wait), 0);
    vfe_fuse_kick(e->fuse, 1);
    for (int k = 0; k < 20; k++) {
        struct vfe_fuse_op ga = { .opcode = FUSE_GETATTR, .nodeid = FUSE_ROOT_ID,
                                  .arg = &(struct fuse_getattr_in){ 0 },
                                  .arg_len = sizeof(struct fuse_getattr_in),
                                  .out_arg = &(struct fuse_attr_out){ 0 },
                                  .out_arg_len = sizeof(struct fuse_attr_out) };
        assert_int_equal(vfe_fuse_call(e->fuse, 1, &ga), 0);
    }
    assert_false(wait.done);
    /* GETLK names the holder's pid. */
    struct vfe_fuse_op get = lk_op(FUSE_GETLK, eo.nodeid, &in3, o2.fh, 3, F_RDLCK, 503);
    get.out_arg = &lo;
    get.out_arg_len = sizeof(lo);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &get), 0);
    assert_int_equal(lo.lk.type, F_WRLCK);
    assert_int_equal(lo.lk.pid, 501);
    /* The holder unlocks: the parked request is answered, with success. */
    struct vfe_fuse_op unlock = lk_op(FUSE_SETLK, eo.nodeid, &in1, o1.fh, 1, F_UNLCK, 501);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &unlock), 0);
    while (!wait.done) {
        struct vfe_fuse_op *done[4];
        int n = vfe_fuse_reap(e->fuse, 1, done, 4, 20000);
        assert_true(n > 0);
    }
    assert_int_equal(wait.error, 0);
    /* Owner 2 holds it now. */
    struct vfe_fuse_op again = lk_op(FUSE_SETLK, eo.nodeid, &in1, o1.fh, 1, F_WRLCK, 501);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &again), -EAGAIN);

    /* A second waiter, ended by INTERRUPT on the hiprio queue. */
    struct vfe_fuse_op wait2 = lk_op(FUSE_SETLKW, eo.nodeid, &in3, o1.fh, 1, F_WRLCK, 501);
    assert_int_equal(vfe_fuse_submit(e->fuse, 1, &wait2), 0);
    vfe_fuse_kick(e->fuse, 1);
    struct vfe_fuse_op ga = { .opcode = FUSE_GETATTR, .nodeid = FUSE_ROOT_ID,
                              .arg = &(struct fuse_getattr_in){ 0 },
                              .arg_len = sizeof(struct fuse_getattr_in),
                              .out_arg = &(struct fuse_attr_out){ 0 },
                              .out_arg_len = sizeof(struct fuse_attr_out) };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &ga), 0); /* the SETLKW was seen before */
    /*
     * INTERRUPT with room for a reply (fll ignores requests that have none). A
     * noted INTERRUPT gets no reply: the element comes back empty, which the
     * frontend reports as a protocol error, so only completion is checked.
     */
    struct fuse_interrupt_in ii = { .unique = wait2.unique };
    struct vfe_fuse_op intr = { .opcode = FUSE_INTERRUPT, .arg = &ii, .arg_len = sizeof(ii) };
    (void)vfe_fuse_call(e->fuse, 0, &intr);
    assert_true(intr.done);
    assert_int_equal(intr.reply_len, 0);
    while (!wait2.done) {
        struct vfe_fuse_op *done[4];
        int n = vfe_fuse_reap(e->fuse, 1, done, 4, 20000);
        assert_true(n > 0);
    }
    assert_int_equal(wait2.error, -EINTR);

    stop(e);
}

/*
 * The frontend hangs up while a SETLKW waits for a lock nobody will release:
 * vufsd must neither crash nor wait for that lock; it ends by itself, cleanly.
 */
static void test_hangup_with_parked_setlkw(void **state)
{
    /* chroot sandbox: no pid-namespace child that could outlive a killed parent. */
    struct env *e = start("--sandbox=chroot", 0, 0);
    struct fuse_entry_out eo;
    struct fuse_open_out o1, o2;
    struct fuse_lk_in in1, in2;
    int status;
    bool own = false;

    host_file(e, "f", "data");
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "f", &eo), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &o1), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &o2), 0);
    struct vfe_fuse_op hold = lk_op(FUSE_SETLK, eo.nodeid, &in1, o1.fh, 1, F_WRLCK, 501);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &hold), 0);
    struct vfe_fuse_op wait = lk_op(FUSE_SETLKW, eo.nodeid, &in2, o2.fh, 2, F_WRLCK, 502);
    assert_int_equal(vfe_fuse_submit(e->fuse, 1, &wait), 0);
    vfe_fuse_kick(e->fuse, 1);
    struct vfe_fuse_op ga = { .opcode = FUSE_GETATTR, .nodeid = FUSE_ROOT_ID,
                              .arg = &(struct fuse_getattr_in){ 0 },
                              .arg_len = sizeof(struct fuse_getattr_in),
                              .out_arg = &(struct fuse_attr_out){ 0 },
                              .out_arg_len = sizeof(struct fuse_attr_out) };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &ga), 0);
    assert_false(wait.done);
    assert_false(vfe_conn_backend_exited(vfe_dev_conn(e->dev), &status));

    vfe_fuse_free(e->fuse);
    vfe_dev_close_status(e->dev, &status, &own);
    it_rm_tree(e->dir);
    free(e);
    assert_true(own); /* it was not killed by the frontend after a hang */
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * GET_VRING_BASE (the frontend stopping the rings: VM pause, migration, reset)
 * while a SETLKW waits for a lock nobody releases, with the worker pool: the
 * stop must not wait for the lock (the parked request is answered with EINTR
 * first), and the restarted rings serve the same session.
 */
static void test_stop_with_parked_setlkw(void **state)
{
    struct env *e = start("--thread-pool-size=2", 0, 0);
    struct fuse_entry_out eo;
    struct fuse_open_out o1, o2;
    struct fuse_lk_in in1, in2;

    host_file(e, "f", "data");
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "f", &eo), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &o1), 0);
    assert_int_equal(vfe_fuse_open(e->fuse, eo.nodeid, O_RDWR, &o2), 0);
    struct vfe_fuse_op hold = lk_op(FUSE_SETLK, eo.nodeid, &in1, o1.fh, 1, F_WRLCK, 501);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &hold), 0);
    struct vfe_fuse_op wait = lk_op(FUSE_SETLKW, eo.nodeid, &in2, o2.fh, 2, F_WRLCK, 502);
    assert_int_equal(vfe_fuse_submit(e->fuse, 1, &wait), 0);
    vfe_fuse_kick(e->fuse, 1);
    struct vfe_fuse_op ga = { .opcode = FUSE_GETATTR, .nodeid = FUSE_ROOT_ID,
                              .arg = &(struct fuse_getattr_in){ 0 },
                              .arg_len = sizeof(struct fuse_getattr_in),
                              .out_arg = &(struct fuse_attr_out){ 0 },
                              .out_arg_len = sizeof(struct fuse_attr_out) };
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &ga), 0); /* the SETLKW was seen before */
    assert_false(wait.done);

    /* GET_VRING_BASE answered (the frontend waits 20 s): the stop did not wait for
     * the lock. This frontend drops what was in flight at a stop. */
    assert_int_equal(vfe_dev_stop(e->dev), 0);
    vfe_fuse_abandon_all(e->fuse, 1);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    assert_alive(e);
    /* The holder still holds its lock: the session survived the stop. */
    struct vfe_fuse_op again = lk_op(FUSE_SETLK, eo.nodeid, &in2, o2.fh, 2, F_WRLCK, 502);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &again), -EAGAIN);
    stop(e);
}

int main(int argc, char **argv)
{
    int st = it_parse_args(argc, argv, "test_pt_hostile", &opt_vufsd, &opt_log);
    if (st)
        return st;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_len_disagrees_with_chain),
        cmocka_unit_test(test_open_fifo_and_device),
        cmocka_unit_test(test_forget_races_getattr_read),
        cmocka_unit_test(test_lookup_storm_emfile),
        cmocka_unit_test(test_lookup_5000_with_file_handles),
        cmocka_unit_test(test_sgid_create_as_user),
        cmocka_unit_test(test_proc_paths_in_sandbox),
        cmocka_unit_test(test_setlkw_does_not_hold_the_queue),
        cmocka_unit_test(test_hangup_with_parked_setlkw),
        cmocka_unit_test(test_stop_with_parked_setlkw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
