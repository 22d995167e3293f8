/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Do memory-region updates stall the queues? A frontend that reports every DAX
 * mapping as a guest memory region (QEMU 11.1: ADD_MEM_REG per map, REM_MEM_REG
 * per unmap, each a new memory table in the daemon) maps and unmaps without
 * pause on request queue 2, while request queue 1 runs a QD1 loop of GETATTR
 * (or 4 KiB READ) whose latency is recorded. Three phases, each on a fresh
 * daemon, interleaved repeat by repeat:
 *
 *   quiet          no mapping traffic (guest memory region by region, as in
 *                  the last phase)
 *   churn-plain    maps and unmaps at RATE a second, the frontend reporting no
 *                  region (guest memory in one SET_MEM_TABLE): the mapping
 *                  work without a single memory-table change
 *   churn-regions  the same maps and unmaps as QEMU 11.1 reports them: two
 *                  memory-table changes per map and unmap pair
 *
 * churn-regions against churn-plain, at the same map rate, is what the table
 * swaps cost queue 1; churn-plain against quiet is what the mapping work
 * takes from it.
 *
 *   region_stall --vufsd CMD [--seconds S] [--repeat N] [--rate MAPS]
 *                [--op getattr|read] [--only PHASE] [--log FILE] [--check]
 *
 * CMD is the daemon's command line ({socket} and {dir} are filled in) without
 * --dax-window (16M is added); its output goes to FILE (default /dev/null).
 * RATE: maps a second (each with its unmap), default 1000; 0 = as fast as the
 * daemon answers. --check (the meson smoke test) fails unless every phase
 * served requests without an error and the churn phases mapped. Prints one
 * line per phase and repeat, then the medians over the repeats (us).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "vfe.h"
#include "vufs_util.h"
#include "../it_util.h"

#define MiB (1ull << 20)
#define WINDOW (16 * MiB)
#define RANGES 8u
#define WIN_GPA 0x10000000000ull

enum phase { QUIET, CHURN_PLAIN, CHURN_REGIONS, NPHASES };
static const char *const phase_names[NPHASES] = { "quiet", "churn-plain", "churn-regions" };

static const char *opt_vufsd;
static double opt_seconds = 3;
static unsigned opt_repeat = 3;
static bool opt_read;
static bool opt_check;
static double opt_rate = 1000;
static const char *opt_log = "/dev/null";
static int opt_only = -1; /* one phase only (for a profiler) */

struct churn {
    struct vfe_fuse *fuse;
    uint64_t nodeid;
    volatile bool stop;
    uint64_t maps, unmaps, errors;
};

static int setup_on(struct vfe_fuse *f, unsigned q, uint64_t nodeid, uint64_t foff,
                    uint64_t moff)
{
    struct fuse_setupmapping_in in = { .fh = ~0ull, .foffset = foff, .len = 2 * MiB,
                                       .flags = FUSE_SETUPMAPPING_FLAG_READ, .moffset = moff };
    struct vfe_fuse_op op = { .opcode = FUSE_SETUPMAPPING, .nodeid = nodeid, .arg = &in,
                              .arg_len = sizeof(in) };
    return vfe_fuse_call(f, q, &op);
}

static int remove_on(struct vfe_fuse *f, unsigned q, uint64_t nodeid, uint64_t moff)
{
    uint8_t buf[4 + 16];
    uint32_t count = 1;
    uint64_t len = 2 * MiB;
    memcpy(buf, &count, 4);
    memcpy(buf + 4, &moff, 8);
    memcpy(buf + 12, &len, 8);
    struct vfe_fuse_op op = { .opcode = FUSE_REMOVEMAPPING, .nodeid = nodeid, .arg = buf,
                              .arg_len = sizeof(buf) };
    return vfe_fuse_call(f, q, &op);
}

/* Queue 2: a range mapped, then unmapped, round the window, until told. */
static void *churn_main(void *arg)
{
    struct churn *c = arg;
    uint64_t t0 = vufs_now_ns();
    for (uint64_t i = 0; !c->stop; i++) {
        if (opt_rate > 0) {
            uint64_t due = t0 + (uint64_t)((double)i * 1e9 / opt_rate), now = vufs_now_ns();
            if (due > now)
                usleep((useconds_t)((due - now) / 1000));
        }
        uint64_t moff = (i % RANGES) * 2 * MiB;
        if (setup_on(c->fuse, 2, c->nodeid, moff, moff) == 0)
            c->maps++;
        else
            c->errors++;
        if (remove_on(c->fuse, 2, c->nodeid, moff) == 0)
            c->unmaps++;
        else
            c->errors++;
    }
    return NULL;
}

