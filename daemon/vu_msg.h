/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vhost-user messages (prefix vu_): the wire layout (QEMU docs/interop/vhost-user.rst)
 * and a pure validator that checks a message's header, payload size and fd
 * count before anything reads the payload. No I/O here: tests and fuzzers call
 * vu_msg_check() on buffers directly.
 *
 * Every vhost-user request id, feature bit and payload layout the daemon uses is
 * defined here and nowhere else in the daemon, the DAX window's map and unmap
 * requests included (dax/ knows windows and slots, not messages). The in-tree
 * frontend (frontend/vfe.h) keeps its own copy on purpose: it is an independent
 * peer, so a misreading of the specification on one side shows as a failure
 * against the other. Payload structs are in the host's byte order, as the rest
 * of this file: vufsd runs on little-endian hosts, as vhost-user's byte order is.
 */
#ifndef VUFSD_VU_MSG_H
#define VUFSD_VU_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Front-end -> back-end requests. */
enum vu_request {
    VU_GET_FEATURES = 1,
    VU_SET_FEATURES = 2,
    VU_SET_OWNER = 3,
    VU_RESET_OWNER = 4,
    VU_SET_MEM_TABLE = 5,
    VU_SET_LOG_BASE = 6,
    VU_SET_LOG_FD = 7,
    VU_SET_VRING_NUM = 8,
    VU_SET_VRING_ADDR = 9,
    VU_SET_VRING_BASE = 10,
    VU_GET_VRING_BASE = 11,
    VU_SET_VRING_KICK = 12,
    VU_SET_VRING_CALL = 13,
    VU_SET_VRING_ERR = 14,
    VU_GET_PROTOCOL_FEATURES = 15,
    VU_SET_PROTOCOL_FEATURES = 16,
    VU_GET_QUEUE_NUM = 17,
    VU_SET_VRING_ENABLE = 18,
    VU_SET_BACKEND_REQ_FD = 21,
    VU_GET_CONFIG = 24,
    VU_SET_CONFIG = 25,
    VU_RESET_DEVICE = 34,
    VU_GET_MAX_MEM_SLOTS = 36,
    VU_ADD_MEM_REG = 37,
    VU_REM_MEM_REG = 38,
    VU_SET_STATUS = 39,
    VU_GET_STATUS = 40,
    VU_SET_DEVICE_STATE_FD = 42,
    VU_CHECK_DEVICE_STATE = 43,
    VU_GET_SHMEM_CONFIG = 44,
    VU_REQUEST_MAX = 64, /* ids at or above are unknown */
};

/* Back-end -> front-end requests, on the backend request channel: the DAX
 * window's maps, in the mainline protocol and in the virtio-fs branch's (ids 6
 * and 7 mean other things in mainline: --dax-protocol legacy only). */
enum vu_backend_request {
    VU_BACKEND_FS_MAP = 6,       /* SLAVE_FS_MAP (legacy), fd attached */
    VU_BACKEND_FS_UNMAP = 7,     /* SLAVE_FS_UNMAP (legacy) */
    VU_BACKEND_SHMEM_MAP = 9,    /* fd attached */
    VU_BACKEND_SHMEM_UNMAP = 10,
};

/* Header flags. */
#define VU_VERSION         0x1u
#define VU_VERSION_MASK    0x3u
#define VU_FLAG_REPLY      0x4u
#define VU_FLAG_NEED_REPLY 0x8u

/* Virtio / vhost-user feature bits we use. */
#define VU_F_LOG_ALL                      26 /* VHOST_F_LOG_ALL: log every write */
#define VU_F_PROTOCOL_FEATURES            30
#define VU_PROTOCOL_F_MQ                  0
#define VU_PROTOCOL_F_LOG_SHMFD           1
#define VU_PROTOCOL_F_REPLY_ACK           3
#define VU_PROTOCOL_F_BACKEND_REQ         5
#define VU_PROTOCOL_F_BACKEND_SEND_FD     10
#define VU_PROTOCOL_F_CONFIG              9
#define VU_PROTOCOL_F_RESET_DEVICE        13
#define VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS 15
#define VU_PROTOCOL_F_STATUS              16
#define VU_PROTOCOL_F_DEVICE_STATE        19
#define VU_PROTOCOL_F_SHMEM               22

/* The u64 of SET_VRING_KICK/CALL/ERR: queue index in bits 0-7, no fd in bit 8. */
#define VU_VRING_IDX_MASK 0xffu
#define VU_VRING_NOFD     (1u << 8)

/* Most fds one message may carry (SET_MEM_TABLE's regions). */
#define VU_MAX_FDS 8
/* Regions in SET_MEM_TABLE (VHOST_MEMORY_BASELINE_NREGIONS). */
#define VU_MEM_TABLE_REGIONS 8
/* Largest payload we read at all; a larger size means the stream is corrupt. */
#define VU_MAX_PAYLOAD 4096

struct vu_msg_hdr {
    uint32_t request;
    uint32_t flags;
    uint32_t size; /* payload bytes that follow */
} __attribute__((packed));

struct vu_vring_state {
    uint32_t index;
    uint32_t num;
};

/* vu_vring_addr.flags: log the used ring's writes at log_gpa (VHOST_VRING_F_LOG). */
#define VU_VRING_F_LOG 0x1u

struct vu_vring_addr {
    uint32_t index;
    uint32_t flags;
    uint64_t desc_uva;
    uint64_t used_uva;
    uint64_t avail_uva;
    uint64_t log_gpa;
};

struct vu_mem_region {
    uint64_t gpa;
    uint64_t size;
    uint64_t uva;
    uint64_t mmap_offset;
};

