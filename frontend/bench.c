/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A pipelined request loop for benchmarks: one thread per request queue keeps
 * `depth` requests in flight, resubmitting each as it completes, and records
 * every request's latency in a fixed log-linear histogram. Everything (ops,
 * arguments, guest buffers, histograms) is set up before the clock starts;
 * the loop itself allocates nothing.
 *
 * Histogram: values below 2^VFE_HIST_SUB_BITS ns are exact; above, each power
 * of two is cut into 2^VFE_HIST_SUB_BITS buckets (relative error < 1/16).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "vfe.h"
#include "vfe_i.h"

#define VFE_HIST_SUB_BITS 4u
#define VFE_HIST_SUB (1u << VFE_HIST_SUB_BITS)
/* No completion on a queue for this long: the backend is stuck. */
#define VFE_BENCH_STALL_NS (30ull * 1000000000ull)

_Static_assert(VFE_HIST_BUCKETS == (64u - VFE_HIST_SUB_BITS + 1u) * VFE_HIST_SUB,
               "one row of buckets per power of two above the exact range");

unsigned vfe_hist_bucket(uint64_t v)
{
    if (v < VFE_HIST_SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - VFE_HIST_SUB_BITS;
    unsigned sub = (unsigned)(v >> shift) & (VFE_HIST_SUB - 1);
    return (shift + 1) * VFE_HIST_SUB + sub;
}

uint64_t vfe_hist_bucket_low(unsigned b)
{
    if (b < VFE_HIST_SUB)
        return b;
    unsigned shift = b / VFE_HIST_SUB - 1;
    uint64_t sub = b % VFE_HIST_SUB;
    return (VFE_HIST_SUB + sub) << shift;
}

void vfe_hist_add(struct vfe_hist *h, uint64_t v)
{
    unsigned b = vfe_hist_bucket(v);
    if (b >= VFE_HIST_BUCKETS)
        b = VFE_HIST_BUCKETS - 1;
    h->count[b]++;
    h->total++;
    h->sum += v;
    if (h->total == 1 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void vfe_hist_merge(struct vfe_hist *dst, const struct vfe_hist *src)
{
    if (!src->total)
        return;
    for (unsigned i = 0; i < VFE_HIST_BUCKETS; i++)
        dst->count[i] += src->count[i];
    if (!dst->total || src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
    dst->total += src->total;
    dst->sum += src->sum;
}

uint64_t vfe_hist_percentile(const struct vfe_hist *h, double pct)
{
    if (!h->total)
        return 0;
    uint64_t rank = (uint64_t)(pct / 100.0 * (double)h->total + 0.5);
    if (rank < 1)
        rank = 1;
    if (rank > h->total)
        rank = h->total;
    uint64_t seen = 0;
    for (unsigned i = 0; i < VFE_HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen >= rank) {
            uint64_t v = vfe_hist_bucket_low(i);
            /* Clamp into the observed range (the extremes are exact). */
            if (v < h->min)
                v = h->min;
            if (v > h->max)
                v = h->max;
            return v;
        }
    }
    return h->max;
}

/* ---- The loop ------------------------------------------------------------------ */

/*
 * A slot is one request in flight. Its life:
 *
 *   IDLE --submit--> BUSY --reap--> (accounted) --> IDLE or, after a successful
 *   CREATE, RELEASING --reap--> FORGETTING --reap--> IDLE, or with unlink
 *   RELEASING --reap--> UNLINKING --reap--> (accounted) --> FORGETTING
 *
 * (a guest unlinks a name whose inode it still knows, and forgets the inode
 * after: the legacy virtiofsd answers EIO to an UNLINK of a forgotten inode),
 * RELEASE and FORGET (nlookup 1, on the same request queue: no reply, but the
 * backend returns the buffers) keep the backend's open files and known inodes
 * bounded, as a guest evicting the new inode would; they are not ops of the
 * benchmark (neither counted nor timed). An UNLINK is: the workload is then
 * creates and unlinks, a file's life as a guest's make-and-remove sees it.
 */
struct bench_slot {
    struct vfe_fuse_op op;
    union {
        struct fuse_read_in rd;
        struct fuse_write_in wr;
        struct fuse_getattr_in ga;
        struct fuse_create_in cr;
        struct fuse_release_in rl;
        struct fuse_forget_in fg;
    } in;
    union {
        struct fuse_write_out wr;
        struct fuse_attr_out ga;
        struct fuse_entry_out en;
        struct {
            struct fuse_entry_out e;
            struct fuse_open_out o;
        } cr;
    } out;
    struct vfe_sg sg;
    enum bench_phase { SLOT_OP, SLOT_RELEASING, SLOT_FORGETTING, SLOT_UNLINKING } phase;
    char name[64];
};

struct bench_worker {
    struct vfe_fuse *f;
    const struct vfe_bench_config *cfg;
    unsigned queue;
    struct bench_slot *slots;
    struct vfe_fuse_op **done;
    struct vfe_hist hist;
    uint64_t ops, bytes, errors;
    int32_t first_error;
    uint64_t quota;      /* ops this worker may start; UINT64_MAX: until the deadline */
    uint64_t started;
    unsigned in_flight;  /* slots BUSY or RELEASING */
    uint64_t rng;
    uint64_t seq_off;
    unsigned seq_name;
    int err;             /* a transport failure ends the worker */
    pthread_t thread;
};

static uint64_t next_rand(uint64_t *s)
{
    /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static uint64_t next_offset(struct bench_worker *w)
{
    const struct vfe_bench_config *c = w->cfg;
    uint64_t blocks = c->file_size / c->block;
    if (blocks == 0)
        return 0;
    if (c->random)
        return (next_rand(&w->rng) % blocks) * c->block;
    uint64_t off = w->seq_off;
    w->seq_off = (w->seq_off + c->block) % (blocks * c->block);
    return off;
}

/* The file of the next request: (node id, fh). */
static void next_file(struct bench_worker *w, uint64_t *nodeid, uint64_t *fh)
{
    const struct vfe_bench_config *c = w->cfg;
    if (!c->nfiles) {
        *nodeid = c->nodeid;
        *fh = c->fh;
        return;
    }
    unsigned i = c->random ? (unsigned)(next_rand(&w->rng) % c->nfiles)
                           : (w->queue - 1) % c->nfiles;
    *nodeid = c->nodeids[i];
    *fh = c->fhs ? c->fhs[i] : 0;
}

/* The directory a worker's CREATEs (and their UNLINKs) go to. */
static uint64_t create_parent(const struct bench_worker *w)
{
    return w->cfg->parents ? w->cfg->parents[w->queue - 1] : w->cfg->parent;
}

/* Fills a slot's op for the next request. */
static void prepare(struct bench_worker *w, struct bench_slot *s)
{
    const struct vfe_bench_config *c = w->cfg;
    struct vfe_fuse_op *op = &s->op;
    unsigned flags = c->indirect ? VFE_OP_INDIRECT : 0;
    uint64_t nodeid, fh;
    enum vfe_bench_op kind = c->op;
    if (kind == VFE_BENCH_RW)
        kind = next_rand(&w->rng) % 100 < c->read_pct ? VFE_BENCH_READ : VFE_BENCH_WRITE;
    s->phase = SLOT_OP;
    switch (kind) {
    case VFE_BENCH_READ:
        next_file(w, &nodeid, &fh);
        s->in.rd = (struct fuse_read_in){ .fh = fh, .offset = next_offset(w), .size = c->block };
        *op = (struct vfe_fuse_op){ .opcode = FUSE_READ, .nodeid = nodeid, .arg = &s->in.rd,
                                    .arg_len = sizeof(s->in.rd), .out_data = &s->sg,
                                    .out_data_cnt = 1, .flags = flags, .user = s };
        break;
    case VFE_BENCH_WRITE:
        next_file(w, &nodeid, &fh);
        s->in.wr = (struct fuse_write_in){ .fh = fh, .offset = next_offset(w), .size = c->block };
        *op = (struct vfe_fuse_op){ .opcode = FUSE_WRITE, .nodeid = nodeid, .arg = &s->in.wr,
                                    .arg_len = sizeof(s->in.wr), .in_data = &s->sg,
                                    .in_data_cnt = 1, .out_arg = &s->out.wr,
                                    .out_arg_len = sizeof(s->out.wr), .flags = flags, .user = s };
        break;
    case VFE_BENCH_GETATTR:
        next_file(w, &nodeid, &fh);
        s->in.ga = (struct fuse_getattr_in){ 0 };
        *op = (struct vfe_fuse_op){ .opcode = FUSE_GETATTR, .nodeid = nodeid, .arg = &s->in.ga,
                                    .arg_len = sizeof(s->in.ga), .out_arg = &s->out.ga,
                                    .out_arg_len = sizeof(s->out.ga), .flags = flags, .user = s };
        break;
    case VFE_BENCH_LOOKUP: {
        unsigned i = c->random ? (unsigned)(next_rand(&w->rng) % c->nnames)
                               : w->seq_name++ % c->nnames;
        *op = (struct vfe_fuse_op){ .opcode = FUSE_LOOKUP, .nodeid = c->parent,
                                    .name = c->names[i], .out_arg = &s->out.en,
                                    .out_arg_len = sizeof(s->out.en), .flags = flags, .user = s };
        break;
    }
    case VFE_BENCH_CREATE:
        snprintf(s->name, sizeof(s->name), "%sq%u-%u", c->name_prefix ? c->name_prefix : "",
                 w->queue, w->seq_name++);
        s->in.cr = (struct fuse_create_in){ .flags = O_CREAT | O_EXCL | O_WRONLY, .mode = 0644,
                                            .umask = 022 };
        *op = (struct vfe_fuse_op){ .opcode = FUSE_CREATE, .nodeid = create_parent(w),
                                    .arg = &s->in.cr,
                                    .arg_len = sizeof(s->in.cr), .name = s->name,
                                    .out_arg = &s->out.cr, .out_arg_len = sizeof(s->out.cr),
                                    .flags = flags, .user = s };
        break;
    case VFE_BENCH_RW:
        break; /* resolved above */
    }
}

/* Accounts a completed op; true when its slot must now send a RELEASE. */
static bool account(struct bench_worker *w, const struct vfe_fuse_op *op)
{
    w->ops++;
    vfe_hist_add(&w->hist, op->t_done_ns - op->t_submit_ns);
    if (op->error) {
        if (!w->errors)
            w->first_error = op->error;
        w->errors++;
        return false;
    }
    if (op->opcode == FUSE_READ)
        w->bytes += op->data_len;
    else if (op->opcode == FUSE_WRITE)
        w->bytes += ((const struct bench_slot *)op->user)->out.wr.size;
    else if (op->opcode == FUSE_CREATE)
        return op->out_arg_got == sizeof(((struct bench_slot *)0)->out.cr);
    return false;
}

static int submit_one(struct bench_worker *w, struct bench_slot *s)
{
    prepare(w, s);
    int r = vfe_fuse_submit(w->f, w->queue, &s->op);
    if (r == 0) {
        w->started++;
        w->in_flight++;
    }
    return r;
}

/* Submits the request a slot's CREATE leads to, s->op filled but for its flags'
 * indirect bit and user: the next phase of the slot's life. */
static int submit_phase(struct bench_worker *w, struct bench_slot *s, enum bench_phase phase)
{
    if (w->cfg->indirect)
        s->op.flags |= VFE_OP_INDIRECT;
    s->op.user = s;
    s->phase = phase;
    int r = vfe_fuse_submit(w->f, w->queue, &s->op);
    if (r == 0)
        w->in_flight++;
    return r;
}

/* Closes what a CREATE opened, in the same slot. */
static int submit_release(struct bench_worker *w, struct bench_slot *s)
{
    s->in.rl = (struct fuse_release_in){ .fh = s->out.cr.o.fh, .flags = O_WRONLY };
    s->op = (struct vfe_fuse_op){ .opcode = FUSE_RELEASE, .nodeid = s->out.cr.e.nodeid,
                                  .arg = &s->in.rl, .arg_len = sizeof(s->in.rl) };
    return submit_phase(w, s, SLOT_RELEASING);
}

/* Drops the lookup a CREATE made, after its RELEASE. */
static int submit_forget(struct bench_worker *w, struct bench_slot *s)
{
    s->in.fg = (struct fuse_forget_in){ .nlookup = 1 };
    s->op = (struct vfe_fuse_op){ .opcode = FUSE_FORGET, .nodeid = s->out.cr.e.nodeid,
                                  .arg = &s->in.fg, .arg_len = sizeof(s->in.fg),
                                  .flags = VFE_OP_NO_REPLY };
    return submit_phase(w, s, SLOT_FORGETTING);
}

/* Removes the file a CREATE made, after its RELEASE: an op of the benchmark. */
static int submit_unlink(struct bench_worker *w, struct bench_slot *s)
{
    s->op = (struct vfe_fuse_op){ .opcode = FUSE_UNLINK, .nodeid = create_parent(w),
                                  .name = s->name };
    return submit_phase(w, s, SLOT_UNLINKING);
}

static void *worker_main(void *arg)
{
    struct bench_worker *w = arg;
    const struct vfe_bench_config *c = w->cfg;
    uint64_t deadline = c->duration_ns ? vufs_now_ns() + c->duration_ns : UINT64_MAX;
    for (unsigned i = 0; i < c->depth && w->started < w->quota; i++) {
        int r = submit_one(w, &w->slots[i]);
        if (r < 0) {
            w->err = r;
            break;
        }
    }
    vfe_fuse_kick(w->f, w->queue);
    uint64_t last_progress = vufs_now_ns();
    while (!w->err && w->in_flight > 0) {
        int n = vfe_fuse_reap(w->f, w->queue, w->done, c->depth, 1000);
        if (n == -ETIMEDOUT)
            n = 0;
        if (n < 0) {
            w->err = n;
            break;
        }
        bool more = w->started < w->quota && vufs_now_ns() < deadline;
        bool submitted = false;
        for (int i = 0; i < n && !w->err; i++) {
            struct bench_slot *s = w->done[i]->user;
            w->in_flight--;
            int r = 0;
            if (s->phase == SLOT_RELEASING && c->unlink) {
                r = submit_unlink(w, s);
                submitted = true;
                if (r < 0)
                    w->err = r;
                continue;
            } else if (s->phase == SLOT_RELEASING || s->phase == SLOT_UNLINKING) {
                if (s->phase == SLOT_UNLINKING)
                    (void)account(w, w->done[i]);
                r = submit_forget(w, s);
                submitted = true;
                if (r < 0)
                    w->err = r;
                continue;
            } else if (s->phase == SLOT_FORGETTING) {
                s->phase = SLOT_OP;
            } else if (account(w, w->done[i])) {
                r = submit_release(w, s);
                submitted = true;
                if (r < 0)
                    w->err = r;
                continue;
            }
            if (more && w->started < w->quota) {
                r = submit_one(w, s);
                submitted = true;
                if (r < 0)
                    w->err = r;
            }
        }
        if (submitted)
            vfe_fuse_kick(w->f, w->queue);
        if (n > 0)
            last_progress = vufs_now_ns();
        else if (!w->err && vufs_now_ns() - last_progress > VFE_BENCH_STALL_NS)
            w->err = -ETIMEDOUT; /* the backend stopped answering */
    }
    return NULL;
}

static void free_workers(struct vfe_mem *mem, struct bench_worker *ws, unsigned n, unsigned depth)
{
    for (unsigned q = 0; q < n; q++) {
        for (unsigned i = 0; ws[q].slots && i < depth; i++)
            if (ws[q].slots[i].sg.len)
                vfe_mem_free_block(mem, ws[q].slots[i].sg.gpa);
        g_free(ws[q].slots);
        g_free(ws[q].done);
    }
    g_free(ws);
}

int vfe_bench_run(struct vfe_fuse *f, struct vfe_dev *d, const struct vfe_bench_config *cfg,
                  struct vfe_bench_result *res)
{
    unsigned nq = cfg->queues;
    if (!nq || nq >= vfe_dev_nqueues(d) || !cfg->depth || cfg->depth > 1024)
        return -EINVAL;
    bool data = cfg->op == VFE_BENCH_READ || cfg->op == VFE_BENCH_WRITE || cfg->op == VFE_BENCH_RW;
    if (data && (cfg->block == 0 || cfg->block > (16u << 20)))
        return -EINVAL;
    if (cfg->op == VFE_BENCH_RW && cfg->read_pct > 100)
        return -EINVAL;
    if (cfg->op == VFE_BENCH_LOOKUP && (!cfg->names || !cfg->nnames))
        return -EINVAL;
    if (cfg->nfiles && !cfg->nodeids)
        return -EINVAL;
    if (!cfg->duration_ns && !cfg->max_ops)
        return -EINVAL;
    /* Every request must find its slot and its descriptors (up to 2 direct). */
    if (cfg->depth > vfe_fuse_depth(f))
        return -EINVAL;
    for (unsigned q = 1; q <= nq; q++)
        if ((cfg->indirect ? 1u : 2u) * cfg->depth > vfe_vq_size(vfe_dev_vq(d, q)))
            return -EINVAL;
    struct vfe_mem *mem = vfe_dev_mem(d);
    struct bench_worker *ws = g_new0(struct bench_worker, nq);
    int r = 0;
    for (unsigned q = 0; q < nq && r == 0; q++) {
        struct bench_worker *w = &ws[q];
        w->f = f;
        w->cfg = cfg;
        w->queue = 1 + q;
        w->rng = 0x9E3779B97F4A7C15ull * (q + 1);
        w->seq_off = cfg->file_size && cfg->block
                         ? (cfg->file_size / cfg->block / nq) * q * cfg->block : 0;
        w->quota = cfg->max_ops ? cfg->max_ops / nq + (q < cfg->max_ops % nq) : UINT64_MAX;
        w->slots = g_new0(struct bench_slot, cfg->depth);
        w->done = g_new0(struct vfe_fuse_op *, cfg->depth);
        for (unsigned i = 0; i < cfg->depth && r == 0 && data; i++) {
            r = vfe_mem_alloc(mem, cfg->block, 4096, &w->slots[i].sg.gpa);
            if (r == 0) {
                w->slots[i].sg.len = cfg->block;
                vfe_mem_fill(mem, w->slots[i].sg.gpa, 'a' + (int)(i % 26), cfg->block);
            }
        }
    }
    if (r < 0) {
        free_workers(mem, ws, nq, cfg->depth);
        return r;
    }
    uint64_t t0 = vufs_now_ns();
    unsigned started = 0;
    for (; started < nq; started++) {
        r = -pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]);
        if (r < 0)
            break;
    }
    for (unsigned q = 0; q < started; q++)
        pthread_join(ws[q].thread, NULL);
    uint64_t t1 = vufs_now_ns();
    /* A failed worker may leave requests in flight that point at its slots. */
    for (unsigned q = 0; q < nq; q++)
        if (ws[q].err || q >= started)
            vfe_fuse_abandon_all(f, ws[q].queue);

    memset(res, 0, sizeof(*res));
    res->elapsed_ns = t1 - t0;
    for (unsigned q = 0; q < started; q++) {
        res->ops += ws[q].ops;
        res->bytes += ws[q].bytes;
        if (!res->errors && ws[q].errors)
            res->first_error = ws[q].first_error;
        res->errors += ws[q].errors;
        vfe_hist_merge(&res->latency, &ws[q].hist);
        if (ws[q].err && r == 0)
            r = ws[q].err;
    }
    free_workers(mem, ws, nq, cfg->depth);
    return r;
}
