/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Device-wide state: memory table swaps, the broken flag, the backend request
 * channel and teardown. See device.h for the lifecycle and the lock order.
 */
#include "device.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "dax/dax.h"
#include "log.h"
#include "vu_msg.h"
#include "vufs_util.h"

/*
 * Request queue threads: as asked, or one per CPU the daemon may run on, so
 * that with more queues than CPUs a thread serves several queues in turn rather
 * than more threads than CPUs taking turns (each turn a wake-up).
 */
static unsigned vdev_request_threads(unsigned asked)
{
    unsigned n = asked;
    if (!n) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
    }
    if (n < 1)
        n = 1;
    return n > VDEV_MAX_QUEUES - 1 ? VDEV_MAX_QUEUES - 1 : n;
}

int vdev_new(const struct vdev_config *c, struct vufsd_dev **out)
{
    struct vufsd_dev *dev = calloc(1, sizeof(*dev));
    int err;

    *out = NULL;
    if (!dev)
        return -ENOMEM;
    dev->c = *c;
    dev->backend_fd = -1;
    dev->state = VDEV_NEW;
    pthread_mutex_init(&dev->mem_lock, NULL);
    vufs_cond_init_monotonic(&dev->mem_changed);
    pthread_mutex_init(&dev->backend_lock, NULL);
    err = vmem_table_new(&dev->mem);
    if (err < 0)
        goto free_dev;
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        vqt_init(&dev->q[i], dev, i);
    vmig_init(&dev->mig);
    dev->nthreads = vdev_request_threads(c->queue_threads);
    for (unsigned i = 0; i <= dev->nthreads; i++) {
        err = vqt_thread_init(&dev->t[i], dev, i);
        if (err < 0)
            goto free_queues;
    }
    vlog_debug("request queues served by %u thread(s)", dev->nthreads);

    struct fll_session_config sc = {
        .ops = c->ops,
        .fs = c->fs,
        .transport = &vqt_transport,
        .max_write = VDEV_MAX_WRITE,
        .max_pages = VDEV_MAX_WRITE / 4096,
        /* The rings bound what is in flight, not the client's default. */
        .max_background = UINT16_MAX,
    };
    err = fll_session_new(&sc, &dev->se);
    if (err < 0)
        goto free_queues;
    if (c->cfg->thread_pool_size) {
        err = vpool_new(c->cfg->thread_pool_size, vqt_pool_run, &dev->pool);
        if (err < 0) {
            vlog_err("cannot start %u worker threads", c->cfg->thread_pool_size);
            goto free_session;
        }
    }
    *out = dev;
    return 0;

free_session:
    fll_session_free(dev->se);
free_queues:
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        vqt_destroy(&dev->q[i]);
        vqt_thread_destroy(&dev->t[i]);
    }
    vmig_destroy(&dev->mig);
    vmem_table_unref(dev->mem);
free_dev:
    pthread_mutex_destroy(&dev->mem_lock);
    pthread_cond_destroy(&dev->mem_changed);
    pthread_mutex_destroy(&dev->backend_lock);
    free(dev);
    return err;
}

static void vdev_stop_all(struct vufsd_dev *dev)
{
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        vqt_stop(&dev->q[i]);
    /* No request runs now: no mapping call is in flight to this frontend. */
    if (dev->c.dax)
        dax_window_reset(dev->c.dax);
}

void vdev_stop(struct vufsd_dev *dev)
{
    vdev_stop_all(dev);
}

void vdev_reset(struct vufsd_dev *dev)
{
    vmig_abort(&dev->mig);
    vdev_stop_all(dev);
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        vqt_reset(&dev->q[i]);
    /*
     * The device is reset, not the connection: the protocol features (REPLY_ACK),
     * the backend request channel, the ownership and the guest memory table stay,
     * since QEMU does not negotiate or send them again after RESET_DEVICE (with
     * CONFIGURE_MEM_SLOTS it sends only the regions that changed since) and would
     * wait forever for acks. The driver acks its virtio features again.
     */
    dev->features = 0;
    dev->status = 0;
    vdev_log_apply(dev); /* VHOST_F_LOG_ALL went with the features; the log stays mapped */
    vdev_clear_broken(dev);
    fll_session_shutdown(dev->se); /* no request runs: every queue is stopped */
    if (dev->c.fs_reset)
        dev->c.fs_reset(dev->c.fs);
}

