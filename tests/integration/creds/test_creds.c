/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Labels and ids against the real vufsd binary, through the in-tree frontend:
 *
 *   test_creds --vufsd PATH
 *
 * --security-label: new inodes get the security context the request carries
 * (both wire forms), through --xattrmap; a host that refuses the xattr fails
 * the operation and leaves no entry behind; malformed contexts are EINVAL.
 * --translate-uid/--translate-gid: guest ids become host ids for new files
 * and chown, host ids are shown translated back. --uid-map/--gid-map: vufsd
 * as nobody in its own user namespace, and root with shifted ids. GETLK names
 * a holder of identical read locks.
 *
 * Every test checks the host directory, not only the replies.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
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

static const char *opt_vufsd;
static const char *opt_log;

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)

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

/*
 * vufsd on a fresh shared directory; prefix (if any) runs it (setpriv ...), and
 * then its socket goes to sockdir, which that user can write.
 */
static struct env *start_as(const char *prefix, const char *sockdir, const char *extra,
                            uint32_t minor, uint32_t uid, uint32_t gid)
{
    struct env *e = calloc(1, sizeof(*e));
    char sock[128] = "";
    assert_non_null(e);
    strcpy(e->dir, "/tmp/vufsd-creds-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    chmod(e->dir, 0777);
    if (sockdir)
        snprintf(sock, sizeof(sock), "%s/vufsd.sock", sockdir);
    snprintf(e->cmd, sizeof(e->cmd), "%s %s --socket-path={socket} --shared-dir={dir} %s",
             prefix ? prefix : "", opt_vufsd, extra ? extra : "");
    struct vfe_dev_config cfg = {
        .conn = { .socket_path = sockdir ? sock : NULL, .backend_cmd = e->cmd, .dir = e->dir,
                  .backend_log = opt_log, .timeout_ms = 20000 },
        .request_queues = 1,
        .queue_size = 64,
    };
    assert_int_equal(vfe_dev_connect(&cfg, &e->dev), 0);
    assert_int_equal(vfe_dev_start(e->dev), 0);
    struct vfe_fuse_config fc = { .depth = 8, .timeout_ms = 20000, .uid = uid, .gid = gid,
                                  .pid = 77, .proto_minor = minor,
                                  .init_flags = FUSE_ASYNC_READ | FUSE_SECURITY_CTX |
                                                FUSE_DO_READDIRPLUS | FUSE_POSIX_LOCKS };
    assert_int_equal(vfe_fuse_new(e->dev, &fc, &e->fuse), 0);
    assert_int_equal(vfe_fuse_init(e->fuse, &e->init), 0);
    return e;
}

static struct env *start_minor(const char *extra, uint32_t minor, uint32_t uid, uint32_t gid)
{
    return start_as(NULL, NULL, extra, minor, uid, gid);
}

static struct env *start(const char *extra)
{
    return start_minor(extra, 41, 0, 0);
}

static void stop(struct env *e)
{
    struct fuse_attr_out ao;
    int status;
    assert_int_equal(vfe_fuse_getattr(e->fuse, FUSE_ROOT_ID, &ao), 0);
    assert_false(vfe_conn_backend_exited(vfe_dev_conn(e->dev), &status));
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

/* ---- Security labels ---------------------------------------------------------------- */

static const char label[] = "system_u:object_r:container_file_t:s0";

/* A fuse_secctx_header blob as Linux builds it (nr 0 when name is NULL). */
static size_t make_blob(unsigned char *b, const char *name, const void *v, uint32_t vsize)
{
    size_t len = sizeof(struct fuse_secctx_header);
    uint32_t nr = 0;
    if (name) {
        struct fuse_secctx one = { .size = vsize };
        size_t nl = strlen(name) + 1, ent = ALIGN8(sizeof(one) + nl + vsize);
        memset(b + len, 0, ent);
        memcpy(b + len, &one, sizeof(one));
        memcpy(b + len + sizeof(one), name, nl);
        memcpy(b + len + sizeof(one) + nl, v, vsize);
        len += ent;
        nr = 1;
    }
    struct fuse_secctx_header h = { .size = (uint32_t)len, .nr_secctx = nr };
    memcpy(b, &h, sizeof(h));
    return len;
}

/*
 * A creating request with a security context: as an extension (ext) or, for
 * 7.36/7.37 clients, as a trailing argument.
 */
static int create_op(struct env *e, uint32_t opcode, const char *name, const char *name2,
                     const void *arg, uint32_t arg_len, const void *blob, size_t blen, bool ext)
{
    union {
        struct fuse_entry_out e;
        unsigned char b[sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)];
    } out;
    struct vfe_fuse_op op = { .opcode = opcode, .nodeid = FUSE_ROOT_ID, .arg = arg,
                              .arg_len = arg_len, .name = name, .name2 = name2,
                              .extra = blob, .extra_len = (uint32_t)blen,
                              .total_extlen = ext ? (uint16_t)(blen / 8) : 0,
                              .out_arg = &out,
                              .out_arg_len = opcode == FUSE_CREATE ? sizeof(out.b)
                                                                   : sizeof(out.e) };
    return vfe_fuse_call(e->fuse, 1, &op);
}

static int create_all(struct env *e, const void *blob, size_t blen, bool ext)
{
    struct fuse_create_in ci = { .flags = O_WRONLY | O_CREAT, .mode = 0100640 };
    struct fuse_mkdir_in mi = { .mode = 0750 };
    struct fuse_mknod_in mn = { .mode = S_IFIFO | 0640 };
    int ret = create_op(e, FUSE_CREATE, "f", NULL, &ci, sizeof(ci), blob, blen, ext);
    if (ret < 0)
        return ret;
    ret = create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, blen, ext);
    if (ret < 0)
        return ret;
    ret = create_op(e, FUSE_MKNOD, "p", NULL, &mn, sizeof(mn), blob, blen, ext);
    if (ret < 0)
        return ret;
    /* A dangling target: a label that followed the link would fail with ENOENT. */
    return create_op(e, FUSE_SYMLINK, "l", "missing-target", NULL, 0, blob, blen, ext);
}

