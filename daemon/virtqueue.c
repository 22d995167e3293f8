/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "virtqueue.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

bool vq_size_valid(unsigned ring_size)
{
    return ring_size >= 1 && ring_size <= VQ_MAX_SIZE && (ring_size & (ring_size - 1)) == 0;
}

size_t vq_desc_bytes(unsigned num)
{
    return sizeof(struct vring_desc) * (size_t)num;
}

size_t vq_avail_bytes(unsigned num)
{
    /* flags, idx, ring[num], used_event */
    return 2 * sizeof(uint16_t) + sizeof(uint16_t) * (size_t)num + sizeof(uint16_t);
}

size_t vq_used_bytes(unsigned num)
{
    /* flags, idx, ring[num], avail_event */
    return 2 * sizeof(uint16_t) + sizeof(struct vring_used_elem) * (size_t)num + sizeof(uint16_t);
}

/* Copies a descriptor out of guest memory once; the guest may change it under us. */
static void vq_desc_read(const struct vring_desc *table, unsigned i, struct vring_desc *d)
{
    memcpy(d, (const char *)table + (size_t)i * sizeof(*d), sizeof(*d));
    d->addr = le64toh(d->addr);
    d->len = le32toh(d->len);
    d->flags = le16toh(d->flags);
    d->next = le16toh(d->next);
}

int vq_walk_chain(const struct vq_mem *mem, const struct vring_desc *table, unsigned ring_size,
                  uint16_t head, struct iovec *rd, unsigned *rd_cnt, struct iovec *wr,
                  unsigned *wr_cnt, unsigned max_iov)
{
    const struct vring_desc *cur_table = table;
    unsigned cur_size = ring_size;
    unsigned i = head;
    unsigned seen = 0;     /* descriptors walked in the current table */
    bool indirect = false; /* walking an indirect table */
    int ret;

    *rd_cnt = 0;
    *wr_cnt = 0;
    if (!vq_size_valid(ring_size) || head >= ring_size)
        return -EINVAL;

    for (;;) {
        struct vring_desc d;

        if (i >= cur_size)
            return -EINVAL;
        if (++seen > cur_size)
            return -ELOOP;
        vq_desc_read(cur_table, i, &d);

        if (d.flags & VRING_DESC_F_INDIRECT) {
            if (indirect)
                return -EINVAL; /* nested */
            if (d.flags & VRING_DESC_F_NEXT)
                return -EINVAL; /* spec: INDIRECT and NEXT never together */
            if (d.len == 0 || d.len % sizeof(struct vring_desc) ||
                d.len / sizeof(struct vring_desc) > ring_size)
                return -EINVAL;
            /* The table is read through one host pointer: it must not straddle regions. */
            const void *t = vmem_gpa_host(mem, d.addr, d.len);
            if (!t)
                return -EFAULT;
            cur_table = t;
            cur_size = d.len / sizeof(struct vring_desc);
            indirect = true;
            seen = 0;
            i = 0;
            continue;
        }

        if (d.flags & VRING_DESC_F_WRITE) {
            ret = vmem_gpa_iov(mem, d.addr, d.len, wr, max_iov, wr_cnt);
        } else {
            if (*wr_cnt)
                return -EINVAL; /* readable after writable */
            ret = vmem_gpa_iov(mem, d.addr, d.len, rd, max_iov, rd_cnt);
        }
        if (ret < 0)
            return ret;
        if (!(d.flags & VRING_DESC_F_NEXT))
            return 0;
        i = d.next;
    }
}

static inline uint16_t vq_load16(const uint16_t *p)
{
    return le16toh(__atomic_load_n(p, __ATOMIC_RELAXED));
}

static inline void vq_store16(uint16_t *p, uint16_t v)
{
    __atomic_store_n(p, htole16(v), __ATOMIC_RELAXED);
}

bool vq_ring_has_work(const struct vq_ring *r)
{
    return vq_load16(&r->avail->idx) != r->last_avail_idx;
}

int vq_ring_pop(struct vq_ring *r, const struct vq_mem *mem, uint16_t *head, struct iovec *rd,
                unsigned *rd_cnt, struct iovec *wr, unsigned *wr_cnt, unsigned max_iov)
{
    uint16_t avail_idx = vq_load16(&r->avail->idx);
    uint16_t pending = (uint16_t)(avail_idx - r->last_avail_idx);

    if (pending == 0)
        return 0;
    if (pending > r->num)
        return -EINVAL; /* the driver claims more buffers than the ring has */
    if (pending > r->max_pending)
        r->max_pending = pending;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);

    uint16_t h = vq_load16(&r->avail->ring[r->last_avail_idx & (r->num - 1)]);
    if (h >= r->num)
        return -EINVAL;
    r->last_avail_idx++;
    *head = h;
    int ret = vq_walk_chain(mem, r->desc, r->num, h, rd, rd_cnt, wr, wr_cnt, max_iov);
    if (ret < 0)
        return ret;
    return 1;
}

void vq_ring_push(struct vq_ring *r, uint16_t head, uint32_t len)
{
    struct vring_used_elem *e = &r->used->ring[r->used_idx & (r->num - 1)];
    struct vring_used_elem v = {.id = htole32(head), .len = htole32(len)};

    memcpy(e, &v, sizeof(v));
    r->used_idx++;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    vq_store16(&r->used->idx, r->used_idx);
}

bool vq_ring_should_notify(struct vq_ring *r)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!r->event_idx)
        return !(vq_load16(&r->avail->flags) & VRING_AVAIL_F_NO_INTERRUPT);

    uint16_t old = r->signalled_used;
    bool valid = r->signalled_used_valid;
    uint16_t event = vq_load16(&r->avail->ring[r->num]); /* used_event */
    r->signalled_used = r->used_idx;
    r->signalled_used_valid = true;
    return !valid || vring_need_event(event, r->used_idx, old);
}

void vq_ring_disable_notify(struct vq_ring *r)
{
    if (!r->event_idx)
        vq_store16(&r->used->flags, VRING_USED_F_NO_NOTIFY);
}

bool vq_ring_enable_notify(struct vq_ring *r)
{
    if (r->event_idx)
        vq_store16((uint16_t *)&r->used->ring[r->num], r->last_avail_idx); /* avail_event */
    else
        vq_store16(&r->used->flags, 0);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return vq_ring_has_work(r);
}
