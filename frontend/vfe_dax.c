/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The frontend's side of a virtio-fs DAX window: a reserved range of our
 * address space that the backend fills with file mappings through the backend
 * request channel, the way a VMM does for its guest.
 *
 * Two protocols (see the project's dax notes), chosen at creation:
 *   VFE_DAX_SHMEM   mainline BACKEND_SHMEM_MAP (9) / BACKEND_SHMEM_UNMAP (10):
 *                   one mapping per message; mapping over an existing mapping
 *                   is refused, an unmap must name exactly one whole mapping.
 *                   As QEMU 11.1 does: every range is mapped read-write
 *                   whatever the flags (a read-only fd fails), and a range
 *                   must lie inside its file (QEMU refuses a non-empty file
 *                   that is shorter and grows an empty one: both refused here).
 *   VFE_DAX_LEGACY  virtio-fs branch SLAVE_FS_MAP (6) / SLAVE_FS_UNMAP (7): up
 *                   to 8 entries per message, later maps replace what they
 *                   cover, len ~0 unmaps the whole window.
 * Messages of the other protocol are refused (and counted), like a frontend
 * that does not know them. Rules are enforced strictly so tests catch a
 * backend that breaks them. Unmapped ranges are anonymous PROT_NONE, never
 * holes another mmap could land in.
 *
 * With vfe_dax_report_regions (shmem only), as QEMU 11.1 does: the map is
 * answered before the guest sees it, and committed after (the file appears in
 * the window, then ADD_MEM_REG); an unmap is answered, then the range goes and
 * REM_MEM_REG follows (vfe_dax_post, on the channel thread after the reply).
 *
 * Mapping range state:
 *   UNMAPPED --map--> MAPPED --unmap (exact)--> UNMAPPED
 *   reporting regions:
 *   UNMAPPED --map (reply)--> PENDING (zeros) --commit (ADD_MEM_REG)--> MAPPED
 *   MAPPED --unmap (reply)--> UNMAPPED, then the range dropped (REM_MEM_REG)
 * Locking: everything below the window fields is protected by x->lock (the
 * channel thread maps while a test thread queries).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <glib.h>

#include "vfe.h"
#include "vfe_i.h"

#define VFE_DAX_PAGE 4096ull
#define VFE_DAX_LEGACY_ENTRIES 8u
#define VFE_DAX_LEGACY_R 1ull
#define VFE_DAX_LEGACY_W 2ull

struct vfe_dax_map {
    uint64_t off;
    uint64_t len;
    bool pending; /* answered, not committed: the guest sees zeros there */
};

/* What the reply to the last map or unmap leaves for vfe_dax_post to do. */
struct vfe_dax_commit {
    enum { VFE_DAX_COMMIT_NONE, VFE_DAX_COMMIT_MAP, VFE_DAX_COMMIT_UNMAP } op;
    uint64_t off, len, fd_offset;
    int fd;        /* the file (a dup, as QEMU keeps it) */
    void *staged;  /* the file mapped away from the window, moved in at commit */
};

struct vfe_dax {
    enum vfe_dax_proto proto;
    uint8_t *window;
    uint64_t size;

    pthread_mutex_t lock;
    struct vfe_dax_map *maps; /* sorted by off, disjoint; protected by lock */
    size_t nmaps, cap;        /* protected by lock */
    struct vfe_dax_stats st;  /* protected by lock */
    bool past_eof;            /* vfe_dax_allow_past_eof; protected by lock */

    /* vfe_dax_report_regions: set before the device starts; commit is the
     * channel thread's alone (the handler fills it, vfe_dax_post empties it). */
    struct vfe_dev *dev;
    uint64_t gpa;
    unsigned commit_delay_us;
    unsigned removal_delay_us; /* vfe_dax_delay_removals */
    struct vfe_dax_commit commit;
};

struct vfe_dax_shmem_msg {
    uint8_t shmid;
    uint8_t padding[7];
    uint64_t fd_offset;
    uint64_t shm_offset;
    uint64_t len;
    uint64_t flags;
};
_Static_assert(sizeof(struct vfe_dax_shmem_msg) == 40, "BACKEND_SHMEM_MAP payload");

struct vfe_dax_legacy_msg {
    uint64_t fd_offset[VFE_DAX_LEGACY_ENTRIES];
    uint64_t c_offset[VFE_DAX_LEGACY_ENTRIES];
    uint64_t len[VFE_DAX_LEGACY_ENTRIES];
    uint64_t flags[VFE_DAX_LEGACY_ENTRIES];
};
_Static_assert(sizeof(struct vfe_dax_legacy_msg) == 256, "SLAVE_FS_MAP payload");

int vfe_dax_new(uint64_t size, enum vfe_dax_proto proto, struct vfe_dax **out)
{
    if (size == 0 || size % VFE_DAX_PAGE || size > (1ull << 40))
        return -EINVAL;
    void *w = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == MAP_FAILED)
        return -errno;
    struct vfe_dax *x = g_new0(struct vfe_dax, 1);
    x->proto = proto;
    x->window = w;
    x->size = size;
    x->commit.fd = -1;
    pthread_mutex_init(&x->lock, NULL);
    *out = x;
    return 0;
}

