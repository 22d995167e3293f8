/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs-frontend: drive a vhost-user-fs backend from the command line, the way
 * QEMU and a guest driver would, and show each step.
 *
 *   vufs-frontend (--socket PATH | --backend 'CMD {socket} {dir}' --dir DIR)
 *                 [--queues N] [--queue-size N] [--proto MINOR] [--no-event-idx]
 *                 [--no-indirect] [--backend-log FILE] [--timeout MS]
 *                 [--depth N] [--block BYTES] [--random] [--indirect] [--trace]
 *                 COMMAND [ARGS] [COMMAND [ARGS]]...
 *
 * --trace logs every vhost-user message (as VFE_TRACE=1 does).
 *
 * Commands run in order after INIT: init, ls PATH, cat PATH, write PATH TEXT,
 * stat PATH, mkdir PATH, rm PATH, rmdir PATH, statfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <glib.h>

#include "vfe.h"

struct cli {
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    bool inited;
    unsigned depth;
    uint32_t block;
    bool random;
    bool indirect;
};

static int fail(const char *what, int r)
{
    fprintf(stderr, "vufs-frontend: %s: %s\n", what, g_strerror(-r));
    return r;
}

static int do_init(struct cli *c)
{
    if (c->inited)
        return 0;
    struct vfe_fuse_init_result res;
    int r = vfe_fuse_init(c->fuse, &res);
    if (r < 0)
        return fail("FUSE_INIT", r);
    printf("FUSE_INIT: protocol %u.%u, max_write %u, max_readahead %u, max_pages %u, "
           "flags 0x%" PRIx64 "\n",
           res.major, res.minor, res.max_write, res.max_readahead, res.max_pages, res.flags);
    c->inited = true;
    return 0;
}

/* The entry of PATH; a failure is reported against PATH. */
static int lookup(struct cli *c, const char *path, struct fuse_entry_out *e)
{
    int r = vfe_fuse_lookup_path(c->fuse, path, e);
    return r < 0 ? fail(path, r) : 0;
}

/* Splits PATH into its parent's node id and the last name; a failure is
 * reported against PATH. */
static int lookup_parent(struct cli *c, const char *path, uint64_t *parent, char **name)
{
    g_autofree char *dir = g_path_get_dirname(path);
    *name = g_path_get_basename(path);
    struct fuse_entry_out e;
    int r = vfe_fuse_lookup_path(c->fuse, dir, &e);
    if (r < 0)
        return fail(path, r);
    *parent = e.nodeid;
    return 0;
}

static void print_dirent(void *opaque, const char *name, size_t namelen, uint64_t ino,
                         uint32_t type, uint64_t off)
{
    static const char types[16] = { [1] = 'p', [2] = 'c', [4] = 'd', [6] = 'b', [8] = '-',
                                    [10] = 'l', [12] = 's' };
    char t = type < 16 && types[type] ? types[type] : '?';
    printf("  %c %10" PRIu64 "  %.*s\n", t, ino, (int)namelen, name);
}

static int cmd_ls(struct cli *c, const char *path)
{
    struct fuse_entry_out e;
    int r = lookup(c, path, &e);
    if (r < 0)
        return r;
    printf("READDIR %s (node %" PRIu64 "):\n", path, (uint64_t)e.nodeid);
    r = vfe_fuse_readdir_all(c->fuse, e.nodeid, print_dirent, NULL);
    if (r < 0)
        return fail("READDIR", r);
    printf("  (%d entries)\n", r);
    return 0;
}

static int cmd_cat(struct cli *c, const char *path)
{
    struct fuse_entry_out e;
    int r = lookup(c, path, &e);
    if (r < 0)
        return r;
    struct fuse_open_out o;
    r = vfe_fuse_open(c->fuse, e.nodeid, O_RDONLY, &o);
    if (r < 0)
        return fail("OPEN", r);
    printf("READ %s (node %" PRIu64 ", fh %" PRIu64 ", size %" PRIu64 "):\n", path,
           (uint64_t)e.nodeid, (uint64_t)o.fh, (uint64_t)e.attr.size);
    g_autofree char *buf = g_malloc(64 * 1024);
    uint64_t off = 0;
    for (;;) {
        ssize_t n = vfe_fuse_read(c->fuse, e.nodeid, o.fh, off, buf, 64 * 1024);
        if (n < 0) {
            r = fail("READ", (int)n);
            break;
        }
        if (n == 0)
            break;
        fwrite(buf, 1, (size_t)n, stdout);
        off += (uint64_t)n;
    }
    fflush(stdout);
    int r2 = vfe_fuse_release(c->fuse, e.nodeid, o.fh, O_RDONLY);
    return r < 0 ? r : r2;
}

