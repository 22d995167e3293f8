/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Adaptive busy-polling of the request queues (--poll-us, on by default): the
 * rules that size the poll window and decide whether to poll at all. Pure (no
 * clock, no threads, no files): queue.c measures, this decides, and a unit
 * test drives it with made-up timings.
 *
 * After draining its queues, a queue thread spins on their avail indexes for up
 * to the current window before it re-arms notifications and sleeps on the kick
 * eventfds. A request caught while spinning costs the driver no kick and the
 * daemon no wake-up (at queue depth 1 that is most of the round trip); a window
 * that runs out empty costs a CPU for its length. So the window follows the gaps
 * the thread actually sees between draining its queues and their next request
 * ("idle"), as QEMU's adaptive AioContext polling does (util/aio-posix.c,
 * adjust_polling_time: poll-max-ns, poll-grow, poll-shrink):
 *
 *   idle <= window          a hit, the sweet spot: the window stays as it is.
 *   window < idle <= cap    a miss a longer window would have caught (the thread
 *                           slept, and the kick came within the cap): the window
 *                           doubles, from VQT_POLL_START_NS, up to the cap
 *                           (--poll-us; QEMU's poll-grow 2 and its 4 us start).
 *   idle > cap, or unknown  a miss no window would have caught (the queues went
 *                           quiet): the window halves (poll-shrink 2); below
 *                           VQT_POLL_START_NS it is 0, and a quiet thread then
 *                           sleeps at once, burning nothing. A window of 0
 *                           still measures each sleep, so the first short gap
 *                           brings polling back.
 *   preempted               the poller lost its CPU while spinning (queue.c sees
 *                           two looks at the clock far apart): the CPU is wanted
 *                           by others, and the driver may even be waiting for
 *                           it. Counted as unknown: halve, and sleep now.
 *
 * The cap bounds the CPU spent per gap; a thread whose queues went quiet
 * spends at most cap + cap/2 + ... < 2 x cap before it stops polling.
 *
 * And a poller spins only on a CPU nobody else wants (vqt_poll_cpu_free): before
 * a window, queue.c looks at how many tasks the machine is running right now
 * (/proc/loadavg, at most once per VQT_POLL_LOAD_NS), and with more running
 * than CPUs online it sleeps at once without touching the window. Spinning
 * then could only take time from a runnable task, the guest's vCPUs first.
 */
#ifndef VUFSD_QPOLL_H
#define VUFSD_QPOLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The window's first step up from 0 (QEMU starts polling at 4 us too); a shorter
 * window is not worth a spin loop. */
#define VQT_POLL_START_NS 4000u
/* --poll-us's largest value (options.c): one second. */
#define VQT_POLL_MAX_US 1000000u
/* How often the machine's running tasks are sampled (queue.c). */
#define VQT_POLL_LOAD_NS 1000000u

/*
 * The next window after a gap. cur_ns: the window just used (0: did not poll);
 * cap_ns: --poll-us in ns (0: polling off, always returns 0); idle_ns: the gap
 * from the end of the batch to the next request, or UINT64_MAX when it is not
 * known (the thread was woken for something else: stop, reconfiguration).
 */
uint32_t vqt_poll_next(uint32_t cur_ns, uint32_t cap_ns, uint64_t idle_ns);

/*
 * The tasks running now on all CPUs, from /proc/loadavg's text ("0.41 0.30 0.25
 * 3/412 9876": the 3 of "running/existing"). False if text is not of that form.
 */
bool vqt_poll_parse_running(const char *text, size_t len, unsigned *running);

/*
 * Whether a poller may spin: running (the tasks running now, counted while the
 * poller itself runs, so it is one of them) leaves a CPU of cpus_online for it.
 * Unknown (cpus_online 0) allows it: the preemption check still applies.
 */
bool vqt_poll_cpu_free(unsigned running, unsigned cpus_online);

#endif
