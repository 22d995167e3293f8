/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Queue threads: pop chains, turn each into a request for fll, and complete
 * requests into the used ring from whichever thread finishes them. See
 * queue.h for the queue lifecycle and device.h for the lock order.
 */
#include "queue.h"

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

#include "device.h"
#include "log.h"
#include "qpoll.h"
#include "vu_msg.h"
#include "vufs_util.h"

/*
 * A queue's own reference to a memory table, which its requests share: each
 * in-flight request holds a count here rather than on the table, whose count
 * every queue thread of the device would otherwise bounce between CPUs twice
 * per request. The queue's thread holds one count while the table is current
 * for it (q->mem) and drops it when it moves on to a new table; the last count
 * drops the queue's one reference on the table.
 */
struct vqt_memref {
    struct vmem_table *t; /* one reference held */
    unsigned refs;        /* atomic */
};

struct vqt_req {
    struct fll_req fr;
    struct vpool_item item; /* --thread-pool-size: queued for a worker */
    struct vufsd_queue *q;
    struct vqt_memref *mem; /* the table the iovecs point into; a count held */
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

/* What ended an epoll_wait (epoll_event.data.u32): the wake eventfd, or the kick
 * of the queue with this index plus one. */
enum { VQT_EV_WAKE = 0 };

/* Set while a queue thread runs a batch: completions on it defer the signal. */
static __thread struct vufsd_queue *vqt_batch_queue;

/* The only transitions the queue diagram in queue.h allows (message thread only). */
static void vqt_set_state(struct vufsd_queue *q, enum vqt_state to)
{
    assert((q->state == VQT_IDLE && to == VQT_RUNNING) ||
           (q->state == VQT_RUNNING && to == VQT_STOPPING) ||
           (q->state == VQT_RUNNING && to == VQT_IDLE) || /* its thread failed to start */
           (q->state == VQT_STOPPING && to == VQT_IDLE));
    q->state = to;
}

static void vqt_memref_unref(struct vqt_memref *m)
{
    if (!m || __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    vmem_table_unref(m->t);
    free(m);
}

/* Takes the caller's reference on t, also when it fails (-ENOMEM, t unreferenced). */
static int vqt_memref_new(struct vmem_table *t, struct vqt_memref **out)
{
    struct vqt_memref *m = malloc(sizeof(*m));

    *out = NULL;
    if (!m) {
        vmem_table_unref(t);
        return -ENOMEM;
    }
    m->t = t;
    m->refs = 1;
    *out = m;
    return 0;
}

static struct vqt_memref *vqt_memref_ref(struct vqt_memref *m)
{
    __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
    return m;
}

/* The thread that serves q (see "Threads" in device.h). */
static struct vqt_thread *vqt_thread_of(struct vufsd_queue *q)
{
    struct vufsd_dev *dev = q->dev;
    if (q->index == 0)
        return &dev->t[0];
    return &dev->t[1 + (q->index - 1) % dev->nthreads];
}

void vqt_init(struct vufsd_queue *q, struct vufsd_dev *dev, unsigned index)
{
    memset(q, 0, sizeof(*q));
    q->dev = dev;
    q->index = index;
    q->state = VQT_IDLE;
    q->kick_fd = q->call_fd = q->err_fd = -1;
    pthread_mutex_init(&q->lock, NULL);
    vufs_cond_init_monotonic(&q->drained); /* vqt_stop's timed drain */
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
    free(q->resume);
    q->resume = NULL;
    q->nresume = 0;
    while (q->req_cached)
        free(q->req_cache[--q->req_cached]);
    free(q->req_cache);
    q->req_cache = NULL;
    vqt_memref_unref(q->mem);
    q->mem = NULL;
    vmem_table_unref(__atomic_exchange_n(&q->next_mem, NULL, __ATOMIC_ACQ_REL));
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->drained);
}

int vqt_thread_init(struct vqt_thread *t, struct vufsd_dev *dev, unsigned index)
{
    memset(t, 0, sizeof(*t));
    t->dev = dev;
    t->index = index;
    t->ep_fd = -1;
    pthread_mutex_init(&t->lock, NULL); /* first: vqt_thread_destroy undoes a failure */
    pthread_cond_init(&t->acked, NULL);
    t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->wake_fd < 0)
        return -errno;
    t->ep_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = VQT_EV_WAKE};
    if (t->ep_fd >= 0 && epoll_ctl(t->ep_fd, EPOLL_CTL_ADD, t->wake_fd, &ev) < 0)
        vufs_close(&t->ep_fd); /* the thread then waits with poll() */
    return 0;
}

