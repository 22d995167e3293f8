/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Split virtqueues, driver side (virtio 1.x, 2.7): descriptor table, avail ring
 * and used ring in guest memory, kick and call eventfds.
 *
 * The free-descriptor chain and the per-head bookkeeping live in our own memory,
 * never read back from the (backend-writable) table; a used entry naming a head
 * that is not in flight, or a length larger than the writable space we gave,
 * marks the queue broken instead of corrupting our state.
 *
 * Head state:  FREE --vfe_vq_add--> IN_FLIGHT --vfe_vq_get_used--> FREE
 * A queue is driven by one thread at a time (no lock).
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <endian.h>
#include <assert.h>
#include <linux/virtio_ring.h>

#include <glib.h>

#include "vfe.h"
#include "vfe_i.h"

struct vfe_head {
    void *token;
    uint32_t in_bytes;   /* writable bytes offered */
    uint16_t ndesc;      /* ring descriptors used (1 for indirect) */
    bool busy;
};

struct vfe_vq {
    struct vfe_mem *mem;
    unsigned index;
    unsigned num;
    bool event_idx;
    bool indirect;
    bool cb_disabled;
    bool broken;
    bool kick_next;         /* after a reset: the backend has no avail_event yet */

    uint64_t desc_gpa, avail_gpa, used_gpa, ind_gpa;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    struct vring_desc *ind; /* num tables of VFE_VQ_INDIRECT_MAX */

    int kick_fd;
    int call_fd;
    uint64_t halt_poll_ns;  /* vfe_vq_set_halt_poll() */

    uint16_t *next_free;    /* shadow free chain */
    uint16_t free_head;
    unsigned num_free;
    struct vfe_head *heads;
    unsigned in_flight;

    uint16_t avail_idx;     /* next avail slot (not yet published past it) */
    uint16_t published_idx; /* avail->idx as last written */
    uint16_t last_used;
};

/* Halt polling offers the CPU this often, and a yield that took as long gave it away. */
#define VFE_HALT_POLL_YIELD_NS 5000u

static uint16_t rd16(const volatile __virtio16 *p)
{
    return le16toh(__atomic_load_n((const volatile uint16_t *)p, __ATOMIC_RELAXED));
}

static void wr16(volatile __virtio16 *p, uint16_t v)
{
    __atomic_store_n((volatile uint16_t *)p, htole16(v), __ATOMIC_RELAXED);
}

/* The ring indices: publishing is a release, observing an acquire (on top of
 * the explicit barriers, so the ordering is also visible to ThreadSanitizer). */
static uint16_t rd16_acquire(const volatile __virtio16 *p)
{
    return le16toh(__atomic_load_n((const volatile uint16_t *)p, __ATOMIC_ACQUIRE));
}

static void wr16_release(volatile __virtio16 *p, uint16_t v)
{
    __atomic_store_n((volatile uint16_t *)p, htole16(v), __ATOMIC_RELEASE);
}

static int alloc_part(struct vfe_mem *mem, int region, uint64_t size, uint64_t align,
                      uint64_t *gpa, void **hva)
{
    int r = region >= 0 ? vfe_mem_alloc_in(mem, (unsigned)region, size, align, gpa)
                        : vfe_mem_alloc(mem, size, align, gpa);
    if (r < 0)
        return r;
    *hva = vfe_mem_gpa_to_hva(mem, *gpa, size);
    memset(*hva, 0, size);
    return 0;
}

static void init_free_chain(struct vfe_vq *vq)
{
    for (unsigned i = 0; i < vq->num; i++) {
        vq->next_free[i] = (uint16_t)(i + 1);
        vq->heads[i] = (struct vfe_head){ 0 };
    }
    vq->free_head = 0;
    vq->num_free = vq->num;
    vq->in_flight = 0;
}

