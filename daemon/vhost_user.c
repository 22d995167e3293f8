/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vhost-user front-end requests, one handler each (QEMU docs/interop/vhost-user.rst).
 * Handlers run on the message thread only, return 0 or -errno, take ownership of
 * an fd by setting its slot to -1, and fill `reply` for requests that have their
 * own reply. The loop closes every fd a handler did not take.
 */
#include "vhost_user.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <endian.h>
#include <unistd.h>

#include "dax/dax.h"
#include "log.h"
#include "vu_msg.h"
#include "vufs_util.h"

/*
 * A request handler: m passed vu_msg_check(); fds are the message's (the handler
 * takes the ones it keeps and sets them to -1); a request with its own reply
 * fills reply. 0 or -errno (with REPLY_ACK, the frontend hears of it).
 */
typedef int vu_handler(struct vufsd_dev *dev, struct vu_msg *m, int *fds, int nfds,
                       struct vu_msg *reply);
#define VU_HANDLER(name)                                                                           \
    static int name(struct vufsd_dev *dev, struct vu_msg *m, int *fds, int nfds, struct vu_msg *reply)

static void vu_reply_u64(struct vu_msg *reply, uint64_t v)
{
    reply->payload.u64 = v;
    reply->hdr.size = sizeof(uint64_t);
}

/* The queue a vring message names, or NULL if out of range. */
static struct vufsd_queue *vu_queue(struct vufsd_dev *dev, uint32_t index)
{
    return index < VDEV_MAX_QUEUES ? &dev->q[index] : NULL;
}

static bool vu_all_idle(const struct vufsd_dev *dev)
{
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        if (dev->q[i].state != VQT_IDLE)
            return false;
    return true;
}

/*
 * The last running queue stopped (GET_VRING_BASE) or the driver's status went
 * to 0 with every queue stopped: the driver stopped. A reset, a reboot or a
 * rebind of the guest's driver, and a VM pause, look alike here; the FUSE
 * session tells them apart by the next request (fll_session_driver_stopped).
 */
static void vu_driver_stopped(struct vufsd_dev *dev)
{
    if (!fll_session_initialized(dev->se))
        return;
    vlog_info("driver stopped: a FUSE_INIT as its next request starts a new session");
    fll_session_driver_stopped(dev->se);
}

/* ---- Features and ownership ------------------------------------------------------ */

VU_HANDLER(vu_get_features)
{
    vu_reply_u64(reply, vdev_offered_features());
    return 0;
}

VU_HANDLER(vu_set_features)
{
    uint64_t f = m->payload.u64;
    if (f & ~vdev_offered_features())
        return -EINVAL;
    bool was_logging = vdev_has_feature(dev, VU_F_LOG_ALL);
    dev->features = f;
    /* A driver (re)starting the device with every queue stopped is a reset point. */
    if (vu_all_idle(dev))
        vdev_clear_broken(dev);
    /* The frontend waits for this message's ack before it copies guest memory:
     * from here on every completion logs its writes. */
    vdev_log_apply(dev);
    if (was_logging != vdev_has_feature(dev, VU_F_LOG_ALL))
        vlog_info("dirty page logging %s%s", was_logging ? "off" : "on",
                  !was_logging && !dev->log ? " (no log set yet)" : "");
    vlog_debug("features acked: %#llx", (unsigned long long)f);
    return 0;
}

VU_HANDLER(vu_get_protocol_features)
{
    vu_reply_u64(reply, vdev_protocol_features(dev));
    return 0;
}

VU_HANDLER(vu_set_protocol_features)
{
    uint64_t f = m->payload.u64;
    if (f & ~vdev_protocol_features(dev))
        return -EINVAL;
    dev->protocol_features = f;
    return 0;
}

VU_HANDLER(vu_get_queue_num)
{
    vu_reply_u64(reply, VDEV_MAX_QUEUES);
    return 0;
}

VU_HANDLER(vu_set_owner)
{
    vdev_set_owned(dev);
    return 0;
}

VU_HANDLER(vu_reset_owner)
{
    vlog_info("frontend reset the device");
    vdev_reset(dev);
    return 0;
}

