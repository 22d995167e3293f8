/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The vhost-user-fs device (prefix vdev_; its queues and queue threads, prefix
 * vqt_, are in queue.h): private to daemon/. One device per frontend connection.
 *
 * Threads:
 *   - the message thread (main) reads vhost-user messages and is the only thread
 *     that configures, starts or stops queues, swaps the memory table or changes
 *     feature bits;
 *   - queue threads (struct vqt_thread) pop chains and run requests (or hand them
 *     to the worker pool with --thread-pool-size): the hiprio queue has one of
 *     its own, never polled; request queue N is served by request thread
 *     1 + (N - 1) % nthreads, where nthreads is --queue-threads (default: one per
 *     CPU the daemon may run on), so with more queues than CPUs a thread serves
 *     several queues in turn instead of more threads taking turns on the CPUs.
 *     A thread exists while at least one of its queues runs;
 *   - workers and FLL_ASYNC completions finish requests from any thread.
 *
 * Device lifecycle (dev->state). Each edge names the function that takes it;
 * vdev_set_owned(), the only function that changes the state, asserts in debug
 * builds that it goes from NEW or OWNED (SET_OWNER again is tolerated) to OWNED:
 *
 *      connect: vdev_new()
 *         |
 *         v
 *     +-------+  SET_OWNER:          +-------+
 *     |  NEW  |--------------------->| OWNED |---+ queues start and stop any number of
 *     +-------+  vdev_set_owned()    +-------+<--+ times (vqt_start / vqt_stop); RESET_OWNER /
 *         |                              |         RESET_DEVICE: vdev_reset(), stays OWNED:
 *         |                              |         queues stopped and reset, fs reset,
 *         |                              |         virtio features and status cleared;
 *         |                              |         the protocol features, the backend
 *         |                              |         channel and the memory table kept
 *         |                              |         (QEMU does not resend them)
 *         +---------------+--------------+
 *                         | disconnect / SIGTERM: vdev_free(): every queue stopped,
 *                         v in-flight requests completed, fds closed, fs reset
 *                      (freed)
 *
 *   dev->broken is orthogonal: set once (and logged once) when a ring breaks the
 *   virtio rules; no queue pops while it is set; cleared when the frontend resets
 *   the device (RESET_OWNER, SET_STATUS 0) or restarts it (SET_FEATURES while
 *   every queue is stopped).
 *
 * Queue lifecycle: the diagram is in queue.h.
 *
 * Lock order (never take a lower number while holding a higher one):
 *   1. dev->mem_lock   (the current table pointer and generation; queue threads
 *                       never take it: tables reach them through q->next_mem)
 *   2. t->lock         (a queue thread's members and acknowledgements)
 *   3. q->lock         (used ring side, inflight, call fd)
 *   4. dev->backend_lock (the backend request channel)
 */
#ifndef VUFSD_DEVICE_H
#define VUFSD_DEVICE_H

#include <glib.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "fuse_lowlevel/fll.h"
#include "mem.h"
#include "pool.h"
#include "queue.h"
#include "virtqueue.h"

/* Queue 0 is hiprio; 1..16 are request queues. */
#define VDEV_MAX_QUEUES 17
/* Largest WRITE payload a request queue carries (256 pages). */
#define VDEV_MAX_WRITE (1u << 20)

struct vufsd_dev;
struct dax_window;

/* What main hands the device. */
struct vdev_config {
    const struct vufsd_config *cfg;
    const struct fll_ops *ops;
    void *fs;
    void (*fs_reset)(void *fs); /* forget every inode and handle (pt_fs_reset) */
    /* Completes every request the fs parked (a SETLKW waiting for its lock) with
     * EINTR, from the calling thread (pt_fs_cancel_waits); NULL if it never parks. */
    void (*fs_cancel_waits)(void *fs);
    /*
     * Live migration (migration.c): state_save makes the state of what the guest
     * holds, without fds (malloc'd into *buf, *len bytes), with every queue
     * stopped; state_load loads such bytes, untrusted, into the device before
     * its queues first start. Both NULL: the device offers no migration
     * (VHOST_USER_PROTOCOL_F_DEVICE_STATE is not offered). 0 or -errno.
     */
    int (*state_save)(struct vufsd_dev *dev, uint8_t **buf, size_t *len);
    int (*state_load)(struct vufsd_dev *dev, const uint8_t *buf, size_t len);
    void *state_ctx; /* for the two above */
    /* A restart: takes every request the fs parked off its wait unanswered,
     * handing each to fn (pt_fs_detach_waits); NULL if it never parks. */
    void (*fs_detach_waits)(void *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx);
    /* The DAX window, or NULL. Cleared without frontend calls when the device is
     * reset or the frontend leaves (the frontend drops its mappings itself),
     * after the queues stopped and before the fs hears of it. */
    struct dax_window *dax;
    /* Request queue threads (0: one per CPU in the daemon's affinity mask). */
    unsigned queue_threads;
    /* What adaptive polling looks at (qpoll.h): the CPUs online and an open
     * /proc/loadavg (main opens it before the sandbox hides /proc, and owns it).
     * cpus_online 0 or loadavg_fd -1: not known, only preemption stops a poll. */
    unsigned cpus_online;
    int loadavg_fd;
};

/* Largest device state accepted from a frontend (the saved state's own bound). */
#define VMIG_MAX_STATE ((size_t)1 << 30)
/* How long CHECK_DEVICE_STATE waits for the transfer thread before it cancels:
 * QEMU sends it only after it has read or written the whole pipe. */
#define VMIG_CHECK_WAIT_MS 10000

/* A device state transfer in progress (migration.c has its diagram). */
struct vmig {
    enum { VMIG_NONE, VMIG_SAVE, VMIG_LOAD } dir; /* message thread */
    int fd;          /* the frontend's pipe end; the thread closes it */
    int cancel_fd;   /* eventfd: the thread gives up */
    uint8_t *buf;    /* SAVE: the state; LOAD: what was read so far */
    size_t len, cap, max; /* max: VMIG_MAX_STATE (tests lower it) */
    int check_wait_ms;    /* VMIG_CHECK_WAIT_MS (tests lower it) */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* with lock: done became true */
    bool done;       /* protected by lock */
    int result;      /* protected by lock: the thread's 0 or -errno */
};

struct vufsd_dev {
    struct vdev_config c;
    struct fll_session *se;
    struct vpool *pool; /* NULL: requests run in the queue threads */

    /* Message thread only. */
    enum { VDEV_NEW, VDEV_OWNED } state;
    uint64_t features;          /* acked virtio features */
    uint64_t protocol_features; /* acked protocol features */
    uint8_t status;             /* SET_STATUS */
    uint64_t unknown_logged;    /* bitmap: unknown request ids already logged */
    bool unknown_big_logged;
    struct vmem_log *log;       /* SET_LOG_BASE's dirty page log, or NULL */
    struct vmig mig;            /* SET_DEVICE_STATE_FD's transfer */

    int broken; /* atomic: 0 or 1 */

    pthread_mutex_t mem_lock;
    struct vmem_table *mem; /* protected by mem_lock; never NULL */
    unsigned mem_gen;       /* protected by mem_lock; bumped on every swap */
    unsigned mem_adds;      /* protected by mem_lock; ADD_MEM_REGs (vdev_mem_added) */
    /* protected by mem_lock: regions the frontend is expected to remove
     * (vdev_mem_expect_removal) whose REM_MEM_REG has not come yet */
    unsigned mem_rems_pending;
    unsigned mem_stopping;  /* protected by mem_lock; queue stops under way (vdev_mem_stopping) */
    /* with mem_lock: the table was swapped, mem_adds changed or a stop began */
    pthread_cond_t mem_changed;

    pthread_mutex_t backend_lock;
    int backend_fd; /* protected by backend_lock; -1 when unset */

    struct vufsd_queue q[VDEV_MAX_QUEUES];
    /* t[0] serves hiprio, t[1..nthreads] the request queues. */
    struct vqt_thread t[VDEV_MAX_QUEUES];
    unsigned nthreads;
    uint64_t load_next_ns; /* atomic: when /proc/loadavg is due to be read again */
    bool no_cpu_free;      /* atomic: its last reading left no CPU for a poller */
};

/* ---- device.c ---------------------------------------------------------------------- */

/* 0 and *out, or -errno (*out NULL). */
int vdev_new(const struct vdev_config *c, struct vufsd_dev **out);
/* Stops every queue (waiting for in-flight requests), closes all fds, resets the fs. */
void vdev_free(struct vufsd_dev *dev);
/* Stops every queue as vdev_free does (parked requests answered EINTR), keeping
 * the fs and the session: what they hold can still be saved. */
void vdev_stop(struct vufsd_dev *dev);
/* NEW -> OWNED (SET_OWNER; repeated SET_OWNER is tolerated). */
void vdev_set_owned(struct vufsd_dev *dev);
/* RESET_OWNER / RESET_DEVICE: queues stopped and reset, fs reset; stays OWNED with
 * its protocol features, backend channel and memory table (see the lifecycle above). */
void vdev_reset(struct vufsd_dev *dev);
bool vdev_has_feature(const struct vufsd_dev *dev, unsigned bit);
bool vdev_has_protocol_feature(const struct vufsd_dev *dev, unsigned bit);
/* The virtio and protocol features vufsd offers (GET_FEATURES answers the
 * first). VHOST_USER_PROTOCOL_F_SHMEM (bit 22) only with a DAX window
 * (--dax-window) over the mainline protocol. */
uint64_t vdev_offered_features(void);
uint64_t vdev_offered_protocol_features(const struct vufsd_config *cfg);
/* A window the frontend learns about through GET_SHMEM_CONFIG (mainline protocol). */
bool vdev_shmem_window(const struct vufsd_config *cfg);
/* What dev offers: the configuration's, and the device state transfer when it
 * can save and load its state (what GET_PROTOCOL_FEATURES answers). */
uint64_t vdev_protocol_features(const struct vufsd_dev *dev);
/* Publishes a new memory table (takes the caller's reference). */
void vdev_mem_swap(struct vufsd_dev *dev, struct vmem_table *t);
/* A new reference to the current table. */
struct vmem_table *vdev_mem_get(struct vufsd_dev *dev, unsigned *gen);
/* The frontend added a guest memory region (ADD_MEM_REG): wakes waiters. */
void vdev_mem_added(struct vufsd_dev *dev);
/* How many additions so far (the value to give vdev_mem_wait_added). */
unsigned vdev_mem_adds(struct vufsd_dev *dev);
/* Waits until an addition after `since`, at most timeout_ms: true if one came. */
bool vdev_mem_wait_added(struct vufsd_dev *dev, unsigned since, int timeout_ms);
/*
 * Removals on their way: the frontend answered (or is about to answer) a
 * mapping's unmap and will send the region's REM_MEM_REG after its reply.
 * vdev_mem_expect_removal before sending the unmap (so a REM_MEM_REG that
 * overtakes the reply still counts), vdev_mem_removal_settled if it failed;
 * every REM_MEM_REG settles one too.
 */
void vdev_mem_expect_removal(struct vufsd_dev *dev);
void vdev_mem_removal_settled(struct vufsd_dev *dev);
/* A queue stop begins / has drained (message thread): while one is under way
 * vdev_mem_wait_room gives up at once (and is woken to). */
void vdev_mem_stopping(struct vufsd_dev *dev, bool begin);
/*
 * Room for one more region in the table. If it is full while removals are
 * pending, waits for them, at most timeout_ms, and gives up while a queue stops (the message thread may be waiting for the caller's request, with
 * the REM_MEM_REG queued behind that). 0: room; -ENOSPC: full with nothing
 * pending, or a stop under way; -ETIMEDOUT: the pending removals did not come (they are
 * forgotten: a frontend that does not send them is not waited for again).
 * Never on the message thread.
 */
int vdev_mem_wait_room(struct vufsd_dev *dev, int timeout_ms);
/* Marks the device broken (logged once with the reason); queues stop popping. */
void vdev_set_broken(struct vufsd_dev *dev, unsigned queue, const char *why, int err);
bool vdev_is_broken(const struct vufsd_dev *dev);
void vdev_clear_broken(struct vufsd_dev *dev);
/*
 * Dirty page logging: hands every queue the device's log while VHOST_F_LOG_ALL
 * is acked (NULL otherwise) and its used-ring logging address, under each
 * queue's lock, so no completion writes to a log after this returns unless it
 * is the current one. Message thread.
 */
void vdev_log_apply(struct vufsd_dev *dev);
/* SET_LOG_BASE: makes l the device's log (takes it) and frees the old one once no
 * queue can reach it. */
void vdev_set_log(struct vufsd_dev *dev, struct vmem_log *l);
/* Replaces the backend request channel fd (takes fd; -1 closes it). */
void vdev_set_backend_fd(struct vufsd_dev *dev, int fd);
/* Whether a DAX window can be mapped through this frontend: the backend channel
 * is set and REPLY_ACK, BACKEND_REQ, BACKEND_SEND_FD (and SHMEM when shmem is
 * true) were negotiated. */
bool vdev_can_map(struct vufsd_dev *dev, bool shmem);
/* Reads exactly len bytes from a stream socket: 0, -ECONNRESET at EOF, or -errno. */
int vdev_recv_all(int fd, void *buf, size_t len);

/*
 * Sends a backend request (backend -> frontend) with an optional fd and waits for
 * the frontend's REPLY_ACK answer. Returns 0 when the frontend answered 0,
 * -EIO when it answered non-zero (*reply gets the value), -ENOTCONN without a
 * channel, -EOPNOTSUPP without REPLY_ACK, or the socket error.
 */
int vdev_backend_request(struct vufsd_dev *dev, uint32_t request, const void *payload, size_t size,
                         int fd, uint64_t *reply);

/* ---- migration.c: the device state transfer ------------------------------------------ */

void vmig_init(struct vmig *m);
void vmig_destroy(struct vmig *m);
/* Cancels a transfer in progress (a reset, a new SET_DEVICE_STATE_FD). */
void vmig_abort(struct vmig *m);
/* Whether the device can save and load its state (state_save and state_load set). */
bool vmig_supported(const struct vufsd_dev *dev);
/*
 * SET_DEVICE_STATE_FD: direction VU_STATE_DIR_*, phase VU_STATE_PHASE_STOPPED
 * (the only one), fd a pipe or socket end open the right way. Every queue must
 * be stopped. Saving makes the state now. Takes fd on success (0); on failure
 * (-EINVAL, -EBUSY, -EBADF, -EOPNOTSUPP, the save's error) the caller keeps it.
 */
int vmig_set_fd(struct vufsd_dev *dev, uint32_t direction, uint32_t phase, int fd);
/* CHECK_DEVICE_STATE: the transfer's result; loading, the state's (state_load). */
int vmig_check(struct vufsd_dev *dev);
/* ---- device_state.c: restart and the vhost-user part of a saved state ---------------- */

struct vst_writer;
struct vst_state;
struct vst_fds;
struct vst_err;

/*
 * A restart: every RUNNING queue stops without the frontend asking (its
 * thread joined, in-flight requests completed; the requests the fs parked
 * are taken back unanswered and their heads kept in q->resume), keeping its
 * configuration and eventfds. The device is then still, and its state can be
 * saved. Message thread only. 0, or -ENOMEM before anything stopped.
 */
int vdev_quiesce(struct vufsd_dev *dev);
/* Starts again the queues vdev_quiesce stopped (a restart that did not happen);
 * each first runs the requests in q->resume. */
void vdev_resume(struct vufsd_dev *dev);
/*
 * VST_SEC_VHOST: ownership, virtio and protocol features, status, the memory
 * table, every configured queue (size, ring addresses, position, enable,
 * eventfds, the heads to run again), the backend channel and conn_fd (the
 * frontend's connection), the fds added to fds. After vdev_quiesce.
 */
int vdev_state_save(struct vufsd_dev *dev, int conn_fd, struct vst_writer *w, struct vst_fds *fds);
/*
 * Loads it into a new device (vdev_new, nothing received yet) and starts the
 * queues that were running: after this the device serves as the old one did.
 * Untrusted: features within what vufsd offers, every region validated as
 * SET_MEM_TABLE's, queue indices, sizes, alignment and ring addresses as the
 * vring messages', heads below the ring size and not repeated, fds present
 * once. *conn_fd gets the frontend's connection. 0 or -errno with err.
 */
int vdev_state_load(struct vufsd_dev *dev, const struct vst_state *st, struct vst_fds *fds,
                    int *conn_fd, struct vst_err *err);

#endif
