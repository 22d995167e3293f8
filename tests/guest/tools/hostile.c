/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs-hostile: a hostile guest driver for the virtio-fs device, from inside a
 * real guest. Linux's virtiofs driver never sends a malformed DAX request, so
 * this tool drives the device itself: the device is unbound from virtio-pci
 * (the caller does that), and the tool takes it from user space through sysfs
 * - the PCI config space for the command register and the capability list,
 * resourceN mmaps for the virtio-pci modern BARs (common config, notify, the
 * shared memory window) - with split virtqueues in locked pages whose
 * guest-physical addresses come from /proc/self/pagemap (there is no IOMMU).
 * It polls the used rings; no interrupt is used.
 *
 *   vufs-hostile SYSFS_DEVICE_DIR
 *
 * The share must hold (the host makes them): h-data (4 MiB of the pattern
 * below, seed 9), h-small (4 KiB), h-gone (4 MiB) and the directory h-dir.
 *
 * It negotiates VERSION_1, starts the hiprio queue and one request queue,
 * sends FUSE_INIT, looks the files up, then every malformed FUSE_SETUPMAPPING
 * and FUSE_REMOVEMAPPING below and checks the errno of each reply; a
 * well-formed SETUPMAPPING before and after them must succeed and show the
 * file's bytes in the window (read through the shared memory BAR), so a
 * device that answers everything the same way fails. A GETATTR after every
 * case shows the daemon still serving. At the end every mapping is removed and
 * the device is reset (status 0), ready for the virtio-pci driver again.
 * Prints one line per check and "vufs-hostile: N checks, M failed"; exits 0
 * only when none failed.
 *
 * The pattern of byte o of a file is (o * 131 + o / 4096 + SEED) & 0xff, as
 * vufs-probe's.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/fuse.h>
#include <linux/virtio_config.h>
#include <linux/virtio_pci.h>
#include <linux/virtio_ring.h>

#define PAGE 4096u
#define QSIZE 64u
#define MiB (1ull << 20)
#define NPAGES 32u
#define TIMEOUT_MS 20000

#ifndef VIRTIO_PCI_CAP_SHARED_MEMORY_CFG
#define VIRTIO_PCI_CAP_SHARED_MEMORY_CFG 8
#endif

static unsigned checks, failures;

static void check(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("vufs-hostile: %s: ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    checks++;
    failures += !ok;
}

static void cleanup(void);

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("vufs-hostile: FAIL: ");
    vprintf(fmt, ap);
    printf(" (%s)\n", strerror(errno));
    va_end(ap);
    cleanup();
    exit(2);
}

/* ---- The PCI device ---------------------------------------------------------------- */

struct bar {
    volatile uint8_t *p;
    size_t len;
};

static const char *devdir;
static int cfg_fd;
static struct bar bars[6];
static volatile struct virtio_pci_common_cfg *common;
static volatile uint8_t *notify_base;
static uint32_t notify_mult;
static volatile uint8_t *window;
static uint64_t window_len;

static void cfg_read(void *buf, size_t len, off_t off)
{
    if (pread(cfg_fd, buf, len, off) != (ssize_t)len)
        die("config space read at %#llx", (unsigned long long)off);
}

static void cfg_write(const void *buf, size_t len, off_t off)
{
    if (pwrite(cfg_fd, buf, len, off) != (ssize_t)len)
        die("config space write at %#llx", (unsigned long long)off);
}

static volatile uint8_t *bar_at(unsigned i, uint64_t off, uint64_t len)
{
    if (i >= 6)
        die("BAR %u", i);
    if (!bars[i].p) {
        char path[512];
        snprintf(path, sizeof(path), "%s/resource%u", devdir, i);
        int fd = open(path, O_RDWR | O_SYNC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0)
            die("%s", path);
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            die("mmap %s", path);
        close(fd);
        bars[i] = (struct bar){ p, (size_t)st.st_size };
    }
    if (off > bars[i].len || len > bars[i].len - off)
        die("BAR %u is %zu bytes, not %#llx+%#llx", i, bars[i].len, (unsigned long long)off,
            (unsigned long long)len);
    return bars[i].p + off;
}

