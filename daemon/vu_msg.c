/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "vu_msg.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The layouts the specifications give, byte for byte. */
_Static_assert(sizeof(struct vu_shmem_config) == 2056, "GET_SHMEM_CONFIG reply");
_Static_assert(offsetof(struct vu_shmem_config, memory_sizes) == 8, "GET_SHMEM_CONFIG reply");
_Static_assert(sizeof(struct vu_shmem_map) == 40, "BACKEND_SHMEM_MAP");
_Static_assert(offsetof(struct vu_shmem_map, fd_offset) == 8, "BACKEND_SHMEM_MAP");
_Static_assert(offsetof(struct vu_shmem_map, flags) == 32, "BACKEND_SHMEM_MAP");
_Static_assert(sizeof(struct vu_fs_map) == 256, "SLAVE_FS_MAP");
_Static_assert(offsetof(struct vu_fs_map, flags) == 192, "SLAVE_FS_MAP");

/* How a request's payload size is checked. */
enum vu_size_rule {
    VU_SZ_NONE,      /* unknown request */
    VU_SZ_EXACT,     /* == size */
    VU_SZ_MEM_TABLE, /* 8 + nregions * 32, 1 <= nregions <= 8 */
    VU_SZ_CONFIG,    /* 12 + size, size <= 256 */
};

/* How many fds a request carries. */
enum vu_fd_rule {
    VU_FD_NONE,     /* 0 */
    VU_FD_ONE,      /* 1 */
    VU_FD_ZERO_ONE, /* 0 or 1 */
    VU_FD_REGIONS,  /* one per region */
    VU_FD_VRING,    /* 1, or 0 with VU_VRING_NOFD in the u64 */
};

struct vu_req_info {
    const char *name;
    enum vu_size_rule size_rule;
    uint32_t size;
    enum vu_fd_rule fds;
    bool has_reply;
};

#define U64   sizeof(uint64_t)
#define STATE sizeof(struct vu_vring_state)

static const struct vu_req_info vu_reqs[VU_REQUEST_MAX] = {
    [VU_GET_FEATURES] = {"GET_FEATURES", VU_SZ_EXACT, 0, VU_FD_NONE, true},
    [VU_SET_FEATURES] = {"SET_FEATURES", VU_SZ_EXACT, U64, VU_FD_NONE},
    [VU_SET_OWNER] = {"SET_OWNER", VU_SZ_EXACT, 0, VU_FD_NONE},
    [VU_RESET_OWNER] = {"RESET_OWNER", VU_SZ_EXACT, 0, VU_FD_NONE},
    [VU_SET_MEM_TABLE] = {"SET_MEM_TABLE", VU_SZ_MEM_TABLE, 0, VU_FD_REGIONS},
    /* With LOG_SHMFD (the only form offered) the log's fd rides along, and the
     * back-end answers once it writes to the new log. */
    [VU_SET_LOG_BASE] = {"SET_LOG_BASE", VU_SZ_EXACT, sizeof(struct vu_log), VU_FD_ONE, true},
    [VU_SET_LOG_FD] = {"SET_LOG_FD", VU_SZ_EXACT, 0, VU_FD_ONE},
    [VU_SET_VRING_NUM] = {"SET_VRING_NUM", VU_SZ_EXACT, STATE, VU_FD_NONE},
    [VU_SET_VRING_ADDR] = {"SET_VRING_ADDR", VU_SZ_EXACT, sizeof(struct vu_vring_addr), VU_FD_NONE},
    [VU_SET_VRING_BASE] = {"SET_VRING_BASE", VU_SZ_EXACT, STATE, VU_FD_NONE},
    [VU_GET_VRING_BASE] = {"GET_VRING_BASE", VU_SZ_EXACT, STATE, VU_FD_NONE, true},
    [VU_SET_VRING_KICK] = {"SET_VRING_KICK", VU_SZ_EXACT, U64, VU_FD_VRING},
    [VU_SET_VRING_CALL] = {"SET_VRING_CALL", VU_SZ_EXACT, U64, VU_FD_VRING},
    [VU_SET_VRING_ERR] = {"SET_VRING_ERR", VU_SZ_EXACT, U64, VU_FD_VRING},
    [VU_GET_PROTOCOL_FEATURES] = {"GET_PROTOCOL_FEATURES", VU_SZ_EXACT, 0, VU_FD_NONE, true},
    [VU_SET_PROTOCOL_FEATURES] = {"SET_PROTOCOL_FEATURES", VU_SZ_EXACT, U64, VU_FD_NONE},
    [VU_GET_QUEUE_NUM] = {"GET_QUEUE_NUM", VU_SZ_EXACT, 0, VU_FD_NONE, true},
    [VU_SET_VRING_ENABLE] = {"SET_VRING_ENABLE", VU_SZ_EXACT, STATE, VU_FD_NONE},
    [VU_SET_BACKEND_REQ_FD] = {"SET_BACKEND_REQ_FD", VU_SZ_EXACT, 0, VU_FD_ONE},
    [VU_RESET_DEVICE] = {"RESET_DEVICE", VU_SZ_EXACT, 0, VU_FD_NONE},
    [VU_GET_MAX_MEM_SLOTS] = {"GET_MAX_MEM_SLOTS", VU_SZ_EXACT, 0, VU_FD_NONE, true},
    [VU_ADD_MEM_REG] = {"ADD_MEM_REG", VU_SZ_EXACT, sizeof(struct vu_mem_reg), VU_FD_ONE},
    /* Some frontends attach the region's fd to REM_MEM_REG too; it is closed unused. */
    [VU_REM_MEM_REG] = {"REM_MEM_REG", VU_SZ_EXACT, sizeof(struct vu_mem_reg), VU_FD_ZERO_ONE},
    [VU_SET_STATUS] = {"SET_STATUS", VU_SZ_EXACT, U64, VU_FD_NONE},
    [VU_GET_STATUS] = {"GET_STATUS", VU_SZ_EXACT, 0, VU_FD_NONE, true},
    [VU_GET_CONFIG] = {"GET_CONFIG", VU_SZ_CONFIG, 0, VU_FD_NONE, true},
    [VU_SET_CONFIG] = {"SET_CONFIG", VU_SZ_CONFIG, 0, VU_FD_NONE},
    [VU_GET_SHMEM_CONFIG] = {"GET_SHMEM_CONFIG", VU_SZ_EXACT, 0, VU_FD_NONE, true},
    [VU_SET_DEVICE_STATE_FD] = {"SET_DEVICE_STATE_FD", VU_SZ_EXACT, sizeof(struct vu_device_state),
                                VU_FD_ONE, true},
    [VU_CHECK_DEVICE_STATE] = {"CHECK_DEVICE_STATE", VU_SZ_EXACT, 0, VU_FD_NONE, true},
};

