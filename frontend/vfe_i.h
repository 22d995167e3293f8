/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vfe internals shared by its files: cleanup helpers and barriers. */
#ifndef VFE_I_H
#define VFE_I_H

#include <errno.h>
#include <unistd.h>

static inline void vfe_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
#define _cleanup_close_ __attribute__((cleanup(vfe_closep)))

/* Hands an fd out of a _cleanup_close_ variable. */
static inline int vfe_take_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}
#define TAKE_FD(fd) vfe_take_fd(&(fd))

/* Ring memory ordering (the backend is another process on another CPU). */
#define vfe_smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define vfe_smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#define vfe_smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#define VFE_DEFAULT_TIMEOUT_MS 10000

#define VFE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
