/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs-bench's report: per backend the median, min and max over its runs of
 * IOPS, MiB/s, p50 and p99 latency, and its backend CPU time (per request, and
 * as a share of one CPU over the timed loop: a polling backend shows); the ratio of
 * each backend's median IOPS to the first backend's. As a table, or as JSON
 * (one object per backend and workload, in an array).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "bench_vb.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void vb_stats(const double *v, unsigned n, double *median, double *min, double *max)
{
    g_autofree double *s = g_memdup2(v, n * sizeof(*v));
    qsort(s, n, sizeof(*s), cmp_double);
    *min = s[0];
    *max = s[n - 1];
    *median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

enum { F_IOPS, F_MIBS, F_P50, F_P99, F_CPU, F_CPU_OP, F_CPU_PCT, F_RSS, F_N };

struct summary {
    double med[F_N], min[F_N], max[F_N];
    unsigned queues, depth;
    uint64_t errors;
    int first_error;
};

static void summarise(const struct vb_series *s, struct summary *out)
{
    unsigned n = s->nruns;
    g_autofree double *v = g_new0(double, n ? n : 1);
    memset(out, 0, sizeof(*out));
    if (!n)
        return;
    for (int f = 0; f < F_N; f++) {
        for (unsigned i = 0; i < n; i++) {
            const struct vb_run *r = &s->runs[i];
            double ops = (double)(r->ops - r->errors);
            switch (f) {
            case F_IOPS: v[i] = r->iops; break;
            case F_MIBS: v[i] = r->mib_s; break;
            case F_P50: v[i] = r->p50_us; break;
            case F_P99: v[i] = r->p99_us; break;
            case F_CPU: v[i] = r->cpu_s; break;
            case F_CPU_OP: v[i] = r->cpu_s >= 0 && ops > 0 ? r->cpu_s * 1e6 / ops : -1; break;
            case F_CPU_PCT: v[i] = r->cpu_s >= 0 && r->secs > 0 ? r->cpu_s * 100 / r->secs : -1; break;
            case F_RSS: v[i] = (double)r->rss_kib; break;
            }
        }
        vb_stats(v, n, &out->med[f], &out->min[f], &out->max[f]);
    }
    out->queues = s->runs[0].queues;
    out->depth = s->runs[0].depth;
    for (unsigned i = 0; i < n; i++) {
        if (!out->errors && s->runs[i].errors)
            out->first_error = s->runs[i].first_error;
        out->errors += s->runs[i].errors;
    }
}

/* The counter at byte offset FIELD of run I (fields named by offsetof). */
static uint64_t run_u64(const struct vb_series *s, unsigned i, size_t field)
{
    uint64_t v;
    memcpy(&v, (const char *)&s->runs[i] + field, sizeof(v));
    return v;
}

/* Pooled over the runs: sum(ns) / sum(count), in microseconds; -1 with no count. */
static double pooled_us(const struct vb_series *s, size_t ns_field, size_t count_field)
{
    uint64_t ns = 0, n = 0;
    for (unsigned i = 0; i < s->nruns; i++) {
        ns += run_u64(s, i, ns_field);
        n += run_u64(s, i, count_field);
    }
    return n ? (double)ns / (double)n / 1000.0 : -1;
}

static uint64_t max_u64(const struct vb_series *s, size_t field)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < s->nruns; i++) {
        uint64_t v = run_u64(s, i, field);
        m = v > m ? v : m;
    }
    return m;
}

#define SETUP_US(s) pooled_us(s, offsetof(struct vb_run, dax_setup_ns), offsetof(struct vb_run, dax_setup_count))
#define MAP_US(s) pooled_us(s, offsetof(struct vb_run, dax_map_ns), offsetof(struct vb_run, dax_map_count))

int vb_parse_cpus(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    g_auto(GStrv) parts = g_strsplit(s, ",", -1);
    for (unsigned k = 0; parts[k]; k++) {
        char *end;
        errno = 0;
        unsigned long a = strtoul(parts[k], &end, 10), b = a;
        if (errno || end == parts[k])
            return -EINVAL;
        if (*end == '-') {
            const char *p = end + 1;
            b = strtoul(p, &end, 10);
            if (errno || end == p)
                return -EINVAL;
        }
        if (*end || a > b || b >= CPU_SETSIZE)
            return -EINVAL;
        for (unsigned long c = a; c <= b; c++)
            CPU_SET(c, set);
    }
    return CPU_COUNT(set) ? 0 : -EINVAL;
}