static int cmd_write(struct cli *c, const char *path, const char *text)
{
    uint64_t parent;
    g_autofree char *name = NULL;
    int r = lookup_parent(c, path, &parent, &name);
    if (r < 0)
        return r;
    struct fuse_entry_out e;
    struct fuse_open_out o;
    r = vfe_fuse_create(c->fuse, parent, name, O_WRONLY | O_CREAT | O_TRUNC, 0644, &e, &o);
    if (r == -EEXIST) {
        r = vfe_fuse_lookup(c->fuse, parent, name, &e);
        if (r == 0)
            r = vfe_fuse_open(c->fuse, e.nodeid, O_WRONLY | O_TRUNC, &o);
    }
    if (r < 0)
        return fail("CREATE/OPEN", r);
    size_t len = strlen(text);
    ssize_t n = vfe_fuse_write(c->fuse, e.nodeid, o.fh, 0, text, len);
    if (n < 0)
        r = fail("WRITE", (int)n);
    else
        printf("WRITE %s (node %" PRIu64 "): %zd bytes\n", path, (uint64_t)e.nodeid, n);
    int r2 = vfe_fuse_release(c->fuse, e.nodeid, o.fh, O_WRONLY);
    return r < 0 ? r : r2;
}

static int cmd_stat(struct cli *c, const char *path)
{
    struct fuse_entry_out e;
    int r = lookup(c, path, &e);
    if (r < 0)
        return r;
    struct fuse_attr_out a;
    r = vfe_fuse_getattr(c->fuse, e.nodeid, &a);
    if (r < 0)
        return fail("GETATTR", r);
    printf("GETATTR %s: node %" PRIu64 " ino %" PRIu64 " mode %o nlink %u uid %u gid %u "
           "size %" PRIu64 " mtime %" PRIu64 "\n",
           path, (uint64_t)e.nodeid, (uint64_t)a.attr.ino, a.attr.mode, a.attr.nlink,
           a.attr.uid, a.attr.gid, (uint64_t)a.attr.size, (uint64_t)a.attr.mtime);
    return 0;
}

static int cmd_mkdir(struct cli *c, const char *path)
{
    uint64_t parent;
    g_autofree char *name = NULL;
    int r = lookup_parent(c, path, &parent, &name);
    if (r < 0)
        return r;
    struct fuse_entry_out e;
    r = vfe_fuse_mkdir(c->fuse, parent, name, 0755, &e);
    if (r < 0)
        return fail("MKDIR", r);
    printf("MKDIR %s: node %" PRIu64 "\n", path, (uint64_t)e.nodeid);
    return 0;
}

static int cmd_remove(struct cli *c, const char *path, bool dir)
{
    uint64_t parent;
    g_autofree char *name = NULL;
    int r = lookup_parent(c, path, &parent, &name);
    if (r < 0)
        return r;
    r = dir ? vfe_fuse_rmdir(c->fuse, parent, name) : vfe_fuse_unlink(c->fuse, parent, name);
    if (r < 0)
        return fail(dir ? "RMDIR" : "UNLINK", r);
    printf("%s %s: done\n", dir ? "RMDIR" : "UNLINK", path);
    return 0;
}

static int cmd_statfs(struct cli *c)
{
    struct fuse_statfs_out s;
    int r = vfe_fuse_statfs(c->fuse, FUSE_ROOT_ID, &s);
    if (r < 0)
        return fail("STATFS", r);
    printf("STATFS: bsize %u blocks %" PRIu64 " bfree %" PRIu64 " files %" PRIu64
           " namelen %u\n",
           s.st.bsize, (uint64_t)s.st.blocks, (uint64_t)s.st.bfree, (uint64_t)s.st.files,
           s.st.namelen);
    return 0;
}

