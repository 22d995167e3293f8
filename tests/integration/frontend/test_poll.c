/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufsd --poll-us against the in-tree frontend: requests keep completing while
 * the queue threads busy-poll, sleep, and move between the two.
 *
 *   test_poll --backend 'VUFSD ... --poll-us N {socket} {dir}' --poll-us N --log FILE
 *
 * The dangerous moment of polling is its end: the thread stops spinning,
 * re-arms notifications (avail_event, or clears VRING_USED_F_NO_NOTIFY) and
 * must look at the ring once more before it sleeps. A request published just
 * then comes without a kick (the driver saw notifications suppressed), and a
 * thread that sleeps anyway never answers it. So requests go one at a time
 * (queue depth 1) with pauses spread below, around and far above the poll
 * window, on every request queue, with EVENT_IDX and with flag-based
 * suppression, across a stop/start of the rings; every one must complete
 * within the frontend's timeout with the right data. The backend's log then
 * says how many requests its threads caught by polling and how often they
 * slept: both must be non-zero, or the test did not exercise what it names.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"
#include "vufs_util.h"

#define FILE_SIZE (256u * 1024u)
#define QUEUES 4u
/* Requests per queue and mode: enough to cross the window's edge many times. */
#define PER_QUEUE 600u

static const char *opt_backend;
static const char *opt_log;
static unsigned opt_poll_us;

struct env {
    char *dir;
    struct vfe_dev *dev;
    struct vfe_fuse *fuse;
    uint64_t nodeid, fh;
    uint64_t rng;
};

static uint8_t pattern(uint64_t i)
{
    return (uint8_t)(i * 131 + (i >> 9) * 3 + 7);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static uint64_t next_rand(struct env *e)
{
    e->rng ^= e->rng << 13;
    e->rng ^= e->rng >> 7;
    e->rng ^= e->rng << 17;
    return e->rng;
}

/* Waits ns: spinning below 200 us (a sleep's own latency would blur the edge). */
static void pause_ns(uint64_t ns)
{
    if (ns >= 200000) {
        struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
                               .tv_nsec = (long)(ns % 1000000000u) };
        nanosleep(&ts, NULL);
        return;
    }
    uint64_t until = vufs_now_ns() + ns;
    while (vufs_now_ns() < until)
        ;
}

/* The pause before a request: mostly within 3 poll windows of the edge, some
 * far longer (the window shrinks, the thread sleeps), some none (it grows). */
static uint64_t pick_pause(struct env *e)
{
    uint64_t win = (uint64_t)opt_poll_us * 1000u;
    uint64_t r = next_rand(e) % 100;
    if (r < 10)
        return 0;
    if (r < 85)
        return next_rand(e) % (3 * win + 1);
    if (r < 97)
        return win * (4 + next_rand(e) % 20);
    return 1000000u + next_rand(e) % 2000000u; /* 1-3 ms */
}

static int start(struct env *e, bool event_idx)
{
    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = opt_backend, .dir = e->dir, .backend_log = opt_log,
                  .timeout_ms = 20000 },
        .request_queues = QUEUES,
        .queue_size = 64,
    };
    if (!event_idx)
        cfg.features = (1ull << VFE_F_VERSION_1) | (1ull << VFE_F_INDIRECT_DESC);
    int r = vfe_dev_connect(&cfg, &e->dev);
    if (r < 0)
        return r;
    r = vfe_dev_start(e->dev);
    if (r < 0)
        return r;
    if (((vfe_dev_features(e->dev) >> VFE_F_EVENT_IDX) & 1) != (uint64_t)event_idx)
        return -EPROTO; /* the mode this test names was not negotiated */
    /* A lost wake-up shows as a request that never completes: 5 s is ages. */
    struct vfe_fuse_config fc = { .depth = 4, .timeout_ms = 5000 };
    r = vfe_fuse_new(e->dev, &fc, &e->fuse);
    if (r < 0)
        return r;
    struct vfe_fuse_init_result init;
    r = vfe_fuse_init(e->fuse, &init);
    if (r < 0)
        return r;
    struct fuse_entry_out ent;
    r = vfe_fuse_lookup(e->fuse, FUSE_ROOT_ID, "data.bin", &ent);
    if (r < 0)
        return r;
    struct fuse_open_out oo;
    r = vfe_fuse_open(e->fuse, ent.nodeid, O_RDONLY, &oo);
    if (r < 0)
        return r;
    e->nodeid = ent.nodeid;
    e->fh = oo.fh;
    return 0;
}