static void expect_label(struct env *e, const char *name, const char *xname)
{
    char v[256];
    ssize_t n = lgetxattr(hpath(e, name), xname, v, sizeof(v));
    if (n < 0)
        fail_msg("%s: no %s on the host: %s", name, xname, strerror(errno));
    assert_int_equal(n, sizeof(label));
    assert_memory_equal(v, label, sizeof(label));
}

static unsigned char blob[1024];

/* The label lands on the host object, for every creating opcode, in both forms. */
static void test_label_set(void **state)
{
    (void)state;
    /* security.* needs CAP_SYS_ADMIN on a host without an LSM that owns the name. */
    struct env *e = start("--security-label --modcaps=+sys_admin");
    assert_true(e->init.flags & FUSE_SECURITY_CTX);
    size_t n = make_blob(blob, "security.selinux", label, sizeof(label));
    assert_int_equal(create_all(e, blob, n, true), 0);
    const char *names[] = { "f", "d", "p", "l" };
    for (size_t k = 0; k < 4; k++)
        expect_label(e, names[k], "security.selinux");
    /* The symlink's own label (its target does not exist). */
    struct stat st;
    assert_int_equal(lstat(hpath(e, "l"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_false(host_exists(hpath(e, "missing-target")));

    /* nr_secctx 0: created, unlabelled. */
    size_t z = make_blob(blob, NULL, NULL, 0);
    struct fuse_mkdir_in mi = { .mode = 0750 };
    assert_int_equal(create_op(e, FUSE_MKDIR, "plain", NULL, &mi, sizeof(mi), blob, z, true), 0);
    assert_true(lgetxattr(hpath(e, "plain"), "security.selinux", NULL, 0) < 0);
    stop(e);

    /* Linux 6.1 (7.37): the context trails the names, no total_extlen. */
    e = start_minor("--security-label --modcaps=+sys_admin", 37, 0, 0);
    assert_int_equal(e->init.minor, 37);
    n = make_blob(blob, "security.selinux", label, sizeof(label));
    assert_int_equal(create_all(e, blob, n, false), 0);
    for (size_t k = 0; k < 4; k++)
        expect_label(e, names[k], "security.selinux");
    stop(e);
}

/* The host refuses the xattr: the op fails with its errno and leaves nothing behind. */
static void test_label_refused(void **state)
{
    (void)state;
    /*
     * A name the host refuses for sure: trusted.* needs CAP_SYS_ADMIN in the
     * VFS itself (whatever the host's LSM), which the default capability set
     * does not have. (Whether security.* needs it depends on the host's LSM.)
     */
    struct env *e = start("--security-label --xattrmap=:prefix:all:security.:trusted.vufs.:");
    size_t n = make_blob(blob, "security.selinux", label, sizeof(label));
    struct fuse_create_in ci = { .flags = O_WRONLY | O_CREAT, .mode = 0100640 };
    struct fuse_mkdir_in mi = { .mode = 0750 };
    struct fuse_mknod_in mn = { .mode = S_IFIFO | 0640 };
    assert_int_equal(create_op(e, FUSE_CREATE, "f", NULL, &ci, sizeof(ci), blob, n, true), -EPERM);
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), -EPERM);
    assert_int_equal(create_op(e, FUSE_MKNOD, "p", NULL, &mn, sizeof(mn), blob, n, true), -EPERM);
    assert_int_equal(create_op(e, FUSE_SYMLINK, "l", "x", NULL, 0, blob, n, true), -EPERM);
    const char *names[] = { "f", "d", "p", "l" };
    for (size_t k = 0; k < 4; k++)
        assert_false(host_exists(hpath(e, names[k])));
    /* The names are free again, and a request without a label still works. */
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), NULL, 0, true), 0);
    assert_true(host_exists(hpath(e, "d")));
    /* An xattrmap 'bad' rule refuses the name before the host sees it. */
    stop(e);
    e = start("--security-label --modcaps=+sys_admin --xattrmap=:bad:all:security.selinux::");
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), -EPERM);
    assert_false(host_exists(hpath(e, "d")));
    stop(e);
}

