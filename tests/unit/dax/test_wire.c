/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Byte layouts of both frontend protocols, checked byte by byte against the layout
 * written out independently here (offsets from the QEMU vhost-user spec and the
 * virtio-fs branch), plus decoding and the refusal of malformed payloads.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dax.h"

/* Little-endian u64 at an offset, written by hand. */
static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_ids(void **state)
{
    assert_int_equal(DAX_VHOST_USER_BACKEND_SHMEM_MAP, 9);
    assert_int_equal(DAX_VHOST_USER_BACKEND_SHMEM_UNMAP, 10);
    assert_int_equal(DAX_VHOST_USER_SLAVE_FS_MAP, 6);
    assert_int_equal(DAX_VHOST_USER_SLAVE_FS_UNMAP, 7);
    assert_int_equal(DAX_VHOST_USER_GET_SHMEM_CONFIG, 44);
    assert_int_equal(DAX_VHOST_USER_PROTOCOL_F_SHMEM, 22);
    assert_int_equal(DAX_SHMEM_MSG_SIZE, 40);
    assert_int_equal(DAX_LEGACY_MSG_SIZE, 256);
    assert_int_equal(DAX_SHMEM_CONFIG_SIZE, 2056);
    assert_int_equal(sizeof(struct fuse_removemapping_one), 16);
}

static void test_shmem_layout(void **state)
{
    struct dax_shmem_msg m = {
        .shmid = 0,
        .fd_offset = 0x1122334455667788ull,
        .shm_offset = 0x0000000040200000ull,
        .len = 0x200000,
        .flags = DAX_SHMEM_FLAG_RW,
    };
    uint8_t out[DAX_SHMEM_MSG_SIZE], want[DAX_SHMEM_MSG_SIZE] = { 0 };
    struct dax_shmem_msg back;

    memset(out, 0xAA, sizeof(out));
    dax_wire_shmem_encode(out, &m);
    want[0] = 0;
    le64(want + 8, 0x1122334455667788ull);
    le64(want + 16, 0x40200000ull);
    le64(want + 24, 0x200000);
    le64(want + 32, 1);
    assert_memory_equal(out, want, sizeof(want));
    assert_int_equal(out[8], 0x88); /* little-endian low byte first */
    assert_int_equal(out[15], 0x11);

    m.shmid = 3;
    m.flags = 0;
    dax_wire_shmem_encode(out, &m);
    assert_int_equal(out[0], 3);
    for (int i = 1; i < 8; i++)
        assert_int_equal(out[i], 0); /* padding zeroed */
    assert_int_equal(out[32], 0);

    assert_int_equal(dax_wire_shmem_decode(out, sizeof(out), &back), 0);
    assert_int_equal(back.shmid, 3);
    assert_int_equal(back.fd_offset, m.fd_offset);
    assert_int_equal(back.shm_offset, m.shm_offset);
    assert_int_equal(back.len, m.len);
    assert_int_equal(back.flags, 0);
}

static void test_shmem_decode_refuses(void **state)
{
    uint8_t buf[DAX_SHMEM_MSG_SIZE] = { 0 };
    struct dax_shmem_msg m;

    assert_int_equal(dax_wire_shmem_decode(buf, sizeof(buf) - 1, &m), -EINVAL);
    assert_int_equal(dax_wire_shmem_decode(NULL, sizeof(buf), &m), -EINVAL);
    buf[5] = 1;
    assert_int_equal(dax_wire_shmem_decode(buf, sizeof(buf), &m), -EINVAL);
    buf[5] = 0;
    buf[32] = 2; /* unknown flag */
    assert_int_equal(dax_wire_shmem_decode(buf, sizeof(buf), &m), -EINVAL);
    buf[32] = 1;
    assert_int_equal(dax_wire_shmem_decode(buf, sizeof(buf), &m), 0);
}

static void test_shmem_config(void **state)
{
    uint8_t out[DAX_SHMEM_CONFIG_SIZE], want[DAX_SHMEM_CONFIG_SIZE] = { 0 };
    uint64_t sizes[2] = { 1ull << 30, 0x123456789000ull };

    memset(out, 0xAA, sizeof(out));
    assert_int_equal(dax_wire_shmem_config_encode(out, sizes, 1), 0);
    want[0] = 1;
    le64(want + 8, 1ull << 30);
    assert_memory_equal(out, want, sizeof(want));
    assert_int_equal(dax_wire_shmem_config_encode(out, sizes, 2), 0);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[16], 0x00);
    assert_int_equal(out[17], 0x90);
    assert_int_equal(out[21], 0x12);
    assert_int_equal(dax_wire_shmem_config_encode(out, sizes, 257), -EINVAL);
    assert_int_equal(dax_wire_shmem_config_encode(out, NULL, 1), -EINVAL);
    assert_int_equal(dax_wire_shmem_config_encode(out, NULL, 0), 0);
    assert_int_equal(out[0], 0);
}

