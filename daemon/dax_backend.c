/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The DAX window's frontend side: struct dax_ops over the backend request channel,
 * and the statistics thread. See dax_backend.h.
 */
#include "dax_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "log.h"
#include "vu_msg.h"
#include "vufs_util.h"

/* How often --stats-file is rewritten, and the window thread's tick. */
#define VDAX_STATS_PERIOD_MS 1000
/*
 * The window store's flusher, in ticks: files whose stamp moved are merged
 * every tick (what the host changed shows in the window within a second, and
 * sooner at the guest's next attribute look); the guest's stores reach the
 * file every 5 s at the latest (Linux's dirty_writeback_centisecs: what a
 * crash of the daemon can lose, and how late a host reader sees them without
 * an fsync or close); every store mapping is merged every 30 s whatever its
 * stamp (a change that slipped between the window's own write and its look at
 * the stamp shows then).
 */
#define VDAX_WRITEBACK_TICKS 5
#define VDAX_MERGE_ALL_TICKS 30

struct vdax {
    struct dax_window *w;
    bool legacy;
    struct pt_fs *fs;
    struct vufsd_dev *dev; /* atomic: the connected frontend, NULL between connections */
    /* Shmem protocol: held from the region count check until the map is in the
     * guest's memory (vdax_map), so two queue threads cannot both take the last
     * memory region, and one map's region is not taken for another's. */
    pthread_mutex_t map_lock;
    /* Whether this frontend reports each mapping as a memory region (QEMU 11.1):
     * 0 not known yet, 1 yes, -1 no. Written under map_lock (atomic: vdax_unmap
     * reads it without); reset by vdax_attach. */
    int reports_regions;

    /* Statistics: the thread, the stats file's directory and names. */
    int stats_dir_fd; /* -1: no stats file */
    char *stats_name;
    char *stats_tmp;
    int sig_fd;  /* not owned */
    int stop_fd; /* eventfd */
    pthread_t thread;
    bool thread_started;
};

/* ---- struct dax_ops ------------------------------------------------------------------ */

static int vdax_send(struct vdax *x, uint32_t request, const void *payload, size_t size, int fd)
{
    struct vufsd_dev *dev = __atomic_load_n(&x->dev, __ATOMIC_ACQUIRE);
    if (!dev)
        return -ENOTCONN;
    return vdev_backend_request(dev, request, payload, size, fd, NULL);
}

static int vdax_send_map(struct vdax *x, int fd, uint64_t foffset, uint64_t moffset, uint64_t len,
                       bool writable)
{
    if (x->legacy) {
        struct vu_fs_map m = {
            .fd_offset[0] = foffset, .c_offset[0] = moffset, .len[0] = len,
            .flags[0] = VU_FS_MAP_R | (writable ? VU_FS_MAP_W : 0)};
        return vdax_send(x, VU_BACKEND_FS_MAP, &m, sizeof(m), fd);
    }
    struct vu_shmem_map m = {.shmid = 0, .fd_offset = foffset, .shm_offset = moffset, .len = len,
                             .flags = writable ? VU_SHMEM_MAP_F_RW : 0};
    return vdax_send(x, VU_BACKEND_SHMEM_MAP, &m, sizeof(m), fd);
}

/*
 * QEMU 11.1 makes each mapping a guest memory region (ADD_MEM_REG before it
 * answers the map) and aborts past VMEM_MAX_REGIONS of them: a map that would
 * need one more than the table holds fails with ENOSPC instead. The window's
 * size keeps that from happening with guest RAM in a few regions; a guest with
 * many RAM regions (memory hotplug) is what this guards against.
 *
 * An unmapped range's region leaves the table after the unmap is answered
 * (QEMU commits the removal after its reply, and the commit sends REM_MEM_REG),
 * so at the limit a map right after an unmap would be refused for a region on
 * its way out. It waits for the pending removals instead, for this long at
 * most: the spec asks no frontend to send REM_MEM_REG for a shared memory
 * mapping, and the REM_MEM_REG may be queued behind a message the message
 * thread is serving. The map is not sent before the room is there (counting
 * the removal in advance would rely on the frontend sending REM_MEM_REG before
 * the new range's ADD_MEM_REG).
 */