int vfe_vq_new(struct vfe_mem *mem, const struct vfe_vq_config *cfg, struct vfe_vq **out)
{
    unsigned num = cfg->size;
    if (num == 0 || num > VFE_VQ_MAX_SIZE || (num & (num - 1)))
        return -EINVAL;
    struct vfe_vq *vq = g_new0(struct vfe_vq, 1);
    vq->mem = mem;
    vq->index = cfg->index;
    vq->num = num;
    vq->event_idx = cfg->event_idx;
    vq->indirect = cfg->indirect;
    vq->kick_fd = vq->call_fd = -1;
    vq->next_free = g_new(uint16_t, num);
    vq->heads = g_new0(struct vfe_head, num);
    init_free_chain(vq);

    void *p;
    /* Rings in region 0, like a guest kernel's low memory; indirect tables
     * wherever the allocator puts them. */
    int r = alloc_part(mem, 0, 16ull * num, 4096, &vq->desc_gpa, &p);
    if (r < 0)
        goto out_free;
    vq->desc = p;
    r = alloc_part(mem, 0, 6ull + 2ull * num, 64, &vq->avail_gpa, &p);
    if (r < 0)
        goto out_free;
    vq->avail = p;
    r = alloc_part(mem, 0, 6ull + 8ull * num, 4096, &vq->used_gpa, &p);
    if (r < 0)
        goto out_free;
    vq->used = p;
    if (cfg->indirect) {
        r = alloc_part(mem, -1, 16ull * VFE_VQ_INDIRECT_MAX * num, 4096, &vq->ind_gpa, &p);
        if (r < 0)
            goto out_free;
        vq->ind = p;
    }
    vq->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    vq->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (vq->kick_fd < 0 || vq->call_fd < 0) {
        r = -errno;
        goto out_free;
    }
    *out = vq;
    return 0;

out_free:
    vfe_vq_free(vq);
    return r;
}

void vfe_vq_free(struct vfe_vq *vq)
{
    if (!vq)
        return;
    if (vq->desc)
        vfe_mem_free_block(vq->mem, vq->desc_gpa);
    if (vq->avail)
        vfe_mem_free_block(vq->mem, vq->avail_gpa);
    if (vq->used)
        vfe_mem_free_block(vq->mem, vq->used_gpa);
    if (vq->ind)
        vfe_mem_free_block(vq->mem, vq->ind_gpa);
    vufs_close(&vq->kick_fd);
    vufs_close(&vq->call_fd);
    g_free(vq->next_free);
    g_free(vq->heads);
    g_free(vq);
}

unsigned vfe_vq_size(const struct vfe_vq *vq)
{
    return vq->num;
}

unsigned vfe_vq_index(const struct vfe_vq *vq)
{
    return vq->index;
}

int vfe_vq_kick_fd(const struct vfe_vq *vq)
{
    return vq->kick_fd;
}

int vfe_vq_call_fd(const struct vfe_vq *vq)
{
    return vq->call_fd;
}

void vfe_vq_addr(const struct vfe_vq *vq, struct vfe_vu_addr *a)
{
    memset(a, 0, sizeof(*a));
    a->index = vq->index;
    a->desc_user_addr = (uint64_t)(uintptr_t)vq->desc;
    a->avail_user_addr = (uint64_t)(uintptr_t)vq->avail;
    a->used_user_addr = (uint64_t)(uintptr_t)vq->used;
}

void vfe_vq_gpas(const struct vfe_vq *vq, uint64_t *desc, uint64_t *avail, uint64_t *used)
{
    *desc = vq->desc_gpa;
    *avail = vq->avail_gpa;
    *used = vq->used_gpa;
}

unsigned vfe_vq_free_descs(const struct vfe_vq *vq)
{
    return vq->num_free;
}

unsigned vfe_vq_in_flight(const struct vfe_vq *vq)
{
    return vq->in_flight;
}

bool vfe_vq_broken(const struct vfe_vq *vq)
{
    return vq->broken;
}