static int cmd_bench(struct cli *c, const char *what, const char *path, const char *secs)
{
    struct vfe_bench_config bc = {
        .queues = vfe_dev_nqueues(c->dev) - 1, .depth = c->depth, .block = c->block,
        .random = c->random, .indirect = c->indirect };
    if (!strcmp(what, "read"))
        bc.op = VFE_BENCH_READ;
    else if (!strcmp(what, "write"))
        bc.op = VFE_BENCH_WRITE;
    else if (!strcmp(what, "getattr"))
        bc.op = VFE_BENCH_GETATTR;
    else
        return fail(what, -EINVAL);
    char *end;
    double s = strtod(secs, &end);
    if (*end || s <= 0 || s > 3600)
        return fail(secs, -EINVAL);
    bc.duration_ns = (uint64_t)(s * 1e9);
    struct fuse_entry_out e;
    int r = lookup(c, path, &e);
    if (r < 0)
        return r;
    bc.nodeid = e.nodeid;
    bc.file_size = e.attr.size;
    struct fuse_open_out o = { 0 };
    bool opened = bc.op != VFE_BENCH_GETATTR;
    if (opened) {
        r = vfe_fuse_open(c->fuse, e.nodeid, bc.op == VFE_BENCH_READ ? O_RDONLY : O_WRONLY, &o);
        if (r < 0)
            return fail("OPEN", r);
        bc.fh = o.fh;
        if (bc.file_size < bc.block)
            bc.file_size = bc.block;
    }
    printf("bench %s %s: %u queue(s) x depth %u, block %u, %s%s, %.1f s\n", what, path,
           bc.queues, bc.depth, bc.block, bc.random ? "random" : "sequential",
           bc.indirect ? ", indirect" : "", s);
    struct vfe_bench_result *res = g_new0(struct vfe_bench_result, 1);
    r = vfe_bench_run(c->fuse, c->dev, &bc, res);
    if (r < 0) {
        g_free(res);
        return fail("bench", r);
    }
    double secs_run = (double)res->elapsed_ns / 1e9;
    const struct vfe_hist *h = &res->latency;
    printf("  %" PRIu64 " ops (%" PRIu64 " errors) in %.3f s: %.0f ops/s, %.1f MiB/s\n",
           res->ops, res->errors, secs_run, (double)res->ops / secs_run,
           (double)res->bytes / secs_run / (1024.0 * 1024.0));
    printf("  latency us: min %.1f  mean %.1f  p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
           (double)h->min / 1e3, h->total ? (double)h->sum / (double)h->total / 1e3 : 0.0,
           (double)vfe_hist_percentile(h, 50) / 1e3, (double)vfe_hist_percentile(h, 99) / 1e3,
           (double)vfe_hist_percentile(h, 99.9) / 1e3, (double)h->max / 1e3);
    g_free(res);
    if (opened)
        vfe_fuse_release(c->fuse, e.nodeid, o.fh, 0);
    return 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: vufs-frontend (--socket PATH | --backend 'CMD {socket} {dir}' --dir DIR)\n"
            "                     [--queues N] [--queue-size N] [--proto MINOR]\n"
            "                     [--no-event-idx] [--no-indirect] [--backend-log FILE]\n"
            "                     [--timeout MS] [--depth N] [--block BYTES] [--random]\n"
            "                     [--indirect] [--trace] COMMAND [ARGS]...\n"
            "commands: init | ls PATH | cat PATH | write PATH TEXT | stat PATH |\n"
            "          mkdir PATH | rm PATH | rmdir PATH | statfs |\n"
            "          bench read|write|getattr PATH SECONDS  (all request queues, --depth\n"
            "          requests in flight on each)\n");
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *v)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(s, &end, 0);
    if (errno || *end || end == s || x > max)
        return false;
    *v = x;
    return true;
}

enum cli_cmd { C_INIT, C_LS, C_CAT, C_WRITE, C_STAT, C_MKDIR, C_RM, C_RMDIR, C_STATFS, C_BENCH };

static const struct {
    const char *name;
    int nargs;
} cli_cmds[] = {
    [C_INIT] = { "init", 0 },   [C_LS] = { "ls", 1 },     [C_CAT] = { "cat", 1 },
    [C_WRITE] = { "write", 2 }, [C_STAT] = { "stat", 1 }, [C_MKDIR] = { "mkdir", 1 },
    [C_RM] = { "rm", 1 },       [C_RMDIR] = { "rmdir", 1 }, [C_STATFS] = { "statfs", 0 },
    [C_BENCH] = { "bench", 3 },
};

/* The command named s, or -1. */
static int cli_cmd(const char *s)
{
    for (size_t j = 0; j < sizeof(cli_cmds) / sizeof(cli_cmds[0]); j++)
        if (!strcmp(s, cli_cmds[j].name))
            return (int)j;
    return -1;
}

static int run_commands(struct cli *c, int argc, char **argv)
{
    /* Validate the whole list before touching the backend. */
    for (int i = 0; i < argc;) {
        int k = cli_cmd(argv[i]);
        if (k < 0 || i + cli_cmds[k].nargs > argc - 1) {
            fprintf(stderr, "vufs-frontend: bad command near '%s'\n", argv[i]);
            return -EINVAL;
        }
        i += 1 + cli_cmds[k].nargs;
    }
    int r = do_init(c);
    for (int i = 0; i < argc && r == 0;) {
        int k = cli_cmd(argv[i]);
        char **a = &argv[i + 1];
        switch ((enum cli_cmd)k) {
        case C_INIT: break;
        case C_LS: r = cmd_ls(c, a[0]); break;
        case C_CAT: r = cmd_cat(c, a[0]); break;
        case C_WRITE: r = cmd_write(c, a[0], a[1]); break;
        case C_STAT: r = cmd_stat(c, a[0]); break;
        case C_MKDIR: r = cmd_mkdir(c, a[0]); break;
        case C_RM: r = cmd_remove(c, a[0], false); break;
        case C_RMDIR: r = cmd_remove(c, a[0], true); break;
        case C_STATFS: r = cmd_statfs(c); break;
        case C_BENCH: r = cmd_bench(c, a[0], a[1], a[2]); break;
        }
        i += 1 + cli_cmds[k].nargs;
    }
    return r;
}

