/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The emulated guest DAX client (vfe_daxguest_*) against the real vufsd, with
 * a real window in the in-tree frontend (mappings enforced: no overlap, exact
 * unmaps; a refused map request fails the test).
 *
 *   test_daxguest verify VUFSD [SESSION]
 *     Five sessions (or only the SESSIONth): mainline protocol + Linux guest (--dax-policy always),
 *     legacy protocol + Linux guest (always), mainline + LRU guest (auto), with
 *     the window store; the first two again with direct mappings
 *     (--share-writers guest). Random reads and writes across 2 MiB range
 *     boundaries through a window smaller than the files (of any size),
 *     checked against a reference; host writes seen through the guest (at
 *     once with direct mappings, after a GETATTR with the store); after
 *     eviction the host files equal the reference, the window is empty, the
 *     daemon answers and exits cleanly.
 *
 *   test_daxguest stress VUFSD SECONDS [shmem|legacy] [store|direct]
 *     8 guest threads on 4 request queues and a host writer thread, 12 files
 *     of 6 MiB through a window of 4 ranges (--dax-policy always): random
 *     reads (some across range boundaries), writes, and evictions with
 *     re-LOOKUP/OPEN, for SECONDS. Every 4 KiB block has one writer (a guest
 *     thread or the host) and a sequence count, so a read that did not race
 *     its writer must see exactly the last version (a host block after a
 *     GETATTR, with the window store); at the end every block of
 *     every host file must hold its last version. 0 mismatches, 0 errors,
 *     0 window-rule violations, the daemon alive, and a clean exit (under
 *     ASan with leak checking, run with --sandbox none so LeakSanitizer works).
 *
 * VUFSD_PREFIX (environment) goes in front of the daemon's command line.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "vfe.h"
#include "vufs_util.h"

#define MiB   (1ull << 20)
#define BLOCK 4096u

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                    \
        }                                                                                          \
    } while (0)

struct env {
    char *dir;
    char *log;
    struct vfe_dax *x;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    struct vfe_daxguest_fuse *df;
    struct vfe_daxguest *g;
    unsigned queues;
};

struct session_cfg {
    const char *vufsd;
    uint64_t window;
    const char *policy;
    bool legacy;
    bool direct; /* --share-writers guest: the window maps the files themselves */
    enum vfe_daxguest_model model;
    unsigned queues;
};