struct result {
    uint64_t ops, errors, maps;
    double p50, p90, p99, p999, max;
};

static double us(uint64_t ns)
{
    return (double)ns / 1e3;
}

static int run_phase(enum phase ph, const char *dir, struct result *out)
{
    g_autofree char *cmd = g_strdup_printf("%s --dax-window 16M", opt_vufsd);
    struct vfe_dax *x = NULL;
    int r = vfe_dax_new(WINDOW, VFE_DAX_SHMEM, &x);
    if (r < 0)
        return r;
    bool regions = ph != CHURN_PLAIN;
    uint64_t pf = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                  (1ull << VFE_VU_PF_BACKEND_REQ) | (1ull << VFE_VU_PF_BACKEND_SEND_FD) |
                  (1ull << VFE_VU_PF_SHMEM);
    if (regions)
        pf |= 1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS;
    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = cmd, .dir = dir, .backend_log = opt_log, .timeout_ms = 20000 },
        .request_queues = 2,
        .queue_size = 128,
        .protocol_features = pf,
        .backend_req = vfe_dax_handle,
        .backend_post = regions ? vfe_dax_post : NULL,
        .backend_req_opaque = x,
    };
    struct vfe_dev *d = NULL;
    struct vfe_fuse *f = NULL;
    r = vfe_dev_connect(&cfg, &d);
    if (r < 0)
        goto out;
    if (regions)
        vfe_dax_report_regions(x, d, WIN_GPA, 0);
    r = vfe_dev_start(d);
    if (r < 0)
        goto out;
    struct vfe_fuse_config fc = { .depth = 4, .timeout_ms = 20000,
                                  .init_flags = FUSE_MAP_ALIGNMENT | FUSE_HAS_INODE_DAX };
    r = vfe_fuse_new(d, &fc, &f);
    if (r < 0)
        goto out;
    struct vfe_fuse_init_result init;
    r = vfe_fuse_init(f, &init);
    if (r < 0)
        goto out;
    struct fuse_entry_out eo;
    r = vfe_fuse_lookup(f, FUSE_ROOT_ID, "f", &eo);
    if (r < 0)
        goto out;
    struct fuse_open_out oo = { 0 };
    if (opt_read && (r = vfe_fuse_open(f, eo.nodeid, O_RDONLY, &oo)) < 0)
        goto out;

    struct churn c = { .fuse = f, .nodeid = eo.nodeid };
    pthread_t t;
    bool churning = ph != QUIET;
    if (churning && pthread_create(&t, NULL, churn_main, &c) != 0) {
        r = -EAGAIN;
        goto out;
    }
    struct vfe_bench_config bc = {
        .op = opt_read ? VFE_BENCH_READ : VFE_BENCH_GETATTR,
        .queues = 1, .depth = 1, .block = 4096,
        .nodeid = eo.nodeid, .fh = oo.fh, .file_size = RANGES * 2 * MiB, .random = true,
        .duration_ns = (uint64_t)(opt_seconds * 1e9),
    };
    struct vfe_bench_result res = { 0 };
    r = vfe_bench_run(f, d, &bc, &res);
    if (churning) {
        c.stop = true;
        pthread_join(t, NULL);
    }
    if (r < 0)
        goto out;
    *out = (struct result){
        .ops = res.ops, .errors = res.errors + c.errors, .maps = c.maps,
        .p50 = us(vfe_hist_percentile(&res.latency, 50)),
        .p90 = us(vfe_hist_percentile(&res.latency, 90)),
        .p99 = us(vfe_hist_percentile(&res.latency, 99)),
        .p999 = us(vfe_hist_percentile(&res.latency, 99.9)),
        .max = us(res.latency.max),
    };
    struct vfe_dev_region_stats rs;
    vfe_dev_get_region_stats(d, &rs);
    if (rs.errors || rs.overflows)
        r = -EIO;
