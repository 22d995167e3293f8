/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * One vufs-bench run: spawn the backend, negotiate, INIT, resolve the files,
 * then the timed loop (vfe_bench_run) with the backend's CPU time sampled
 * around it. And the host pseudo-backend: the same workload on the host files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "bench_vb.h"
#include "vfe.h"
#include "vufs_util.h"

#define VB_HOST_MAX_THREADS 256u

void vb_result_add(struct vfe_bench_result *res, uint64_t ops, uint64_t errors, int first_error,
                   uint64_t bytes, const struct vfe_hist *hist)
{
    res->ops += ops;
    if (!res->errors && errors)
        res->first_error = first_error;
    res->errors += errors;
    res->bytes += bytes;
    if (hist)
        vfe_hist_merge(&res->latency, hist);
}

void vb_fill_run(struct vb_run *run, const struct vfe_bench_result *res)
{
    run->ops = res->ops;
    run->errors = res->errors;
    run->first_error = res->first_error;
    run->bytes = res->bytes;
    run->secs = (double)res->elapsed_ns / 1e9;
    run->iops = run->secs > 0 ? (double)(res->ops - res->errors) / run->secs : 0;
    run->mib_s = run->secs > 0 ? (double)res->bytes / run->secs / (1024.0 * 1024.0) : 0;
    run->p50_us = (double)vfe_hist_percentile(&res->latency, 50) / 1e3;
    run->p99_us = (double)vfe_hist_percentile(&res->latency, 99) / 1e3;
}

int vb_pgrp_sample(pid_t pgid, double *cpu_s, uint64_t *rss_kib)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    long tck = sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t ticks = 0, pages = 0;
    unsigned found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        g_autofree char *path = g_strdup_printf("/proc/%s/stat", e->d_name);
        g_autofree char *text = NULL;
        if (!g_file_get_contents(path, &text, NULL, NULL))
            continue;
        /* pid (comm) state ppid pgrp ... utime(14) stime(15) ... rss(24): after
         * the last ')' come fields 3.. */
        const char *p = strrchr(text, ')');
        if (!p)
            continue;
        char state;
        int ppid, pgrp;
        unsigned long long ut, st, rss;
        if (sscanf(p + 1,
                   " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d"
                   " %*d %*d %*u %*u %llu",
                   &state, &ppid, &pgrp, &ut, &st, &rss) != 6)
            continue;
        if (pgrp != pgid)
            continue;
        found++;
        ticks += ut + st;
        pages += rss;
    }
    closedir(d);
    if (!found || tck <= 0 || page <= 0)
        return -ESRCH;
    *cpu_s = (double)ticks / (double)tck;
    *rss_kib = pages * (uint64_t)page / 1024;
    return 0;
}

/* ---- A spawned backend -------------------------------------------------------- */

/* What the backend's process (pid, its group's leader) may run on, as its
 * /proc status says: "?" when it cannot be read. A wrapper that execs the daemon
 * keeps the pid, so this is the daemon's own mask. */
static void backend_cpus_seen(pid_t pid, char *buf, size_t len)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)pid);
    g_autofree char *text = NULL;
    g_strlcpy(buf, "?", len);
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return;
    const char *p = strstr(text, "\nCpus_allowed_list:");
    if (!p)
        return;
    p += strlen("\nCpus_allowed_list:");
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, "\n");
    g_strlcpy(buf, p, n + 1 < len ? n + 1 : len);
}

static void replace_all(GString *s, const char *what, const char *with)
{
    for (char *p; (p = strstr(s->str, what));) {
        gssize at = p - s->str;
        g_string_erase(s, at, (gssize)strlen(what));
        g_string_insert(s, at, with);
    }
}

void vb_set_halt_poll(const struct vb_opts *o, struct vfe_dev *dev, unsigned nq)
{
    for (unsigned i = 0; i <= nq; i++)
        vfe_vq_set_halt_poll(vfe_dev_vq(dev, i), (uint64_t)o->halt_poll_us * 1000u);
}

