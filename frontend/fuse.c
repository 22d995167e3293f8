/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A FUSE client over the device's queues, shaped like the Linux virtio-fs
 * driver: each request is one device-readable run [in header | args] plus
 * optional payload runs, and one device-writable run [out header | reply args]
 * plus optional payload runs.
 *
 * Every queue has `depth` slots, each with its request and reply buffers in
 * guest memory allocated once: submitting and reaping allocate nothing, so a
 * benchmark can pipeline requests cheaply (vfe_fuse_submit / vfe_fuse_reap).
 *
 * Slot state:  FREE --submit--> IN_FLIGHT --used--> READY --reap/call--> FREE
 * (op->done is set on READY). Completions a synchronous call sees for other ops
 * wait in the queue's ready list until vfe_fuse_reap returns them.
 * Threads: one thread per queue at a time; the helpers (and their bounce
 * buffer) one thread at a time per vfe_fuse.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "vfe.h"
#include "vfe_i.h"

#define VFE_FUSE_IN_BUF 8192u
#define VFE_FUSE_OUT_BUF 4096u
#define VFE_FUSE_MAX_SG 64u
#define VFE_FUSE_BOUNCE (1u << 20)
#define VFE_FUSE_DIRBUF (64u << 10)

struct vfe_fuse_slot {
    uint64_t in_gpa;
    uint8_t *in_hva;
    uint64_t out_gpa;
    uint8_t *out_hva;
    struct vfe_fuse_op *op; /* NULL when free */
    /* A synchronous call that timed out leaves its request here: the late
     * reply lands in orphan (never in the caller's dead stack frame) and the
     * slot is freed without being reported. */
    struct vfe_fuse_op orphan;
    bool abandoned;
};

struct vfe_fuse_queue {
    struct vfe_vq *vq;
    struct vfe_fuse_slot *slots;
    unsigned depth;
    unsigned *free_stack;
    unsigned nfree;
    unsigned *ready; /* slots completed, not yet handed back (still busy) */
    unsigned nready;
};

struct vfe_fuse {
    struct vfe_mem *mem;
    struct vfe_fuse_config cfg;
    unsigned nq;
    struct vfe_fuse_queue *q;
    unsigned defq;
    uint64_t unique; /* atomic */
    uint64_t bounce_gpa;
    bool bounce_allocated;
    uint32_t max_write;
};

static int alloc_buf(struct vfe_mem *mem, uint64_t size, uint64_t *gpa, uint8_t **hva)
{
    int r = vfe_mem_alloc(mem, size, 64, gpa);
    if (r < 0)
        return r;
    *hva = vfe_mem_gpa_to_hva(mem, *gpa, size);
    return 0;
}

int vfe_fuse_new(struct vfe_dev *d, const struct vfe_fuse_config *cfg, struct vfe_fuse **out)
{
    unsigned nq = vfe_dev_nqueues(d);
    g_autofree struct vfe_vq **vqs = g_new0(struct vfe_vq *, nq ? nq : 1);
    for (unsigned i = 0; i < nq; i++)
        vqs[i] = vfe_dev_vq(d, i);
    return vfe_fuse_new_on(vfe_dev_mem(d), vqs, nq, cfg, out);
}