/* Memory decoding and bus mastering on, INTx off (the tool polls). */
static void pci_enable(void)
{
    uint16_t cmd;
    cfg_read(&cmd, 2, 4);
    cmd |= 0x2 | 0x4 | 0x400;
    cfg_write(&cmd, 2, 4);
}

static void find_caps(void)
{
    uint8_t ptr;
    uint16_t status;
    cfg_read(&status, 2, 6);
    if (!(status & 0x10))
        die("no capability list");
    cfg_read(&ptr, 1, 0x34);
    for (int n = 0; ptr && n < 48; n++) {
        struct virtio_pci_cap c;
        cfg_read(&c, sizeof(c), ptr);
        if (c.cap_vndr == 0x09) {
            switch (c.cfg_type) {
            case VIRTIO_PCI_CAP_COMMON_CFG:
                common = (volatile void *)bar_at(c.bar, c.offset, sizeof(*common));
                break;
            case VIRTIO_PCI_CAP_NOTIFY_CFG:
                cfg_read(&notify_mult, 4, ptr + sizeof(c));
                notify_base = bar_at(c.bar, c.offset, c.length);
                break;
            case VIRTIO_PCI_CAP_SHARED_MEMORY_CFG: {
                uint32_t hi[2];
                cfg_read(hi, 8, ptr + sizeof(c));
                uint64_t off = c.offset | (uint64_t)hi[0] << 32;
                window_len = c.length | (uint64_t)hi[1] << 32;
                if (c.id == 0) /* VIRTIO_FS_SHMCAP_ID_CACHE */
                    window = bar_at(c.bar, off, window_len);
                break;
            }
            default:
                break;
            }
        }
        ptr = c.cap_next;
    }
    if (!common || !notify_base || !window)
        die("virtio caps: common %p notify %p window %p", (void *)common, (void *)notify_base,
            (void *)window);
}

/* ---- Memory the device reads and writes -------------------------------------------- */

static uint8_t *pages;
static uint64_t page_pa[NPAGES];

static void alloc_pages(void)
{
    pages = mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED | MAP_POPULATE, -1, 0);
    if (pages == MAP_FAILED || mlock(pages, NPAGES * PAGE) < 0)
        die("locked pages");
    memset(pages, 0, NPAGES * PAGE); /* each its own page, not the zero page */
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0)
        die("/proc/self/pagemap");
    for (unsigned i = 0; i < NPAGES; i++) {
        uint64_t e;
        off_t at = (off_t)(((uintptr_t)pages / PAGE + i) * 8);
        if (pread(fd, &e, 8, at) != 8 || !(e & (1ull << 63)) || !(e & ((1ull << 55) - 1)))
            die("pagemap entry %#llx of page %u", (unsigned long long)e, i);
        page_pa[i] = (e & ((1ull << 55) - 1)) * PAGE;
    }
    close(fd);
}

static uint64_t pa_of(const void *p)
{
    size_t off = (size_t)((const uint8_t *)p - pages);
    return page_pa[off / PAGE] + off % PAGE;
}

/* ---- Split virtqueues -------------------------------------------------------------- */

struct vq {
    unsigned index;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    volatile uint16_t *notify;
    uint16_t avail_idx, used_idx;
};

static struct vq vqs[2];

#define mb() __sync_synchronize()

static void vq_setup(struct vq *q, unsigned index, uint8_t *page)
{
    q->index = index;
    q->desc = (void *)page;                          /* 64 x 16 = 1024 bytes */
    q->avail = (void *)(page + 1024);                /* 4 + 2 x 64 + 2 */
    q->used = (void *)(page + 2048);                 /* 4 + 8 x 64 + 2 */
    q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
    common->queue_select = (uint16_t)index;
    mb();
    if (common->queue_size < QSIZE)
        die("queue %u has %u entries", index, common->queue_size);
    common->queue_size = QSIZE;
    common->queue_msix_vector = VIRTIO_MSI_NO_VECTOR;
    uint64_t d = pa_of(q->desc), a = pa_of(q->avail), u = pa_of(q->used);
    volatile uint32_t *w = (volatile uint32_t *)&common->queue_desc_lo;
    w[0] = (uint32_t)d, w[1] = (uint32_t)(d >> 32);
    w = (volatile uint32_t *)&common->queue_avail_lo;
    w[0] = (uint32_t)a, w[1] = (uint32_t)(a >> 32);
    w = (volatile uint32_t *)&common->queue_used_lo;
    w[0] = (uint32_t)u, w[1] = (uint32_t)(u >> 32);
    q->notify = (volatile uint16_t *)(notify_base + common->queue_notify_off * notify_mult);
    mb();
    common->queue_enable = 1;
}

