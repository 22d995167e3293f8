/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Payloads of the backend -> frontend mapping messages, both protocols, as pure
 * functions. Byte layouts (little-endian, offsets in bytes):
 *
 * GET_SHMEM_CONFIG reply (2056):  0 u32 nregions | 4 u32 padding | 8 u64 sizes[256]
 * BACKEND_SHMEM_MAP/UNMAP (40):   0 u8 shmid | 1 u8 padding[7] | 8 u64 fd_offset |
 *                                 16 u64 shm_offset | 24 u64 len | 32 u64 flags (bit0 rw)
 * SLAVE_FS_MAP/UNMAP (256):       0 u64 fd_offset[8] | 64 u64 c_offset[8] |
 *                                 128 u64 len[8] | 192 u64 flags[8] (1 = R, 2 = W)
 */
#include <errno.h>
#include <string.h>

#include "dax.h"

static void put_le64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int dax_wire_shmem_config_encode(uint8_t out[DAX_SHMEM_CONFIG_SIZE], const uint64_t *sizes,
                                 unsigned nregions)
{
    if (nregions > DAX_SHMEM_MAX_REGIONS || (nregions && !sizes))
        return -EINVAL;
    memset(out, 0, DAX_SHMEM_CONFIG_SIZE);
    put_le32(out, nregions);
    for (unsigned i = 0; i < nregions; i++)
        put_le64(out + 8 + 8 * i, sizes[i]);
    return 0;
}

void dax_wire_shmem_encode(uint8_t out[DAX_SHMEM_MSG_SIZE], const struct dax_shmem_msg *m)
{
    memset(out, 0, DAX_SHMEM_MSG_SIZE);
    out[0] = m->shmid;
    put_le64(out + 8, m->fd_offset);
    put_le64(out + 16, m->shm_offset);
    put_le64(out + 24, m->len);
    put_le64(out + 32, m->flags);
}

int dax_wire_shmem_decode(const uint8_t *buf, size_t len, struct dax_shmem_msg *m)
{
    if (!buf || len < DAX_SHMEM_MSG_SIZE)
        return -EINVAL;
    for (unsigned i = 1; i < 8; i++)
        if (buf[i])
            return -EINVAL;
    m->shmid = buf[0];
    m->fd_offset = get_le64(buf + 8);
    m->shm_offset = get_le64(buf + 16);
    m->len = get_le64(buf + 24);
    m->flags = get_le64(buf + 32);
    if (m->flags & ~DAX_SHMEM_FLAG_RW)
        return -EINVAL;
    return 0;
}

int dax_wire_legacy_encode(uint8_t out[DAX_LEGACY_MSG_SIZE], const struct dax_legacy_entry *e,
                           unsigned n)
{
    if (n > DAX_LEGACY_ENTRIES)
        n = DAX_LEGACY_ENTRIES;
    for (unsigned i = 0; i < n; i++)
        if (e[i].len == 0 || (e[i].flags & ~(DAX_LEGACY_FLAG_R | DAX_LEGACY_FLAG_W)))
            return -EINVAL;
    memset(out, 0, DAX_LEGACY_MSG_SIZE);
    for (unsigned i = 0; i < n; i++) {
        put_le64(out + 0 * 64 + 8 * i, e[i].fd_offset);
        put_le64(out + 1 * 64 + 8 * i, e[i].c_offset);
        put_le64(out + 2 * 64 + 8 * i, e[i].len);
        put_le64(out + 3 * 64 + 8 * i, e[i].flags);
    }
    return (int)n;
}

int dax_wire_legacy_decode(const uint8_t *buf, size_t len,
                           struct dax_legacy_entry e[DAX_LEGACY_ENTRIES])
{
    int n = 0;

    if (!buf || len < DAX_LEGACY_MSG_SIZE)
        return -EINVAL;
    for (unsigned i = 0; i < DAX_LEGACY_ENTRIES; i++) {
        struct dax_legacy_entry x = {
            .fd_offset = get_le64(buf + 0 * 64 + 8 * i),
            .c_offset = get_le64(buf + 1 * 64 + 8 * i),
            .len = get_le64(buf + 2 * 64 + 8 * i),
            .flags = get_le64(buf + 3 * 64 + 8 * i),
        };

        if (x.len == 0)
            continue; /* skipped, as the frontend does */
        e[n++] = x;
    }
    return n;
}

int dax_wire_legacy_reply(uint64_t value)
{
    return value == 0 ? 0 : -EIO;
}
