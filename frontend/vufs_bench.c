/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs-bench: drive vhost-user-fs backends the way a guest would and compare
 * them side by side.
 *
 *   vufs-bench --backend NAME='COMMAND with {socket} and {dir}' [--backend ...]
 *              --dir DIR --workload W --bs SIZE --size SIZE --files N
 *              --queues N --depth N --runtime SEC --repeat N
 *              [--dax-window SIZE[,..] --dax-policy P[,..] --dax-guest G[,..]] [--json]
 *
 * The files are made once in DIR/vufs-bench/ before the first run (kept for the
 * next invocation when their sizes match) and read once on the host, so every
 * run starts with a hot page cache. Runs are interleaved backend by backend
 * (A B A B ...) so the noise of a shared machine hits all of them alike; each
 * run spawns its backend afresh, negotiates, sends INIT and resolves the files
 * before the clock starts. The backend's CPU time (utime + stime of its process
 * group, from /proc) is sampled around the timed part of each run.
 *
 * `host` (NAME=host, no command) is the pseudo-backend: the same workload with
 * pread/pwrite (fstatat, openat, unlinkat) on the host files, queues x depth threads at
 * queue depth 1 each (capped at 256 threads, bench_run.c).
 *
 * A backend that serves fewer request queues than asked (the legacy and the
 * Rust virtiofsd serve one) gets one queue with queues x depth requests in flight, so every
 * backend sees the same concurrency; the effective queues and depth are reported.
 *
 * With --dax-window every combination of the DAX lists is a variant, run
 * interleaved with the backends (bench_dax.c runs them through the emulated
 * guest DAX client). The statistics live in bench_report.c; this file is the
 * command line, the file set and the run loop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "bench_vb.h"
#include "vfe.h"
#include "vufs_util.h"

#define VB_DEFAULT_META_FILES 10000u

static const char *const vb_workload_names[] = {
    [VB_RANDREAD] = "randread", [VB_RANDWRITE] = "randwrite", [VB_SEQREAD] = "seqread",
    [VB_SEQWRITE] = "seqwrite", [VB_RANDRW] = "randrw",       [VB_LOOKUP] = "lookup",
    [VB_STAT] = "stat",         [VB_CREATE] = "create",
    [VB_CREATE_UNLINK] = "create-unlink",
};

static bool vb_is_data(enum vb_workload w)
{
    return w <= VB_RANDRW;
}

static bool vb_writes(enum vb_workload w)
{
    return w == VB_RANDWRITE || w == VB_SEQWRITE || w == VB_RANDRW;
}

/* ---- Options ------------------------------------------------------------------- */

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    uint64_t mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    case 0: break;
    default: return -EINVAL;
    }
    if (*end == 'i' && end[1] == 'B')
        end += 2;
    else if (*end == 'B')
        end++;
    if (*end || v > UINT64_MAX / mul)
        return -EINVAL;
    *out = v * mul;
    return 0;
}

static int parse_uint(const char *s, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > max)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

/* A count of something that must exist: 1 to max. */
static int parse_count(const char *s, unsigned max, unsigned *out)
{
    int r = parse_uint(s, max, out);
    return r == 0 && *out == 0 ? -ERANGE : r;
}

static void usage(FILE *to)
{
    fprintf(to,
        "usage: vufs-bench --backend NAME='COMMAND with {socket} and {dir}' [--backend ...]\n"
        "                  --dir DIR --workload W [--bs SIZE] [--size SIZE] [--files N]\n"
        "                  [--queues N] [--depth N] [--runtime SEC] [--repeat N]\n"
        "                  [--dax-window SIZE[,SIZE...] --dax-policy never|always|auto[,...]\n"
        "                   --dax-guest linux|lru[,...] --dax-protocol shmem|legacy]\n"
        "                  [--read-pct N] [--halt-poll-us N] [--pin auto|FRONTEND:BACKEND]\n"
        "                  [--create-dirs shared|per-queue] [--json]\n"
        "workloads: randread randwrite seqread seqwrite randrw lookup stat create\n"
        "           create-unlink (each file also unlinked; CREATE and UNLINK counted)\n"
        "--backend host (no command): pread/pwrite on the host files directly.\n"
        "With --dax-window the runs go through an emulated guest DAX client; every\n"
        "combination of the DAX lists is run, interleaved; {dax_window} and {dax_policy}\n"
        "in a backend command are replaced by the variant's window (bytes) and policy,\n"
        "{stats_file} by a file the backend leaves its window statistics in (vufsd's\n"
        "--stats-file): the report adds the backend's map call latency from it to the\n"
        "guest's SETUPMAPPING round trip.\n"
        "--halt-poll-us: how long the guest side looks for a completion's notification\n"
        "before it sleeps, as a halted vCPU does under KVM (its halt_poll_ns, 200 us on\n"
        "x86); default 200, 0 sleeps at once.\n"
        "--pin: the frontend's threads and each spawned backend on disjoint CPU sets,\n"
        "CPU lists as in /proc (0-7:8-15); auto gives the backend the first half of the\n"
        "CPUs vufs-bench may use and the frontend the rest. The table and the JSON say\n"
        "what the backend's threads were allowed during each run.\n"
        "--create-dirs per-queue: create and create-unlink make each queue's files in a\n"
        "directory of its own (the default, shared: every queue in one directory).\n");
}

