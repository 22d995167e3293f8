/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct vmem_map {
    int refcount; /* atomic */
    void *base;
    size_t len;
    int fd; /* the region's fd, kept for a restart (vmem_region_fd) */
};

static const struct vmem_region *vmem_find_gpa(const struct vq_mem *m, uint64_t gpa)
{
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct vmem_region *r = &m->r[i];
        if (gpa >= r->gpa && gpa - r->gpa < r->size)
            return r;
    }
    return NULL;
}

int vmem_gpa_iov(const struct vq_mem *m, uint64_t gpa, uint64_t len, struct iovec *iov,
                 unsigned max, unsigned *cnt)
{
    if (len && gpa > UINT64_MAX - (len - 1))
        return -EFAULT;
    while (len) {
        const struct vmem_region *r = vmem_find_gpa(m, gpa);
        if (!r)
            return -EFAULT;
        uint64_t off = gpa - r->gpa;
        uint64_t chunk = r->size - off;
        if (chunk > len)
            chunk = len;
        if (chunk > SIZE_MAX)
            return -EFAULT;
        if (*cnt >= max)
            return -E2BIG;
        iov[*cnt].iov_base = r->host + off;
        iov[*cnt].iov_len = (size_t)chunk;
        (*cnt)++;
        len -= chunk;
        gpa += chunk; /* cannot wrap: checked above */
    }
    return 0;
}

void *vmem_gpa_host(const struct vq_mem *m, uint64_t gpa, uint64_t len)
{
    const struct vmem_region *r = vmem_find_gpa(m, gpa);
    if (!r || len > r->size - (gpa - r->gpa))
        return NULL;
    return r->host + (gpa - r->gpa);
}

void *vmem_uva_host(const struct vq_mem *m, uint64_t uva, uint64_t len)
{
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct vmem_region *r = &m->r[i];
        if (uva >= r->uva && uva - r->uva < r->size) {
            if (len > r->size - (uva - r->uva))
                return NULL;
            return r->host + (uva - r->uva);
        }
    }
    return NULL;
}

/* ---- Tables ---------------------------------------------------------------- */

static void vmem_map_unref(struct vmem_map *map)
{
    if (!map || __atomic_sub_fetch(&map->refcount, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    munmap(map->base, map->len);
    close(map->fd);
    free(map);
}

struct vmem_table *vmem_table_new(void)
{
    struct vmem_table *t = calloc(1, sizeof(*t));
    if (t)
        t->refcount = 1;
    return t;
}

struct vmem_table *vmem_table_copy(const struct vmem_table *t)
{
    struct vmem_table *n = vmem_table_new();
    if (!n)
        return NULL;
    n->mem = t->mem;
    for (unsigned i = 0; i < n->mem.nregions; i++)
        if (n->mem.r[i].map)
            __atomic_add_fetch(&n->mem.r[i].map->refcount, 1, __ATOMIC_RELAXED);
    return n;
}

struct vmem_table *vmem_table_ref(struct vmem_table *t)
{
    __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void vmem_table_unref(struct vmem_table *t)
{
    if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (unsigned i = 0; i < t->mem.nregions; i++)
        vmem_map_unref(t->mem.r[i].map);
    free(t);
}

static bool vmem_overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    /* [a, a+alen) and [b, b+blen), both known not to wrap. */
    return a < b + blen && b < a + alen;
}

int vmem_desc_check(const struct vq_mem *m, const struct vmem_desc *d)
{
    if (d->size == 0 || d->size > SIZE_MAX)
        return -EINVAL;
    if (d->gpa > UINT64_MAX - d->size || d->uva > UINT64_MAX - d->size ||
        d->mmap_offset > UINT64_MAX - d->size || d->mmap_offset + d->size > SIZE_MAX ||
        d->mmap_offset + d->size > (uint64_t)INT64_MAX)
        return -EINVAL;
    if (m->nregions >= VMEM_MAX_REGIONS)
        return -ENOSPC;
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct vmem_region *r = &m->r[i];
        if (vmem_overlaps(d->gpa, d->size, r->gpa, r->size) ||
            vmem_overlaps(d->uva, d->size, r->uva, r->size))
            return -EEXIST;
    }
    return 0;
}

int vmem_table_add(struct vmem_table *t, const struct vmem_desc *d, int fd)
{
    int ret = vmem_desc_check(&t->mem, d);
    if (ret < 0)
        return ret;

    /*
     * Only the region's own part of the fd, from the page (or huge page: a
     * hugetlbfs fd's st_blksize) holding its first byte: a DAX window region
     * is a 2 MiB range of a host file at any file offset.
     */
    struct stat st;
    uint64_t align = 4096;
    if (fstat(fd, &st) == 0 && st.st_blksize > 0 && (st.st_blksize & (st.st_blksize - 1)) == 0 &&
        (uint64_t)st.st_blksize <= d->mmap_offset)
        align = (uint64_t)st.st_blksize;
    uint64_t start = d->mmap_offset & ~(align - 1);
    size_t len = (size_t)(d->mmap_offset - start + d->size);
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd,
                      (off_t)start);
    if (base == MAP_FAILED && start != 0) {
        /* An fd whose mappings must start at 0 (an alignment we did not guess). */
        start = 0;
        len = (size_t)(d->mmap_offset + d->size);
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    }
    if (base == MAP_FAILED)
        return -errno;
    struct vmem_map *map = calloc(1, sizeof(*map));
    /* A restart hands the region to the next process: the fd is kept. */
    int keep = map ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (!map || keep < 0) {
        int e = map ? errno : ENOMEM;
        munmap(base, len);
        free(map);
        return -e;
    }
    map->fd = keep;
    map->refcount = 1;
    map->base = base;
    map->len = len;
    /* The guest's memory is no use in a core dump, and it may be huge. */
    madvise(base, len, MADV_DONTDUMP);

    struct vmem_region *r = &t->mem.r[t->mem.nregions++];
    r->gpa = d->gpa;
    r->size = d->size;
    r->uva = d->uva;
    r->mmap_offset = d->mmap_offset;
    r->host = (uint8_t *)base + (d->mmap_offset - start);
    r->map = map;
    return 0;
}