void vdev_free(struct vufsd_dev *dev)
{
    if (!dev)
        return;
    vmig_destroy(&dev->mig);
    vdev_stop_all(dev);
    vpool_free(dev->pool); /* idle by now: every queue drained */
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        vqt_destroy(&dev->q[i]);
        vqt_thread_destroy(&dev->t[i]); /* none runs: every queue stopped */
    }
    fll_session_shutdown(dev->se); /* the frontend left without DESTROY */
    fll_session_free(dev->se);
    if (dev->c.fs_reset)
        dev->c.fs_reset(dev->c.fs);
    vdev_set_backend_fd(dev, -1);
    vmem_log_free(dev->log); /* no queue holds it: every queue is destroyed */
    vmem_table_unref(dev->mem);
    pthread_mutex_destroy(&dev->mem_lock);
    pthread_cond_destroy(&dev->mem_changed);
    pthread_mutex_destroy(&dev->backend_lock);
    free(dev);
}

void vdev_log_apply(struct vufsd_dev *dev)
{
    struct vmem_log *l = vdev_has_feature(dev, VU_F_LOG_ALL) ? dev->log : NULL;

    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        struct vufsd_queue *q = &dev->q[i];
        pthread_mutex_lock(&q->lock);
        q->log = l;
        q->log_used = l && (q->addr_flags & VU_VRING_F_LOG);
        q->log_used_gpa = q->log_gpa;
        pthread_mutex_unlock(&q->lock);
    }
}

void vdev_set_log(struct vufsd_dev *dev, struct vmem_log *l)
{
    struct vmem_log *old = dev->log;

    dev->log = l;
    vdev_log_apply(dev); /* no queue points at old after this */
    vmem_log_free(old);
}

void vdev_set_owned(struct vufsd_dev *dev)
{
    /* The diagram's one edge: NEW -> OWNED (OWNED -> OWNED for a repeated SET_OWNER). */
    assert(dev->state == VDEV_NEW || dev->state == VDEV_OWNED);
    dev->state = VDEV_OWNED;
}

bool vdev_has_feature(const struct vufsd_dev *dev, unsigned bit)
{
    return bit < 64 && (dev->features >> bit) & 1;
}

bool vdev_has_protocol_feature(const struct vufsd_dev *dev, unsigned bit)
{
    return bit < 64 && (dev->protocol_features >> bit) & 1;
}

uint64_t vdev_offered_features(void)
{
    return (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_INDIRECT_DESC) |
           (1ull << VIRTIO_RING_F_EVENT_IDX) | (1ull << VU_F_PROTOCOL_FEATURES) |
           (1ull << VU_F_LOG_ALL);
}

bool vdev_shmem_window(const struct vufsd_config *cfg)
{
    return cfg->dax_window && cfg->dax_protocol == VUFSD_DAX_PROTO_SHMEM;
}

uint64_t vdev_offered_protocol_features(const struct vufsd_config *cfg)
{
    uint64_t f = (1ull << VU_PROTOCOL_F_MQ) | (1ull << VU_PROTOCOL_F_REPLY_ACK) |
                 (1ull << VU_PROTOCOL_F_BACKEND_REQ) | (1ull << VU_PROTOCOL_F_BACKEND_SEND_FD) |
                 (1ull << VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS) | (1ull << VU_PROTOCOL_F_STATUS) |
                 (1ull << VU_PROTOCOL_F_RESET_DEVICE) | (1ull << VU_PROTOCOL_F_LOG_SHMFD);
    if (vdev_shmem_window(cfg))
        f |= 1ull << VU_PROTOCOL_F_SHMEM;
    /* As the Rust virtiofsd: the config space only with a tag to put in it. */
    if (cfg->tag)
        f |= 1ull << VU_PROTOCOL_F_CONFIG;
    return f;
}

uint64_t vdev_protocol_features(const struct vufsd_dev *dev)
{
    uint64_t f = vdev_offered_protocol_features(dev->c.cfg);
    if (vmig_supported(dev))
        f |= 1ull << VU_PROTOCOL_F_DEVICE_STATE;
    return f;
}

