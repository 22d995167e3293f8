/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The vhost-user message validator against truncated, oversized and wrong-fd-count messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>

#include "vu_msg.h"

static struct vu_msg msg(uint32_t req, uint32_t size)
{
    struct vu_msg m;
    memset(&m, 0, sizeof(m));
    m.hdr.request = req;
    m.hdr.flags = VU_VERSION;
    m.hdr.size = size;
    return m;
}

static void test_well_formed(void **state)
{
    (void)state;
    struct vu_msg m = msg(VU_GET_FEATURES, 0);
    assert_int_equal(vu_msg_check(&m, 0, 0), 0);
    m = msg(VU_SET_FEATURES, 8);
    assert_int_equal(vu_msg_check(&m, 8, 0), 0);
    m = msg(VU_SET_VRING_ADDR, sizeof(struct vu_vring_addr));
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_vring_addr), 0), 0);
    m = msg(VU_GET_VRING_BASE, 8);
    m.hdr.flags |= VU_FLAG_NEED_REPLY;
    assert_int_equal(vu_msg_check(&m, 8, 0), 0);
    m = msg(VU_ADD_MEM_REG, sizeof(struct vu_mem_reg));
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_mem_reg), 1), 0);
    m = msg(VU_REM_MEM_REG, sizeof(struct vu_mem_reg));
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_mem_reg), 0), 0);
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_mem_reg), 1), 0);
    m = msg(VU_SET_BACKEND_REQ_FD, 0);
    assert_int_equal(vu_msg_check(&m, 0, 1), 0);
    assert_true(vu_request_has_reply(VU_GET_QUEUE_NUM));
    assert_false(vu_request_has_reply(VU_SET_OWNER));
    assert_string_equal(vu_request_name(VU_SET_MEM_TABLE), "SET_MEM_TABLE");
}

static void test_bad_header(void **state)
{
    (void)state;
    struct vu_msg m = msg(VU_GET_FEATURES, 0);
    m.hdr.flags = 0; /* version 0 */
    assert_int_equal(vu_msg_check(&m, 0, 0), -EBADMSG);
    m.hdr.flags = 2;
    assert_int_equal(vu_msg_check(&m, 0, 0), -EBADMSG);
    m.hdr.flags = VU_VERSION | VU_FLAG_REPLY; /* a reply sent as a request */
    assert_int_equal(vu_msg_check(&m, 0, 0), -EBADMSG);
}

static void test_truncated(void **state)
{
    (void)state;
    struct vu_msg m = msg(VU_SET_FEATURES, 4);
    assert_int_equal(vu_msg_check(&m, 4, 0), -EBADMSG);
    m = msg(VU_SET_VRING_NUM, 4);
    assert_int_equal(vu_msg_check(&m, 4, 0), -EBADMSG);
    m = msg(VU_SET_VRING_ADDR, 32);
    assert_int_equal(vu_msg_check(&m, 32, 0), -EBADMSG);
    m = msg(VU_ADD_MEM_REG, 32);
    assert_int_equal(vu_msg_check(&m, 32, 1), -EBADMSG);
    m = msg(VU_SET_MEM_TABLE, 4); /* not even nregions */
    assert_int_equal(vu_msg_check(&m, 4, 0), -EBADMSG);
    /* hdr.size says more than arrived. */
    m = msg(VU_SET_FEATURES, 8);
    assert_int_equal(vu_msg_check(&m, 7, 0), -EBADMSG);
}

static void test_oversized(void **state)
{
    (void)state;
    struct vu_msg m = msg(VU_SET_FEATURES, 16);
    assert_int_equal(vu_msg_check(&m, 16, 0), -EBADMSG);
    m = msg(VU_GET_FEATURES, 8);
    assert_int_equal(vu_msg_check(&m, 8, 0), -EBADMSG);
    m = msg(VU_SET_OWNER, VU_MAX_PAYLOAD + 1);
    assert_int_equal(vu_msg_check(&m, VU_MAX_PAYLOAD + 1, 0), -EBADMSG);
    m = msg(VU_SET_OWNER, UINT32_MAX);
    assert_int_equal(vu_msg_check(&m, UINT32_MAX, 0), -EBADMSG);
}

