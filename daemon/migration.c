/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live migration's device state transfer (prefix vmig_): SET_DEVICE_STATE_FD
 * and CHECK_DEVICE_STATE (QEMU docs/interop/vhost-user.rst, "Migrating
 * back-end state"). What travels is what the guest holds in the filesystem
 * (the FUSE session, node ids, open handles, locks), made and taken by the
 * device's state_save/state_load (vdev_config); this file moves the bytes.
 *
 * The frontend hands over one end of a pipe. Saving (the source), the state is
 * made at once, with every ring stopped, and a thread writes it into the pipe
 * while the frontend reads; loading (the destination), a thread reads the
 * pipe to its end. Neither runs on the message thread: the frontend drains
 * (or fills) the pipe only after the reply, so a state larger than a pipe
 * buffer would deadlock there. CHECK_DEVICE_STATE then collects the thread's
 * result and, loading, hands the bytes to state_load, which treats them as
 * untrusted (they crossed a network and another host's QEMU).
 *
 * Transfer lifecycle (dev->mig.dir; message thread only):
 *
 *     +------+  SET_DEVICE_STATE_FD save: state made,    +--------+
 *     | NONE |------------------------------------------>|  SAVE  |--+
 *     +------+  writer thread started                     +--------+  |
 *      ^  ^ |                                                         |
 *      |  | |  SET_DEVICE_STATE_FD load: reader thread    +--------+  |
 *      |  | +-------------------------------------------->|  LOAD  |  |
 *      |  |                                               +--------+  |
 *      |  +------ CHECK_DEVICE_STATE: thread joined, state loaded ----+
 *      +--------- a new SET_DEVICE_STATE_FD, a reset, the frontend leaving:
 *                 the thread is cancelled and joined first
 *
 * A thread never blocks for good: it polls the pipe and a cancel eventfd, and
 * CHECK_DEVICE_STATE waits for it at most VMIG_CHECK_WAIT_MS before it
 * cancels (a frontend that asks before it closed or drained the pipe gets an
 * error, not a hung daemon).
 */
#include "device.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "vu_msg.h"
#include "vufs_util.h"

/* Bytes read per read() while loading. */
#define VMIG_CHUNK (256u * 1024u)

/* The transfer thread's end: 0, or -errno. Sets done under the lock. */
static void vmig_finish(struct vmig *m, int result)
{
    pthread_mutex_lock(&m->lock);
    m->result = result;
    m->done = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

/* Waits until fd is ready for events or the transfer is cancelled: 0, -ECANCELED, -errno. */
static int vmig_wait(struct vmig *m, short events)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = m->fd, .events = events}, {.fd = m->cancel_fd, .events = POLLIN}};
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (p[1].revents)
            return -ECANCELED;
        if (p[0].revents & POLLNVAL)
            return -EBADF;
        if (p[0].revents)
            return 0; /* ready, or an error/hang-up the next read or write reports */
    }
}

static void *vmig_writer(void *arg)
{
    struct vmig *m = arg;
    size_t off = 0;
    int ret = 0;

    while (off < m->len) {
        ssize_t n = write(m->fd, m->buf + off, m->len - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            ret = vmig_wait(m, POLLOUT);
            if (ret < 0)
                break;
            continue;
        }
        ret = n < 0 ? -errno : -EIO;
        break;
    }
    vufs_close(&m->fd); /* the end of the state for the reader */
    vmig_finish(m, ret);
    return NULL;
}

static void *vmig_reader(void *arg)
{
    struct vmig *m = arg;
    int ret = 0;

    for (;;) {
        if (m->cap - m->len < VMIG_CHUNK) {
            if (m->cap >= m->max) {
                ret = -EFBIG; /* more than any state we would write */
                break;
            }
            size_t cap = m->cap ? m->cap * 2 : VMIG_CHUNK * 4;
            if (cap > m->max)
                cap = m->max;
            uint8_t *b = realloc(m->buf, cap);
            if (!b) {
                ret = -ENOMEM;
                break;
            }
            m->buf = b;
            m->cap = cap;
        }
        size_t want = m->cap - m->len < VMIG_CHUNK ? m->cap - m->len : VMIG_CHUNK;
        ssize_t n = read(m->fd, m->buf + m->len, want);
        if (n > 0) {
            m->len += (size_t)n;
            continue;
        }
        if (n == 0)
            break; /* the frontend closed its end: that is all of it */
        if (errno == EAGAIN || errno == EINTR) {
            ret = vmig_wait(m, POLLIN);
            if (ret < 0)
                break;
            continue;
        }
        ret = -errno;
        break;
    }
    vufs_close(&m->fd);
    vmig_finish(m, ret);
    return NULL;
}

void vmig_init(struct vmig *m)
{
    memset(m, 0, sizeof(*m));
    m->dir = VMIG_NONE;
    m->fd = -1;
    m->cancel_fd = -1;
    m->max = VMIG_MAX_STATE;
    m->check_wait_ms = VMIG_CHECK_WAIT_MS;
    pthread_mutex_init(&m->lock, NULL);
    vufs_cond_init_monotonic(&m->cond);
}