void vdev_mem_swap(struct vufsd_dev *dev, struct vmem_table *t)
{
    pthread_mutex_lock(&dev->mem_lock);
    struct vmem_table *old = dev->mem;
    dev->mem = t;
    dev->mem_gen++;
    pthread_cond_broadcast(&dev->mem_changed);
    pthread_mutex_unlock(&dev->mem_lock);
    /* Re-translate the rings before the next batch. Queue threads and in-flight
     * requests keep their own references to the old table. */
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        if (dev->q[i].state == VQT_RUNNING)
            vqt_mem_changed(&dev->q[i], vmem_table_ref(t));
    vmem_table_unref(old);
}

struct vmem_table *vdev_mem_get(struct vufsd_dev *dev, unsigned *gen)
{
    pthread_mutex_lock(&dev->mem_lock);
    struct vmem_table *t = vmem_table_ref(dev->mem);
    if (gen)
        *gen = dev->mem_gen;
    pthread_mutex_unlock(&dev->mem_lock);
    return t;
}

void vdev_mem_added(struct vufsd_dev *dev)
{
    pthread_mutex_lock(&dev->mem_lock);
    dev->mem_adds++;
    pthread_cond_broadcast(&dev->mem_changed);
    pthread_mutex_unlock(&dev->mem_lock);
}

unsigned vdev_mem_adds(struct vufsd_dev *dev)
{
    pthread_mutex_lock(&dev->mem_lock);
    unsigned n = dev->mem_adds;
    pthread_mutex_unlock(&dev->mem_lock);
    return n;
}

bool vdev_mem_wait_added(struct vufsd_dev *dev, unsigned since, int timeout_ms)
{
    struct timespec until = vufs_deadline(CLOCK_MONOTONIC, (uint64_t)timeout_ms * 1000000u);
    pthread_mutex_lock(&dev->mem_lock);
    int ret = 0;
    while (dev->mem_adds == since && ret == 0)
        ret = pthread_cond_timedwait(&dev->mem_changed, &dev->mem_lock, &until);
    bool added = dev->mem_adds != since;
    pthread_mutex_unlock(&dev->mem_lock);
    return added;
}

void vdev_mem_expect_removal(struct vufsd_dev *dev)
{
    pthread_mutex_lock(&dev->mem_lock);
    dev->mem_rems_pending++;
    pthread_mutex_unlock(&dev->mem_lock);
}

/* A REM_MEM_REG of guest RAM (not a window range) settles one too: it also
 * makes room, so the count errs towards refusing, never past the limit. */
void vdev_mem_removal_settled(struct vufsd_dev *dev)
{
    pthread_mutex_lock(&dev->mem_lock);
    if (dev->mem_rems_pending)
        dev->mem_rems_pending--;
    pthread_cond_broadcast(&dev->mem_changed);
    pthread_mutex_unlock(&dev->mem_lock);
}

void vdev_mem_stopping(struct vufsd_dev *dev, bool begin)
{
    pthread_mutex_lock(&dev->mem_lock);
    if (begin)
        dev->mem_stopping++;
    else
        dev->mem_stopping--;
    pthread_cond_broadcast(&dev->mem_changed);
    pthread_mutex_unlock(&dev->mem_lock);
}