static int session_open(struct env *e, const struct session_cfg *c)
{
    const char *prefix = getenv("VUFSD_PREFIX");
    g_autofree char *cmd = g_strdup_printf(
        "%s%s --socket-path={socket} --shared-dir={dir} --cache auto --sandbox none "
        "--seccomp none --unsafe-no-isolation --log-level warn --dax-window %" PRIu64
        " --dax-policy %s%s%s",
        prefix ? prefix : "", c->vufsd, c->window, c->policy,
        c->legacy ? " --dax-protocol legacy" : "", c->direct ? " --share-writers guest" : "");
    int r = vfe_dax_new(c->window, c->legacy ? VFE_DAX_LEGACY : VFE_DAX_SHMEM, &e->x);
    CHECK(r == 0, "window: %s", strerror(-r));
    if (r < 0)
        return r;
    e->log = g_build_filename(e->dir, "..", "vufsd-daxguest.log", NULL);
    e->queues = c->queues;
    uint64_t pf = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                  (1ull << VFE_VU_PF_BACKEND_REQ) | (1ull << VFE_VU_PF_BACKEND_SEND_FD);
    if (!c->legacy)
        pf |= 1ull << VFE_VU_PF_SHMEM;
    struct vfe_dev_config dc = {
        .conn = {.backend_cmd = cmd, .dir = e->dir, .backend_log = e->log, .timeout_ms = 30000},
        .request_queues = c->queues,
        .protocol_features = pf,
        .backend_req = vfe_dax_handle,
        .backend_req_opaque = e->x,
    };
    r = vfe_dev_connect(&dc, &e->dev);
    CHECK(r == 0, "connect: %s (%s)", strerror(-r), cmd);
    if (r < 0)
        return r;
    if (!c->legacy) {
        uint64_t size = 0;
        CHECK(vfe_dev_protocol_features(e->dev) & (1ull << VFE_VU_PF_SHMEM), "%s",
              "SHMEM not negotiated");
        r = vfe_conn_get_shmem_window(vfe_dev_conn(e->dev), &size);
        CHECK(r == 0 && size == c->window, "GET_SHMEM_CONFIG: %d, %" PRIu64, r, size);
    }
    r = vfe_dev_start(e->dev);
    CHECK(r == 0, "start: %s", strerror(-r));
    if (r < 0)
        return r;
    struct vfe_fuse_config fc = {.depth = 4,
                                 .uid = (uint32_t)getuid(),
                                 .gid = (uint32_t)getgid(),
                                 .pid = (uint32_t)getpid(),
                                 .timeout_ms = 30000,
                                 .init_flags = FUSE_MAP_ALIGNMENT | FUSE_HAS_INODE_DAX};
    r = vfe_fuse_new(e->dev, &fc, &e->fuse);
    CHECK(r == 0, "fuse: %s", strerror(-r));
    if (r < 0)
        return r;
    struct vfe_fuse_init_result init;
    r = vfe_fuse_init(e->fuse, &init);
    CHECK(r == 0, "INIT: %s", strerror(-r));
    if (r < 0)
        return r;
    CHECK(init.flags & FUSE_MAP_ALIGNMENT, "%s", "no FUSE_MAP_ALIGNMENT");
    CHECK(init.map_alignment == 12, "map_alignment %u", init.map_alignment);
    CHECK(init.flags & FUSE_HAS_INODE_DAX, "%s", "no FUSE_HAS_INODE_DAX");
    r = vfe_daxguest_fuse_new(e->fuse, vfe_dev_mem(e->dev), c->queues, init.max_write, &e->df);
    CHECK(r == 0, "bounce: %s", strerror(-r));
    if (r < 0)
        return r;
    struct vfe_daxguest_config gc = {.model = c->model,
                                     .bg = VFE_DAXGUEST_BG_THREAD,
                                     .window = vfe_dax_window(e->x),
                                     .window_size = c->window,
                                     .bg_queue = c->queues,
                                     .ops = &vfe_daxguest_fuse_ops,
                                     .opaque = e->df};
    r = vfe_daxguest_new(&gc, &e->g);
    CHECK(r == 0, "guest: %s", strerror(-r));
    return r;
}

/* Frees the guest, checks the window and the daemon, closes. */
static void session_close(struct env *e)
{
    if (e->g) {
        struct vfe_daxguest_stats st;
        vfe_daxguest_get_stats(e->g, &st);
        CHECK(st.setup_errors == 0 && st.remove_errors == 0,
              "device errors: %" PRIu64 " setups, %" PRIu64 " removes", st.setup_errors,
              st.remove_errors);
        printf("  guest: %" PRIu64 " DAX reads, %" PRIu64 " DAX writes, %" PRIu64 " plain, %" PRIu64
               " hits, %" PRIu64 " setups, %" PRIu64 " upgrades, %" PRIu64 " removes in %" PRIu64
               " requests (%" PRIu64 " by the worker, %" PRIu64 " inline), %" PRIu64 " waits\n",
               st.dax_reads, st.dax_writes, st.plain_reads + st.plain_writes, st.hits, st.setups,
               st.upgrades, st.removes, st.remove_requests, st.bg_reclaims, st.inline_reclaims,
               st.waits);
    }
    if (e->fuse) {
        /* Alive: the daemon still answers. */
        struct fuse_attr_out ao;
        int r = vfe_fuse_getattr(e->fuse, FUSE_ROOT_ID, &ao);
        CHECK(r == 0, "GETATTR after the run: %s", strerror(-r));
    }
    vfe_daxguest_free(e->g);
    vfe_daxguest_fuse_free(e->df);
    vfe_fuse_free(e->fuse);
    if (e->x) {
        struct vfe_dax_stats ds;
        vfe_dax_get_stats(e->x, &ds);
        CHECK(ds.rejects == 0, "%" PRIu64 " map requests broke the window's rules", ds.rejects);
        printf("  window: %" PRIu64 " maps, %" PRIu64 " unmaps, %u mappings left\n", ds.maps,
               ds.unmaps, ds.mappings);
    }
    if (e->dev) {
        /* A clean exit (status 0; under ASan after LeakSanitizer's check). The
         * daemon normally exits by itself once we hang up; a sanitizer build on
         * a loaded machine may need longer than the frontend's 2 s grace and
         * then exits on SIGTERM - still with status 0, or the test fails. */
        int status = 0;
        bool own = false;
        int r = vfe_dev_close_status(e->dev, &status, &own);
        CHECK(r == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "vufsd did not exit cleanly (%s, status 0x%x); log %s", own ? "exited" : "stopped",
              status, e->log);
        if (r == 0 && !own)
            printf("  vufsd exited on SIGTERM, not within 2 s of the hang-up\n");
    }
    if (e->log) {
        g_autofree char *text = NULL;
        if (g_file_get_contents(e->log, &text, NULL, NULL)) {
            CHECK(!strstr(text, "Sanitizer") && !strstr(text, "runtime error"),
                  "sanitizer report in the daemon's log:\n%s", text);
            if (failures)
                fprintf(stderr, "vufsd log:\n%s\n", text);
        }
        unlink(e->log);
    }
    vfe_dax_free(e->x);
    g_free(e->log);
    e->log = NULL;
    e->x = NULL;
    e->dev = NULL;
    e->fuse = NULL;
    e->df = NULL;
    e->g = NULL;
}