/* A part of a chain: len bytes at p (split per page), device-writable or not. */
struct part {
    void *p;
    uint32_t len;
    bool writable;
};

static uint32_t used_len;

/* Submits the chain and polls for its completion: 0, or -ETIMEDOUT. The used
 * length is left in used_len. */
static int vq_call(struct vq *q, const struct part *parts, unsigned n)
{
    unsigned d = 0;
    for (unsigned i = 0; i < n; i++) {
        uint8_t *p = parts[i].p;
        uint32_t left = parts[i].len;
        while (left) {
            uint32_t in_page = PAGE - (uint32_t)((p - pages) % PAGE);
            uint32_t k = left < in_page ? left : in_page;
            if (d == QSIZE)
                die("chain too long");
            q->desc[d] = (struct vring_desc){ .addr = pa_of(p), .len = k,
                                              .flags = parts[i].writable ? VRING_DESC_F_WRITE : 0,
                                              .next = (uint16_t)(d + 1) };
            d++;
            p += k;
            left -= k;
        }
    }
    q->desc[d - 1].flags &= (uint16_t)~VRING_DESC_F_NEXT;
    for (unsigned i = 0; i + 1 < d; i++)
        q->desc[i].flags |= VRING_DESC_F_NEXT;
    q->avail->ring[q->avail_idx % QSIZE] = 0;
    mb();
    q->avail->idx = ++q->avail_idx;
    mb();
    *q->notify = (uint16_t)q->index;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        mb();
        if (*(volatile uint16_t *)&q->used->idx != q->used_idx)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > TIMEOUT_MS)
            return -ETIMEDOUT;
        struct timespec ns = { 0, 20000 };
        nanosleep(&ns, NULL);
    }
    mb();
    struct vring_used_elem e = q->used->ring[q->used_idx % QSIZE];
    q->used_idx++;
    if (e.id != 0)
        die("used id %u", e.id);
    used_len = e.len;
    return 0;
}

/* ---- FUSE over the request queue ---------------------------------------------------- */

static uint64_t unique = 1;
static uint8_t *req_buf;  /* pages 2..19: what the device reads */
static uint8_t *rep_buf;  /* pages 20..23: what it writes */
#define REQ_MAX (18 * PAGE)
#define REP_MAX (4 * PAGE)

struct reply {
    int error;        /* the header's error (0 or -errno), or 1 when the reply was bad */
    uint32_t len;     /* bytes the device wrote */
    const void *body; /* after the header */
};

/*
 * One request: the header (len = hdr_len, or the true length when hdr_len is
 * 0), the argument bytes; the chain carries chain_len readable bytes (0: all
 * of them). Waits for the reply in a REP_MAX buffer.
 */