VU_HANDLER(vu_set_status)
{
    if (m->payload.u64 > UINT8_MAX)
        return -EINVAL;
    uint8_t old = dev->status;
    dev->status = (uint8_t)m->payload.u64;
    if (dev->status == 0)
        vdev_clear_broken(dev);
    if (dev->status == 0 && old != 0 && vu_all_idle(dev))
        vu_driver_stopped(dev);
    /* A driver reset with every queue stopped: the frontend dropped its window
     * mappings (no request runs, so no mapping call is in flight). */
    if (dev->status == 0 && dev->c.dax && vu_all_idle(dev))
        dax_window_reset(dev->c.dax);
    return 0;
}

VU_HANDLER(vu_get_status)
{
    vu_reply_u64(reply, dev->status);
    return 0;
}

/* ---- Memory ------------------------------------------------------------------------- */

static struct vmem_desc vu_region_desc(const struct vu_mem_region *r)
{
    return (struct vmem_desc){
        .gpa = r->gpa, .size = r->size, .uva = r->uva, .mmap_offset = r->mmap_offset};
}

/* At info for whole tables, at debug for the region churn of a DAX window. */
static void vu_log_table(const struct vmem_table *t, bool whole)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < t->mem.nregions; i++)
        total += t->mem.r[i].size;
    if (whole)
        vlog_info("guest memory: %u region(s), %llu MiB", t->mem.nregions,
                  (unsigned long long)(total >> 20));
    else
        vlog_debug("guest memory: %u region(s), %llu MiB", t->mem.nregions,
                   (unsigned long long)(total >> 20));
}

VU_HANDLER(vu_set_mem_table)
{
    struct vmem_table *t = NULL;
    if (vmem_table_new(&t) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < m->payload.mem.nregions; i++) {
        struct vmem_desc d = vu_region_desc(&m->payload.mem.regions[i]);
        int ret = vmem_table_add(t, &d, fds[i]);
        if (ret < 0) {
            vlog_warn("SET_MEM_TABLE: region %u rejected: %s", i, strerror(-ret));
            vmem_table_unref(t);
            return ret;
        }
    }
    vu_log_table(t, true);
    vdev_mem_swap(dev, t);
    return 0;
}

VU_HANDLER(vu_get_max_mem_slots)
{
    vu_reply_u64(reply, VMEM_MAX_REGIONS);
    return 0;
}

/* ADD_MEM_REG (fd: the region's) and REM_MEM_REG: a copy of the current table
 * with the region added or removed, swapped in. */
static int vu_mem_reg_change(struct vufsd_dev *dev, const struct vu_msg *m, int fd, bool add)
{
    const char *what = add ? "ADD_MEM_REG" : "REM_MEM_REG";
    struct vmem_table *cur = vdev_mem_get(dev, NULL);
    struct vmem_table *t = NULL;
    int ret = vmem_table_copy(cur, &t);
    vmem_table_unref(cur);
    if (ret < 0)
        return ret;
    struct vmem_desc d = vu_region_desc(&m->payload.memreg.region);
    ret = add ? vmem_table_add(t, &d, fd) : vmem_table_remove(t, &d);
    if (ret < 0) {
        vlog_warn("%s rejected: %s", what, strerror(-ret));
        vmem_table_unref(t);
        return ret;
    }
    vu_log_table(t, false);
    vdev_mem_swap(dev, t);
    if (add)
        vdev_mem_added(dev);
    else
        vdev_mem_removal_settled(dev); /* a removal the window's unmap announced */
    return 0;
}

VU_HANDLER(vu_add_mem_reg)
{
    return vu_mem_reg_change(dev, m, fds[0], true);
}

VU_HANDLER(vu_rem_mem_reg)
{
    return vu_mem_reg_change(dev, m, -1, false);
}

/* ---- Dirty page log (live migration) ------------------------------------------------ */

/*
 * SET_LOG_BASE: the log's fd, size and offset. Answered (a u64, 0 on success)
 * once queues log into the new log only; a log that cannot be mapped is refused
 * and the old one stays.
 */
