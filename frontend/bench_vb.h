/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs-bench internals (prefix vb_): options, one run of one backend, the
 * statistics over runs. vufs_bench.c (command line, files, run loop),
 * bench_run.c (a run against a spawned backend or the host), bench_report.c
 * (tables and JSON).
 */
#ifndef VUFS_BENCH_VB_H
#define VUFS_BENCH_VB_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct vfe_dev;

#define VB_MAX_BACKENDS 16u
/* Values per --dax-window / --dax-policy / --dax-guest list. */
#define VB_MAX_DAX_VALUES 16u
/* The benchmark's directory inside --dir. */
#define VB_TOP "vufs-bench"

enum vb_workload {
    VB_RANDREAD,
    VB_RANDWRITE,
    VB_SEQREAD,
    VB_SEQWRITE,
    VB_RANDRW,
    VB_LOOKUP,
    VB_STAT,
    VB_CREATE,
    VB_CREATE_UNLINK, /* CREATE then, after RELEASE and FORGET, UNLINK: both counted */
};

struct vb_backend {
    char *name;
    char *cmd;    /* NULL for host */
    bool host;
};

struct vb_opts {
    struct vb_backend backends[VB_MAX_BACKENDS];
    unsigned nbackends;
    const char *dir;
    enum vb_workload workload;
    uint32_t bs;
    uint64_t size;         /* per data file */
    unsigned files;        /* data files, or small files for lookup/stat */
    unsigned queues, depth;
    double runtime_s;
    unsigned repeat;
    unsigned read_pct;     /* randrw */
    /* DAX: the lists given; every combination is a variant, run interleaved. */
    uint64_t dax_windows[VB_MAX_DAX_VALUES];
    unsigned ndax_windows;
    const char *dax_policies[VB_MAX_DAX_VALUES];
    unsigned ndax_policies;
    const char *dax_guests[VB_MAX_DAX_VALUES];
    unsigned ndax_guests;
    bool dax_legacy;       /* --dax-protocol legacy */
    unsigned halt_poll_us; /* the guest side's halt polling (vfe_vq_set_halt_poll) */
    /* --pin: the frontend's threads and the spawned backends on disjoint CPU sets
     * (the host pseudo-backend's threads on both). */
    bool pin;
    cpu_set_t frontend_cpus, backend_cpus;
    bool create_dir_per_queue; /* --create-dirs per-queue: each queue its own directory */
    /* The variant being run or reported. */
    uint64_t dax_window;   /* 0: no DAX */
    const char *dax_policy;
    const char *dax_guest;
    bool json;
};

/* One timed run of one backend. */
struct vb_run {
    unsigned queues, depth; /* effective */
    uint64_t ops, errors, bytes;
    int first_error;        /* -errno of the first failed request, 0 when none */
    double secs;
    double iops, mib_s, p50_us, p99_us;
    double cpu_s;           /* backend process group utime + stime; -1 for host */
    uint64_t rss_kib;       /* backend process group RSS after the run; 0 for host */
    char *why;              /* on failure, a readable reason (g_free) */
    char backend_cpus[128]; /* the backend's Cpus_allowed_list during the run; "" for host */
    /* DAX runs (bench_dax.c). */
    uint64_t dax_offered;   /* the window the backend offered (0: none) */
    unsigned dax_files;     /* data files with FUSE_ATTR_DAX */
    uint64_t dax_setups, dax_upgrades, dax_removes, dax_hits, dax_plain, dax_rejects;
    uint64_t dax_waits, dax_inline, dax_bg;
    /* The map miss path: the guest's SETUPMAPPING round trips (request to
     * reply), and the backend's own map calls as its window statistics count
     * them (a backend command with {stats_file}; count 0 otherwise). */
    uint64_t dax_setup_ns, dax_setup_count;
    uint64_t dax_map_ns, dax_map_count, dax_map_max_ns;
};

struct vb_series {
    struct vb_run *runs;
    unsigned nruns;
};

char *vb_data_name(unsigned i);
char *vb_meta_name(unsigned i);
bool vb_workload_is_data(enum vb_workload w);
/* create and create-unlink: fresh files in a directory of the run's own. */
bool vb_workload_creates(enum vb_workload w);
bool vb_workload_writes(enum vb_workload w);

/* xorshift64*: the benches' random offsets, one state per thread (bench_run.c). */
uint64_t vb_rand(uint64_t *s);

/* The next data access of a thread: which file, where, read or write. */
struct vb_access {
    unsigned file;
    uint64_t off;
    bool write;
};
struct vb_access vb_next_access(const struct vb_opts *o, uint64_t *rng, uint64_t *seq_off,
                                unsigned index);

/* sub: the run's own directory under create/ (CREATE only). 0 or -errno, with
 * run->why set when there is more to say than the errno. */
int vb_run_backend(const struct vb_opts *o, const struct vb_backend *be, const char *sub,
                   const char *log, struct vb_run *run);
/* A run through the emulated guest DAX client (o->dax_window set). */
int vb_run_dax(const struct vb_opts *o, const struct vb_backend *be, const char *log,
               struct vb_run *run);
/* The backend's command with {dax_window} (bytes; 0 without DAX),
 * {dax_policy} (never without DAX) and, given one, {stats_file} filled in
 * (g_free). */
char *vb_backend_cmd(const struct vb_opts *o, const struct vb_backend *be, const char *stats_file);
/* Sets run->why to "what: strerror(-r)" and returns r (a failed step's errno). */
int vb_why(struct vb_run *run, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Queues 0..nq of dev halt-poll as --halt-poll-us says. */
void vb_set_halt_poll(const struct vb_opts *o, struct vfe_dev *dev, unsigned nq);
struct vfe_bench_result;
/* One thread's counts added to res (the first error seen is kept). */
struct vfe_hist;
void vb_result_add(struct vfe_bench_result *res, uint64_t ops, uint64_t errors, int first_error,
                   uint64_t bytes, const struct vfe_hist *hist);
void vb_fill_run(struct vb_run *run, const struct vfe_bench_result *res);
int vb_run_host(const struct vb_opts *o, int dirfd, const char *sub, struct vb_run *run);
/* utime + stime (seconds) and resident memory (KiB) summed over every process
 * in process group pgid; -ESRCH when there is none. */
int vb_pgrp_sample(pid_t pgid, double *cpu_s, uint64_t *rss_kib);
/* "0-3,8": a CPU list as the kernel writes one (bench_report.c). 0, -EINVAL. */
int vb_parse_cpus(const char *s, cpu_set_t *set);
void vb_format_cpus(const cpu_set_t *set, char *buf, size_t len);
/* The directory a create run's queue q (1-based) creates in, under create/SUB
 * (g_free): SUB itself, or SUB/qQ with --create-dirs per-queue. */
char *vb_create_dir(const struct vb_opts *o, const char *sub, unsigned q);

void vb_report(const struct vb_opts *o, const struct vb_series *s, FILE *to,
               const char *workload);
/* The JSON objects of one variant, each preceded by ",\n" unless *first (which
 * is cleared), for several variants' objects in one array. */
void vb_report_json_objects(const struct vb_opts *o, const struct vb_series *s, FILE *to,
                            const char *workload, bool *first);
/* Median, min and max of n values (n > 0); v is not modified. */
void vb_stats(const double *v, unsigned n, double *median, double *min, double *max);

#endif
