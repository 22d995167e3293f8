/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vfe: an in-tree vhost-user-fs frontend. It plays QEMU (the vhost-user
 * messages, guest memory, the rings) and the guest driver (virtio split rings,
 * FUSE requests), so tests and benchmarks can drive any vhost-user-fs backend.
 *
 * Layers, each usable on its own (hostile tests use the lower ones directly):
 *   vfe_msg_*   vhost-user message encoding, no I/O               (msg.c)
 *   vfe_conn_*  the socket: connect or spawn a backend, send and
 *               receive messages (raw or checked), the backend
 *               request channel thread                             (conn.c)
 *   vfe_mem_*   memfd guest memory in several regions, allocator  (vfe_mem.c)
 *   vfe_vq_*    split virtqueues in guest memory                   (ring.c)
 *   vfe_dev_*   the device: QEMU's negotiation and start/stop      (dev.c)
 *   vfe_fuse_*  a FUSE client over the request queues              (fuse.c)
 *   vfe_bench_* a pipelined request loop with latency histograms   (bench.c)
 *   vfe_dax_*   a DAX window the backend maps files into           (vfe_dax.c)
 *
 * Errors are negative errno values everywhere. Nothing here aborts on what a
 * backend sends: a misbehaving backend gets -EPROTO, and a broken queue stays
 * broken (vfe_vq_broken()).
 *
 * Threads: a vfe_conn is used by one thread at a time (its backend request
 * channel runs in its own thread); a vfe_vq by one thread at a time; different
 * queues may be driven by different threads concurrently. The allocator of a
 * vfe_mem is locked internally.
 */
#ifndef VFE_H
#define VFE_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/fuse.h>

/* ---- vhost-user messages (msg.c) ------------------------------------------- */

/*
 * The frontend's own copy of the vhost-user ids, feature bits and layouts, on
 * purpose: it is an independent peer of the daemon (whose copy is
 * daemon/vu_msg.h) and shares no code with it, so that a misreading of the
 * specification on either side shows as a failure against the other rather
 * than agreeing with itself.
 */
enum vfe_vu_request {
    VFE_VU_GET_FEATURES = 1,
    VFE_VU_SET_FEATURES = 2,
    VFE_VU_SET_OWNER = 3,
    VFE_VU_RESET_OWNER = 4,
    VFE_VU_SET_MEM_TABLE = 5,
    VFE_VU_SET_LOG_BASE = 6,
    VFE_VU_SET_LOG_FD = 7,
    VFE_VU_SET_VRING_NUM = 8,
    VFE_VU_SET_VRING_ADDR = 9,
    VFE_VU_SET_VRING_BASE = 10,
    VFE_VU_GET_VRING_BASE = 11,
    VFE_VU_SET_VRING_KICK = 12,
    VFE_VU_SET_VRING_CALL = 13,
    VFE_VU_SET_VRING_ERR = 14,
    VFE_VU_GET_PROTOCOL_FEATURES = 15,
    VFE_VU_SET_PROTOCOL_FEATURES = 16,
    VFE_VU_GET_QUEUE_NUM = 17,
    VFE_VU_SET_VRING_ENABLE = 18,
    VFE_VU_SET_BACKEND_REQ_FD = 21,
    VFE_VU_GET_CONFIG = 24,
    VFE_VU_RESET_DEVICE = 34,
    VFE_VU_GET_MAX_MEM_SLOTS = 36,
    VFE_VU_ADD_MEM_REG = 37,
    VFE_VU_REM_MEM_REG = 38,
    VFE_VU_SET_STATUS = 39,
    VFE_VU_GET_STATUS = 40,
    VFE_VU_SET_DEVICE_STATE_FD = 42,
    VFE_VU_CHECK_DEVICE_STATE = 43,
};

/* Backend -> frontend requests (the backend request channel). */
#define VFE_VU_LEGACY_FS_MAP 6u        /* virtio-fs branch SLAVE_FS_MAP */
#define VFE_VU_LEGACY_FS_UNMAP 7u      /* virtio-fs branch SLAVE_FS_UNMAP */
#define VFE_VU_BACKEND_SHMEM_MAP 9u    /* mainline */
#define VFE_VU_BACKEND_SHMEM_UNMAP 10u /* mainline */
/* Frontend -> backend: the backend's shared memory regions (the DAX window). */
#define VFE_VU_GET_SHMEM_CONFIG 44u

/* Header flags. */
#define VFE_VU_VERSION 0x1u
#define VFE_VU_VERSION_MASK 0x3u
#define VFE_VU_FLAG_REPLY 0x4u
#define VFE_VU_FLAG_NEED_REPLY 0x8u

/* Protocol feature bits. */
#define VFE_VU_PF_MQ 0
#define VFE_VU_PF_LOG_SHMFD 1
#define VFE_VU_PF_REPLY_ACK 3
#define VFE_VU_PF_BACKEND_REQ 5
#define VFE_VU_PF_CONFIG 9
#define VFE_VU_PF_BACKEND_SEND_FD 10
#define VFE_VU_PF_RESET_DEVICE 13
#define VFE_VU_PF_CONFIGURE_MEM_SLOTS 15
#define VFE_VU_PF_STATUS 16
#define VFE_VU_PF_DEVICE_STATE 19
#define VFE_VU_PF_SHMEM 22

/* Virtio / vhost-user feature bits. */
#define VFE_F_LOG_ALL 26
#define VFE_F_INDIRECT_DESC 28
#define VFE_F_EVENT_IDX 29
#define VFE_F_PROTOCOL_FEATURES 30
#define VFE_F_VERSION_1 32

/* SET_VRING_ADDR flags: log the used ring's writes at log_guest_addr. */
#define VFE_VU_VRING_F_LOG 0x1u

/* SET_VRING_KICK/CALL/ERR payload: queue index in the low byte, and this bit
 * when no fd is attached. */
#define VFE_VU_VRING_IDX_MASK 0xffull
#define VFE_VU_VRING_NOFD (1ull << 8)

#define VFE_VU_HDR_SIZE 12u
#define VFE_VU_MAX_PAYLOAD 4096u
#define VFE_VU_MAX_FDS 16u
#define VFE_VU_MAX_REGIONS 8u

struct vfe_vu_state {
    uint32_t index;
    uint32_t num;
};

struct vfe_vu_addr {
    uint32_t index;
    uint32_t flags;
    uint64_t desc_user_addr;
    uint64_t used_user_addr;
    uint64_t avail_user_addr;
    uint64_t log_guest_addr;
};

struct vfe_vu_region {
    uint64_t guest_phys_addr;
    uint64_t memory_size;
    uint64_t userspace_addr;
    uint64_t mmap_offset;
};

struct vfe_vu_mem {
    uint32_t nregions;
    uint32_t padding;
    struct vfe_vu_region regions[VFE_VU_MAX_REGIONS];
};

/* ADD_MEM_REG / REM_MEM_REG payload: one region. */
struct vfe_vu_mem_reg {
    uint64_t padding;
    struct vfe_vu_region region;
};

/* QEMU's own limit on guest memory regions (VHOST_USER_MAX_RAM_SLOTS): QEMU
 * 11.1 aborts when a change would make more (an assertion in
 * vhost_user_add_remove_regions), whatever GET_MAX_MEM_SLOTS said. */
