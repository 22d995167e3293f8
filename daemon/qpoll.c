/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "qpoll.h"

uint32_t vqt_poll_next(uint32_t cur_ns, uint32_t cap_ns, uint64_t idle_ns)
{
    if (cap_ns == 0)
        return 0;
    if (cur_ns > cap_ns)
        cur_ns = cap_ns;
    if (cur_ns && idle_ns <= cur_ns)
        return cur_ns; /* a hit: the window is right */
    if (idle_ns <= cap_ns) {
        /* A miss a longer window would have caught: grow. */
        uint64_t next = cur_ns ? (uint64_t)cur_ns * 2 : VQT_POLL_START_NS;
        return next > cap_ns ? cap_ns : (uint32_t)next;
    }
    /* The queues went quiet for longer than any window: shrink. */
    uint32_t next = cur_ns / 2;
    return next < VQT_POLL_START_NS ? 0 : next;
}

bool vqt_poll_parse_running(const char *text, size_t len, unsigned *running)
{
    /* Three load averages, then "R/T": skip three fields and their blanks. */
    size_t i = 0;
    for (int field = 0; field < 3; field++) {
        while (i < len && text[i] != ' ')
            i++;
        while (i < len && text[i] == ' ')
            i++;
    }
    uint64_t r = 0;
    size_t digits = 0;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++) {
        r = r * 10 + (uint64_t)(text[i] - '0');
        if (r > UINT32_MAX)
            return false;
    }
    if (!digits || i >= len || text[i] != '/')
        return false;
    *running = (unsigned)r;
    return true;
}

bool vqt_poll_cpu_free(unsigned running, unsigned cpus_online)
{
    return cpus_online == 0 || running <= cpus_online;
}