VU_HANDLER(vu_set_log_base)
{
    struct vmem_log *l;
    int ret;

    if (!vdev_has_protocol_feature(dev, VU_PROTOCOL_F_LOG_SHMFD))
        return -EPROTO;
    ret = vmem_log_map(fds[0], m->payload.log.mmap_size, m->payload.log.mmap_offset, &l);
    if (ret < 0) {
        vlog_warn("SET_LOG_BASE: log of %llu bytes at offset %llu refused: %s",
                  (unsigned long long)m->payload.log.mmap_size,
                  (unsigned long long)m->payload.log.mmap_offset, strerror(-ret));
        return ret;
    }
    vdev_set_log(dev, l);
    vlog_info("dirty page log: %llu KiB, covers %llu MiB of guest memory",
              (unsigned long long)(l->size >> 10),
              (unsigned long long)((l->size * 8 * VMEM_LOG_PAGE) >> 20));
    vu_reply_u64(reply, 0);
    return 0;
}

/* SET_LOG_FD: an eventfd to tell the frontend the log changed. Optional in the
 * protocol, and QEMU reads the log without it: the fd is closed unused. */
VU_HANDLER(vu_set_log_fd)
{
    return 0;
}

/* ---- Device state (live migration) ---------------------------------------------------- */

/*
 * The u64 that says "failed" for a request whose own reply is a status
 * (SET_LOG_BASE, SET_DEVICE_STATE_FD, CHECK_DEVICE_STATE: non-zero), also when
 * the message was refused before its handler ran; 0 for the others (GET_*
 * carry a value, not a status).
 */
static uint64_t vu_status_failed(uint32_t req, int err)
{
    uint64_t code = (uint64_t)-err & 0xff;
    if (!code)
        code = 1; /* an errno that is 0 in the low byte still fails */
    switch (req) {
    case VU_SET_DEVICE_STATE_FD:
        return VU_STATE_REPLY_NOFD | code; /* never an fd with an error */
    case VU_SET_LOG_BASE:
    case VU_CHECK_DEVICE_STATE:
        return code;
    default:
        return 0;
    }
}

/*
 * SET_DEVICE_STATE_FD: the frontend's pipe end for the state (migration.c).
 * The reply says success (0) or failure in bits 0-7, and always has the
 * no-fd bit: vufsd uses the frontend's pipe, never one of its own.
 */
VU_HANDLER(vu_set_device_state_fd)
{
    int ret = -EPROTO;

    if (vdev_has_protocol_feature(dev, VU_PROTOCOL_F_DEVICE_STATE))
        ret = vmig_set_fd(dev, m->payload.dstate.direction, m->payload.dstate.phase, fds[0]);
    if (ret == 0)
        fds[0] = -1;
    vu_reply_u64(reply, ret < 0 ? vu_status_failed(VU_SET_DEVICE_STATE_FD, ret) : VU_STATE_REPLY_NOFD);
    return ret;
}

/* CHECK_DEVICE_STATE: 0 when the state went out whole, or came in and was loaded. */
VU_HANDLER(vu_check_device_state)
{
    int ret = -EPROTO;

    if (vdev_has_protocol_feature(dev, VU_PROTOCOL_F_DEVICE_STATE))
        ret = vmig_check(dev);
    vu_reply_u64(reply, ret < 0 ? vu_status_failed(VU_CHECK_DEVICE_STATE, ret) : 0);
    return ret;
}

/* ---- Vrings ---------------------------------------------------------------------------- */

VU_HANDLER(vu_set_vring_num)
{
    struct vufsd_queue *q = vu_queue(dev, m->payload.state.index);
    if (!q || !vq_size_valid(m->payload.state.num))
        return -EINVAL;
    if (q->state != VQT_IDLE)
        return -EBUSY;
    q->num = m->payload.state.num;
    return 0;
}

