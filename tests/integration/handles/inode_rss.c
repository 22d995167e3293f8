/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inode-rss: the memory a backend spends per known inode. Creates N empty files
 * (in directories of --per-dir files), looks every directory and file up once
 * through the real backend without FORGET, as a guest that keeps its dentry
 * cache warm would, and reads the backend's VmRSS and VmHWM from /proc before
 * and after.
 *
 *   inode-rss --backend 'CMD {socket} {dir}' --files N [--dir DIR] [--per-dir K]
 *             [--depth D] [--keep] [--max-per-inode BYTES]
 *
 * A backend in a pid namespace (vufsd's namespace sandbox) is measured through
 * its child, the daemon proper. --dir reuses a tree an earlier run kept
 * (--keep): creating a million files takes longer than looking them up.
 * --max-per-inode: exit status 1 when the RSS growth per inode is larger.
 * One JSON line on stdout; progress on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vfe.h"
#include "../it_util.h"

struct rss {
    long rss_kib, hwm_kib, anon_kib, file_kib, shmem_kib;
};

static long status_field(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static int read_rss(pid_t pid, struct rss *r)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -EIO;
    buf[n] = '\0';
    r->rss_kib = status_field(buf, "VmRSS:");
    r->hwm_kib = status_field(buf, "VmHWM:");
    r->anon_kib = status_field(buf, "RssAnon:");
    r->file_kib = status_field(buf, "RssFile:");
    r->shmem_kib = status_field(buf, "RssShmem:");
    return r->rss_kib < 0 ? -EIO : 0;
}

/* The daemon proper: the spawned process, or its child when it forked into a pid namespace. */
static pid_t daemon_pid(pid_t spawned)
{
    char path[80], buf[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)spawned, (int)spawned);
    FILE *f = fopen(path, "re");
    if (f) {
        if (!fgets(buf, sizeof(buf), f))
            buf[0] = '\0';
        fclose(f);
    }
    long child = strtol(buf, NULL, 10);
    return child > 0 ? (pid_t)child : spawned;
}