/* --pin auto or FRONTEND:BACKEND; both sets within vufs-bench's own CPUs,
 * neither empty, no CPU in both. */
static int parse_pin(const char *v, struct vb_opts *o)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
        return -errno;
    CPU_ZERO(&o->frontend_cpus);
    CPU_ZERO(&o->backend_cpus);
    if (!strcmp(v, "auto")) {
        int n = CPU_COUNT(&allowed), seen = 0;
        if (n < 2)
            return -ERANGE;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                CPU_SET(c, seen++ < n / 2 ? &o->backend_cpus : &o->frontend_cpus);
    } else {
        const char *colon = strchr(v, ':');
        if (!colon)
            return -EINVAL;
        g_autofree char *fe = g_strndup(v, (gsize)(colon - v));
        int r = vb_parse_cpus(fe, &o->frontend_cpus);
        if (r == 0)
            r = vb_parse_cpus(colon + 1, &o->backend_cpus);
        if (r < 0)
            return r;
    }
    cpu_set_t both, all;
    CPU_AND(&both, &o->frontend_cpus, &o->backend_cpus);
    CPU_OR(&all, &o->frontend_cpus, &o->backend_cpus);
    CPU_AND(&all, &all, &allowed);
    if (CPU_COUNT(&both) || !CPU_COUNT(&o->frontend_cpus) || !CPU_COUNT(&o->backend_cpus) ||
        CPU_COUNT(&all) != CPU_COUNT(&o->frontend_cpus) + CPU_COUNT(&o->backend_cpus))
        return -ERANGE;
    o->pin = true;
    return 0;
}

static int add_backend(struct vb_opts *o, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (o->nbackends == VB_MAX_BACKENDS)
        return -E2BIG;
    struct vb_backend *b = &o->backends[o->nbackends];
    if (!eq) {
        if (strcmp(arg, "host"))
            return -EINVAL;
        b->name = g_strdup("host");
        b->host = true;
    } else {
        if (eq == arg || !eq[1])
            return -EINVAL;
        b->name = g_strndup(arg, (gsize)(eq - arg));
        b->cmd = g_strdup(eq + 1);
        b->host = !strcmp(b->name, "host") && !strcmp(b->cmd, "host");
    }
    if (!b->host && !b->cmd) {
        g_free(b->name);
        return -EINVAL;
    }
    for (unsigned i = 0; i < o->nbackends; i++)
        if (!strcmp(o->backends[i].name, b->name)) {
            g_free(b->name);
            g_free(b->cmd);
            return -EEXIST;
        }
    o->nbackends++;
    return 0;
}