void vfe_dax_free(struct vfe_dax *x)
{
    if (!x)
        return;
    munmap(x->window, x->size);
    vufs_close(&x->commit.fd);
    if (x->commit.staged)
        munmap(x->commit.staged, x->commit.len);
    pthread_mutex_destroy(&x->lock);
    g_free(x->maps);
    g_free(x);
}

void *vfe_dax_window(const struct vfe_dax *x)
{
    return x->window;
}

uint64_t vfe_dax_size(const struct vfe_dax *x)
{
    return x->size;
}

void vfe_dax_allow_past_eof(struct vfe_dax *x, bool allow)
{
    pthread_mutex_lock(&x->lock);
    x->past_eof = allow;
    pthread_mutex_unlock(&x->lock);
}

void vfe_dax_get_stats(struct vfe_dax *x, struct vfe_dax_stats *st)
{
    pthread_mutex_lock(&x->lock);
    *st = x->st;
    st->mappings = (unsigned)x->nmaps;
    pthread_mutex_unlock(&x->lock);
}

/* [off, off+len) inside the window, page aligned, not empty. */
static bool range_ok(const struct vfe_dax *x, uint64_t off, uint64_t len)
{
    return len && off % VFE_DAX_PAGE == 0 && len % VFE_DAX_PAGE == 0 && off < x->size &&
           len <= x->size - off;
}

static uint64_t map_end(const void *maps, size_t i)
{
    const struct vfe_dax_map *m = maps;
    return m[i].off + m[i].len;
}

/* First mapping ending after off. Caller holds x->lock. */
static size_t first_after_locked(const struct vfe_dax *x, uint64_t off)
{
    return vfe_first_end_after(x->maps, x->nmaps, off, map_end);
}

static bool overlaps_locked(const struct vfe_dax *x, uint64_t off, uint64_t len)
{
    size_t i = first_after_locked(x, off);
    return i < x->nmaps && x->maps[i].off < off + len;
}

static void insert_locked(struct vfe_dax *x, uint64_t off, uint64_t len, bool pending)
{
    size_t i = first_after_locked(x, off);
    if (x->nmaps == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 64;
        x->maps = g_renew(struct vfe_dax_map, x->maps, x->cap);
    }
    memmove(&x->maps[i + 1], &x->maps[i], (x->nmaps - i) * sizeof(x->maps[0]));
    x->maps[i] = (struct vfe_dax_map){ off, len, pending };
    x->nmaps++;
}