#define VFE_VU_QEMU_MAX_SLOTS 512u

/* One message as it travels: header, then size bytes of payload. */
struct vfe_msg {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
    union {
        uint64_t u64;
        struct vfe_vu_state state;
        struct vfe_vu_addr addr;
        struct vfe_vu_mem mem;
        struct vfe_vu_mem_reg mem_reg;
        uint8_t raw[VFE_VU_MAX_PAYLOAD];
    } payload;
} __attribute__((packed));

void vfe_msg_init(struct vfe_msg *m, uint32_t request, uint32_t flags);
void vfe_msg_set_u64(struct vfe_msg *m, uint64_t v);
void vfe_msg_set_state(struct vfe_msg *m, uint32_t index, uint32_t num);
void vfe_msg_set_addr(struct vfe_msg *m, const struct vfe_vu_addr *a);
/* -E2BIG with more than VFE_VU_MAX_REGIONS regions. */
int vfe_msg_set_mem(struct vfe_msg *m, const struct vfe_vu_region *r, unsigned n);
/* ADD_MEM_REG / REM_MEM_REG: the padding, then the region (40 bytes). */
void vfe_msg_set_mem_reg(struct vfe_msg *m, const struct vfe_vu_region *r);
/* Bytes on the wire: header plus payload. */
size_t vfe_msg_wire_len(const struct vfe_msg *m);
/* Is reply a well-formed reply to request carrying a payload of exactly
 * payload_size bytes? 0 or -EPROTO. */
int vfe_msg_check_reply(const struct vfe_msg *reply, uint32_t request, uint32_t payload_size);
const char *vfe_msg_name(uint32_t request);

/* ---- The connection (conn.c) ----------------------------------------------- */

struct vfe_conn;

/*
 * Serves one message from the backend request channel; fds are owned by the
 * callee for the duration of the call (closed afterwards). Returns the u64 to
 * ack with (0 = success). Runs on the channel thread.
 */
typedef uint64_t (*vfe_backend_req_fn)(void *opaque, const struct vfe_msg *m, const int *fds,
                                       unsigned nfds);
/*
 * Runs on the channel thread after the reply to m went out (or right after the
 * handler when m wanted none), with the handler's result: what a VMM does once
 * it has answered, as QEMU 11.1 commits a mapping to the guest's memory (and
 * tells the backend with ADD_MEM_REG) after its reply to BACKEND_SHMEM_MAP.
 */
typedef void (*vfe_backend_post_fn)(void *opaque, const struct vfe_msg *m, uint64_t result);

struct vfe_conn_config {
    /* Exactly one of socket_path (connect to a running backend) or backend_cmd. */
    const char *socket_path;
    /* Command line with {socket} and {dir} substituted; run in its own process
     * group, killed and reaped on close. socket_path, if also set, is the socket
     * it is told to create; otherwise a temporary one is made. */
    const char *backend_cmd;
    const char *dir;            /* for {dir} */
    const char *backend_log;    /* backend's stdout+stderr go here (NULL: inherit) */
    int timeout_ms;             /* socket appearance and every reply; 0 = 10 s */
    /* The CPUs the spawned backend may run on (its affinity before exec, which
     * its threads inherit); NULL: the frontend's own. */
    const cpu_set_t *backend_cpus;
};

int vfe_conn_open(const struct vfe_conn_config *cfg, struct vfe_conn **out);
/* Stops the request channel, closes the socket, kills and reaps the backend. */
void vfe_conn_close(struct vfe_conn *c);
/* The same, reporting the spawned backend's wait status and whether it exited
 * by itself after the socket closed (before any signal). -ECHILD when we did not
 * spawn it. */
int vfe_conn_close_status(struct vfe_conn *c, int *status, bool *on_its_own);
/* The backend's pid (0 when we connected to a running one), and its exit. */
pid_t vfe_conn_backend_pid(const struct vfe_conn *c);
/* Non-blocking: true and *status if the spawned backend has exited. */
bool vfe_conn_backend_exited(struct vfe_conn *c, int *status);
const char *vfe_conn_socket_path(const struct vfe_conn *c);
/* The connection's socket (the restart tests check a restarted daemon keeps it). */
int vfe_conn_fd(const struct vfe_conn *c);
void vfe_conn_set_reply_ack(struct vfe_conn *c, bool on);

/* Raw: the header is sent as given (size may lie about payload_len). */
int vfe_conn_send_raw(struct vfe_conn *c, uint32_t request, uint32_t flags, uint32_t size,
                      const void *payload, size_t payload_len, const int *fds, unsigned nfds);
/* Raw: one message back. -ETIMEDOUT, -ECONNRESET on EOF, -EMSGSIZE when the
 * payload is larger than VFE_VU_MAX_PAYLOAD (it is drained). fds received are
 * stored in fds (up to *nfds; the count is written back) or closed if fds is NULL. */
int vfe_conn_recv_raw(struct vfe_conn *c, struct vfe_msg *m, int *fds, unsigned *nfds,
                      int timeout_ms);
/* Did the backend close the socket? Waits up to timeout_ms for EOF. */
bool vfe_conn_wait_closed(struct vfe_conn *c, int timeout_ms);

/* Checked: send m (with fds) and, if the request has its own reply (GET_*),
 * read and validate it into reply. With REPLY_ACK on, other requests carry
 * NEED_REPLY and the u64 ack is checked (-EIO when non-zero). Calls from
 * several threads (a test's and the backend channel's) take turns: each call's
 * request and reply stay together. */
int vfe_conn_call(struct vfe_conn *c, struct vfe_msg *m, const int *fds, unsigned nfds,
                  struct vfe_msg *reply);
int vfe_conn_get_u64(struct vfe_conn *c, uint32_t request, uint64_t *v);
int vfe_conn_set_u64(struct vfe_conn *c, uint32_t request, uint64_t v);

/* Creates the backend request socketpair, sends SET_BACKEND_REQ_FD and starts
 * the thread serving it. handler NULL: every request gets a failure ack; post
 * may be NULL. */
int vfe_conn_start_backend_channel(struct vfe_conn *c, vfe_backend_req_fn handler,
                                   vfe_backend_post_fn post, void *opaque);
/* Requests served on the channel so far. */
unsigned vfe_conn_backend_requests(const struct vfe_conn *c);

/* ---- Guest memory (vfe_mem.c) ------------------------------------------------ */

#define VFE_MEM_MAX_REGIONS 8u

struct vfe_mem_config {
    unsigned nregions;                     /* 0: the default layout below */
    uint64_t gpa[VFE_MEM_MAX_REGIONS];     /* page aligned, no overlaps */
    uint64_t size[VFE_MEM_MAX_REGIONS];    /* page multiples */
};