/* 0, 1 after --help, or -errno on a bad command line. */
static int parse_args(int argc, char **argv, struct vb_opts *o)
{
    *o = (struct vb_opts){ .workload = VB_RANDREAD, .bs = 4096, .size = 64ull << 20,
                           .queues = 1, .depth = 1, .runtime_s = 5, .repeat = 3,
                           .read_pct = 50, .halt_poll_us = 200 };
    bool files_set = false, dax_protocol_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = 0;
        if (!strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "vufs-bench: %s needs a value\n", a);
            return -EINVAL;
        }
        i++;
        if (!strcmp(a, "--backend")) {
            r = add_backend(o, v);
        } else if (!strcmp(a, "--dir")) {
            o->dir = v;
        } else if (!strcmp(a, "--workload")) {
            r = -EINVAL;
            for (unsigned w = 0; w < G_N_ELEMENTS(vb_workload_names); w++)
                if (!strcmp(v, vb_workload_names[w])) {
                    o->workload = (enum vb_workload)w;
                    r = 0;
                }
        } else if (!strcmp(a, "--bs")) {
            uint64_t x = 0;
            r = parse_size(v, &x);
            if (!r && (x == 0 || x > (16u << 20)))
                r = -ERANGE;
            o->bs = (uint32_t)x;
        } else if (!strcmp(a, "--size")) {
            r = parse_size(v, &o->size);
        } else if (!strcmp(a, "--files")) {
            r = parse_count(v, 10000000, &o->files);
            files_set = true;
        } else if (!strcmp(a, "--queues")) {
            r = parse_count(v, 64, &o->queues);
        } else if (!strcmp(a, "--depth")) {
            r = parse_count(v, 1024, &o->depth);
        } else if (!strcmp(a, "--runtime")) {
            char *end;
            o->runtime_s = strtod(v, &end);
            if (*end || end == v || !(o->runtime_s > 0 && o->runtime_s <= 3600))
                r = -EINVAL;
        } else if (!strcmp(a, "--repeat")) {
            r = parse_count(v, 1000, &o->repeat);
        } else if (!strcmp(a, "--halt-poll-us")) {
            r = parse_uint(v, 1000000, &o->halt_poll_us);
        } else if (!strcmp(a, "--pin")) {
            r = parse_pin(v, o);
        } else if (!strcmp(a, "--create-dirs")) {
            r = strcmp(v, "shared") && strcmp(v, "per-queue") ? -EINVAL : 0;
            o->create_dir_per_queue = !strcmp(v, "per-queue");
        } else if (!strcmp(a, "--read-pct")) {
            r = parse_uint(v, 100, &o->read_pct);
        } else if (!strcmp(a, "--dax-window")) {
            g_auto(GStrv) parts = g_strsplit(v, ",", -1);
            o->ndax_windows = 0;
            for (unsigned k = 0; parts[k] && r == 0; k++) {
                uint64_t w = 0;
                r = o->ndax_windows == VB_MAX_DAX_VALUES ? -E2BIG : parse_size(parts[k], &w);
                if (!r && (!w || w % (2u << 20)))
                    r = -ERANGE; /* whole 2 MiB ranges */
                if (!r)
                    o->dax_windows[o->ndax_windows++] = w;
            }
        } else if (!strcmp(a, "--dax-policy") || !strcmp(a, "--dax-guest")) {
            bool pol = !strcmp(a, "--dax-policy");
            const char *const *ok = pol ? (const char *const[]){ "never", "always", "auto", NULL }
                                        : (const char *const[]){ "linux", "lru", NULL };
            const char **list = pol ? o->dax_policies : o->dax_guests;
            unsigned *n = pol ? &o->ndax_policies : &o->ndax_guests;
            *n = 0;
            /* The values point into argv (split in place on ','). */
            for (char *p = (char *)v, *next; p && r == 0; p = next) {
                next = strchr(p, ',');
                if (next)
                    *next++ = 0;
                r = *n == VB_MAX_DAX_VALUES ? -E2BIG : -EINVAL;
                for (unsigned k = 0; ok[k] && r == -EINVAL; k++)
                    if (!strcmp(p, ok[k]))
                        r = 0;
                if (!r)
                    list[(*n)++] = p;
            }
        } else if (!strcmp(a, "--dax-protocol")) {
            r = strcmp(v, "shmem") && strcmp(v, "legacy") ? -EINVAL : 0;
            o->dax_legacy = !strcmp(v, "legacy");
            dax_protocol_set = true;
        } else {
            fprintf(stderr, "vufs-bench: unknown option %s\n", a);
            return -EINVAL;
        }
        if (r < 0) {
            fprintf(stderr, "vufs-bench: bad value for %s: %s (%s)\n", a, v, g_strerror(-r));
            return r;
        }
    }
    if (!o->nbackends || !o->dir) {
        fprintf(stderr, "vufs-bench: at least one --backend and --dir are required\n");
        return -EINVAL;
    }
    if (!files_set)
        o->files = vb_is_data(o->workload) ? 1 : VB_DEFAULT_META_FILES;
    if (vb_is_data(o->workload) && o->size < o->bs) {
        fprintf(stderr, "vufs-bench: --size must be at least --bs\n");
        return -EINVAL;
    }
    if (vb_is_data(o->workload) && o->files > 64) {
        fprintf(stderr, "vufs-bench: at most 64 data files\n");
        return -EINVAL;
    }
    if ((o->ndax_policies || o->ndax_guests || dax_protocol_set) && !o->ndax_windows) {
        fprintf(stderr, "vufs-bench: --dax-policy/--dax-guest/--dax-protocol need --dax-window\n");
        return -EINVAL;
    }
    if (o->ndax_windows) {
        if (!vb_is_data(o->workload)) {
            fprintf(stderr, "vufs-bench: --dax-window runs data workloads only\n");
            return -EINVAL;
        }
        if (!o->ndax_policies)
            o->dax_policies[o->ndax_policies++] = "auto";
        if (!o->ndax_guests)
            o->dax_guests[o->ndax_guests++] = "linux";
    }
    return 0;
}