/* --xattrmap moves the label out of security.*: no CAP_SYS_ADMIN needed. */
static void test_label_xattrmap(void **state)
{
    (void)state;
    struct env *e = start("--security-label --xattrmap=:map:security.selinux:user.virtiofs.:");
    size_t n = make_blob(blob, "security.selinux", label, sizeof(label));
    struct fuse_create_in ci = { .flags = O_WRONLY | O_CREAT, .mode = 0100640 };
    struct fuse_mkdir_in mi = { .mode = 0750 };
    assert_int_equal(create_op(e, FUSE_CREATE, "f", NULL, &ci, sizeof(ci), blob, n, true), 0);
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), 0);
    expect_label(e, "f", "user.virtiofs.security.selinux");
    expect_label(e, "d", "user.virtiofs.security.selinux");
    assert_true(lgetxattr(hpath(e, "f"), "security.selinux", NULL, 0) < 0);
    stop(e);
}

/* Without --security-label the flag is not granted and nothing is labelled. */
static void test_label_not_negotiated(void **state)
{
    (void)state;
    struct env *e = start("--modcaps=+sys_admin");
    assert_false(e->init.flags & FUSE_SECURITY_CTX);
    size_t n = make_blob(blob, "security.selinux", label, sizeof(label));
    struct fuse_mkdir_in mi = { .mode = 0750 };
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), 0);
    assert_true(host_exists(hpath(e, "d")));
    assert_true(lgetxattr(hpath(e, "d"), "security.selinux", NULL, 0) < 0);
    stop(e);
}

/* Malformed contexts: EINVAL, nothing created, the daemon keeps serving. */
static void test_label_hostile(void **state)
{
    (void)state;
    struct env *e = start("--security-label --modcaps=+sys_admin");
    struct fuse_mkdir_in mi = { .mode = 0750 };
    size_t n = make_blob(blob, "security.selinux", label, sizeof(label));
    struct fuse_secctx_header *h = (struct fuse_secctx_header *)blob;
    struct fuse_secctx *one = (struct fuse_secctx *)(blob + sizeof(*h));

    h->size = (uint32_t)n + 64; /* past the request */
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), -EINVAL);
    h->size = (uint32_t)n;
    one->size = 0x7fffffff; /* oversized value */
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), -EINVAL);
    one->size = sizeof(label);
    h->nr_secctx = 2;
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), -EINVAL);
    h->nr_secctx = 1;
    /* no NUL in the name */
    memset(blob + sizeof(*h) + sizeof(*one), 'a', n - sizeof(*h) - sizeof(*one));
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), -EINVAL);
    /* not a security.* name: never a way to set trusted.* as root */
    n = make_blob(blob, "trusted.overlay.opaque", "y", 1);
    assert_int_equal(create_op(e, FUSE_MKDIR, "d", NULL, &mi, sizeof(mi), blob, n, true), -EINVAL);
    /* total_extlen beyond the request */
    n = make_blob(blob, "security.selinux", label, sizeof(label));
    struct vfe_fuse_op op = { .opcode = FUSE_MKDIR, .nodeid = FUSE_ROOT_ID, .arg = &mi,
                              .arg_len = sizeof(mi), .name = "d", .extra = blob,
                              .extra_len = (uint32_t)n, .total_extlen = 4000 };
    struct fuse_entry_out eo;
    op.out_arg = &eo;
    op.out_arg_len = sizeof(eo);
    assert_int_equal(vfe_fuse_call(e->fuse, 1, &op), -EINVAL);
    assert_false(host_exists(hpath(e, "d")));
    stop(e);
}