/* Closes the device; the backend exits by itself with status 0. */
static void stop(struct env *e)
{
    vfe_fuse_release(e->fuse, e->nodeid, e->fh, 0);
    vfe_fuse_free(e->fuse);
    e->fuse = NULL;
    int status = 0;
    bool own = false;
    int r = vfe_dev_close_status(e->dev, &status, &own);
    e->dev = NULL;
    assert_int_equal(r, 0);
    assert_true(own);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* One paced request on queue q: READ of 512 bytes at a random offset (data checked)
 * or GETATTR of the file. */
static void paced_request(struct env *e, unsigned q, unsigned i)
{
    vfe_fuse_set_queue(e->fuse, q);
    pause_ns(pick_pause(e));
    if (i % 4 == 3) {
        struct fuse_attr_out ao;
        int r = vfe_fuse_getattr(e->fuse, e->nodeid, &ao);
        if (r < 0)
            fail_msg("queue %u request %u: GETATTR: %s", q, i, strerror(-r));
        assert_int_equal(ao.attr.size, FILE_SIZE);
        return;
    }
    uint8_t buf[512];
    uint64_t off = next_rand(e) % (FILE_SIZE - sizeof(buf));
    ssize_t n = vfe_fuse_read(e->fuse, e->nodeid, e->fh, off, buf, sizeof(buf));
    if (n < 0)
        fail_msg("queue %u request %u: READ: %s", q, i, strerror((int)-n));
    assert_int_equal(n, sizeof(buf));
    for (unsigned k = 0; k < sizeof(buf); k++)
        if (buf[k] != pattern(off + k))
            fail_msg("queue %u request %u: byte %" PRIu64 " wrong", q, i, off + k);
}

static void run_paced(struct env *e)
{
    for (unsigned q = 1; q <= QUEUES; q++)
        for (unsigned i = 0; i < PER_QUEUE; i++)
            paced_request(e, q, i);
    /* The queues take turns in bursts: while one is served, the others' windows
     * run out and they sleep; the next burst must wake them. */
    for (unsigned i = 0; i < PER_QUEUE; i++)
        paced_request(e, 1 + (unsigned)(next_rand(e) % QUEUES), i);
}

/* Sums "queue N: H requests caught by polling, S sleeps" over the log. */
static void poll_counts(uint64_t *hits, uint64_t *sleeps)
{
    g_autofree char *text = NULL;
    assert_true(g_file_get_contents(opt_log, &text, NULL, NULL));
    *hits = *sleeps = 0;
    for (const char *p = text; (p = strstr(p, "queue ")); p++) {
        unsigned qi;
        uint64_t h, s;
        if (sscanf(p, "queue %u: %" SCNu64 " requests caught by polling, %" SCNu64 " sleeps,",
                   &qi, &h, &s) == 3) {
            assert_true(qi >= 1 && qi <= QUEUES); /* hiprio is never polled */
            *hits += h;
            *sleeps += s;
        }
    }
}

static void run_mode(bool event_idx)
{
    struct env e = { .rng = event_idx ? 0x9e3779b97f4a7c15ull : 0xd1b54a32d192ed03ull };
    e.dir = g_dir_make_tmp("vufsd-poll-XXXXXX", NULL);
    assert_non_null(e.dir);
    chmod(e.dir, 0755);
    g_autofree uint8_t *data = g_malloc(FILE_SIZE);
    for (uint32_t i = 0; i < FILE_SIZE; i++)
        data[i] = pattern(i);
    g_autofree char *path = g_build_filename(e.dir, "data.bin", NULL);
    assert_true(g_file_set_contents(path, (const char *)data, FILE_SIZE, NULL));
    unlink(opt_log);

    int r = start(&e, event_idx);
    if (r < 0)
        fail_msg("starting '%s': %s", opt_backend, strerror(-r));
    run_paced(&e);
    /* GET_VRING_BASE while the threads poll (or sleep), then on again. */
    assert_int_equal(vfe_dev_stop(e.dev), 0);
    assert_int_equal(vfe_dev_start(e.dev), 0);
    run_paced(&e);
    stop(&e);

    uint64_t hits, sleeps;
    poll_counts(&hits, &sleeps);
    print_message("event_idx=%d: %" PRIu64 " requests caught by polling, %" PRIu64
                  " sleeps\n", event_idx, hits, sleeps);
    assert_true(hits > 0);
    assert_true(sleeps > 0);
    nftw(e.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    g_free(e.dir);
}

static void test_paced_event_idx(void **state)
{
    (void)state;
    run_mode(true);
}

static void test_paced_flags(void **state)
{
    (void)state;
    run_mode(false);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "backend", required_argument, NULL, 'b' },
        { "log", required_argument, NULL, 'l' },
        { "poll-us", required_argument, NULL, 'p' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            opt_backend = optarg;
            break;
        case 'l':
            opt_log = optarg;
            break;
        case 'p':
            opt_poll_us = (unsigned)atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: %s --backend CMD --log FILE --poll-us N\n", argv[0]);
            return 2;
        }
    }
    g_auto(GStrv) av = NULL;
    if (!opt_backend || !opt_log || !opt_poll_us || !g_shell_parse_argv(opt_backend, NULL, &av, NULL) ||
        access(av[0], X_OK) != 0) {
        fprintf(stderr, "%s: --backend (an executable), --log and --poll-us are required\n",
                argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paced_event_idx),
        cmocka_unit_test(test_paced_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