static struct reply request_raw(uint32_t opcode, uint64_t nodeid, const void *arg, uint32_t arg_len,
                                uint32_t hdr_len, uint32_t chain_len, unsigned queue)
{
    struct fuse_in_header h = { .len = sizeof(h) + arg_len, .opcode = opcode,
                                .unique = unique++, .nodeid = nodeid };
    if (hdr_len)
        h.len = hdr_len;
    if (sizeof(h) + arg_len > REQ_MAX)
        die("request of %u bytes", arg_len);
    memcpy(req_buf, &h, sizeof(h));
    memcpy(req_buf + sizeof(h), arg, arg_len);
    memset(rep_buf, 0xa5, REP_MAX);
    uint32_t total = chain_len ? chain_len : (uint32_t)sizeof(h) + arg_len;
    struct part parts[2] = { { req_buf, total, false }, { rep_buf, REP_MAX, true } };
    bool noreply = opcode == FUSE_FORGET;
    struct reply r = { .error = 1 };
    if (vq_call(&vqs[queue], parts, noreply ? 1 : 2) < 0) {
        errno = ETIMEDOUT;
        die("opcode %u: no completion within %d ms", opcode, TIMEOUT_MS);
    }
    r.len = used_len;
    if (noreply)
        return r;
    struct fuse_out_header oh;
    memcpy(&oh, rep_buf, sizeof(oh));
    if (r.len >= sizeof(oh) && oh.unique == h.unique && oh.len == r.len)
        r.error = oh.error;
    r.body = rep_buf + sizeof(oh);
    return r;
}

static struct reply request(uint32_t opcode, uint64_t nodeid, const void *arg, uint32_t arg_len)
{
    return request_raw(opcode, nodeid, arg, arg_len, 0, 0, 1);
}

static const char *err_name(int e)
{
    switch (e) {
    case 0: return "0";
    case -EINVAL: return "EINVAL";
    case -EOVERFLOW: return "EOVERFLOW";
    case -ESTALE: return "ESTALE";
    case -ENOENT: return "ENOENT";
    case -EIO: return "EIO";
    case -ENOSYS: return "ENOSYS";
    case 1: return "a malformed reply";
    default: {
        static char buf[32];
        snprintf(buf, sizeof(buf), "%d", e);
        return buf;
    }
    }
}

static uint64_t lookup(const char *name)
{
    struct reply r = request(FUSE_LOOKUP, FUSE_ROOT_ID, name, (uint32_t)strlen(name) + 1);
    struct fuse_entry_out eo;
    if (r.error || r.len < sizeof(struct fuse_out_header) + sizeof(eo))
        die("LOOKUP %s: %s", name, err_name(r.error));
    memcpy(&eo, r.body, sizeof(eo));
    return eo.nodeid;
}

/* The daemon still serves: a GETATTR of the root comes back right. */
static void assert_serving(const char *after)
{
    struct fuse_getattr_in in = { 0 };
    struct reply r = request(FUSE_GETATTR, FUSE_ROOT_ID, &in, sizeof(in));
    struct fuse_attr_out ao;
    bool ok = r.error == 0 && r.len == sizeof(struct fuse_out_header) + sizeof(ao);
    if (ok) {
        memcpy(&ao, r.body, sizeof(ao));
        ok = (ao.attr.mode & S_IFMT) == S_IFDIR;
    }
    if (!ok)
        check(false, "GETATTR after %s: %s", after, err_name(r.error));
}

static int setup(uint64_t nodeid, uint64_t foff, uint64_t len, uint64_t flags, uint64_t moff)
{
    struct fuse_setupmapping_in in = { .fh = ~0ull, .foffset = foff, .len = len,
                                       .flags = flags, .moffset = moff };
    struct reply r = request(FUSE_SETUPMAPPING, nodeid, &in, sizeof(in));
    if (r.len != sizeof(struct fuse_out_header))
        return 1;
    return r.error;
}

/* REMOVEMAPPING with `count` in its header and n entries in the payload. */
static int removem(uint32_t count, const uint64_t (*e)[2], unsigned n)
{
    static uint8_t buf[4 + 16 * 300];
    memcpy(buf, &count, 4);
    for (unsigned i = 0; i < n; i++)
        memcpy(buf + 4 + 16 * i, e[i], 16);
    struct reply r = request(FUSE_REMOVEMAPPING, 0, buf, 4 + 16 * n);
    if (r.len != sizeof(struct fuse_out_header))
        return 1;
    return r.error;
}

static void expect(int got, int want, const char *what)
{
    check(got == want, "%s: %s (want %s)", what, err_name(got), err_name(want));
    assert_serving(what);
}

static uint8_t pat(uint64_t off, unsigned seed)
{
    return (uint8_t)(off * 131 + off / 4096 + seed);
}

/* The window at moff shows file offset foff of the pattern (sampled: every 64th
 * page, first and last bytes and a run in the middle). */