/* Removes [off, off+len) from the table, splitting mappings it cuts. */
static void punch_locked(struct vfe_dax *x, uint64_t off, uint64_t len)
{
    uint64_t end = off + len;
    size_t i = first_after_locked(x, off);
    while (i < x->nmaps && x->maps[i].off < end) {
        struct vfe_dax_map m = x->maps[i];
        uint64_t mend = m.off + m.len;
        memmove(&x->maps[i], &x->maps[i + 1], (x->nmaps - i - 1) * sizeof(x->maps[0]));
        x->nmaps--;
        if (m.off < off)
            insert_locked(x, m.off, off - m.off, m.pending);
        if (mend > end)
            insert_locked(x, end, mend - end, m.pending);
        i = first_after_locked(x, off);
    }
}

static int map_fd(struct vfe_dax *x, int fd, uint64_t fd_off, uint64_t off, uint64_t len,
                  int prot)
{
    void *p = mmap(x->window + off, len, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)fd_off);
    return p == MAP_FAILED ? -errno : 0;
}

static int unmap_range(struct vfe_dax *x, uint64_t off, uint64_t len)
{
    void *p = mmap(x->window + off, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? -errno : 0;
}

/* A map or unmap message's payload, exactly size bytes, with one fd for a map
 * and none for an unmap: copied to dst, or false. */
static bool take_payload(const struct vfe_msg *m, void *dst, size_t size, unsigned nfds, bool map)
{
    if (m->size != size || nfds != (map ? 1u : 0u))
        return false;
    memcpy(dst, m->payload.raw, size);
    return true;
}

/*
 * QEMU 11.1's map before its reply: the file is mapped (its RAM block: a
 * read-only fd fails here) but not yet in the guest's memory map, where the
 * range still reads as zeros and drops stores. Caller holds x->lock.
 */
static int stage_map_locked(struct vfe_dax *x, int fd, const struct vfe_dax_shmem_msg *s)
{
    void *staged = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)s->fd_offset);
    if (staged == MAP_FAILED)
        return -errno;
    _cleanup_close_ int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    void *z = dup < 0 ? MAP_FAILED
                      : mmap(x->window + s->shm_offset, s->len, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (z == MAP_FAILED) {
        int r = -errno;
        munmap(staged, s->len);
        return r;
    }
    insert_locked(x, s->shm_offset, s->len, true);
    x->st.maps++;
    x->commit = (struct vfe_dax_commit){ .op = VFE_DAX_COMMIT_MAP, .off = s->shm_offset,
                                         .len = s->len, .fd_offset = s->fd_offset,
                                         .fd = TAKE_FD(dup), .staged = staged };
    return 0;
}

/* Caller holds x->lock. */
static int shmem_locked(struct vfe_dax *x, const struct vfe_msg *m, const int *fds,
                        unsigned nfds, bool map)
{
    struct vfe_dax_shmem_msg s;
    if (!take_payload(m, &s, sizeof(s), nfds, map))
        return -EINVAL;
    if (s.shmid != 0 || !range_ok(x, s.shm_offset, s.len) || s.fd_offset % VFE_DAX_PAGE)
        return -EINVAL;
    if (map) {
        if (overlaps_locked(x, s.shm_offset, s.len))
            return -EEXIST; /* mainline: no mapping over a mapping */
        struct stat st;
        if (!x->past_eof && (fstat(fds[0], &st) < 0 || st.st_size <= 0 ||
                             s.fd_offset > (uint64_t)st.st_size ||
                             s.len > (uint64_t)st.st_size - s.fd_offset))
            return -EINVAL; /* QEMU: "backing store size ... is too small" */
        if (x->dev)
            return stage_map_locked(x, fds[0], &s);
        int r = map_fd(x, fds[0], s.fd_offset, s.shm_offset, s.len, PROT_READ | PROT_WRITE);
        if (r < 0)
            return r;
        insert_locked(x, s.shm_offset, s.len, false);
        x->st.maps++;
        return 0;
    }
    size_t i = first_after_locked(x, s.shm_offset);
    if (i >= x->nmaps || x->maps[i].off != s.shm_offset || x->maps[i].len != s.len)
        return -ENOENT; /* mainline: exactly one whole mapping */
    if (x->dev) {
        /* QEMU answers, then drops the range (and REM_MEM_REG follows). */
        punch_locked(x, s.shm_offset, s.len);
        x->st.unmaps++;
        x->commit = (struct vfe_dax_commit){ .op = VFE_DAX_COMMIT_UNMAP, .off = s.shm_offset,
                                             .len = s.len, .fd = -1 };
        return 0;
    }
    int r = unmap_range(x, s.shm_offset, s.len);
    if (r < 0)
        return r;
    punch_locked(x, s.shm_offset, s.len);
    x->st.unmaps++;
    return 0;
}