static void test_mem_table(void **state)
{
    (void)state;
    size_t head = offsetof(struct vu_mem_table, regions);
    size_t one = sizeof(struct vu_mem_region);
    struct vu_msg m = msg(VU_SET_MEM_TABLE, (uint32_t)(head + 2 * one));
    m.payload.mem.nregions = 2;
    assert_int_equal(vu_msg_check(&m, head + 2 * one, 2), 0);
    assert_int_equal(vu_msg_check(&m, head + 2 * one, 1), -EBADF);
    assert_int_equal(vu_msg_check(&m, head + 2 * one, 3), -EBADF);
    m.payload.mem.nregions = 3; /* claims more regions than the payload holds */
    assert_int_equal(vu_msg_check(&m, head + 2 * one, 3), -EBADMSG);
    /* The whole fixed-size table with fewer regions used is accepted too. */
    m.payload.mem.nregions = 2;
    m.hdr.size = sizeof(struct vu_mem_table);
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_mem_table), 2), 0);
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_mem_table), 8), -EBADF);
    m.payload.mem.nregions = 0;
    m.hdr.size = (uint32_t)head;
    assert_int_equal(vu_msg_check(&m, head, 0), -EBADMSG);
    m.payload.mem.nregions = 9; /* more than VU_MEM_TABLE_REGIONS */
    m.hdr.size = (uint32_t)(head + 9 * one);
    assert_int_equal(vu_msg_check(&m, head + 9 * one, 8), -EBADMSG);
    m.payload.mem.nregions = UINT32_MAX;
    assert_int_equal(vu_msg_check(&m, head + 9 * one, 8), -EBADMSG);
}

static void test_wrong_fd_count(void **state)
{
    (void)state;
    struct vu_msg m = msg(VU_SET_FEATURES, 8);
    assert_int_equal(vu_msg_check(&m, 8, 1), -EBADF);
    m = msg(VU_SET_BACKEND_REQ_FD, 0);
    assert_int_equal(vu_msg_check(&m, 0, 0), -EBADF);
    assert_int_equal(vu_msg_check(&m, 0, 2), -EBADF);
    m = msg(VU_ADD_MEM_REG, sizeof(struct vu_mem_reg));
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_mem_reg), 0), -EBADF);
    m = msg(VU_REM_MEM_REG, sizeof(struct vu_mem_reg));
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_mem_reg), 2), -EBADF);
    /* Vring fds: one unless the NOFD bit says none. */
    m = msg(VU_SET_VRING_KICK, 8);
    m.payload.u64 = 1;
    assert_int_equal(vu_msg_check(&m, 8, 1), 0);
    assert_int_equal(vu_msg_check(&m, 8, 0), -EBADF);
    m.payload.u64 = 1 | VU_VRING_NOFD;
    assert_int_equal(vu_msg_check(&m, 8, 0), 0);
    assert_int_equal(vu_msg_check(&m, 8, 1), -EBADF);
    assert_int_equal(vu_msg_check(&m, 8, -1), -EBADF);
    assert_int_equal(vu_msg_check(&m, 8, VU_MAX_FDS + 1), -EBADF);
}

static void test_unknown(void **state)
{
    (void)state;
    struct vu_msg m = msg(19, 8); /* SEND_RARP: a net device's */
    assert_int_equal(vu_msg_check(&m, 8, 0), -ENOSYS);
    m = msg(999, 0);
    assert_int_equal(vu_msg_check(&m, 0, 0), -ENOSYS);
    m = msg(UINT32_MAX, 8);
    assert_int_equal(vu_msg_check(&m, 8, 0), -ENOSYS);
    assert_null(vu_request_name(999));
    /* An unknown id is still checked for a sane header first. */
    m = msg(999, 0);
    m.hdr.flags = 0;
    assert_int_equal(vu_msg_check(&m, 0, 0), -EBADMSG);
}

/* GET_CONFIG / SET_CONFIG: the size field must match the payload, at most 256. */
static void test_config_sizes(void **state)
{
    (void)state;
    struct vu_msg m = msg(VU_GET_CONFIG, VU_CONFIG_HDR_SIZE + 40);
    m.payload.config.size = 40;
    assert_int_equal(vu_msg_check(&m, VU_CONFIG_HDR_SIZE + 40, 0), 0);
    assert_true(vu_request_has_reply(VU_GET_CONFIG));
    assert_false(vu_request_has_reply(VU_SET_CONFIG));
    m.payload.config.size = 39; /* disagrees with the payload */
    assert_int_equal(vu_msg_check(&m, VU_CONFIG_HDR_SIZE + 40, 0), -EBADMSG);
    m = msg(VU_GET_CONFIG, 8); /* shorter than the config header */
    assert_int_equal(vu_msg_check(&m, 8, 0), -EBADMSG);
    m = msg(VU_GET_CONFIG, VU_CONFIG_HDR_SIZE + 300);
    m.payload.config.size = 300; /* beyond VHOST_USER_MAX_CONFIG_SIZE */
    assert_int_equal(vu_msg_check(&m, VU_CONFIG_HDR_SIZE + 300, 0), -EBADMSG);
    m = msg(VU_SET_CONFIG, VU_CONFIG_HDR_SIZE + 4);
    m.payload.config.size = 4;
    assert_int_equal(vu_msg_check(&m, VU_CONFIG_HDR_SIZE + 4, 0), 0);
    assert_int_equal(vu_msg_check(&m, VU_CONFIG_HDR_SIZE + 4, 1), -EBADF);
}