static bool window_shows(uint64_t moff, uint64_t foff, uint64_t len, unsigned seed)
{
    for (uint64_t o = 0; o < len; o += 64 * PAGE) {
        for (uint64_t k = 0; k < PAGE; k += (k >= 256 && k < PAGE - 8) ? PAGE - 256 - 8 : 1) {
            uint8_t b = window[moff + o + k];
            if (b != pat(foff + o + k, seed)) {
                printf("vufs-hostile: window byte %#llx is %u, not %u\n",
                       (unsigned long long)(moff + o + k), b, pat(foff + o + k, seed));
                return false;
            }
        }
    }
    return true;
}

/* Every byte of [moff, moff + len) of the window is zero: a range past a file's end. */
static bool window_zero(uint64_t moff, uint64_t len)
{
    for (uint64_t o = 0; o < len; o++)
        if (window[moff + o]) {
            printf("vufs-hostile: window byte %#llx past the file's end is %u, not 0\n",
                   (unsigned long long)(moff + o), window[moff + o]);
            return false;
        }
    return true;
}

/* ---- The device's life ----------------------------------------------------------------- */

static void set_status(uint8_t s)
{
    common->device_status = s;
    mb();
}

static void reset_device(void)
{
    set_status(0);
    for (int i = 0; i < 100000 && common->device_status != 0; i++)
        usleep(100);
    if (common->device_status != 0)
        die("the device did not reset");
}

static bool started;

/* QEMU 11.1 crashes when a device is reset with window mappings live: whatever
 * went wrong, they go before the device is given back. */
static void cleanup(void)
{
    static bool once;
    if (!started || once)
        return;
    once = true;
    removem(1, (const uint64_t[][2]){ { 0, window_len } }, 1);
    reset_device();
}

