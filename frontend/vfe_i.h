/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vfe internals shared by its files: the common helpers and barriers. */
#ifndef VFE_I_H
#define VFE_I_H

#include "vufs_util.h"

/*
 * Binary search over n disjoint ranges sorted by start: the index of the first
 * whose end (end(arr, i), exclusive) lies past x, or n.
 */
static inline size_t vfe_first_end_after(const void *arr, size_t n, uint64_t x,
                                         uint64_t (*end)(const void *arr, size_t i))
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (end(arr, mid) <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Ring memory ordering (the backend is another process on another CPU). */
#define vfe_smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define vfe_smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#define vfe_smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#define VFE_DEFAULT_TIMEOUT_MS 10000

#define VFE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