VU_HANDLER(vu_set_vring_addr)
{
    const struct vu_vring_addr *a = &m->payload.addr;
    struct vufsd_queue *q = vu_queue(dev, a->index);
    if (!q)
        return -EINVAL;
    if (a->flags & ~VU_VRING_F_LOG)
        return -EINVAL;
    if (q->state != VQT_IDLE) {
        /* On a running ring only the logging flag and address may change: the
         * frontend turns used-ring logging on and off this way (vhost_dev_set_log). */
        if (a->desc_uva != q->desc_uva || a->avail_uva != q->avail_uva ||
            a->used_uva != q->used_uva)
            return -EBUSY;
    } else {
        /* Alignment the split ring format requires (virtio spec 2.7). */
        if ((a->desc_uva & 15) || (a->avail_uva & 1) || (a->used_uva & 3))
            return -EINVAL;
        q->desc_uva = a->desc_uva;
        q->avail_uva = a->avail_uva;
        q->used_uva = a->used_uva;
        q->addr_set = true;
    }
    q->addr_flags = a->flags;
    q->log_gpa = a->log_gpa;
    vdev_log_apply(dev);
    return 0;
}

VU_HANDLER(vu_set_vring_base)
{
    struct vufsd_queue *q = vu_queue(dev, m->payload.state.index);
    if (!q || m->payload.state.num > UINT16_MAX)
        return -EINVAL;
    if (q->state != VQT_IDLE)
        return -EBUSY;
    q->base = (uint16_t)m->payload.state.num;
    return 0;
}

VU_HANDLER(vu_get_vring_base)
{
    uint32_t index = m->payload.state.index;
    struct vufsd_queue *q = vu_queue(dev, index);

    reply->hdr.size = sizeof(struct vu_vring_state);
    reply->payload.state.index = index;
    reply->payload.state.num = 0;
    if (!q)
        return -EINVAL;
    bool was_running = q->state != VQT_IDLE;
    vqt_stop(q); /* waits for the queue's in-flight requests */
    reply->payload.state.num = q->base;
    if (was_running && vu_all_idle(dev))
        vu_driver_stopped(dev);
    return 0;
}

/* SET_VRING_KICK, _CALL and _ERR: the queue their u64 names, or NULL when it
 * names none or sets bits beyond the index and VU_VRING_NOFD. */
static struct vufsd_queue *vu_vring_fd_queue(struct vufsd_dev *dev, const struct vu_msg *m)
{
    if (m->payload.u64 & ~(uint64_t)(VU_VRING_IDX_MASK | VU_VRING_NOFD))
        return NULL;
    return vu_queue(dev, m->payload.u64 & VU_VRING_IDX_MASK);
}

VU_HANDLER(vu_set_vring_kick)
{
    struct vufsd_queue *q = vu_vring_fd_queue(dev, m);
    if (!q)
        return -EINVAL;
    vqt_stop(q); /* a new kick fd (re)starts the ring */
    if (q->kick_fd >= 0)
        close(q->kick_fd);
    q->kick_fd = -1;
    if (m->payload.u64 & VU_VRING_NOFD)
        return -EOPNOTSUPP; /* polling without a kick fd is not implemented */
    q->kick_fd = TAKE_FD(fds[0]);
    int ret = vqt_start(q);
    if (ret == -EAGAIN) {
        vlog_warn("queue %u: kick fd before the ring was configured",
                  (unsigned)(m->payload.u64 & VU_VRING_IDX_MASK));
        return -EINVAL;
    }
    return ret;
}

VU_HANDLER(vu_set_vring_call)
{
    struct vufsd_queue *q = vu_vring_fd_queue(dev, m);
    if (!q)
        return -EINVAL;
    int fd = m->payload.u64 & VU_VRING_NOFD ? -1 : TAKE_FD(fds[0]);
    vqt_set_call_fd(q, fd);
    return 0;
}

VU_HANDLER(vu_set_vring_err)
{
    struct vufsd_queue *q = vu_vring_fd_queue(dev, m);
    if (!q)
        return -EINVAL;
    int fd = m->payload.u64 & VU_VRING_NOFD ? -1 : TAKE_FD(fds[0]);
    /* Read by vdev_set_broken() on queue threads: swap atomically, close late. */
    int old = __atomic_exchange_n(&q->err_fd, fd, __ATOMIC_ACQ_REL);
    if (old >= 0)
        close(old);
    return 0;
}