int vdev_mem_wait_room(struct vufsd_dev *dev, int timeout_ms)
{
    struct timespec until = vufs_deadline(CLOCK_MONOTONIC, (uint64_t)timeout_ms * 1000000u);
    pthread_mutex_lock(&dev->mem_lock);
    int ret = 0;
    while (dev->mem->mem.nregions >= VMEM_MAX_REGIONS) {
        if (!dev->mem_rems_pending || dev->mem_stopping) {
            ret = -ENOSPC;
            break;
        }
        if (pthread_cond_timedwait(&dev->mem_changed, &dev->mem_lock, &until) == ETIMEDOUT &&
            dev->mem->mem.nregions >= VMEM_MAX_REGIONS) {
            dev->mem_rems_pending = 0;
            ret = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&dev->mem_lock);
    return ret;
}

void vdev_set_broken(struct vufsd_dev *dev, unsigned queue, const char *why, int err)
{
    if (__atomic_exchange_n(&dev->broken, 1, __ATOMIC_ACQ_REL))
        return;
    vlog_err("queue %u: %s (%s): device marked broken, no further requests are served "
             "until the frontend resets it",
             queue, why, strerror(-err));
    int efd = __atomic_load_n(&dev->q[queue].err_fd, __ATOMIC_ACQUIRE);
    if (efd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(efd, &one, sizeof(one));
        (void)w;
    }
}

bool vdev_is_broken(const struct vufsd_dev *dev)
{
    return __atomic_load_n(&dev->broken, __ATOMIC_ACQUIRE);
}

void vdev_clear_broken(struct vufsd_dev *dev)
{
    if (!__atomic_exchange_n(&dev->broken, 0, __ATOMIC_ACQ_REL))
        return;
    vlog_info("device reset by the frontend: serving again");
    /* Broken queues sleep without listening to kicks (vqt_wait): wake them. */
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        if (dev->q[i].state == VQT_RUNNING)
            vqt_wake(&dev->q[i]);
}

void vdev_set_backend_fd(struct vufsd_dev *dev, int fd)
{
    pthread_mutex_lock(&dev->backend_lock);
    if (dev->backend_fd >= 0)
        close(dev->backend_fd);
    dev->backend_fd = fd;
    pthread_mutex_unlock(&dev->backend_lock);
}

bool vdev_can_map(struct vufsd_dev *dev, bool shmem)
{
    if (!vdev_has_protocol_feature(dev, VU_PROTOCOL_F_REPLY_ACK) ||
        !vdev_has_protocol_feature(dev, VU_PROTOCOL_F_BACKEND_REQ) ||
        !vdev_has_protocol_feature(dev, VU_PROTOCOL_F_BACKEND_SEND_FD) ||
        (shmem && !vdev_has_protocol_feature(dev, VU_PROTOCOL_F_SHMEM)))
        return false;
    pthread_mutex_lock(&dev->backend_lock);
    bool chan = dev->backend_fd >= 0;
    pthread_mutex_unlock(&dev->backend_lock);
    return chan;
}

static int vdev_send_all(int fd, const void *buf, size_t len, int pass_fd)
{
    const char *p = buf;
    bool fd_sent = pass_fd < 0;

    while (len) {
        struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (!fd_sent) {
            memset(&u, 0, sizeof(u));
            mh.msg_control = u.buf;
            mh.msg_controllen = sizeof(u.buf);
            struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
        }
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        fd_sent = true;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int vdev_recv_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -ECONNRESET;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int vdev_backend_request(struct vufsd_dev *dev, uint32_t request, const void *payload, size_t size,
                         int fd, uint64_t *reply)
{
    struct {
        struct vu_msg_hdr hdr;
        uint8_t payload[VU_MAX_PAYLOAD];
    } m;
    int ret;

    if (size > sizeof(m.payload))
        return -EINVAL;
    if (!vdev_has_protocol_feature(dev, VU_PROTOCOL_F_REPLY_ACK))
        return -EOPNOTSUPP;
    if (fd >= 0 && !vdev_has_protocol_feature(dev, VU_PROTOCOL_F_BACKEND_SEND_FD))
        return -EOPNOTSUPP;

    m.hdr.request = request;
    m.hdr.flags = VU_VERSION | VU_FLAG_NEED_REPLY;
    m.hdr.size = (uint32_t)size;
    if (size)
        memcpy(m.payload, payload, size);

    pthread_mutex_lock(&dev->backend_lock);
    if (dev->backend_fd < 0) {
        ret = -ENOTCONN;
        goto unlock;
    }
    ret = vdev_send_all(dev->backend_fd, &m, sizeof(m.hdr) + size, fd);
    if (ret < 0)
        goto unlock;

    struct vu_msg_hdr rh;
    uint64_t value;
    ret = vdev_recv_all(dev->backend_fd, &rh, sizeof(rh));
    if (ret < 0)
        goto unlock;
    if (rh.request != request || !(rh.flags & VU_FLAG_REPLY) || rh.size != sizeof(value)) {
        vlog_warn("backend channel: unexpected reply (request %u, flags %#x, size %u)", rh.request,
                  rh.flags, rh.size);
        ret = -EPROTO;
        goto unlock;
    }
    ret = vdev_recv_all(dev->backend_fd, &value, sizeof(value));
    if (ret < 0)
        goto unlock;
    if (reply)
        *reply = value;
    ret = value ? -EIO : 0;
unlock:
    pthread_mutex_unlock(&dev->backend_lock);
    return ret;
}