#undef U64
#undef STATE

static const struct vu_req_info *vu_info(uint32_t request)
{
    if (request >= VU_REQUEST_MAX || !vu_reqs[request].name)
        return NULL;
    return &vu_reqs[request];
}

const char *vu_request_name(uint32_t request)
{
    const struct vu_req_info *i = vu_info(request);
    return i ? i->name : NULL;
}

bool vu_request_has_reply(uint32_t request)
{
    const struct vu_req_info *i = vu_info(request);
    return i && i->has_reply;
}

int vu_msg_check(const struct vu_msg *msg, size_t payload_len, int nfds)
{
    const struct vu_msg_hdr *h = &msg->hdr;

    if ((h->flags & VU_VERSION_MASK) != VU_VERSION || (h->flags & VU_FLAG_REPLY))
        return -EBADMSG;
    if (payload_len > VU_MAX_PAYLOAD || h->size != payload_len)
        return -EBADMSG;
    if (nfds < 0 || nfds > VU_MAX_FDS)
        return -EBADF;

    const struct vu_req_info *info = vu_info(h->request);
    if (!info)
        return -ENOSYS;

    unsigned want_fds = 0;
    switch (info->size_rule) {
    case VU_SZ_EXACT:
        if (payload_len != info->size)
            return -EBADMSG;
        break;
    case VU_SZ_MEM_TABLE: {
        const size_t head = offsetof(struct vu_mem_table, regions);
        if (payload_len < head)
            return -EBADMSG;
        uint32_t n = msg->payload.mem.nregions;
        /* Exactly n regions (QEMU), or the whole fixed-size table with n of them used. */
        if (n == 0 || n > VU_MEM_TABLE_REGIONS ||
            (payload_len != head + (size_t)n * sizeof(struct vu_mem_region) &&
             payload_len != sizeof(struct vu_mem_table)))
            return -EBADMSG;
        want_fds = n;
        break;
    }
    case VU_SZ_CONFIG:
        if (payload_len < VU_CONFIG_HDR_SIZE ||
            payload_len - VU_CONFIG_HDR_SIZE != msg->payload.config.size ||
            msg->payload.config.size > VU_CONFIG_MAX)
            return -EBADMSG;
        break;
    case VU_SZ_NONE:
        return -ENOSYS;
    }

    switch (info->fds) {
    case VU_FD_NONE:
        return nfds == 0 ? 0 : -EBADF;
    case VU_FD_ONE:
        return nfds == 1 ? 0 : -EBADF;
    case VU_FD_ZERO_ONE:
        return nfds <= 1 ? 0 : -EBADF;
    case VU_FD_REGIONS:
        return (unsigned)nfds == want_fds ? 0 : -EBADF;
    case VU_FD_VRING:
        want_fds = (msg->payload.u64 & VU_VRING_NOFD) ? 0 : 1;
        return (unsigned)nfds == want_fds ? 0 : -EBADF;
    }
    return -EBADMSG;
}

int vu_config_read(const struct vu_config *req, const void *space, size_t space_len,
                   struct vu_config *reply, uint32_t *reply_size)
{
    *reply_size = 0;
    if (req->size > VU_CONFIG_MAX || req->offset > space_len ||
        req->size > space_len - req->offset ||
        (req->flags != VU_CONFIG_F_WRITABLE && req->flags != VU_CONFIG_F_MIGRATION))
        return -EINVAL;
    reply->offset = req->offset;
    reply->size = req->size;
    reply->flags = req->flags;
    memcpy(reply->region, (const uint8_t *)space + req->offset, req->size);
    *reply_size = VU_CONFIG_HDR_SIZE + req->size;
    return (int)*reply_size;
}

int vu_device_state_check(const struct vu_device_state *s)
{
    if (s->direction != VU_STATE_DIR_SAVE && s->direction != VU_STATE_DIR_LOAD)
        return -EINVAL;
    if (s->phase != VU_STATE_PHASE_STOPPED)
        return -EINVAL;
    return 0;
}
