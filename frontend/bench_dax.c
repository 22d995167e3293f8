/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A vufs-bench run through the emulated guest DAX client (vfe_daxguest_*):
 * the backend is asked for its window (GET_SHMEM_CONFIG with the SHMEM
 * protocol feature; with --dax-protocol legacy the frontend's window is
 * --dax-window, as a VMM's cache size), the frontend reserves it and serves
 * the backend's map requests into it, INIT offers FUSE_MAP_ALIGNMENT and
 * FUSE_HAS_INODE_DAX, and the data files are looked up and opened so the
 * guest learns from their attributes which of them use the window.
 *
 * Then queues x depth guest threads do synchronous reads and writes (fio's
 * psync), thread t on request queue 1 + t % queues: a DAX file is read and
 * written with memcpy through the window, setting ranges up and reclaiming
 * them as the chosen guest model does; other files take FUSE READ/WRITE.
 * Requests on one queue are issued one at a time. A backend that offers no
 * window gets the same threads with every file on the plain path.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "bench_vb.h"
#include "vfe.h"
#include "vufs_util.h"

#define VB_DAX_MAX_THREADS 256u

/* The backend request handler's target, set once the window size is known
 * (before the device starts, so before any map request can come). */
struct vb_dax_box {
    struct vfe_dax *x; /* atomic */
};

static uint64_t box_handle(void *opaque, const struct vfe_msg *m, const int *fds, unsigned nfds)
{
    struct vb_dax_box *b = opaque;
    struct vfe_dax *x = __atomic_load_n(&b->x, __ATOMIC_ACQUIRE);
    return x ? vfe_dax_handle(x, m, fds, nfds) : 1;
}

/*
 * The guest's side of the map miss path: each SETUPMAPPING timed from the
 * request to its reply, around the emulated guest's own FUSE operations.
 */
struct vb_dax_timed {
    struct vfe_daxguest_fuse *df;
    uint64_t setup_ns, setups; /* atomic */
};

static int timed_setupmapping(void *opaque, unsigned q, uint64_t nodeid, uint64_t foffset,
                              uint64_t len, uint64_t flags, uint64_t moffset)
{
    struct vb_dax_timed *t = opaque;
    uint64_t t0 = vufs_now_ns();
    int r = vfe_daxguest_fuse_ops.setupmapping(t->df, q, nodeid, foffset, len, flags, moffset);
    __atomic_add_fetch(&t->setup_ns, vufs_now_ns() - t0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&t->setups, 1, __ATOMIC_RELAXED);
    return r;
}

static int timed_removemapping(void *opaque, unsigned q, uint64_t nodeid,
                               const struct fuse_removemapping_one *e, uint32_t count)
{
    struct vb_dax_timed *t = opaque;
    return vfe_daxguest_fuse_ops.removemapping(t->df, q, nodeid, e, count);
}

static ssize_t timed_read(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                          void *buf, uint32_t len)
{
    struct vb_dax_timed *t = opaque;
    return vfe_daxguest_fuse_ops.read(t->df, q, nodeid, fh, off, buf, len);
}

static ssize_t timed_write(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                           const void *buf, uint32_t len)
{
    struct vb_dax_timed *t = opaque;
    return vfe_daxguest_fuse_ops.write(t->df, q, nodeid, fh, off, buf, len);
}

static const struct vfe_daxguest_ops timed_ops = {
    .setupmapping = timed_setupmapping,
    .removemapping = timed_removemapping,
    .read = timed_read,
    .write = timed_write,
};

/*
 * The backend's map calls as its window statistics count them, from the
 * statistics file it wrote as it left (vufsd's --stats-file): false when there
 * is none or it says nothing of map latency.
 */
static bool read_map_latency(const char *path, struct vb_run *run)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return false;
    const char *p = strstr(text, "\"map_latency_ns\":{\"count\":");
    if (!p)
        return false;
    uint64_t count, sum, max;
    if (sscanf(p, "\"map_latency_ns\":{\"count\":%" SCNu64 ",\"sum\":%" SCNu64
                  ",\"max\":%" SCNu64, &count, &sum, &max) != 3)
        return false;
    run->dax_map_count = count;
    run->dax_map_ns = sum;
    run->dax_map_max_ns = max;
    return true;
}