/*
 * The default layout: four regions. Region 0 stands apart in guest-physical
 * space; regions 1, 2 and 3 follow each other (two boundaries a buffer can
 * straddle), while their mappings are NOT adjacent in our address space (mapped
 * in reverse order with guard pages), so a backend that does not split a
 * straddling buffer reads the wrong bytes or faults instead of passing by luck.
 *   region 0: gpa 0x0,                 size 16 MiB   (rings, small buffers)
 *   region 1: gpa 0x100000000,         size 64 MiB
 *   region 2: gpa 0x100000000+64 MiB,  size 64 MiB
 *   region 3: gpa 0x100000000+128 MiB, size 32 MiB
 * All regions share one memfd at distinct offsets (mmap_offset != 0 but for
 * region 0). Ordinary allocations keep 1 MiB away from the shared boundaries.
 */
void vfe_mem_default_config(struct vfe_mem_config *cfg);

struct vfe_mem;

int vfe_mem_new(const struct vfe_mem_config *cfg, struct vfe_mem **out);
void vfe_mem_free(struct vfe_mem *m);
unsigned vfe_mem_nregions(const struct vfe_mem *m);
/* The SET_MEM_TABLE view (userspace_addr = our mapping) and the fd. */
void vfe_mem_region(const struct vfe_mem *m, unsigned i, struct vfe_vu_region *r);
int vfe_mem_fd(const struct vfe_mem *m);

/* Translation; NULL / -EFAULT unless [gpa, gpa+len) lies inside ONE region. */
void *vfe_mem_gpa_to_hva(const struct vfe_mem *m, uint64_t gpa, uint64_t len);
int vfe_mem_hva_to_gpa(const struct vfe_mem *m, const void *hva, uint64_t len, uint64_t *gpa);
/* Copies across region boundaries (GPA-adjacent regions); -EFAULT on holes. */
int vfe_mem_write(struct vfe_mem *m, uint64_t gpa, const void *src, size_t len);
int vfe_mem_read(const struct vfe_mem *m, uint64_t gpa, void *dst, size_t len);
int vfe_mem_fill(struct vfe_mem *m, uint64_t gpa, int byte, size_t len);

/* Allocator. Blocks never cross a region boundary, except straddling ones. */
int vfe_mem_alloc(struct vfe_mem *m, uint64_t size, uint64_t align, uint64_t *gpa);
/* Like vfe_mem_alloc in a chosen region. */
int vfe_mem_alloc_in(struct vfe_mem *m, unsigned region, uint64_t size, uint64_t align,
                     uint64_t *gpa);
/* A block that crosses the boundary between two GPA-adjacent regions, half on
 * each side (page aligned around the boundary). -ENOENT without such regions. */
int vfe_mem_alloc_straddle(struct vfe_mem *m, uint64_t size, uint64_t *gpa);
/* The boundary a straddling block at gpa crosses, or 0. */
uint64_t vfe_mem_straddle_boundary(const struct vfe_mem *m, uint64_t gpa, uint64_t len);
int vfe_mem_free_block(struct vfe_mem *m, uint64_t gpa);
uint64_t vfe_mem_allocated(const struct vfe_mem *m);

/* ---- Split virtqueues (ring.c) ----------------------------------------------- */

/* A run of guest memory, for descriptors. */
struct vfe_sg {
    uint64_t gpa;
    uint32_t len;
};

#define VFE_VQ_MAX_SIZE 32768u
/* Descriptors per indirect table the queue preallocates per head. */
#define VFE_VQ_INDIRECT_MAX 64u

struct vfe_vq;

struct vfe_vq_config {
    unsigned index;
    unsigned size;      /* power of two, <= VFE_VQ_MAX_SIZE */
    bool event_idx;     /* VIRTIO_RING_F_EVENT_IDX negotiated */
    bool indirect;      /* preallocate indirect tables */
};

int vfe_vq_new(struct vfe_mem *mem, const struct vfe_vq_config *cfg, struct vfe_vq **out);
void vfe_vq_free(struct vfe_vq *vq);
unsigned vfe_vq_size(const struct vfe_vq *vq);
int vfe_vq_kick_fd(const struct vfe_vq *vq);
int vfe_vq_call_fd(const struct vfe_vq *vq);
/* SET_VRING_ADDR payload: our virtual addresses of the three parts. */
void vfe_vq_addr(const struct vfe_vq *vq, struct vfe_vu_addr *a);
/* Guest-physical addresses of the three parts. */
void vfe_vq_gpas(const struct vfe_vq *vq, uint64_t *desc, uint64_t *avail, uint64_t *used);
/* Free descriptors, and requests in flight. */
unsigned vfe_vq_free_descs(const struct vfe_vq *vq);
unsigned vfe_vq_in_flight(const struct vfe_vq *vq);
/* Set when the backend returned something impossible (bad id, bad length). */
bool vfe_vq_broken(const struct vfe_vq *vq);
/* The next avail index (SET_VRING_BASE after a restart). */
uint16_t vfe_vq_avail_idx(const struct vfe_vq *vq);
/* Forget every request in flight and start over at index base (after
 * GET_VRING_BASE). */
void vfe_vq_reset(struct vfe_vq *vq, uint16_t base);

/*
 * Adds a request: out[] device-readable, in[] device-writable. indirect: one
 * descriptor pointing at a table of all of them. -ENOSPC when the ring has no
 * room, -EINVAL on empty/oversized lists. Does not notify: see vfe_vq_kick().
 */
int vfe_vq_add(struct vfe_vq *vq, const struct vfe_sg *out, unsigned nout,
               const struct vfe_sg *in, unsigned nin, bool indirect, void *token);
/* Publishes added requests and kicks if the backend wants it (EVENT_IDX /
 * NO_NOTIFY). Returns whether it kicked. force: kick regardless. */
bool vfe_vq_kick(struct vfe_vq *vq, bool force);
/* Takes one completion: its token and the used length. 0, -EAGAIN when none,
 * -EPROTO when the backend published a bad entry (the queue is then broken). */
int vfe_vq_get_used(struct vfe_vq *vq, void **token, uint32_t *len);
/* Arms the call notification and waits for it (or for a completion already
 * there). 0, -ETIMEDOUT. timeout_ms < 0: forever. */
int vfe_vq_wait(struct vfe_vq *vq, int timeout_ms);
/* Before vfe_vq_wait() sleeps, it looks for the call notification for up to
 * ns (0: sleeps at once): the frontend side of halt polling. */
void vfe_vq_set_halt_poll(struct vfe_vq *vq, uint64_t ns);
/* Suppress call notifications (polling mode). */
void vfe_vq_disable_cb(struct vfe_vq *vq);

/* Raw access for hostile tests: the descriptor table, writes to any slot, and
 * publishing any head id (nothing checked, nothing tracked). */
struct vring_desc;
struct vring_desc *vfe_vq_raw_desc(struct vfe_vq *vq);
void vfe_vq_raw_set_desc(struct vfe_vq *vq, unsigned i, uint64_t addr, uint32_t len,
                         uint16_t flags, uint16_t next);
void vfe_vq_raw_publish(struct vfe_vq *vq, uint16_t head);
/* Sets avail->idx to any value (e.g. far ahead of what was published). */
void vfe_vq_raw_set_avail_idx(struct vfe_vq *vq, uint16_t idx);
uint16_t vfe_vq_raw_used_idx(const struct vfe_vq *vq);
void vfe_vq_raw_used_elem(const struct vfe_vq *vq, uint16_t slot, uint32_t *id, uint32_t *len);
void vfe_vq_raw_kick(struct vfe_vq *vq);
/* Waits until used->idx differs from `from` (draining call notifications).
 * 0, or -ETIMEDOUT; timeout_ms < 0: forever. */
