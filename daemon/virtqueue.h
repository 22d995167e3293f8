/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Split virtqueues (prefix vq_): the descriptor chain walker and the ring
 * operations, on host pointers into guest memory. Pure: no threads, sockets or
 * locks here, so unit tests and fuzzers drive it directly; the caller (queue.c)
 * serialises calls on one ring.
 *
 * Everything read from the rings is guest controlled and copied out once before
 * it is checked and used. Rings are little-endian (VIRTIO_F_VERSION_1).
 *
 * Memory ordering (virtio spec 2.7, "Receiving Used Buffers" and "Notifications"):
 *   pop:    load avail->idx, acquire fence, then read the ring entry and descriptors.
 *   push:   store the used element, release fence, then store used->idx.
 *   notify: full fence between storing used->idx and reading used_event/avail flags.
 *   sleep:  store avail_event (or clear NO_NOTIFY), full fence, re-read avail->idx;
 *           only sleep when it still equals last_avail_idx (no lost wakeups).
 */
#ifndef VUFSD_VIRTQUEUE_H
#define VUFSD_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/virtio_ring.h>

#include "mem.h"

/* Largest ring the split format allows (virtio spec: Queue Size <= 32768). */
#define VQ_MAX_SIZE 32768u

/*
 * Walks the chain starting at table[head] (a host pointer to ring_size
 * descriptors) into readable (rd) and writable (wr) iovec lists of at most
 * max_iov entries each. Returns 0, or:
 *   -EINVAL  head or a next index out of range, a readable descriptor after a
 *            writable one, INDIRECT with NEXT, a nested indirect table, an
 *            indirect table whose length is 0, not a multiple of 16 or larger
 *            than ring_size entries;
 *   -ELOOP   more descriptors than the ring (or indirect table) holds;
 *   -EFAULT  an address or addr+len outside guest memory or overflowing;
 *   -E2BIG   a well-formed chain that needs more than max_iov iovecs.
 * Zero-length descriptors are accepted and produce no iovec.
 */
int vq_walk_chain(const struct vq_mem *mem, const struct vring_desc *table, unsigned ring_size,
                  uint16_t head, struct iovec *rd, unsigned *rd_cnt, struct iovec *wr,
                  unsigned *wr_cnt, unsigned max_iov);

/* Whether ring_size is a valid split ring size (a power of two, 1..32768). */
bool vq_size_valid(unsigned ring_size);
/* Bytes of each part of a split ring of num entries (with the event idx fields). */
size_t vq_desc_bytes(unsigned num);
size_t vq_avail_bytes(unsigned num);
size_t vq_used_bytes(unsigned num);

/* One split ring. All host pointers; the owner keeps the memory mapped. */
struct vq_ring {
    unsigned num;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    bool event_idx;          /* VIRTIO_RING_F_EVENT_IDX negotiated */
    uint16_t last_avail_idx; /* next avail entry to pop */
    uint16_t used_idx;       /* next used entry to fill (our copy of used->idx) */
    uint16_t signalled_used; /* used_idx when we last decided to notify */
    bool signalled_used_valid;
    uint16_t max_pending;    /* most chains waiting at a pop: the depth the driver drives */
};

/*
 * Pops the next available chain: returns 1 with *head and the iovec lists
 * filled, 0 when the ring is empty, or a negative errno when the ring is broken
 * (an avail index more than num ahead, or a head/chain failing vq_walk_chain;
 * -E2BIG is returned with *head set so the caller can fail just that request).
 */
int vq_ring_pop(struct vq_ring *r, const struct vq_mem *mem, uint16_t *head, struct iovec *rd,
                unsigned *rd_cnt, struct iovec *wr, unsigned *wr_cnt, unsigned max_iov);
/* Publishes one used element (head, bytes written). */
void vq_ring_push(struct vq_ring *r, uint16_t head, uint32_t len);
/* After pushes: whether the driver wants an interrupt now (EVENT_IDX or flags). */
bool vq_ring_should_notify(struct vq_ring *r);
/* Busy: ask the driver not to kick (no-op with EVENT_IDX: avail_event stays behind). */
void vq_ring_disable_notify(struct vq_ring *r);
/* About to sleep: ask for a kick, then re-check. Returns true if work arrived meanwhile. */
bool vq_ring_enable_notify(struct vq_ring *r);
/* Whether the avail ring has entries we have not popped. */
bool vq_ring_has_work(const struct vq_ring *r);

#endif