uint16_t vfe_vq_avail_idx(const struct vfe_vq *vq)
{
    return vq->avail_idx;
}

void vfe_vq_reset(struct vfe_vq *vq, uint16_t base)
{
    init_free_chain(vq);
    memset(vq->desc, 0, 16ull * vq->num);
    memset(vq->avail, 0, 6ull + 2ull * vq->num);
    memset(vq->used, 0, 6ull + 8ull * vq->num);
    vq->avail_idx = vq->published_idx = vq->last_used = base;
    wr16(&vq->avail->idx, base);
    wr16(&vq->used->idx, base);
    vq->broken = false;
    vq->cb_disabled = false;
    vq->kick_next = true;
}

static void put_desc(struct vring_desc *d, uint64_t addr, uint32_t len, uint16_t flags,
                     uint16_t next)
{
    d->addr = htole64(addr);
    d->len = htole32(len);
    d->flags = htole16(flags);
    d->next = htole16(next);
}

int vfe_vq_add(struct vfe_vq *vq, const struct vfe_sg *out, unsigned nout,
               const struct vfe_sg *in, unsigned nin, bool indirect, void *token)
{
    unsigned total = nout + nin;
    if (total == 0 || total > vq->num)
        return -EINVAL;
    if (vq->broken)
        return -EIO;
    uint32_t in_bytes = 0;
    for (unsigned i = 0; i < nin; i++) {
        if (in[i].len > UINT32_MAX - in_bytes)
            return -EINVAL;
        in_bytes += in[i].len;
    }
    if (indirect && (!vq->ind || total > VFE_VQ_INDIRECT_MAX))
        return -EINVAL;
    unsigned need = indirect ? 1 : total;
    if (vq->num_free < need)
        return -ENOSPC;

    uint16_t head = vq->free_head;
    if (indirect) {
        struct vring_desc *t = vq->ind + (size_t)head * VFE_VQ_INDIRECT_MAX;
        for (unsigned i = 0; i < total; i++) {
            const struct vfe_sg *s = i < nout ? &out[i] : &in[i - nout];
            uint16_t flags = i < nout ? 0 : VRING_DESC_F_WRITE;
            if (i + 1 < total)
                flags |= VRING_DESC_F_NEXT;
            put_desc(&t[i], s->gpa, s->len, flags, (uint16_t)(i + 1 < total ? i + 1 : 0));
        }
        uint64_t tgpa = vq->ind_gpa + (uint64_t)head * VFE_VQ_INDIRECT_MAX * 16;
        put_desc(&vq->desc[head], tgpa, (uint32_t)(16 * total), VRING_DESC_F_INDIRECT, 0);
        vq->free_head = vq->next_free[head];
    } else {
        uint16_t cur = head;
        for (unsigned i = 0; i < total; i++) {
            const struct vfe_sg *s = i < nout ? &out[i] : &in[i - nout];
            uint16_t flags = i < nout ? 0 : VRING_DESC_F_WRITE;
            uint16_t next = vq->next_free[cur];
            if (i + 1 < total)
                flags |= VRING_DESC_F_NEXT;
            put_desc(&vq->desc[cur], s->gpa, s->len, flags, i + 1 < total ? next : 0);
            cur = next;
        }
        vq->free_head = cur;
    }
    vq->num_free -= need;
    vq->heads[head] = (struct vfe_head){
        .token = token, .in_bytes = in_bytes, .ndesc = (uint16_t)need, .busy = true };
    vq->in_flight++;
    wr16(&vq->avail->ring[vq->avail_idx & (vq->num - 1)], head);
    vq->avail_idx++;
    return 0;
}

static uint16_t avail_event(const struct vfe_vq *vq)
{
    return rd16((const __virtio16 *)&vq->used->ring[vq->num]);
}

