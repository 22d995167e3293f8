/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct vpool {
    void (*run)(struct vpool_item *item);
    unsigned nthreads;
    pthread_t *threads;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Protected by lock: */
    struct vpool_item *head, *tail;
    bool stop; /* no more pushes; threads exit once the FIFO is empty */
};

static void *vpool_thread(void *arg)
{
    struct vpool *p = arg;
    char name[16];

    snprintf(name, sizeof(name), "vufsd-worker");
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->cond, &p->lock);
        struct vpool_item *it = p->head;
        if (!it)
            break; /* stop, and nothing left */
        p->head = it->next;
        if (!p->head)
            p->tail = NULL;
        pthread_mutex_unlock(&p->lock);
        p->run(it);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int vpool_new(unsigned n, void (*run)(struct vpool_item *item), struct vpool **out)
{
    struct vpool *p = n ? calloc(1, sizeof(*p)) : NULL;

    *out = NULL;
    if (!p)
        return n ? -ENOMEM : -EINVAL;
    p->threads = calloc(n, sizeof(*p->threads));
    if (!p->threads) {
        free(p);
        return -ENOMEM;
    }
    p->run = run;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    for (; p->nthreads < n; p->nthreads++) {
        int ret = pthread_create(&p->threads[p->nthreads], NULL, vpool_thread, p);
        if (ret) {
            vpool_free(p);
            return -ret;
        }
    }
    *out = p;
    return 0;
}

void vpool_push(struct vpool *p, struct vpool_item *item)
{
    item->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->tail)
        p->tail->next = item;
    else
        p->head = item;
    p->tail = item;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void vpool_free(struct vpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->threads);
    free(p);
}
