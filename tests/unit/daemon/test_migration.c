/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The device state transfer of live migration (SET_DEVICE_STATE_FD and
 * CHECK_DEVICE_STATE, daemon/migration.c) on a real device and real pipes, the
 * test playing the frontend: a state larger than a pipe buffer goes out and
 * comes in whole; what the frontend sends that is not a state transfer (a bad
 * direction or phase, a file instead of a pipe, the wrong end, a check with no
 * transfer, a check before the pipe was drained, too many bytes) is refused,
 * the fd left to the caller, and nothing hangs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "device.h"
#include "vu_msg.h"

/* Three pipe buffers and a bit: the transfer cannot happen in one write. */
#define STATE_LEN (3u * 65536u + 12345u)

static uint8_t pattern(size_t i)
{
    return (uint8_t)(i * 37 + (i >> 11));
}

struct fixture {
    int load_ret;       /* what state_load answers */
    size_t loaded_len;  /* what it was given */
    bool loaded_ok;     /* and whether the bytes were the pattern */
    unsigned saves;
};
static struct fixture fx;

static int save_state(struct vufsd_dev *dev, uint8_t **buf, size_t *len)
{
    (void)dev;
    fx.saves++;
    uint8_t *b = malloc(STATE_LEN);
    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < STATE_LEN; i++)
        b[i] = pattern(i);
    *buf = b;
    *len = STATE_LEN;
    return 0;
}

static int load_state(struct vufsd_dev *dev, const uint8_t *buf, size_t len)
{
    (void)dev;
    fx.loaded_len = len;
    fx.loaded_ok = true;
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern(i))
            fx.loaded_ok = false;
    return fx.load_ret;
}

static const struct fll_ops no_ops;
static struct vufsd_config cfg;

static struct vufsd_dev *new_dev(bool migrates)
{
    struct vdev_config dc = {.cfg = &cfg, .ops = &no_ops};
    if (migrates) {
        dc.state_save = save_state;
        dc.state_load = load_state;
    }
    int err = 0;
    memset(&fx, 0, sizeof(fx));
    struct vufsd_dev *dev = vdev_new(&dc, &err);
    assert_non_null(dev);
    return dev;
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* The source: the frontend reads the pipe to its end, then checks. */
static void test_save(void **state)
{
    (void)state;
    struct vufsd_dev *dev = new_dev(true);
    assert_true(vmig_supported(dev));
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, VU_STATE_PHASE_STOPPED, p[1]), 0);
    assert_int_equal(fx.saves, 1);
    uint8_t *got = malloc(STATE_LEN + 1);
    size_t len = 0;
    ssize_t n;
    while ((n = read(p[0], got + len, STATE_LEN + 1 - len)) > 0)
        len += (size_t)n;
    assert_int_equal(n, 0); /* the daemon closed its end: the end of the state */
    assert_int_equal(len, STATE_LEN);
    for (size_t i = 0; i < len; i++)
        if (got[i] != pattern(i))
            fail_msg("byte %zu", i);
    assert_int_equal(vmig_check(dev), 0);
    /* A second check: no transfer any more. */
    assert_int_equal(vmig_check(dev), -EPROTO);
    close(p[0]);
    free(got);
    vdev_free(dev);
}

struct feeder {
    int fd;
    size_t len;
};

static void *feed(void *arg)
{
    struct feeder *f = arg;
    uint8_t buf[8192];
    size_t off = 0;
    while (off < f->len) {
        size_t n = f->len - off < sizeof(buf) ? f->len - off : sizeof(buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(off + i);
        ssize_t w = write(f->fd, buf, n);
        if (w <= 0)
            break; /* EPIPE: the daemon stopped reading */
        off += (size_t)w;
    }
    close(f->fd);
    return NULL;
}

/* The destination: the frontend writes the state and closes, then checks. */
static void test_load(void **state)
{
    (void)state;
    struct vufsd_dev *dev = new_dev(true);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_LOAD, VU_STATE_PHASE_STOPPED, p[0]), 0);
    struct feeder f = {.fd = p[1], .len = STATE_LEN};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, feed, &f), 0);
    pthread_join(t, NULL);
    assert_int_equal(vmig_check(dev), 0);
    assert_int_equal(fx.loaded_len, STATE_LEN);
    assert_true(fx.loaded_ok);

    /* A state the filesystem refuses: CHECK says so. */
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_LOAD, VU_STATE_PHASE_STOPPED, p[0]), 0);
    fx.load_ret = -EBADMSG;
    f = (struct feeder){.fd = p[1], .len = 100};
    feed(&f);
    assert_int_equal(vmig_check(dev), -EBADMSG);
    assert_int_equal(fx.loaded_len, 100);

    /* More than a state may be: the reader stops, CHECK fails. */
    dev->mig.max = 1u << 20;
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_LOAD, VU_STATE_PHASE_STOPPED, p[0]), 0);
    f = (struct feeder){.fd = p[1], .len = 4u << 20};
    assert_int_equal(pthread_create(&t, NULL, feed, &f), 0);
    pthread_join(t, NULL);
    fx.loaded_len = 0;
    assert_int_equal(vmig_check(dev), -EFBIG);
    assert_int_equal(fx.loaded_len, 0); /* never handed to the filesystem */
    vdev_free(dev);
}