/* Caller holds x->lock. */
static int legacy_locked(struct vfe_dax *x, const struct vfe_msg *m, const int *fds,
                         unsigned nfds, bool map)
{
    struct vfe_dax_legacy_msg l;
    if (!take_payload(m, &l, sizeof(l), nfds, map))
        return -EINVAL;
    /* Validate every entry before touching the window. */
    for (unsigned i = 0; i < VFE_DAX_LEGACY_ENTRIES; i++) {
        if (l.len[i] == 0 || (!map && l.len[i] == UINT64_MAX))
            continue;
        if (!range_ok(x, l.c_offset[i], l.len[i]) || (map && l.fd_offset[i] % VFE_DAX_PAGE))
            return -EINVAL;
    }
    for (unsigned i = 0; i < VFE_DAX_LEGACY_ENTRIES; i++) {
        uint64_t off = l.c_offset[i], len = l.len[i];
        if (len == 0)
            continue;
        if (!map && len == UINT64_MAX) {
            off = 0;
            len = x->size;
        }
        /* The branch's frontend: protection straight from the R/W flags. */
        int prot = (l.flags[i] & VFE_DAX_LEGACY_R ? PROT_READ : 0) |
                   (l.flags[i] & VFE_DAX_LEGACY_W ? PROT_WRITE : 0);
        int r = map ? map_fd(x, fds[0], l.fd_offset[i], off, len, prot) : unmap_range(x, off, len);
        if (r < 0)
            return r;
        punch_locked(x, off, len);
        if (map) {
            insert_locked(x, off, len, false);
            x->st.maps++;
        } else {
            x->st.unmaps++;
        }
    }
    return 0;
}

uint64_t vfe_dax_handle(void *opaque, const struct vfe_msg *m, const int *fds, unsigned nfds)
{
    struct vfe_dax *x = opaque;
    int r;
    pthread_mutex_lock(&x->lock);
    bool shmem = m->request == VFE_VU_BACKEND_SHMEM_MAP || m->request == VFE_VU_BACKEND_SHMEM_UNMAP;
    bool legacy = m->request == VFE_VU_LEGACY_FS_MAP || m->request == VFE_VU_LEGACY_FS_UNMAP;
    if (shmem && x->proto == VFE_DAX_SHMEM)
        r = shmem_locked(x, m, fds, nfds, m->request == VFE_VU_BACKEND_SHMEM_MAP);
    else if (legacy && x->proto == VFE_DAX_LEGACY)
        r = legacy_locked(x, m, fds, nfds, m->request == VFE_VU_LEGACY_FS_MAP);
    else
        r = -ENOSYS;
    if (r < 0)
        x->st.rejects++;
    pthread_mutex_unlock(&x->lock);
    return r < 0 ? 1 : 0;
}

bool vfe_dax_is_mapped(struct vfe_dax *x, uint64_t off, uint64_t len)
{
    if (!len || off >= x->size || len > x->size - off)
        return false;
    pthread_mutex_lock(&x->lock);
    /* Covered without gaps by consecutive committed mappings. */
    uint64_t at = off, end = off + len;
    size_t i = first_after_locked(x, off);
    while (at < end && i < x->nmaps && x->maps[i].off <= at && !x->maps[i].pending) {
        at = x->maps[i].off + x->maps[i].len;
        i++;
    }
    pthread_mutex_unlock(&x->lock);
    return at >= end;
}