char *vb_backend_cmd(const struct vb_opts *o, const struct vb_backend *be, const char *stats_file)
{
    GString *s = g_string_new(be->cmd);
    g_autofree char *w = g_strdup_printf("%" PRIu64, o->dax_window);
    replace_all(s, "{dax_window}", w);
    replace_all(s, "{dax_policy}", o->dax_window ? o->dax_policy : "never");
    if (stats_file)
        replace_all(s, "{stats_file}", stats_file);
    return g_string_free(s, FALSE);
}

struct vb_session {
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    uint64_t nodeids[64];
    uint64_t fhs[64];
    unsigned nopen;
    uint64_t parents[64]; /* create runs with --create-dirs per-queue: each queue's directory */
    uint64_t *meta_ids;   /* stat: the small files' node ids */
    char **names;         /* lookup: the small files' names */
    unsigned nnames;
};

static int session_connect(const struct vb_opts *o, const struct vb_backend *be, const char *log,
                           unsigned queues, unsigned depth, struct vb_session *s)
{
    unsigned qs = 128;
    while (qs < 3 * depth && qs < VFE_VQ_MAX_SIZE)
        qs *= 2;
    g_autofree char *cmd = vb_backend_cmd(o, be, NULL);
    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = cmd, .dir = o->dir, .backend_log = log,
                  .timeout_ms = 30000, .backend_cpus = o->pin ? &o->backend_cpus : NULL },
        .request_queues = queues,
        .queue_size = qs,
    };
    return vfe_dev_connect(&cfg, &s->dev);
}

static void session_close(struct vb_session *s)
{
    if (s->fuse) {
        for (unsigned i = 0; i < s->nopen; i++)
            vfe_fuse_release(s->fuse, s->nodeids[i], s->fhs[i], 0);
        vfe_fuse_free(s->fuse);
    }
    if (s->dev)
        vfe_dev_close(s->dev);
    g_free(s->meta_ids);
    if (s->names)
        for (unsigned i = 0; i < s->nnames; i++)
            g_free(s->names[i]);
    g_free(s->names);
    memset(s, 0, sizeof(*s));
}

int vb_why(struct vb_run *run, int r, const char *fmt, ...)
{
    g_free(run->why);
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    run->why = g_strdup_printf("%s: %s", what, g_strerror(-r));
    return r;
}

/* Everything before the clock: files opened or looked up per the workload. */
static int session_resolve(const struct vb_opts *o, struct vb_session *s, const char *sub,
                           struct vfe_bench_config *bc, struct vb_run *run)
{
    struct fuse_entry_out e;
    int r = vfe_fuse_lookup(s->fuse, FUSE_ROOT_ID, VB_TOP, &e);
    if (r < 0)
        return vb_why(run, r, "LOOKUP %s", VB_TOP);
    uint64_t top = e.nodeid;
    if (vb_workload_is_data(o->workload)) {
        uint32_t flags = vb_workload_writes(o->workload) ? O_RDWR : O_RDONLY;
        for (unsigned i = 0; i < o->files; i++) {
            g_autofree char *name = vb_data_name(i);
            r = vfe_fuse_lookup(s->fuse, top, name, &e);
            if (r < 0)
                return vb_why(run, r, "LOOKUP %s", name);
            struct fuse_open_out oo;
            r = vfe_fuse_open(s->fuse, e.nodeid, flags, &oo);
            if (r < 0)
                return vb_why(run, r, "OPEN %s", name);
            s->nodeids[i] = e.nodeid;
            s->fhs[i] = oo.fh;
            s->nopen++;
        }
        bc->nodeids = s->nodeids;
        bc->fhs = s->fhs;
        bc->nfiles = o->files;
        bc->file_size = o->size;
        return 0;
    }
    if (vb_workload_creates(o->workload)) {
        r = vfe_fuse_lookup(s->fuse, top, "create", &e);
        if (r < 0)
            return vb_why(run, r, "LOOKUP %s", "create");
        uint64_t create = e.nodeid;
        for (unsigned q = 1; q <= bc->queues; q++) {
            g_autofree char *path = vb_create_dir(o, sub, q);
            uint64_t dir = create;
            g_auto(GStrv) parts = g_strsplit(path, "/", -1);
            for (unsigned k = 0; parts[k] && r == 0; k++) {
                r = vfe_fuse_lookup(s->fuse, dir, parts[k], &e);
                dir = e.nodeid;
            }
            if (r < 0)
                return vb_why(run, r, "LOOKUP create/%s", path);
            s->parents[q - 1] = dir;
        }
        bc->parent = s->parents[0];
        bc->parents = o->create_dir_per_queue ? s->parents : NULL;
        return 0;
    }
    r = vfe_fuse_lookup(s->fuse, top, "meta", &e);
    if (r < 0)
        return vb_why(run, r, "LOOKUP %s", "meta");
    bc->parent = e.nodeid;
    s->nnames = o->files;
    if (o->workload == VB_LOOKUP) {
        s->names = g_new0(char *, o->files);
        for (unsigned i = 0; i < o->files; i++)
            s->names[i] = vb_meta_name(i);
        bc->names = (const char *const *)s->names;
        bc->nnames = o->files;
        return 0;
    }
    /* stat: GETATTR on node ids looked up beforehand. */
    s->meta_ids = g_new0(uint64_t, o->files);
    for (unsigned i = 0; i < o->files; i++) {
        g_autofree char *name = vb_meta_name(i);
        struct fuse_entry_out me;
        r = vfe_fuse_lookup(s->fuse, bc->parent, name, &me);
        if (r < 0)
            return vb_why(run, r, "LOOKUP meta/%s", name);
        s->meta_ids[i] = me.nodeid;
    }
    bc->nodeids = s->meta_ids;
    bc->nfiles = o->files;
    return 0;
}

