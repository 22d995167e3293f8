/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A device at rest for a restart (vdev_quiesce / vdev_resume) and the
 * vhost-user part of a saved state, section VST_SEC_VHOST, version 1:
 *
 *   u8  owned, u64 features, u64 protocol features, u8 status, u8 broken
 *   u32 fd index of the frontend's connection
 *   u32 fd index of the backend request channel (VST_NO_FD: none)
 *   u32 nregions (<= VMEM_MAX_REGIONS), per region
 *       u64 gpa, u64 size, u64 uva, u64 mmap_offset, u32 fd index
 *   u32 nqueues (<= VDEV_MAX_QUEUES), per configured queue
 *       u32 index, u8 running, u8 enabled, u32 num (0: not set), u8 addr_set,
 *       u64 desc, u64 avail, u64 used (frontend addresses), u16 base (the
 *       next avail index to pop), u32 kick, call and err fd indices,
 *       u16 nresume, nresume x u16 head (requests to run again)
 *
 * Everything here is what QEMU negotiated and set up once and never sends
 * again while the device runs: the new process must start from it exactly.
 */
#include "device.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "state/state.h"
#include "vu_msg.h"

/* How long one round of vdev_quiesce waits before taking parked requests back again. */
#define VDEV_QUIESCE_ROUND_NS (50 * 1000 * 1000L)

int vdev_quiesce(struct vufsd_dev *dev)
{
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        struct vufsd_queue *q = &dev->q[i];
        q->nresume = 0;
        if (q->state != VQT_RUNNING)
            continue;
        free(q->resume);
        q->resume = calloc(q->num, sizeof(*q->resume));
        if (!q->resume)
            return -ENOMEM;
    }
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        vqt_quiesce_begin(&dev->q[i]);
    /*
     * No queue pops now. A parked SETLKW stays in flight until its lock
     * comes, so it is taken back, unanswered, to run again later; a worker
     * may still park one meanwhile, hence the rounds.
     */
    for (;;) {
        if (dev->c.fs_detach_waits)
            dev->c.fs_detach_waits(dev->c.fs, vqt_detached, NULL);
        bool drained = true;
        for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
            if (dev->q[i].was_running && !vqt_wait_drained(&dev->q[i], VDEV_QUIESCE_ROUND_NS))
                drained = false;
        if (drained)
            break;
    }
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        vqt_quiesce_end(&dev->q[i]);
    return 0;
}

void vdev_resume(struct vufsd_dev *dev)
{
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        struct vufsd_queue *q = &dev->q[i];
        if (!q->was_running)
            continue;
        q->was_running = false;
        int ret = vqt_start(q);
        if (ret < 0)
            vdev_set_broken(dev, i, "cannot start the queue again", ret);
    }
}

static bool vdev_queue_configured(const struct vufsd_queue *q)
{
    return q->num || q->addr_set || q->kick_fd >= 0 || q->call_fd >= 0 || q->err_fd >= 0 ||
           q->was_running;
}

int vdev_state_save(struct vufsd_dev *dev, int conn_fd, struct vst_writer *w, struct vst_fds *fds)
{
    uint32_t fdi;
    int ret = 0;

    if (!fds)
        return -EINVAL; /* the vhost-user part is fds through and through */
    vst_section_begin(w, VST_SEC_VHOST, 1);
    vst_put_u8(w, dev->state == VDEV_OWNED);
    vst_put_u64(w, dev->features);
    vst_put_u64(w, dev->protocol_features);
    vst_put_u8(w, dev->status);
    vst_put_u8(w, vdev_is_broken(dev));
    ret = vst_fd_add(fds, conn_fd, &fdi);
    vst_put_u32(w, fdi);
    pthread_mutex_lock(&dev->backend_lock);
    if (ret == 0)
        ret = vst_fd_add(fds, dev->backend_fd, &fdi);
    pthread_mutex_unlock(&dev->backend_lock);
    vst_put_u32(w, fdi);

    struct vmem_table *t = vdev_mem_get(dev, NULL);
    vst_put_u32(w, t->mem.nregions);
    for (unsigned i = 0; i < t->mem.nregions; i++) {
        const struct vmem_region *r = &t->mem.r[i];
        vst_put_u64(w, r->gpa);
        vst_put_u64(w, r->size);
        vst_put_u64(w, r->uva);
        vst_put_u64(w, r->mmap_offset);
        fdi = VST_NO_FD;
        if (ret == 0)
            ret = vst_fd_add(fds, vmem_region_fd(r), &fdi);
        vst_put_u32(w, fdi);
    }
    vmem_table_unref(t);

    unsigned nq = 0;
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        nq += vdev_queue_configured(&dev->q[i]);
    vst_put_u32(w, nq);
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        struct vufsd_queue *q = &dev->q[i];
        if (!vdev_queue_configured(q))
            continue;
        /* After vdev_quiesce no queue runs: was_running is what to start again. */
        vst_put_u32(w, q->index);
        vst_put_u8(w, q->was_running);
        vst_put_u8(w, __atomic_load_n(&q->enabled, __ATOMIC_ACQUIRE));
        vst_put_u32(w, q->num);
        vst_put_u8(w, q->addr_set);
        vst_put_u64(w, q->desc_uva);
        vst_put_u64(w, q->avail_uva);
        vst_put_u64(w, q->used_uva);
        vst_put_u16(w, q->base);
        int qfds[3] = {q->kick_fd, q->call_fd, __atomic_load_n(&q->err_fd, __ATOMIC_ACQUIRE)};
        for (unsigned k = 0; k < 3; k++) {
            fdi = VST_NO_FD;
            if (ret == 0)
                ret = vst_fd_add(fds, qfds[k], &fdi);
            vst_put_u32(w, fdi);
        }
        vst_put_u16(w, (uint16_t)q->nresume);
        for (unsigned k = 0; k < q->nresume; k++)
            vst_put_u16(w, q->resume[k]);
    }
    vst_section_end(w);
    return ret;
}