void vqt_thread_destroy(struct vqt_thread *t)
{
    if (!t->dev)
        return; /* never initialised */
    assert(!t->running);
    vufs_close(&t->ep_fd);
    vufs_close(&t->wake_fd);
    free(t->scratch);
    t->scratch = NULL;
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->acked);
    t->dev = NULL;
}

static void vqt_thread_poke(struct vqt_thread *t)
{
    uint64_t one = 1;
    /* Before the eventfd: a thread that busy-polls never reads wake_fd. */
    __atomic_store_n(&t->poked, true, __ATOMIC_RELEASE);
    ssize_t w = write(t->wake_fd, &one, sizeof(one));
    (void)w;
}

void vqt_wake(struct vufsd_queue *q)
{
    vqt_thread_poke(vqt_thread_of(q));
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

    vqt_memref_unref(req->mem);
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
        vmem_log_mark_iov(q->log, &req->mem->t->mem, req->fr.out, req->fr.out_cnt, out_len);
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

/* ---- The queue threads ---------------------------------------------------------------- */

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
    req->mem = vqt_memref_ref(q->mem);

    /* No lock: only this thread increments, and vqt_stop reads after it let go. */
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
    struct vqt_memref *m;
    ret = vqt_memref_new(t, &m);
    if (ret < 0) {
        vdev_set_broken(q->dev, q->index, "no memory for the new table", ret);
        return false;
    }
    vqt_memref_unref(q->mem); /* in-flight requests keep the old table until they complete */
    q->mem = m;
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
static void vqt_watch_kick(struct vqt_thread *t, struct vufsd_queue *q)
{
    struct stat st;
    if (t->ep_fd < 0)
        return;
    if (fstat(q->kick_fd, &st) < 0 || (st.st_mode & S_IFMT)) {
        vdev_set_broken(q->dev, q->index, "kick fd is not an eventfd", -EBADF);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u32 = q->index + 1};
    if (epoll_ctl(t->ep_fd, EPOLL_CTL_ADD, q->kick_fd, &ev) < 0) {
        vdev_set_broken(q->dev, q->index, "kick fd cannot be watched", -errno);
        return;
    }
    q->kick_watched = true;
}

static void vqt_unwatch_kick(struct vqt_thread *t, struct vufsd_queue *q)
{
    if (q->kick_watched)
        (void)epoll_ctl(t->ep_fd, EPOLL_CTL_DEL, q->kick_fd, NULL);
    q->kick_watched = false;
}

static void vqt_run_resumed(struct vqt_thread *t, struct vufsd_queue *q);

/*
 * Takes up the message thread's changes of t->members: kick fds watched for the
 * queues that came, unwatched for those that went, then acknowledged, after
 * which vqt_stop may close the kick fd and count the queue's requests.
 */
static void vqt_take_members(struct vqt_thread *t, bool leaving)
{
    struct vufsd_dev *dev = t->dev;

    pthread_mutex_lock(&t->lock);
    uint32_t want = leaving ? 0 : t->members;
    unsigned gen = t->gen;
    pthread_mutex_unlock(&t->lock);

    for (unsigned i = 0; i < VDEV_MAX_QUEUES; i++) {
        uint32_t bit = 1u << i;
        if ((t->serving & bit) && !(want & bit))
            vqt_unwatch_kick(t, &dev->q[i]);
        else if (!(t->serving & bit) && (want & bit))
            vqt_watch_kick(t, &dev->q[i]);
    }
    /* A queue that came back from a restart first runs what it took back. */
    for (uint32_t m = want & ~t->serving; m; m &= m - 1)
        if (dev->q[__builtin_ctz(m)].nresume)
            vqt_run_resumed(t, &dev->q[__builtin_ctz(m)]);
    t->serving = want;

    pthread_mutex_lock(&t->lock);
    t->acked_gen = gen;
    pthread_cond_broadcast(&t->acked);
    pthread_mutex_unlock(&t->lock);
}

/* The queues the thread serves now, in *qs; returns how many. */
static unsigned vqt_serving(struct vqt_thread *t, struct vufsd_queue **qs)
{
    unsigned n = 0;
    for (uint32_t m = t->serving; m; m &= m - 1)
        qs[n++] = &t->dev->q[__builtin_ctz(m)];
    return n;
}

/* Whether a queue may be popped now. */
static bool vqt_poppable(const struct vufsd_queue *q)
{
    return __atomic_load_n(&q->enabled, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE);
}

/*
 * Sleeps until a kick or a wake-up (members, stop, enable, memory table, reset).
 * With kicks false (the device is broken, or nothing can be popped), kicks are
 * not even listened to: only the message thread can change that, and it wakes
 * the thread when it does.
 */
static void vqt_wait(struct vqt_thread *t, struct vufsd_queue **qs, unsigned n, bool kicks)
{
    bool watched = t->ep_fd >= 0;
    for (unsigned i = 0; i < n; i++)
        watched = watched && qs[i]->kick_watched;
    if (kicks && watched) {
        struct epoll_event ev[VDEV_MAX_QUEUES + 1];
        int got = epoll_wait(t->ep_fd, ev, VDEV_MAX_QUEUES + 1, -1);
        for (int i = 0; i < got; i++)
            if (ev[i].data.u32 == VQT_EV_WAKE)
                (void)vqt_drain(t->wake_fd);
        return;
    }
    /* No kicks, or no epoll: poll() and read the kick fds. */
    struct pollfd p[VDEV_MAX_QUEUES + 1];
    p[0] = (struct pollfd){.fd = t->wake_fd, .events = POLLIN};
    unsigned np = 1;
    for (unsigned i = 0; kicks && i < n; i++)
        p[np++] = (struct pollfd){.fd = qs[i]->kick_fd, .events = POLLIN};
    if (poll(p, np, -1) <= 0)
        return;
    if (p[0].revents & POLLIN)
        (void)vqt_drain(t->wake_fd);
    for (unsigned i = 1; i < np; i++) {
        struct vufsd_queue *q = qs[i - 1];
        /* A kick fd that polls readable without being an eventfd would make this loop spin. */
        if ((p[i].revents & (POLLERR | POLLNVAL)) ||
            ((p[i].revents & (POLLIN | POLLHUP)) && !vqt_drain(q->kick_fd)))
            vdev_set_broken(q->dev, q->index, "kick fd is not an eventfd", -EBADF);
    }
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
static unsigned vqt_batch(struct vqt_thread *t, struct vufsd_queue *q)
{
    struct iovec *rd = t->scratch, *wr = t->scratch + VQT_MAX_IOV;
    unsigned rd_cnt, wr_cnt, done = 0;
    uint16_t head;

    vqt_batch_queue = q;
    while (done < q->num && !__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
        int ret = vq_ring_pop(&q->ring, &q->mem->t->mem, &head, rd, &rd_cnt, wr, &wr_cnt, VQT_MAX_IOV);
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

/*
 * The requests a restart took back unanswered (vdev_quiesce), run again from
 * the guest's buffers, which are the guest's until the used ring has the head:
 * walked and checked like any chain, on the thread that serves q, before
 * anything else of q.
 */
static void vqt_run_resumed(struct vqt_thread *t, struct vufsd_queue *q)
{
    struct iovec *rd = t->scratch, *wr = t->scratch + VQT_MAX_IOV;
    unsigned rd_cnt, wr_cnt;

    vqt_batch_queue = q;
    for (unsigned k = 0; k < q->nresume; k++) {
        uint16_t head = q->resume[k];
        int ret = vq_walk_chain(&q->mem->t->mem, q->ring.desc, q->num, head, rd, &rd_cnt, wr,
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

/*
 * Whether a poller may spin now: a CPU is free for it (qpoll.h). The reading of
 * /proc/loadavg is shared by the device's threads and at most VQT_POLL_LOAD_NS
 * old; the thread whose look finds it due takes the next one.
 */
static bool vqt_cpu_free(struct vufsd_dev *dev, uint64_t now)
{
    int fd = dev->c.loadavg_fd;
    if (!dev->c.cpus_online || fd < 0)
        return true;
    uint64_t due = __atomic_load_n(&dev->load_next_ns, __ATOMIC_RELAXED);
    if (now >= due && __atomic_compare_exchange_n(&dev->load_next_ns, &due,
                                                  now + VQT_POLL_LOAD_NS, false,
                                                  __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        char buf[128];
        unsigned running;
        ssize_t r = pread(fd, buf, sizeof(buf), 0);
        bool free_cpu = r <= 0 || !vqt_poll_parse_running(buf, (size_t)r, &running) ||
                        vqt_poll_cpu_free(running, dev->c.cpus_online);
        __atomic_store_n(&dev->no_cpu_free, !free_cpu, __ATOMIC_RELAXED);
        return free_cpu;
    }
    return !__atomic_load_n(&dev->no_cpu_free, __ATOMIC_RELAXED);
}

enum vqt_poll_end {
    VQT_POLL_HIT,       /* a request arrived */
    VQT_POLL_EXPIRED,   /* the window ran out */
    VQT_POLL_PREEMPTED, /* the thread lost its CPU meanwhile */
    VQT_POLL_POKED,     /* the message thread wants the thread, or the device broke */
};

static bool vqt_any_work(struct vufsd_queue **qs, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (vq_ring_has_work(&qs[i]->ring))
            return true;
    return false;
}

/*
 * Spins on the queues' avail indexes for up to window_ns from t0. Notifications
 * stay suppressed meanwhile (vq_ring_disable_notify: with EVENT_IDX avail_event
 * stays behind, else VRING_USED_F_NO_NOTIFY is set), so the driver does not
 * kick for what is caught here.
 */
static enum vqt_poll_end vqt_poll(struct vqt_thread *t, struct vufsd_queue **qs, unsigned n,
                                  uint64_t t0, uint32_t window_ns)
{
    uint64_t last = t0, yielded = t0;
    for (;;) {
        for (unsigned i = 0; i < VQT_POLL_SPINS; i++) {
            if (vqt_any_work(qs, n))
                return VQT_POLL_HIT;
            vqt_cpu_relax();
        }
        if (__atomic_load_n(&t->poked, __ATOMIC_ACQUIRE) || vdev_is_broken(t->dev))
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

/* Re-arms notifications on every queue; true if one got work meanwhile. */
static bool vqt_arm(struct vufsd_queue **qs, unsigned n)
{
    bool work = false;
    for (unsigned i = 0; i < n; i++)
        work |= vq_ring_enable_notify(&qs[i]->ring);
    return work;
}

/* Re-arms notifications and sleeps unless work arrived meanwhile: true if it slept. */
static bool vqt_sleep(struct vqt_thread *t, struct vufsd_queue **qs, unsigned n)
{
    if (vqt_arm(qs, n))
        return false; /* work arrived between the last pop and the re-arm */
    vqt_wait(t, qs, n, true);
    t->poll_sleeps++;
    return true;
}

/*
 * The queues are drained: poll for the current window (if a CPU is free for
 * it), then re-arm notifications, re-check and sleep. The gap until the next
 * request sizes the next window (qpoll.h); a wake-up for anything else says
 * nothing about the gap.
 */
static void vqt_idle(struct vqt_thread *t, struct vufsd_queue **qs, unsigned n)
{
    if (!t->poll_cap_ns) {
        vqt_sleep(t, qs, n);
        return;
    }
    uint64_t t0 = vufs_now_ns();
    if (!vqt_cpu_free(t->dev, t0)) {
        /* No CPU for a poller: sleep, and keep the window for when there is. */
        t->poll_no_cpu++;
        vqt_sleep(t, qs, n);
        return;
    }
    enum vqt_poll_end end = t->poll_ns ? vqt_poll(t, qs, n, t0, t->poll_ns) : VQT_POLL_EXPIRED;
    if (end == VQT_POLL_HIT) {
        t->poll_hits++;
        t->poll_ns = vqt_poll_next(t->poll_ns, t->poll_cap_ns, 0);
        return;
    }
    if (end == VQT_POLL_POKED)
        return; /* the loop takes the message thread's change up first */
    if (end == VQT_POLL_PREEMPTED) {
        /* Spinning took the CPU from someone: back off whatever comes next. */
        t->poll_preempted++;
        t->poll_ns = vqt_poll_next(t->poll_ns, t->poll_cap_ns, UINT64_MAX);
        vqt_sleep(t, qs, n);
        return;
    }
    if (vqt_sleep(t, qs, n) &&
        (__atomic_load_n(&t->poked, __ATOMIC_ACQUIRE) || !vqt_any_work(qs, n))) {
        t->poll_ns = vqt_poll_next(t->poll_ns, t->poll_cap_ns, UINT64_MAX);
        return;
    }
    t->poll_ns = vqt_poll_next(t->poll_ns, t->poll_cap_ns, vufs_now_ns() - t0);
}

static void *vqt_thread_main(void *arg)
{
    struct vqt_thread *t = arg;
    struct vufsd_dev *dev = t->dev;
    struct vufsd_queue *qs[VDEV_MAX_QUEUES], *ready[VDEV_MAX_QUEUES];
    uint32_t stale = 0; /* queues whose q->next_mem may hold a newer table than q->mem */
    char name[16];

    if (t->index == 0)
        snprintf(name, sizeof(name), "vufsd-hiprio");
    else
        snprintf(name, sizeof(name), "vufsd-req%u", t->index % 100u);
    pthread_setname_np(pthread_self(), name);

    while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE)) {
        /* The message thread pokes after every change of members, enable flags
         * or memory table: look only then. */
        if (__atomic_exchange_n(&t->poked, false, __ATOMIC_ACQ_REL)) {
            vqt_take_members(t, false);
            stale = t->serving;
        }
        unsigned n = vqt_serving(t, qs), nready = 0;
        bool full = false;
        for (unsigned i = 0; i < n && !vdev_is_broken(dev); i++) {
            struct vufsd_queue *q = qs[i];
            uint32_t bit = 1u << q->index;
            if ((stale & bit) && vqt_refresh_mem(q))
                stale &= ~bit;
            if ((stale & bit) || !vqt_poppable(q))
                continue;
            ready[nready++] = q;
            vq_ring_disable_notify(&q->ring);
            /* Each queue a ring's worth at a time: none waits behind another for long. */
            if (vqt_batch(t, q) == q->num)
                full = true; /* there may be more, and stop gets a look in */
        }
        if (full)
            continue;
        if (vdev_is_broken(dev) || !nready) {
            vqt_wait(t, qs, n, false);
            continue;
        }
        vqt_idle(t, ready, nready);
    }
    if (t->poll_cap_ns)
        vlog_info("queue thread %u: %" PRIu64 " requests caught by polling, %" PRIu64
                  " sleeps, %" PRIu64 " polls cut short by preemption, %" PRIu64
                  " polls skipped with no CPU free, poll window %u ns at exit",
                  t->index, t->poll_hits, t->poll_sleeps, t->poll_preempted, t->poll_no_cpu,
                  t->poll_ns);
    vqt_take_members(t, true);
    return NULL;
}

/* Starts t with q as its first queue (message thread). */
static int vqt_thread_start(struct vqt_thread *t)
{
    struct vufsd_dev *dev = t->dev;

    if (!t->scratch) {
        t->scratch = calloc(2 * VQT_MAX_IOV, sizeof(struct iovec));
        if (!t->scratch)
            return -ENOMEM;
    }
    /* hiprio (FORGET, INTERRUPT) is rare and latency-insensitive: never polled. */
    unsigned poll_us = dev->c.cfg ? dev->c.cfg->poll_us : 0;
    if (poll_us > VQT_POLL_MAX_US)
        poll_us = VQT_POLL_MAX_US;
    t->poll_cap_ns = t->index == 0 ? 0 : poll_us * 1000u;
    t->poll_ns = 0; /* the first short gap starts it (qpoll.h) */
    t->poll_hits = t->poll_sleeps = t->poll_preempted = t->poll_no_cpu = 0;
    t->serving = 0;
    __atomic_store_n(&t->stop, false, __ATOMIC_RELEASE);
    (void)vqt_drain(t->wake_fd);
    __atomic_store_n(&t->poked, true, __ATOMIC_RELEASE); /* take the members up first */
    int ret = pthread_create(&t->thread, NULL, vqt_thread_main, t);
    if (ret)
        return -ret;
    t->running = true;
    return 0;
}

int vqt_start(struct vufsd_queue *q)
{
    struct vufsd_dev *dev = q->dev;

    if (q->state == VQT_RUNNING)
        return 0;
    assert(q->state == VQT_IDLE);
    if (q->kick_fd < 0 || !q->num || !q->addr_set)
        return -EAGAIN; /* not configured yet; the next message may complete it */
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
    struct vqt_memref *m;
    ret = vqt_memref_new(t, &m);
    if (ret < 0)
        return ret;
    vqt_memref_unref(q->mem);
    q->mem = m;

    if (!vdev_has_feature(dev, VU_F_PROTOCOL_FEATURES))
        __atomic_store_n(&q->enabled, true, __ATOMIC_RELEASE);
    __atomic_store_n(&q->stop, false, __ATOMIC_RELEASE);
    q->kick_watched = false;

    struct vqt_thread *th = vqt_thread_of(q);
    vqt_set_state(q, VQT_RUNNING);
    pthread_mutex_lock(&th->lock);
    th->members |= 1u << q->index;
    th->gen++;
    pthread_mutex_unlock(&th->lock);
    if (th->running) {
        vqt_thread_poke(th);
    } else if ((ret = vqt_thread_start(th)) < 0) {
        pthread_mutex_lock(&th->lock);
        th->members &= ~(1u << q->index);
        th->gen++;
        pthread_mutex_unlock(&th->lock);
        vqt_set_state(q, VQT_IDLE);
        vlog_err("queue %u: cannot start its thread: %s", q->index, strerror(-ret));
        return ret;
    }
    vlog_debug("queue %u started on queue thread %u (size %u, base %u, event_idx %d)", q->index,
               th->index, q->num, q->base, q->ring.event_idx);
    return 0;
}

/* Takes q off its thread: when vqt_stop_serving returns, the thread no longer
 * pops q nor watches its kick fd (message thread). */
static void vqt_stop_serving(struct vufsd_queue *q)
{
    struct vqt_thread *t = vqt_thread_of(q);

    __atomic_store_n(&q->stop, true, __ATOMIC_RELEASE); /* ends a batch early */
    pthread_mutex_lock(&t->lock);
    t->members &= ~(1u << q->index);
    unsigned gen = ++t->gen;
    bool last = t->members == 0;
    pthread_mutex_unlock(&t->lock);
    if (last) {
        __atomic_store_n(&t->stop, true, __ATOMIC_RELEASE);
        vqt_thread_poke(t);
        pthread_join(t->thread, NULL);
        t->running = false;
        return;
    }
    vqt_thread_poke(t);
    pthread_mutex_lock(&t->lock);
    while ((int)(t->acked_gen - gen) < 0)
        pthread_cond_wait(&t->acked, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

void vqt_stop(struct vufsd_queue *q)
{
    if (q->state != VQT_RUNNING)
        return;
    vqt_set_state(q, VQT_STOPPING);
    /* A DAX map of this queue, on its thread, may be waiting for a REM_MEM_REG
     * queued behind the message this thread is serving: it gives up (before the
     * thread is told to stop: that waits for the thread), the drain completes. */
    vdev_mem_stopping(q->dev, true);
    vqt_stop_serving(q);

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
    vdev_mem_stopping(q->dev, false);
    vqt_set_state(q, VQT_IDLE);
    vlog_debug("queue %u stopped at avail index %u, at most %u requests waiting", q->index, q->base,
               q->ring.max_pending);
}

/* ---- Restart: stopping without the frontend ------------------------------------------- */

void vqt_quiesce_begin(struct vufsd_queue *q)
{
    q->was_running = false;
    if (q->state != VQT_RUNNING)
        return;
    vqt_set_state(q, VQT_STOPPING);
    vqt_stop_serving(q);
    q->was_running = true;
}

void vqt_detached(void *ctx, struct fll_req *fr)
{
    struct vqt_req *req = container_of(fr, struct vqt_req, fr);
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
    struct timespec until = vufs_deadline(CLOCK_MONOTONIC, timeout_ns);
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
