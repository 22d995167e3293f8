/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A device's virtqueues and the threads that serve them (prefix vqt_): private
 * to daemon/. The device (device.h) owns them (struct vufsd_dev's q[] and t[])
 * and its message thread configures, starts and stops them; "Threads" and the
 * lock order are in device.h.
 *
 * Queue lifecycle (q->state). Each edge names the function that takes it;
 * vqt_set_state() asserts in debug builds that no other transition happens
 * (RUNNING -> IDLE directly only when vqt_start() cannot start the thread):
 *
 *     +------+  vqt_start(): SET_VRING_KICK with NUM, ADDR set and   +---------+
 *     | IDLE |-------------------------------------------------------->| RUNNING |
 *     +------+                 the rings in guest memory               +---------+
 *        ^                                                                  |
 *        |  vqt_stop(): off its thread    +----------+  vqt_stop(): GET_VRING_BASE,
 *        +--------------------------------| STOPPING |<-a new KICK fd, RESET_OWNER,
 *           (vqt_stop_serving()),         +----------+  disconnect, SIGTERM
 *           inflight == 0
 *
 *   Configuration (SET_VRING_NUM/ADDR/BASE) is accepted only in IDLE. In RUNNING
 *   the queue is a member of its thread (t->members), which pops it only while
 *   q->enabled (SET_VRING_ENABLE; always on when VHOST_USER_F_PROTOCOL_FEATURES
 *   was not negotiated) and the device is not broken. STOPPING exists only inside
 *   vqt_stop() on the message thread: it takes the queue out of t->members and
 *   waits until the thread has taken that up (t->acked_gen), after which the
 *   thread touches neither the ring's avail side nor the kick fd (or it joins
 *   the thread when that was its last queue).
 */
#ifndef VUFSD_QUEUE_H
#define VUFSD_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fuse_lowlevel/fll.h"
#include "mem.h"
#include "pool.h"
#include "virtqueue.h"

/* Iovecs per direction a request may use (Linux chains are at most the ring size,
 * QEMU's vhost-user-fs queues at most 1024, plus splits at region boundaries). */
#define VQT_MAX_IOV 1100

struct vufsd_dev;
struct vqt_req;
struct vqt_memref;

enum vqt_state {
    VQT_IDLE,
    VQT_RUNNING,
    VQT_STOPPING,
};

struct vufsd_queue {
    struct vufsd_dev *dev;
    unsigned index;

    /* Message thread only (read by the queue thread after start, never changed then). */
    enum vqt_state state;
    unsigned num; /* 0 = not set */
    bool addr_set;
    uint64_t desc_uva, avail_uva, used_uva;
    uint32_t addr_flags; /* SET_VRING_ADDR's flags: VU_VRING_F_LOG */
    uint64_t log_gpa;    /* SET_VRING_ADDR's log_guest_addr: where the used ring is logged */
    uint16_t base; /* SET_VRING_BASE; last_avail_idx when stopped */
    int kick_fd;   /* owned */
    int err_fd;    /* owned; written when the ring breaks */

    bool enabled; /* atomic: SET_VRING_ENABLE */
    bool stop;    /* atomic: the thread must stop popping this queue */
    /* Atomic: a newer memory table than mem (ref held), handed over by the message
     * thread on a swap (vqt_mem_changed) and taken by the queue's thread at its next
     * batch, so a queue thread never waits on dev->mem_lock. */
    struct vmem_table *next_mem;

    /* Its thread only: the avail side of ring, mem, the request cache. */
    struct vqt_memref *mem; /* the table the ring pointers point into (queue.c) */
    struct vqt_req **req_cache; /* completed requests kept for reuse (queue.c) */
    unsigned req_cached;
    bool kick_watched;     /* kick_fd is in the thread's ep_fd */
    /* Heads popped before a restart and not answered (parked SETLKWs): the
     * thread runs them again before anything else (vdev_quiesce, vdev_state_load).
     * Written by the message thread while the queue is IDLE. */
    uint16_t *resume;
    unsigned nresume;
    bool was_running;      /* quiesced while RUNNING: vdev_resume starts it again */

