/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vhost-user message encoding (docs/interop/vhost-user.rst in QEMU): a 12-byte
 * header {u32 request, u32 flags, u32 size} followed by size bytes of payload.
 * No I/O here, so it is unit tested on its own.
 */
#include <errno.h>
#include <string.h>

#include "vfe.h"

_Static_assert(VFE_VU_HDR_SIZE == offsetof(struct vfe_msg, payload), "header layout");
_Static_assert(sizeof(struct vfe_vu_addr) == 40, "vring addr layout");
_Static_assert(sizeof(struct vfe_vu_region) == 32, "region layout");
_Static_assert(sizeof(struct vfe_vu_mem) == 8 + 32 * VFE_VU_MAX_REGIONS, "mem layout");
_Static_assert(sizeof(struct vfe_vu_mem_reg) == 40, "mem_reg layout");

void vfe_msg_init(struct vfe_msg *m, uint32_t request, uint32_t flags)
{
    m->request = request;
    m->flags = VFE_VU_VERSION | (flags & ~VFE_VU_VERSION_MASK);
    m->size = 0;
}

void vfe_msg_set_u64(struct vfe_msg *m, uint64_t v)
{
    m->payload.u64 = v;
    m->size = sizeof(uint64_t);
}

void vfe_msg_set_state(struct vfe_msg *m, uint32_t index, uint32_t num)
{
    m->payload.state.index = index;
    m->payload.state.num = num;
    m->size = sizeof(struct vfe_vu_state);
}

void vfe_msg_set_addr(struct vfe_msg *m, const struct vfe_vu_addr *a)
{
    memcpy(&m->payload.addr, a, sizeof(*a));
    m->size = sizeof(*a);
}

int vfe_msg_set_mem(struct vfe_msg *m, const struct vfe_vu_region *r, unsigned n)
{
    if (n > VFE_VU_MAX_REGIONS)
        return -E2BIG;
    memset(&m->payload.mem, 0, sizeof(m->payload.mem));
    m->payload.mem.nregions = n;
    memcpy(m->payload.mem.regions, r, n * sizeof(*r));
    /* The payload is the count, the padding and the n regions that follow, as
     * QEMU sends it: a backend checks the size against nregions (the rust-vmm
     * vhost crate refuses anything else), and the fds match the regions. */
    m->size = (uint32_t)(offsetof(struct vfe_vu_mem, regions) + n * sizeof(*r));
    return 0;
}

void vfe_msg_set_mem_reg(struct vfe_msg *m, const struct vfe_vu_region *r)
{
    m->payload.mem_reg.padding = 0;
    m->payload.mem_reg.region = *r;
    m->size = sizeof(m->payload.mem_reg);
}

size_t vfe_msg_wire_len(const struct vfe_msg *m)
{
    size_t n = m->size > VFE_VU_MAX_PAYLOAD ? VFE_VU_MAX_PAYLOAD : m->size;
    return VFE_VU_HDR_SIZE + n;
}

int vfe_msg_check_reply(const struct vfe_msg *reply, uint32_t request, uint32_t payload_size)
{
    if (reply->request != request)
        return -EPROTO;
    if ((reply->flags & VFE_VU_VERSION_MASK) != VFE_VU_VERSION)
        return -EPROTO;
    if (!(reply->flags & VFE_VU_FLAG_REPLY))
        return -EPROTO;
    if (reply->size != payload_size)
        return -EPROTO;
    return 0;
}

static const char *const vfe_msg_names[] = {
    [VFE_VU_GET_FEATURES] = "GET_FEATURES",
    [VFE_VU_SET_FEATURES] = "SET_FEATURES",
    [VFE_VU_SET_OWNER] = "SET_OWNER",
    [VFE_VU_RESET_OWNER] = "RESET_OWNER",
    [VFE_VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
    [VFE_VU_SET_LOG_BASE] = "SET_LOG_BASE",
    [VFE_VU_SET_LOG_FD] = "SET_LOG_FD",
    [VFE_VU_SET_VRING_NUM] = "SET_VRING_NUM",
    [VFE_VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
    [VFE_VU_SET_VRING_BASE] = "SET_VRING_BASE",
    [VFE_VU_GET_VRING_BASE] = "GET_VRING_BASE",
    [VFE_VU_SET_VRING_KICK] = "SET_VRING_KICK",
    [VFE_VU_SET_VRING_CALL] = "SET_VRING_CALL",
    [VFE_VU_SET_VRING_ERR] = "SET_VRING_ERR",
    [VFE_VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
    [VFE_VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
    [VFE_VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
    [VFE_VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
    [VFE_VU_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
    [VFE_VU_GET_CONFIG] = "GET_CONFIG",
    [VFE_VU_RESET_DEVICE] = "RESET_DEVICE",
    [VFE_VU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
    [VFE_VU_ADD_MEM_REG] = "ADD_MEM_REG",
    [VFE_VU_REM_MEM_REG] = "REM_MEM_REG",
    [VFE_VU_SET_STATUS] = "SET_STATUS",
    [VFE_VU_GET_STATUS] = "GET_STATUS",
    [VFE_VU_GET_SHMEM_CONFIG] = "GET_SHMEM_CONFIG",
    [VFE_VU_SET_DEVICE_STATE_FD] = "SET_DEVICE_STATE_FD",
    [VFE_VU_CHECK_DEVICE_STATE] = "CHECK_DEVICE_STATE",
};

const char *vfe_msg_name(uint32_t request)
{
    if (request < sizeof(vfe_msg_names) / sizeof(vfe_msg_names[0]) && vfe_msg_names[request])
        return vfe_msg_names[request];
    return "UNKNOWN";
}