int vfe_fuse_new_on(struct vfe_mem *mem, struct vfe_vq *const *vqs, unsigned nq,
                    const struct vfe_fuse_config *cfg, struct vfe_fuse **out)
{
    if (nq == 0)
        return -EINVAL;
    struct vfe_fuse *f = g_new0(struct vfe_fuse, 1);
    f->mem = mem;
    if (cfg)
        f->cfg = *cfg;
    if (!f->cfg.depth)
        f->cfg.depth = 16;
    if (!f->cfg.proto_minor)
        f->cfg.proto_minor = 41;
    if (!f->cfg.max_readahead)
        f->cfg.max_readahead = 128u << 10;
    if (!f->cfg.timeout_ms)
        f->cfg.timeout_ms = VFE_DEFAULT_TIMEOUT_MS;
    f->nq = nq;
    f->defq = f->nq > 1 ? 1 : 0;
    f->max_write = 128u << 10;
    f->q = g_new0(struct vfe_fuse_queue, f->nq);
    int r = 0;
    for (unsigned i = 0; i < f->nq && r == 0; i++) {
        struct vfe_fuse_queue *q = &f->q[i];
        q->vq = vqs[i];
        if (!q->vq) {
            r = -EINVAL;
            break;
        }
        q->depth = f->cfg.depth;
        q->slots = g_new0(struct vfe_fuse_slot, q->depth);
        q->free_stack = g_new(unsigned, q->depth);
        q->ready = g_new(unsigned, q->depth);
        for (unsigned s = 0; s < q->depth && r == 0; s++) {
            r = alloc_buf(f->mem, VFE_FUSE_IN_BUF, &q->slots[s].in_gpa, &q->slots[s].in_hva);
            if (r == 0)
                r = alloc_buf(f->mem, VFE_FUSE_OUT_BUF, &q->slots[s].out_gpa,
                              &q->slots[s].out_hva);
            q->free_stack[q->nfree++] = q->depth - 1 - s;
        }
    }
    uint8_t *unused;
    if (r == 0) {
        r = alloc_buf(f->mem, VFE_FUSE_BOUNCE, &f->bounce_gpa, &unused);
        f->bounce_allocated = r == 0;
    }
    if (r < 0) {
        vfe_fuse_free(f);
        return r;
    }
    *out = f;
    return 0;
}

void vfe_fuse_free(struct vfe_fuse *f)
{
    if (!f)
        return;
    for (unsigned i = 0; i < f->nq; i++) {
        struct vfe_fuse_queue *q = &f->q[i];
        for (unsigned s = 0; q->slots && s < q->depth; s++) {
            if (q->slots[s].in_hva)
                vfe_mem_free_block(f->mem, q->slots[s].in_gpa);
            if (q->slots[s].out_hva)
                vfe_mem_free_block(f->mem, q->slots[s].out_gpa);
        }
        g_free(q->slots);
        g_free(q->free_stack);
        g_free(q->ready);
    }
    if (f->bounce_allocated)
        vfe_mem_free_block(f->mem, f->bounce_gpa);
    g_free(f->q);
    g_free(f);
}