int vb_run_backend(const struct vb_opts *o, const struct vb_backend *be, const char *sub,
                   const char *log, struct vb_run *run)
{
    if (o->dax_window)
        return vb_run_dax(o, be, log, run);
    struct vb_session s = { 0 };
    unsigned queues = o->queues, depth = o->depth;
    int r = session_connect(o, be, log, queues, depth, &s);
    if (r == -ERANGE && queues > 1) {
        /* Fewer request queues than asked: one queue, the same requests in flight. */
        queues = 1;
        depth = o->queues * o->depth > 1024 ? 1024 : o->queues * o->depth;
        r = session_connect(o, be, log, queues, depth, &s);
    }
    if (r < 0) {
        session_close(&s);
        return vb_why(run, r, "connecting to %s", be->name);
    }
    run->queues = queues;
    run->depth = depth;
    r = vfe_dev_start(s.dev);
    if (r < 0) {
        vb_why(run, r, "%s", "starting the device");
        goto out_session;
    }
    vb_set_halt_poll(o, s.dev, queues);
    struct vfe_fuse_config fc = { .depth = depth, .uid = (uint32_t)getuid(),
                                  .gid = (uint32_t)getgid(), .pid = (uint32_t)getpid() };
    r = vfe_fuse_new(s.dev, &fc, &s.fuse);
    if (r < 0) {
        vb_why(run, r, "%s", "the FUSE client");
        goto out_session;
    }
    struct vfe_fuse_init_result init;
    r = vfe_fuse_init(s.fuse, &init);
    if (r < 0) {
        vb_why(run, r, "%s", "FUSE_INIT");
        goto out_session;
    }
    static const enum vfe_bench_op ops[] = {
        [VB_RANDREAD] = VFE_BENCH_READ, [VB_RANDWRITE] = VFE_BENCH_WRITE,
        [VB_SEQREAD] = VFE_BENCH_READ,  [VB_SEQWRITE] = VFE_BENCH_WRITE,
        [VB_RANDRW] = VFE_BENCH_RW,     [VB_LOOKUP] = VFE_BENCH_LOOKUP,
        [VB_STAT] = VFE_BENCH_GETATTR,  [VB_CREATE] = VFE_BENCH_CREATE,
        [VB_CREATE_UNLINK] = VFE_BENCH_CREATE,
    };
    struct vfe_bench_config bc = {
        .op = ops[o->workload], .queues = queues, .depth = depth, .block = o->bs,
        .random = o->workload != VB_SEQREAD && o->workload != VB_SEQWRITE,
        .duration_ns = (uint64_t)(o->runtime_s * 1e9), .read_pct = o->read_pct,
        .unlink = o->workload == VB_CREATE_UNLINK,
    };
    if (vb_workload_is_data(o->workload) && init.max_write && o->bs > init.max_write &&
        vb_workload_writes(o->workload)) {
        r = -EMSGSIZE;
        vb_why(run, r, "--bs is larger than %s's max_write", be->name);
        goto out_session;
    }
    r = session_resolve(o, &s, sub, &bc, run);
    if (r < 0)
        goto out_session;
    pid_t pgid = vfe_conn_backend_pid(vfe_dev_conn(s.dev));
    backend_cpus_seen(pgid, run->backend_cpus, sizeof(run->backend_cpus));
    double cpu0 = -1, cpu1 = -1;
    uint64_t rss;
    int sampled = vb_pgrp_sample(pgid, &cpu0, &rss);
    struct vfe_bench_result *res = g_new0(struct vfe_bench_result, 1);
    r = vfe_bench_run(s.fuse, s.dev, &bc, res);
    if (sampled == 0)
        sampled = vb_pgrp_sample(pgid, &cpu1, &rss);
    run->cpu_s = sampled == 0 ? cpu1 - cpu0 : -1;
    run->rss_kib = sampled == 0 ? rss : 0;
    if (r < 0)
        vb_why(run, r, "%s", "the benchmark loop");
    else if (res->ops && res->errors == res->ops)
        r = vb_why(run, -EIO, "%s", "every request failed");
    vb_fill_run(run, res);
    g_free(res);
out_session:
    session_close(&s);
    return r;
}