VU_HANDLER(vu_set_vring_enable)
{
    struct vufsd_queue *q = vu_queue(dev, m->payload.state.index);
    if (!q || m->payload.state.num > 1)
        return -EINVAL;
    __atomic_store_n(&q->enabled, m->payload.state.num == 1, __ATOMIC_RELEASE);
    if (q->state == VQT_RUNNING)
        vqt_wake(q);
    return 0;
}

/*
 * GET_SHMEM_CONFIG: region 0 is the DAX window, sized by --dax-window. A frontend
 * that did not negotiate VHOST_USER_PROTOCOL_F_SHMEM (or a daemon without a
 * window) gets a well-formed reply with no region, so it exposes no window.
 */
VU_HANDLER(vu_get_shmem_config)
{
    bool on = vdev_shmem_window(dev->c.cfg) && vdev_has_protocol_feature(dev, VU_PROTOCOL_F_SHMEM);
    struct vu_shmem_config *c = &reply->payload.shmem_config;

    memset(c, 0, sizeof(*c));
    if (on) {
        c->nregions = 1;
        c->memory_sizes[0] = dev->c.cfg->dax_window;
    }
    reply->hdr.size = sizeof(*c);
    return on ? 0 : -EOPNOTSUPP;
}

/*
 * GET_CONFIG: struct virtio_fs_config, the tag from --tag and the request
 * queue count from --num-request-queues, for any window inside it. A bad
 * window gets a reply without payload (vhost-user's error for GET_CONFIG).
 */
VU_HANDLER(vu_get_config)
{
    const struct vufsd_config *cfg = dev->c.cfg;
    struct vu_fs_config space = {0};
    uint32_t size;

    reply->hdr.size = 0;
    if (!vdev_has_protocol_feature(dev, VU_PROTOCOL_F_CONFIG))
        return -EOPNOTSUPP;
    if (cfg->tag)
        memcpy(space.tag, cfg->tag, strnlen(cfg->tag, sizeof(space.tag)));
    space.num_request_queues = htole32(cfg->num_request_queues);
    int ret = vu_config_read(&m->payload.config, &space, sizeof(space), &reply->payload.config,
                             &size);
    if (ret < 0)
        return ret;
    reply->hdr.size = size;
    return 0;
}

/* The guest cannot write virtio-fs's config space: nothing in it is writable. */
VU_HANDLER(vu_set_config)
{
    return -EPERM;
}

VU_HANDLER(vu_set_backend_req_fd)
{
    vdev_set_backend_fd(dev, TAKE_FD(fds[0]));
    return 0;
}

static vu_handler *const vu_handlers[VU_REQUEST_MAX] = {
    [VU_GET_FEATURES] = vu_get_features,
    [VU_SET_FEATURES] = vu_set_features,
    [VU_SET_OWNER] = vu_set_owner,
    [VU_RESET_OWNER] = vu_reset_owner,
    /* QEMU's vhost-user-fs sends it on every guest reset of the device (and at
     * start-up): the one message that says "a new driver" outright. */
    [VU_RESET_DEVICE] = vu_reset_owner,
    [VU_SET_MEM_TABLE] = vu_set_mem_table,
    [VU_SET_LOG_BASE] = vu_set_log_base,
    [VU_SET_LOG_FD] = vu_set_log_fd,
    [VU_SET_VRING_NUM] = vu_set_vring_num,
    [VU_SET_VRING_ADDR] = vu_set_vring_addr,
    [VU_SET_VRING_BASE] = vu_set_vring_base,
    [VU_GET_VRING_BASE] = vu_get_vring_base,
    [VU_SET_VRING_KICK] = vu_set_vring_kick,
    [VU_SET_VRING_CALL] = vu_set_vring_call,
    [VU_SET_VRING_ERR] = vu_set_vring_err,
    [VU_GET_PROTOCOL_FEATURES] = vu_get_protocol_features,
    [VU_SET_PROTOCOL_FEATURES] = vu_set_protocol_features,
    [VU_GET_QUEUE_NUM] = vu_get_queue_num,
    [VU_SET_VRING_ENABLE] = vu_set_vring_enable,
    [VU_SET_BACKEND_REQ_FD] = vu_set_backend_req_fd,
    [VU_GET_MAX_MEM_SLOTS] = vu_get_max_mem_slots,
    [VU_ADD_MEM_REG] = vu_add_mem_reg,
    [VU_REM_MEM_REG] = vu_rem_mem_reg,
    [VU_SET_STATUS] = vu_set_status,
    [VU_GET_STATUS] = vu_get_status,
    [VU_GET_SHMEM_CONFIG] = vu_get_shmem_config,
    [VU_SET_DEVICE_STATE_FD] = vu_set_device_state_fd,
    [VU_CHECK_DEVICE_STATE] = vu_check_device_state,
    [VU_GET_CONFIG] = vu_get_config,
    [VU_SET_CONFIG] = vu_set_config,
};

