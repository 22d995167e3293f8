/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vfe internals shared by its files: the common helpers and barriers. */
#ifndef VFE_I_H
#define VFE_I_H

#include "vufs_util.h"

/* Ring memory ordering (the backend is another process on another CPU). */
#define vfe_smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define vfe_smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#define vfe_smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#define VFE_DEFAULT_TIMEOUT_MS 10000

#define VFE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