static size_t name_len(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

void vfe_fuse_set_ids(struct vfe_fuse *f, uint32_t uid, uint32_t gid)
{
    f->cfg.uid = uid;
    f->cfg.gid = gid;
}

int vfe_fuse_submit(struct vfe_fuse *f, unsigned qi, struct vfe_fuse_op *op)
{
    if (qi >= f->nq)
        return -EINVAL;
    struct vfe_fuse_queue *q = &f->q[qi];
    bool no_reply = op->flags & VFE_OP_NO_REPLY;
    size_t n1 = name_len(op->name), n2 = name_len(op->name2);
    size_t in_len = sizeof(struct fuse_in_header) + op->arg_len + n1 + n2 + op->extra_len;
    if (in_len > VFE_FUSE_IN_BUF || sizeof(struct fuse_out_header) + op->out_arg_len >
                                        VFE_FUSE_OUT_BUF)
        return -E2BIG;
    if (1 + op->in_data_cnt > VFE_FUSE_MAX_SG || 1 + op->out_data_cnt > VFE_FUSE_MAX_SG)
        return -E2BIG;
    uint64_t total = in_len;
    for (unsigned i = 0; i < op->in_data_cnt; i++)
        total += op->in_data[i].len;
    if (total > UINT32_MAX)
        return -E2BIG;
    if (q->nfree == 0)
        return -EAGAIN;

    unsigned si = q->free_stack[q->nfree - 1];
    struct vfe_fuse_slot *s = &q->slots[si];
    op->unique = __atomic_add_fetch(&f->unique, 2, __ATOMIC_RELAXED);
    struct fuse_in_header h = {
        .len = (uint32_t)total,
        .opcode = op->opcode,
        .unique = op->unique,
        .nodeid = op->nodeid,
        .uid = f->cfg.uid,
        .gid = f->cfg.gid,
        .pid = f->cfg.pid,
        .total_extlen = op->total_extlen,
    };
    uint8_t *p = s->in_hva;
    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    if (op->arg_len)
        memcpy(p, op->arg, op->arg_len);
    p += op->arg_len;
    if (n1)
        memcpy(p, op->name, n1);
    p += n1;
    if (n2)
        memcpy(p, op->name2, n2);
    p += n2;
    if (op->extra_len)
        memcpy(p, op->extra, op->extra_len);

    struct vfe_sg out[VFE_FUSE_MAX_SG], in[VFE_FUSE_MAX_SG];
    unsigned nout = 0, nin = 0;
    out[nout++] = (struct vfe_sg){ s->in_gpa, (uint32_t)in_len };
    for (unsigned i = 0; i < op->in_data_cnt; i++)
        out[nout++] = op->in_data[i];
    if (!no_reply) {
        in[nin++] = (struct vfe_sg){
            s->out_gpa, (uint32_t)(sizeof(struct fuse_out_header) + op->out_arg_len) };
        for (unsigned i = 0; i < op->out_data_cnt; i++)
            in[nin++] = op->out_data[i];
    }
    memset(s->out_hva, 0, sizeof(struct fuse_out_header));
    op->done = false;
    op->error = 0;
    op->reply_len = op->out_arg_got = op->data_len = 0;
    op->t_submit_ns = vufs_now_ns();
    int r = vfe_vq_add(q->vq, out, nout, in, nin, op->flags & VFE_OP_INDIRECT, s);
    if (r < 0)
        return r == -ENOSPC ? -EAGAIN : r;
    s->op = op;
    q->nfree--;
    return 0;
}

void vfe_fuse_kick(struct vfe_fuse *f, unsigned qi)
{
    if (qi < f->nq)
        vfe_vq_kick(f->q[qi].vq, false);
}

unsigned vfe_fuse_depth(const struct vfe_fuse *f)
{
    return f->cfg.depth;
}

unsigned vfe_fuse_in_flight(const struct vfe_fuse *f, unsigned qi)
{
    if (qi >= f->nq)
        return 0;
    return f->q[qi].depth - f->q[qi].nfree - f->q[qi].nready;
}

/* Fills op from the reply in its slot. */
static void parse_reply(struct vfe_fuse_slot *s, struct vfe_fuse_op *op, uint32_t len)
{
    op->reply_len = len;
    op->t_done_ns = vufs_now_ns();
    op->done = true;
    if (op->flags & VFE_OP_NO_REPLY) {
        op->error = len == 0 ? 0 : -EPROTO;
        return;
    }
    struct fuse_out_header oh;
    memcpy(&oh, s->out_hva, sizeof(oh));
    if (len < sizeof(oh) || oh.len != len || oh.unique != op->unique || oh.error > 0 ||
        oh.error < -4095) {
        op->error = -EPROTO;
        return;
    }
    op->error = oh.error;
    uint32_t body = len - (uint32_t)sizeof(oh);
    if (oh.error != 0) {
        if (body)
            op->error = -EPROTO;
        return;
    }
    uint32_t a = body < op->out_arg_len ? body : op->out_arg_len;
    if (a)
        memcpy(op->out_arg, s->out_hva + sizeof(oh), a);
    op->out_arg_got = a;
    op->data_len = body - a;
}

/* Takes every completion off the used ring into the ready list. */
static int drain_used(struct vfe_fuse_queue *q)
{
    for (;;) {
        void *tok;
        uint32_t len;
        int r = vfe_vq_get_used(q->vq, &tok, &len);
        if (r == -EAGAIN)
            return 0;
        if (r < 0)
            return r;
        struct vfe_fuse_slot *s = tok;
        struct vfe_fuse_op *op = s->op;
        parse_reply(s, op, len);
        if (s->abandoned) {
            s->abandoned = false;
            s->op = NULL;
            q->free_stack[q->nfree++] = (unsigned)(s - q->slots);
            continue;
        }
        q->ready[q->nready++] = (unsigned)(s - q->slots);
    }
}

int vfe_fuse_reap(struct vfe_fuse *f, unsigned qi, struct vfe_fuse_op **done, unsigned max,
                  int timeout_ms)
{
    if (qi >= f->nq)
        return -EINVAL;
    struct vfe_fuse_queue *q = &f->q[qi];
    int r = drain_used(q);
    if (r < 0)
        return r;
    if (q->nready == 0 && timeout_ms != 0) {
        r = vfe_vq_wait(q->vq, timeout_ms);
        if (r < 0)
            return r;
        r = drain_used(q);
        if (r < 0)
            return r;
    }
    unsigned n = q->nready < max ? q->nready : max;
    for (unsigned i = 0; i < n; i++) {
        struct vfe_fuse_slot *s = &q->slots[q->ready[i]];
        done[i] = s->op;
        s->op = NULL;
        q->free_stack[q->nfree++] = q->ready[i];
    }
    memmove(q->ready, q->ready + n, (q->nready - n) * sizeof(q->ready[0]));
    q->nready -= n;
    return (int)n;
}

/* The caller gives up on op (still in flight): see struct vfe_fuse_slot. */
static void abandon(struct vfe_fuse_queue *q, struct vfe_fuse_op *op)
{
    for (unsigned i = 0; i < q->depth; i++) {
        struct vfe_fuse_slot *s = &q->slots[i];
        if (s->op == op) {
            s->orphan = (struct vfe_fuse_op){
                .opcode = op->opcode, .unique = op->unique, .flags = op->flags };
            s->op = &s->orphan;
            s->abandoned = true;
            return;
        }
    }
}

void vfe_fuse_abandon_all(struct vfe_fuse *f, unsigned qi)
{
    if (qi >= f->nq)
        return;
    struct vfe_fuse_queue *q = &f->q[qi];
    /* Completed but unreported: just free. */
    for (unsigned i = 0; i < q->nready; i++) {
        q->slots[q->ready[i]].op = NULL;
        q->free_stack[q->nfree++] = q->ready[i];
    }
    q->nready = 0;
    for (unsigned i = 0; i < q->depth; i++)
        if (q->slots[i].op && !q->slots[i].abandoned)
            abandon(q, q->slots[i].op);
}

int vfe_fuse_call(struct vfe_fuse *f, unsigned qi, struct vfe_fuse_op *op)
{
    int r = vfe_fuse_submit(f, qi, op);
    if (r < 0)
        return r;
    struct vfe_fuse_queue *q = &f->q[qi];
    vfe_vq_kick(q->vq, false);
    uint64_t deadline = vufs_now_ns() + (uint64_t)f->cfg.timeout_ms * 1000000ull;
    while (!op->done) {
        r = drain_used(q);
        if (r < 0) {
            abandon(q, op);
            return r;
        }
        if (op->done)
            break;
        uint64_t now = vufs_now_ns();
        if (now >= deadline) {
            abandon(q, op);
            return -ETIMEDOUT;
        }
        r = vfe_vq_wait(q->vq, (int)((deadline - now) / 1000000ull) + 1);
        if (r < 0 && r != -ETIMEDOUT) {
            abandon(q, op);
            return r;
        }
    }
    /* Our op stays out of the ready list: the caller has it. */
    for (unsigned i = 0; i < q->nready; i++) {
        if (q->slots[q->ready[i]].op == op) {
            q->slots[q->ready[i]].op = NULL;
            q->free_stack[q->nfree++] = q->ready[i];
            memmove(&q->ready[i], &q->ready[i + 1], (q->nready - i - 1) * sizeof(q->ready[0]));
            q->nready--;
            break;
        }
    }
    return op->error;
}

/* ---- Helpers ------------------------------------------------------------------ */

void vfe_fuse_set_queue(struct vfe_fuse *f, unsigned q)
{
    if (q < f->nq)
        f->defq = q;
}

static int call(struct vfe_fuse *f, struct vfe_fuse_op *op)
{
    return vfe_fuse_call(f, f->defq, op);
}

int vfe_fuse_init(struct vfe_fuse *f, struct vfe_fuse_init_result *res)
{
    struct fuse_init_in in = {
        .major = FUSE_KERNEL_VERSION,
        .minor = f->cfg.proto_minor,
        .max_readahead = f->cfg.max_readahead,
        .flags = (uint32_t)f->cfg.init_flags,
    };
    uint32_t in_len = sizeof(in);
    if (f->cfg.proto_minor >= 36) {
        in.flags |= FUSE_INIT_EXT;
        in.flags2 = (uint32_t)(f->cfg.init_flags >> 32);
    } else {
        in_len = 16; /* the struct before flags2 existed */
    }
    struct fuse_init_out o = { 0 };
    struct vfe_fuse_op op = {
        .opcode = FUSE_INIT, .arg = &in, .arg_len = in_len, .out_arg = &o,
        .out_arg_len = sizeof(o) };
    int r = call(f, &op);
    if (r < 0)
        return r;
    if (op.out_arg_got < FUSE_COMPAT_22_INIT_OUT_SIZE)
        return -EPROTO;
    if (o.major != FUSE_KERNEL_VERSION)
        return -EPROTO;
    memset(res, 0, sizeof(*res));
    res->major = o.major;
    res->minor = o.minor;
    res->flags = o.flags;
    if (o.flags & FUSE_INIT_EXT)
        res->flags |= (uint64_t)o.flags2 << 32;
    res->max_readahead = o.max_readahead;
    res->max_background = o.max_background;
    res->congestion_threshold = o.congestion_threshold;
    res->max_write = o.max_write;
    res->time_gran = o.time_gran;
    res->max_pages = o.max_pages;
    res->map_alignment = o.map_alignment;
    if (o.max_write >= 4096)
        f->max_write = o.max_write < VFE_FUSE_BOUNCE ? o.max_write : VFE_FUSE_BOUNCE;
    return 0;
}

int vfe_fuse_lookup(struct vfe_fuse *f, uint64_t parent, const char *name,
                    struct fuse_entry_out *out)
{
    struct vfe_fuse_op op = {
        .opcode = FUSE_LOOKUP, .nodeid = parent, .name = name, .out_arg = out,
        .out_arg_len = sizeof(*out) };
    int r = call(f, &op);
    if (r == 0 && op.out_arg_got != sizeof(*out))
        return -EPROTO;
    return r;
}

int vfe_fuse_lookup_path(struct vfe_fuse *f, const char *path, struct fuse_entry_out *out)
{
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    uint64_t node = FUSE_ROOT_ID;
    bool any = false;
    for (char **p = parts; *p; p++) {
        if (!**p || !strcmp(*p, "."))
            continue;
        int r = vfe_fuse_lookup(f, node, *p, out);
        if (r < 0)
            return r;
        node = out->nodeid;
        any = true;
    }
    if (!any) {
        struct fuse_attr_out a;
        int r = vfe_fuse_getattr(f, FUSE_ROOT_ID, &a);
        if (r < 0)
            return r;
        memset(out, 0, sizeof(*out));
        out->nodeid = FUSE_ROOT_ID;
        out->attr = a.attr;
    }
    return 0;
}

int vfe_fuse_getattr(struct vfe_fuse *f, uint64_t nodeid, struct fuse_attr_out *out)
{
    struct fuse_getattr_in in = { 0 };
    struct vfe_fuse_op op = {
        .opcode = FUSE_GETATTR, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in),
        .out_arg = out, .out_arg_len = sizeof(*out) };
    int r = call(f, &op);
    if (r == 0 && op.out_arg_got != sizeof(*out))
        return -EPROTO;
    return r;
}

