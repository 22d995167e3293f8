/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest memory (prefix vmem_): the regions the frontend shares, and the two
 * translations the rings need:
 *   - guest-physical -> host, for descriptor addresses (may straddle regions:
 *     the result is a list of iovecs, one per region crossed);
 *   - frontend virtual (userspace_addr) -> host, for the ring addresses of
 *     SET_VRING_ADDR (must be contiguous in one region).
 * Every check is overflow safe: a start and a length are validated as
 * "len <= region_end - start", never by computing start + len.
 *
 * Table changes while queues run (SET_MEM_TABLE, ADD_MEM_REG, REM_MEM_REG) use an
 * RCU-like swap, not a queue stop: a table is immutable once published and
 * reference counted. The device swaps in a new table under its memory lock; each
 * queue thread takes a reference at the start of each batch, every in-flight
 * request holds a reference to the table its iovecs point into, and each
 * mapping is itself reference counted, so a region is unmapped only when the
 * last table that contains it is released (never under a request that still
 * reads or writes it).
 */
#ifndef VUFSD_MEM_H
#define VUFSD_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * What GET_MAX_MEM_SLOTS answers, and the size of a table: QEMU's own limit
 * (VHOST_USER_MAX_RAM_SLOTS). QEMU 11.1 turns every live DAX mapping of the
 * generic vhost-user device into a guest memory region (ADD_MEM_REG per
 * BACKEND_SHMEM_MAP, REM_MEM_REG per unmap) without checking this limit, so the
 * table must hold the guest's RAM regions plus one per 2 MiB range of the
 * window: a smaller table refuses mappings the window allows. Lookups stay
 * cheap: RAM regions come first and keep their places (removal preserves order).
 */
#define VMEM_MAX_REGIONS 512

struct vmem_map; /* one mmap of one region fd, reference counted */

struct vmem_region {
    uint64_t gpa;         /* guest physical address of the first byte */
    uint64_t size;        /* bytes, > 0 */
    uint64_t uva;         /* frontend virtual address of the first byte */
    uint64_t mmap_offset; /* offset of the first byte in the region's fd */
    uint8_t *host;        /* our address of the first byte */
    struct vmem_map *map; /* NULL for memory the caller owns (unit tests) */
};

/* The pure view the walker and translations use. */
struct vq_mem {
    unsigned nregions;
    struct vmem_region r[VMEM_MAX_REGIONS];
};

/*
 * Appends to iov[*cnt..max) the host ranges of guest-physical [gpa, gpa+len).
 * Returns 0, -EFAULT if any byte is unmapped or gpa+len overflows, -E2BIG if it
 * needs more than max iovecs. len == 0 appends nothing and succeeds.
 */
int vmem_gpa_iov(const struct vq_mem *m, uint64_t gpa, uint64_t len, struct iovec *iov,
                 unsigned max, unsigned *cnt);
/* Host address of [gpa, gpa+len) when it lies in one region, else NULL. */
void *vmem_gpa_host(const struct vq_mem *m, uint64_t gpa, uint64_t len);
/* Host address of frontend-virtual [uva, uva+len) in one region, else NULL. */
void *vmem_uva_host(const struct vq_mem *m, uint64_t uva, uint64_t len);

/* ---- Reference-counted tables (daemon side) ---------------------------------- */

struct vmem_table {
    int refcount; /* atomic */
    struct vq_mem mem;
};

/* Region as the frontend describes it (vhost-user VhostUserMemoryRegion). */
struct vmem_desc {
    uint64_t gpa;
    uint64_t size;
    uint64_t uva;
    uint64_t mmap_offset;
};

struct vmem_table *vmem_table_new(void);
/* A new table with the same regions (mappings shared by reference). */
struct vmem_table *vmem_table_copy(const struct vmem_table *t);
struct vmem_table *vmem_table_ref(struct vmem_table *t);
void vmem_table_unref(struct vmem_table *t);

/*
 * Validates d (non-empty, no overflow, no overlap with t's regions in either
 * address space, room in the table), maps fd and appends the region to t, which
 * must not be published yet. Does not take fd (the caller closes it). 0 / -errno.
 */
int vmem_table_add(struct vmem_table *t, const struct vmem_desc *d, int fd);
/* The fd a region was mapped from (kept, owned by the table), or -1. */
int vmem_region_fd(const struct vmem_region *r);
/* Removes the region matching d's gpa, size and uva. 0 or -ENOENT. */
int vmem_table_remove(struct vmem_table *t, const struct vmem_desc *d);
/* Pure validation used by vmem_table_add (exposed for tests). */
int vmem_desc_check(const struct vq_mem *m, const struct vmem_desc *d);

/* ---- The dirty page log (live migration) ------------------------------------- */

/*
 * While the frontend migrates the VM it shares a bitmap with the daemon
 * (SET_LOG_BASE: an fd, a size and an offset) and acks VHOST_F_LOG_ALL; from
 * then on every write the daemon makes to guest memory sets the bits of the
 * pages it touched, so the frontend sends those pages again. Bit p (bit p % 8
 * of byte p / 8) stands for guest-physical page p of VMEM_LOG_PAGE bytes
 * (QEMU docs/interop/vhost-user.rst, "Migration"). The frontend clears bits
 * concurrently: every mark is an atomic OR, published after the data it
 * covers (release order). A page beyond the log's size is not marked (the
 * frontend sizes the log for all of guest memory, so only a buggy frontend's
 * log is too small, and writing past it would fault).
 */
#define VMEM_LOG_PAGE 4096u
/* Largest log accepted: covers 2^48 bytes of guest-physical space (8 GiB of bits). */
#define VMEM_LOG_MAX ((uint64_t)1 << 33)

struct vmem_log {
    uint8_t *bits; /* size bytes */
    uint64_t size;
    void *map;     /* the mapping bits lies in */
    size_t map_len;
};

/*
 * Maps [offset, offset+size) of fd, which must be at least that long (a
 * mapping past the end of a file faults on access). Does not take fd.
 * -EINVAL for a size of 0, above VMEM_LOG_MAX, an overflowing offset or an fd
 * too short; -errno from fstat or mmap.
 */
int vmem_log_map(int fd, uint64_t size, uint64_t offset, struct vmem_log **out);
void vmem_log_free(struct vmem_log *l);
/* Marks the pages of guest-physical [gpa, gpa+len) in bits[0, size): the pure part,
 * overflow safe (a range running past 2^64 ends there). */
void vmem_log_mark_bits(uint8_t *bits, uint64_t size, uint64_t gpa, uint64_t len);
/* The same on a mapped log. */
void vmem_log_mark(struct vmem_log *l, uint64_t gpa, uint64_t len);
/*
 * Marks the guest pages behind the first len bytes of iov (host addresses
 * into m's regions, as the chain walker made them: each iovec inside one
 * region). An iovec in no region of m marks nothing.
 */
void vmem_log_mark_iov(struct vmem_log *l, const struct vq_mem *m, const struct iovec *iov,
                       unsigned cnt, size_t len);

#endif