int vfe_vq_raw_wait_used(struct vfe_vq *vq, uint16_t from, int timeout_ms);

/* ---- The device (dev.c) ------------------------------------------------------- */

/*
 * Device lifecycle (asserted in debug builds):
 *
 *   NEW --vfe_dev_connect--> OWNED --vfe_dev_start--> RUNNING
 *                              ^                         |
 *                              +--vfe_dev_stop / reset---+
 *                              (vfe_dev_reset also from OWNED)
 *   any --vfe_dev_close--> (freed)
 *
 * connect: GET_FEATURES, GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES,
 *   GET_QUEUE_NUM, SET_BACKEND_REQ_FD, SET_OWNER (QEMU's order).
 * start: SET_FEATURES, SET_MEM_TABLE (8 + 32 bytes per region, one fd each),
 *   per queue SET_VRING_NUM, SET_VRING_BASE, SET_VRING_ADDR, SET_VRING_KICK,
 *   SET_VRING_CALL (SET_VRING_ERR), then SET_VRING_ENABLE 1 on each.
 * stop: SET_VRING_ENABLE 0 on each queue, then GET_VRING_BASE on each (the
 *   queues keep their memory; start again resumes at the returned indices).
 * reset: stop, then RESET_DEVICE (negotiated when offered) or, from a backend
 *   without it, the deprecated RESET_OWNER (QEMU 7.2's fallback).
 * With CONFIGURE_MEM_SLOTS (asked for in protocol_features and offered), as
 *   QEMU 11.1: GET_MAX_MEM_SLOTS after GET_QUEUE_NUM, and guest memory goes
 *   region by region: the first start sends ADD_MEM_REG per region where
 *   SET_MEM_TABLE would go, later starts only what changed since (REM_MEM_REG
 *   of regions removed meanwhile, then ADD_MEM_REG of new ones); while the
 *   device runs, vfe_dev_add_region / vfe_dev_remove_region send theirs at
 *   once (QEMU's memory listener commits only on a started device).
 * SET_VRING_ENABLE is sent only with VHOST_USER_F_PROTOCOL_FEATURES acked.
 * With REPLY_ACK every request without a reply of its own carries NEED_REPLY
 * (the spec allows it on any; QEMU sets it on fewer) and its ack is checked.
 */
struct vfe_dev_config {
    struct vfe_conn_config conn;
    struct vfe_mem_config mem;    /* nregions 0: default layout */
    unsigned request_queues;      /* 0: 1 */
    unsigned queue_size;          /* 0: 128 */
    uint64_t features;            /* virtio bits to ask for, masked by the offer;
                                     0: VERSION_1 | INDIRECT_DESC | EVENT_IDX */
    uint64_t protocol_features;   /* wanted, masked by the offer; 0: MQ |
                                     REPLY_ACK | BACKEND_REQ | BACKEND_SEND_FD |
                                     RESET_DEVICE */
    bool no_backend_channel;      /* skip SET_BACKEND_REQ_FD */
    bool send_vring_err;          /* also SET_VRING_ERR */
    vfe_backend_req_fn backend_req;
    vfe_backend_post_fn backend_post; /* may be NULL */
    void *backend_req_opaque;
};

struct vfe_dev;

/* Opens the connection and negotiates (NEW -> OWNED). */
int vfe_dev_connect(const struct vfe_dev_config *cfg, struct vfe_dev **out);
int vfe_dev_start(struct vfe_dev *d);
int vfe_dev_stop(struct vfe_dev *d);
/* A guest driver reset: stop if running, then RESET_DEVICE (when negotiated)
 * or the deprecated RESET_OWNER; the rings restart at index 0. The device stays OWNED;
 * vfe_dev_start sends the whole start sequence again (and a FUSE client sends
 * INIT again, as a rebooted guest would). */
int vfe_dev_reset(struct vfe_dev *d);
/*
 * The backend went away and a new one listens (a daemon restarted from a
 * saved state): what a VMM that reconnects does. The old connection is
 * dropped without a message, a new one is made with conn (the socket of the
 * new backend), negotiated again, and the device is OWNED; vfe_dev_start then
 * sends the whole start sequence with each ring's base at its avail index, so
 * the guest side (rings, memory, a vfe_fuse on them) goes on where it was.
 * Nothing may be in flight. 0 or -errno (the device is then unusable).
 */
int vfe_dev_reconnect(struct vfe_dev *d, const struct vfe_conn_config *conn);
void vfe_dev_close(struct vfe_dev *d);
/* vfe_dev_close, then vfe_conn_close_status's report on the backend. */
int vfe_dev_close_status(struct vfe_dev *d, int *status, bool *on_its_own);

struct vfe_conn *vfe_dev_conn(struct vfe_dev *d);
struct vfe_mem *vfe_dev_mem(struct vfe_dev *d);
/* Queue i: 0 hiprio, 1..request_queues. */
struct vfe_vq *vfe_dev_vq(struct vfe_dev *d, unsigned i);
unsigned vfe_dev_nqueues(const struct vfe_dev *d);
uint64_t vfe_dev_features(const struct vfe_dev *d);          /* negotiated */
uint64_t vfe_dev_offered_features(const struct vfe_dev *d);
uint64_t vfe_dev_protocol_features(const struct vfe_dev *d); /* negotiated */
uint64_t vfe_dev_backend_queues(const struct vfe_dev *d);    /* GET_QUEUE_NUM */

/*
 * Dirty page logging as QEMU's live migration sets it up: a memfd log of one
 * bit per 4 KiB guest page covering all guest memory (SET_LOG_BASE with its
 * fd; LOG_SHMFD must be negotiated: ask for it in protocol_features),
 * VHOST_F_LOG_ALL acked again with SET_FEATURES, and on a RUNNING device
 * every ring's VHOST_VRING_F_LOG with the used ring's guest address
 * (SET_VRING_ADDR). Stop: SET_FEATURES without it and the rings' flag off;
 * the log stays readable. -EOPNOTSUPP when the backend offers no LOG_ALL or
 * LOG_SHMFD was not negotiated.
 */
int vfe_dev_log_start(struct vfe_dev *d);
int vfe_dev_log_stop(struct vfe_dev *d);
/* Whether the page holding gpa is marked dirty; false without a log. */
bool vfe_dev_log_test(const struct vfe_dev *d, uint64_t gpa);
/* Pages marked so far (a count over the whole log). */
uint64_t vfe_dev_log_count(const struct vfe_dev *d);
/* Clears every bit, as the frontend's sync does. */
void vfe_dev_log_clear(struct vfe_dev *d);
/*
 * The device state transfer, QEMU's side (SET_DEVICE_STATE_FD over a pipe,
 * then CHECK_DEVICE_STATE). The device must be OWNED (stopped), and
 * VFE_VU_PF_DEVICE_STATE negotiated. save: *buf (g_malloc'd) gets what the
 * backend wrote until it closed its end, at most max bytes. load: writes len
 * bytes and closes. -EIO when the backend's answer to either message says
 * failure (*answer, when not NULL, gets the u64 of the one that failed).
 * A backend that sends its own pipe end back is used, as QEMU does.
 */