/* ---- The host pseudo-backend ------------------------------------------------------ */

struct host_worker {
    const struct vb_opts *o;
    int *fds;             /* data files */
    int dirfd;            /* meta/ or create/SUB */
    unsigned index;
    uint64_t deadline;
    uint64_t rng, seq_off;
    unsigned seq;
    char *buf;
    struct vfe_hist *hist;
    uint64_t ops, errors, bytes;
    int first_error;
    pthread_t thread;
};

/* xorshift64*: the benches' random offsets, one state per thread. */
uint64_t vb_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* The next data access of a thread: which file, where, read or write. */
struct vb_access vb_next_access(const struct vb_opts *o, uint64_t *rng, uint64_t *seq_off,
                                unsigned index)
{
    bool rnd = o->workload != VB_SEQREAD && o->workload != VB_SEQWRITE;
    uint64_t blocks = o->size / o->bs;
    struct vb_access a;

    a.file = rnd ? (unsigned)(vb_rand(rng) % o->files) : index % o->files;
    if (rnd) {
        a.off = vb_rand(rng) % blocks * o->bs;
    } else {
        a.off = *seq_off;
        *seq_off = (*seq_off + o->bs) % (blocks * o->bs);
    }
    a.write = o->workload == VB_RANDWRITE || o->workload == VB_SEQWRITE ||
              (o->workload == VB_RANDRW && vb_rand(rng) % 100 >= o->read_pct);
    return a;
}