/* ---- The file set ------------------------------------------------------------- */

char *vb_data_name(unsigned i)
{
    return g_strdup_printf("data.%u", i);
}

char *vb_meta_name(unsigned i)
{
    return g_strdup_printf("f%07u", i);
}

/* Makes DIR/vufs-bench/data.I of the given size (kept when already right) and
 * reads it once so the page cache is hot. */
static int prepare_data_file(int dirfd, unsigned i, uint64_t size)
{
    g_autofree char *name = vb_data_name(i);
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    struct stat st;
    int r = 0;
    enum { CHUNK = 1 << 20 };
    g_autofree char *buf = g_malloc(CHUNK);
    if (fstat(fd, &st) < 0) {
        r = -errno;
    } else if ((uint64_t)st.st_size != size) {
        if (ftruncate(fd, 0) < 0)
            r = -errno;
        for (uint64_t off = 0; r == 0 && off < size; off += CHUNK) {
            size_t n = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
            for (size_t k = 0; k < n; k += 64)
                memset(buf + k, 'A' + (int)((off + k) / 4096 % 26), n - k < 64 ? n - k : 64);
            ssize_t w = pwrite(fd, buf, n, (off_t)off);
            if (w != (ssize_t)n)
                r = w < 0 ? -errno : -EIO;
        }
    }
    for (uint64_t off = 0; r == 0 && off < size; off += CHUNK) {
        ssize_t n = pread(fd, buf, CHUNK, (off_t)off);
        if (n <= 0)
            break;
    }
    close(fd);
    return r;
}