int vfe_dev_state_save(struct vfe_dev *d, uint8_t **buf, size_t *len, size_t max,
                       uint64_t *answer);
int vfe_dev_state_load(struct vfe_dev *d, const uint8_t *buf, size_t len, uint64_t *answer);
/*
 * A live migration of the device to another backend, as QEMU does it with the
 * guest memory and the rings moving along: stop the rings (the bases kept),
 * save the state from this backend, connect to the other (to: its connection,
 * e.g. a new backend_cmd on the same shared directory), negotiate the same
 * way, load the state into it, hang up on the first, and start the device on
 * the new connection at the same ring positions. A FUSE client on the device
 * carries on with its node ids and file handles. On failure the device stays
 * with the first backend, stopped (-errno). between (if not NULL) runs after the
 * state left the first backend and before it reaches the second: what the
 * host does to the share meanwhile.
 */
int vfe_dev_migrate(struct vfe_dev *d, const struct vfe_conn_config *to,
                    void (*between)(void *opaque), void *opaque);
/* Raw: sends SET_LOG_BASE for [offset, offset+size) of fd and returns the
 * backend's u64 answer in *answer (hostile tests: sizes and offsets it must
 * refuse). */
int vfe_dev_log_base_raw(struct vfe_dev *d, int fd, uint64_t size, uint64_t offset,
                         uint64_t *answer);

/*
 * Guest memory region by region (CONFIGURE_MEM_SLOTS negotiated; -ENOTSUP
 * otherwise), any thread: a region beside the guest RAM of struct
 * vfe_dev_config.mem (memory hotplug; a DAX window's mapping, vfe_dax does it).
 * fd is the region's (the caller keeps it; it goes with ADD_MEM_REG). Sent at
 * once while the device runs, else at its next start. A region that would
 * make more than VFE_VU_QEMU_MAX_SLOTS is not added (-ENOSPC) and counted as
 * an overflow: QEMU 11.1 aborts there. A refused ADD/REM_MEM_REG (-EIO) is
 * counted as an error; the region is then treated as gone.
 * vfe_dev_remove_region names the region by gpa, size and userspace_addr
 * (REM_MEM_REG carries mmap_offset 0, as QEMU sends it). -ENOENT if unknown.
 */
int vfe_dev_add_region(struct vfe_dev *d, const struct vfe_vu_region *r, int fd);
int vfe_dev_remove_region(struct vfe_dev *d, const struct vfe_vu_region *r);

struct vfe_dev_region_stats {
    unsigned regions;        /* live: guest RAM and added ones, sent or not */
    uint64_t max_mem_slots;  /* GET_MAX_MEM_SLOTS; 0 when not negotiated */
    uint64_t adds, removes;  /* ADD_MEM_REG / REM_MEM_REG the backend acked */
    uint64_t errors;         /* ... it refused */
    uint64_t overflows;      /* regions past VFE_VU_QEMU_MAX_SLOTS (QEMU aborts) */
};
void vfe_dev_get_region_stats(struct vfe_dev *d, struct vfe_dev_region_stats *st);

/* ---- FUSE client (fuse.c) ----------------------------------------------------- */

/*
 * One FUSE request and, after completion, its reply. Filled by the caller,
 * owned by the caller; it must stay valid until completed.
 * Device-readable part: [fuse_in_header | arg | name\0 | name2\0 | extra] in the
 * slot's buffer, then in_data[] (guest memory, e.g. WRITE payload).
 * Device-writable part: [fuse_out_header | out_arg] in the slot's buffer, then
 * out_data[] (guest memory, e.g. READ / READDIR payload).
 */
struct vfe_fuse_op {
    uint32_t opcode;
    uint64_t nodeid;
    const void *arg;
    uint32_t arg_len;
    const char *name;
    const char *name2;
    const void *extra;
    uint32_t extra_len;
    uint16_t total_extlen;    /* the header's, in 8-byte units (extensions end extra) */
    const struct vfe_sg *in_data;
    unsigned in_data_cnt;
    void *out_arg;
    uint32_t out_arg_len;
    const struct vfe_sg *out_data;
    unsigned out_data_cnt;
    unsigned flags;           /* VFE_OP_* */
    /* Filled on completion. */
    bool done;
    int32_t error;            /* 0 or the reply's -errno; -EPROTO on a bad reply */
    uint32_t reply_len;       /* bytes the backend wrote, header included */
    uint32_t out_arg_got;     /* bytes of out_arg filled */
    uint32_t data_len;        /* bytes in out_data */
    uint64_t unique;
    uint64_t t_submit_ns;     /* CLOCK_MONOTONIC */
    uint64_t t_done_ns;
    void *user;
};

#define VFE_OP_INDIRECT 0x1u   /* submit as one indirect descriptor */
#define VFE_OP_NO_REPLY 0x2u   /* FORGET / BATCH_FORGET: no writable part */

struct vfe_fuse_config {
    unsigned depth;           /* requests in flight per queue; 0: 16 */
    uint32_t proto_minor;     /* 31..41; 0: 41 */
    uint64_t init_flags;      /* offered in INIT (flags | flags2 << 32) */
    uint32_t max_readahead;   /* 0: 128 KiB */
    int timeout_ms;           /* per synchronous call; 0: 10 s */
    uint32_t uid, gid, pid;   /* in every header */
};

struct vfe_fuse;

/* The device must be RUNNING. */
int vfe_fuse_new(struct vfe_dev *d, const struct vfe_fuse_config *cfg, struct vfe_fuse **out);
/* The same over bare queues (vqs[0] hiprio), e.g. with the device side played
 * by a test. */
int vfe_fuse_new_on(struct vfe_mem *mem, struct vfe_vq *const *vqs, unsigned nq,
                    const struct vfe_fuse_config *cfg, struct vfe_fuse **out);
void vfe_fuse_free(struct vfe_fuse *f);
/* The caller ids put in the headers of requests submitted from now on. */
void vfe_fuse_set_ids(struct vfe_fuse *f, uint32_t uid, uint32_t gid);

/* Pipelined: queue q (0 hiprio, 1.. request). -EAGAIN when all slots are busy.
 * vfe_fuse_submit does not kick; vfe_fuse_kick publishes. */
int vfe_fuse_submit(struct vfe_fuse *f, unsigned q, struct vfe_fuse_op *op);
void vfe_fuse_kick(struct vfe_fuse *f, unsigned q);
/* Collects up to max completed ops (waiting up to timeout_ms for the first
 * one; 0: no wait). Returns the count or -errno (-ETIMEDOUT, -EPROTO). */
int vfe_fuse_reap(struct vfe_fuse *f, unsigned q, struct vfe_fuse_op **done, unsigned max,
                  int timeout_ms);
unsigned vfe_fuse_in_flight(const struct vfe_fuse *f, unsigned q);
/* Slots per queue (the most requests one queue can have in flight). */
unsigned vfe_fuse_depth(const struct vfe_fuse *f);
/* Drops the caller's ops on queue q: completed ones not yet reaped are
 * forgotten, in-flight ones keep their slot until the backend answers (the
 * reply is then discarded). The ops' memory may be freed afterwards. */
