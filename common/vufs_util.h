/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufs_util.h: the few C helpers every module uses (prefix vufs_, plus the
 * systemd-style cleanup macros). A leaf: it includes only the C library, never a
 * header of ours, so any module may include it without gaining a dependency
 * (the layering test, tests/layering.py, lets every module include it and
 * nothing else outside its own directory unless docs/design.md allows the edge).
 *
 *   _cleanup_free_ / _cleanup_close_   free() / close() a local at scope exit
 *                                      (systemd's; TAKE_FD hands an fd out)
 *   vufs_close(&fd)                    close and set to -1 (errno kept)
 *   container_of(ptr, type, member)    the struct a member pointer lies in
 *   vufs_now_ns()                      CLOCK_MONOTONIC in ns (vDSO: no syscall)
 *   vufs_deadline(clock, ns)           a timespec ns from now on clock, for
 *                                      pthread_cond_timedwait and friends
 *   vufs_cond_init_monotonic(&cond)    a condition variable timed on CLOCK_MONOTONIC
 *   vufs_wait_input(fd, stop_fd, ms)   a thread's wait for its input or its stop
 */
#ifndef VUFS_UTIL_H
#define VUFS_UTIL_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define VUFS_NSEC_PER_SEC UINT64_C(1000000000)

/* ---- Cleanup attributes ---------------------------------------------------------- */

static inline void vufs_freep(void *p)
{
    free(*(void **)p);
}
#define _cleanup_free_ __attribute__((cleanup(vufs_freep)))

/* Closes *fd if it is open, keeping errno, and marks it closed. */
static inline void vufs_close(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
    *fd = -1;
}
#define _cleanup_close_ __attribute__((cleanup(vufs_close)))

/* Hands an fd out of a _cleanup_close_ variable: TAKE_FD(fd) returns it and
 * leaves -1 behind, so the cleanup closes nothing. */
static inline int vufs_take_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}
#define TAKE_FD(fd) vufs_take_fd(&(fd))

/* ---- Structs ---------------------------------------------------------------------- */

#ifndef container_of
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
/* ---- Waiting --------------------------------------------------------------------- */

/*
 * Waits until fd or stop_fd has input (EINTR retried; timeout_ms as poll's,
 * -1 for none): 1 when fd has (or is at its end), 0 when stop_fd has (stop
 * wins over input), -ETIMEDOUT, or -errno.
 */
static inline int vufs_wait_input(int fd, int stop_fd, int timeout_ms)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
        int n = poll(p, 2, timeout_ms);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ETIMEDOUT;
        return p[1].revents ? 0 : 1;
    }
}

#endif

/* ---- Time ------------------------------------------------------------------------- */

static inline uint64_t vufs_timespec_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * VUFS_NSEC_PER_SEC + (uint64_t)ts->tv_nsec;
}

static inline uint64_t vufs_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return vufs_timespec_ns(&ts);
}

/* ns after now on clock (CLOCK_MONOTONIC for condition variables set up with
 * it, CLOCK_REALTIME for the default ones), normalised. */
static inline struct timespec vufs_deadline(clockid_t clock, uint64_t ns)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    ts.tv_sec += (time_t)(ns / VUFS_NSEC_PER_SEC);
    ts.tv_nsec += (long)(ns % VUFS_NSEC_PER_SEC);
    if (ts.tv_nsec >= (long)VUFS_NSEC_PER_SEC) {
        ts.tv_sec++;
        ts.tv_nsec -= (long)VUFS_NSEC_PER_SEC;
    }
    return ts;
}

/* A condition variable whose timed waits run on CLOCK_MONOTONIC (deadlines from
 * vufs_deadline(CLOCK_MONOTONIC, ...)), so a wall-clock step cannot stretch them. */
static inline void vufs_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t ca;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
}

#endif