static void start_device(void)
{
    reset_device();
    set_status(VIRTIO_CONFIG_S_ACKNOWLEDGE);
    set_status(VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
    common->device_feature_select = 1;
    mb();
    if (!(common->device_feature & 1)) /* VIRTIO_F_VERSION_1 */
        die("no VIRTIO_F_VERSION_1");
    common->guest_feature_select = 0;
    common->guest_feature = 0;
    common->guest_feature_select = 1;
    common->guest_feature = 1;
    set_status(VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK);
    if (!(common->device_status & VIRTIO_CONFIG_S_FEATURES_OK))
        die("features refused");
    if (common->num_queues < 2)
        die("%u queues", common->num_queues);
    vq_setup(&vqs[0], 0, pages);
    vq_setup(&vqs[1], 1, pages + PAGE);
    set_status(VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
               VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
    if (common->device_status & VIRTIO_CONFIG_S_NEEDS_RESET)
        die("the device needs a reset");
    started = true;
}

static void fuse_init(void)
{
    struct fuse_init_in in = { .major = FUSE_KERNEL_VERSION, .minor = 31,
                               .max_readahead = 128 * 1024,
                               .flags = FUSE_INIT_EXT | FUSE_MAP_ALIGNMENT,
                               .flags2 = (uint32_t)(FUSE_HAS_INODE_DAX >> 32) };
    struct reply r = request(FUSE_INIT, 0, &in, sizeof(in));
    struct fuse_init_out out;
    if (r.error || r.len < sizeof(struct fuse_out_header) + 24)
        die("INIT: %s", err_name(r.error));
    memset(&out, 0, sizeof(out));
    memcpy(&out, r.body, r.len - sizeof(struct fuse_out_header) < sizeof(out)
                             ? r.len - sizeof(struct fuse_out_header) : sizeof(out));
    check(out.major == 7 && (out.flags & FUSE_MAP_ALIGNMENT) && out.map_alignment == 12,
          "INIT: 7.%u, map_alignment %u (a window, page granularity)", out.minor,
          out.map_alignment);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SYSFS_DEVICE_DIR\n", argv[0]);
        return 2;
    }
    devdir = argv[1];
    char path[512];
    snprintf(path, sizeof(path), "%s/config", devdir);
    cfg_fd = open(path, O_RDWR);
    if (cfg_fd < 0)
        die("%s", path);
    uint16_t ids[2];
    cfg_read(ids, 4, 0);
    if (ids[0] != 0x1af4 || ids[1] != 0x1040 + 26)
        die("%04x:%04x is not a modern virtio-fs device", ids[0], ids[1]);
    snprintf(path, sizeof(path), "%s/driver", devdir);
    if (access(path, F_OK) == 0) {
        errno = EBUSY;
        die("%s is bound to a driver", devdir);
    }
    pci_enable();
    find_caps();
    alloc_pages();
    req_buf = pages + 2 * PAGE;
    rep_buf = pages + 20 * PAGE;
    printf("vufs-hostile: window of %llu MiB, notify multiplier %u\n",
           (unsigned long long)(window_len >> 20), notify_mult);
    start_device();
    fuse_init();

    const uint64_t W = window_len, RD = FUSE_SETUPMAPPING_FLAG_READ;
    const uint64_t RW = RD | FUSE_SETUPMAPPING_FLAG_WRITE;
    uint64_t f = lookup("h-data"), small = lookup("h-small"), dir = lookup("h-dir");
    uint64_t gone = lookup("h-gone");

    /* The control: a well-formed mapping succeeds and the window shows the file. */
    expect(setup(f, 0, 2 * MiB, RD, 0), 0, "SETUPMAPPING of h-data's first range at 0");
    check(window_shows(0, 0, 2 * MiB, 9), "the window shows h-data through the BAR");
    expect(removem(1, (const uint64_t[][2]){ { 0, 2 * MiB } }, 1), 0, "REMOVEMAPPING of it");

    /* Malformed SETUPMAPPING. */
    expect(setup(f, 0, 2 * MiB, RD, W), -EINVAL, "moffset at the window's end");
    expect(setup(f, 0, 2 * MiB, RD, W - 2 * MiB + PAGE), -EINVAL, "a range straddling the end");
    expect(setup(f, 0, 2 * MiB, RD, 0xfffffffffffff000ull), -EINVAL, "moffset near 2^64");
    expect(setup(f, 0, 2 * MiB, RD, 100), -EINVAL, "a misaligned moffset");
    expect(setup(f, 100, 2 * MiB, RD, 0), -EINVAL, "a misaligned foffset");
    expect(setup(f, 0, 2 * MiB + 100, RD, 0), -EINVAL, "a misaligned len");
    expect(setup(f, 0, 0, RD, 0), -EINVAL, "len 0");
    expect(setup(f, 0x7ffffffffffff000ull, 2 * MiB, RD, 0), -EOVERFLOW,
           "foffset + len past the largest file offset");
    expect(setup(f, 0xfffffffffffff000ull, 2 * MiB, RD, 0), -EOVERFLOW,
           "foffset + len wrapping past 2^64");
    expect(setup(f, 0, 2 * MiB, 1ull << 5, 0), -EINVAL, "an unknown flag");
    expect(setup(f, 0, 2 * MiB, ~0ull, 0), -EINVAL, "every flag");
    expect(setup(0xdeadbeefull, 0, 2 * MiB, RD, 0), -ESTALE, "an unknown node id");
    expect(setup(f | (7ull << 32), 0, 2 * MiB, RD, 0), -ESTALE, "a node id of another generation");
    expect(setup(dir, 0, 2 * MiB, RD, 0), -EINVAL, "a directory");
    expect(setup(FUSE_ROOT_ID, 0, 2 * MiB, RD, 0), -EINVAL, "the root");
    /* Past a file's end the window shows zeros (the daemon's own pages back it). */
    expect(setup(small, 0, 2 * MiB, RD, 0), 0, "a range past the end of a 4 KiB file");
    check(window_shows(0, 0, PAGE, 5) && window_zero(PAGE, 2 * MiB - PAGE),
          "the window shows h-small, then zeros");
    expect(setup(f, 4 * MiB, 2 * MiB, RD, 0), 0, "a range starting at the end of h-data");
    check(window_zero(0, 2 * MiB), "the window shows zeros past h-data's end");
    expect(removem(1, (const uint64_t[][2]){ { 0, 2 * MiB } }, 1), 0, "REMOVEMAPPING of it");
    /* A forgotten node: FORGET on the hiprio queue, then its id. */
    struct fuse_forget_in fi = { .nlookup = 1 };
    request_raw(FUSE_FORGET, gone, &fi, sizeof(fi), 0, 0, 0);
    expect(setup(gone, 0, 2 * MiB, RD, 0), -ESTALE, "a node id the guest forgot");

    /* Malformed REMOVEMAPPING, with a live mapping that must survive them. */
    expect(setup(f, 2 * MiB, 2 * MiB, RW, 2 * MiB), 0, "SETUPMAPPING of h-data's second range");
    static uint64_t many[300][2];
    for (unsigned i = 0; i < 300; i++)
        many[i][0] = 0, many[i][1] = PAGE;
    expect(removem(257, many, 257), -EINVAL, "REMOVEMAPPING of 257 entries");
    expect(removem(300, many, 300), -EINVAL, "REMOVEMAPPING of 300 entries");
    expect(removem(4, many, 1), -EINVAL, "a count of 4 with one entry");
    expect(removem(0xffffffffu, many, 1), -EINVAL, "a count of 2^32-1 with one entry");
    expect(removem(0, many, 0), -EINVAL, "a count of 0");
    expect(removem(1, (const uint64_t[][2]){ { W, PAGE } }, 1), -EINVAL, "an entry at the window's end");
    expect(removem(1, (const uint64_t[][2]){ { PAGE, ~0ull - PAGE + 1 } }, 1), -EINVAL,
           "an entry wrapping past 2^64");
    expect(removem(1, (const uint64_t[][2]){ { 100, PAGE } }, 1), -EINVAL, "a misaligned entry");
    expect(removem(2, (const uint64_t[][2]){ { 2 * MiB, 2 * MiB }, { W, PAGE } }, 2), -EINVAL,
           "a good entry then one outside the window");
    check(window_shows(2 * MiB, 2 * MiB, 2 * MiB, 9), "the mapping survived every refusal");

    /* Requests whose header disagrees with the chain. */
    struct fuse_setupmapping_in sm = { .fh = ~0ull, .len = 2 * MiB, .flags = RD };
    uint32_t whole = (uint32_t)(sizeof(struct fuse_in_header) + sizeof(sm));
    struct reply r = request_raw(FUSE_SETUPMAPPING, f, &sm, sizeof(sm), whole + 8, 0, 1);
    expect(r.error, -EINVAL, "in.len 8 bytes past the chain");
    r = request_raw(FUSE_SETUPMAPPING, f, &sm, sizeof(sm), whole - 8, 0, 1);
    expect(r.error, -EINVAL, "in.len 8 bytes short of the chain");
    r = request_raw(FUSE_SETUPMAPPING, f, &sm, sizeof(sm), whole - 20, whole - 20, 1);
    expect(r.error, -EINVAL, "a SETUPMAPPING body cut to 20 bytes");
    uint8_t rm[4 + 8] = { 1 };
    r = request_raw(FUSE_REMOVEMAPPING, 0, rm, sizeof(rm), 0, 0, 1);
    expect(r.error, -EINVAL, "a REMOVEMAPPING entry cut in half");
    r = request_raw(FUSE_SETUPMAPPING, f, &sm, sizeof(sm), whole, 24, 1);
    check(r.len == 0, "a chain shorter than the FUSE header: used length %u (no reply)", r.len);
    assert_serving("a chain shorter than the FUSE header");

    /* The control again: the daemon still maps, at the window's last range. */
    expect(setup(f, 0, 2 * MiB, RW, W - 2 * MiB), 0, "SETUPMAPPING at the window's last range");
    check(window_shows(W - 2 * MiB, 0, 2 * MiB, 9), "the window shows it");
    expect(removem(1, (const uint64_t[][2]){ { 0, W } }, 1), 0, "REMOVEMAPPING of the whole window");
    reset_device();
    started = false;
    printf("vufs-hostile: %u checks, %u failed\n", checks, failures);
    return failures ? 1 : 0;
}