static void make_dir(struct env *e)
{
    g_autofree char *top = g_dir_make_tmp("vufs-daxguest-XXXXXX", NULL);
    CHECK(top != NULL, "%s", "temp dir");
    e->dir = g_build_filename(top, "share", NULL);
    CHECK(mkdir(e->dir, 0755) == 0, "mkdir %s", e->dir);
}

static void remove_dir(struct env *e)
{
    GDir *d = g_dir_open(e->dir, 0, NULL);
    const char *n;
    while (d && (n = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(e->dir, n, NULL);
        unlink(p);
    }
    if (d)
        g_dir_close(d);
    rmdir(e->dir);
    g_autofree char *top = g_path_get_dirname(e->dir);
    rmdir(top);
    g_free(e->dir);
}

static int host_open(struct env *e, const char *name)
{
    g_autofree char *p = g_build_filename(e->dir, name, NULL);
    return open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
}

/* ---- verify ------------------------------------------------------------------------ */

#define V_FILES 4
static const char *const v_names[V_FILES] = {"big0", "big1", "big2", "tiny"};
static const uint64_t v_sizes[V_FILES] = {6 * MiB, 6 * MiB, 6 * MiB + 12288, 100 * 1024};

/*
 * What the guest does before it trusts its view of a file another process may
 * have changed: a GETATTR (a Linux guest's revalidation once the attribute
 * timeout passed). The window store shows the host's changes from then on; a
 * direct mapping shows them at once, so there the test asks nothing.
 */
static void revalidate(struct env *e, unsigned q, bool direct, uint64_t nodeid)
{
    struct fuse_attr_out ao;

    if (!direct)
        CHECK(vfe_daxguest_getattr(e->df, q, nodeid, &ao) == 0, "GETATTR %#" PRIx64, nodeid);
}

static void verify_session(const char *vufsd, bool legacy, enum vfe_daxguest_model model,
                           const char *policy, bool direct)
{
    printf("verify: %s protocol, %s guest, policy %s, %s mappings\n",
           legacy ? "legacy" : "mainline", model == VFE_DAXGUEST_LRU ? "lru" : "linux", policy,
           direct ? "direct" : "store");
    struct env e = {0};
    make_dir(&e);
    uint8_t *ref[V_FILES];
    int hfd[V_FILES];
    for (unsigned i = 0; i < V_FILES; i++) {
        ref[i] = g_malloc(v_sizes[i]);
        for (uint64_t k = 0; k < v_sizes[i]; k++)
            ref[i][k] = (uint8_t)(k * 13 + i * 101 + k / 4096);
        hfd[i] = host_open(&e, v_names[i]);
        CHECK(pwrite(hfd[i], ref[i], v_sizes[i], 0) == (ssize_t)v_sizes[i], "%s", "host write");
    }
    struct session_cfg c = {.vufsd = vufsd,
                            .window = 8 * MiB,
                            .policy = policy,
                            .legacy = legacy,
                            .direct = direct,
                            .model = model,
                            .queues = 2};
    if (!strcmp(policy, "auto"))
        c.window = 16 * MiB;
    struct vfe_daxguest_file *f[V_FILES] = {0};
    if (session_open(&e, &c) == 0) {
        unsigned ndax = 0;
        for (unsigned i = 0; i < V_FILES; i++) {
            int r = vfe_daxguest_open(e.g, e.df, 1, FUSE_ROOT_ID, v_names[i], O_RDWR, &f[i]);
            CHECK(r == 0, "open %s: %s", v_names[i], strerror(-r));
            if (r == 0)
                ndax += vfe_daxguest_file_dax(f[i]);
        }
        /* Files of any size get the window (the last range of one whose size is
         * not a whole number of ranges from the window store). */
        if (!strcmp(policy, "always")) {
            CHECK(ndax == V_FILES, "%u of %u files with FUSE_ATTR_DAX", ndax, V_FILES);
        } else {
            /* auto: the tiny file is kept out, big ones fitting 80% get it. */
            CHECK(f[3] && !vfe_daxguest_file_dax(f[3]), "%s", "tiny file has FUSE_ATTR_DAX");
            CHECK(ndax >= 1 && ndax <= 2, "%u files with FUSE_ATTR_DAX under auto", ndax);
        }
        uint32_t rng = 12345;
        g_autofree uint8_t *buf = g_malloc(3 * MiB);
        for (unsigned it = 0; it < 3000 && !failures; it++) {
            rng = rng * 1103515245u + 12345u;
            unsigned fi = (rng >> 8) % V_FILES;
            if (!f[fi])
                continue;
            uint64_t size = v_sizes[fi];
            rng = rng * 1103515245u + 12345u;
            uint64_t len = 1 + (rng >> 8) % (it % 10 == 0 ? 3 * MiB : 16384);
            rng = rng * 1103515245u + 12345u;
            uint64_t off = (((uint64_t)rng << 8) ^ rng) % size;
            if (it % 7 == 0) /* around a range boundary */
                off = (off & ~(2 * MiB - 1)) + 2 * MiB - len / 2;
            if (off >= size)
                off = size - 1;
            if (len > size - off)
                len = size - off;
            unsigned q = 1 + it % 2;
            rng = rng * 1103515245u + 12345u;
            if ((rng >> 20) % 3 == 0) {
                for (uint64_t k = 0; k < len; k++)
                    buf[k] = (uint8_t)(it + k * 7);
                ssize_t n = vfe_daxguest_write(e.g, q, f[fi], off, buf, len);
                CHECK(n == (ssize_t)len, "write %s %" PRIu64 "+%" PRIu64 ": %zd", v_names[fi], off,
                      len, n);
                memcpy(ref[fi] + off, buf, len);
            } else if ((rng >> 20) % 3 == 1) {
                ssize_t n = vfe_daxguest_read(e.g, q, f[fi], off, buf, len);
                CHECK(n == (ssize_t)len && !memcmp(buf, ref[fi] + off, len),
                      "read %s %" PRIu64 "+%" PRIu64 ": %zd, data %s", v_names[fi], off, len, n,
                      n == (ssize_t)len ? "differs" : "short");
            } else {
                /* The host writes; the guest must see it once it looks again.
                 * Close to open: with the window store the guest's last stores
                 * reach the file when it syncs (or closes) it, and a host
                 * write to the same bytes before that would race them. Direct
                 * mappings are the file's pages, except (under QEMU's rules)
                 * the last range of a file that ends inside it: the store. */
                bool shared = direct && (legacy || size % (2 * MiB) == 0);
                if (!shared)
                    CHECK(vfe_daxguest_fsync(e.df, q, vfe_daxguest_file_nodeid(f[fi]),
                                             vfe_daxguest_file_fh(f[fi])) == 0,
                          "FSYNC %s", v_names[fi]);
                uint64_t hl = len < 8192 ? len : 8192;
                for (uint64_t k = 0; k < hl; k++)
                    buf[k] = (uint8_t)(0x5a ^ it ^ k);
                CHECK(pwrite(hfd[fi], buf, hl, (off_t)off) == (ssize_t)hl, "%s", "host write");
                memcpy(ref[fi] + off, buf, hl);
                revalidate(&e, q, shared, vfe_daxguest_file_nodeid(f[fi]));
                ssize_t n = vfe_daxguest_read(e.g, q, f[fi], off, buf, hl);
                CHECK(n == (ssize_t)hl && !memcmp(buf, ref[fi] + off, hl),
                      "guest read of a host write %s %" PRIu64 "+%" PRIu64, v_names[fi], off, hl);
            }
        }
        for (unsigned i = 0; i < V_FILES; i++) {
            if (!f[i])
                continue;
            uint64_t nodeid = vfe_daxguest_file_nodeid(f[i]), fh = vfe_daxguest_file_fh(f[i]);
            int r = vfe_daxguest_evict(e.g, 1, f[i]);
            CHECK(r == 0, "evict %s: %s", v_names[i], strerror(-r));
            r = vfe_daxguest_close(e.df, 1, nodeid, fh);
            CHECK(r == 0, "close %s: %s", v_names[i], strerror(-r));
        }
        struct vfe_dax_stats ds;
        vfe_dax_get_stats(e.x, &ds);
        CHECK(ds.mappings == 0, "%u mappings left after every file was evicted", ds.mappings);
        struct vfe_daxguest_stats st;
        vfe_daxguest_get_stats(e.g, &st);
        if (!strcmp(policy, "always")) {
            /* 19 ranges of files through 4: churn. */
            CHECK(st.setups > 20 && st.removes > 10 && st.bg_reclaims > 0,
                  "little DAX traffic: %" PRIu64 " setups", st.setups);
            CHECK(st.upgrades > 0, "%s", "no read->write upgrade");
        } else {
            /* auto: what was admitted fits; the rest is plain. */
            CHECK(st.setups >= 3 && st.hits > 100 && st.plain_reads + st.plain_writes > 100,
                  "auto: %" PRIu64 " setups, %" PRIu64 " hits", st.setups, st.hits);
        }
    }
    session_close(&e);
    g_autofree uint8_t *got = g_malloc(8 * MiB);
    for (unsigned i = 0; i < V_FILES; i++) {
        CHECK(pread(hfd[i], got, v_sizes[i], 0) == (ssize_t)v_sizes[i], "%s", "host read");
        CHECK(!memcmp(got, ref[i], v_sizes[i]), "host file %s differs from the reference",
              v_names[i]);
        close(hfd[i]);
        g_free(ref[i]);
    }
    remove_dir(&e);
}

/* ---- stress ------------------------------------------------------------------------ */

#define S_FILES   12
#define S_SIZE    (6 * MiB)
#define S_BLOCKS  (S_SIZE / BLOCK)
#define S_THREADS 8 /* guest threads; writer S_THREADS is the host */
#define S_QUEUES  4

struct stress {
    struct env e;
    struct vfe_daxguest_file *f[S_FILES];
    pthread_rwlock_t flock[S_FILES]; /* shared: I/O; exclusive: evict and reopen */
    int hfd[S_FILES];
    uint32_t seq[S_FILES][S_BLOCKS]; /* even: version seq/2 is in place; odd: being written */
    bool stop;
    bool direct; /* the window maps the files: host writes show at once */
    uint64_t reads, writes, checked, raced, evictions, host_writes, mismatches, errors;
};

static unsigned owner(unsigned f, unsigned b)
{
    return (f * 7 + b) % (S_THREADS + 1);
}

static void fill_block(uint8_t *p, unsigned f, unsigned b, uint32_t v)
{
    uint64_t w = ((uint64_t)f << 56) | ((uint64_t)b << 24) | (v & 0xffffff);
    for (unsigned i = 0; i < BLOCK; i += 8)
        memcpy(p + i, &w, 8);
}

static bool block_is(const uint8_t *p, unsigned f, unsigned b, uint32_t v)
{
    uint8_t want[BLOCK];
    fill_block(want, f, b, v);
    return !memcmp(p, want, BLOCK);
}

static uint32_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Writes a new version of block b of file fi (owned by the caller). */
static void write_block(struct stress *s, unsigned q, unsigned fi, unsigned b, bool host)
{
    uint32_t *sq = &s->seq[fi][b];
    uint32_t v = __atomic_load_n(sq, __ATOMIC_RELAXED) / 2 + 1;
    uint8_t buf[BLOCK];
    fill_block(buf, fi, b, v);
    __atomic_store_n(sq, 2 * v - 1, __ATOMIC_SEQ_CST);
    ssize_t n;
    if (host)
        n = pwrite(s->hfd[fi], buf, BLOCK, (off_t)b * BLOCK);
    else
        n = vfe_daxguest_write(s->e.g, q, s->f[fi], (uint64_t)b * BLOCK, buf, BLOCK);
    if (n != BLOCK) {
        fprintf(stderr, "write of block %u of file %u: %zd\n", b, fi, n);
        __atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
        /* The version is unknown now: never checked again (kept odd). */
        return;
    }
    __atomic_store_n(sq, 2 * v, __ATOMIC_SEQ_CST);
}

/* Reads nb blocks from block b and checks those whose writer kept away. */
static void read_blocks(struct stress *s, unsigned q, unsigned fi, unsigned b, unsigned nb)
{
    uint32_t before[4];
    uint8_t buf[4 * BLOCK];
    bool host = false;
    for (unsigned k = 0; k < nb; k++) {
        before[k] = __atomic_load_n(&s->seq[fi][b + k], __ATOMIC_SEQ_CST);
        host |= owner(fi, b + k) == S_THREADS;
    }
    /* The host's blocks: what it wrote before this look must show after it. */
    if (host)
        revalidate(&s->e, q, s->direct, vfe_daxguest_file_nodeid(s->f[fi]));
    ssize_t n = vfe_daxguest_read(s->e.g, q, s->f[fi], (uint64_t)b * BLOCK, buf, nb * BLOCK);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (n != (ssize_t)(nb * BLOCK)) {
        fprintf(stderr, "read of %u blocks at %u of file %u: %zd\n", nb, b, fi, n);
        __atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
        return;
    }
    for (unsigned k = 0; k < nb; k++) {
        uint32_t after = __atomic_load_n(&s->seq[fi][b + k], __ATOMIC_SEQ_CST);
        if (after != before[k] || (after & 1)) {
            __atomic_add_fetch(&s->raced, 1, __ATOMIC_RELAXED);
            continue;
        }
        __atomic_add_fetch(&s->checked, 1, __ATOMIC_RELAXED);
        if (!block_is(buf + k * BLOCK, fi, b + k, after / 2)) {
            uint64_t w;
            memcpy(&w, buf + k * BLOCK, 8);
            fprintf(stderr,
                    "MISMATCH file %u block %u: want version %u, got word 0x%016" PRIx64 "\n", fi,
                    b + k, after / 2, w);
            __atomic_add_fetch(&s->mismatches, 1, __ATOMIC_RELAXED);
        }
    }
}

struct sthread {
    struct stress *s;
    unsigned index;
    pthread_t t;
};

static void evict_reopen(struct stress *s, unsigned q, unsigned fi)
{
    pthread_rwlock_wrlock(&s->flock[fi]);
    struct vfe_daxguest_file *f = s->f[fi];
    uint64_t nodeid = vfe_daxguest_file_nodeid(f), fh = vfe_daxguest_file_fh(f);
    int r = vfe_daxguest_evict(s->e.g, q, f);
    int r2 = vfe_daxguest_close(s->e.df, q, nodeid, fh);
    char name[16];
    snprintf(name, sizeof(name), "f%02u", fi);
    int r3 = vfe_daxguest_open(s->e.g, s->e.df, q, FUSE_ROOT_ID, name, O_RDWR, &s->f[fi]);
    if (r < 0 || r2 < 0 || r3 < 0) {
        fprintf(stderr, "evict/reopen %s: %d %d %d\n", name, r, r2, r3);
        __atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->stop, true, __ATOMIC_RELAXED);
    }
    __atomic_add_fetch(&s->evictions, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->flock[fi]);
}

