/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vhost-user message encoding, and vfe_conn's I/O against a fake backend end. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"

static void test_init_and_setters(void **state)
{
    struct vfe_msg m;
    memset(&m, 0xff, sizeof(m));
    vfe_msg_init(&m, VFE_VU_SET_FEATURES, 0x3 | VFE_VU_FLAG_NEED_REPLY);
    assert_int_equal(m.request, VFE_VU_SET_FEATURES);
    /* Caller's version bits are replaced by version 1. */
    assert_int_equal(m.flags, VFE_VU_VERSION | VFE_VU_FLAG_NEED_REPLY);
    assert_int_equal(m.size, 0);
    assert_int_equal(vfe_msg_wire_len(&m), 12);

    vfe_msg_set_u64(&m, 0x1122334455667788ull);
    assert_int_equal(m.size, 8);
    assert_int_equal(vfe_msg_wire_len(&m), 20);
    const uint8_t *raw = (const uint8_t *)&m;
    assert_int_equal(raw[12], 0x88); /* little-endian payload right after the header */
    assert_int_equal(raw[19], 0x11);

    vfe_msg_set_state(&m, 3, 256);
    assert_int_equal(m.size, 8);
    assert_int_equal(m.payload.state.index, 3);
    assert_int_equal(m.payload.state.num, 256);

    struct vfe_vu_addr a = { .index = 2, .desc_user_addr = 0x1000, .used_user_addr = 0x3000,
                             .avail_user_addr = 0x2000 };
    vfe_msg_set_addr(&m, &a);
    assert_int_equal(m.size, 40);
    uint64_t used;
    memcpy(&used, raw + 12 + 16, 8); /* index, flags, desc, then used */
    assert_int_equal(used, 0x3000);
}

static void test_mem_table(void **state)
{
    struct vfe_msg m;
    vfe_msg_init(&m, VFE_VU_SET_MEM_TABLE, 0);
    struct vfe_vu_region r[9];
    for (unsigned i = 0; i < 9; i++)
        r[i] = (struct vfe_vu_region){ .guest_phys_addr = i << 20, .memory_size = 4096,
                                       .userspace_addr = 0x7000 + i, .mmap_offset = i };
    assert_int_equal(vfe_msg_set_mem(&m, r, 9), -E2BIG);
    assert_int_equal(vfe_msg_set_mem(&m, r, 3), 0);
    /* The count, the padding and three regions: not the whole table of eight. */
    assert_int_equal(m.size, 8 + 3 * 32);
    assert_int_equal(vfe_msg_wire_len(&m), 12 + 8 + 3 * 32);
    assert_int_equal(m.payload.mem.nregions, 3);
    assert_int_equal(m.payload.mem.regions[2].guest_phys_addr, 2 << 20);
    assert_int_equal(m.payload.mem.regions[2].mmap_offset, 2);
    assert_int_equal(m.payload.mem.regions[3].memory_size, 0); /* unused entries zeroed */

    /* ADD_MEM_REG: 8 bytes of padding, then one region. */
    vfe_msg_init(&m, VFE_VU_ADD_MEM_REG, 0);
    memset(m.payload.raw, 0xff, 8);
    vfe_msg_set_mem_reg(&m, &r[2]);
    assert_int_equal(m.size, 40);
    uint64_t pad;
    memcpy(&pad, m.payload.raw, 8);
    assert_int_equal(pad, 0);
    struct vfe_vu_region got;
    memcpy(&got, m.payload.raw + 8, sizeof(got));
    assert_memory_equal(&got, &r[2], sizeof(got));
}

static void test_check_reply(void **state)
{
    struct vfe_msg rep;
    vfe_msg_init(&rep, VFE_VU_GET_FEATURES, VFE_VU_FLAG_REPLY);
    vfe_msg_set_u64(&rep, 1);
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_GET_FEATURES, 8), 0);
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_GET_PROTOCOL_FEATURES, 8), -EPROTO);
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_GET_FEATURES, 4), -EPROTO);
    rep.flags = VFE_VU_VERSION; /* reply bit missing */
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_GET_FEATURES, 8), -EPROTO);
    rep.flags = 0x2 | VFE_VU_FLAG_REPLY; /* wrong version */
    assert_int_equal(vfe_msg_check_reply(&rep, VFE_VU_GET_FEATURES, 8), -EPROTO);
}