struct vb_dax_thread {
    const struct vb_opts *o;
    struct vfe_daxguest *g;
    struct vfe_daxguest_file **files;
    unsigned index, queue;
    uint64_t deadline;
    uint64_t rng, seq_off;
    uint8_t *buf;
    struct vfe_hist hist;
    uint64_t ops, errors, bytes;
    int first_error;
    pthread_t t;
};

static void *dax_thread_main(void *arg)
{
    struct vb_dax_thread *t = arg;
    const struct vb_opts *o = t->o;
    do { /* at least one operation, however late the thread starts */
        struct vb_access a = vb_next_access(o, &t->rng, &t->seq_off, t->index);
        unsigned f = a.file;
        uint64_t off = a.off;
        bool wr = a.write;
        uint64_t t0 = vufs_now_ns();
        ssize_t n = wr ? vfe_daxguest_write(t->g, t->queue, t->files[f], off, t->buf, o->bs)
                       : vfe_daxguest_read(t->g, t->queue, t->files[f], off, t->buf, o->bs);
        vfe_hist_add(&t->hist, vufs_now_ns() - t0);
        t->ops++;
        if (n < 0) {
            if (!t->errors++)
                t->first_error = (int)n;
        } else {
            t->bytes += (uint64_t)n;
        }
    } while (vufs_now_ns() < t->deadline);
    return NULL;
}

G_GNUC_PRINTF(3, 4)
static int dax_why(struct vb_run *run, int r, const char *fmt, ...)
{
    g_free(run->why);
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    run->why = g_strdup_printf("%s: %s", what, g_strerror(-r));
    return r;
}

int vb_run_dax(const struct vb_opts *o, const struct vb_backend *be, const char *log,
               struct vb_run *run)
{
    unsigned nthreads = o->queues * o->depth;
    if (nthreads > VB_DAX_MAX_THREADS)
        nthreads = VB_DAX_MAX_THREADS;
    /* Where the backend leaves its window statistics, if its command asks. */
    static unsigned stats_seq;
    g_autofree char *stats = g_strdup_printf("%s/vufs-bench-%d-%u.stats.json", g_get_tmp_dir(),
                                             (int)getpid(), stats_seq++);
    g_autofree char *cmd = vb_backend_cmd(o, be, stats);
    struct vb_dax_timed timed = {0};
    struct vb_dax_box box = {0};
    uint64_t pf = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                  (1ull << VFE_VU_PF_BACKEND_REQ) | (1ull << VFE_VU_PF_BACKEND_SEND_FD);
    if (!o->dax_legacy)
        pf |= 1ull << VFE_VU_PF_SHMEM;
    struct vfe_dev_config cfg = {
        .conn = {.backend_cmd = cmd, .dir = o->dir, .backend_log = log, .timeout_ms = 30000},
        .request_queues = o->queues,
        .queue_size = 128,
        .protocol_features = pf,
        .backend_req = box_handle,
        .backend_req_opaque = &box,
    };
    struct vfe_dev *dev = NULL;
    struct vfe_fuse *fuse = NULL;
    struct vfe_daxguest_fuse *df = NULL;
    struct vfe_daxguest *g = NULL;
    struct vfe_dax *x = NULL;
    struct vfe_daxguest_file *files[64] = {0};
    struct vb_dax_thread *ts = NULL;
    unsigned queues = o->queues;
    int r = vfe_dev_connect(&cfg, &dev);
    if (r == -ERANGE && queues > 1) {
        /* Fewer request queues than asked: the threads share one. */
        if (dev)
            vfe_dev_close(dev);
        dev = NULL;
        queues = cfg.request_queues = 1;
        r = vfe_dev_connect(&cfg, &dev);
    }
    if (r < 0) {
        dax_why(run, r, "connecting to %s", be->name);
        goto out;
    }
    run->queues = queues;
    run->depth = nthreads / queues;