static void *guest_main(void *arg)
{
    struct sthread *t = arg;
    struct stress *s = t->s;
    uint64_t rng = 0x1234567ull * (t->index + 1);
    unsigned q = 1 + t->index % S_QUEUES;
    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
        unsigned fi = rnd(&rng) % S_FILES;
        unsigned dice = rnd(&rng) % 1000;
        if (dice < 3) {
            evict_reopen(s, q, fi);
            continue;
        }
        pthread_rwlock_rdlock(&s->flock[fi]);
        if (dice < 400) {
            /* A block this thread writes. */
            unsigned b = rnd(&rng) % S_BLOCKS;
            while (owner(fi, b) != t->index)
                b = (b + 1) % S_BLOCKS;
            write_block(s, q, fi, b, false);
            __atomic_add_fetch(&s->writes, 1, __ATOMIC_RELAXED);
        } else if (dice < 520) {
            /* Four blocks straddling a 2 MiB range boundary. */
            unsigned r = 1 + rnd(&rng) % (S_SIZE / (2 * MiB) - 1);
            read_blocks(s, q, fi, r * (unsigned)(2 * MiB / BLOCK) - 2, 4);
            __atomic_add_fetch(&s->reads, 1, __ATOMIC_RELAXED);
        } else {
            read_blocks(s, q, fi, rnd(&rng) % S_BLOCKS, 1);
            __atomic_add_fetch(&s->reads, 1, __ATOMIC_RELAXED);
        }
        pthread_rwlock_unlock(&s->flock[fi]);
    }
    return NULL;
}

