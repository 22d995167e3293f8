/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The worker pool (prefix vpool_) behind --thread-pool-size: N pthreads taking
 * items from one FIFO. Plain pthreads rather than GThreadPool, whose thread
 * spawner makes syscalls (sched_getattr/sched_setattr) the seccomp allowlist has
 * no reason to permit.
 */
#ifndef VUFSD_POOL_H
#define VUFSD_POOL_H

/* Embed in the item; the pool links items through it. */
struct vpool_item {
    struct vpool_item *next;
};

struct vpool;

/* Starts n threads (n >= 1) that call run(item) for every pushed item. NULL on failure. */
/* n worker threads running run(item) for each pushed item: 0 and *out, or -errno. */
int vpool_new(unsigned n, void (*run)(struct vpool_item *item), struct vpool **out);
void vpool_push(struct vpool *p, struct vpool_item *item);
/* Runs every queued item, then joins the threads and frees the pool. */
void vpool_free(struct vpool *p);

#endif
