/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest memory as QEMU presents it to a vhost-user backend: memfd-backed
 * regions at guest-physical addresses, each mapped in our address space; the
 * SET_MEM_TABLE entries carry our mapping addresses as userspace_addr.
 *
 * The regions are mapped in REVERSE order inside one reservation, each followed
 * by an inaccessible guard page, so two regions adjacent in guest-physical space
 * are never adjacent here: a buffer straddling them must be split by whoever
 * reads it.
 *
 * The allocator is first fit over a sorted array of allocated blocks (guest
 * memory is small and allocations are set up once, not per request).
 * Locking: blocks, nblocks, cap, allocated and rr are protected by m->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "vfe.h"
#include "vfe_i.h"

#define VFE_PAGE 4096ull
/* Ordinary blocks keep this far from a boundary between GPA-adjacent regions,
 * so straddling blocks of up to twice this size always find room there. */
#define VFE_STRADDLE_WINDOW (1ull << 20)

struct vfe_mem_region_i {
    uint64_t gpa;
    uint64_t size;
    uint64_t file_off;
    uint8_t *hva;
};

struct vfe_mem_block {
    uint64_t gpa;
    uint64_t len;
};

struct vfe_mem {
    int fd;
    void *reserve;
    size_t reserve_len;
    unsigned n;
    struct vfe_mem_region_i r[VFE_MEM_MAX_REGIONS];

    pthread_mutex_t lock;
    struct vfe_mem_block *blocks; /* sorted by gpa; protected by lock */
    size_t nblocks, cap;          /* protected by lock */
    uint64_t allocated;           /* protected by lock */
    unsigned rr;                  /* next region to try; protected by lock */
};

void vfe_mem_default_config(struct vfe_mem_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->nregions = 4;
    cfg->gpa[0] = 0;
    cfg->size[0] = 16ull << 20;
    cfg->gpa[1] = 0x100000000ull;
    cfg->size[1] = 64ull << 20;
    cfg->gpa[2] = cfg->gpa[1] + cfg->size[1]; /* adjacent to 1 */
    cfg->size[2] = 64ull << 20;
    cfg->gpa[3] = cfg->gpa[2] + cfg->size[2]; /* adjacent to 2 */
    cfg->size[3] = 32ull << 20;
}

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

static int check_config(const struct vfe_mem_config *cfg)
{
    if (cfg->nregions == 0 || cfg->nregions > VFE_MEM_MAX_REGIONS)
        return -EINVAL;
    for (unsigned i = 0; i < cfg->nregions; i++) {
        if (cfg->size[i] == 0 || cfg->size[i] % VFE_PAGE || cfg->gpa[i] % VFE_PAGE)
            return -EINVAL;
        if (cfg->gpa[i] + cfg->size[i] < cfg->gpa[i])
            return -EINVAL;
        for (unsigned j = 0; j < i; j++)
            if (overlaps(cfg->gpa[i], cfg->size[i], cfg->gpa[j], cfg->size[j]))
                return -EINVAL;
    }
    return 0;
}