void vfe_fuse_abandon_all(struct vfe_fuse *f, unsigned q);
/* Synchronous: submit, kick, wait. Returns op->error (or a transport error);
 * on -ETIMEDOUT the request is abandoned as by vfe_fuse_abandon_all. */
int vfe_fuse_call(struct vfe_fuse *f, unsigned q, struct vfe_fuse_op *op);

/* What INIT negotiated. */
struct vfe_fuse_init_result {
    uint32_t major, minor;
    uint64_t flags;           /* flags | flags2 << 32 */
    uint32_t max_write;
    uint32_t max_readahead;
    uint16_t max_pages;
    uint16_t map_alignment;
    uint32_t time_gran;
    uint16_t max_background;
    uint16_t congestion_threshold;
};

/* Helpers on the default request queue (vfe_fuse_set_queue; initially 1). */
void vfe_fuse_set_queue(struct vfe_fuse *f, unsigned q);
int vfe_fuse_init(struct vfe_fuse *f, struct vfe_fuse_init_result *res);
int vfe_fuse_lookup(struct vfe_fuse *f, uint64_t parent, const char *name,
                    struct fuse_entry_out *out);
/* Walks a '/'-separated path from the root. */
int vfe_fuse_lookup_path(struct vfe_fuse *f, const char *path, struct fuse_entry_out *out);
int vfe_fuse_getattr(struct vfe_fuse *f, uint64_t nodeid, struct fuse_attr_out *out);
int vfe_fuse_open(struct vfe_fuse *f, uint64_t nodeid, uint32_t flags, struct fuse_open_out *out);
int vfe_fuse_opendir(struct vfe_fuse *f, uint64_t nodeid, struct fuse_open_out *out);
int vfe_fuse_create(struct vfe_fuse *f, uint64_t parent, const char *name, uint32_t flags,
                    uint32_t mode, struct fuse_entry_out *entry, struct fuse_open_out *open);
int vfe_fuse_mkdir(struct vfe_fuse *f, uint64_t parent, const char *name, uint32_t mode,
                   struct fuse_entry_out *out);
int vfe_fuse_unlink(struct vfe_fuse *f, uint64_t parent, const char *name);
int vfe_fuse_rmdir(struct vfe_fuse *f, uint64_t parent, const char *name);
/* READ into guest memory (data: sg list); returns bytes read or -errno. */
ssize_t vfe_fuse_read_sg(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off,
                         const struct vfe_sg *data, unsigned cnt, bool indirect);
ssize_t vfe_fuse_write_sg(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off,
                          const struct vfe_sg *data, unsigned cnt, bool indirect);
/* Convenience: through a bounce buffer in guest memory. */
ssize_t vfe_fuse_read(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off, void *buf,
                      size_t len);
ssize_t vfe_fuse_write(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t off,
                       const void *buf, size_t len);
int vfe_fuse_release(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint32_t flags);
int vfe_fuse_releasedir(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh);
int vfe_fuse_fsync(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, bool datasync);
int vfe_fuse_statfs(struct vfe_fuse *f, uint64_t nodeid, struct fuse_statfs_out *out);
/* DAX: map [foffset, foffset+len) of the file at window offset moffset
 * (flags FUSE_SETUPMAPPING_FLAG_READ/WRITE; Linux sends fh = ~0). */
int vfe_fuse_setupmapping(struct vfe_fuse *f, uint64_t nodeid, uint64_t fh, uint64_t foffset,
                          uint64_t len, uint64_t flags, uint64_t moffset);
/* DAX: unmap count {moffset, len} ranges in one request. */
int vfe_fuse_removemapping(struct vfe_fuse *f, uint64_t nodeid, const uint64_t (*ranges)[2],
                           uint32_t count);
/* FORGET on the hiprio queue (no reply; returns once the backend used it). */
int vfe_fuse_forget(struct vfe_fuse *f, uint64_t nodeid, uint64_t nlookup);

/* READDIR: calls fn for each entry of the directory (opened here). */
typedef void (*vfe_dirent_fn)(void *opaque, const char *name, size_t namelen, uint64_t ino,
                              uint32_t type, uint64_t off);
int vfe_fuse_readdir_all(struct vfe_fuse *f, uint64_t nodeid, vfe_dirent_fn fn, void *opaque);
/* Parses a READDIR reply buffer; returns entries seen or -EPROTO. Pure. */
int vfe_fuse_parse_dirents(const void *buf, size_t len, vfe_dirent_fn fn, void *opaque,
                           uint64_t *last_off);

/* ---- DAX window (vfe_dax.c) --------------------------------------------------- */

/*
 * A reserved window the backend maps files into over the backend request
 * channel; pass vfe_dax_handle and the vfe_dax as backend_req /
 * backend_req_opaque in struct vfe_dev_config (and ask for BACKEND_REQ,
 * BACKEND_SEND_FD and REPLY_ACK, plus VFE_VU_PF_SHMEM for the mainline
 * protocol). Rules are enforced strictly: a refused request gets a failure ack
 * and counts in rejects.
 */
enum vfe_dax_proto {
    VFE_DAX_SHMEM,  /* BACKEND_SHMEM_MAP/UNMAP (9/10): no overlap, exact unmap */
    VFE_DAX_LEGACY, /* SLAVE_FS_MAP/UNMAP (6/7): 8 entries, maps replace, ~0 = all */
};

struct vfe_dax_stats {
    uint64_t maps, unmaps, rejects;
    unsigned mappings; /* live mappings now */
};

struct vfe_dax;

/* size: page multiple. */
int vfe_dax_new(uint64_t size, enum vfe_dax_proto proto, struct vfe_dax **out);
void vfe_dax_free(struct vfe_dax *x);
void *vfe_dax_window(const struct vfe_dax *x);
uint64_t vfe_dax_size(const struct vfe_dax *x);
/* Shmem protocol: also map ranges past the end of their file (a VMM that allows
 * it; QEMU 11.1 does not, and neither does a new window). */
void vfe_dax_allow_past_eof(struct vfe_dax *x, bool allow);
/* A vfe_backend_req_fn: 0 (success) or 1 (refused). */
uint64_t vfe_dax_handle(void *opaque, const struct vfe_msg *m, const int *fds, unsigned nfds);
/* Is all of [off, off+len) mapped right now? */
bool vfe_dax_is_mapped(struct vfe_dax *x, uint64_t off, uint64_t len);
void vfe_dax_get_stats(struct vfe_dax *x, struct vfe_dax_stats *st);
/* Drops every mapping (a device reset; with regions reported, their
 * REM_MEM_REGs go with the device's next start, as QEMU's). */