static int open_common(struct vfe_fuse *f, uint32_t opcode, uint64_t nodeid, uint32_t flags,
                       struct fuse_open_out *out)
{
    struct fuse_open_in in = { .flags = flags };
    struct vfe_fuse_op op = {
        .opcode = opcode, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in), .out_arg = out,
        .out_arg_len = sizeof(*out) };
    int r = call(f, &op);
    if (r == 0 && op.out_arg_got != sizeof(*out))
        return -EPROTO;
    return r;
}

int vfe_fuse_open(struct vfe_fuse *f, uint64_t nodeid, uint32_t flags, struct fuse_open_out *out)
{
    return open_common(f, FUSE_OPEN, nodeid, flags, out);
}

int vfe_fuse_opendir(struct vfe_fuse *f, uint64_t nodeid, struct fuse_open_out *out)
{
    return open_common(f, FUSE_OPENDIR, nodeid, 0, out);
}

int vfe_fuse_create(struct vfe_fuse *f, uint64_t parent, const char *name, uint32_t flags,
                    uint32_t mode, struct fuse_entry_out *entry, struct fuse_open_out *open)
{
    struct fuse_create_in in = { .flags = flags, .mode = mode, .umask = 022 };
    struct {
        struct fuse_entry_out e;
        struct fuse_open_out o;
    } out;
    struct vfe_fuse_op op = {
        .opcode = FUSE_CREATE, .nodeid = parent, .arg = &in, .arg_len = sizeof(in),
        .name = name, .out_arg = &out, .out_arg_len = sizeof(out) };
    int r = call(f, &op);
    if (r < 0)
        return r;
    if (op.out_arg_got != sizeof(out))
        return -EPROTO;
    *entry = out.e;
    *open = out.o;
    return 0;
}