    pthread_mutex_t lock;
    /* Protected by lock: the used side of ring (used_idx, signalled_*), and: */
    struct vq_ring ring;
    unsigned inflight;      /* popped, not completed; atomic increments by the
                             * queue thread, decrements under lock */
    int call_fd;            /* owned; -1 = no notifications */
    bool notify_pending;    /* a completion inside the thread's batch deferred its signal */
    pthread_cond_t drained; /* inflight dropped to 0 */
    /* Dirty page logging (vdev_log_apply): the device's log while VHOST_F_LOG_ALL
     * is acked, else NULL; completions mark what they wrote in it. */
    struct vmem_log *log;
    bool log_used;          /* and the used ring's writes, at log_used_gpa */
    uint64_t log_used_gpa;
};

/* A queue thread: serves the queues in members (see "Threads" above). */
struct vqt_thread {
    struct vufsd_dev *dev;
    unsigned index; /* 0: hiprio's; 1..nthreads: request queues' */

    /* Message thread only. */
    bool running;   /* the thread exists */
    pthread_t thread;
    int wake_fd;    /* eventfd: members, enable, memory table changed; stop */
    int ep_fd;      /* epoll: wake_fd, and the kick fd of each queue it serves */

    bool stop;      /* atomic: the thread must return */
    bool poked;     /* atomic: set by vqt_wake before wake_fd; ends a busy-poll */

    pthread_mutex_t lock;
    uint32_t members;   /* protected by lock: running queues (bit = index) */
    unsigned gen;       /* protected by lock: bumped on every change of members */
    unsigned acked_gen; /* protected by lock: the change the thread took up last */
    pthread_cond_t acked; /* acked_gen changed */

    /* The thread only. */
    uint32_t serving;      /* members as last taken up */
    struct iovec *scratch; /* 2 * VQT_MAX_IOV */
    uint32_t poll_cap_ns;  /* --poll-us in ns; 0 on hiprio's and with --poll-us 0 */
    uint32_t poll_ns;      /* the current adaptive window (qpoll.h) */
    uint64_t poll_hits;    /* requests that arrived while the thread polled */
    uint64_t poll_sleeps;  /* times the thread slept on its kick fds */
    uint64_t poll_preempted; /* polls cut short: the thread lost its CPU */
    uint64_t poll_no_cpu;  /* polls skipped: no CPU was free (qpoll.h) */
};

void vqt_init(struct vufsd_queue *q, struct vufsd_dev *dev, unsigned index);
void vqt_destroy(struct vufsd_queue *q);
/* A queue thread's state (not the thread: that starts with its first queue). */
int vqt_thread_init(struct vqt_thread *t, struct vufsd_dev *dev, unsigned index);
void vqt_thread_destroy(struct vqt_thread *t);
/* Starts the queue if it is IDLE and fully configured. 0, or -errno why not. */
int vqt_start(struct vufsd_queue *q);
/* Stops a RUNNING queue: takes it off its thread (joining the thread when it was
 * its last queue), cancels the requests the fs parked
 * (fs_cancel_waits, again while a worker may still park one) and waits for its
 * in-flight requests. */
void vqt_stop(struct vufsd_queue *q);
/* A restart: stops a RUNNING queue keeping its kick fd; the heads of requests
 * the fs gives back (vqt_detached) join q->resume. Returns with q IDLE. */
void vqt_quiesce_begin(struct vufsd_queue *q);
/* For fs_detach_waits: the request goes back unanswered (its head to resume). */
void vqt_detached(void *ctx, struct fll_req *r);
/* Waits up to timeout_ns for the queue's in-flight requests; true when none is left. */
bool vqt_wait_drained(struct vufsd_queue *q, long timeout_ns);
/* After the drain: the queue is IDLE at its last avail index. */
void vqt_quiesce_end(struct vufsd_queue *q);
/* Wakes the queue's thread (enable flag changed, new memory table). */
void vqt_wake(struct vufsd_queue *q);
/* Hands a RUNNING queue's thread the new memory table t (takes the caller's
 * reference) and wakes it; a table handed over before and not yet taken is
 * dropped. Message thread. */
void vqt_mem_changed(struct vufsd_queue *q, struct vmem_table *t);
/* Replaces the call fd (takes fd; -1 = none). */
void vqt_set_call_fd(struct vufsd_queue *q, int fd);
/* Resets configuration to the just-connected state (queue must be IDLE). */
void vqt_reset(struct vufsd_queue *q);
/* The transport's complete() for fll. */
extern const struct fll_transport vqt_transport;
/* Worker pool entry. */
void vqt_pool_run(struct vpool_item *item);

#endif