static void test_legacy_layout(void **state)
{
    struct dax_legacy_entry e[3] = {
        { .fd_offset = 0x200000, .c_offset = 0, .len = 0x200000, .flags = DAX_LEGACY_FLAG_R },
        { .fd_offset = 0x400000, .c_offset = 0x600000, .len = 0x1000,
          .flags = DAX_LEGACY_FLAG_R | DAX_LEGACY_FLAG_W },
        { .fd_offset = 0xdeadb000, .c_offset = 0x7fe00000, .len = 0x200000, .flags = 0 },
    };
    uint8_t out[DAX_LEGACY_MSG_SIZE], want[DAX_LEGACY_MSG_SIZE] = { 0 };
    struct dax_legacy_entry back[DAX_LEGACY_ENTRIES];

    memset(out, 0xAA, sizeof(out));
    assert_int_equal(dax_wire_legacy_encode(out, e, 3), 3);
    /* u64 fd_offset[8] at 0, c_offset[8] at 64, len[8] at 128, flags[8] at 192 */
    for (int i = 0; i < 3; i++) {
        le64(want + 0 + 8 * i, e[i].fd_offset);
        le64(want + 64 + 8 * i, e[i].c_offset);
        le64(want + 128 + 8 * i, e[i].len);
        le64(want + 192 + 8 * i, e[i].flags);
    }
    assert_memory_equal(out, want, sizeof(want));
    assert_int_equal(out[192 + 8], 3); /* R|W of entry 1 */
    assert_int_equal(out[128 + 8 * 3], 0); /* unused entries have len 0: skipped */

    assert_int_equal(dax_wire_legacy_decode(out, sizeof(out), back), 3);
    assert_int_equal(back[2].fd_offset, 0xdeadb000);
    assert_int_equal(back[2].c_offset, 0x7fe00000);
    assert_int_equal(back[1].flags, 3);
}

static void test_legacy_batching(void **state)
{
    struct dax_legacy_entry e[20];
    uint8_t out[DAX_LEGACY_MSG_SIZE];
    struct dax_legacy_entry back[DAX_LEGACY_ENTRIES];
    unsigned done = 0, msgs = 0;

    for (unsigned i = 0; i < 20; i++)
        e[i] = (struct dax_legacy_entry){ i * 0x200000ull, i * 0x200000ull, 0x200000, 1 };
    while (done < 20) {
        int n = dax_wire_legacy_encode(out, e + done, 20 - done);

        assert_true(n > 0 && n <= 8);
        assert_int_equal(dax_wire_legacy_decode(out, sizeof(out), back), n);
        for (int i = 0; i < n; i++)
            assert_int_equal(back[i].c_offset, (done + i) * 0x200000ull);
        done += n;
        msgs++;
    }
    assert_int_equal(msgs, 3); /* 8 + 8 + 4 */
}

static void test_legacy_refuses(void **state)
{
    struct dax_legacy_entry e[2] = { { 0, 0, 0x1000, 1 }, { 0, 0x1000, 0, 1 } };
    uint8_t out[DAX_LEGACY_MSG_SIZE] = { 0 };
    struct dax_legacy_entry back[DAX_LEGACY_ENTRIES];

    /* a len 0 entry would be skipped silently by the frontend: never encode it */
    assert_int_equal(dax_wire_legacy_encode(out, e, 2), -EINVAL);
    e[1].len = 0x1000;
    e[1].flags = 4;
    assert_int_equal(dax_wire_legacy_encode(out, e, 2), -EINVAL);
    assert_int_equal(dax_wire_legacy_decode(out, DAX_LEGACY_MSG_SIZE - 1, back), -EINVAL);
    /* unmap the whole window: one entry of len ~0 */
    e[0] = (struct dax_legacy_entry){ 0, 0, DAX_LEGACY_UNMAP_ALL, 0 };
    assert_int_equal(dax_wire_legacy_encode(out, e, 1), 1);
    for (int i = 128; i < 136; i++)
        assert_int_equal(out[i], 0xff);
    /* replies: 0 success, anything else a failure (some frontends send 1) */
    assert_int_equal(dax_wire_legacy_reply(0), 0);
    assert_int_equal(dax_wire_legacy_reply(1), -EIO);
    assert_int_equal(dax_wire_legacy_reply((uint64_t)-22), -EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_shmem_layout),
        cmocka_unit_test(test_shmem_decode_refuses),
        cmocka_unit_test(test_shmem_config),
        cmocka_unit_test(test_legacy_layout),
        cmocka_unit_test(test_legacy_batching),
        cmocka_unit_test(test_legacy_refuses),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