static void test_names(void **state)
{
    assert_string_equal(vfe_msg_name(VFE_VU_SET_VRING_KICK), "SET_VRING_KICK");
    assert_string_equal(vfe_msg_name(VFE_VU_SET_BACKEND_REQ_FD), "SET_BACKEND_REQ_FD");
    assert_string_equal(vfe_msg_name(VFE_VU_ADD_MEM_REG), "ADD_MEM_REG");
    assert_string_equal(vfe_msg_name(VFE_VU_REM_MEM_REG), "REM_MEM_REG");
    assert_string_equal(vfe_msg_name(19), "UNKNOWN");
    assert_string_equal(vfe_msg_name(0xffffffffu), "UNKNOWN");
}

/* ---- Socket I/O against a fake backend end ---------------------------------------- */

struct fake {
    char *dir;
    char *path;
    int listen_fd;
    int peer;           /* the backend's end */
    struct vfe_conn *c;
};

static int setup_fake(void **state)
{
    struct fake *f = g_new0(struct fake, 1);
    f->dir = g_dir_make_tmp("vfe-test-XXXXXX", NULL);
    assert_non_null(f->dir);
    f->path = g_build_filename(f->dir, "s", NULL);
    f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strcpy(sa.sun_path, f->path);
    assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(f->listen_fd, 1), 0);
    struct vfe_conn_config cfg = { .socket_path = f->path, .timeout_ms = 2000 };
    assert_int_equal(vfe_conn_open(&cfg, &f->c), 0);
    f->peer = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    assert_true(f->peer >= 0);
    assert_int_equal(vfe_conn_backend_pid(f->c), 0);
    *state = f;
    return 0;
}

static int teardown_fake(void **state)
{
    struct fake *f = *state;
    vfe_conn_close(f->c);
    if (f->peer >= 0)
        close(f->peer);
    close(f->listen_fd);
    unlink(f->path);
    rmdir(f->dir);
    g_free(f->path);
    g_free(f->dir);
    g_free(f);
    return 0;
}

/* Reads one message on the backend end, with up to 8 fds. */
static ssize_t peer_recv(int fd, void *buf, size_t len, int *fds, unsigned *nfds)
{
    char ctl[CMSG_SPACE(8 * sizeof(int))];
    struct iovec iov = { buf, len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                         .msg_controllen = sizeof(ctl) };
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    *nfds = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_type == SCM_RIGHTS) {
            *nfds = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            memcpy(fds, CMSG_DATA(cm), *nfds * sizeof(int));
        }
    }
    return n;
}

static void peer_send(int fd, uint32_t req, uint32_t flags, uint32_t size, const void *p,
                      size_t plen)
{
    uint8_t buf[12 + 256];
    memcpy(buf, &req, 4);
    memcpy(buf + 4, &flags, 4);
    memcpy(buf + 8, &size, 4);
    memcpy(buf + 12, p, plen);
    assert_int_equal(write(fd, buf, 12 + plen), (ssize_t)(12 + plen));
}

static void test_send_raw_with_fds(void **state)
{
    struct fake *f = *state;
    int pipefd[2];
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    uint64_t v = 0xabcdef;
    /* The size field lies: 100 claimed, 8 sent. */
    assert_int_equal(vfe_conn_send_raw(f->c, 77, VFE_VU_VERSION | 0x40, 100, &v, 8, pipefd, 2), 0);
    uint8_t buf[64];
    int fds[8];
    unsigned nfds;
    assert_int_equal(peer_recv(f->peer, buf, sizeof(buf), fds, &nfds), 20);
    uint32_t h[3];
    memcpy(h, buf, 12);
    assert_int_equal(h[0], 77);
    assert_int_equal(h[1], VFE_VU_VERSION | 0x40);
    assert_int_equal(h[2], 100);
    assert_int_equal(nfds, 2);
    /* The fds are the pipe's ends: write on the received one, read on ours. */
    assert_int_equal(write(fds[1], "x", 1), 1);
    char ch;
    assert_int_equal(read(pipefd[0], &ch, 1), 1);
    assert_int_equal(ch, 'x');
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    close(pipefd[0]);
    close(pipefd[1]);
}