/* An fd of the state, or -1 for VST_NO_FD; -EBADF when it is missing or used twice. */
static int vdev_take(struct vst_fds *fds, uint32_t idx, int *fd)
{
    *fd = -1;
    if (idx == VST_NO_FD)
        return 0;
    return vst_fd_take(fds, idx, fd);
}

static int vdev_load_regions(struct vufsd_dev *dev, struct vst_reader *r, struct vst_fds *fds,
                             struct vst_err *err)
{
    uint32_t n;

    if (!vst_get_u32(r, &n) || n > VMEM_MAX_REGIONS)
        return vst_fail(err, -EINVAL, "state: %u guest memory regions", n);
    struct vmem_table *t;
    int ret = vmem_table_new(&t);
    if (ret < 0)
        return ret;
    for (uint32_t i = 0; i < n; i++) {
        struct vmem_desc d;
        uint32_t fdi;
        int fd;
        if (!vst_get_u64(r, &d.gpa) || !vst_get_u64(r, &d.size) || !vst_get_u64(r, &d.uva) ||
            !vst_get_u64(r, &d.mmap_offset) || !vst_get_u32(r, &fdi)) {
            vmem_table_unref(t);
            return vst_fail(err, -EBADMSG, "state: memory region %u is cut short", i);
        }
        if (vdev_take(fds, fdi, &fd) < 0 || fd < 0) {
            vmem_table_unref(t);
            return vst_fail(err, -EBADF, "state: memory region %u: fd %u missing", i, fdi);
        }
        /*
         * The size is the state's word, not the frontend's: a region past the
         * end of its file would fault (SIGBUS) on the first access, the ring
         * indices read when the queue starts. (A DAX range whose file the host
         * truncated since is refused too: the VMM would fault on it as well.)
         */
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            (d.mmap_offset > (uint64_t)st.st_size ||
             d.size > (uint64_t)st.st_size - d.mmap_offset)) {
            close(fd);
            vmem_table_unref(t);
            return vst_fail(err, -EINVAL, "state: memory region %u lies past the end of its fd",
                            i);
        }
        ret = vmem_table_add(t, &d, fd); /* the same checks as SET_MEM_TABLE */
        close(fd);
        if (ret < 0) {
            vmem_table_unref(t);
            return vst_fail(err, ret, "state: memory region %u refused: %s", i, strerror(-ret));
        }
    }
    vdev_mem_swap(dev, t);
    return 0;
}

