/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the vhost-user message validator (daemon/vu_msg.c) and the memory
 * region checks a valid SET_MEM_TABLE / ADD_MEM_REG leads to (daemon/mem.c).
 *
 * Input: u8 fd count (the number of SCM_RIGHTS fds, 0..15), then the message as
 * it came off the socket: the 12-byte header and the payload bytes actually
 * received (at most VU_MAX_PAYLOAD; the daemon never reads more).
 *
 * The message lives in a heap block ending with the received payload, so ASan
 * reports any read of payload bytes that never arrived. Invariants on accepted
 * messages: the header size equals the received length, the fd count matches
 * what the request carries, SET_MEM_TABLE's region count fits the payload,
 * GET_CONFIG reads only inside the config space, a SET_LOG_BASE's log is never
 * mapped unchecked and marking any range stays inside the log, SET_DEVICE_STATE_FD
 * passes only a known direction with the stopped phase.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "mem.h"
#include "vu_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 + sizeof(struct vu_msg_hdr))
        return 0;
    int nfds = data[0] & 15;
    data++;
    size--;
    size_t payload_len = size - sizeof(struct vu_msg_hdr);
    if (payload_len > VU_MAX_PAYLOAD)
        return 0;

    /* As the device reads it: the header, then exactly the payload received into
     * msg->payload (which is 8-byte aligned, after padding). */
    const size_t off = offsetof(struct vu_msg, payload);
    struct vu_msg *msg = malloc(off + payload_len);
    if (!msg)
        abort();
    memcpy(&msg->hdr, data, sizeof(struct vu_msg_hdr));
    memcpy(msg->payload.raw, data + sizeof(struct vu_msg_hdr), payload_len);

    int r = vu_msg_check(msg, payload_len, nfds);
    FZ_REQUIRE(r == 0 || r == -ENOSYS || r == -EBADMSG || r == -EBADF);
    const char *name = vu_request_name(msg->hdr.request);
    (void)vu_request_has_reply(msg->hdr.request);

    if (r == 0) {
        FZ_REQUIRE(name != NULL);
        FZ_REQUIRE(msg->hdr.size == payload_len);
        FZ_REQUIRE((msg->hdr.flags & VU_FLAG_REPLY) == 0);
        FZ_REQUIRE(nfds <= VU_MAX_FDS);

        /* What the device does next with memory messages: region checks. */
        static struct vq_mem mem;
        memset(&mem, 0, sizeof(mem));
        if (msg->hdr.request == VU_SET_MEM_TABLE) {
            uint32_t n = msg->payload.mem.nregions;
            FZ_REQUIRE(n >= 1 && n <= VU_MEM_TABLE_REGIONS && (unsigned)nfds == n);
            FZ_REQUIRE(payload_len ==
                       offsetof(struct vu_mem_table, regions) + n * sizeof(struct vu_mem_region));
            for (uint32_t i = 0; i < n; i++) {
                const struct vu_mem_region *mr = &msg->payload.mem.regions[i];
                struct vmem_desc d = {mr->gpa, mr->size, mr->uva, mr->mmap_offset};
                int c = vmem_desc_check(&mem, &d);
                FZ_REQUIRE(c == 0 || c == -EINVAL || c == -EEXIST || c == -ENOSPC);
                if (c == 0) {
                    FZ_REQUIRE(d.size > 0 && d.gpa + d.size > d.gpa);
                    struct vmem_region *reg = &mem.r[mem.nregions++];
                    reg->gpa = d.gpa;
                    reg->size = d.size;
                    reg->uva = d.uva;
                    reg->mmap_offset = d.mmap_offset;
                    reg->host = NULL; /* never dereferenced below */
                }
            }
        } else if (msg->hdr.request == VU_ADD_MEM_REG) {
            FZ_REQUIRE(nfds == 1);
            const struct vu_mem_region *mr = &msg->payload.memreg.region;
            struct vmem_desc d = {mr->gpa, mr->size, mr->uva, mr->mmap_offset};
            int c = vmem_desc_check(&mem, &d);
            FZ_REQUIRE(c == 0 || c == -EINVAL);
        } else if (msg->hdr.request == VU_GET_CONFIG) {
            /* What the device answers from the virtio-fs config space. */
            FZ_REQUIRE(msg->payload.config.size <= VU_CONFIG_MAX &&
                       payload_len == VU_CONFIG_HDR_SIZE + msg->payload.config.size);
            static const struct vu_fs_config space = {.tag = "fuzz", .num_request_queues = 1};
            static struct vu_config rep;
            uint32_t rsize;
            int c = vu_config_read(&msg->payload.config, &space, sizeof(space), &rep, &rsize);
            FZ_REQUIRE((c < 0 && rsize == 0) ||
                       (c >= 0 && rsize == payload_len &&
                        msg->payload.config.offset + msg->payload.config.size <= sizeof(space)));
        } else if (msg->hdr.request == VU_SET_LOG_BASE) {
            /* The log the frontend describes is never mapped unchecked (no fd
             * here: the size and offset checks come first, then fstat fails). */
            FZ_REQUIRE(nfds == 1 && payload_len == sizeof(struct vu_log));
            struct vmem_log *l = NULL;
            int c = vmem_log_map(-1, msg->payload.log.mmap_size, msg->payload.log.mmap_offset, &l);
            FZ_REQUIRE((c == -EINVAL || c == -EBADF) && l == NULL);
            /* Marking hostile ranges (the payload's two u64 as gpa and length)
             * in a small log: never a byte outside it. */
            static uint8_t guard[3][16];
            memset(guard, 0, sizeof(guard));
            vmem_log_mark_bits(guard[1], sizeof(guard[1]), msg->payload.log.mmap_size,
                               msg->payload.log.mmap_offset);
            for (unsigned i = 0; i < sizeof(guard[0]); i++)
                FZ_REQUIRE(guard[0][i] == 0 && guard[2][i] == 0);
        } else if (msg->hdr.request == VU_SET_DEVICE_STATE_FD) {
            FZ_REQUIRE(nfds == 1 && payload_len == sizeof(struct vu_device_state));
            int c = vu_device_state_check(&msg->payload.dstate);
            FZ_REQUIRE(c == 0 || c == -EINVAL);
            if (c == 0)
                FZ_REQUIRE(msg->payload.dstate.phase == VU_STATE_PHASE_STOPPED &&
                           msg->payload.dstate.direction <= VU_STATE_DIR_LOAD);
        } else if (msg->hdr.request == VU_CHECK_DEVICE_STATE) {
            FZ_REQUIRE(nfds == 0 && payload_len == 0);
        } else if (msg->hdr.request == VU_SET_VRING_KICK || msg->hdr.request == VU_SET_VRING_CALL) {
            FZ_REQUIRE(nfds == ((msg->payload.u64 & VU_VRING_NOFD) ? 0 : 1));
        }
    }
    free(msg);
    return 0;
}