static void test_recv_raw(void **state)
{
    struct fake *f = *state;
    struct vfe_msg m;
    /* Nothing there. */
    assert_int_equal(vfe_conn_recv_raw(f->c, &m, NULL, NULL, 0), -ETIMEDOUT);
    /* An oversized message is drained, and the next one still parses. */
    uint32_t hdr[3] = { 1, 5, VFE_VU_MAX_PAYLOAD + 100 };
    assert_int_equal(write(f->peer, hdr, 12), 12);
    g_autofree uint8_t *junk = g_malloc0(VFE_VU_MAX_PAYLOAD + 100);
    assert_int_equal(write(f->peer, junk, VFE_VU_MAX_PAYLOAD + 100), VFE_VU_MAX_PAYLOAD + 100);
    uint64_t v = 42;
    peer_send(f->peer, VFE_VU_GET_QUEUE_NUM, 5, 8, &v, 8);
    assert_int_equal(vfe_conn_recv_raw(f->c, &m, NULL, NULL, 2000), -EMSGSIZE);
    assert_int_equal(vfe_conn_recv_raw(f->c, &m, NULL, NULL, 2000), 0);
    assert_int_equal(m.request, VFE_VU_GET_QUEUE_NUM);
    assert_int_equal(m.payload.u64, 42);
    /* A header cut short by EOF. */
    assert_int_equal(write(f->peer, hdr, 6), 6);
    close(f->peer);
    f->peer = -1;
    assert_int_equal(vfe_conn_recv_raw(f->c, &m, NULL, NULL, 2000), -ECONNRESET);
}

static void test_call_get_and_ack(void **state)
{
    struct fake *f = *state;
    /* Replies are queued first: the socket buffer holds them for vfe_conn_call. */
    uint64_t feat = 1ull << VFE_F_VERSION_1;
    peer_send(f->peer, VFE_VU_GET_FEATURES, VFE_VU_VERSION | VFE_VU_FLAG_REPLY, 8, &feat, 8);
    uint64_t got = 0;
    assert_int_equal(vfe_conn_get_u64(f->c, VFE_VU_GET_FEATURES, &got), 0);
    assert_int_equal(got, feat);

    /* A reply to the wrong request is a protocol error. */
    peer_send(f->peer, VFE_VU_GET_FEATURES, VFE_VU_VERSION | VFE_VU_FLAG_REPLY, 8, &feat, 8);
    assert_int_equal(vfe_conn_get_u64(f->c, VFE_VU_GET_QUEUE_NUM, &got), -EPROTO);

    /* Without REPLY_ACK, a SET gets no NEED_REPLY and reads nothing. */
    assert_int_equal(vfe_conn_set_u64(f->c, VFE_VU_SET_FEATURES, 5), 0);
    /* With it: a zero ack is success, non-zero is -EIO. */
    vfe_conn_set_reply_ack(f->c, true);
    uint64_t ack = 0;
    peer_send(f->peer, VFE_VU_SET_FEATURES, VFE_VU_VERSION | VFE_VU_FLAG_REPLY, 8, &ack, 8);
    assert_int_equal(vfe_conn_set_u64(f->c, VFE_VU_SET_FEATURES, 6), 0);
    ack = 1;
    peer_send(f->peer, VFE_VU_SET_FEATURES, VFE_VU_VERSION | VFE_VU_FLAG_REPLY, 8, &ack, 8);
    assert_int_equal(vfe_conn_set_u64(f->c, VFE_VU_SET_FEATURES, 7), -EIO);

    /* What the backend saw: GET_FEATURES, GET_QUEUE_NUM, then three SET_FEATURES. */
    uint8_t buf[256];
    int fds[8];
    unsigned nfds;
    ssize_t n = 0, k;
    while (n < 12 * 2 + 20 * 3 && (k = peer_recv(f->peer, buf + n, sizeof(buf) - (size_t)n, fds,
                                                 &nfds)) > 0)
        n += k;
    assert_int_equal(n, 12 * 2 + 20 * 3);
    uint32_t h[3];
    memcpy(h, buf + 24, 12);
    assert_int_equal(h[0], VFE_VU_SET_FEATURES);
    assert_int_equal(h[1], VFE_VU_VERSION); /* no NEED_REPLY before REPLY_ACK */
    memcpy(h, buf + 44, 12);
    assert_int_equal(h[1], VFE_VU_VERSION | VFE_VU_FLAG_NEED_REPLY);
    uint64_t v;
    memcpy(&v, buf + 76, 8);
    assert_int_equal(v, 7);
}

static uint64_t handler_ok(void *opaque, const struct vfe_msg *m, const int *fds, unsigned nfds)
{
    int *seen = opaque;
    __atomic_store_n(seen, (int)m->request, __ATOMIC_RELEASE); /* runs on the channel thread */
    return 0;
}