int vfe_fuse_mkdir(struct vfe_fuse *f, uint64_t parent, const char *name, uint32_t mode,
                   struct fuse_entry_out *out)
{
    struct fuse_mkdir_in in = { .mode = mode, .umask = 022 };
    struct vfe_fuse_op op = {
        .opcode = FUSE_MKDIR, .nodeid = parent, .arg = &in, .arg_len = sizeof(in),
        .name = name, .out_arg = out, .out_arg_len = sizeof(*out) };
    int r = call(f, &op);
    if (r == 0 && op.out_arg_got != sizeof(*out))
        return -EPROTO;
    return r;
}

static int name_only(struct vfe_fuse *f, uint32_t opcode, uint64_t parent, const char *name)
{
    struct vfe_fuse_op op = { .opcode = opcode, .nodeid = parent, .name = name };
    return call(f, &op);
}

int vfe_fuse_unlink(struct vfe_fuse *f, uint64_t parent, const char *name)
{
    return name_only(f, FUSE_UNLINK, parent, name);
}

int vfe_fuse_rmdir(struct vfe_fuse *f, uint64_t parent, const char *name)
{
    return name_only(f, FUSE_RMDIR, parent, name);
}

static uint32_t sg_total(const struct vfe_sg *sg, unsigned cnt)
{
    uint64_t t = 0;
    for (unsigned i = 0; i < cnt; i++)
        t += sg[i].len;
    return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

ssize_t vfe_fuse_read_sg(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off,
                         const struct vfe_sg *data, unsigned cnt, bool indirect)
{
    struct fuse_read_in in = { .fh = fh, .offset = off, .size = sg_total(data, cnt) };
    struct vfe_fuse_op op = {
        .opcode = FUSE_READ, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in),
        .out_data = data, .out_data_cnt = cnt, .flags = indirect ? VFE_OP_INDIRECT : 0 };
    int r = call(f, &op);
    if (r < 0)
        return r;
    if (op.data_len > in.size)
        return -EPROTO;
    return op.data_len;
}