/* ---- uid/gid translation ----------------------------------------------------------- */

static void host_owner(struct env *e, const char *name, uid_t uid, gid_t gid)
{
    struct stat st;
    assert_int_equal(lstat(hpath(e, name), &st), 0);
    assert_int_equal(st.st_uid, uid);
    assert_int_equal(st.st_gid, gid);
}

static int setattr_owner(struct env *e, uint64_t nodeid, uint32_t uid, uint32_t gid,
                         struct fuse_attr_out *ao)
{
    struct fuse_setattr_in si = { .valid = FATTR_UID | FATTR_GID, .uid = uid, .gid = gid };
    struct vfe_fuse_op op = { .opcode = FUSE_SETATTR, .nodeid = nodeid, .arg = &si,
                              .arg_len = sizeof(si), .out_arg = ao,
                              .out_arg_len = sizeof(*ao) };
    return vfe_fuse_call(e->fuse, 1, &op);
}

static void test_translate_map(void **state)
{
    (void)state;
    struct env *e = start_minor("--translate-uid=map:1000:5000:10 --translate-gid map:1000:6000:10",
                                41, 1000, 1001);
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    struct fuse_attr_out ao;

    /* Created as guest 1000:1001 -> host 5000:6001; shown back as 1000:1001. */
    assert_int_equal(vfe_fuse_create(e->fuse, FUSE_ROOT_ID, "f", O_WRONLY, 0644, &eo, &oo), 0);
    host_owner(e, "f", 5000, 6001);
    assert_int_equal(eo.attr.uid, 1000);
    assert_int_equal(eo.attr.gid, 1001);
    assert_int_equal(vfe_fuse_mkdir(e->fuse, FUSE_ROOT_ID, "d", 0755, &eo), 0);
    host_owner(e, "d", 5000, 6001);
    assert_int_equal(vfe_fuse_getattr(e->fuse, eo.nodeid, &ao), 0);
    assert_int_equal(ao.attr.uid, 1000);
    assert_int_equal(ao.attr.gid, 1001);

    /* chown by guest root to 1001:1009 -> host 5001:6009. */
    vfe_fuse_set_ids(e->fuse, 0, 0);
    assert_int_equal(setattr_owner(e, eo.nodeid, 1001, 1009, &ao), 0);
    host_owner(e, "d", 5001, 6009);
    assert_int_equal(ao.attr.uid, 1001);
    assert_int_equal(ao.attr.gid, 1009);
    /* Outside the ranges ids pass unchanged, both ways (the Rust daemon's rule). */
    assert_int_equal(setattr_owner(e, eo.nodeid, 1010, 999, &ao), 0);
    host_owner(e, "d", 1010, 999);
    assert_int_equal(ao.attr.uid, 1010);
    assert_int_equal(ao.attr.gid, 999);

    /* A host file of an unmapped host id, and one inside the host range. */
    int fd = open(hpath(e, "h"), O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, 7777, 5005), 0);
    close(fd);
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "h", &eo), 0);
    assert_int_equal(eo.attr.uid, 7777);
    assert_int_equal(eo.attr.gid, 5005); /* the gid map is 6000-based: 5005 unmapped */
    assert_int_equal(chown(hpath(e, "h"), 5003, 6004), 0);
    assert_int_equal(vfe_fuse_getattr(e->fuse, eo.nodeid, &ao), 0);
    assert_int_equal(ao.attr.uid, 1003);
    assert_int_equal(ao.attr.gid, 1004);
    stop(e);
}