static int vdev_load_queue(struct vufsd_dev *dev, struct vst_reader *r, struct vst_fds *fds,
                           bool *seen, struct vst_err *err)
{
    uint32_t index, num, fdi[3];
    uint8_t running, enabled, addr_set;
    uint64_t desc, avail, used;
    uint16_t base, nresume;

    if (!vst_get_u32(r, &index) || !vst_get_u8(r, &running) || !vst_get_u8(r, &enabled) ||
        !vst_get_u32(r, &num) || !vst_get_u8(r, &addr_set) || !vst_get_u64(r, &desc) ||
        !vst_get_u64(r, &avail) || !vst_get_u64(r, &used) || !vst_get_u16(r, &base) ||
        !vst_get_u32(r, &fdi[0]) || !vst_get_u32(r, &fdi[1]) || !vst_get_u32(r, &fdi[2]) ||
        !vst_get_u16(r, &nresume))
        return vst_fail(err, -EBADMSG, "state: a queue record is cut short");
    if (index >= VDEV_MAX_QUEUES || seen[index])
        return vst_fail(err, -EINVAL, "state: queue %u out of range or named twice", index);
    seen[index] = true;
    if (running > 1 || enabled > 1 || addr_set > 1 || (num && !vq_size_valid(num)) ||
        (addr_set && ((desc & 15) || (avail & 1) || (used & 3))) ||
        (running && (!num || !addr_set)) || nresume > num || (nresume && !running))
        return vst_fail(err, -EINVAL, "state: queue %u: bad configuration", index);
    struct vufsd_queue *q = &dev->q[index];
    q->num = num;
    q->addr_set = addr_set;
    q->desc_uva = desc;
    q->avail_uva = avail;
    q->used_uva = used;
    q->base = base;
    __atomic_store_n(&q->enabled, enabled == 1, __ATOMIC_RELEASE);
    int fd[3];
    for (unsigned k = 0; k < 3; k++)
        if (vdev_take(fds, fdi[k], &fd[k]) < 0)
            return vst_fail(err, -EBADF, "state: queue %u: fd %u missing or used twice", index,
                            fdi[k]);
    q->kick_fd = fd[0];
    vqt_set_call_fd(q, fd[1]);
    __atomic_store_n(&q->err_fd, fd[2], __ATOMIC_RELEASE);
    if (running && q->kick_fd < 0)
        return vst_fail(err, -EINVAL, "state: queue %u runs without a kick fd", index);
    free(q->resume);
    q->resume = NULL;
    q->nresume = 0;
    if (nresume) {
        q->resume = calloc(nresume, sizeof(*q->resume));
        if (!q->resume)
            return -ENOMEM;
    }
    for (unsigned k = 0; k < nresume; k++) {
        uint16_t head;
        if (!vst_get_u16(r, &head))
            return vst_fail(err, -EBADMSG, "state: queue %u is cut short", index);
        if (head >= num)
            return vst_fail(err, -EINVAL, "state: queue %u: head %u past its %u entries", index,
                            head, num);
        for (unsigned j = 0; j < k; j++)
            if (q->resume[j] == head)
                return vst_fail(err, -EINVAL, "state: queue %u: head %u named twice", index,
                                head);
        q->resume[k] = head;
    }
    q->nresume = nresume;
    q->was_running = running;
    return 0;
}

int vdev_state_load(struct vufsd_dev *dev, const struct vst_state *st, struct vst_fds *fds,
                    int *conn_fd, struct vst_err *err)
{
    struct vst_reader r;
    uint32_t ver, conn_idx, backend_idx, nq;
    uint8_t owned, status, broken;
    uint64_t features, protocol;
    bool seen[VDEV_MAX_QUEUES] = {false};
    int ret;

    *conn_fd = -1;
    if (!vst_section(st, VST_SEC_VHOST, &r, &ver))
        return vst_fail(err, -EINVAL, "state: no vhost-user section");
    if (ver != 1)
        return vst_fail(err, -EINVAL, "state: vhost-user section version %u unknown", ver);
    if (!vst_get_u8(&r, &owned) || !vst_get_u64(&r, &features) || !vst_get_u64(&r, &protocol) ||
        !vst_get_u8(&r, &status) || !vst_get_u8(&r, &broken) || !vst_get_u32(&r, &conn_idx) ||
        !vst_get_u32(&r, &backend_idx))
        return vst_fail(err, -EBADMSG, "state: vhost-user section is cut short");
    if (owned > 1 || broken > 1 || (features & ~vdev_offered_features()) ||
        (protocol & ~vdev_protocol_features(dev)))
        return vst_fail(err, -EINVAL,
                        "state: features %#llx / protocol features %#llx this vufsd does not offer",
                        (unsigned long long)features, (unsigned long long)protocol);
    int fd;
    if (vdev_take(fds, conn_idx, &fd) < 0 || fd < 0)
        return vst_fail(err, -EBADF, "state: the frontend's connection fd is missing");
    *conn_fd = fd;
    if (vdev_take(fds, backend_idx, &fd) < 0)
        return vst_fail(err, -EBADF, "state: the backend channel's fd is missing");
    vdev_set_backend_fd(dev, fd);
    dev->features = features;
    dev->protocol_features = protocol;
    dev->status = status;
    if (owned)
        vdev_set_owned(dev);
    ret = vdev_load_regions(dev, &r, fds, err);
    if (ret < 0)
        return ret;
    if (!vst_get_u32(&r, &nq) || nq > VDEV_MAX_QUEUES)
        return vst_fail(err, -EINVAL, "state: %u queues", nq);
    for (uint32_t k = 0; k < nq; k++) {
        ret = vdev_load_queue(dev, &r, fds, seen, err);
        if (ret < 0)
            return ret;
    }
    if (!vst_reader_done(&r))
        return vst_fail(err, -EBADMSG, "state: bytes left over in the vhost-user section");
    if (broken)
        vdev_set_broken(dev, 0, "broken before the restart", -EIO);
    /* Every ring must be in guest memory before anything runs. */
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        struct vufsd_queue *q = &dev->q[i];
        if (!q->was_running)
            continue;
        q->was_running = false;
        ret = vqt_start(q);
        if (ret < 0)
            return vst_fail(err, ret, "state: queue %u cannot start: %s", i, strerror(-ret));
    }
    return 0;
}