ssize_t vfe_fuse_write_sg(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off,
                          const struct vfe_sg *data, unsigned cnt, bool indirect)
{
    struct fuse_write_in in = { .fh = fh, .offset = off, .size = sg_total(data, cnt) };
    struct fuse_write_out out = { 0 };
    struct vfe_fuse_op op = {
        .opcode = FUSE_WRITE, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in),
        .in_data = data, .in_data_cnt = cnt, .out_arg = &out, .out_arg_len = sizeof(out),
        .flags = indirect ? VFE_OP_INDIRECT : 0 };
    int r = call(f, &op);
    if (r < 0)
        return r;
    if (op.out_arg_got != sizeof(out) || out.size > in.size)
        return -EPROTO;
    return out.size;
}

ssize_t vfe_fuse_read(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off, void *buf,
                      size_t len)
{
    size_t done = 0;
    while (done < len) {
        size_t chunk = len - done;
        if (chunk > f->max_write)
            chunk = f->max_write;
        struct vfe_sg sg = { f->bounce_gpa, (uint32_t)chunk };
        ssize_t n = vfe_fuse_read_sg(f, nodeid, fh, off + done, &sg, 1, false);
        if (n < 0)
            return done ? (ssize_t)done : n;
        if (vfe_mem_read(f->mem, f->bounce_gpa, (uint8_t *)buf + done, (size_t)n) < 0)
            return -EFAULT;
        done += (size_t)n;
        if ((size_t)n < chunk)
            break;
    }
    return (ssize_t)done;
}