/* Reading windows of virtio-fs's config space: any window inside, nothing outside. */
static void test_config_read(void **state)
{
    (void)state;
    struct vu_fs_config space = {.tag = "myfs", .num_request_queues = 4};
    struct vu_config req = {0}, rep;
    uint32_t size;

    assert_int_equal(sizeof(space), 40);
    req.size = 40;
    assert_int_equal(vu_config_read(&req, &space, sizeof(space), &rep, &size), 52);
    assert_int_equal(size, VU_CONFIG_HDR_SIZE + 40);
    assert_memory_equal(rep.region, "myfs\0", 5);
    assert_int_equal(rep.region[36], 4);
    /* A window: the queue count alone. */
    req.offset = 36;
    req.size = 4;
    assert_int_equal(vu_config_read(&req, &space, sizeof(space), &rep, &size), 16);
    assert_int_equal(rep.offset, 36);
    assert_int_equal(rep.region[0], 4);
    /* Empty window at the end: fine. */
    req.offset = 40;
    req.size = 0;
    assert_int_equal(vu_config_read(&req, &space, sizeof(space), &rep, &size), 12);
    /* Outside, overflowing, or unknown flags: an error and no payload. */
    const struct vu_config bad[] = {
        {.offset = 37, .size = 4},
        {.offset = 41, .size = 0},
        {.offset = UINT32_MAX, .size = 2},
        {.offset = 4, .size = UINT32_MAX - 3},
        {.offset = 0, .size = 257},
        {.offset = 0, .size = 4, .flags = 2},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(vu_config_read(&bad[i], &space, sizeof(space), &rep, &size), -EINVAL);
        assert_int_equal(size, 0);
    }
    req = (struct vu_config){.offset = 0, .size = 8, .flags = VU_CONFIG_F_MIGRATION};
    assert_int_equal(vu_config_read(&req, &space, sizeof(space), &rep, &size), 20);
}

/* The live migration messages: the dirty log's and the device state's. */
static void test_migration_msgs(void **state)
{
    (void)state;
    struct vu_msg m = msg(VU_SET_LOG_BASE, sizeof(struct vu_log));
    assert_int_equal(sizeof(struct vu_log), 16);
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_log), 1), 0);
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_log), 0), -EBADF); /* no log fd */
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_log), 2), -EBADF);
    m = msg(VU_SET_LOG_BASE, 8); /* the u64 of the fd-less legacy form */
    assert_int_equal(vu_msg_check(&m, 8, 1), -EBADMSG);
    assert_true(vu_request_has_reply(VU_SET_LOG_BASE));

    m = msg(VU_SET_LOG_FD, 0);
    assert_int_equal(vu_msg_check(&m, 0, 1), 0);
    assert_int_equal(vu_msg_check(&m, 0, 0), -EBADF);
    m = msg(VU_SET_LOG_FD, 8);
    assert_int_equal(vu_msg_check(&m, 8, 1), -EBADMSG);

    m = msg(VU_SET_DEVICE_STATE_FD, sizeof(struct vu_device_state));
    assert_int_equal(sizeof(struct vu_device_state), 8);
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_device_state), 1), 0);
    assert_int_equal(vu_msg_check(&m, sizeof(struct vu_device_state), 0), -EBADF);
    m = msg(VU_SET_DEVICE_STATE_FD, 4);
    assert_int_equal(vu_msg_check(&m, 4, 1), -EBADMSG);
    m = msg(VU_SET_DEVICE_STATE_FD, 16);
    assert_int_equal(vu_msg_check(&m, 16, 1), -EBADMSG);
    assert_true(vu_request_has_reply(VU_SET_DEVICE_STATE_FD));
    assert_string_equal(vu_request_name(VU_SET_DEVICE_STATE_FD), "SET_DEVICE_STATE_FD");

    m = msg(VU_CHECK_DEVICE_STATE, 0);
    assert_int_equal(vu_msg_check(&m, 0, 0), 0);
    assert_int_equal(vu_msg_check(&m, 0, 1), -EBADF);
    m = msg(VU_CHECK_DEVICE_STATE, 8);
    assert_int_equal(vu_msg_check(&m, 8, 0), -EBADMSG);
    assert_true(vu_request_has_reply(VU_CHECK_DEVICE_STATE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed), cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_truncated),   cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_mem_table),   cmocka_unit_test(test_wrong_fd_count),
        cmocka_unit_test(test_unknown),     cmocka_unit_test(test_config_sizes),
        cmocka_unit_test(test_config_read), cmocka_unit_test(test_migration_msgs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