bool vfe_vq_kick(struct vfe_vq *vq, bool force)
{
    uint16_t old = vq->published_idx, now = vq->avail_idx;
    vfe_smp_wmb(); /* descriptors and ring entries before the index */
    wr16_release(&vq->avail->idx, now);
    vq->published_idx = now;
    vfe_smp_mb(); /* index before reading the backend's suppression state */
    bool need;
    if (vq->event_idx)
        need = vring_need_event(avail_event(vq), now, old);
    else
        need = !(rd16(&vq->used->flags) & VRING_USED_F_NO_NOTIFY);
    if (need || force || vq->kick_next) {
        uint64_t one = 1;
        vq->kick_next = false;
        if (write(vq->kick_fd, &one, sizeof(one)) < 0) {
            /* EAGAIN only at counter overflow: the backend has a kick pending */
        }
        return true;
    }
    return false;
}

static void set_used_event(struct vfe_vq *vq, uint16_t v)
{
    wr16(&vq->avail->ring[vq->num], v);
}

int vfe_vq_get_used(struct vfe_vq *vq, void **token, uint32_t *len)
{
    if (vq->broken)
        return -EPROTO;
    uint16_t uidx = rd16_acquire(&vq->used->idx);
    if (uidx == vq->last_used)
        return -EAGAIN;
    if ((uint16_t)(uidx - vq->last_used) > vq->num) {
        vq->broken = true; /* more entries than the ring has */
        return -EPROTO;
    }
    vfe_smp_rmb(); /* the index before the entry */
    struct vring_used_elem *e = &vq->used->ring[vq->last_used & (vq->num - 1)];
    uint32_t id = le32toh(__atomic_load_n(&e->id, __ATOMIC_RELAXED));
    uint32_t l = le32toh(__atomic_load_n(&e->len, __ATOMIC_RELAXED));
    if (id >= vq->num || !vq->heads[id].busy || l > vq->heads[id].in_bytes) {
        vq->broken = true;
        return -EPROTO;
    }
    struct vfe_head *h = &vq->heads[id];
    uint16_t tail = (uint16_t)id;
    for (unsigned i = 1; i < h->ndesc; i++)
        tail = vq->next_free[tail];
    vq->next_free[tail] = vq->free_head;
    vq->free_head = (uint16_t)id;
    vq->num_free += h->ndesc;
    vq->in_flight--;
    h->busy = false;
    *token = h->token;
    *len = l;
    vq->last_used++;
    if (vq->event_idx && !vq->cb_disabled)
        set_used_event(vq, vq->last_used);
    return 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * A halted vCPU under KVM polls for its interrupt before the host puts its
 * thread to sleep (halt_poll_ns), but only while no other task wants that CPU
 * (single_task_running()). The same here, for up to halt_poll_ns: watch the
 * used index (cheap), then take the call notification - only the notification
 * ends the wait, as only an interrupt would, so a backend that completes
 * without notifying is still caught. Every VFE_HALT_POLL_YIELD_NS the CPU is
 * offered (sched_yield); if someone took it, the poll ends and the thread
 * sleeps, as KVM's would.
 */
static bool halt_poll(struct vfe_vq *vq)
{
    uint64_t t0 = vufs_now_ns(), yielded = t0, cnt;
    for (unsigned i = 1; rd16_acquire(&vq->used->idx) == vq->last_used; i++) {
        cpu_relax();
        if (i % 32)
            continue;
        uint64_t now = vufs_now_ns();
        if (now - t0 >= vq->halt_poll_ns)
            return false;
        if (now - yielded >= VFE_HALT_POLL_YIELD_NS) {
            sched_yield();
            yielded = vufs_now_ns();
            if (yielded - now >= VFE_HALT_POLL_YIELD_NS)
                return false;
        }
    }
    do {
        if (read(vq->call_fd, &cnt, sizeof(cnt)) == sizeof(cnt))
            return true;
    } while (vufs_now_ns() - t0 < vq->halt_poll_ns);
    return false;
}

int vfe_vq_wait(struct vfe_vq *vq, int timeout_ms)
{
    vq->cb_disabled = false;
    if (vq->event_idx)
        set_used_event(vq, vq->last_used);
    else
        wr16(&vq->avail->flags, 0);
    vfe_smp_mb(); /* arm before re-checking: a completion may have raced */
    if (rd16(&vq->used->idx) != vq->last_used)
        return 0;
    if (vq->halt_poll_ns && halt_poll(vq))
        return 0;
    struct pollfd p = { .fd = vq->call_fd, .events = POLLIN };
    int r;
    do {
        r = poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    if (r == 0)
        return rd16(&vq->used->idx) != vq->last_used ? 0 : -ETIMEDOUT;
    uint64_t cnt;
    if (read(vq->call_fd, &cnt, sizeof(cnt)) < 0) {
        /* EAGAIN: another reader took it; the used index decides anyway */
    }
    return 0;
}

void vfe_vq_set_halt_poll(struct vfe_vq *vq, uint64_t ns)
{
    vq->halt_poll_ns = ns;
}

void vfe_vq_disable_cb(struct vfe_vq *vq)
{
    vq->cb_disabled = true;
    if (!vq->event_idx)
        wr16(&vq->avail->flags, VRING_AVAIL_F_NO_INTERRUPT);
}

/* ---- Raw access -------------------------------------------------------------- */

struct vring_desc *vfe_vq_raw_desc(struct vfe_vq *vq)
{
    return vq->desc;
}

void vfe_vq_raw_set_desc(struct vfe_vq *vq, unsigned i, uint64_t addr, uint32_t len,
                         uint16_t flags, uint16_t next)
{
    assert(i < vq->num); /* our caller's bug, not the backend's */
    put_desc(&vq->desc[i], addr, len, flags, next);
}

void vfe_vq_raw_publish(struct vfe_vq *vq, uint16_t head)
{
    wr16(&vq->avail->ring[vq->avail_idx & (vq->num - 1)], head);
    vq->avail_idx++;
    vfe_smp_wmb();
    wr16_release(&vq->avail->idx, vq->avail_idx);
    vq->published_idx = vq->avail_idx;
}

void vfe_vq_raw_set_avail_idx(struct vfe_vq *vq, uint16_t idx)
{
    vfe_smp_wmb();
    wr16_release(&vq->avail->idx, idx);
}

uint16_t vfe_vq_raw_used_idx(const struct vfe_vq *vq)
{
    return rd16_acquire(&vq->used->idx);
}

void vfe_vq_raw_used_elem(const struct vfe_vq *vq, uint16_t slot, uint32_t *id, uint32_t *len)
{
    const struct vring_used_elem *e = &vq->used->ring[slot & (vq->num - 1)];
    *id = le32toh(__atomic_load_n(&e->id, __ATOMIC_RELAXED));
    *len = le32toh(__atomic_load_n(&e->len, __ATOMIC_RELAXED));
}

int vfe_vq_raw_wait_used(struct vfe_vq *vq, uint16_t from, int timeout_ms)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
                                       : vufs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (rd16_acquire(&vq->used->idx) == from) {
        uint64_t now = vufs_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        /* Bounded naps: a backend that updates the index without calling
         * (EVENT_IDX suppression) is still noticed. */
        uint64_t left_ms = (deadline - now) / 1000000ull + 1;
        struct pollfd p = { .fd = vq->call_fd, .events = POLLIN };
        int r = poll(&p, 1, left_ms > 100 ? 100 : (int)left_ms);
        if (r > 0) {
            uint64_t cnt;
            if (read(vq->call_fd, &cnt, sizeof(cnt)) < 0) {
                /* EAGAIN: drained by someone else */
            }
        }
    }
    return 0;
}

void vfe_vq_raw_kick(struct vfe_vq *vq)
{
    uint64_t one = 1;
    if (write(vq->kick_fd, &one, sizeof(one)) < 0) {
        /* counter overflow only */
    }
}