void vb_format_cpus(const cpu_set_t *set, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && at < len; c++) {
        if (!CPU_ISSET(c, set) || (c > 0 && CPU_ISSET(c - 1, set)))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        int n = e > c ? snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", c, e)
                      : snprintf(buf + at, len - at, "%s%d", at ? "," : "", c);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

/* --pin's two sets as CPU lists ("" when not pinned). */
static void pin_sets(const struct vb_opts *o, char *fe, char *be, size_t len)
{
    fe[0] = be[0] = 0;
    if (!o->pin)
        return;
    vb_format_cpus(&o->frontend_cpus, fe, len);
    vb_format_cpus(&o->backend_cpus, be, len);
}

void vb_report(const struct vb_opts *o, const struct vb_series *s, FILE *to,
               const char *workload)
{
    fprintf(to, "\n%s, bs %u, %u queue(s) x depth %u, %.1f s x %u runs, guest halt-poll %u us",
            workload, o->bs, o->queues, o->depth, o->runtime_s, o->repeat, o->halt_poll_us);
    if (o->dax_window)
        fprintf(to, ", DAX window %" PRIu64 " MiB, policy %s, %s guest%s", o->dax_window >> 20,
                o->dax_policy, o->dax_guest, o->dax_legacy ? ", legacy protocol" : "");
    if (o->create_dir_per_queue)
        fputs(", a directory per queue", to);
    fputc('\n', to);
    char fe[256], be[256];
    pin_sets(o, fe, be, sizeof(fe));
    if (o->pin)
        fprintf(to, "pinned: frontend threads on CPUs %s, backends on CPUs %s (host: both)\n", fe,
                be);
    else
        fputs("not pinned: frontend and backends on any CPU\n", to);
    fprintf(to, "%-12s %5s %5s | %27s | %21s | %21s | %21s | %7s | %9s | %5s | %7s\n",
            "backend", "q", "qd", "IOPS median (min-max)", "MiB/s med (min-max)",
            "p50 us med (min-max)", "p99 us med (min-max)", "ratio", "cpu us/op", "cpu %",
            "rss MiB");
    struct summary first;
    summarise(&s[0], &first);
    for (unsigned b = 0; b < o->nbackends; b++) {
        struct summary m;
        summarise(&s[b], &m);
        double ratio = first.med[F_IOPS] > 0 ? m.med[F_IOPS] / first.med[F_IOPS] : 0;
        char cpu[32] = "-", pct[32] = "-";
        if (m.med[F_CPU_OP] >= 0)
            snprintf(cpu, sizeof(cpu), "%.2f", m.med[F_CPU_OP]);
        if (m.med[F_CPU_PCT] >= 0)
            snprintf(pct, sizeof(pct), "%.0f", m.med[F_CPU_PCT]);
        fprintf(to,
                "%-12s %5u %5u | %9.0f (%7.0f-%7.0f) | %7.1f (%5.0f-%5.0f) |"
                " %7.1f (%5.1f-%5.1f) | %7.1f (%5.1f-%5.1f) | %6.2fx | %9s | %5s | %7.1f\n",
                o->backends[b].name, m.queues, m.depth, m.med[F_IOPS], m.min[F_IOPS],
                m.max[F_IOPS], m.med[F_MIBS], m.min[F_MIBS], m.max[F_MIBS], m.med[F_P50],
                m.min[F_P50], m.max[F_P50], m.med[F_P99], m.min[F_P99], m.max[F_P99], ratio,
                cpu, pct, m.max[F_RSS] / 1024.0);
        if (o->pin && !o->backends[b].host && s[b].nruns)
            fprintf(to, "%-12s its threads were allowed CPUs %s\n", "", s[b].runs[0].backend_cpus);
        if (m.errors)
            fprintf(to, "%-12s %" PRIu64 " requests failed (the first: %s)\n", "", m.errors,
                    g_strerror(-m.first_error));
        double setup = SETUP_US(&s[b]), map = MAP_US(&s[b]);
        if (o->dax_window && setup >= 0)
            fprintf(to, "%-12s map misses: SETUPMAPPING round trip %.1f us avg", "", setup);
        if (o->dax_window && setup >= 0 && map >= 0)
            fprintf(to, "; the backend's map call %.1f us avg, %.1f max",
                    map, (double)max_u64(&s[b], offsetof(struct vb_run, dax_map_max_ns)) / 1000.0);
        if (o->dax_window && setup >= 0)
            fputc('\n', to);
    }
}

static void json_num(FILE *to, const char *key, double v, bool comma)
{
    if (!isfinite(v))
        v = 0;
    fprintf(to, "\"%s\": %.3f%s", key, v, comma ? ", " : "");
}

static void json_str(FILE *to, const char *key, const char *v)
{
    fprintf(to, "\"%s\": \"", key);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(to, "\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            fprintf(to, "\\u%04x", (unsigned char)*p);
        else
            fputc(*p, to);
    }
    fputs("\", ", to);
}

static double mean_u64(const struct vb_series *s, size_t field)
{
    double sum = 0;
    for (unsigned i = 0; i < s->nruns; i++)
        sum += (double)run_u64(s, i, field);
    return s->nruns ? sum / s->nruns : 0;
}

/* The DAX counters reported per run, averaged over the runs. */
static const struct {
    const char *name;
    size_t off;
} dax_means[] = {
    {"dax_setups", offsetof(struct vb_run, dax_setups)},
    {"dax_upgrades", offsetof(struct vb_run, dax_upgrades)},
    {"dax_removes", offsetof(struct vb_run, dax_removes)},
    {"dax_hits", offsetof(struct vb_run, dax_hits)},
    {"dax_plain_ops", offsetof(struct vb_run, dax_plain)},
    {"dax_reclaims_inline", offsetof(struct vb_run, dax_inline)},
    {"dax_reclaims_worker", offsetof(struct vb_run, dax_bg)},
    {"dax_waits", offsetof(struct vb_run, dax_waits)},
};

void vb_report_json_objects(const struct vb_opts *o, const struct vb_series *s, FILE *to,
                            const char *workload, bool *first)
{
    struct summary first_be;
    summarise(&s[0], &first_be);
    for (unsigned b = 0; b < o->nbackends; b++) {
        struct summary m;
        summarise(&s[b], &m);
        double ratio = first_be.med[F_IOPS] > 0 ? m.med[F_IOPS] / first_be.med[F_IOPS] : 0;
        fputs(*first ? "  {" : ",\n  {", to);
        *first = false;
        json_str(to, "backend", o->backends[b].name);
        json_str(to, "workload", workload);
        fprintf(to, "\"bs\": %u, \"queues\": %u, \"depth\": %u, \"halt_poll_us\": %u, ", o->bs,
                m.queues, m.depth, o->halt_poll_us);
        json_num(to, "iops", m.med[F_IOPS], true);
        json_num(to, "mib_s", m.med[F_MIBS], true);
        json_num(to, "p50_us", m.med[F_P50], true);
        json_num(to, "p99_us", m.med[F_P99], true);
        json_num(to, "ratio", ratio, true);
        json_num(to, "iops_min", m.min[F_IOPS], true);
        json_num(to, "iops_max", m.max[F_IOPS], true);
        json_num(to, "mib_s_min", m.min[F_MIBS], true);
        json_num(to, "mib_s_max", m.max[F_MIBS], true);
        json_num(to, "p50_us_min", m.min[F_P50], true);
        json_num(to, "p50_us_max", m.max[F_P50], true);
        json_num(to, "p99_us_min", m.min[F_P99], true);
        json_num(to, "p99_us_max", m.max[F_P99], true);
        json_num(to, "cpu_s", m.med[F_CPU], true);
        json_num(to, "cpu_us_per_op", m.med[F_CPU_OP], true);
        json_num(to, "cpu_pct", m.med[F_CPU_PCT], true);
        json_num(to, "rss_kib_max", m.max[F_RSS], true);
        fprintf(to, "\"queues_requested\": %u, \"depth_requested\": %u, ", o->queues, o->depth);
        char fe[256], be[256];
        pin_sets(o, fe, be, sizeof(fe));
        json_str(to, "frontend_cpus", fe);
        json_str(to, "backend_cpus", be);
        json_str(to, "backend_cpus_seen",
                 !o->backends[b].host && s[b].nruns ? s[b].runs[0].backend_cpus : "");
        json_str(to, "create_dirs", o->create_dir_per_queue ? "per-queue" : "shared");
        fprintf(to, "\"errors\": %" PRIu64 ", \"first_errno\": %d, \"runtime_s\": %.3f, "
                "\"runs\": %u, ", m.errors, -m.first_error, o->runtime_s, s[b].nruns);
        if (o->dax_window) {
            fprintf(to, "\"dax_window\": %" PRIu64 ", ", o->dax_window);
            json_str(to, "dax_policy", o->dax_policy);
            json_str(to, "dax_guest", o->dax_guest);
            json_str(to, "dax_protocol", o->dax_legacy ? "legacy" : "shmem");
            if (!o->backends[b].host && s[b].nruns) {
                fprintf(to, "\"dax_window_offered\": %" PRIu64 ", \"dax_files\": %u, ",
                        s[b].runs[0].dax_offered, s[b].runs[0].dax_files);
                /* Per run, averaged over the runs. */
                for (size_t k = 0; k < G_N_ELEMENTS(dax_means); k++)
                    json_num(to, dax_means[k].name, mean_u64(&s[b], dax_means[k].off), true);
                /* The map miss path, pooled over the runs (-1: not measured). */
                json_num(to, "dax_setup_rtt_us", SETUP_US(&s[b]), true);
                json_num(to, "dax_map_us", MAP_US(&s[b]), true);
                json_num(to, "dax_map_max_us",
                         (double)max_u64(&s[b], offsetof(struct vb_run, dax_map_max_ns)) / 1000.0,
                         true);
            }
        }
        fputs("\"iops_runs\": [", to);
        for (unsigned i = 0; i < s[b].nruns; i++)
            fprintf(to, "%s%.1f", i ? ", " : "", s[b].runs[i].iops);
        fputs("]}", to);
    }
}