ssize_t vfe_fuse_write(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off,
                       const void *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        size_t chunk = len - done;
        if (chunk > f->max_write)
            chunk = f->max_write;
        if (vfe_mem_write(f->mem, f->bounce_gpa, (const uint8_t *)buf + done, chunk) < 0)
            return -EFAULT;
        struct vfe_sg sg = { f->bounce_gpa, (uint32_t)chunk };
        ssize_t n = vfe_fuse_write_sg(f, nodeid, fh, off + done, &sg, 1, false);
        if (n < 0)
            return done ? (ssize_t)done : n;
        done += (size_t)n;
        if ((size_t)n < chunk)
            break;
    }
    return (ssize_t)done;
}

static int release_common(struct vfe_fuse *f, uint32_t opcode, uint64_t nodeid, uint64_t fh,
                          uint32_t flags)
{
    struct fuse_release_in in = { .fh = fh, .flags = flags };
    struct vfe_fuse_op op = {
        .opcode = opcode, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in) };
    return call(f, &op);
}

int vfe_fuse_release(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint32_t flags)
{
    return release_common(f, FUSE_RELEASE, nodeid, fh, flags);
}

int vfe_fuse_releasedir(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh)
{
    return release_common(f, FUSE_RELEASEDIR, nodeid, fh, 0);
}

int vfe_fuse_fsync(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, bool datasync)
{
    struct fuse_fsync_in in = { .fh = fh, .fsync_flags = datasync ? 1 : 0 };
    struct vfe_fuse_op op = {
        .opcode = FUSE_FSYNC, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in) };
    return call(f, &op);
}

int vfe_fuse_statfs(struct vfe_fuse *f, uint64_t nodeid, struct fuse_statfs_out *out)
{
    struct vfe_fuse_op op = {
        .opcode = FUSE_STATFS, .nodeid = nodeid, .out_arg = out, .out_arg_len = sizeof(*out) };
    int r = call(f, &op);
    if (r == 0 && op.out_arg_got != sizeof(*out))
        return -EPROTO;
    return r;
}

int vfe_fuse_forget(struct vfe_fuse *f, uint64_t nodeid, uint64_t nlookup)
{
    struct fuse_forget_in in = { .nlookup = nlookup };
    struct vfe_fuse_op op = {
        .opcode = FUSE_FORGET, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in),
        .flags = VFE_OP_NO_REPLY };
    return vfe_fuse_call(f, 0, &op);
}