static int prepare_meta_files(int dirfd, unsigned n)
{
    if (mkdirat(dirfd, "meta", 0755) < 0 && errno != EEXIST)
        return -errno;
    int mfd = openat(dirfd, "meta", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mfd < 0)
        return -errno;
    int r = 0;
    for (unsigned i = 0; i < n && r == 0; i++) {
        g_autofree char *name = vb_meta_name(i);
        struct stat st;
        if (fstatat(mfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        int fd = openat(mfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            r = -errno;
        else
            close(fd);
    }
    close(mfd);
    return r;
}

char *vb_create_dir(const struct vb_opts *o, const char *sub, unsigned q)
{
    return o->create_dir_per_queue ? g_strdup_printf("%s/q%u", sub, q) : g_strdup(sub);
}

/* A create run's directories: create/SUB, and with --create-dirs per-queue
 * create/SUB/qN for every queue a backend may be given. */
static int make_create_dirs(const struct vb_opts *o, int dirfd, const char *sub)
{
    unsigned n = o->create_dir_per_queue ? o->queues : 0;
    for (unsigned q = 0; q <= n; q++) {
        g_autofree char *rel = q ? vb_create_dir(o, sub, q) : g_strdup(sub);
        g_autofree char *path = g_strdup_printf("create/%s", rel);
        if (mkdirat(dirfd, path, 0755) < 0)
            return -errno;
    }
    return 0;
}

/* Removes the directory at path under dirfd and what is in it (directories
 * 'depth' levels down included). */
static void remove_tree(int dirfd, const char *path, unsigned depth)
{
    int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlinkat(fd, e->d_name, 0) < 0 &&
            (errno == EISDIR || errno == EPERM) && depth)
            remove_tree(fd, e->d_name, depth - 1);
    closedir(d);
    unlinkat(dirfd, path, AT_REMOVEDIR);
}

/* Removes DIR/vufs-bench/create/SUB and what is in it. */
static void remove_create_dir(int dirfd, const char *sub)
{
    g_autofree char *path = g_strdup_printf("create/%s", sub);
    remove_tree(dirfd, path, 1);
}

static int prepare_files(const struct vb_opts *o, int *dirfd_out)
{
    if (mkdir(o->dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    g_autofree char *top = g_build_filename(o->dir, VB_TOP, NULL);
    if (mkdir(top, 0755) < 0 && errno != EEXIST)
        return -errno;
    int dirfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return -errno;
    int r = 0;
    if (vb_is_data(o->workload)) {
        for (unsigned i = 0; i < o->files && r == 0; i++)
            r = prepare_data_file(dirfd, i, o->size);
    } else if (vb_workload_creates(o->workload)) {
        if (mkdirat(dirfd, "create", 0755) < 0 && errno != EEXIST)
            r = -errno;
    } else {
        r = prepare_meta_files(dirfd, o->files);
    }
    if (r < 0) {
        close(dirfd);
        return r;
    }
    *dirfd_out = dirfd;
    return 0;
}

/* ---- Runs ------------------------------------------------------------------------ */

struct vb_progress {
    pthread_t thread;
    GMutex lock;
    GCond cond;
    bool stop;            /* protected by lock */
    bool tty;
    char label[160];      /* protected by lock */
    uint64_t t0;          /* protected by lock */
};

static void *progress_main(void *arg)
{
    struct vb_progress *p = arg;
    g_mutex_lock(&p->lock);
    while (!p->stop) {
        gint64 until = g_get_monotonic_time() + G_TIME_SPAN_SECOND;
        g_cond_wait_until(&p->cond, &p->lock, until);
        if (!p->stop && p->tty && p->t0)
            fprintf(stderr, "\r%s %.0f s ", p->label, (double)(vufs_now_ns() - p->t0) / 1e9);
    }
    g_mutex_unlock(&p->lock);
    return NULL;
}

static void progress_set(struct vb_progress *p, const char *label)
{
    g_mutex_lock(&p->lock);
    g_strlcpy(p->label, label, sizeof(p->label));
    p->t0 = vufs_now_ns();
    if (p->tty)
        fprintf(stderr, "\r\033[K%s", label);
    g_mutex_unlock(&p->lock);
}

static void progress_done(struct vb_progress *p, const char *result)
{
    g_mutex_lock(&p->lock);
    p->t0 = 0;
    if (p->tty)
        fprintf(stderr, "\r\033[K%s %s", p->label, result);
    else
        fprintf(stderr, "%s %s\n", p->label, result);
    g_mutex_unlock(&p->lock);
}

int main(int argc, char **argv)
{
    struct vb_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr != 0) {
        for (unsigned b = 0; b < o.nbackends; b++) {
            g_free(o.backends[b].name);
            g_free(o.backends[b].cmd);
        }
        if (pr > 0)
            return 0; /* --help */
        usage(stderr);
        return 2;
    }
    /* The frontend's CPUs: every thread vufs-bench starts from here on inherits them. */
    if (o.pin && sched_setaffinity(0, sizeof(o.frontend_cpus), &o.frontend_cpus) < 0) {
        fprintf(stderr, "vufs-bench: --pin: %s\n", g_strerror(errno));
        return 1;
    }
    int dirfd = -1;
    int r = prepare_files(&o, &dirfd);
    g_autofree char *logdir = r < 0 ? NULL : g_dir_make_tmp("vufs-bench-XXXXXX", NULL);
    if (r < 0 || !logdir) {
        if (r < 0)
            fprintf(stderr, "vufs-bench: preparing the files in %s: %s\n", o.dir,
                    g_strerror(-r));
        else
            fprintf(stderr, "vufs-bench: no temporary directory for backend logs\n");
        if (dirfd >= 0)
            close(dirfd);
        for (unsigned b = 0; b < o.nbackends; b++) {
            g_free(o.backends[b].name);
            g_free(o.backends[b].cmd);
        }
        return 1;
    }
    /* Variants: every combination of the DAX lists (one without DAX). */
    unsigned nw = o.ndax_windows ? o.ndax_windows : 1;
    unsigned np = o.ndax_windows ? o.ndax_policies : 1;
    unsigned ng = o.ndax_windows ? o.ndax_guests : 1;
    unsigned nvar = nw * np * ng;
    struct vb_opts *var = g_new0(struct vb_opts, nvar);
    for (unsigned v = 0; v < nvar; v++) {
        var[v] = o;
        if (o.ndax_windows) {
            var[v].dax_window = o.dax_windows[v / (np * ng)];
            var[v].dax_policy = o.dax_policies[v / ng % np];
            var[v].dax_guest = o.dax_guests[v % ng];
        }
    }
    struct vb_series *series = g_new0(struct vb_series, nvar * o.nbackends);
    for (unsigned k = 0; k < nvar * o.nbackends; k++)
        series[k].runs = g_new0(struct vb_run, o.repeat);

    struct vb_progress prog = { .tty = isatty(2) };
    g_mutex_init(&prog.lock);
    g_cond_init(&prog.cond);
    pthread_create(&prog.thread, NULL, progress_main, &prog);

    bool failed = false;
    for (unsigned rep = 0; rep < o.repeat && !failed; rep++) {
        for (unsigned v = 0; v < nvar && !failed; v++) {
            const struct vb_opts *ov = &var[v];
            for (unsigned b = 0; b < o.nbackends && !failed; b++) {
                struct vb_backend *be = &o.backends[b];
                char label[160], dax[96] = "";
                if (ov->dax_window)
                    snprintf(dax, sizeof(dax), " dax %" PRIu64 "M %s %s",
                             ov->dax_window >> 20, ov->dax_policy, ov->dax_guest);
                snprintf(label, sizeof(label), "[run %u/%u] %s %s%s", rep + 1, o.repeat,
                         be->name, vb_workload_names[o.workload], dax);
                progress_set(&prog, label);
                struct vb_run *run = &series[v * o.nbackends + b].runs[rep];
                r = 0;
                g_autofree char *sub = g_strdup_printf("%s-%u-%d", be->name, rep, (int)getpid());
                g_autofree char *log = g_strdup_printf("%s/%s-%u-%u.log", logdir, be->name, v,
                                                       rep);
                if (vb_workload_creates(o.workload))
                    r = make_create_dirs(&o, dirfd, sub);
                /* Every run starts with the data written back: the previous run's
                 * dirty pages must not be flushed (and write-protected again)
                 * under this one. */
                if (r == 0 && syncfs(dirfd) < 0)
                    r = -errno;
                if (r == 0)
                    r = be->host ? vb_run_host(ov, dirfd, sub, run)
                                 : vb_run_backend(ov, be, sub, log, run);
                if (vb_workload_creates(o.workload))
                    remove_create_dir(dirfd, sub);
                if (r < 0) {
                    progress_done(&prog, "failed");
                    if (prog.tty)
                        fputc('\n', stderr);
                    fprintf(stderr, "vufs-bench: backend %s, run %u: %s\n", be->name, rep + 1,
                            run->why ? run->why : g_strerror(-r));
                    if (!be->host)
                        fprintf(stderr, "vufs-bench: backend log: %s\n", log);
                    failed = true;
                    break;
                }
                char res[96];
                snprintf(res, sizeof(res), "%.0f IOPS, %.1f MiB/s, p99 %.1f us", run->iops,
                         run->mib_s, run->p99_us);
                progress_done(&prog, res);
                series[v * o.nbackends + b].nruns++;
            }
        }
    }
    g_mutex_lock(&prog.lock);
    prog.stop = true;
    g_cond_signal(&prog.cond);
    g_mutex_unlock(&prog.lock);
    pthread_join(prog.thread, NULL);
    if (prog.tty)
        fputc('\n', stderr);
    close(dirfd);

    if (!failed) {
        for (unsigned v = 0; v < nvar; v++)
            vb_report(&var[v], &series[v * o.nbackends], o.json ? stderr : stdout,
                      vb_workload_names[o.workload]);
        if (o.json) {
            bool first = true;
            fputs("[\n", stdout);
            for (unsigned v = 0; v < nvar; v++)
                vb_report_json_objects(&var[v], &series[v * o.nbackends], stdout,
                                       vb_workload_names[o.workload], &first);
            fputs("\n]\n", stdout);
        }
        GDir *d = g_dir_open(logdir, 0, NULL);
        const char *n;
        while (d && (n = g_dir_read_name(d))) {
            g_autofree char *p = g_build_filename(logdir, n, NULL);
            unlink(p);
        }
        if (d)
            g_dir_close(d);
        rmdir(logdir);
    }
    for (unsigned k = 0; k < nvar * o.nbackends; k++) {
        for (unsigned i = 0; i < o.repeat; i++)
            g_free(series[k].runs[i].why);
        g_free(series[k].runs);
    }
    for (unsigned b = 0; b < o.nbackends; b++) {
        g_free(o.backends[b].name);
        g_free(o.backends[b].cmd);
    }
    g_free(series);
    g_free(var);
    return failed ? 1 : 0;
}

bool vb_workload_is_data(enum vb_workload w)
{
    return vb_is_data(w);
}

bool vb_workload_creates(enum vb_workload w)
{
    return w == VB_CREATE || w == VB_CREATE_UNLINK;
}

bool vb_workload_writes(enum vb_workload w)
{
    return vb_writes(w);
}
