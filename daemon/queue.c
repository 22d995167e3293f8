/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Queue threads: pop chains, turn each into a request for fll, and complete
 * requests into the used ring from whichever thread finishes them. See
 * device.h for the queue lifecycle and the lock order.
 */
#include "device.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "qpoll.h"
#include "vu_msg.h"
#include "vufs_util.h"

struct vqt_req {
    struct fll_req fr;
    struct vpool_item item; /* --thread-pool-size: queued for a worker */
    struct vufsd_queue *q;
    struct vmem_table *mem; /* the table the iovecs point into; ref held */
    size_t out_total;       /* bytes of writable buffers */
    uint16_t head;
    unsigned iov_cap; /* entries iov[] has room for */
    struct iovec iov[]; /* fr.in_cnt readable, then fr.out_cnt writable */
};

/*
 * Requests completed on their queue's thread (all of them without a worker
 * pool) go back to a small per-queue cache that only that thread touches, so
 * the common request costs no malloc/free. Cached requests have room for
 * VQT_REQ_IOV iovecs, enough for the header, arguments and a few pages each way.
 */
#define VQT_REQ_IOV 16u
#define VQT_REQ_CACHE 64u

/* vqt_stop: how long to wait for a drain before cancelling parked requests again. */
#define VQT_CANCEL_RETRY_NS (50 * 1000 * 1000L)
/* Busy-poll: avail index reads between two looks at the clock (and at stop). */
#define VQT_POLL_SPINS 32
/* Two looks at the clock this far apart: the poller was descheduled (see qpoll.h). */
#define VQT_POLL_PREEMPTED_NS 20000u
/* A poller offers its CPU this often (sched_yield): the driver's thread may be
 * waiting for it. Yielding is how a busy machine shows: see VQT_POLL_PREEMPTED_NS. */
#define VQT_POLL_YIELD_NS 8000u

/* What ended an epoll_wait (epoll_event.data.u32). */
enum { VQT_EV_WAKE = 1, VQT_EV_KICK = 2 };

/* Set while a queue thread runs a batch: completions on it defer the signal. */
static __thread struct vufsd_queue *vqt_batch_queue;

/* The only transitions the queue diagram in device.h allows (message thread only). */
static void vqt_set_state(struct vufsd_queue *q, enum vqt_state to)
{
    assert((q->state == VQT_IDLE && to == VQT_RUNNING) ||
           (q->state == VQT_RUNNING && to == VQT_STOPPING) ||
           (q->state == VQT_RUNNING && to == VQT_IDLE) || /* its thread failed to start */
           (q->state == VQT_STOPPING && to == VQT_IDLE));
    q->state = to;
}

void vqt_init(struct vufsd_queue *q, struct vufsd_dev *dev, unsigned index)
{
    memset(q, 0, sizeof(*q));
    q->dev = dev;
    q->index = index;
    q->state = VQT_IDLE;
    q->kick_fd = q->call_fd = q->err_fd = -1;
    q->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    q->ep_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = VQT_EV_WAKE};
    if (q->ep_fd >= 0 && epoll_ctl(q->ep_fd, EPOLL_CTL_ADD, q->wake_fd, &ev) < 0)
        vufs_close(&q->ep_fd); /* the thread then waits with poll() */
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* vqt_stop's timed drain */
    pthread_cond_init(&q->drained, &ca);
    pthread_condattr_destroy(&ca);
}

void vqt_reset(struct vufsd_queue *q)
{
    assert(q->state == VQT_IDLE);
    q->num = 0;
    q->addr_set = false;
    q->addr_flags = 0;
    q->log_gpa = 0;
    q->base = 0;
    q->nresume = 0;
    q->was_running = false;
    __atomic_store_n(&q->enabled, false, __ATOMIC_RELEASE);
    vufs_close(&q->kick_fd);
    vufs_close(&q->err_fd);
    vqt_set_call_fd(q, -1);
}