static long count_fds(pid_t pid)
{
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "ls /proc/%d/fd 2>/dev/null | wc -l", (int)pid);
    FILE *p = popen(cmd, "r");
    long n = -1;
    if (p) {
        if (fscanf(p, "%ld", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Creates ndirs directories of per_dir empty files (skipped when a kept tree matches). */
static int make_tree(const char *dir, unsigned files, unsigned per_dir)
{
    char marker[64], name[32];
    snprintf(marker, sizeof(marker), ".inode-rss-%u-%u", files, per_dir);
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    if (faccessat(dfd, marker, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
        close(dfd);
        return 0;
    }
    for (unsigned i = 0; i < files; i++) {
        if (i % per_dir == 0) {
            snprintf(name, sizeof(name), "d%05u", i / per_dir);
            if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
                goto fail;
        }
        snprintf(name, sizeof(name), "d%05u/f%05u", i / per_dir, i % per_dir);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            goto fail;
        close(fd);
        if (i % 100000 == 99999)
            fprintf(stderr, "inode-rss: created %u files\n", i + 1);
    }
    int fd = openat(dfd, marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    close(dfd);
    return 0;
fail:
    fd = -errno;
    close(dfd);
    return fd;
}

struct slot {
    struct vfe_fuse_op op;
    struct fuse_entry_out out;
    char name[16];
    unsigned index;
};

/*
 * LOOKUPs nodes[k] = lookup(parents[k / per_parent], "<prefix><k % per_parent>") for k < n, with
 * depth requests in flight on queue 1. Returns the number looked up before the
 * first error (*err).
 */
static unsigned lookup_all(struct vfe_fuse *f, unsigned depth, unsigned n, const uint64_t *parents,
                           unsigned per_parent, char prefix, uint64_t *nodes, int *err)
{
    struct slot *slots = calloc(depth, sizeof(*slots));
    struct vfe_fuse_op **done = calloc(depth, sizeof(*done));
    unsigned next = 0, completed = 0, in_flight = 0;

    *err = 0;
    if (!slots || !done) {
        *err = -ENOMEM;
        goto out;
    }
    for (;;) {
        bool submitted = false;
        for (unsigned s = 0; s < depth && next < n && !*err; s++) {
            if (slots[s].op.opcode)
                continue; /* in flight */
            struct slot *sl = &slots[s];
            sl->index = next;
            snprintf(sl->name, sizeof(sl->name), "%c%05u", prefix, next % per_parent);
            sl->op =
                (struct vfe_fuse_op){.opcode = FUSE_LOOKUP,
                                     .nodeid = parents ? parents[next / per_parent] : FUSE_ROOT_ID,
                                     .name = sl->name,
                                     .out_arg = &sl->out,
                                     .out_arg_len = sizeof(sl->out),
                                     .user = sl};
            int r = vfe_fuse_submit(f, 1, &sl->op);
            if (r == -EAGAIN) {
                sl->op.opcode = 0;
                break;
            }
            if (r < 0) {
                *err = r;
                break;
            }
            next++;
            in_flight++;
            submitted = true;
        }
        if (submitted)
            vfe_fuse_kick(f, 1);
        if (in_flight == 0)
            break;
        int got = vfe_fuse_reap(f, 1, done, depth, 30000);
        if (got < 0) {
            *err = got;
            break;
        }
        for (int k = 0; k < got; k++) {
            struct slot *sl = done[k]->user;
            in_flight--;
            if (sl->op.error && !*err)
                *err = sl->op.error;
            else if (!sl->op.error) {
                nodes[sl->index] = sl->out.nodeid;
                completed++;
            }
            sl->op.opcode = 0;
        }
        if (*err && in_flight == 0)
            break;
    }
out:
    free(slots);
    free(done);
    return completed;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"backend", required_argument, NULL, 'b'},
        {"files", required_argument, NULL, 'n'},
        {"dir", required_argument, NULL, 'd'},
        {"per-dir", required_argument, NULL, 'p'},
        {"depth", required_argument, NULL, 'q'},
        {"keep", no_argument, NULL, 'k'},
        {"max-per-inode", required_argument, NULL, 'm'},
        {"log", required_argument, NULL, 'l'},
        {0},
    };
    const char *backend = NULL, *dir_opt = NULL, *log = NULL;
    unsigned files = 0, per_dir = 1000, depth = 64;
    double max_per_inode = 0;
    bool keep = false;
    int c;

    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'b':
            backend = optarg;
            break;
        case 'n':
            files = (unsigned)strtoul(optarg, NULL, 0);
            break;
        case 'd':
            dir_opt = optarg;
            break;
        case 'p':
            per_dir = (unsigned)strtoul(optarg, NULL, 0);
            break;
        case 'q':
            depth = (unsigned)strtoul(optarg, NULL, 0);
            break;
        case 'k':
            keep = true;
            break;
        case 'm':
            max_per_inode = strtod(optarg, NULL);
            break;
        case 'l':
            log = optarg;
            break;
        default:
            return 2;
        }
    }
    if (!backend || !files || !per_dir || !depth || depth > 512) {
        fprintf(stderr, "usage: inode-rss --backend 'CMD {socket} {dir}' --files N [--dir DIR] "
                        "[--per-dir K] [--depth D] [--keep] [--max-per-inode BYTES]\n");
        return 2;
    }
    char dir[256];
    if (dir_opt) {
        snprintf(dir, sizeof(dir), "%s", dir_opt);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
            perror("inode-rss: mkdir");
            return 1;
        }
    } else {
        snprintf(dir, sizeof(dir), "/tmp/vufs-inode-rss-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("inode-rss: mkdtemp");
            return 1;
        }
        chmod(dir, 0755);
    }
    double t0 = now_s();
    int r = make_tree(dir, files, per_dir);
    if (r < 0) {
        fprintf(stderr, "inode-rss: creating files in %s: %s\n", dir, strerror(-r));
        return 1;
    }
    double t_create = now_s() - t0;
    unsigned ndirs = (files + per_dir - 1) / per_dir;

    struct vfe_dev *dev = NULL;
    struct vfe_fuse *fuse = NULL;
    struct vfe_fuse_init_result init;
    struct vfe_dev_config dc = {
        .conn = {.backend_cmd = backend, .dir = dir, .backend_log = log, .timeout_ms = 60000},
        .request_queues = 1,
        .queue_size = 1024,
    };
    struct vfe_fuse_config fc = {.depth = depth, .timeout_ms = 60000};
    int status = 1;
    r = vfe_dev_connect(&dc, &dev);
    if (r == 0)
        r = vfe_dev_start(dev);
    if (r == 0)
        r = vfe_fuse_new(dev, &fc, &fuse);
    if (r == 0)
        r = vfe_fuse_init(fuse, &init);
    if (r < 0) {
        fprintf(stderr, "inode-rss: backend: %s\n", strerror(-r));
        goto out;
    }
    pid_t pid = daemon_pid(vfe_conn_backend_pid(vfe_dev_conn(dev)));
    struct rss before, after;
    r = read_rss(pid, &before);
    if (r < 0) {
        fprintf(stderr, "inode-rss: /proc/%d/status: %s\n", (int)pid, strerror(-r));
        goto out;
    }
    uint64_t *dnodes = calloc(ndirs, sizeof(*dnodes));
    uint64_t *fnodes = calloc(files, sizeof(*fnodes));
    if (!dnodes || !fnodes)
        goto out;
    int err = 0;
    double t1 = now_s();
    unsigned got_dirs = lookup_all(fuse, depth, ndirs, NULL, ndirs + 1, 'd', dnodes, &err);
    unsigned got_files = 0;
    if (!err)
        got_files = lookup_all(fuse, depth, files, dnodes, per_dir, 'f', fnodes, &err);
    double t_lookup = now_s() - t1;
    r = read_rss(pid, &after);
    long fds = count_fds(pid);
    if (r < 0) {
        fprintf(stderr, "inode-rss: /proc/%d/status: %s\n", (int)pid, strerror(-r));
        goto out;
    }
    unsigned known = got_dirs + got_files;
    double per_inode = known ? (double)(after.rss_kib - before.rss_kib) * 1024.0 / known : 0;
    double target_kib = 32.0 * 1024 + 256.0 * known / 1024;
    fprintf(stderr,
            "inode-rss: %u inodes known (%u dirs, %u files) in %.1f s (%.0f lookups/s)%s%s\n"
            "inode-rss: VmRSS %ld -> %ld KiB (anon %ld, file %ld, shmem %ld), VmHWM %ld KiB, "
            "%ld fds\n"
            "inode-rss: %.1f bytes per inode; target 32 MiB + 256 B/inode = %.0f KiB: %s\n",
            known, got_dirs, got_files, t_lookup, known / (t_lookup > 0 ? t_lookup : 1),
            err ? ", stopped by " : "", err ? strerror(-err) : "", before.rss_kib, after.rss_kib,
            after.anon_kib, after.file_kib, after.shmem_kib, after.hwm_kib, fds, per_inode,
            target_kib, after.hwm_kib <= target_kib ? "met" : "MISSED");
    printf("{\"files\": %u, \"inodes\": %u, \"error\": %d, \"create_s\": %.2f, \"lookup_s\": %.2f, "
           "\"lookups_per_s\": %.0f, \"rss_before_kib\": %ld, \"rss_after_kib\": %ld, "
           "\"hwm_kib\": %ld, \"anon_kib\": %ld, \"shmem_kib\": %ld, \"fds\": %ld, "
           "\"bytes_per_inode\": %.1f, \"target_kib\": %.0f, \"target_met\": %s}\n",
           files, known, err, t_create, t_lookup, known / (t_lookup > 0 ? t_lookup : 1),
           before.rss_kib, after.rss_kib, after.hwm_kib, after.anon_kib, after.shmem_kib, fds,
           per_inode, target_kib, after.hwm_kib <= target_kib ? "true" : "false");
    status = 0;
    if (max_per_inode > 0 && (err || per_inode > max_per_inode)) {
        fprintf(stderr, "inode-rss: FAIL: %s\n",
                err ? "not every lookup succeeded" : "more RSS per inode than allowed");
        status = 1;
    }
    free(dnodes);
    free(fnodes);
out:
    if (fuse)
        vfe_fuse_free(fuse);
    if (dev)
        vfe_dev_close(dev);
    if (!keep && !dir_opt)
        it_rm_tree(dir);
    return status;
}