/* What is refused, with the fd left to the caller. */
static void test_refused(void **state)
{
    (void)state;
    struct vufsd_dev *dev = new_dev(true);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, 2, VU_STATE_PHASE_STOPPED, p[1]), -EINVAL);
    assert_int_equal(vmig_set_fd(dev, UINT32_MAX, VU_STATE_PHASE_STOPPED, p[1]), -EINVAL);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, 1, p[1]), -EINVAL);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, UINT32_MAX, p[1]), -EINVAL);
    /* The wrong end of the pipe for the direction. */
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, VU_STATE_PHASE_STOPPED, p[0]), -EBADF);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_LOAD, VU_STATE_PHASE_STOPPED, p[1]), -EBADF);
    /* Not a stream: an eventfd, a regular file. */
    int e = eventfd(0, EFD_CLOEXEC);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, VU_STATE_PHASE_STOPPED, e), -EBADF);
    FILE *tf = tmpfile();
    assert_non_null(tf);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_LOAD, VU_STATE_PHASE_STOPPED, fileno(tf)), -EBADF);
    assert_int_equal(fx.saves, 0);
    assert_true(fd_open(p[0]) && fd_open(p[1]) && fd_open(e));
    /* CHECK with nothing transferred. */
    assert_int_equal(vmig_check(dev), -EPROTO);
    close(e);
    fclose(tf);

    /* A device that cannot migrate refuses outright. */
    struct vufsd_dev *plain = new_dev(false);
    assert_false(vmig_supported(plain));
    assert_int_equal(vmig_set_fd(plain, VU_STATE_DIR_SAVE, VU_STATE_PHASE_STOPPED, p[1]),
                     -EOPNOTSUPP);
    assert_true(fd_open(p[1]));
    vdev_free(plain);
    close(p[0]);
    close(p[1]);
    vdev_free(dev);
}

/* A frontend that checks without draining the pipe, one that starts a second
 * transfer over the first, and one that leaves mid-transfer: errors, no hang. */
static void test_no_hang(void **state)
{
    (void)state;
    struct vufsd_dev *dev = new_dev(true);
    dev->mig.check_wait_ms = 200;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, VU_STATE_PHASE_STOPPED, p[1]), 0);
    assert_int_equal(vmig_check(dev), -ECANCELED); /* the writer was stuck on a full pipe */
    close(p[0]);

    /* Loading, the frontend never closes its end. */
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_LOAD, VU_STATE_PHASE_STOPPED, p[0]), 0);
    assert_int_equal(write(p[1], "abc", 3), 3);
    assert_int_equal(vmig_check(dev), -ECANCELED);
    assert_int_equal(fx.loaded_len, 0);
    close(p[1]);

    /* Two transfers in a row without a check: the first is dropped. */
    int q[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(pipe2(q, O_CLOEXEC), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, VU_STATE_PHASE_STOPPED, p[1]), 0);
    assert_int_equal(vmig_set_fd(dev, VU_STATE_DIR_SAVE, VU_STATE_PHASE_STOPPED, q[1]), 0);
    char c;
    while (read(p[0], &c, 1) > 0)
        ; /* the first pipe ends (closed by the daemon) */
    close(p[0]);
    /* And the device freed mid-transfer (the frontend left). */
    vdev_free(dev);
    close(q[0]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* the feeder writes into pipes the daemon gave up */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_save),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_no_hang),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