static void *host_main(void *arg)
{
    struct stress *s = arg;
    uint64_t rng = 99;
    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
        unsigned fi = rnd(&rng) % S_FILES;
        unsigned b = rnd(&rng) % S_BLOCKS;
        while (owner(fi, b) != S_THREADS)
            b = (b + 1) % S_BLOCKS;
        write_block(s, 0, fi, b, true);
        __atomic_add_fetch(&s->host_writes, 1, __ATOMIC_RELAXED);
        if (s->host_writes % 8 == 0)
            usleep(1000); /* leave the CPUs to the guest */
    }
    return NULL;
}

static void stress(const char *vufsd, double seconds, bool legacy, bool direct)
{
    printf("stress: %.0f s, %s protocol, %s mappings, %u guest threads on %u queues + a host "
           "writer, %u files of %llu MiB, window 8 MiB\n",
           seconds, legacy ? "legacy" : "mainline", direct ? "direct" : "store", S_THREADS,
           S_QUEUES, S_FILES, (unsigned long long)(S_SIZE / MiB));
    struct stress *s = g_new0(struct stress, 1);
    make_dir(&s->e);
    g_autofree uint8_t *buf = g_malloc(S_SIZE);
    for (unsigned fi = 0; fi < S_FILES; fi++) {
        char name[16];
        snprintf(name, sizeof(name), "f%02u", fi);
        s->hfd[fi] = host_open(&s->e, name);
        for (unsigned b = 0; b < S_BLOCKS; b++)
            fill_block(buf + (uint64_t)b * BLOCK, fi, b, 0);
        CHECK(pwrite(s->hfd[fi], buf, S_SIZE, 0) == (ssize_t)S_SIZE, "%s", "host write");
        pthread_rwlock_init(&s->flock[fi], NULL);
    }
    struct session_cfg c = {.vufsd = vufsd,
                            .window = 8 * MiB,
                            .policy = "always",
                            .legacy = legacy,
                            .direct = direct,
                            .model = VFE_DAXGUEST_LINUX,
                            .queues = S_QUEUES};
    s->direct = direct;
    if (session_open(&s->e, &c) == 0) {
        for (unsigned fi = 0; fi < S_FILES; fi++) {
            char name[16];
            snprintf(name, sizeof(name), "f%02u", fi);
            int r = vfe_daxguest_open(s->e.g, s->e.df, 1, FUSE_ROOT_ID, name, O_RDWR, &s->f[fi]);
            CHECK(r == 0 && vfe_daxguest_file_dax(s->f[fi]), "open %s: %d", name, r);
        }
        if (!failures) {
            struct sthread th[S_THREADS];
            pthread_t host;
            for (unsigned i = 0; i < S_THREADS; i++) {
                th[i] = (struct sthread){.s = s, .index = i};
                pthread_create(&th[i].t, NULL, guest_main, &th[i]);
            }
            pthread_create(&host, NULL, host_main, s);
            uint64_t end = vufs_now_ns() + (uint64_t)(seconds * 1e9);
            while (vufs_now_ns() < end && !__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
                usleep(100000);
            __atomic_store_n(&s->stop, true, __ATOMIC_RELAXED);
            for (unsigned i = 0; i < S_THREADS; i++)
                pthread_join(th[i].t, NULL);
            pthread_join(host, NULL);
            printf("  %" PRIu64 " reads (%" PRIu64 " blocks checked, %" PRIu64
                   " raced their writer), %" PRIu64 " guest writes, %" PRIu64
                   " host writes, %" PRIu64 " evictions\n",
                   s->reads, s->checked, s->raced, s->writes, s->host_writes, s->evictions);
            CHECK(s->mismatches == 0, "%" PRIu64 " data mismatches", s->mismatches);
            CHECK(s->errors == 0, "%" PRIu64 " I/O errors", s->errors);
            CHECK(s->checked > 1000 && s->writes > 100 && s->evictions > 0, "%s",
                  "too little work done to mean anything");
            struct vfe_daxguest_stats st;
            vfe_daxguest_get_stats(s->e.g, &st);
            CHECK(st.setups > 100 && st.removes > 100 && st.upgrades > 0 && st.bg_reclaims > 0,
                  "little window churn: %" PRIu64 " setups, %" PRIu64 " removes", st.setups,
                  st.removes);
        }
        for (unsigned fi = 0; fi < S_FILES; fi++)
            if (s->f[fi]) {
                int r = vfe_daxguest_evict(s->e.g, 1, s->f[fi]);
                CHECK(r == 0, "final evict: %s", strerror(-r));
                s->f[fi] = NULL;
            }
        struct vfe_dax_stats ds;
        vfe_dax_get_stats(s->e.x, &ds);
        CHECK(ds.mappings == 0, "%u mappings left after every file was evicted", ds.mappings);
    }
    session_close(&s->e);
    /* The host files hold every block's last version. */
    uint64_t bad = 0;
    for (unsigned fi = 0; fi < S_FILES; fi++) {
        CHECK(pread(s->hfd[fi], buf, S_SIZE, 0) == (ssize_t)S_SIZE, "%s", "host read");
        for (unsigned b = 0; b < S_BLOCKS; b++) {
            uint32_t sq = s->seq[fi][b];
            if (!(sq & 1) && !block_is(buf + (uint64_t)b * BLOCK, fi, b, sq / 2))
                bad++;
        }
        close(s->hfd[fi]);
        pthread_rwlock_destroy(&s->flock[fi]);
    }
    CHECK(bad == 0, "%" PRIu64 " blocks of the host files are not their last version", bad);
    remove_dir(&s->e);
    g_free(s);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && !strcmp(argv[1], "verify")) {
        /* argv[3], if there: only that session (1..5). */
        int only = argc >= 4 ? atoi(argv[3]) : 0;
        if (!only || only == 1)
            verify_session(argv[2], false, VFE_DAXGUEST_LINUX, "always", false);
        if (!only || only == 2)
            verify_session(argv[2], true, VFE_DAXGUEST_LINUX, "always", false);
        if (!only || only == 3)
            verify_session(argv[2], false, VFE_DAXGUEST_LRU, "auto", false);
        if (!only || only == 4)
            verify_session(argv[2], false, VFE_DAXGUEST_LINUX, "always", true);
        if (!only || only == 5)
            verify_session(argv[2], true, VFE_DAXGUEST_LINUX, "always", true);
    } else if (argc >= 4 && !strcmp(argv[1], "stress")) {
        double secs = strtod(argv[3], NULL);
        bool legacy = argc >= 5 && !strcmp(argv[4], "legacy");
        bool direct = argc >= 6 && !strcmp(argv[5], "direct");
        stress(argv[2], secs > 0 ? secs : 60, legacy, direct);
    } else {
        fprintf(stderr,
                "usage: %s verify VUFSD [1-5] | stress VUFSD SECONDS [shmem|legacy] [store|direct]\n",
                argv[0]);
        return 2;
    }
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