static void test_translate_squash_forbid(void **state)
{
    (void)state;
    struct env *e = start_minor("--translate-uid squash-guest:0:4000:3000 "
                                "--translate-uid forbid-guest:3000:1 "
                                "--translate-uid squash-host:7000:65534:1000 "
                                "--translate-gid squash-guest:0:4000:4294967295",
                                41, 0, 0);
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    struct fuse_attr_out ao;

    /* Guest root squashed onto host 4000: root's new files are not root's on the host. */
    assert_int_equal(vfe_fuse_mkdir(e->fuse, FUSE_ROOT_ID, "d", 0777, &eo), 0);
    host_owner(e, "d", 4000, 4000);
    uint64_t d = eo.nodeid;
    vfe_fuse_set_ids(e->fuse, 2999, 12);
    assert_int_equal(vfe_fuse_create(e->fuse, d, "f", O_WRONLY, 0644, &eo, &oo), 0);
    host_owner(e, "d/f", 4000, 4000);

    /* Forbidden guest id: EPERM for creating requests and for chown; nothing made. */
    vfe_fuse_set_ids(e->fuse, 3000, 0);
    assert_int_equal(vfe_fuse_create(e->fuse, d, "g", O_WRONLY, 0644, &eo, &oo), -EPERM);
    assert_int_equal(vfe_fuse_mkdir(e->fuse, d, "g", 0755, &eo), -EPERM);
    assert_false(host_exists(hpath(e, "d/g")));
    vfe_fuse_set_ids(e->fuse, 0, 0);
    assert_int_equal(setattr_owner(e, d, 3000, 0, &ao), -EPERM);
    host_owner(e, "d", 4000, 4000);

    /* squash-host: host ids 7000..7999 all show as 65534 (the overflow id). */
    int fd = open(hpath(e, "h"), O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, 7500, 0), 0);
    close(fd);
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "h", &eo), 0);
    assert_int_equal(eo.attr.uid, 65534);
    assert_int_equal(eo.attr.gid, 0);
    stop(e);
}

/* A rule the grammar refuses: vufsd exits 1 with a message, before serving. */
static void test_translate_bad_rule(void **state)
{
    (void)state;
    const char *bad[] = { "map:1:2", "map:1:2:3 --translate-uid=guest:2:9:1", "forbid:1:2",
                          "squash-guest:0:1:0" };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "%s --socket-path=/tmp/vufsd-creds-bad.sock --shared-dir=/tmp "
                 "--translate-uid=%s 2>/tmp/vufsd-creds-bad.err",
                 opt_vufsd, bad[k]);
        int st = system(cmd);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 1);
        char msg[512] = "";
        FILE *f = fopen("/tmp/vufsd-creds-bad.err", "r");
        assert_non_null(f);
        size_t n = fread(msg, 1, sizeof(msg) - 1, f);
        msg[n] = '\0';
        fclose(f);
        if (!strstr(msg, "translate"))
            fail_msg("no message for %s: %s", bad[k], msg);
    }
    unlink("/tmp/vufsd-creds-bad.err");
    unlink("/tmp/vufsd-creds-bad.sock");
}

/* ---- --uid-map / --gid-map ------------------------------------------------------------- */

/* The first line of /proc/PID/FILE that starts with key, or "". */
static void proc_line(pid_t pid, const char *file, const char *key, char *out, size_t size)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0) {
            snprintf(out, size, "%s", line);
            break;
        }
    fclose(f);
}

