/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The vhost-user-fs device as QEMU drives it: negotiation on connect, the start
 * sequence when the guest driver sets DRIVER_OK, the rings disabled and their
 * bases fetched on stop, RESET_DEVICE on a driver reset. The state diagram is
 * in vfe.h (struct vfe_dev_config). Every message has the payload size the
 * spec gives it (the rust-vmm vhost crate, behind the Rust virtiofsd, refuses
 * any other and ends the session).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "vfe.h"
#include "vfe_i.h"

enum vfe_dev_state {
    VFE_DEV_NEW,
    VFE_DEV_OWNED,
    VFE_DEV_RUNNING,
};

/* A guest memory region sent region by region (CONFIGURE_MEM_SLOTS). */
struct vfe_dev_region {
    struct vfe_vu_region r;
    int fd;     /* ours (a dup), sent with ADD_MEM_REG */
    bool live;  /* wanted in the backend's table */
    bool sent;  /* the backend has it */
};

struct vfe_dev {
    enum vfe_dev_state state;
    struct vfe_dev_config cfg;
    struct vfe_conn *conn;
    struct vfe_mem *mem;
    unsigned nqueues;
    struct vfe_vq **vqs;
    uint64_t offered;
    uint64_t features;
    uint64_t protocol_offered;
    uint64_t protocol;
    uint64_t backend_queues;
    uint64_t acked;      /* the last SET_FEATURES value */
    /* Dirty page log (vfe_dev_log_start): a memfd of log_size bytes, mapped. */
    int log_fd;
    uint8_t *log;
    uint64_t log_size;
    bool logging;

    /* CONFIGURE_MEM_SLOTS negotiated: guest memory region by region. The
     * regions, started and rst are protected by regions_lock (any thread adds
     * and removes regions; the backend channel does for a DAX window). Lock
     * order: regions_lock, then the connection's call lock. */
    bool mem_slots;
    pthread_mutex_t regions_lock;
    GArray *regions;     /* struct vfe_dev_region, in the order they came */
    bool started;        /* changes go out at once (QEMU: hdev->started) */
    struct vfe_dev_region_stats rst;
};

#define assert_dev_state(d, s) assert((d)->state == (s))

static int negotiate(struct vfe_dev *d)
{
    struct vfe_conn *c = d->conn;
    int r = vfe_conn_get_u64(c, VFE_VU_GET_FEATURES, &d->offered);
    if (r < 0)
        return r;
    if (d->offered & (1ull << VFE_F_PROTOCOL_FEATURES)) {
        r = vfe_conn_get_u64(c, VFE_VU_GET_PROTOCOL_FEATURES, &d->protocol_offered);
        if (r < 0)
            return r;
        uint64_t want = d->cfg.protocol_features;
        if (!want)
            want = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                   (1ull << VFE_VU_PF_BACKEND_REQ) | (1ull << VFE_VU_PF_BACKEND_SEND_FD) |
                   (1ull << VFE_VU_PF_RESET_DEVICE);
        d->protocol = want & d->protocol_offered;
        r = vfe_conn_set_u64(c, VFE_VU_SET_PROTOCOL_FEATURES, d->protocol);
        if (r < 0)
            return r;
        vfe_conn_set_reply_ack(c, d->protocol & (1ull << VFE_VU_PF_REPLY_ACK));
    }
    d->backend_queues = 0;
    if (d->protocol & (1ull << VFE_VU_PF_MQ)) {
        r = vfe_conn_get_u64(c, VFE_VU_GET_QUEUE_NUM, &d->backend_queues);
        if (r < 0)
            return r;
    }
    if (d->backend_queues && d->nqueues > d->backend_queues)
        return -ERANGE;
    d->mem_slots = d->protocol & (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS);
    if (d->mem_slots) {
        r = vfe_conn_get_u64(c, VFE_VU_GET_MAX_MEM_SLOTS, &d->rst.max_mem_slots);
        if (r < 0)
            return r;
    }
    if (!d->cfg.no_backend_channel && (d->protocol & (1ull << VFE_VU_PF_BACKEND_REQ))) {
        r = vfe_conn_start_backend_channel(c, d->cfg.backend_req, d->cfg.backend_post,
                                           d->cfg.backend_req_opaque);
        if (r < 0)
            return r;
    }
    struct vfe_msg m;
    vfe_msg_init(&m, VFE_VU_SET_OWNER, 0);
    return vfe_conn_call(c, &m, NULL, 0, NULL);
}