int vfe_mem_new(const struct vfe_mem_config *cfg_in, struct vfe_mem **out)
{
    struct vfe_mem_config defcfg;
    const struct vfe_mem_config *cfg = cfg_in;
    if (!cfg || cfg->nregions == 0) {
        vfe_mem_default_config(&defcfg);
        cfg = &defcfg;
    }
    int r = check_config(cfg);
    if (r < 0)
        return r;

    struct vfe_mem *m = g_new0(struct vfe_mem, 1);
    pthread_mutex_init(&m->lock, NULL);
    m->fd = memfd_create("vfe-guest-ram", MFD_CLOEXEC);
    if (m->fd < 0) {
        r = -errno;
        goto out_free;
    }
    uint64_t total = 0;
    for (unsigned i = 0; i < cfg->nregions; i++)
        total += cfg->size[i];
    if (ftruncate(m->fd, (off_t)total) < 0) {
        r = -errno;
        goto out_free;
    }
    m->reserve_len = total + VFE_PAGE * (cfg->nregions + 1);
    m->reserve = mmap(NULL, m->reserve_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (m->reserve == MAP_FAILED) {
        m->reserve = NULL;
        r = -errno;
        goto out_free;
    }
    m->n = cfg->nregions;
    uint64_t file_off = 0;
    for (unsigned i = 0; i < m->n; i++) {
        m->r[i].gpa = cfg->gpa[i];
        m->r[i].size = cfg->size[i];
        m->r[i].file_off = file_off;
        file_off += cfg->size[i];
    }
    /* Reverse order, a guard page after each. */
    uint8_t *at = (uint8_t *)m->reserve + VFE_PAGE;
    for (unsigned k = m->n; k-- > 0;) {
        void *p = mmap(at, m->r[k].size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, m->fd,
                       (off_t)m->r[k].file_off);
        if (p == MAP_FAILED) {
            r = -errno;
            goto out_free;
        }
        m->r[k].hva = p;
        at += m->r[k].size + VFE_PAGE;
    }
    *out = m;
    return 0;

out_free:
    vfe_mem_free(m);
    return r;
}

void vfe_mem_free(struct vfe_mem *m)
{
    if (!m)
        return;
    if (m->reserve)
        munmap(m->reserve, m->reserve_len);
    if (m->fd >= 0)
        close(m->fd);
    pthread_mutex_destroy(&m->lock);
    g_free(m->blocks);
    g_free(m);
}

unsigned vfe_mem_nregions(const struct vfe_mem *m)
{
    return m->n;
}

void vfe_mem_region(const struct vfe_mem *m, unsigned i, struct vfe_vu_region *r)
{
    memset(r, 0, sizeof(*r));
    if (i >= m->n)
        return;
    r->guest_phys_addr = m->r[i].gpa;
    r->memory_size = m->r[i].size;
    r->userspace_addr = (uint64_t)(uintptr_t)m->r[i].hva;
    r->mmap_offset = m->r[i].file_off;
}

int vfe_mem_fd(const struct vfe_mem *m)
{
    return m->fd;
}

/* The region holding gpa, or NULL. */
static const struct vfe_mem_region_i *find_region(const struct vfe_mem *m, uint64_t gpa)
{
    for (unsigned i = 0; i < m->n; i++)
        if (gpa >= m->r[i].gpa && gpa - m->r[i].gpa < m->r[i].size)
            return &m->r[i];
    return NULL;
}

void *vfe_mem_gpa_to_hva(const struct vfe_mem *m, uint64_t gpa, uint64_t len)
{
    const struct vfe_mem_region_i *r = find_region(m, gpa);
    if (!r || len > r->size - (gpa - r->gpa))
        return NULL;
    return r->hva + (gpa - r->gpa);
}

int vfe_mem_hva_to_gpa(const struct vfe_mem *m, const void *hva, uint64_t len, uint64_t *gpa)
{
    uintptr_t a = (uintptr_t)hva;
    for (unsigned i = 0; i < m->n; i++) {
        uintptr_t b = (uintptr_t)m->r[i].hva;
        if (a >= b && a - b < m->r[i].size) {
            if (len > m->r[i].size - (a - b))
                return -EFAULT;
            *gpa = m->r[i].gpa + (a - b);
            return 0;
        }
    }
    return -EFAULT;
}

/* Walks [gpa, gpa+len) region by region; op copies one piece. */
static int walk(const struct vfe_mem *m, uint64_t gpa, size_t len,
                void (*op)(void *hva, size_t n, void *ctx), void *ctx)
{
    while (len > 0) {
        const struct vfe_mem_region_i *r = find_region(m, gpa);
        if (!r)
            return -EFAULT;
        uint64_t room = r->size - (gpa - r->gpa);
        size_t n = len < room ? len : (size_t)room;
        op(r->hva + (gpa - r->gpa), n, ctx);
        gpa += n;
        len -= n;
    }
    return 0;
}

static void op_write(void *hva, size_t n, void *ctx)
{
    const uint8_t **src = ctx;
    memcpy(hva, *src, n);
    *src += n;
}

static void op_read(void *hva, size_t n, void *ctx)
{
    uint8_t **dst = ctx;
    memcpy(*dst, hva, n);
    *dst += n;
}

static void op_fill(void *hva, size_t n, void *ctx)
{
    memset(hva, *(int *)ctx, n);
}

int vfe_mem_write(struct vfe_mem *m, uint64_t gpa, const void *src, size_t len)
{
    const uint8_t *p = src;
    return walk(m, gpa, len, op_write, &p);
}

int vfe_mem_read(const struct vfe_mem *m, uint64_t gpa, void *dst, size_t len)
{
    uint8_t *p = dst;
    return walk(m, gpa, len, op_read, &p);
}

int vfe_mem_fill(struct vfe_mem *m, uint64_t gpa, int byte, size_t len)
{
    return walk(m, gpa, len, op_fill, &byte);
}

/* ---- Allocator --------------------------------------------------------------- */

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static uint64_t block_end(const void *blocks, size_t i)
{
    const struct vfe_mem_block *b = blocks;
    return b[i].gpa + b[i].len;
}

/* Index of the first block ending after gpa. Caller holds m->lock. */
static size_t first_block_after_locked(const struct vfe_mem *m, uint64_t gpa)
{
    return vfe_first_end_after(m->blocks, m->nblocks, gpa, block_end);
}

static int insert_locked(struct vfe_mem *m, size_t at, uint64_t gpa, uint64_t len)
{
    if (m->nblocks == m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        m->blocks = g_renew(struct vfe_mem_block, m->blocks, ncap);
        m->cap = ncap;
    }
    memmove(&m->blocks[at + 1], &m->blocks[at], (m->nblocks - at) * sizeof(m->blocks[0]));
    m->blocks[at].gpa = gpa;
    m->blocks[at].len = len;
    m->nblocks++;
    m->allocated += len;
    return 0;
}

/* First fit in [lo, hi). Caller holds m->lock. */
static int alloc_range_locked(struct vfe_mem *m, uint64_t lo, uint64_t hi, uint64_t size,
                              uint64_t align, uint64_t *gpa)
{
    uint64_t cand = align_up(lo, align);
    size_t i = first_block_after_locked(m, cand);
    for (; i < m->nblocks; i++) {
        if (cand + size <= m->blocks[i].gpa || cand + size > hi)
            break;
        cand = align_up(m->blocks[i].gpa + m->blocks[i].len, align);
    }
    if (cand < lo || cand + size > hi || cand + size < cand)
        return -ENOMEM;
    *gpa = cand;
    return insert_locked(m, i, cand, size);
}

static int check_size(uint64_t size, uint64_t *align)
{
    if (size == 0 || size > (1ull << 40))
        return -EINVAL;
    if (*align == 0)
        *align = 64;
    if (*align & (*align - 1))
        return -EINVAL;
    return 0;
}

/* The part of region i ordinary blocks may use: minus the straddle windows at
 * ends that touch another region. */
static void usable_range(const struct vfe_mem *m, unsigned i, uint64_t *lo, uint64_t *hi)
{
    *lo = m->r[i].gpa;
    *hi = m->r[i].gpa + m->r[i].size;
    if (m->r[i].size <= 4 * VFE_STRADDLE_WINDOW)
        return;
    for (unsigned j = 0; j < m->n; j++) {
        if (j == i)
            continue;
        if (m->r[j].gpa + m->r[j].size == m->r[i].gpa)
            *lo += VFE_STRADDLE_WINDOW;
        if (m->r[i].gpa + m->r[i].size == m->r[j].gpa)
            *hi -= VFE_STRADDLE_WINDOW;
    }
}

/* Caller holds m->lock. */
static int alloc_region_locked(struct vfe_mem *m, unsigned i, uint64_t size, uint64_t align,
                               uint64_t *gpa)
{
    uint64_t lo, hi;
    usable_range(m, i, &lo, &hi);
    return alloc_range_locked(m, lo, hi, size, align, gpa);
}

int vfe_mem_alloc_in(struct vfe_mem *m, unsigned region, uint64_t size, uint64_t align,
                     uint64_t *gpa)
{
    int r = check_size(size, &align);
    if (r < 0)
        return r;
    if (region >= m->n)
        return -EINVAL;
    pthread_mutex_lock(&m->lock);
    r = alloc_region_locked(m, region, size, align, gpa);
    pthread_mutex_unlock(&m->lock);
    return r;
}

int vfe_mem_alloc(struct vfe_mem *m, uint64_t size, uint64_t align, uint64_t *gpa)
{
    int r = check_size(size, &align);
    if (r < 0)
        return r;
    pthread_mutex_lock(&m->lock);
    /* Round robin over the regions so buffers land in all of them. */
    r = -ENOMEM;
    for (unsigned k = 0; k < m->n && r < 0; k++) {
        unsigned i = (m->rr + k) % m->n;
        r = alloc_region_locked(m, i, size, align, gpa);
    }
    m->rr = (m->rr + 1) % m->n;
    pthread_mutex_unlock(&m->lock);
    return r;
}

int vfe_mem_alloc_straddle(struct vfe_mem *m, uint64_t size, uint64_t *gpa)
{
    if (size < 2 || size > (1ull << 30))
        return -EINVAL;
    int r = -ENOENT;
    pthread_mutex_lock(&m->lock);
    for (unsigned i = 0; i < m->n; i++) {
        for (unsigned j = 0; j < m->n; j++) {
            uint64_t boundary = m->r[i].gpa + m->r[i].size;
            if (i == j || boundary != m->r[j].gpa)
                continue;
            if (size / 2 > m->r[i].size || size - size / 2 > m->r[j].size)
                continue;
            /* Half on each side, the low half 64-byte aligned. */
            uint64_t half = size / 2 & ~63ull;
            if (half == 0)
                half = size / 2;
            uint64_t lo = boundary - half;
            size_t at = first_block_after_locked(m, lo);
            if (at < m->nblocks && m->blocks[at].gpa < lo + size) {
                r = -EBUSY; /* one straddling block per boundary */
                continue;
            }
            *gpa = lo;
            r = insert_locked(m, at, lo, size);
            goto out_unlock;
        }
    }
out_unlock:
    pthread_mutex_unlock(&m->lock);
    return r;
}

uint64_t vfe_mem_straddle_boundary(const struct vfe_mem *m, uint64_t gpa, uint64_t len)
{
    const struct vfe_mem_region_i *r = find_region(m, gpa);
    if (!r)
        return 0;
    uint64_t end = r->gpa + r->size;
    if (len > end - gpa && find_region(m, end))
        return end;
    return 0;
}

int vfe_mem_free_block(struct vfe_mem *m, uint64_t gpa)
{
    int r = -ENOENT;
    pthread_mutex_lock(&m->lock);
    size_t i = first_block_after_locked(m, gpa);
    if (i < m->nblocks && m->blocks[i].gpa == gpa) {
        m->allocated -= m->blocks[i].len;
        memmove(&m->blocks[i], &m->blocks[i + 1], (m->nblocks - i - 1) * sizeof(m->blocks[0]));
        m->nblocks--;
        r = 0;
    }
    pthread_mutex_unlock(&m->lock);
    return r;
}

uint64_t vfe_mem_allocated(const struct vfe_mem *m)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->lock);
    uint64_t v = m->allocated;
    pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
    return v;
}