#define VDAX_REMOVAL_WAIT_MS 1000

/*
 * How long a map waits for its memory region. QEMU 11.1 answers BACKEND_SHMEM_MAP
 * before the mapping is in the guest's memory map: it commits the change after
 * the reply, and the commit is what sends ADD_MEM_REG. A SETUPMAPPING answered
 * on the map's reply alone lets the guest read the range before it is there
 * (zeros: fio found blocks that were on the host read back as zeros, about one
 * run in two under reclaim), so the map is complete when its region has come.
 * A frontend that sends none (it never sent an ADD_MEM_REG, or the first map's
 * wait runs out) is not waited for.
 */
#define VDAX_REGION_FIRST_WAIT_MS 500
#define VDAX_REGION_WAIT_MS       5000

static int vdax_shmem_map_locked(struct vdax *x, int fd, uint64_t foffset, uint64_t moffset,
                                 uint64_t len, bool writable)
{
    struct vufsd_dev *dev = __atomic_load_n(&x->dev, __ATOMIC_ACQUIRE);
    if (!dev)
        return -ENOTCONN;
    int room = vdev_mem_wait_room(dev, VDAX_REMOVAL_WAIT_MS);
    if (room == -ETIMEDOUT)
        vlog_warn("DAX: the memory table is full and the unmapped ranges' regions were not "
                  "removed within %d ms: mapping refused", VDAX_REMOVAL_WAIT_MS);
    if (room < 0)
        return -ENOSPC;
    unsigned adds = vdev_mem_adds(dev);
    /* A frontend that never added a region one by one (it sends whole tables)
     * does not report mappings as regions either: nothing to wait for. */
    if (x->reports_regions == 0 && adds == 0)
        __atomic_store_n(&x->reports_regions, -1, __ATOMIC_RELEASE);
    int ret = vdax_send_map(x, fd, foffset, moffset, len, writable);
    if (ret < 0 || x->reports_regions < 0)
        return ret;
    bool came = vdev_mem_wait_added(dev, adds, x->reports_regions ? VDAX_REGION_WAIT_MS
                                                                  : VDAX_REGION_FIRST_WAIT_MS);
    if (x->reports_regions == 0) {
        __atomic_store_n(&x->reports_regions, came ? 1 : -1, __ATOMIC_RELEASE);
        vlog_info("DAX: the frontend %s each mapping as guest memory%s", came ? "adds" : "does not add",
                  came ? ": a map completes when its region has come" : "");
    } else if (!came) {
        vlog_warn("DAX: no memory region for the mapping at %#llx within %d ms",
                  (unsigned long long)moffset, VDAX_REGION_WAIT_MS);
    }
    return ret;
}

/* dax_ops.map: fd is the file the passthrough opened for the request (lent;
 * the frontend takes its own reference with the message). */
static int vdax_map(void *ctx, int fd, uint64_t foffset, uint64_t moffset, uint64_t len,
                    bool writable)
{
    struct vdax *x = ctx;
    if (x->legacy)
        return vdax_send_map(x, fd, foffset, moffset, len, writable);
    pthread_mutex_lock(&x->map_lock);
    int ret = vdax_shmem_map_locked(x, fd, foffset, moffset, len, writable);
    pthread_mutex_unlock(&x->map_lock);
    return ret;
}

static int vdax_unmap(void *ctx, uint64_t moffset, uint64_t len)
{
    struct vdax *x = ctx;
    if (x->legacy) {
        struct vu_fs_map m = {.c_offset[0] = moffset, .len[0] = len};
        return vdax_send(x, VU_BACKEND_FS_UNMAP, &m, sizeof(m), -1);
    }
    struct vu_shmem_map m = {.shm_offset = moffset, .len = len};
    struct vufsd_dev *dev = __atomic_load_n(&x->dev, __ATOMIC_ACQUIRE);
    /* A frontend that reported the range as a region removes it after its reply. */
    bool region = dev && __atomic_load_n(&x->reports_regions, __ATOMIC_ACQUIRE) > 0;
    if (region)
        vdev_mem_expect_removal(dev);
    int ret = vdax_send(x, VU_BACKEND_SHMEM_UNMAP, &m, sizeof(m), -1);
    if (ret < 0 && region)
        vdev_mem_removal_settled(dev);
    return ret;
}

