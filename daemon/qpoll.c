/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "qpoll.h"

uint32_t vqt_poll_next(uint32_t cur_ns, uint32_t cap_ns, uint64_t idle_ns)
{
    if (cap_ns == 0)
        return 0;
    if (cur_ns > cap_ns)
        cur_ns = cap_ns;
    if (idle_ns <= cap_ns) {
        /* A hit, or a miss a longer window would have caught: grow. */
        uint64_t next = (uint64_t)cur_ns * 2;
        if (next < VQT_POLL_MIN_NS)
            next = VQT_POLL_MIN_NS;
        return next > cap_ns ? cap_ns : (uint32_t)next;
    }
    /* The queue went quiet for longer than any window: shrink. */
    uint32_t next = cur_ns / 2;
    return next < VQT_POLL_MIN_NS ? 0 : next;
}