void vfe_dev_close(struct vfe_dev *d)
{
    vfe_dev_close_status(d, NULL, NULL);
}

static int list_ram(struct vfe_dev *d);

int vfe_dev_connect(const struct vfe_dev_config *cfg, struct vfe_dev **out)
{
    struct vfe_dev *d = g_new0(struct vfe_dev, 1);
    d->state = VFE_DEV_NEW;
    d->log_fd = -1;
    d->cfg = *cfg;
    pthread_mutex_init(&d->regions_lock, NULL);
    d->regions = g_array_new(FALSE, TRUE, sizeof(struct vfe_dev_region));
    d->nqueues = 1 + (cfg->request_queues ? cfg->request_queues : 1);
    if (!d->cfg.queue_size)
        d->cfg.queue_size = 128;
    if (!d->cfg.features)
        d->cfg.features = (1ull << VFE_F_VERSION_1) | (1ull << VFE_F_INDIRECT_DESC) |
                          (1ull << VFE_F_EVENT_IDX);
    int r = vfe_mem_new(&cfg->mem, &d->mem);
    if (r < 0)
        goto out_close;
    r = vfe_conn_open(&cfg->conn, &d->conn);
    if (r < 0)
        goto out_close;
    r = negotiate(d);
    if (r == 0 && d->mem_slots)
        r = list_ram(d);
    if (r < 0)
        goto out_close;
    d->state = VFE_DEV_OWNED;
    *out = d;
    return 0;

out_close:
    vfe_dev_close(d);
    return r;
}

static int set_vring_fd(struct vfe_conn *c, uint32_t request, unsigned index, int fd)
{
    struct vfe_msg m;
    vfe_msg_init(&m, request, 0);
    vfe_msg_set_u64(&m, index & VFE_VU_VRING_IDX_MASK);
    return vfe_conn_call(c, &m, &fd, 1, NULL);
}

static int set_state(struct vfe_conn *c, uint32_t request, unsigned index, unsigned num)
{
    struct vfe_msg m;
    vfe_msg_init(&m, request, 0);
    vfe_msg_set_state(&m, index, num);
    return vfe_conn_call(c, &m, NULL, 0, NULL);
}

