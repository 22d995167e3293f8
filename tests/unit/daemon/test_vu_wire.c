/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The DAX window's vhost-user payloads (daemon/vu_msg.h), both frontend
 * protocols, checked byte by byte against the layout written out independently
 * here (offsets from the QEMU vhost-user spec and the virtio-fs branch), and the
 * GET_SHMEM_CONFIG reply as the message thread sends it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <linux/fuse.h>

#include "vu_msg.h"

/* Little-endian u64 at an offset, written by hand. */
static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_ids(void **state)
{
    assert_int_equal(VU_BACKEND_SHMEM_MAP, 9);
    assert_int_equal(VU_BACKEND_SHMEM_UNMAP, 10);
    assert_int_equal(VU_BACKEND_FS_MAP, 6);
    assert_int_equal(VU_BACKEND_FS_UNMAP, 7);
    assert_int_equal(VU_GET_SHMEM_CONFIG, 44);
    assert_int_equal(VU_PROTOCOL_F_SHMEM, 22);
    assert_int_equal(sizeof(struct vu_shmem_map), 40);
    assert_int_equal(sizeof(struct vu_fs_map), 256);
    assert_int_equal(sizeof(struct vu_shmem_config), 2056);
    assert_int_equal(sizeof(struct fuse_removemapping_one), 16);
}

static void test_shmem_layout(void **state)
{
    struct vu_shmem_map m = {
        .shmid = 3,
        .fd_offset = 0x1122334455667788ull,
        .shm_offset = 0x0000000040200000ull,
        .len = 0x200000,
        .flags = VU_SHMEM_MAP_F_RW,
    };
    uint8_t want[40] = { 0 };

    /* u8 shmid | u8 padding[7] | u64 fd_offset | u64 shm_offset | u64 len | u64 flags */
    want[0] = 3;
    le64(want + 8, 0x1122334455667788ull);
    le64(want + 16, 0x40200000ull);
    le64(want + 24, 0x200000);
    le64(want + 32, 1);
    assert_int_equal(sizeof(m), sizeof(want));
    assert_memory_equal(&m, want, sizeof(want));
}

static void test_shmem_config(void **state)
{
    struct vu_shmem_config c = { .nregions = 2, .memory_sizes = { 1ull << 30, 0x123456789000ull } };
    uint8_t want[2056] = { 0 };

    /* u32 nregions | u32 padding | u64 memory_sizes[256] */
    want[0] = 2;
    le64(want + 8, 1ull << 30);
    le64(want + 16, 0x123456789000ull);
    assert_int_equal(sizeof(c), sizeof(want));
    assert_memory_equal(&c, want, sizeof(want));
    assert_true(sizeof(c) <= VU_MAX_PAYLOAD);
}

static void test_legacy_layout(void **state)
{
    struct vu_fs_map m = { 0 };
    uint8_t want[256] = { 0 };
    const uint64_t fo[3] = { 0x200000, 0x400000, 0xdeadb000 };
    const uint64_t co[3] = { 0, 0x600000, 0x7fe00000 };
    const uint64_t len[3] = { 0x200000, 0x1000, UINT64_MAX /* UNMAP: the whole window */ };
    const uint64_t fl[3] = { VU_FS_MAP_R, VU_FS_MAP_R | VU_FS_MAP_W, 0 };

    for (int i = 0; i < 3; i++) {
        m.fd_offset[i] = fo[i];
        m.c_offset[i] = co[i];
        m.len[i] = len[i];
        m.flags[i] = fl[i];
        /* u64 fd_offset[8] at 0, c_offset[8] at 64, len[8] at 128, flags[8] at 192 */
        le64(want + 0 + 8 * i, fo[i]);
        le64(want + 64 + 8 * i, co[i]);
        le64(want + 128 + 8 * i, len[i]);
        le64(want + 192 + 8 * i, fl[i]);
    }
    assert_int_equal(sizeof(m), sizeof(want));
    assert_memory_equal(&m, want, sizeof(want));
    assert_int_equal(want[192 + 8], 3);     /* R|W of entry 1 */
    assert_int_equal(want[128 + 8 * 3], 0); /* unused entries have len 0: skipped */
    assert_int_equal(VU_FS_MAP_ENTRIES, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_shmem_layout),
        cmocka_unit_test(test_shmem_config),
        cmocka_unit_test(test_legacy_layout),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