/* ---- Socket I/O ------------------------------------------------------------------------ */

/*
 * Reads one message. Returns 1 with *nfds fds received (-1 when the fds did not
 * fit or arrived malformed: they are closed and the message will be rejected),
 * 0 on a clean EOF before a header, or -errno.
 */
static int vu_read_msg(int fd, struct vu_msg *m, int *fds, int *nfds)
{
    union {
        char buf[CMSG_SPACE(VU_MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &m->hdr, .iov_len = sizeof(m->hdr)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n;

    *nfds = 0;
    do {
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return 0;

    bool bad_fds = (mh.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
            bad_fds = true;
            continue;
        }
        size_t cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < cnt; i++) {
            int f;
            memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (*nfds < VU_MAX_FDS)
                fds[(*nfds)++] = f;
            else {
                close(f);
                bad_fds = true;
            }
        }
    }

    int ret = 0;
    if ((size_t)n < sizeof(m->hdr))
        ret = vdev_recv_all(fd, (char *)&m->hdr + n, sizeof(m->hdr) - (size_t)n);
    if (ret == 0 && m->hdr.size > VU_MAX_PAYLOAD) {
        vlog_err("vhost-user: message %u with a %u-byte payload: stream corrupt", m->hdr.request,
                 m->hdr.size);
        ret = -EBADMSG;
    }
    if (ret == 0 && m->hdr.size)
        ret = vdev_recv_all(fd, &m->payload, m->hdr.size);
    if (ret < 0 || bad_fds) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = ret < 0 ? 0 : -1;
    }
    return ret < 0 ? ret : 1;
}

static int vu_send_reply(int fd, const struct vu_msg *m, struct vu_msg *reply)
{
    /* Header and payload are not contiguous in struct vu_msg (the union is aligned). */
    struct iovec iov[2] = {
        {.iov_base = &reply->hdr, .iov_len = sizeof(reply->hdr)},
        {.iov_base = &reply->payload, .iov_len = reply->hdr.size},
    };
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};

    reply->hdr.request = m->hdr.request;
    reply->hdr.flags = VU_VERSION | VU_FLAG_REPLY;
    for (;;) {
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        /* Advance over what was sent; replies are tiny, so this rarely loops. */
        while (mh.msg_iovlen && (size_t)n >= mh.msg_iov[0].iov_len) {
            n -= (ssize_t)mh.msg_iov[0].iov_len;
            mh.msg_iov++;
            mh.msg_iovlen--;
        }
        if (!mh.msg_iovlen)
            return 0;
        mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + n;
        mh.msg_iov[0].iov_len -= (size_t)n;
    }
}

/* Logs an unknown request once per id. */
static void vu_log_unknown(struct vufsd_dev *dev, uint32_t request)
{
    if (request < 64) {
        if (dev->unknown_logged & (1ull << request))
            return;
        dev->unknown_logged |= 1ull << request;
    } else {
        if (dev->unknown_big_logged)
            return;
        dev->unknown_big_logged = true;
    }
    vlog_warn("vhost-user: unsupported request %u (%s), answered with an error", request,
              vu_request_name(request) ? vu_request_name(request) : "unknown");
}

/* Runs one message, closes the fds it did not keep, and sends whatever reply it calls for.
 * Returns 0 or a socket error. */