static int create_queues(struct vfe_dev *d)
{
    d->features = d->cfg.features & d->offered;
    bool event_idx = d->features & (1ull << VFE_F_EVENT_IDX);
    bool indirect = d->features & (1ull << VFE_F_INDIRECT_DESC);
    d->vqs = g_new0(struct vfe_vq *, d->nqueues);
    for (unsigned i = 0; i < d->nqueues; i++) {
        struct vfe_vq_config qc = {
            .index = i, .size = d->cfg.queue_size, .event_idx = event_idx, .indirect = indirect };
        int r = vfe_vq_new(d->mem, &qc, &d->vqs[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

/* SET_VRING_ENABLE on every ring. With VHOST_USER_F_PROTOCOL_FEATURES acked
 * the rings start disabled and need it; without, the spec says the request
 * "should be sent only when VHOST_USER_F_PROTOCOL_FEATURES has been
 * negotiated" (a strict backend ends the session on it). Stops at the first
 * failure when enabling; when disabling, tries every ring. */
static int enable_rings(struct vfe_dev *d, bool on)
{
    if (!(d->acked & (1ull << VFE_F_PROTOCOL_FEATURES)))
        return 0;
    int ret = 0;
    for (unsigned i = 0; i < d->nqueues; i++) {
        int r = set_state(d->conn, VFE_VU_SET_VRING_ENABLE, i, on ? 1 : 0);
        if (r < 0 && !ret)
            ret = r;
        if (r < 0 && on)
            break;
    }
    return ret;
}

/* ---- Guest memory region by region --------------------------------------------------- */

static unsigned live_regions_locked(const struct vfe_dev *d)
{
    unsigned n = 0;
    for (unsigned i = 0; i < d->regions->len; i++)
        n += g_array_index(d->regions, struct vfe_dev_region, i).live;
    return n;
}

static int send_region(struct vfe_dev *d, uint32_t request, const struct vfe_vu_region *r, int fd)
{
    struct vfe_msg m;
    vfe_msg_init(&m, request, 0);
    vfe_msg_set_mem_reg(&m, r);
    return vfe_conn_call(d->conn, &m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0, NULL);
}

/*
 * What QEMU's vhost_user_add_remove_regions sends for a change of its table:
 * REM_MEM_REG of the regions gone (last first), then ADD_MEM_REG of the new
 * ones. A region the backend refused is gone from both sides. Caller holds
 * regions_lock. The first error, after trying everything.
 */
static int flush_regions_locked(struct vfe_dev *d)
{
    int ret = 0;
    for (unsigned i = d->regions->len; i-- > 0;) {
        struct vfe_dev_region *e = &g_array_index(d->regions, struct vfe_dev_region, i);
        if (e->live)
            continue;
        if (e->sent) {
            struct vfe_vu_region rem = e->r;
            rem.mmap_offset = 0; /* as QEMU fills it */
            int r = send_region(d, VFE_VU_REM_MEM_REG, &rem, -1);
            if (r < 0) {
                d->rst.errors++;
                ret = ret ? ret : r;
            } else {
                d->rst.removes++;
            }
        }
        vufs_close(&e->fd);
        g_array_remove_index(d->regions, i);
    }
    for (unsigned i = 0; i < d->regions->len;) {
        struct vfe_dev_region *e = &g_array_index(d->regions, struct vfe_dev_region, i);
        if (e->sent) {
            i++;
            continue;
        }
        int r = send_region(d, VFE_VU_ADD_MEM_REG, &e->r, e->fd);
        if (r < 0) {
            d->rst.errors++;
            ret = ret ? ret : r;
            vufs_close(&e->fd);
            g_array_remove_index(d->regions, i);
            continue;
        }
        d->rst.adds++;
        e->sent = true;
        i++;
    }
    return ret;
}

int vfe_dev_add_region(struct vfe_dev *d, const struct vfe_vu_region *r, int fd)
{
    if (!d->mem_slots)
        return -ENOTSUP;
    pthread_mutex_lock(&d->regions_lock);
    int ret = 0;
    if (live_regions_locked(d) >= VFE_VU_QEMU_MAX_SLOTS) {
        d->rst.overflows++;
        ret = -ENOSPC;
        goto out_unlock;
    }
    struct vfe_dev_region e = { .r = *r, .live = true };
    e.fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (e.fd < 0) {
        ret = -errno;
        goto out_unlock;
    }
    g_array_append_val(d->regions, e);
    if (d->started)
        ret = flush_regions_locked(d);
out_unlock:
    pthread_mutex_unlock(&d->regions_lock);
    return ret;
}

int vfe_dev_remove_region(struct vfe_dev *d, const struct vfe_vu_region *r)
{
    if (!d->mem_slots)
        return -ENOTSUP;
    pthread_mutex_lock(&d->regions_lock);
    int ret = -ENOENT;
    for (unsigned i = 0; i < d->regions->len; i++) {
        struct vfe_dev_region *e = &g_array_index(d->regions, struct vfe_dev_region, i);
        if (e->live && e->r.guest_phys_addr == r->guest_phys_addr &&
            e->r.memory_size == r->memory_size && e->r.userspace_addr == r->userspace_addr) {
            e->live = false;
            ret = d->started ? flush_regions_locked(d) : 0;
            break;
        }
    }
    pthread_mutex_unlock(&d->regions_lock);
    return ret;
}

void vfe_dev_get_region_stats(struct vfe_dev *d, struct vfe_dev_region_stats *st)
{
    pthread_mutex_lock(&d->regions_lock);
    *st = d->rst;
    st->regions = live_regions_locked(d);
    pthread_mutex_unlock(&d->regions_lock);
}

/* The start's memory: SET_MEM_TABLE, or with CONFIGURE_MEM_SLOTS what changed
 * since the last start (the guest RAM the first time), and from then on every
 * change at once. */
/* A new connection (a reconnect, a migration's destination): the backend has
 * none of the regions yet, so the next start sends them all, as QEMU's
 * vhost_dev_start does. */
static void regions_unsent(struct vfe_dev *d)
{
    pthread_mutex_lock(&d->regions_lock);
    for (unsigned i = 0; i < d->regions->len; i++)
        g_array_index(d->regions, struct vfe_dev_region, i).sent = false;
    pthread_mutex_unlock(&d->regions_lock);
}

static int start_memory(struct vfe_dev *d)
{
    if (!d->mem_slots) {
        unsigned n = vfe_mem_nregions(d->mem);
        if (n > VFE_VU_MAX_REGIONS)
            return -E2BIG;
        struct vfe_vu_region regs[VFE_VU_MAX_REGIONS];
        int fds[VFE_VU_MAX_REGIONS];
        for (unsigned i = 0; i < n; i++)
            vfe_mem_region(d->mem, i, &regs[i]);
        for (unsigned i = 0; i < n; i++)
            fds[i] = vfe_mem_fd(d->mem);
        struct vfe_msg m;
        vfe_msg_init(&m, VFE_VU_SET_MEM_TABLE, 0);
        int r = vfe_msg_set_mem(&m, regs, n);
        return r < 0 ? r : vfe_conn_call(d->conn, &m, fds, n, NULL);
    }
    pthread_mutex_lock(&d->regions_lock);
    d->started = true;
    int r = flush_regions_locked(d);
    pthread_mutex_unlock(&d->regions_lock);
    return r;
}

/* CONFIGURE_MEM_SLOTS: the guest RAM is the table's first regions (by
 * address, as QEMU's), sent with the first start. */
static int list_ram(struct vfe_dev *d)
{
    for (unsigned i = 0; i < vfe_mem_nregions(d->mem); i++) {
        struct vfe_dev_region e = { .live = true };
        vfe_mem_region(d->mem, i, &e.r);
        e.fd = fcntl(vfe_mem_fd(d->mem), F_DUPFD_CLOEXEC, 3);
        if (e.fd < 0)
            return -errno;
        g_array_append_val(d->regions, e);
    }
    return 0;
}

static void stop_memory(struct vfe_dev *d)
{
    pthread_mutex_lock(&d->regions_lock);
    d->started = false;
    pthread_mutex_unlock(&d->regions_lock);
}

int vfe_dev_start(struct vfe_dev *d)
{
    assert_dev_state(d, VFE_DEV_OWNED);
    struct vfe_conn *c = d->conn;
    int r;
    if (!d->vqs) {
        r = create_queues(d);
        if (r < 0)
            return r;
    }
    uint64_t feat = d->features;
    if (d->offered & (1ull << VFE_F_PROTOCOL_FEATURES))
        feat |= 1ull << VFE_F_PROTOCOL_FEATURES;
    r = vfe_conn_set_u64(c, VFE_VU_SET_FEATURES, feat);
    if (r < 0)
        return r;
    d->acked = feat;
    r = start_memory(d);
    if (r < 0)
        return r;

    struct vfe_msg m;
    for (unsigned i = 0; i < d->nqueues; i++) {
        struct vfe_vq *vq = d->vqs[i];
        r = set_state(c, VFE_VU_SET_VRING_NUM, i, vfe_vq_size(vq));
        if (r == 0)
            r = set_state(c, VFE_VU_SET_VRING_BASE, i, vfe_vq_avail_idx(vq));
        if (r < 0)
            return r;
        struct vfe_vu_addr a;
        vfe_vq_addr(vq, &a);
        vfe_msg_init(&m, VFE_VU_SET_VRING_ADDR, 0);
        vfe_msg_set_addr(&m, &a);
        r = vfe_conn_call(c, &m, NULL, 0, NULL);
        if (r < 0)
            return r;
        r = set_vring_fd(c, VFE_VU_SET_VRING_KICK, i, vfe_vq_kick_fd(vq));
        if (r == 0)
            r = set_vring_fd(c, VFE_VU_SET_VRING_CALL, i, vfe_vq_call_fd(vq));
        if (r < 0)
            return r;
        if (d->cfg.send_vring_err) {
            vfe_msg_init(&m, VFE_VU_SET_VRING_ERR, 0);
            vfe_msg_set_u64(&m, i | VFE_VU_VRING_NOFD);
            r = vfe_conn_call(c, &m, NULL, 0, NULL);
            if (r < 0)
                return r;
        }
    }
    r = enable_rings(d, true);
    if (r < 0)
        return r;
    d->state = VFE_DEV_RUNNING;
    return 0;
}

int vfe_dev_stop(struct vfe_dev *d)
{
    assert_dev_state(d, VFE_DEV_RUNNING);
    d->state = VFE_DEV_OWNED;
    stop_memory(d);
    /* QEMU's vhost_dev_stop for vhost-user-fs: every ring disabled first, then
     * GET_VRING_BASE on each (which stops it). */
    int ret = enable_rings(d, false);
    for (unsigned i = 0; i < d->nqueues; i++) {
        struct vfe_msg m, rep;
        vfe_msg_init(&m, VFE_VU_GET_VRING_BASE, 0);
        vfe_msg_set_state(&m, i, 0);
        int r = vfe_conn_call(d->conn, &m, NULL, 0, &rep);
        if (r < 0) {
            if (!ret)
                ret = r;
            continue;
        }
        /* The backend stopped at rep.num; in-flight requests are dropped
         * and the queue restarts from that index. */
        vfe_vq_reset(d->vqs[i], (uint16_t)rep.payload.state.num);
    }
    return ret;
}

int vfe_dev_reset(struct vfe_dev *d)
{
    int ret = 0;
    if (d->state == VFE_DEV_RUNNING)
        ret = vfe_dev_stop(d);
    assert_dev_state(d, VFE_DEV_OWNED);
    bool dev_reset = d->protocol & (1ull << VFE_VU_PF_RESET_DEVICE);
    /* RESET_DEVICE when negotiated, as QEMU sends it on every driver reset (no
     * NEED_REPLY, nothing to wait for). Without it, RESET_OWNER as QEMU 7.2
     * did: the spec calls it deprecated and asks backends to ignore it or
     * disable the rings; vufsd, which offers no RESET_DEVICE, resets the
     * device on it. */
    int r = vfe_conn_send_raw(d->conn, dev_reset ? VFE_VU_RESET_DEVICE : VFE_VU_RESET_OWNER,
                              VFE_VU_VERSION, 0, NULL, 0, NULL, 0);
    /* A reset driver starts its rings from scratch. */
    for (unsigned i = 0; d->vqs && i < d->nqueues; i++)
        vfe_vq_reset(d->vqs[i], 0);
    return ret < 0 ? ret : r;
}

int vfe_dev_reconnect(struct vfe_dev *d, const struct vfe_conn_config *conn)
{
    for (unsigned i = 0; d->vqs && i < d->nqueues; i++)
        if (vfe_vq_in_flight(d->vqs[i]))
            return -EBUSY;
    if (d->conn)
        vfe_conn_close(d->conn);
    d->conn = NULL;
    d->state = VFE_DEV_NEW;
    d->cfg.conn = *conn;
    int r = vfe_conn_open(&d->cfg.conn, &d->conn);
    if (r < 0)
        return r;
    r = negotiate(d);
    if (r < 0)
        return r;
    regions_unsent(d);
    d->state = VFE_DEV_OWNED;
    return 0;
}

int vfe_dev_close_status(struct vfe_dev *d, int *status, bool *on_its_own)
{
    if (!d)
        return -EINVAL;
    if (d->state == VFE_DEV_RUNNING && d->conn)
        vfe_dev_stop(d);
    /* Closing the socket first lets the backend exit before the memory goes. */
    int r = d->conn ? vfe_conn_close_status(d->conn, status, on_its_own) : -ECHILD;
    if (d->vqs)
        for (unsigned i = 0; i < d->nqueues; i++)
            vfe_vq_free(d->vqs[i]);
    g_free(d->vqs);
    vfe_mem_free(d->mem);
    if (d->log)
        munmap(d->log, d->log_size);
    if (d->log_fd >= 0)
        close(d->log_fd);
    for (unsigned i = 0; i < d->regions->len; i++)
        vufs_close(&g_array_index(d->regions, struct vfe_dev_region, i).fd);
    g_array_free(d->regions, TRUE);
    pthread_mutex_destroy(&d->regions_lock);
    g_free(d);
    return r;
}

/* ---- Dirty page logging ------------------------------------------------------ */

#define VFE_LOG_PAGE 4096u

int vfe_dev_log_base_raw(struct vfe_dev *d, int fd, uint64_t size, uint64_t offset,
                         uint64_t *answer)
{
    struct vfe_msg m, rep;
    vfe_msg_init(&m, VFE_VU_SET_LOG_BASE, 0);
    memcpy(m.payload.raw, &size, sizeof(size));
    memcpy(m.payload.raw + 8, &offset, sizeof(offset));
    m.size = 16;
    int r = vfe_conn_call(d->conn, &m, &fd, 1, &rep);
    if (r < 0)
        return r;
    *answer = rep.payload.u64;
    return 0;
}

/* SET_VRING_ADDR on every ring with the logging flag set or cleared (QEMU's
 * vhost_dev_set_log does the same on a running device). */
static int set_rings_log(struct vfe_dev *d, bool on)
{
    for (unsigned i = 0; i < d->nqueues; i++) {
        struct vfe_vu_addr a;
        uint64_t desc, avail, used;
        vfe_vq_addr(d->vqs[i], &a);
        vfe_vq_gpas(d->vqs[i], &desc, &avail, &used);
        a.flags = on ? VFE_VU_VRING_F_LOG : 0;
        a.log_guest_addr = used;
        struct vfe_msg m;
        vfe_msg_init(&m, VFE_VU_SET_VRING_ADDR, 0);
        vfe_msg_set_addr(&m, &a);
        int r = vfe_conn_call(d->conn, &m, NULL, 0, NULL);
        if (r < 0)
            return r;
    }
    return 0;
}

int vfe_dev_log_start(struct vfe_dev *d)
{
    assert_dev_state(d, VFE_DEV_RUNNING);
    if (!(d->offered & (1ull << VFE_F_LOG_ALL)) || !(d->protocol & (1ull << VFE_VU_PF_LOG_SHMFD)))
        return -EOPNOTSUPP;
    if (!d->log) {
        /* One bit per page up to the end of the highest region. */
        uint64_t end = 0;
        for (unsigned i = 0; i < vfe_mem_nregions(d->mem); i++) {
            struct vfe_vu_region r;
            vfe_mem_region(d->mem, i, &r);
            if (r.guest_phys_addr + r.memory_size > end)
                end = r.guest_phys_addr + r.memory_size;
        }
        uint64_t pages = (end + VFE_LOG_PAGE - 1) / VFE_LOG_PAGE;
        d->log_size = (pages + 7) / 8;
        d->log_fd = memfd_create("vfe-log", MFD_CLOEXEC);
        if (d->log_fd < 0)
            return -errno;
        if (ftruncate(d->log_fd, (off_t)d->log_size) < 0)
            return -errno;
        void *p = mmap(NULL, d->log_size, PROT_READ | PROT_WRITE, MAP_SHARED, d->log_fd, 0);
        if (p == MAP_FAILED)
            return -errno;
        d->log = p;
    }
    uint64_t answer;
    int r = vfe_dev_log_base_raw(d, d->log_fd, d->log_size, 0, &answer);
    if (r < 0)
        return r;
    if (answer != 0)
        return -EIO;
    r = vfe_conn_set_u64(d->conn, VFE_VU_SET_FEATURES, d->acked | (1ull << VFE_F_LOG_ALL));
    if (r < 0)
        return r;
    d->acked |= 1ull << VFE_F_LOG_ALL;
    d->logging = true;
    return set_rings_log(d, true);
}

int vfe_dev_log_stop(struct vfe_dev *d)
{
    assert_dev_state(d, VFE_DEV_RUNNING);
    d->acked &= ~(1ull << VFE_F_LOG_ALL);
    d->logging = false;
    int r = vfe_conn_set_u64(d->conn, VFE_VU_SET_FEATURES, d->acked);
    if (r < 0)
        return r;
    return set_rings_log(d, false);
}

bool vfe_dev_log_test(const struct vfe_dev *d, uint64_t gpa)
{
    uint64_t page = gpa / VFE_LOG_PAGE;
    if (!d->log || page / 8 >= d->log_size)
        return false;
    return (__atomic_load_n(&d->log[page / 8], __ATOMIC_ACQUIRE) >> (page % 8)) & 1;
}

uint64_t vfe_dev_log_count(const struct vfe_dev *d)
{
    uint64_t n = 0;
    for (uint64_t i = 0; d->log && i < d->log_size; i++)
        n += (uint64_t)__builtin_popcount(__atomic_load_n(&d->log[i], __ATOMIC_ACQUIRE));
    return n;
}

void vfe_dev_log_clear(struct vfe_dev *d)
{
    for (uint64_t i = 0; d->log && i < d->log_size; i++)
        __atomic_store_n(&d->log[i], 0, __ATOMIC_RELEASE);
}

struct vfe_conn *vfe_dev_conn(struct vfe_dev *d)
{
    return d->conn;
}

struct vfe_mem *vfe_dev_mem(struct vfe_dev *d)
{
    return d->mem;
}

struct vfe_vq *vfe_dev_vq(struct vfe_dev *d, unsigned i)
{
    if (!d->vqs || i >= d->nqueues)
        return NULL;
    return d->vqs[i];
}

unsigned vfe_dev_nqueues(const struct vfe_dev *d)
{
    return d->nqueues;
}

uint64_t vfe_dev_features(const struct vfe_dev *d)
{
    return d->features;
}

uint64_t vfe_dev_offered_features(const struct vfe_dev *d)
{
    return d->offered;
}

uint64_t vfe_dev_protocol_features(const struct vfe_dev *d)
{
    return d->protocol;
}

uint64_t vfe_dev_backend_queues(const struct vfe_dev *d)
{
    return d->backend_queues;
}

/* ---- Device state transfer and migration ------------------------------------ */

#define VFE_STATE_NOFD (1ull << 8)

/* SET_DEVICE_STATE_FD with fd; *reply_fd gets the backend's own end, or -1. */
static int set_state_fd(struct vfe_conn *c, uint32_t direction, int fd, int *reply_fd,
                        uint64_t *answer)
{
    struct vfe_msg m;
    uint32_t p[2] = {direction, 0 /* phase: stopped */};
    vfe_msg_init(&m, VFE_VU_SET_DEVICE_STATE_FD, 0);
    memcpy(m.payload.raw, p, sizeof(p));
    m.size = sizeof(p);
    *reply_fd = -1;
    int r = vfe_conn_send_raw(c, m.request, m.flags, m.size, m.payload.raw, m.size, &fd, 1);
    if (r < 0)
        return r;
    struct vfe_msg rep;
    int fds[1];
    unsigned nfds = 1;
    r = vfe_conn_recv_raw(c, &rep, fds, &nfds, 20000);
    if (r < 0)
        return r;
    r = vfe_msg_check_reply(&rep, VFE_VU_SET_DEVICE_STATE_FD, sizeof(uint64_t));
    if (r == 0 && (rep.payload.u64 & 0xff))
        r = -EIO;
    /* The spec: no fd with an error, and the no-fd bit says whether one came. */
    if (r == 0 && !(rep.payload.u64 & VFE_STATE_NOFD) != (nfds == 1))
        r = -EPROTO;
    if (answer)
        *answer = r == 0 || r == -EIO || r == -EPROTO ? rep.payload.u64 : 0;
    if (r == 0 && nfds == 1)
        *reply_fd = fds[0];
    else if (nfds == 1)
        close(fds[0]);
    return r;
}

static int check_state(struct vfe_conn *c, uint64_t *answer)
{
    struct vfe_msg m, rep;
    vfe_msg_init(&m, VFE_VU_CHECK_DEVICE_STATE, 0);
    int r = vfe_conn_call(c, &m, NULL, 0, &rep);
    if (r < 0)
        return r;
    if (answer)
        *answer = rep.payload.u64;
    return rep.payload.u64 ? -EIO : 0;
}

/*
 * A pipe for the state in direction dir (0 save: the back-end writes, 1 load:
 * it reads): the back-end gets one end, *ours is the other, or the fd the
 * back-end answered with in its place.
 */
static int state_pipe(struct vfe_conn *c, int dir, int *ours, uint64_t *answer)
{
    int p[2], their;
    int give = dir == 0 ? 1 : 0;
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    int r = set_state_fd(c, dir, p[give], &their, answer);
    close(p[give]);
    if (r < 0) {
        close(p[!give]);
        return r;
    }
    if (their >= 0) {
        close(p[!give]);
        p[!give] = their;
    }
    *ours = p[!give];
    return 0;
}

static int state_save_on(struct vfe_conn *c, uint8_t **buf, size_t *len, size_t max,
                         uint64_t *answer)
{
    int fd;
    *buf = NULL;
    *len = 0;
    int r = state_pipe(c, 0 /* save */, &fd, answer);
    if (r < 0)
        return r;
    size_t cap = 65536, n = 0;
    uint8_t *b = g_malloc(cap);
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                r = -EFBIG;
                break;
            }
            cap *= 2;
            b = g_realloc(b, cap);
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            r = -errno;
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    int rc = check_state(c, r < 0 ? NULL : answer);
    if (r == 0)
        r = rc;
    if (r < 0) {
        g_free(b);
        return r;
    }
    *buf = b;
    *len = n;
    return 0;
}

static int state_load_on(struct vfe_conn *c, const uint8_t *buf, size_t len, uint64_t *answer)
{
    int fd;
    int r = state_pipe(c, 1 /* load */, &fd, answer);
    if (r < 0)
        return r;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            r = w < 0 ? -errno : -EIO;
            break;
        }
        off += (size_t)w;
    }
    close(fd);
    int rc = check_state(c, r < 0 ? NULL : answer);
    return r < 0 ? r : rc;
}

int vfe_dev_state_save(struct vfe_dev *d, uint8_t **buf, size_t *len, size_t max,
                       uint64_t *answer)
{
    assert_dev_state(d, VFE_DEV_OWNED);
    return state_save_on(d->conn, buf, len, max, answer);
}

int vfe_dev_state_load(struct vfe_dev *d, const uint8_t *buf, size_t len, uint64_t *answer)
{
    assert_dev_state(d, VFE_DEV_OWNED);
    return state_load_on(d->conn, buf, len, answer);
}

int vfe_dev_migrate(struct vfe_dev *d, const struct vfe_conn_config *to,
                    void (*between)(void *opaque), void *opaque)
{
    int r = 0;
    if (d->state == VFE_DEV_RUNNING)
        r = vfe_dev_stop(d);
    if (r < 0)
        return r;
    if (!(d->protocol & (1ull << VFE_VU_PF_DEVICE_STATE)))
        return -EOPNOTSUPP;
    g_autofree uint8_t *state = NULL;
    size_t len = 0;
    r = state_save_on(d->conn, &state, &len, (size_t)1 << 30, NULL);
    if (r < 0)
        return r;
    if (between)
        between(opaque);

    /* The destination: a new connection negotiated as the first was. */
    struct vfe_conn *old = d->conn;
    r = vfe_conn_open(to, &d->conn);
    if (r < 0) {
        d->conn = old;
        return r;
    }
    uint64_t want_protocol = d->protocol;
    d->cfg.protocol_features = want_protocol;
    r = negotiate(d);
    if (r == 0 && d->protocol != want_protocol)
        r = -EPROTO; /* the destination offers less than the source did */
    if (r == 0)
        r = state_load_on(d->conn, state, len, NULL);
    if (r < 0) {
        vfe_conn_close(d->conn);
        d->conn = old;
        d->protocol = want_protocol;
        return r;
    }
    vfe_conn_close(old);
    regions_unsent(d);
    return vfe_dev_start(d);
}