static struct vfe_vu_region region_of(const struct vfe_dax *x, uint64_t off, uint64_t len,
                                      uint64_t fd_offset)
{
    return (struct vfe_vu_region){ .guest_phys_addr = x->gpa + off, .memory_size = len,
                                   .userspace_addr = (uint64_t)(uintptr_t)(x->window + off),
                                   .mmap_offset = fd_offset };
}

void vfe_dax_reset(struct vfe_dax *x)
{
    pthread_mutex_lock(&x->lock);
    unmap_range(x, 0, x->size);
    struct vfe_dax_map *gone = x->dev ? g_memdup2(x->maps, x->nmaps * sizeof(*gone)) : NULL;
    size_t ngone = x->dev ? x->nmaps : 0;
    x->nmaps = 0;
    pthread_mutex_unlock(&x->lock);
    /* QEMU drops its mappings with the device; its listener tells the backend
     * at the next start (vfe_dev_remove_region keeps them until then). */
    for (size_t i = 0; i < ngone; i++) {
        struct vfe_vu_region r = region_of(x, gone[i].off, gone[i].len, 0);
        vfe_dev_remove_region(x->dev, &r);
    }
    g_free(gone);
}

void vfe_dax_report_regions(struct vfe_dax *x, struct vfe_dev *d, uint64_t window_gpa,
                            unsigned commit_delay_us)
{
    pthread_mutex_lock(&x->lock);
    x->dev = d;
    x->gpa = window_gpa;
    x->commit_delay_us = commit_delay_us;
    pthread_mutex_unlock(&x->lock);
}

void vfe_dax_delay_removals(struct vfe_dax *x, unsigned delay_us)
{
    pthread_mutex_lock(&x->lock);
    x->removal_delay_us = delay_us;
    pthread_mutex_unlock(&x->lock);
}

uint64_t vfe_dax_gpa(const struct vfe_dax *x, uint64_t off)
{
    return x->gpa + off;
}

/*
 * QEMU 11.1 after its reply: the map's memory_region_transaction_commit puts
 * the file in the guest's memory map and its vhost listener sends ADD_MEM_REG;
 * the unmap's subregion removal sends REM_MEM_REG. Runs on the channel thread.
 */
void vfe_dax_post(void *opaque, const struct vfe_msg *m, uint64_t result)
{
    struct vfe_dax *x = opaque;
    (void)m;
    (void)result;
    struct vfe_dax_commit c = x->commit;
    x->commit = (struct vfe_dax_commit){ .fd = -1 };
    if (c.op == VFE_DAX_COMMIT_NONE)
        return;
    pthread_mutex_lock(&x->lock);
    unsigned delay = c.op == VFE_DAX_COMMIT_MAP ? x->commit_delay_us : x->removal_delay_us;
    pthread_mutex_unlock(&x->lock);
    if (delay)
        usleep(delay);
    pthread_mutex_lock(&x->lock);
    if (c.op == VFE_DAX_COMMIT_MAP) {
        void *p = mremap(c.staged, c.len, c.len, MREMAP_MAYMOVE | MREMAP_FIXED, x->window + c.off);
        if (p == MAP_FAILED) {
            munmap(c.staged, c.len);
            x->st.rejects++; /* cannot happen with a reserved window */
        }
        size_t i = first_after_locked(x, c.off);
        if (i < x->nmaps && x->maps[i].off == c.off)
            x->maps[i].pending = false;
    } else {
        unmap_range(x, c.off, c.len);
    }
    struct vfe_dev *d = x->dev;
    pthread_mutex_unlock(&x->lock);
    struct vfe_vu_region r = region_of(x, c.off, c.len, c.fd_offset);
    if (c.op == VFE_DAX_COMMIT_MAP)
        vfe_dev_add_region(d, &r, c.fd);
    else
        vfe_dev_remove_region(d, &r);
    vufs_close(&c.fd);
}