/* Legacy only: up to 8 unmaps in one message. */
static int vdax_unmap_batch(void *ctx, const struct fuse_removemapping_one *r, unsigned n)
{
    struct vu_fs_map m = {0};
    if (n > VU_FS_MAP_ENTRIES)
        return -EINVAL;
    for (unsigned i = 0; i < n; i++) {
        m.c_offset[i] = r[i].moffset;
        m.len[i] = r[i].len;
    }
    return vdax_send(ctx, VU_BACKEND_FS_UNMAP, &m, sizeof(m), -1);
}

/* dax_ops.open: a survivor of a split, mapped again, or the file of a store
 * mapping the window writes back to. */
static int vdax_open(void *ctx, uint64_t key, bool writable, bool for_frontend)
{
    struct vdax *x = ctx;
    return pt_fs_dax_open(x->fs, key, writable, for_frontend);
}

/* dax_ops.usable: the attached frontend can take mapping requests. */
static bool vdax_usable(void *ctx)
{
    struct vdax *x = ctx;
    struct vufsd_dev *dev = __atomic_load_n(&x->dev, __ATOMIC_ACQUIRE);
    return dev && vdev_can_map(dev, !x->legacy);
}

static const struct dax_ops vdax_shmem_ops = {
    .map = vdax_map,
    .unmap = vdax_unmap,
    .open = vdax_open,
    .usable = vdax_usable,
};

static const struct dax_ops vdax_legacy_ops = {
    .map = vdax_map,
    .unmap = vdax_unmap,
    .unmap_batch = vdax_unmap_batch,
    .open = vdax_open,
    .usable = vdax_usable,
};

/* ---- Life cycle ----------------------------------------------------------------------- */

void vdax_free(struct vdax *x)
{
    if (!x)
        return;
    vdax_stats_stop(x);
    if (x->stats_dir_fd >= 0)
        close(x->stats_dir_fd);
    g_free(x->stats_name);
    g_free(x->stats_tmp);
    dax_window_free(x->w);
    pthread_mutex_destroy(&x->map_lock);
    free(x);
}

int vdax_new(const struct vufsd_config *cfg, struct pt_fs *fs, struct vdax **out)
{
    struct vdax *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    long page = sysconf(_SC_PAGESIZE);
    struct dax_config dc = {
        .window_size = cfg->dax_window,
        .page_size = page > 0 ? (uint64_t)page : 4096,
        .policy = cfg->dax_policy,
    };
    x->legacy = cfg->dax_protocol == VUFSD_DAX_PROTO_LEGACY;
    pthread_mutex_init(&x->map_lock, NULL);
    x->fs = fs;
    x->stats_dir_fd = -1;
    x->sig_fd = -1;
    x->stop_fd = -1;
    int ret = dax_window_new(&dc, x->legacy ? &vdax_legacy_ops : &vdax_shmem_ops, x, &x->w);
    if (ret < 0) {
        pthread_mutex_destroy(&x->map_lock);
        free(x);
        return ret;
    }
    *out = x;
    return 0;
}

struct dax_window *vdax_window(struct vdax *x)
{
    return x->w;
}

void vdax_attach(struct vdax *x, struct vufsd_dev *dev)
{
    pthread_mutex_lock(&x->map_lock);
    __atomic_store_n(&x->reports_regions, 0, __ATOMIC_RELEASE); /* a new frontend: found out again */
    __atomic_store_n(&x->dev, dev, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&x->map_lock);
}

/* ---- Statistics ------------------------------------------------------------------------- */