static int vu_dispatch(struct vufsd_dev *dev, int conn_fd, struct vu_msg *m, int *fds, int nfds)
{
    struct vu_msg reply;
    uint32_t req = m->hdr.request;
    const char *name = vu_request_name(req);
    int ret;

    memset(&reply.hdr, 0, sizeof(reply.hdr));
    ret = vu_msg_check(m, m->hdr.size, nfds);
    if (ret == 0 && req < VU_REQUEST_MAX && vu_handlers[req])
        ret = vu_handlers[req](dev, m, fds, nfds, &reply);
    else if (ret == 0)
        ret = -ENOSYS;

    /* Leftover fds are closed before the reply: once the frontend has it, we hold none. */
    for (int i = 0; i < nfds; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }

    if (ret == -ENOSYS)
        vu_log_unknown(dev, req);
    else if (ret < 0)
        vlog_warn("vhost-user: %s failed: %s", name ? name : "?", strerror(-ret));
    else
        vlog_debug("vhost-user: %s done", name);

    /* SET_LOG_BASE has its own reply only with LOG_SHMFD: without it, QEMU sends
     * none and waits for none. */
    bool own_reply = vu_request_has_reply(req) &&
                     (req != VU_SET_LOG_BASE ||
                      vdev_has_protocol_feature(dev, VU_PROTOCOL_F_LOG_SHMFD));
    if (own_reply) {
        /* GET_CONFIG says "failed" with no payload; the others need theirs. */
        if (reply.hdr.size == 0 && req != VU_GET_CONFIG) /* the frontend waits for a u64 */
            vu_reply_u64(&reply, ret < 0 ? vu_status_failed(req, ret) : 0);
        return vu_send_reply(conn_fd, m, &reply);
    }
    if ((m->hdr.flags & VU_FLAG_NEED_REPLY) &&
        (vdev_has_protocol_feature(dev, VU_PROTOCOL_F_REPLY_ACK) ||
         req == VU_SET_PROTOCOL_FEATURES)) {
        vu_reply_u64(&reply, ret < 0 ? (uint64_t)-ret : 0);
        return vu_send_reply(conn_fd, m, &reply);
    }
    return 0;
}

/* Consumes an eventfd's count: true if it was readable. */
static bool vu_take_event(int fd, short revents)
{
    if (fd < 0 || !(revents & POLLIN))
        return false;
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
    return true;
}

int vu_serve(struct vufsd_dev *dev, int conn_fd, const struct vu_wake *w)
{
    struct vu_msg *m = malloc(sizeof(*m));
    int ret;

    if (!m)
        return -ENOMEM;
    for (;;) {
        struct pollfd p[5] = {
            {.fd = conn_fd, .events = POLLIN},
            {.fd = w->stop_fd, .events = POLLIN},
            {.fd = w->listen_fd, .events = POLLIN},
            {.fd = w->restart_fd, .events = POLLIN},
            {.fd = w->save_fd, .events = POLLIN},
        };
        if (poll(p, 5, -1) < 0) {
            if (errno == EINTR)
                continue;
            ret = -errno;
            break;
        }
        if (w->stop_fd >= 0 && (p[1].revents & POLLIN)) {
            ret = VU_SERVE_STOP;
            break;
        }
        if (vu_take_event(w->restart_fd, p[3].revents)) {
            ret = VU_SERVE_RESTART;
            break;
        }
        if (vu_take_event(w->save_fd, p[4].revents)) {
            ret = VU_SERVE_SAVE;
            break;
        }
        if (w->listen_fd >= 0 && (p[2].revents & POLLIN)) {
            int extra = accept4(w->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (extra >= 0) {
                vlog_warn("refused a second frontend: one is already connected");
                close(extra);
            }
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;

        int fds[VU_MAX_FDS];
        int nfds;
        memset(&m->hdr, 0, sizeof(m->hdr));
        ret = vu_read_msg(conn_fd, m, fds, &nfds);
        if (ret <= 0) {
            if (ret == -ECONNRESET)
                ret = 0;
            break;
        }
        ret = vu_dispatch(dev, conn_fd, m, fds, nfds);
        if (ret < 0)
            break;
    }
    free(m);
    if (ret == -EPIPE || ret == -ECONNRESET)
        ret = VU_SERVE_GONE;
    return ret;
}