int vmem_region_fd(const struct vmem_region *r)
{
    return r->map ? r->map->fd : -1;
}

int vmem_table_remove(struct vmem_table *t, const struct vmem_desc *d)
{
    for (unsigned i = 0; i < t->mem.nregions; i++) {
        struct vmem_region *r = &t->mem.r[i];
        if (r->gpa == d->gpa && r->size == d->size && r->uva == d->uva) {
            vmem_map_unref(r->map);
            memmove(r, r + 1, (t->mem.nregions - i - 1) * sizeof(*r));
            t->mem.nregions--;
            return 0;
        }
    }
    return -ENOENT;
}

/* ---- The dirty page log ------------------------------------------------------ */

int vmem_log_map(int fd, uint64_t size, uint64_t offset, struct vmem_log **out)
{
    struct stat st;

    *out = NULL;
    if (size == 0 || size > VMEM_LOG_MAX || offset > (uint64_t)INT64_MAX - size)
        return -EINVAL;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < offset + size)
        return -EINVAL;
    uint64_t start = offset & ~(uint64_t)(4096 - 1);
    size_t len = (size_t)(offset - start + size);
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    if (base == MAP_FAILED)
        return -errno;
    struct vmem_log *l = calloc(1, sizeof(*l));
    if (!l) {
        munmap(base, len);
        return -ENOMEM;
    }
    l->map = base;
    l->map_len = len;
    l->bits = (uint8_t *)base + (offset - start);
    l->size = size;
    *out = l;
    return 0;
}

void vmem_log_free(struct vmem_log *l)
{
    if (!l)
        return;
    munmap(l->map, l->map_len);
    free(l);
}

void vmem_log_mark_bits(uint8_t *bits, uint64_t size, uint64_t gpa, uint64_t len)
{
    if (len == 0 || size == 0)
        return;
    uint64_t last = gpa > UINT64_MAX - (len - 1) ? UINT64_MAX : gpa + (len - 1);
    uint64_t first_page = gpa / VMEM_LOG_PAGE, last_page = last / VMEM_LOG_PAGE;
    uint64_t first_byte = first_page / 8;

    if (first_byte >= size)
        return;
    if (last_page / 8 >= size)
        last_page = size * 8 - 1; /* the log's last page: size <= VMEM_LOG_MAX, no wrap */
    for (uint64_t byte = first_byte; byte <= last_page / 8; byte++) {
        unsigned lo = byte == first_byte ? (unsigned)(first_page % 8) : 0;
        unsigned hi = byte == last_page / 8 ? (unsigned)(last_page % 8) : 7;
        uint8_t mask = (uint8_t)((0xffu >> (7 - hi)) & (0xffu << lo));
        __atomic_fetch_or(&bits[byte], mask, __ATOMIC_RELEASE);
    }
}

void vmem_log_mark(struct vmem_log *l, uint64_t gpa, uint64_t len)
{
    vmem_log_mark_bits(l->bits, l->size, gpa, len);
}

void vmem_log_mark_iov(struct vmem_log *l, const struct vq_mem *m, const struct iovec *iov,
                       unsigned cnt, size_t len)
{
    for (unsigned i = 0; i < cnt && len; i++) {
        size_t n = iov[i].iov_len < len ? iov[i].iov_len : len;
        const uint8_t *p = iov[i].iov_base;
        len -= n;
        if (!n)
            continue;
        for (unsigned j = 0; j < m->nregions; j++) {
            const struct vmem_region *r = &m->r[j];
            if (p >= r->host && (uint64_t)(p - r->host) < r->size) {
                vmem_log_mark(l, r->gpa + (uint64_t)(p - r->host), n);
                break;
            }
        }
    }
}