struct vu_mem_table {
    uint32_t nregions;
    uint32_t padding;
    struct vu_mem_region regions[VU_MEM_TABLE_REGIONS];
};

struct vu_mem_reg {
    uint64_t padding;
    struct vu_mem_region region;
};

/* SET_LOG_BASE (with VHOST_USER_PROTOCOL_F_LOG_SHMFD): the log is [offset, offset+size) of the fd. */
struct vu_log {
    uint64_t mmap_size;
    uint64_t mmap_offset;
};

/* SET_DEVICE_STATE_FD: which way the back-end's state goes, and when. */
#define VU_STATE_DIR_SAVE    0u /* back-end -> front-end (migration source) */
#define VU_STATE_DIR_LOAD    1u /* front-end -> back-end (destination) */
#define VU_STATE_PHASE_STOPPED 0u /* every ring stopped: the only phase defined */
struct vu_device_state {
    uint32_t direction;
    uint32_t phase;
};
/* SET_DEVICE_STATE_FD's reply: an error in bits 0-7; bit 8 says no fd comes with it. */
#define VU_STATE_REPLY_NOFD (1u << 8)

/* GET_CONFIG / SET_CONFIG: a window of the virtio config space. */
#define VU_CONFIG_HDR_SIZE 12u
#define VU_CONFIG_MAX      256u /* VHOST_USER_MAX_CONFIG_SIZE */
#define VU_CONFIG_F_WRITABLE  0u
#define VU_CONFIG_F_MIGRATION 1u
struct vu_config {
    uint32_t offset;
    uint32_t size;
    uint32_t flags;
    uint8_t region[VU_CONFIG_MAX];
};

/* struct virtio_fs_config (virtio spec, device-types/fs): what GET_CONFIG reads. */
#define VU_FS_TAG_SIZE 36u
struct vu_fs_config {
    uint8_t tag[VU_FS_TAG_SIZE]; /* NUL-padded, not NUL-terminated when 36 long */
    uint32_t num_request_queues; /* little-endian */
} __attribute__((packed));

/* GET_SHMEM_CONFIG reply: the sizes of the backend's shared memory regions
 * (region 0 is the DAX window). 2056 bytes. */
#define VU_SHMEM_MAX_REGIONS 256u
struct vu_shmem_config {
    uint32_t nregions;
    uint32_t padding;
    uint64_t memory_sizes[VU_SHMEM_MAX_REGIONS];
};

/* BACKEND_SHMEM_MAP / BACKEND_SHMEM_UNMAP: one range of region shmid. 40 bytes. */
#define VU_SHMEM_MAP_F_RW 1u /* map writable (QEMU 11.1 maps read-write whatever it says) */
struct vu_shmem_map {
    uint8_t shmid;
    uint8_t padding[7];
    uint64_t fd_offset;
    uint64_t shm_offset;
    uint64_t len;
    uint64_t flags;
};

/*
 * SLAVE_FS_MAP / SLAVE_FS_UNMAP (the virtio-fs branch): up to 8 ranges as
 * parallel arrays; an entry with len 0 is unused (skipped), an UNMAP entry with
 * len ~0 means the whole window. The reply is a u64, 0 = success. 256 bytes.
 */
#define VU_FS_MAP_ENTRIES 8u
#define VU_FS_MAP_R 1u
#define VU_FS_MAP_W 2u
struct vu_fs_map {
    uint64_t fd_offset[VU_FS_MAP_ENTRIES];
    uint64_t c_offset[VU_FS_MAP_ENTRIES]; /* window offset */
    uint64_t len[VU_FS_MAP_ENTRIES];
    uint64_t flags[VU_FS_MAP_ENTRIES];    /* VU_FS_MAP_R | VU_FS_MAP_W */
};

struct vu_msg {
    struct vu_msg_hdr hdr;
    union {
        uint64_t u64;
        struct vu_vring_state state;
        struct vu_vring_addr addr;
        struct vu_mem_table mem;
        struct vu_mem_reg memreg;
        struct vu_config config;
        struct vu_log log;
        struct vu_device_state dstate;
        struct vu_shmem_config shmem_config;
        uint8_t raw[VU_MAX_PAYLOAD];
    } payload;
};

/* Name of a request for logs, or NULL when unknown. */
const char *vu_request_name(uint32_t request);
/* Whether the request has its own reply (GET_*), sent whatever REPLY_ACK says. */
bool vu_request_has_reply(uint32_t request);

/*
 * Validates a received message: version bits, no REPLY flag, hdr.size equal to
 * payload_len and at most VU_MAX_PAYLOAD, the payload size the request's type
 * needs (for SET_MEM_TABLE also nregions), and the number of fds. Returns 0,
 * -ENOSYS for an unknown request (otherwise well formed), -EBADMSG for a bad
 * header or size, -EBADF for a wrong fd count.
 */
int vu_msg_check(const struct vu_msg *msg, size_t payload_len, int nfds);

/*
 * SET_DEVICE_STATE_FD's parameters: a known direction and the one phase the
 * protocol defines (every ring stopped). 0 or -EINVAL.
 */
int vu_device_state_check(const struct vu_device_state *s);

/*
 * GET_CONFIG on a message vu_msg_check accepted: copies [offset, offset+size)
 * of the config space into reply (offset, size, flags echoed) and returns the
 * reply's payload size (VU_CONFIG_HDR_SIZE + size). A window outside the space
 * (overflow included) or unknown flags: -EINVAL, and the reply carries no
 * payload, which is how vhost-user says GET_CONFIG failed.
 */
int vu_config_read(const struct vu_config *req, const void *space, size_t space_len,
                   struct vu_config *reply, uint32_t *reply_size);

#endif