void vfe_dax_reset(struct vfe_dax *x);
/*
 * Reports mappings to the backend as guest memory, as QEMU 11.1 does (shmem
 * protocol; d must have CONFIGURE_MEM_SLOTS negotiated; pass vfe_dax_post as
 * the device's backend_post): BACKEND_SHMEM_MAP is answered with the range
 * still showing zeros to the guest (stores there are lost), then, after
 * commit_delay_us, the file appears in the window and ADD_MEM_REG tells the
 * backend (gpa window_gpa + shm_offset, userspace_addr the range in our window,
 * mmap_offset fd_offset, the file's fd). BACKEND_SHMEM_UNMAP is answered, then
 * the range goes and REM_MEM_REG follows. A backend that answers the guest's
 * SETUPMAPPING on the map's reply alone lets it see the zeros: QEMU 11.1's
 * commit takes 1-2 ms under TCG. vfe_dax_is_mapped is true from the commit on.
 */
void vfe_dax_report_regions(struct vfe_dax *x, struct vfe_dev *d, uint64_t window_gpa,
                            unsigned commit_delay_us);
void vfe_dax_post(void *opaque, const struct vfe_msg *m, uint64_t result);
/*
 * With vfe_dax_report_regions: an unmap's range goes, and its REM_MEM_REG is
 * sent, delay_us after the reply (0, the default: at once). The channel thread
 * sleeps meanwhile, so the backend's next map is read after the REM_MEM_REG, as
 * QEMU 11.1 (one thread) reads it; a slow commit there is what this stands for.
 */
void vfe_dax_delay_removals(struct vfe_dax *x, unsigned delay_us);
/* Guest-physical address of window offset off (vfe_dax_report_regions). */
uint64_t vfe_dax_gpa(const struct vfe_dax *x, uint64_t off);
/* GET_SHMEM_CONFIG: the size of shared memory region 0 (the window) the
 * backend asks for; -EPROTO on a malformed reply. */
int vfe_conn_get_shmem_window(struct vfe_conn *c, uint64_t *size);

/* ---- Emulated guest DAX client (daxguest.c) ------------------------------------ */

/*
 * What a Linux guest's fs/fuse/dax.c does with a DAX window, as a library: the
 * window is cut into 2 MiB ranges; a free list and a busy list, both in FIFO
 * order (a range joins the busy list when it is set up, and use does not move
 * it); when fewer than 20% of the ranges are free a background worker reclaims
 * up to 10 busy ranges per run from the head of the busy list (skipping ranges
 * in use) and runs again 1 ms later while still below; a read or write that
 * finds nothing free reclaims a range of the same file inline (lowest file
 * offset first, REMOVEMAPPING of one entry), or waits for the worker when the
 * file has none. Files whose LOOKUP/GETATTR attributes carry FUSE_ATTR_DAX are
 * read and written with memcpy through the window (SETUPMAPPING of the whole
 * 2 MiB range on a miss, with READ, plus WRITE when writing; the same range set
 * up again READ|WRITE to upgrade); others, and writes that extend a file, go
 * through FUSE READ/WRITE. Evicting a file removes its ranges in REMOVEMAPPING
 * requests of up to 256 entries.
 *
 * VFE_DAXGUEST_LRU is the same guest with recency: every access moves its range
 * to the tail of the busy list, so the worker reclaims the least recently used
 * ranges, and a request that finds nothing free reclaims the least recently
 * used idle range of any file instead of one of its own file's.
 *
 * Threads: any number of threads may read, write and evict concurrently, each
 * naming the request queue it uses; a file must not be read or written while
 * it is evicted, nor after.
 */
#define VFE_DAXGUEST_RANGE (2ull << 20)  /* FUSE_DAX_SZ: 1 << FUSE_DAX_SHIFT (21) */
#define VFE_DAXGUEST_RECLAIM_PCT 20u     /* FUSE_DAX_RECLAIM_THRESHOLD */
#define VFE_DAXGUEST_RECLAIM_CHUNK 10u   /* FUSE_DAX_RECLAIM_CHUNK */
#define VFE_DAXGUEST_REMOVE_MAX 256u     /* FUSE_REMOVEMAPPING_MAX_ENTRY (4 KiB pages) */

enum vfe_daxguest_model {
    VFE_DAXGUEST_LINUX, /* fs/fuse/dax.c: reclaim in setup (FIFO) order */
    VFE_DAXGUEST_LRU,   /* reclaim in recency order, inline reclaim from any file */
};

enum vfe_daxguest_bg {
    VFE_DAXGUEST_BG_THREAD, /* the reclaim worker is a thread, as in the kernel */
    VFE_DAXGUEST_BG_MANUAL, /* kicks are recorded; vfe_daxguest_reclaim_run runs a
                               pass (also run in place of waiting for a free range) */
};

/* What the guest sends to the device; q is the calling thread's request queue.
 * 0 / bytes done, or -errno. */
struct vfe_daxguest_ops {
    int (*setupmapping)(void *opaque, unsigned q, uint64_t nodeid, uint64_t foffset,
                        uint64_t len, uint64_t flags, uint64_t moffset);
    int (*removemapping)(void *opaque, unsigned q, uint64_t nodeid,
                         const struct fuse_removemapping_one *e, uint32_t count);
    ssize_t (*read)(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                    void *buf, uint32_t len);
    ssize_t (*write)(void *opaque, unsigned q, uint64_t nodeid, uint64_t fh, uint64_t off,
                     const void *buf, uint32_t len);
};

struct vfe_daxguest_config {
    enum vfe_daxguest_model model;
    enum vfe_daxguest_bg bg;
    void *window;              /* NULL: no window, every file takes the plain path */
    uint64_t window_size;      /* ranges: window_size / 2 MiB */
    unsigned bg_queue;         /* the request queue the reclaim worker uses */
    const struct vfe_daxguest_ops *ops;
    void *opaque;
};

struct vfe_daxguest_stats {
    uint64_t dax_reads, dax_writes;     /* calls served through the window */
    uint64_t plain_reads, plain_writes; /* calls through FUSE READ/WRITE */
    uint64_t hits;                      /* 2 MiB chunks found mapped */
    uint64_t setups, upgrades;          /* SETUPMAPPING requests (new / read->write) */
    uint64_t removes, remove_requests;  /* ranges removed, REMOVEMAPPING requests */
    uint64_t inline_reclaims, bg_reclaims, bg_runs, bg_kicks;
    uint64_t waits;                     /* waits for the worker to free a range */
    uint64_t setup_errors, remove_errors;
    unsigned nranges, free_ranges, busy_ranges;
};

struct vfe_daxguest;
struct vfe_daxguest_file;

int vfe_daxguest_new(const struct vfe_daxguest_config *cfg, struct vfe_daxguest **out);
/* Stops the worker; sends nothing (the device is reset or gone). Files are freed. */
void vfe_daxguest_free(struct vfe_daxguest *g);
/* A file as LOOKUP or GETATTR described it (attr->flags & FUSE_ATTR_DAX chooses the
 * path, and only when the guest has a window); fh from OPEN for the plain path. */
struct vfe_daxguest_file *vfe_daxguest_file_add(struct vfe_daxguest *g, uint64_t nodeid,
                                                uint64_t fh, const struct fuse_attr *attr);
bool vfe_daxguest_file_dax(const struct vfe_daxguest_file *f);
uint64_t vfe_daxguest_file_size(const struct vfe_daxguest_file *f);
uint64_t vfe_daxguest_file_nodeid(const struct vfe_daxguest_file *f);
uint64_t vfe_daxguest_file_fh(const struct vfe_daxguest_file *f);
/* Inode eviction: REMOVEMAPPING of every range of f (batches of up to 256), the
 * ranges back to the free list, f freed. 0 or the first -errno from the device. */