    /* The window: the backend's size (mainline), or ours (legacy). */
    uint64_t wsize = 0;
    if (o->dax_legacy)
        wsize = o->dax_window;
    else if (vfe_dev_protocol_features(dev) & (1ull << VFE_VU_PF_SHMEM))
        r = vfe_conn_get_shmem_window(vfe_dev_conn(dev), &wsize);
    if (r < 0) {
        dax_why(run, r, "%s", "GET_SHMEM_CONFIG");
        goto out;
    }
    wsize -= wsize % VFE_DAXGUEST_RANGE;
    run->dax_offered = wsize;
    if (wsize) {
        r = vfe_dax_new(wsize, o->dax_legacy ? VFE_DAX_LEGACY : VFE_DAX_SHMEM, &x);
        if (r < 0) {
            dax_why(run, r, "reserving a %" PRIu64 "-byte window", wsize);
            goto out;
        }
        __atomic_store_n(&box.x, x, __ATOMIC_RELEASE);
    }
    r = vfe_dev_start(dev);
    if (r < 0) {
        dax_why(run, r, "%s", "starting the device");
        goto out;
    }
    vb_set_halt_poll(o, dev, queues);
    struct vfe_fuse_config fc = {.depth = 4,
                                 .uid = (uint32_t)getuid(),
                                 .gid = (uint32_t)getgid(),
                                 .pid = (uint32_t)getpid(),
                                 .init_flags = FUSE_MAP_ALIGNMENT | FUSE_HAS_INODE_DAX};
    r = vfe_fuse_new(dev, &fc, &fuse);
    if (r < 0) {
        dax_why(run, r, "%s", "the FUSE client");
        goto out;
    }
    struct vfe_fuse_init_result init;
    r = vfe_fuse_init(fuse, &init);
    if (r < 0) {
        dax_why(run, r, "%s", "FUSE_INIT");
        goto out;
    }
    if (x && (init.flags & FUSE_MAP_ALIGNMENT) && init.map_alignment > 21) {
        r = dax_why(run, -EPROTO, "map_alignment %u (the guest's ranges are 2 MiB)",
                    init.map_alignment);
        goto out;
    }
    if (vb_workload_writes(o->workload) && init.max_write && o->bs > init.max_write) {
        r = dax_why(run, -EMSGSIZE, "--bs is larger than %s's max_write", be->name);
        goto out;
    }
    r = vfe_daxguest_fuse_new(fuse, vfe_dev_mem(dev), queues, init.max_write, &df);
    if (r < 0) {
        dax_why(run, r, "%s", "bounce buffers");
        goto out;
    }
    struct vfe_daxguest_config gc = {
        .model = !strcmp(o->dax_guest, "lru") ? VFE_DAXGUEST_LRU : VFE_DAXGUEST_LINUX,
        .bg = VFE_DAXGUEST_BG_THREAD,
        .window = x ? vfe_dax_window(x) : NULL,
        .window_size = wsize,
        .bg_queue = queues,
        .ops = &timed_ops,
        .opaque = &timed,
    };
    timed.df = df;
    r = vfe_daxguest_new(&gc, &g);
    if (r < 0) {
        dax_why(run, r, "%s", "the guest DAX client");
        goto out;
    }
    struct fuse_entry_out e;
    r = vfe_fuse_lookup(fuse, FUSE_ROOT_ID, VB_TOP, &e);
    if (r < 0) {
        dax_why(run, r, "LOOKUP %s", VB_TOP);
        goto out;
    }
    uint32_t oflags = vb_workload_writes(o->workload) ? O_RDWR : O_RDONLY;
    for (unsigned i = 0; i < o->files; i++) {
        g_autofree char *name = vb_data_name(i);
        r = vfe_daxguest_open(g, df, 1, e.nodeid, name, oflags, &files[i]);
        if (r < 0) {
            dax_why(run, r, "LOOKUP/OPEN %s", name);
            goto out;
        }
        run->dax_files += vfe_daxguest_file_dax(files[i]);
    }

