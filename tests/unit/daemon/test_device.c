/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The backend request channel (backend -> frontend, what DAX mapping uses): a
 * thread plays the frontend on the other end of a socketpair and answers each
 * request the way the test case wants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device.h"
#include "vu_msg.h"

enum answer { ANSWER_OK, ANSWER_FAIL, ANSWER_WRONG_ID, ANSWER_HANG_UP };

struct peer {
    int fd;
    enum answer answer;
    struct vu_msg_hdr got;
    uint8_t payload[64];
    int got_fd;
};

static void *peer_run(void *arg)
{
    struct peer *p = arg;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &p->got, .iov_len = sizeof(p->got)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    p->got_fd = -1;
    if (recvmsg(p->fd, &mh, MSG_WAITALL) != sizeof(p->got))
        return NULL;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (cm && cm->cmsg_type == SCM_RIGHTS)
        memcpy(&p->got_fd, CMSG_DATA(cm), sizeof(int));
    if (p->got.size && p->got.size <= sizeof(p->payload))
        if (recv(p->fd, p->payload, p->got.size, MSG_WAITALL) != (ssize_t)p->got.size)
            return NULL;
    if (p->answer == ANSWER_HANG_UP) {
        shutdown(p->fd, SHUT_RDWR);
        return NULL;
    }
    struct {
        struct vu_msg_hdr h;
        uint64_t v;
    } __attribute__((packed)) r = {
        .h = {.request = p->got.request + (p->answer == ANSWER_WRONG_ID),
              .flags = VU_VERSION | VU_FLAG_REPLY,
              .size = 8},
        .v = p->answer == ANSWER_FAIL ? 1 : 0,
    };
    ssize_t n = send(p->fd, &r, sizeof(r), MSG_NOSIGNAL);
    (void)n;
    return NULL;
}

static const struct fll_ops no_ops;

static struct vufsd_dev *new_dev(struct vufsd_config *cfg)
{
    struct vdev_config dc = {.cfg = cfg, .ops = &no_ops};
    memset(cfg, 0, sizeof(*cfg));
    struct vufsd_dev *dev = NULL;
    assert_int_equal(vdev_new(&dc, &dev), 0);
    return dev;
}

static int ask(struct vufsd_dev *dev, enum answer a, int pass_fd, struct peer *p, uint64_t *value)
{
    int sv[2];
    pthread_t t;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    vdev_set_backend_fd(dev, sv[0]);
    p->fd = sv[1];
    p->answer = a;
    pthread_create(&t, NULL, peer_run, p);
    uint8_t payload[40] = {1, 2, 3};
    int ret = vdev_backend_request(dev, 9, payload, sizeof(payload), pass_fd, value);
    pthread_join(t, NULL);
    close(sv[1]);
    return ret;
}

static void test_requests(void **state)
{
    (void)state;
    struct vufsd_config cfg;
    struct vufsd_dev *dev = new_dev(&cfg);
    struct peer p;
    uint64_t v = 0;
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);

    /* Without REPLY_ACK there is no way to learn the result: refused. */
    assert_int_equal(vdev_backend_request(dev, 9, NULL, 0, -1, NULL), -EOPNOTSUPP);
    dev->protocol_features = 1ull << VU_PROTOCOL_F_REPLY_ACK;
    /* No channel yet. */
    assert_int_equal(vdev_backend_request(dev, 9, NULL, 0, -1, NULL), -ENOTCONN);
    /* An fd needs BACKEND_SEND_FD. */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    vdev_set_backend_fd(dev, sv[0]);
    assert_int_equal(vdev_backend_request(dev, 9, NULL, 0, pipefd[0], NULL), -EOPNOTSUPP);
    close(sv[1]);
    dev->protocol_features |= 1ull << VU_PROTOCOL_F_BACKEND_SEND_FD;

    memset(&p, 0, sizeof(p));
    assert_int_equal(ask(dev, ANSWER_OK, pipefd[0], &p, &v), 0);
    assert_int_equal(p.got.request, 9);
    assert_int_equal(p.got.flags, VU_VERSION | VU_FLAG_NEED_REPLY);
    assert_int_equal(p.got.size, 40);
    assert_int_equal(p.payload[2], 3);
    assert_true(p.got_fd >= 0); /* the fd travelled */
    close(p.got_fd);
    assert_int_equal(v, 0);

    assert_int_equal(ask(dev, ANSWER_FAIL, -1, &p, &v), -EIO);
    assert_int_equal(v, 1);
    assert_int_equal(p.got_fd, -1);
    assert_int_equal(ask(dev, ANSWER_WRONG_ID, -1, &p, &v), -EPROTO);
    assert_int_equal(ask(dev, ANSWER_HANG_UP, -1, &p, &v), -ECONNRESET);
    /* Oversized payloads are refused before anything is sent. */
    static uint8_t big[VU_MAX_PAYLOAD + 1];
    assert_int_equal(vdev_backend_request(dev, 9, big, sizeof(big), -1, NULL), -EINVAL);

    close(pipefd[0]);
    close(pipefd[1]);
    vdev_free(dev);
}

/*
 * RESET_OWNER / RESET_DEVICE resets the device, not the connection: QEMU does not
 * negotiate the protocol features nor send the backend channel again, and keeps
 * waiting for REPLY_ACK answers.
 */
static void test_reset_keeps_connection(void **state)
{
    (void)state;
    struct vufsd_config cfg;
    struct vufsd_dev *dev = new_dev(&cfg);
    struct peer p = {0};
    uint64_t v = 1;
    int sv[2];
    pthread_t t;

    vdev_set_owned(dev);
    dev->features = 1ull << VU_F_PROTOCOL_FEATURES;
    dev->protocol_features = 1ull << VU_PROTOCOL_F_REPLY_ACK;
    dev->status = 0xf;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    vdev_set_backend_fd(dev, sv[0]);

    vdev_reset(dev);
    assert_int_equal(dev->state, VDEV_OWNED);
    assert_true(vdev_has_protocol_feature(dev, VU_PROTOCOL_F_REPLY_ACK));
    assert_int_equal(dev->status, 0);
    assert_int_equal(dev->features, 0); /* the driver acks them again */

    /* The channel given before the reset still carries requests. */
    p.fd = sv[1];
    p.answer = ANSWER_OK;
    pthread_create(&t, NULL, peer_run, &p);
    assert_int_equal(vdev_backend_request(dev, 9, NULL, 0, -1, &v), 0);
    pthread_join(t, NULL);
    assert_int_equal(p.got.request, 9);
    assert_int_equal(v, 0);
    close(sv[1]);
    vdev_free(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_reset_keeps_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