int main(int argc, char **argv)
{
    struct vfe_dev_config cfg = { 0 };
    struct cli c = { .depth = 16, .block = 4096 };
    unsigned long v;
    unsigned proto = 0;
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        const char *o = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (!strcmp(o, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(o, "--trace")) {
            takes = false;
            setenv("VFE_TRACE", "1", 1);
        } else if (!strcmp(o, "--random")) {
            takes = false;
            c.random = true;
        } else if (!strcmp(o, "--indirect")) {
            takes = false;
            c.indirect = true;
        } else if (!strcmp(o, "--no-event-idx") || !strcmp(o, "--no-indirect")) {
            takes = false;
            uint64_t base = cfg.features ? cfg.features
                                         : (1ull << VFE_F_VERSION_1) | (1ull << VFE_F_EVENT_IDX) |
                                               (1ull << VFE_F_INDIRECT_DESC);
            base &= ~(1ull << (o[5] == 'e' ? VFE_F_EVENT_IDX : VFE_F_INDIRECT_DESC));
            cfg.features = base;
        } else if (!val) {
            usage(stderr);
            return 2;
        } else if (!strcmp(o, "--socket")) {
            cfg.conn.socket_path = val;
        } else if (!strcmp(o, "--backend")) {
            cfg.conn.backend_cmd = val;
        } else if (!strcmp(o, "--dir")) {
            cfg.conn.dir = val;
        } else if (!strcmp(o, "--backend-log")) {
            cfg.conn.backend_log = val;
        } else if (!strcmp(o, "--queues") && parse_uint(val, 64, &v) && v > 0) {
            cfg.request_queues = (unsigned)v;
        } else if (!strcmp(o, "--queue-size") && parse_uint(val, VFE_VQ_MAX_SIZE, &v)) {
            cfg.queue_size = (unsigned)v;
        } else if (!strcmp(o, "--proto") && parse_uint(val, 41, &v) && v >= 31) {
            proto = (unsigned)v;
        } else if (!strcmp(o, "--depth") && parse_uint(val, 1024, &v) && v > 0) {
            c.depth = (unsigned)v;
        } else if (!strcmp(o, "--block") && parse_uint(val, 1u << 20, &v) && v > 0) {
            c.block = (uint32_t)v;
        } else if (!strcmp(o, "--timeout") && parse_uint(val, 3600000, &v) && v > 0) {
            cfg.conn.timeout_ms = (int)v;
        } else {
            fprintf(stderr, "vufs-frontend: bad option or value: %s\n", o);
            usage(stderr);
            return 2;
        }
        if (takes)
            i++;
    }
    if ((!cfg.conn.socket_path && !cfg.conn.backend_cmd) || i >= argc) {
        usage(stderr);
        return 2;
    }

    /* Room for depth requests of up to 3 descriptors each. */
    unsigned qs = cfg.queue_size ? cfg.queue_size : 128;
    while (qs < 3 * c.depth && qs < VFE_VQ_MAX_SIZE)
        qs *= 2;
    cfg.queue_size = qs;
    if (cfg.conn.backend_cmd)
        printf("spawning backend: %s\n", cfg.conn.backend_cmd);
    int r = vfe_dev_connect(&cfg, &c.dev);
    if (r < 0) {
        fail("connect", r);
        return 1;
    }
    printf("connected to %s: features 0x%" PRIx64 ", protocol features 0x%" PRIx64
           ", backend queues %" PRIu64 "\n",
           vfe_conn_socket_path(vfe_dev_conn(c.dev)), vfe_dev_offered_features(c.dev),
           vfe_dev_protocol_features(c.dev), vfe_dev_backend_queues(c.dev));
    r = vfe_dev_start(c.dev);
    if (r < 0) {
        fail("device start", r);
        vfe_dev_close(c.dev);
        return 1;
    }
    printf("device started: %u queues (hiprio + %u request), features 0x%" PRIx64 "\n",
           vfe_dev_nqueues(c.dev), vfe_dev_nqueues(c.dev) - 1, vfe_dev_features(c.dev));
    struct vfe_fuse_config fc = { .depth = c.depth, .proto_minor = proto, .uid = 0, .gid = 0,
                                  .pid = 1 };
    r = vfe_fuse_new(c.dev, &fc, &c.fuse);
    if (r < 0) {
        fail("fuse client", r);
        vfe_dev_close(c.dev);
        return 1;
    }
    r = run_commands(&c, argc - i, argv + i);
    vfe_fuse_free(c.fuse);
    vfe_dev_close(c.dev);
    return r < 0 ? 1 : 0;
}