int vfe_daxguest_evict(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f);
/* Like read(2)/write(2) at off (short at end of file); -errno. */
ssize_t vfe_daxguest_read(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                          uint64_t off, void *buf, size_t len);
ssize_t vfe_daxguest_write(struct vfe_daxguest *g, unsigned q, struct vfe_daxguest_file *f,
                           uint64_t off, const void *buf, size_t len);
void vfe_daxguest_get_stats(struct vfe_daxguest *g, struct vfe_daxguest_stats *st);
/* VFE_DAXGUEST_BG_MANUAL: whether the worker was kicked since the last pass, and
 * one worker pass (returns the ranges it freed). */
bool vfe_daxguest_reclaim_kicked(struct vfe_daxguest *g);
int vfe_daxguest_reclaim_run(struct vfe_daxguest *g);
/* Inspection for tests: window offsets of the busy list from its head (the next
 * victim first), the free list likewise; and where f's range holding file
 * offset off is mapped (-1 when it is not). */
unsigned vfe_daxguest_busy_list(struct vfe_daxguest *g, uint64_t *moffsets, unsigned max);
unsigned vfe_daxguest_free_list(struct vfe_daxguest *g, uint64_t *moffsets, unsigned max);
int64_t vfe_daxguest_mapped_at(struct vfe_daxguest_file *f, uint64_t off, bool *writable);

/* The device side over a vfe_fuse: the ops above as FUSE requests on request
 * queue q (1..nqueues), calls on one queue serialized, a bounce buffer in guest
 * memory per queue. Pass &vfe_daxguest_fuse_ops with the vfe_daxguest_fuse. */
struct vfe_daxguest_fuse;
extern const struct vfe_daxguest_ops vfe_daxguest_fuse_ops;
int vfe_daxguest_fuse_new(struct vfe_fuse *fuse, struct vfe_mem *mem, unsigned nqueues,
                          uint32_t max_io, struct vfe_daxguest_fuse **out);
void vfe_daxguest_fuse_free(struct vfe_daxguest_fuse *df);
/* LOOKUP name in parent and OPEN it (flags), on queue q; adds the file to g. */
int vfe_daxguest_open(struct vfe_daxguest *g, struct vfe_daxguest_fuse *df, unsigned q,
                      uint64_t parent, const char *name, uint32_t flags,
                      struct vfe_daxguest_file **out);
/* RELEASE and FORGET of a file opened with vfe_daxguest_open, after its eviction
 * (nodeid and fh as it had). */
int vfe_daxguest_close(struct vfe_daxguest_fuse *df, unsigned q, uint64_t nodeid, uint64_t fh);
/* FSYNC of an open file on queue q. */
int vfe_daxguest_fsync(struct vfe_daxguest_fuse *df, unsigned q, uint64_t nodeid, uint64_t fh);
/* GETATTR on queue q: a guest looking at a file again (its attributes timed out). */
int vfe_daxguest_getattr(struct vfe_daxguest_fuse *df, unsigned q, uint64_t nodeid,
                         struct fuse_attr_out *out);

/* ---- Benchmark loop (bench.c) -------------------------------------------------- */

/* Latency histogram: exact below 16 ns, then 16 buckets per power of two
 * (2^4 .. 2^63: 60 rows, plus the exact row). */
#define VFE_HIST_BUCKETS (61u * 16u)

struct vfe_hist {
    uint64_t count[VFE_HIST_BUCKETS];
    uint64_t total;
    uint64_t sum;
    uint64_t min, max;
};

unsigned vfe_hist_bucket(uint64_t v);
uint64_t vfe_hist_bucket_low(unsigned bucket);
void vfe_hist_add(struct vfe_hist *h, uint64_t v);
void vfe_hist_merge(struct vfe_hist *dst, const struct vfe_hist *src);
/* The value at percentile pct (0..100], to bucket precision (< 1/16 relative). */
uint64_t vfe_hist_percentile(const struct vfe_hist *h, double pct);

enum vfe_bench_op {
    VFE_BENCH_READ,
    VFE_BENCH_WRITE,
    VFE_BENCH_GETATTR,
    VFE_BENCH_RW,             /* READ or WRITE per request, read_pct % reads */
    VFE_BENCH_LOOKUP,         /* LOOKUP of names[] in parent */
    VFE_BENCH_CREATE,         /* CREATE of fresh names in parent, each followed by
                                 its RELEASE and a FORGET (not counted as ops), and
                                 with unlink by an UNLINK of the name (counted) */
};

struct vfe_bench_config {
    enum vfe_bench_op op;
    unsigned queues;          /* request queues 1..queues, one thread each */
    unsigned depth;           /* requests in flight per queue: <= the fuse depth, and
                                 2 * depth (direct) or depth (indirect) <= queue size */
    uint32_t block;           /* bytes per READ/WRITE */
    uint64_t nodeid, fh;      /* an open file (or any node for GETATTR) */
    uint64_t file_size;       /* offsets stay in [0, file_size) */
    bool random;              /* random block offsets; else sequential per queue */
    bool indirect;            /* submit as indirect descriptors */
    uint64_t duration_ns;     /* stop starting requests after this long, or */
    uint64_t max_ops;         /* after this many (whichever is set / first) */
    /* Optional: several files. nfiles > 0 replaces nodeid/fh (READ, WRITE, RW,
     * GETATTR): random requests pick a random file, sequential ones keep to file
     * (queue - 1) % nfiles. */
    const uint64_t *nodeids;
    const uint64_t *fhs;      /* NULL for GETATTR */
    unsigned nfiles;
    unsigned read_pct;        /* VFE_BENCH_RW: 0..100 */
    /* LOOKUP and CREATE: the directory. LOOKUP picks names[] (random or in turn);
     * CREATE makes "<name_prefix>q<queue>-<n>" with O_CREAT | O_EXCL. */
    uint64_t parent;
    const char *const *names;
    unsigned nnames;
    const char *name_prefix;
    /* CREATE: parents[queue - 1] instead of parent, a directory per queue (NULL:
     * every queue creates in parent). */
    const uint64_t *parents;
    bool unlink;              /* CREATE: UNLINK each file after its FORGET */
};

struct vfe_bench_result {
    uint64_t ops;             /* completed */
    uint64_t errors;          /* completed with an error reply */
    int32_t first_error;      /* the first error reply's -errno, 0 when none */
    uint64_t bytes;
    uint64_t elapsed_ns;
    struct vfe_hist latency;  /* submit to reap, per request */
};

/*
 * Runs the loop on f's request queues (INIT done). Returns 0, or -errno when a
 * queue failed (-EPROTO, -ETIMEDOUT); that queue's requests still in flight are
 * abandoned (vfe_fuse_abandon_all), so f stays safe to use and free.
 */
int vfe_bench_run(struct vfe_fuse *f, struct vfe_dev *d, const struct vfe_bench_config *cfg,
                  struct vfe_bench_result *res);

#endif