static int host_op(struct host_worker *w)
{
    const struct vb_opts *o = w->o;
    char name[64];
    struct stat st;
    if (vb_workload_is_data(o->workload)) {
        struct vb_access a = vb_next_access(o, &w->rng, &w->seq_off, w->index);
        unsigned f = a.file;
        uint64_t off = a.off;
        bool wr = a.write;
        ssize_t n = wr ? pwrite(w->fds[f], w->buf, o->bs, (off_t)off)
                       : pread(w->fds[f], w->buf, o->bs, (off_t)off);
        if (n < 0)
            return -errno;
        w->bytes += (uint64_t)n;
        return 0;
    }
    if (vb_workload_creates(o->workload)) {
        snprintf(name, sizeof(name), "h%u-%u", w->index, w->seq++);
        int fd = openat(w->dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
        close(fd);
        if (o->workload == VB_CREATE_UNLINK && unlinkat(w->dirfd, name, 0) < 0)
            return -errno;
        return 0;
    }
    /* lookup and stat alike: one fstatat of a random name. */
    snprintf(name, sizeof(name), "f%07u", (unsigned)(vb_rand(&w->rng) % o->files));
    return fstatat(w->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static void *host_main(void *arg)
{
    struct host_worker *w = arg;
    /* At least one operation, even when a loaded machine starts the thread
     * after the deadline (a run of 0 IOPS would be meaningless). */
    do {
        uint64_t t = vufs_now_ns();
        int r = host_op(w);
        vfe_hist_add(w->hist, vufs_now_ns() - t);
        /* create-unlink: two operations per call, as two requests for a backend. */
        w->ops += w->o->workload == VB_CREATE_UNLINK ? 2 : 1;
        if (r < 0 && !w->errors++)
            w->first_error = r;
    } while (vufs_now_ns() < w->deadline);
    return NULL;
}

int vb_run_host(const struct vb_opts *o, int dirfd, const char *sub, struct vb_run *run)
{
    unsigned nt = o->queues * o->depth;
    if (nt > VB_HOST_MAX_THREADS)
        nt = VB_HOST_MAX_THREADS;
    run->queues = nt;
    run->depth = 1;
    run->cpu_s = -1;
    int fds[64];
    unsigned nfds = 0;
    int sdir = -1;
    int r = 0;
    if (vb_workload_is_data(o->workload)) {
        for (; nfds < o->files; nfds++) {
            g_autofree char *name = vb_data_name(nfds);
            fds[nfds] = openat(dirfd, name,
                               (vb_workload_writes(o->workload) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
            if (fds[nfds] < 0) {
                r = -errno;
                break;
            }
        }
    } else {
        g_autofree char *path = vb_workload_creates(o->workload) ? g_strdup_printf("create/%s", sub)
                                                         : g_strdup("meta");
        sdir = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sdir < 0)
            r = -errno;
    }
    /* Pinned: the host's threads are frontend and backend at once, so both sets. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (o->pin) {
        cpu_set_t both;
        CPU_OR(&both, &o->frontend_cpus, &o->backend_cpus);
        pthread_attr_setaffinity_np(&attr, sizeof(both), &both);
    }
    struct host_worker *ws = g_new0(struct host_worker, nt);
    struct vfe_bench_result *res = g_new0(struct vfe_bench_result, 1);
    unsigned started = 0;
    uint64_t t0 = vufs_now_ns();
    uint64_t deadline = t0 + (uint64_t)(o->runtime_s * 1e9);
    for (unsigned i = 0; i < nt && r == 0; i++) {
        struct host_worker *w = &ws[i];
        *w = (struct host_worker){ .o = o, .fds = fds, .dirfd = sdir, .index = i,
                                   .deadline = deadline,
                                   .rng = 0x9E3779B97F4A7C15ull * (i + 1),
                                   .seq_off = o->bs && o->size >= o->bs
                                                  ? (o->size / o->bs / nt) * i * o->bs : 0 };
        w->hist = g_new0(struct vfe_hist, 1);
        if (vb_workload_is_data(o->workload)) {
            w->buf = g_malloc(o->bs);
            memset(w->buf, 'h', o->bs);
        }
        r = -pthread_create(&w->thread, o->pin ? &attr : NULL, host_main, w);
        if (r == 0)
            started++;
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    pthread_attr_destroy(&attr);
    res->elapsed_ns = vufs_now_ns() - t0;
    for (unsigned i = 0; i < nt; i++) {
        vb_result_add(res, ws[i].ops, ws[i].errors, ws[i].first_error, ws[i].bytes, ws[i].hist);
        g_free(ws[i].hist);
        g_free(ws[i].buf);
    }
    if (r == 0 && res->ops && res->errors == res->ops)
        r = vb_why(run, -EIO, "%s", "every host operation failed");
    vb_fill_run(run, res);
    g_free(res);
    g_free(ws);
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    if (sdir >= 0)
        close(sdir);
    return r;
}