int vdax_stats_prepare(struct vdax *x, const char *stats_file)
{
    g_autofree char *dir = g_path_get_dirname(stats_file);
    x->stats_name = g_path_get_basename(stats_file);
    x->stats_tmp = g_strdup_printf(".%s.tmp", x->stats_name);
    x->stats_dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (x->stats_dir_fd < 0) {
        int e = errno;
        vlog_err("--stats-file: cannot open the directory %s: %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

/* Writes the JSON to the temporary file and renames it over the stats file. */
static int vdax_write_stats_file(struct vdax *x)
{
    int fd = openat(x->stats_dir_fd, x->stats_tmp,
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -errno;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        return -e;
    }
    int ret = dax_stats_json(x->w, f);
    if (fclose(f) != 0 && ret == 0)
        ret = -errno;
    if (ret == 0 && renameat(x->stats_dir_fd, x->stats_tmp, x->stats_dir_fd, x->stats_name) < 0)
        ret = -errno;
    return ret;
}

static void vdax_log_stats(struct vdax *x)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    int ret = dax_stats_json(x->w, f);
    fclose(f);
    if (ret == 0 && buf) {
        buf[strcspn(buf, "\n")] = '\0';
        vlog_text("DAX statistics: ", buf); /* any length, whatever --log-level says */
    }
    free(buf);
}

/* One round: a signal logs (and refreshes the file), the period refreshes the file. */
static void vdax_stats_round(struct vdax *x, bool signalled)
{
    if (signalled)
        vdax_log_stats(x);
    if (x->stats_dir_fd < 0)
        return;
    int ret = vdax_write_stats_file(x);
    if (ret < 0)
        vlog_warn("--stats-file %s: %s", x->stats_name, strerror(-ret));
}

/* One tick of the window store's flusher. */
static void vdax_flush_tick(struct vdax *x, unsigned tick)
{
    unsigned what = DAX_SYNC_CHECK;

    if (tick % VDAX_WRITEBACK_TICKS == 0)
        what |= DAX_SYNC_WRITEBACK;
    if (tick % VDAX_MERGE_ALL_TICKS == 0)
        what |= DAX_SYNC_MERGE_ALL;
    int ret = dax_window_sync(x->w, what);
    if (ret < 0)
        vlog_warn("DAX: writing the guest's stores back or merging the host's changes: %s "
                  "(tried again; fsync reports it to the guest)", strerror(-ret));
}

static void *vdax_stats_thread(void *arg)
{
    struct vdax *x = arg;
    uint64_t next = vufs_now_ns() + VDAX_STATS_PERIOD_MS * UINT64_C(1000000);
    unsigned tick = 0;

    for (;;) {
        uint64_t now = vufs_now_ns();
        int timeout = now >= next ? 0 : (int)((next - now) / 1000000);
        int w = vufs_wait_input(x->sig_fd, x->stop_fd, timeout);
        if (w == 0 || (w < 0 && w != -ETIMEDOUT)) {
            /* The guest's stores reach the files, and the stats file ends with
             * the window as the daemon leaves it. */
            dax_window_sync(x->w, DAX_SYNC_WRITEBACK);
            if (x->stats_dir_fd >= 0)
                vdax_stats_round(x, false);
            break;
        }
        uint64_t v;
        bool signalled = w == 1 && read(x->sig_fd, &v, sizeof(v)) > 0;
        if (vufs_now_ns() >= next) {
            next += VDAX_STATS_PERIOD_MS * UINT64_C(1000000);
            vdax_flush_tick(x, ++tick);
            vdax_stats_round(x, signalled);
        } else if (signalled) {
            vdax_stats_round(x, true);
        }
    }
    return NULL;
}

int vdax_stats_start(struct vdax *x, int sig_fd)
{
    x->sig_fd = sig_fd;
    x->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (x->stop_fd < 0)
        return -errno;
    int ret = pthread_create(&x->thread, NULL, vdax_stats_thread, x);
    if (ret) {
        close(x->stop_fd);
        x->stop_fd = -1;
        return -ret;
    }
    x->thread_started = true;
    return 0;
}

void vdax_stats_stop(struct vdax *x)
{
    if (!x->thread_started)
        return;
    uint64_t one = 1;
    ssize_t w = write(x->stop_fd, &one, sizeof(one));
    (void)w;
    pthread_join(x->thread, NULL);
    x->thread_started = false;
    close(x->stop_fd);
    x->stop_fd = -1;
}