out:
    vfe_fuse_free(f);
    vfe_dev_close(d);
    vfe_dax_free(x);
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "vufsd", required_argument, NULL, 'v' },
        { "seconds", required_argument, NULL, 's' },
        { "repeat", required_argument, NULL, 'r' },
        { "op", required_argument, NULL, 'o' },
        { "rate", required_argument, NULL, 'R' },
        { "log", required_argument, NULL, 'l' },
        { "only", required_argument, NULL, 'O' },
        { "check", no_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    int o;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (o) {
        case 'v': opt_vufsd = optarg; break;
        case 's': opt_seconds = atof(optarg); break;
        case 'r': opt_repeat = (unsigned)atoi(optarg); break;
        case 'o': opt_read = strcmp(optarg, "read") == 0; break;
        case 'R': opt_rate = atof(optarg); break;
        case 'l': opt_log = optarg; break;
        case 'O':
            for (int i = 0; i < NPHASES; i++)
                if (strcmp(optarg, phase_names[i]) == 0)
                    opt_only = i;
            if (opt_only < 0)
                return 2;
            break;
        case 'c': opt_check = true; break;
        default: return 2;
        }
    }
    if (!opt_vufsd || opt_seconds <= 0 || opt_repeat == 0 || opt_repeat > 100 || opt_rate < 0) {
        fprintf(stderr, "usage: %s --vufsd CMD [--seconds S] [--repeat N] [--rate MAPS] "
                        "[--op getattr|read] [--log FILE] [--check]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    g_autofree char *dir = g_dir_make_tmp("vufsd-stall-XXXXXX", NULL);
    if (!dir)
        return 1;
    chmod(dir, 0755);
    g_autofree char *file = g_build_filename(dir, "f", NULL);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, RANGES * 2 * MiB) < 0 || pwrite(fd, "x", 1, 4096) != 1)
        return 1;
    close(fd);

    printf("%-14s %6s %9s %8s %8s %8s %8s %9s %9s\n", "phase", "repeat", "ops", "maps/s",
           "p50_us", "p90_us", "p99_us", "p99.9_us", "max_us");
    struct result all[NPHASES][100];
    int ret = 0;
    for (unsigned rep = 0; rep < opt_repeat && !ret; rep++)
        for (int ph = 0; ph < NPHASES && !ret; ph++) {
            if (opt_only >= 0 && ph != opt_only)
                continue;
            struct result *res = &all[ph][rep];
            int r = run_phase((enum phase)ph, dir, res);
            if (r < 0) {
                fprintf(stderr, "region_stall: %s: %s\n", phase_names[ph], strerror(-r));
                ret = 1;
                break;
            }
            printf("%-14s %6u %9llu %8.0f %8.1f %8.1f %8.1f %9.1f %9.1f\n", phase_names[ph],
                   rep + 1, (unsigned long long)res->ops, (double)res->maps / opt_seconds,
                   res->p50, res->p90, res->p99, res->p999, res->max);
            fflush(stdout);
            if (opt_check && (res->ops == 0 || res->errors ||
                              (ph != QUIET && res->maps == 0))) {
                fprintf(stderr, "region_stall: %s: %llu requests, %llu errors, %llu maps\n",
                        phase_names[ph], (unsigned long long)res->ops,
                        (unsigned long long)res->errors, (unsigned long long)res->maps);
                ret = 1;
            }
        }
    if (!ret) {
        printf("\nmedians of %u repeat(s) of %g s, %s on queue 1 at QD1, maps at %g/s on "
               "queue 2; latency in us:\n", opt_repeat, opt_seconds,
               opt_read ? "4 KiB READ" : "GETATTR", opt_rate);
        printf("%-14s %8s %8s %8s %8s %9s %9s %8s\n", "phase", "kops/s", "maps/s", "p50",
               "p90", "p99", "p99.9", "max");
        for (int ph = 0; ph < NPHASES; ph++) {
            if (opt_only >= 0 && ph != opt_only)
                continue;
            double v[7][100];
            for (unsigned i = 0; i < opt_repeat; i++) {
                struct result *res = &all[ph][i];
                v[0][i] = (double)res->ops / opt_seconds / 1e3;
                v[1][i] = (double)res->maps / opt_seconds;
                v[2][i] = res->p50;
                v[3][i] = res->p90;
                v[4][i] = res->p99;
                v[5][i] = res->p999;
                v[6][i] = res->max;
            }
            printf("%-14s %8.1f %8.0f %8.1f %8.1f %9.1f %9.1f %8.0f\n", phase_names[ph],
                   median(v[0], opt_repeat), median(v[1], opt_repeat), median(v[2], opt_repeat),
                   median(v[3], opt_repeat), median(v[4], opt_repeat), median(v[5], opt_repeat),
                   median(v[6], opt_repeat));
        }
    }
    it_rm_tree(dir);
    return ret;
}