void vqt_destroy(struct vufsd_queue *q)
{
    assert(q->state == VQT_IDLE);
    vufs_close(&q->kick_fd);
    vufs_close(&q->err_fd);
    vufs_close(&q->call_fd);
    vufs_close(&q->ep_fd);
    vufs_close(&q->wake_fd);
    free(q->scratch);
    q->scratch = NULL;
    free(q->resume);
    q->resume = NULL;
    q->nresume = 0;
    while (q->req_cached)
        free(q->req_cache[--q->req_cached]);
    free(q->req_cache);
    q->req_cache = NULL;
    vmem_table_unref(q->mem);
    q->mem = NULL;
    vmem_table_unref(__atomic_exchange_n(&q->next_mem, NULL, __ATOMIC_ACQ_REL));
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->drained);
}

void vqt_wake(struct vufsd_queue *q)
{
    uint64_t one = 1;
    /* Before the eventfd: a thread that busy-polls never reads wake_fd. */
    __atomic_store_n(&q->poked, true, __ATOMIC_RELEASE);
    ssize_t w = write(q->wake_fd, &one, sizeof(one));
    (void)w;
}

void vqt_mem_changed(struct vufsd_queue *q, struct vmem_table *t)
{
    vmem_table_unref(__atomic_exchange_n(&q->next_mem, t, __ATOMIC_ACQ_REL));
    vqt_wake(q);
}

void vqt_set_call_fd(struct vufsd_queue *q, int fd)
{
    pthread_mutex_lock(&q->lock);
    int old = q->call_fd;
    q->call_fd = fd;
    pthread_mutex_unlock(&q->lock);
    if (old >= 0)
        close(old);
}

static void vqt_signal_locked(struct vufsd_queue *q)
{
    if (q->call_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(q->call_fd, &one, sizeof(one));
        (void)w;
    }
}

/* Points ring at t's mapping of the frontend's ring addresses. Caller holds q->lock. */
static int vqt_map_rings_locked(struct vufsd_queue *q, const struct vmem_table *t)
{
    void *desc = vmem_uva_host(&t->mem, q->desc_uva, vq_desc_bytes(q->num));
    void *avail = vmem_uva_host(&t->mem, q->avail_uva, vq_avail_bytes(q->num));
    void *used = vmem_uva_host(&t->mem, q->used_uva, vq_used_bytes(q->num));
    if (!desc || !avail || !used)
        return -EFAULT;
    q->ring.desc = desc;
    q->ring.avail = avail;
    q->ring.used = used;
    return 0;
}

/* ---- Completion (any thread) ------------------------------------------------------ */

static void vqt_req_free(struct vqt_req *req)
{
    struct vufsd_queue *q = req->q;

    vmem_table_unref(req->mem);
    if (vqt_batch_queue == q && req->iov_cap == VQT_REQ_IOV && q->req_cached < VQT_REQ_CACHE) {
        q->req_cache[q->req_cached++] = req; /* on q's own thread: see VQT_REQ_CACHE */
        return;
    }
    free(req);
}

static struct vqt_req *vqt_req_alloc(struct vufsd_queue *q, size_t n)
{
    struct vqt_req *req;

    if (n <= VQT_REQ_IOV && q->req_cached) {
        req = q->req_cache[--q->req_cached];
        memset(req, 0, offsetof(struct vqt_req, iov));
    } else {
        size_t cap = n <= VQT_REQ_IOV ? VQT_REQ_IOV : n;
        req = calloc(1, sizeof(*req) + cap * sizeof(struct iovec));
        if (!req)
            return NULL;
    }
    req->iov_cap = n <= VQT_REQ_IOV ? VQT_REQ_IOV : (unsigned)n;
    return req;
}

/*
 * While the frontend migrates the VM (q->log set): the used element just
 * published and the used index, at the ring's logging address. The flags and
 * avail_event words the queue thread writes are logged when the queue stops
 * (vqt_stop), which is before the frontend reads the log for the last time.
 */