int vfe_fuse_setupmapping(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t foffset,
                          uint64_t len, uint64_t flags, uint64_t moffset)
{
    struct fuse_setupmapping_in in = {
        .fh = fh, .foffset = foffset, .len = len, .flags = flags, .moffset = moffset };
    struct vfe_fuse_op op = {
        .opcode = FUSE_SETUPMAPPING, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in) };
    return call(f, &op);
}

int vfe_fuse_removemapping(struct vfe_fuse *f, uint64_t nodeid, const uint64_t (*ranges)[2],
                           uint32_t count)
{
    /* u32 count, then count packed {u64 moffset, u64 len}: unaligned on the wire. */
    if (count == 0 || count > (VFE_FUSE_IN_BUF - 64) / 16)
        return -EINVAL;
    g_autofree uint8_t *buf = g_malloc(4 + 16ull * count);
    memcpy(buf, &count, 4);
    for (uint32_t i = 0; i < count; i++)
        memcpy(buf + 4 + 16ull * i, ranges[i], 16);
    struct vfe_fuse_op op = {
        .opcode = FUSE_REMOVEMAPPING, .nodeid = nodeid, .arg = buf,
        .arg_len = 4 + 16 * count };
    return call(f, &op);
}

int vfe_fuse_parse_dirents(const void *buf, size_t len, vfe_dirent_fn fn, void *opaque,
                           uint64_t *last_off)
{
    const uint8_t *p = buf;
    size_t pos = 0;
    int n = 0;
    while (pos < len) {
        struct fuse_dirent d;
        if (len - pos < FUSE_NAME_OFFSET)
            return -EPROTO;
        memcpy(&d, p + pos, FUSE_NAME_OFFSET);
        if (d.namelen == 0 || d.namelen > 1024 || d.namelen > len - pos - FUSE_NAME_OFFSET)
            return -EPROTO;
        size_t rec = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + (size_t)d.namelen);
        if (rec > len - pos)
            return -EPROTO;
        if (fn)
            fn(opaque, (const char *)p + pos + FUSE_NAME_OFFSET, d.namelen, d.ino, d.type, d.off);
        if (last_off)
            *last_off = d.off;
        pos += rec;
        n++;
    }
    return n;
}

int vfe_fuse_readdir_all(struct vfe_fuse *f, uint64_t nodeid, vfe_dirent_fn fn, void *opaque)
{
    struct fuse_open_out oo;
    int r = vfe_fuse_opendir(f, nodeid, &oo);
    if (r < 0)
        return r;
    g_autofree uint8_t *buf = g_malloc(VFE_FUSE_DIRBUF);
    uint64_t off = 0;
    int total = 0;
    for (;;) {
        struct fuse_read_in in = { .fh = oo.fh, .offset = off, .size = VFE_FUSE_DIRBUF };
        struct vfe_sg sg = { f->bounce_gpa, VFE_FUSE_DIRBUF };
        struct vfe_fuse_op op = {
            .opcode = FUSE_READDIR, .nodeid = nodeid, .arg = &in, .arg_len = sizeof(in),
            .out_data = &sg, .out_data_cnt = 1 };
        r = call(f, &op);
        if (r < 0)
            break;
        if (op.data_len == 0)
            break;
        if (op.data_len > VFE_FUSE_DIRBUF) {
            r = -EPROTO;
            break;
        }
        vfe_mem_read(f->mem, f->bounce_gpa, buf, op.data_len);
        uint64_t last = off;
        int n = vfe_fuse_parse_dirents(buf, op.data_len, fn, opaque, &last);
        if (n < 0) {
            r = n;
            break;
        }
        total += n;
        if (n == 0 || last == off) {
            r = -EPROTO; /* no progress: the backend would loop us forever */
            break;
        }
        off = last;
    }
    int r2 = vfe_fuse_releasedir(f, nodeid, oo.fh);
    if (r < 0)
        return r;
    if (r2 < 0)
        return r2;
    return total;
}