/* Joins the thread of a transfer in progress, cancelling it first if cancel. */
static int vmig_join(struct vmig *m, bool cancel, int wait_ms)
{
    if (!m->thread_started)
        return m->result;
    if (!cancel) {
        struct timespec until = vufs_deadline(CLOCK_MONOTONIC, (uint64_t)wait_ms * 1000000u);
        pthread_mutex_lock(&m->lock);
        while (!m->done && pthread_cond_timedwait(&m->cond, &m->lock, &until) == 0)
            ;
        cancel = !m->done;
        pthread_mutex_unlock(&m->lock);
        if (cancel)
            vlog_warn("device state transfer still running after %d ms: cancelled", wait_ms);
    }
    if (cancel) {
        uint64_t one = 1;
        ssize_t w = write(m->cancel_fd, &one, sizeof(one));
        (void)w;
    }
    pthread_join(m->thread, NULL);
    m->thread_started = false;
    return m->result;
}

/* Back to NONE: the thread (if any) cancelled and joined, everything freed. */
void vmig_abort(struct vmig *m)
{
    if (m->dir == VMIG_NONE)
        return;
    vmig_join(m, true, 0);
    vufs_close(&m->fd);
    vufs_close(&m->cancel_fd);
    free(m->buf);
    m->buf = NULL;
    m->len = m->cap = 0;
    m->done = false;
    m->result = 0;
    m->dir = VMIG_NONE;
}

void vmig_destroy(struct vmig *m)
{
    vmig_abort(m);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
}

bool vmig_supported(const struct vufsd_dev *dev)
{
    return dev->c.state_save && dev->c.state_load;
}

static bool vmig_all_stopped(const struct vufsd_dev *dev)
{
    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++)
        if (dev->q[i].state != VQT_IDLE)
            return false;
    return true;
}

int vmig_set_fd(struct vufsd_dev *dev, uint32_t direction, uint32_t phase, int fd)
{
    struct vmig *m = &dev->mig;
    struct stat st;
    int ret;

    if (!vmig_supported(dev))
        return -EOPNOTSUPP;
    /* The only phase the protocol defines: the device suspended. */
    ret = vu_device_state_check(&(struct vu_device_state){.direction = direction, .phase = phase});
    if (ret < 0)
        return ret;
    if (!vmig_all_stopped(dev))
        return -EBUSY;
    /* A pipe or a socket: something that streams and ends. */
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
        return -EBADF;
    int acc = fcntl(fd, F_GETFL);
    if (acc < 0)
        return -errno;
    if ((direction == VU_STATE_DIR_SAVE && (acc & O_ACCMODE) == O_RDONLY) ||
        (direction == VU_STATE_DIR_LOAD && (acc & O_ACCMODE) == O_WRONLY))
        return -EBADF;
    if (m->dir != VMIG_NONE) {
        vlog_warn("device state transfer: a new one before the last was checked; the last is dropped");
        vmig_abort(m);
    }

    m->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->cancel_fd < 0)
        return -errno;
    if (direction == VU_STATE_DIR_SAVE) {
        ret = dev->c.state_save(dev, &m->buf, &m->len);
        if (ret < 0) {
            vlog_err("device state: cannot save what the guest holds: %s", strerror(-ret));
            vmig_abort(m);
            return ret;
        }
        m->cap = m->len;
        vlog_info("device state: %zu bytes to the frontend", m->len);
    }
    /* Our end alone is in this file description (the frontend closed its copy
     * when it sent it): non-blocking so the thread can also watch cancel_fd. */
    if (fcntl(fd, F_SETFL, acc | O_NONBLOCK) < 0) {
        ret = -errno;
        vmig_abort(m);
        return ret;
    }
    m->fd = fd;
    m->dir = direction == VU_STATE_DIR_SAVE ? VMIG_SAVE : VMIG_LOAD;
    m->done = false;
    m->result = 0;
    ret = pthread_create(&m->thread, NULL, m->dir == VMIG_SAVE ? vmig_writer : vmig_reader, m);
    if (ret) {
        m->fd = -1; /* the caller still owns fd on failure */
        vmig_abort(m);
        return -ret;
    }
    m->thread_started = true;
    return 0;
}

int vmig_check(struct vufsd_dev *dev)
{
    struct vmig *m = &dev->mig;
    int ret;

    if (m->dir == VMIG_NONE)
        return -EPROTO; /* nothing was transferred */
    ret = vmig_join(m, false, m->check_wait_ms);
    if (ret < 0) {
        vlog_err("device state transfer failed: %s", strerror(-ret));
    } else if (m->dir == VMIG_LOAD) {
        if (!vmig_all_stopped(dev)) {
            ret = -EBUSY; /* the rings started meanwhile: too late to load */
        } else {
            vlog_info("device state: %zu bytes from the frontend", m->len);
            ret = dev->c.state_load(dev, m->buf, m->len); /* it logs why it refuses */
        }
    }
    vmig_abort(m);
    return ret;
}