static void vqt_log_used_locked(struct vufsd_queue *q)
{
    uint16_t slot = (uint16_t)(q->ring.used_idx - 1) & (uint16_t)(q->ring.num - 1);
    vmem_log_mark(q->log, q->log_used_gpa + offsetof(struct vring_used, ring) +
                              (uint64_t)slot * sizeof(struct vring_used_elem),
                  sizeof(struct vring_used_elem));
    vmem_log_mark(q->log, q->log_used_gpa + offsetof(struct vring_used, idx), sizeof(uint16_t));
}

/* Publishes one used element; signals unless the queue thread batches it. */
static void vqt_push(struct vufsd_queue *q, uint16_t head, uint32_t len)
{
    pthread_mutex_lock(&q->lock);
    vq_ring_push(&q->ring, head, len);
    if (q->log_used)
        vqt_log_used_locked(q);
    if (vqt_batch_queue == q)
        q->notify_pending = true;
    else if (vq_ring_should_notify(&q->ring))
        vqt_signal_locked(q);
    pthread_mutex_unlock(&q->lock);
}

static void vqt_complete(struct fll_req *fr, size_t out_len)
{
    struct vqt_req *req = container_of(fr, struct vqt_req, fr);
    struct vufsd_queue *q = req->q;

    assert(out_len <= req->out_total);
    if (out_len > req->out_total)
        out_len = req->out_total;

    pthread_mutex_lock(&q->lock);
    /* Predictable branches when the VM is not migrating. The reply's bytes are
     * logged before the used element that hands them to the driver. */
    if (q->log)
        vmem_log_mark_iov(q->log, &req->mem->mem, req->fr.out, req->fr.out_cnt, out_len);
    vq_ring_push(&q->ring, req->head, (uint32_t)out_len);
    if (q->log_used) /* implies q->log */
        vqt_log_used_locked(q);
    if (vqt_batch_queue == q)
        q->notify_pending = true;
    else if (vq_ring_should_notify(&q->ring))
        vqt_signal_locked(q);
    unsigned left = __atomic_sub_fetch(&q->inflight, 1, __ATOMIC_ACQ_REL);
    assert(left != UINT_MAX); /* one completion per popped request */
    if (left == 0)
        pthread_cond_broadcast(&q->drained);
    pthread_mutex_unlock(&q->lock);
    vqt_req_free(req);
}

const struct fll_transport vqt_transport = {
    .complete = vqt_complete,
};

void vqt_pool_run(struct vpool_item *item)
{
    struct vqt_req *req = container_of(item, struct vqt_req, item);
    fll_session_process(req->fr.se, &req->fr);
}

/* ---- The queue thread ------------------------------------------------------------------ */

static void vqt_handle(struct vufsd_queue *q, uint16_t head, const struct iovec *rd,
                       unsigned rd_cnt, const struct iovec *wr, unsigned wr_cnt)
{
    struct vufsd_dev *dev = q->dev;
    size_t n = (size_t)rd_cnt + wr_cnt;
    struct vqt_req *req = vqt_req_alloc(q, n);

    if (!req) {
        /* No memory for the request: give the buffers back unanswered. */
        vlog_warn("queue %u: out of memory, request dropped", q->index);
        vqt_push(q, head, 0);
        return;
    }
    memcpy(req->iov, rd, rd_cnt * sizeof(*rd));
    memcpy(req->iov + rd_cnt, wr, wr_cnt * sizeof(*wr));
    for (unsigned i = 0; i < wr_cnt; i++)
        req->out_total += wr[i].iov_len;
    req->fr.se = dev->se;
    req->fr.in = req->iov;
    req->fr.in_cnt = rd_cnt;
    req->fr.out = req->iov + rd_cnt;
    req->fr.out_cnt = wr_cnt;
    req->fr.queue = q->index;
    req->q = q;
    req->head = head;
    req->mem = vmem_table_ref(q->mem);

    /* No lock: only this thread increments, and vqt_stop reads after joining it. */
    __atomic_add_fetch(&q->inflight, 1, __ATOMIC_ACQ_REL);

    vlog_debug("queue %u: request head %u (%u readable, %u writable iovecs)", q->index, head,
               rd_cnt, wr_cnt);
    /* hiprio requests (FORGET, INTERRUPT) are cheap and must not wait behind I/O. */
    if (dev->pool && q->index != 0)
        vpool_push(dev->pool, &req->item);
    else
        fll_session_process(dev->se, &req->fr);
}

