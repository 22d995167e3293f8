/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the descriptor-chain walker and the split ring (daemon/virtqueue.c)
 * over a fake guest memory layout (CVE-2023-41051 class: addr+len overflow,
 * chains straddling regions or leaving guest memory, loops, oversized indirect
 * tables).
 *
 * Input (little endian; zeros past the end):
 *   u8      number of regions - 1 (low 2 bits: 1..4)
 *   4 x     u64 gpa, u16 size (1..16384 after folding), u64 uva; gpa and uva are
 *           rounded down to pages (the frontend is trusted) and only regions
 *           vmem_desc_check() accepts are added, as the daemon does
 *   u8      log2 of the ring size (low 4 bits; sizes above what fits are skipped)
 *   u64     descriptor table gpa, u64 avail gpa, u64 used gpa (misaligned ones
 *           are refused, as SET_VRING_ADDR refuses them)
 *   u16     head (for the direct walk)
 *   u16     last_avail_idx, u8 flags (bit 0 EVENT_IDX), u8 pops, u8 max_iov (1..64)
 *   rest    the guest memory contents, regions in order
 *
 * Each region is its own heap block of exactly its size, so ASan sees any read
 * past a region. Invariants: every iovec handed out lies inside one region, is
 * non-empty, and the counts stay within max_iov.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "mem.h"
#include "virtqueue.h"

#define FZ_REGIONS    4
#define FZ_REGION_MAX 16384u
#define FZ_MAX_IOV    64u

static void check_iovs(const struct vq_mem *m, const struct iovec *iov, unsigned cnt, unsigned max)
{
    FZ_REQUIRE(cnt <= max);
    for (unsigned i = 0; i < cnt; i++) {
        const uint8_t *b = iov[i].iov_base;
        size_t len = iov[i].iov_len;
        FZ_REQUIRE(len > 0);
        int inside = 0;
        for (unsigned r = 0; r < m->nregions && !inside; r++) {
            const uint8_t *h = m->r[r].host;
            inside = b >= h && len <= m->r[r].size && (size_t)(b - h) <= m->r[r].size - len;
        }
        FZ_REQUIRE(inside);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz_in in;
    fz_init(&in, data, size);

    static struct vq_mem mem;
    memset(&mem, 0, sizeof(mem));
    uint8_t *blocks[FZ_REGIONS] = {0};

    unsigned want = (fz_u8(&in) & 3) + 1;
    for (unsigned i = 0; i < FZ_REGIONS; i++) {
        struct vmem_desc d = {0};
        /* Regions come from the (trusted) frontend: page-aligned, as QEMU's are. */
        d.gpa = fz_u64(&in) & ~(uint64_t)4095;
        d.size = (fz_u16(&in) % FZ_REGION_MAX) + 1;
        d.uva = fz_u64(&in) & ~(uint64_t)4095;
        if (i >= want || vmem_desc_check(&mem, &d) != 0)
            continue;
        uint8_t *host = malloc(d.size);
        if (!host)
            abort();
        blocks[i] = host;
        struct vmem_region *r = &mem.r[mem.nregions++];
        r->gpa = d.gpa;
        r->size = d.size;
        r->uva = d.uva;
        r->host = host;
    }

    unsigned num = 1u << (fz_u8(&in) & 15);
    uint64_t desc_gpa = fz_u64(&in), avail_gpa = fz_u64(&in), used_gpa = fz_u64(&in);
    uint16_t head = fz_u16(&in);
    uint16_t last_avail = fz_u16(&in);
    uint8_t flags = fz_u8(&in);
    unsigned pops = fz_u8(&in);
    unsigned max_iov = (fz_u8(&in) % FZ_MAX_IOV) + 1;

    for (unsigned i = 0; i < mem.nregions; i++)
        fz_fill(&in, mem.r[i].host, mem.r[i].size);

    static struct iovec rd[FZ_MAX_IOV], wr[FZ_MAX_IOV];
    unsigned rd_cnt, wr_cnt;

    /* The ring parts as the daemon places them: aligned as SET_VRING_ADDR demands
     * (virtio: 16, 2 and 4 bytes), each contiguous in one region. */
    if ((desc_gpa & 15) || (avail_gpa & 1) || (used_gpa & 3))
        desc_gpa = avail_gpa = used_gpa = UINT64_MAX;
    const struct vring_desc *table = vmem_gpa_host(&mem, desc_gpa, vq_desc_bytes(num));
    if (table) {
        int r = vq_walk_chain(&mem, table, num, head, rd, &rd_cnt, wr, &wr_cnt, max_iov);
        FZ_REQUIRE(r == 0 || r == -EINVAL || r == -ELOOP || r == -EFAULT || r == -E2BIG);
        if (r == 0) {
            check_iovs(&mem, rd, rd_cnt, max_iov);
            check_iovs(&mem, wr, wr_cnt, max_iov);
        }
    }

    struct vq_ring ring = {
        .num = num,
        .desc = (struct vring_desc *)table,
        .avail = vmem_gpa_host(&mem, avail_gpa, vq_avail_bytes(num)),
        .used = vmem_gpa_host(&mem, used_gpa, vq_used_bytes(num)),
        .event_idx = flags & 1,
        .last_avail_idx = last_avail,
        .used_idx = last_avail,
    };
    if (ring.desc && ring.avail && ring.used) {
        for (unsigned i = 0; i < pops; i++) {
            uint16_t h = 0;
            int r = vq_ring_pop(&ring, &mem, &h, rd, &rd_cnt, wr, &wr_cnt, max_iov);
            if (r == 0)
                break; /* empty */
            if (r < 0 && r != -E2BIG)
                break; /* broken ring: the daemon stops the queue */
            if (r == 1) {
                check_iovs(&mem, rd, rd_cnt, max_iov);
                check_iovs(&mem, wr, wr_cnt, max_iov);
            }
            FZ_REQUIRE(h < num);
            vq_ring_push(&ring, h, (uint32_t)i);
            (void)vq_ring_should_notify(&ring);
        }
        (void)vq_ring_has_work(&ring);
        vq_ring_disable_notify(&ring);
        (void)vq_ring_enable_notify(&ring);
    }

    for (unsigned i = 0; i < FZ_REGIONS; i++)
        free(blocks[i]);
    return 0;
}