static void test_backend_channel(void **state)
{
    struct fake *f = *state;
    int seen = 0;
    assert_int_equal(vfe_conn_start_backend_channel(f->c, handler_ok, NULL, &seen), 0);
    uint8_t buf[64];
    int fds[8];
    unsigned nfds;
    assert_int_equal(peer_recv(f->peer, buf, sizeof(buf), fds, &nfds), 12);
    uint32_t h[3];
    memcpy(h, buf, 12);
    assert_int_equal(h[0], VFE_VU_SET_BACKEND_REQ_FD);
    assert_int_equal(nfds, 1);
    int chan = fds[0];
    /* A backend request with NEED_REPLY gets the handler's result as the ack. */
    uint64_t payload[5] = { 0 };
    peer_send(chan, 9, VFE_VU_VERSION | VFE_VU_FLAG_NEED_REPLY, 40, payload, 40);
    uint8_t rep[20];
    ssize_t n = 0, k;
    while (n < 20 && (k = read(chan, rep + n, sizeof(rep) - (size_t)n)) > 0)
        n += k;
    assert_int_equal(n, 20);
    memcpy(h, rep, 12);
    assert_int_equal(h[0], 9);
    assert_int_equal(h[1], VFE_VU_VERSION | VFE_VU_FLAG_REPLY);
    assert_int_equal(h[2], 8);
    uint64_t ack;
    memcpy(&ack, rep + 12, 8);
    assert_int_equal(ack, 0);
    assert_int_equal(__atomic_load_n(&seen, __ATOMIC_ACQUIRE), 9);
    assert_int_equal(vfe_conn_backend_requests(f->c), 1);
    close(chan);
}

static void test_backend_channel_default_fails(void **state)
{
    struct fake *f = *state;
    assert_int_equal(vfe_conn_start_backend_channel(f->c, NULL, NULL, NULL), 0);
    uint8_t buf[64];
    int fds[8];
    unsigned nfds;
    assert_int_equal(peer_recv(f->peer, buf, sizeof(buf), fds, &nfds), 12);
    assert_int_equal(nfds, 1);
    uint64_t payload[5] = { 0 };
    peer_send(fds[0], 10, VFE_VU_VERSION | VFE_VU_FLAG_NEED_REPLY, 40, payload, 40);
    uint8_t rep[20];
    ssize_t n = 0, k;
    while (n < 20 && (k = read(fds[0], rep + n, sizeof(rep) - (size_t)n)) > 0)
        n += k;
    assert_int_equal(n, 20);
    uint64_t ack;
    memcpy(&ack, rep + 12, 8);
    assert_true(ack != 0);
    close(fds[0]);
}

static void test_connect_missing_socket(void **state)
{
    struct vfe_conn *c = NULL;
    struct vfe_conn_config cfg = { .socket_path = "/nonexistent/vfe.sock", .timeout_ms = 100 };
    assert_int_equal(vfe_conn_open(&cfg, &c), -ENOENT);
    struct vfe_conn_config none = { 0 };
    assert_int_equal(vfe_conn_open(&none, &c), -EINVAL);
}

static void test_spawn_dead_backend(void **state)
{
    /* A backend that exits without creating its socket: -ECHILD, reaped. */
    struct vfe_conn *c = NULL;
    struct vfe_conn_config cfg = { .backend_cmd = "/bin/sh -c 'exit 3' {socket} {dir}",
                                   .dir = "/tmp", .timeout_ms = 5000 };
    assert_int_equal(vfe_conn_open(&cfg, &c), -ECHILD);
    /* A backend that never creates it: -ETIMEDOUT, killed. */
    struct vfe_conn_config slow = { .backend_cmd = "/bin/sleep 60", .timeout_ms = 200 };
    assert_int_equal(vfe_conn_open(&slow, &c), -ETIMEDOUT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_setters),
        cmocka_unit_test(test_mem_table),
        cmocka_unit_test(test_check_reply),
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_send_raw_with_fds, setup_fake, teardown_fake),
        cmocka_unit_test_setup_teardown(test_recv_raw, setup_fake, teardown_fake),
        cmocka_unit_test_setup_teardown(test_call_get_and_ack, setup_fake, teardown_fake),
        cmocka_unit_test_setup_teardown(test_backend_channel, setup_fake, teardown_fake),
        cmocka_unit_test_setup_teardown(test_backend_channel_default_fails, setup_fake,
                                        teardown_fake),
        cmocka_unit_test(test_connect_missing_socket),
        cmocka_unit_test(test_spawn_dead_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