/* Rootless: vufsd run as nobody serves from its own user namespace. */
static void test_uid_map_rootless(void **state)
{
    (void)state;
    char sockdir[] = "/tmp/vufsd-creds-sock-XXXXXX", buf[256];
    assert_non_null(mkdtemp(sockdir));
    chmod(sockdir, 0777);
    struct env *e = start_as("setpriv --reuid=65534 --regid=65534 --clear-groups", sockdir,
                             "--uid-map=:0:65534:1: --gid-map=:0:65534:1:", 41, 0, 0);
    pid_t pid = vfe_conn_backend_pid(vfe_dev_conn(e->dev));
    assert_true(pid > 0);
    /* The daemon holds no host privilege: uid nobody, ids mapped as asked. */
    proc_line(pid, "status", "Uid:", buf, sizeof(buf));
    assert_string_equal(buf, "Uid:\t65534\t65534\t65534\t65534\n");
    /* Its capabilities are those of its own user namespace, not of ours. */
    char ns_self[64] = "", ns_it[64] = "", path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    assert_true(readlink("/proc/self/ns/user", ns_self, sizeof(ns_self) - 1) > 0);
    assert_true(readlink(path, ns_it, sizeof(ns_it) - 1) > 0);
    assert_string_not_equal(ns_self, ns_it);
    proc_line(pid, "uid_map", "", buf, sizeof(buf));
    unsigned in, out, cnt;
    assert_int_equal(sscanf(buf, "%u %u %u", &in, &out, &cnt), 3);
    assert_int_equal(in, 0);
    assert_int_equal(out, 65534);
    assert_int_equal(cnt, 1);

    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    struct fuse_attr_out ao;
    /* Guest root's new file belongs to host nobody, and is root's in the guest. */
    assert_int_equal(vfe_fuse_create(e->fuse, FUSE_ROOT_ID, "f", O_WRONLY, 0644, &eo, &oo), 0);
    host_owner(e, "f", 65534, 65534);
    assert_int_equal(eo.attr.uid, 0);
    assert_int_equal(vfe_fuse_write(e->fuse, eo.nodeid, oo.fh, 0, "rootless", 8), 8);
    char data[16] = "";
    int fd = open(hpath(e, "f"), O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, data, sizeof(data)), 8);
    close(fd);
    assert_memory_equal(data, "rootless", 8);
    /* A host root file: root is not mapped, so it shows as the overflow id. */
    fd = open(hpath(e, "r"), O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "r", &eo), 0);
    assert_int_equal(eo.attr.uid, 65534);
    assert_int_equal(eo.attr.gid, 65534);
    /* ... and the daemon cannot take it over. */
    assert_int_equal(setattr_owner(e, eo.nodeid, 0, 0, &ao), -EPERM);
    struct stat st;
    assert_int_equal(stat(hpath(e, "r"), &st), 0);
    assert_int_equal(st.st_uid, 0);
    /* A guest uid the namespace does not map cannot create (the host says EINVAL). */
    vfe_fuse_set_ids(e->fuse, 1000, 1000);
    assert_int_equal(vfe_fuse_mkdir(e->fuse, FUSE_ROOT_ID, "u", 0755, &eo), -EINVAL);
    assert_false(host_exists(hpath(e, "u")));
    stop(e);

    /* With every guest id squashed onto namespace root, any guest user creates. */
    e = start_as("setpriv --reuid=65534 --regid=65534 --clear-groups", sockdir,
                 "--uid-map=:0:65534:1: --gid-map=:0:65534:1: "
                 "--translate-uid=squash-guest:0:0:4294967295 "
                 "--translate-gid=squash-guest:0:0:4294967295",
                 41, 1000, 1000);
    assert_int_equal(vfe_fuse_mkdir(e->fuse, FUSE_ROOT_ID, "u", 0755, &eo), 0);
    host_owner(e, "u", 65534, 65534);
    stop(e);
    char sp[160];
    snprintf(sp, sizeof(sp), "%s/vufsd.sock", sockdir);
    unlink(sp);
    rmdir(sockdir);
}

/* As root, a map of many ids is written directly: guest ids land shifted on the host. */
static void test_uid_map_root_range(void **state)
{
    (void)state;
    /* Namespace root is host 100000: the socket goes where that id may write. */
    char sockdir[] = "/tmp/vufsd-creds-sock-XXXXXX";
    assert_non_null(mkdtemp(sockdir));
    chmod(sockdir, 0777);
    struct env *e = start_as(NULL, sockdir, "--uid-map=:0:100000:65536: --gid-map=:0:200000:65536:",
                             41, 0, 0);
    pid_t pid = vfe_conn_backend_pid(vfe_dev_conn(e->dev));
    char buf[256];
    unsigned in, out, cnt;
    proc_line(pid, "gid_map", "", buf, sizeof(buf));
    assert_int_equal(sscanf(buf, "%u %u %u", &in, &out, &cnt), 3);
    assert_int_equal(out, 200000);
    assert_int_equal(cnt, 65536);
    struct fuse_entry_out eo;
    assert_int_equal(vfe_fuse_mkdir(e->fuse, FUSE_ROOT_ID, "r", 0777, &eo), 0);
    host_owner(e, "r", 100000, 200000);
    assert_int_equal(eo.attr.uid, 0);
    assert_int_equal(chmod(hpath(e, "r"), 0777), 0);
    vfe_fuse_set_ids(e->fuse, 1000, 1001);
    assert_int_equal(vfe_fuse_mkdir(e->fuse, eo.nodeid, "u", 0755, &eo), 0);
    host_owner(e, "r/u", 101000, 201001);
    assert_int_equal(eo.attr.uid, 1000);
    assert_int_equal(eo.attr.gid, 1001);
    stop(e);
    char sp[160];
    snprintf(sp, sizeof(sp), "%s/vufsd.sock", sockdir);
    unlink(sp);
    rmdir(sockdir);
}