    pid_t pgid = vfe_conn_backend_pid(vfe_dev_conn(dev));
    double cpu0 = -1, cpu1 = -1;
    uint64_t rss = 0;
    int sampled = vb_pgrp_sample(pgid, &cpu0, &rss);
    ts = g_new0(struct vb_dax_thread, nthreads);
    uint64_t t0 = vufs_now_ns();
    uint64_t deadline = t0 + (uint64_t)(o->runtime_s * 1e9);
    unsigned started = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        struct vb_dax_thread *t = &ts[i];
        t->o = o;
        t->g = g;
        t->files = files;
        t->index = i;
        t->queue = 1 + i % queues;
        t->deadline = deadline;
        t->rng = 0x9E3779B97F4A7C15ull * (i + 1);
        t->seq_off = (o->size / o->bs / nthreads) * i * o->bs;
        t->buf = g_malloc(o->bs);
        memset(t->buf, 'g', o->bs);
        if (pthread_create(&t->t, NULL, dax_thread_main, t) != 0)
            break;
        started++;
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(ts[i].t, NULL);
    uint64_t elapsed = vufs_now_ns() - t0;
    if (sampled == 0)
        sampled = vb_pgrp_sample(pgid, &cpu1, &rss);
    run->cpu_s = sampled == 0 ? cpu1 - cpu0 : -1;
    run->rss_kib = sampled == 0 ? rss : 0;

    struct vfe_bench_result *res = g_new0(struct vfe_bench_result, 1);
    res->elapsed_ns = elapsed;
    for (unsigned i = 0; i < started; i++) {
        res->ops += ts[i].ops;
        if (!res->errors && ts[i].errors)
            res->first_error = ts[i].first_error;
        res->errors += ts[i].errors;
        res->bytes += ts[i].bytes;
        vfe_hist_merge(&res->latency, &ts[i].hist);
    }
    vb_fill_run(run, res);
    g_free(res);
    struct vfe_daxguest_stats st;
    vfe_daxguest_get_stats(g, &st);
    run->dax_setups = st.setups;
    run->dax_upgrades = st.upgrades;
    run->dax_removes = st.removes;
    run->dax_hits = st.hits;
    run->dax_plain = st.plain_reads + st.plain_writes;
    run->dax_waits = st.waits;
    run->dax_inline = st.inline_reclaims;
    run->dax_bg = st.bg_reclaims;
    if (x) {
        struct vfe_dax_stats ds;
        vfe_dax_get_stats(x, &ds);
        run->dax_rejects = ds.rejects;
    }
    r = 0;
    if (started < nthreads)
        r = dax_why(run, -EAGAIN, "%s", "starting the guest threads");
    else if (run->ops && run->errors == run->ops)
        r = dax_why(run, run->first_error ? run->first_error : -EIO, "%s", "every request failed");
    else if (run->dax_rejects)
        r = dax_why(run, -EPROTO, "the backend broke the window's rules %" PRIu64 " times",
                    run->dax_rejects);
out:
    if (ts)
        for (unsigned i = 0; i < nthreads; i++)
            g_free(ts[i].buf);
    g_free(ts);
    /* The guest goes first (its worker may still send), then the device; the
     * window only once the backend channel is closed. */
    vfe_daxguest_free(g);
    vfe_daxguest_fuse_free(df);
    if (fuse)
        vfe_fuse_free(fuse);
    if (dev)
        vfe_dev_close(dev); /* the backend has left: its statistics file is final */
    vfe_dax_free(x);
    run->dax_setup_ns = timed.setup_ns;
    run->dax_setup_count = timed.setups;
    if (strstr(be->cmd, "{stats_file}"))
        read_map_latency(stats, run);
    unlink(stats);
    return r;
}
