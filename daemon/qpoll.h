/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Adaptive busy-polling of a request queue (--poll-us): the rule that sizes the
 * poll window. Pure (no clock, no threads): queue.c measures, this decides, and
 * a unit test drives it with made-up timings.
 *
 * After draining its ring, a queue thread spins on the avail index for up to the
 * current window before it re-arms notifications and sleeps on the kick eventfd.
 * A request caught while spinning costs the driver no kick and the daemon no
 * wakeup (at queue depth 1 that is most of the round trip); a window that runs
 * out empty costs a core for its length. So the window follows the gaps the
 * queue actually sees between draining it and its next request ("idle"):
 *
 *   idle <= window          a hit: the window was long enough. It doubles (at
 *                           least to VQT_POLL_MIN_NS), up to the --poll-us cap,
 *                           so a steady stream of short gaps keeps it at the cap.
 *   window < idle <= cap    a miss a longer window would have caught (the thread
 *                           slept, and the kick came within the cap): grow alike.
 *   idle > cap, or unknown  a miss no window would have caught (the queue went
 *                           quiet): halve the window; below VQT_POLL_MIN_NS it is
 *                           0, and an idle queue then sleeps at once, burning
 *                           nothing. A window of 0 still measures each sleep, so
 *                           the first short gap brings polling back.
 *   preempted               the poller lost its CPU while spinning (queue.c sees
 *                           two looks at the clock far apart): the CPU is wanted
 *                           by others, and the driver may even be waiting for it.
 *                           Counted as unknown: halve, and sleep now.
 *
 * The cap is a hard bound on CPU spent per gap; a queue that has gone quiet
 * wastes at most cap + cap/2 + ... < 2 x cap before it stops polling.
 */
#ifndef VUFSD_QPOLL_H
#define VUFSD_QPOLL_H

#include <stdbool.h>
#include <stdint.h>

/* The smallest window worth a spin loop; the first step up from 0. */
#define VQT_POLL_MIN_NS 1000u
/* --poll-us's largest value (options.c): one second. */
#define VQT_POLL_MAX_US 1000000u

/*
 * The next window after a gap. cur_ns: the window just used (0: did not poll);
 * cap_ns: --poll-us in ns (0: polling off, always returns 0); idle_ns: the gap
 * from the end of the batch to the next request, or UINT64_MAX when it is not
 * known (the thread was woken for something else: stop, reconfiguration).
 */
uint32_t vqt_poll_next(uint32_t cur_ns, uint32_t cap_ns, uint64_t idle_ns);

#endif