static void test_uid_map_refused(void **state)
{
    (void)state;
    const char *bad[] = { "--uid-map=0:1:1", "--uid-map=:0:1:0:", "--uid-map=:0:1:", "--gid-map=:a:1:1:",
                          "--uid-map=:0:0:1: --sandbox=chroot" };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "%s --socket-path=/tmp/vufsd-creds-bad.sock --shared-dir=/tmp %s 2>/dev/null",
                 opt_vufsd, bad[k]);
        int st = system(cmd);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st) != 1)
            fail_msg("%s: exit %d", bad[k], WEXITSTATUS(st));
    }
    unlink("/tmp/vufsd-creds-bad.sock");
}

/* ---- GETLK with identical read locks ---------------------------------------------------- */

static int lk_op(struct env *e, uint32_t opcode, uint64_t node, uint64_t fh, uint64_t owner,
                 uint32_t type, uint32_t pid, struct fuse_lk_out *out)
{
    struct fuse_lk_in in = { .fh = fh, .owner = owner,
                             .lk = { .start = 0, .end = 0x7fffffffffffffffull, .type = type,
                                     .pid = pid } };
    struct vfe_fuse_op op = { .opcode = opcode, .nodeid = node, .arg = &in, .arg_len = sizeof(in),
                              .out_arg = out, .out_arg_len = out ? sizeof(*out) : 0 };
    return vfe_fuse_call(e->fuse, 1, &op);
}

/*
 * Two guest processes hold the same read lock; a third asks who is in its
 * way: one of the two, by pid, from the daemon inside its namespace sandbox
 * (the answer comes from /proc/self/fdinfo, reached through the sandbox).
 */
static void test_getlk_identical_readers(void **state)
{
    (void)state;
    struct env *e = start("");
    struct fuse_entry_out eo;
    struct fuse_open_out oo;
    struct fuse_lk_out lo;
    assert_int_equal(vfe_fuse_create(e->fuse, FUSE_ROOT_ID, "f", O_RDWR, 0644, &eo, &oo), 0);
    assert_int_equal(lk_op(e, FUSE_SETLK, eo.nodeid, oo.fh, 1, F_RDLCK, 4001, NULL), 0);
    assert_int_equal(lk_op(e, FUSE_SETLK, eo.nodeid, oo.fh, 2, F_RDLCK, 4002, NULL), 0);
    assert_int_equal(lk_op(e, FUSE_GETLK, eo.nodeid, oo.fh, 3, F_WRLCK, 4003, &lo), 0);
    assert_int_equal(lo.lk.type, F_RDLCK);
    if (lo.lk.pid != 4001 && lo.lk.pid != 4002)
        fail_msg("GETLK named pid %u, not a holder", lo.lk.pid);
    assert_int_equal(lk_op(e, FUSE_SETLK, eo.nodeid, oo.fh, 3, F_WRLCK, 4003, NULL), -EAGAIN);
    stop(e);
}

/* ---- main ---------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int st = it_parse_args(argc, argv, "test_creds", &opt_vufsd, &opt_log);
    if (st)
        return st;
    if (geteuid() != 0) {
        fprintf(stderr, "test_creds: SKIP: needs root (security.* xattrs, other uids)\n");
        return 77; /* meson's skip: not a failure, not a pass */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_set),
        cmocka_unit_test(test_label_refused),
        cmocka_unit_test(test_label_xattrmap),
        cmocka_unit_test(test_label_not_negotiated),
        cmocka_unit_test(test_label_hostile),
        cmocka_unit_test(test_translate_map),
        cmocka_unit_test(test_translate_squash_forbid),
        cmocka_unit_test(test_translate_bad_rule),
        cmocka_unit_test(test_uid_map_rootless),
        cmocka_unit_test(test_uid_map_root_range),
        cmocka_unit_test(test_uid_map_refused),
        cmocka_unit_test(test_getlk_identical_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