/*
 * Takes up the table the message thread handed over, if any. Returns false if
 * the rings broke. Lock-free against the swap: QEMU 11.1 swaps the table twice
 * per DAX mapping (ADD_MEM_REG, REM_MEM_REG), and a queue thread that took
 * dev->mem_lock after each swap slept on it behind the message thread and the
 * map path's waits for those regions, while its own requests waited.
 */
static bool vqt_refresh_mem(struct vufsd_queue *q)
{
    struct vmem_table *t = __atomic_exchange_n(&q->next_mem, NULL, __ATOMIC_ACQ_REL);

    if (!t)
        return q->mem != NULL;
    pthread_mutex_lock(&q->lock);
    int ret = vqt_map_rings_locked(q, t);
    pthread_mutex_unlock(&q->lock);
    if (ret < 0) {
        vmem_table_unref(t);
        vdev_set_broken(q->dev, q->index, "ring no longer in guest memory", ret);
        return false;
    }
    vmem_table_unref(q->mem);
    q->mem = t;
    return true;
}

/* Consumes an eventfd's count. False if the fd did not behave like an eventfd. */
static bool vqt_drain(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    return r == sizeof(v) || (r < 0 && (errno == EAGAIN || errno == EINTR));
}

/*
 * The kick eventfd is watched edge-triggered and never read: every kick the
 * driver writes is an edge that ends one epoll_wait, and what the counter adds
 * up to says nothing the avail index does not. That is one system call per
 * sleep instead of a poll() and a read(). An fd that is not an anonymous
 * inode (eventfd's kind; a pipe, socket or file is not) breaks the device, as
 * one that epoll refuses does: neither can make the thread spin.
 */
static void vqt_watch_kick(struct vufsd_queue *q)
{
    struct stat st;
    if (q->ep_fd < 0)
        return;
    if (fstat(q->kick_fd, &st) < 0 || (st.st_mode & S_IFMT)) {
        vdev_set_broken(q->dev, q->index, "kick fd is not an eventfd", -EBADF);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u32 = VQT_EV_KICK};
    if (epoll_ctl(q->ep_fd, EPOLL_CTL_ADD, q->kick_fd, &ev) < 0) {
        vdev_set_broken(q->dev, q->index, "kick fd cannot be watched", -errno);
        return;
    }
    q->kick_watched = true;
}

static void vqt_unwatch_kick(struct vufsd_queue *q)
{
    if (q->kick_watched)
        (void)epoll_ctl(q->ep_fd, EPOLL_CTL_DEL, q->kick_fd, NULL);
    q->kick_watched = false;
}

/*
 * Sleeps until a kick or a wake-up (stop, enable, memory table, reset). While the
 * device is broken, kicks are not even listened to: only the message thread can
 * make a broken queue useful again, and it wakes the queue when it does.
 */
static void vqt_wait(struct vufsd_queue *q)
{
    bool kicks = !vdev_is_broken(q->dev);
    if (kicks && q->kick_watched) {
        struct epoll_event ev[2];
        int n = epoll_wait(q->ep_fd, ev, 2, -1);
        for (int i = 0; i < n; i++)
            if (ev[i].data.u32 == VQT_EV_WAKE)
                (void)vqt_drain(q->wake_fd);
        return;
    }
    /* Broken, or no epoll: poll() and read the kick fd. */
    struct pollfd p[2] = {
        {.fd = q->wake_fd, .events = POLLIN},
        {.fd = q->kick_fd, .events = POLLIN},
    };
    int n = poll(p, kicks ? 2 : 1, -1);
    if (n <= 0)
        return;
    if (p[0].revents & POLLIN)
        (void)vqt_drain(q->wake_fd);
    if (!kicks)
        return;
    /* A kick fd that polls readable without being an eventfd would make this loop spin. */
    if ((p[1].revents & (POLLERR | POLLNVAL)) ||
        ((p[1].revents & (POLLIN | POLLHUP)) && !vqt_drain(q->kick_fd)))
        vdev_set_broken(q->dev, q->index, "kick fd is not an eventfd", -EBADF);
}

/* Signals the completions the batch deferred, if the driver wants to hear. */
static void vqt_flush_notify(struct vufsd_queue *q)
{
    /* Only this thread sets notify_pending (inside its batch): no lock to look. */
    if (!__atomic_load_n(&q->notify_pending, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&q->lock);
    q->notify_pending = false;
    if (vq_ring_should_notify(&q->ring))
        vqt_signal_locked(q);
    pthread_mutex_unlock(&q->lock);
}

/* Pops and runs up to one ring's worth of chains. Returns the number popped. */
static unsigned vqt_batch(struct vufsd_queue *q)
{
    struct iovec *rd = q->scratch, *wr = q->scratch + VQT_MAX_IOV;
    unsigned rd_cnt, wr_cnt, done = 0;
    uint16_t head;

    vqt_batch_queue = q;
    while (done < q->num && !__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
        int ret = vq_ring_pop(&q->ring, &q->mem->mem, &head, rd, &rd_cnt, wr, &wr_cnt, VQT_MAX_IOV);
        if (ret == 0)
            break;
        done++;
        if (ret == -E2BIG) {
            vlog_warn("queue %u: chain at head %u needs more than %u iovecs, returned unused",
                      q->index, head, VQT_MAX_IOV);
            vqt_push(q, head, 0);
            continue;
        }
        if (ret < 0) {
            vdev_set_broken(q->dev, q->index, "malformed descriptor chain", ret);
            break;
        }
        /*
         * Completions inside a batch signal once, at its end - except that
         * before the last request the ring holds, the driver hears of those
         * so far: it can then hand over its next requests while this one
         * runs, instead of waiting for the batch to end and finding the queue
         * thread asleep (at queue depth 2 that halved the IOPS).
         */
        if (!vq_ring_has_work(&q->ring))
            vqt_flush_notify(q);
        vqt_handle(q, head, rd, rd_cnt, wr, wr_cnt);
    }
    vqt_batch_queue = NULL;
    vqt_flush_notify(q);
    return done;
}

static inline void vqt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

enum vqt_poll_end {
    VQT_POLL_HIT,       /* a request arrived */
    VQT_POLL_EXPIRED,   /* the window ran out */
    VQT_POLL_PREEMPTED, /* the thread lost its CPU meanwhile */
    VQT_POLL_POKED,     /* the message thread wants the thread, or the device broke */
};

/*
 * Spins on the avail index for up to window_ns from t0. Notifications stay
 * suppressed meanwhile (vq_ring_disable_notify: with EVENT_IDX avail_event
 * stays behind, else VRING_USED_F_NO_NOTIFY is set), so the driver does not
 * kick for what is caught here.
 */
static enum vqt_poll_end vqt_poll(struct vufsd_queue *q, uint64_t t0, uint32_t window_ns)
{
    uint64_t last = t0, yielded = t0;
    for (;;) {
        for (unsigned i = 0; i < VQT_POLL_SPINS; i++) {
            if (vq_ring_has_work(&q->ring))
                return VQT_POLL_HIT;
            vqt_cpu_relax();
        }
        if (__atomic_load_n(&q->poked, __ATOMIC_ACQUIRE) || vdev_is_broken(q->dev))
            return VQT_POLL_POKED;
        uint64_t now = vufs_now_ns();
        if (now - last >= VQT_POLL_PREEMPTED_NS)
            return VQT_POLL_PREEMPTED;
        if (now - t0 >= window_ns)
            return VQT_POLL_EXPIRED;
        if (now - yielded >= VQT_POLL_YIELD_NS) {
            sched_yield();
            now = vufs_now_ns();
            if (now - last >= VQT_POLL_PREEMPTED_NS)
                return VQT_POLL_PREEMPTED;
            yielded = now;
        }
        last = now;
    }
}

/*
 * The ring is drained: poll for the current window, then re-arm notifications,
 * re-check and sleep. The gap until the next request sizes the next window
 * (qpoll.h); a wake-up for anything else says nothing about the gap.
 */
static void vqt_idle(struct vufsd_queue *q)
{
    if (!q->poll_cap_ns) {
        if (!vq_ring_enable_notify(&q->ring))
            vqt_wait(q);
        return; /* else work arrived between the last pop and the avail_event store */
    }
    uint64_t t0 = vufs_now_ns();
    enum vqt_poll_end end = q->poll_ns ? vqt_poll(q, t0, q->poll_ns) : VQT_POLL_EXPIRED;
    if (end == VQT_POLL_HIT) {
        q->poll_hits++;
        q->poll_ns = vqt_poll_next(q->poll_ns, q->poll_cap_ns, 0);
        return;
    }
    if (end == VQT_POLL_POKED)
        return; /* the loop takes the message thread's change up first */
    if (end == VQT_POLL_PREEMPTED) {
        /* Spinning took the CPU from someone: back off whatever comes next. */
        q->poll_preempted++;
        q->poll_ns = vqt_poll_next(q->poll_ns, q->poll_cap_ns, UINT64_MAX);
        if (!vq_ring_enable_notify(&q->ring))
            vqt_wait(q);
        return;
    }
    if (!vq_ring_enable_notify(&q->ring)) {
        vqt_wait(q);
        q->poll_sleeps++;
        if (__atomic_load_n(&q->poked, __ATOMIC_ACQUIRE) || !vq_ring_has_work(&q->ring)) {
            q->poll_ns = vqt_poll_next(q->poll_ns, q->poll_cap_ns, UINT64_MAX);
            return;
        }
    }
    q->poll_ns = vqt_poll_next(q->poll_ns, q->poll_cap_ns, vufs_now_ns() - t0);
}

/*
 * The requests a restart took back unanswered (vdev_quiesce), run again from
 * the guest's buffers, which are the guest's until the used ring has the head:
 * walked and checked like any chain, on this thread, before anything else.
 */
static void vqt_run_resumed(struct vufsd_queue *q)
{
    struct iovec *rd = q->scratch, *wr = q->scratch + VQT_MAX_IOV;
    unsigned rd_cnt, wr_cnt;

    vqt_batch_queue = q;
    for (unsigned k = 0; k < q->nresume; k++) {
        uint16_t head = q->resume[k];
        int ret = vq_walk_chain(&q->mem->mem, q->ring.desc, q->num, head, rd, &rd_cnt, wr,
                                &wr_cnt, VQT_MAX_IOV);
        if (ret == -E2BIG) {
            vqt_push(q, head, 0);
            continue;
        }
        if (ret < 0) {
            vdev_set_broken(q->dev, q->index, "malformed descriptor chain", ret);
            break;
        }
        vlog_debug("queue %u: request head %u runs again after the restart", q->index, head);
        vqt_handle(q, head, rd, rd_cnt, wr, wr_cnt);
    }
    q->nresume = 0;
    vqt_batch_queue = NULL;
    vqt_flush_notify(q);
}

static void *vqt_thread(void *arg)
{
    struct vufsd_queue *q = arg;
    char name[16];
    bool stale = true; /* q->next_mem may hold a newer table than q->mem */

    snprintf(name, sizeof(name), "vufsd-q%u", q->index);
    pthread_setname_np(pthread_self(), name);
    vqt_watch_kick(q);
    if (q->nresume)
        vqt_run_resumed(q);

    while (!__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
        /* The message thread pokes after every table swap: look only then. */
        if (__atomic_exchange_n(&q->poked, false, __ATOMIC_ACQ_REL))
            stale = true;
        if (stale && vqt_refresh_mem(q))
            stale = false;
        if (stale || vdev_is_broken(q->dev) || !__atomic_load_n(&q->enabled, __ATOMIC_ACQUIRE)) {
            vqt_wait(q);
            continue;
        }
        vq_ring_disable_notify(&q->ring);
        if (vqt_batch(q) == q->num)
            continue; /* a full batch: there may be more, and stop gets a look in */
        if (vdev_is_broken(q->dev))
            continue;
        vqt_idle(q);
    }
    if (q->poll_cap_ns)
        vlog_info("queue %u: %" PRIu64 " requests caught by polling, %" PRIu64
                  " sleeps, %" PRIu64 " polls cut short by preemption, poll window %u ns"
                  " at exit",
                  q->index, q->poll_hits, q->poll_sleeps, q->poll_preempted, q->poll_ns);
    vqt_unwatch_kick(q);
    return NULL;
}

int vqt_start(struct vufsd_queue *q)
{
    struct vufsd_dev *dev = q->dev;

    if (q->state == VQT_RUNNING)
        return 0;
    assert(q->state == VQT_IDLE);
    if (q->kick_fd < 0 || !q->num || !q->addr_set)
        return -EAGAIN; /* not configured yet; the next message may complete it */
    if (!q->scratch) {
        q->scratch = calloc(2 * VQT_MAX_IOV, sizeof(struct iovec));
        if (!q->scratch)
            return -ENOMEM;
    }
    if (!q->req_cache) {
        q->req_cache = calloc(VQT_REQ_CACHE, sizeof(*q->req_cache));
        if (!q->req_cache)
            return -ENOMEM;
    }

    /* The current table; one handed over while the queue was stopped is older. */
    vmem_table_unref(__atomic_exchange_n(&q->next_mem, NULL, __ATOMIC_ACQ_REL));
    struct vmem_table *t = vdev_mem_get(dev, NULL);
    pthread_mutex_lock(&q->lock);
    memset(&q->ring, 0, sizeof(q->ring));
    q->ring.num = q->num;
    int ret = vqt_map_rings_locked(q, t);
    if (ret == 0) {
        q->ring.event_idx = vdev_has_feature(dev, VIRTIO_RING_F_EVENT_IDX);
        q->ring.last_avail_idx = q->base;
        q->ring.used_idx = le16toh(__atomic_load_n(&q->ring.used->idx, __ATOMIC_ACQUIRE));
        q->inflight = 0;
        q->notify_pending = false;
    }
    pthread_mutex_unlock(&q->lock);
    if (ret < 0) {
        vmem_table_unref(t);
        vlog_warn("queue %u: ring addresses are not in guest memory", q->index);
        return ret;
    }
    vmem_table_unref(q->mem);
    q->mem = t;

    if (!vdev_has_feature(dev, VU_F_PROTOCOL_FEATURES))
        __atomic_store_n(&q->enabled, true, __ATOMIC_RELEASE);
    __atomic_store_n(&q->stop, false, __ATOMIC_RELEASE);
    (void)vqt_drain(q->wake_fd);
    /* hiprio (FORGET, INTERRUPT) is rare and latency-insensitive: never polled. */
    unsigned poll_us = dev->c.cfg ? dev->c.cfg->poll_us : 0;
    if (poll_us > VQT_POLL_MAX_US)
        poll_us = VQT_POLL_MAX_US;
    q->poll_cap_ns = q->index == 0 ? 0 : poll_us * 1000u;
    q->poll_ns = q->poll_cap_ns;
    q->poll_hits = q->poll_sleeps = q->poll_preempted = 0;
    __atomic_store_n(&q->poked, false, __ATOMIC_RELEASE);
    vqt_set_state(q, VQT_RUNNING);
    ret = pthread_create(&q->thread, NULL, vqt_thread, q);
    if (ret) {
        vqt_set_state(q, VQT_IDLE);
        vlog_err("queue %u: cannot start its thread: %s", q->index, strerror(ret));
        return -ret;
    }
    vlog_debug("queue %u started (size %u, base %u, event_idx %d)", q->index, q->num, q->base,
               q->ring.event_idx);
    return 0;
}

void vqt_stop(struct vufsd_queue *q)
{
    if (q->state != VQT_RUNNING)
        return;
    vqt_set_state(q, VQT_STOPPING);
    __atomic_store_n(&q->stop, true, __ATOMIC_RELEASE);
    vqt_wake(q);
    pthread_join(q->thread, NULL);

    /*
     * A parked SETLKW is in flight until its lock comes, which another client may
     * never release: cancel the parked requests before waiting. A pool worker may
     * still be running a request of this queue and park a new one after the
     * cancel, so the wait is timed and cancels again on every round.
     */
    void (*cancel)(void *) = q->dev->c.fs_cancel_waits;
    pthread_mutex_lock(&q->lock);
    while (q->inflight) {
        if (!cancel) {
            pthread_cond_wait(&q->drained, &q->lock);
            continue;
        }
        pthread_mutex_unlock(&q->lock); /* completions take q->lock */
        cancel(q->dev->c.fs);
        pthread_mutex_lock(&q->lock);
        if (!q->inflight)
            break;
        struct timespec until = vufs_deadline(CLOCK_MONOTONIC, VQT_CANCEL_RETRY_NS);
        int r = pthread_cond_timedwait(&q->drained, &q->lock, &until);
        (void)r; /* ETIMEDOUT: cancel again */
    }
    /* The whole used ring: the flags and avail_event words the thread wrote. */
    if (q->log_used)
        vmem_log_mark(q->log, q->log_used_gpa, vq_used_bytes(q->num));
    pthread_mutex_unlock(&q->lock);

    q->base = q->ring.last_avail_idx;
    vufs_close(&q->kick_fd);
    assert(q->inflight == 0);
    vqt_set_state(q, VQT_IDLE);
    vlog_debug("queue %u stopped at avail index %u", q->index, q->base);
}

/* ---- Restart: stopping without the frontend ------------------------------------------- */

void vqt_quiesce_begin(struct vufsd_queue *q)
{
    q->was_running = false;
    if (q->state != VQT_RUNNING)
        return;
    vqt_set_state(q, VQT_STOPPING);
    __atomic_store_n(&q->stop, true, __ATOMIC_RELEASE);
    vqt_wake(q);
    pthread_join(q->thread, NULL);
    q->was_running = true;
}

void vqt_detached(void *ctx, struct fll_req *fr)
{
    struct vqt_req *req = (struct vqt_req *)(void *)((char *)fr - offsetof(struct vqt_req, fr));
    struct vufsd_queue *q = req->q;

    (void)ctx;
    pthread_mutex_lock(&q->lock);
    /* At most num heads are ever in flight on a ring of num entries. */
    assert(q->resume && q->nresume < q->num);
    if (q->resume && q->nresume < q->num)
        q->resume[q->nresume++] = req->head;
    unsigned left = __atomic_sub_fetch(&q->inflight, 1, __ATOMIC_ACQ_REL);
    if (left == 0)
        pthread_cond_broadcast(&q->drained);
    pthread_mutex_unlock(&q->lock);
    vqt_req_free(req);
}

bool vqt_wait_drained(struct vufsd_queue *q, long timeout_ns)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ns / 1000000000L;
    until.tv_nsec += timeout_ns % 1000000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->lock);
    int r = 0;
    while (q->inflight && r == 0)
        r = pthread_cond_timedwait(&q->drained, &q->lock, &until);
    bool drained = q->inflight == 0;
    pthread_mutex_unlock(&q->lock);
    return drained;
}

void vqt_quiesce_end(struct vufsd_queue *q)
{
    if (!q->was_running)
        return;
    assert(q->inflight == 0);
    q->base = q->ring.last_avail_idx;
    vqt_set_state(q, VQT_IDLE);
    vlog_debug("queue %u quiesced at avail index %u (%u request(s) to run again)", q->index,
               q->base, q->nresume);
}
