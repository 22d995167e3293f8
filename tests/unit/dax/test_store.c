/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The window store (dax/store.c, dax/sync.c): store mappings against real
 * files (the fake's memfds), the guest's stores played by writing the store's
 * pages as the frontend's mapping would, the host's changes by writing the
 * files through another fd. What must hold: a range past the file's end shows
 * zeros, the guest's stores reach the file (sync, removal, reset, a restart's
 * new window) byte for byte and never past the file's end, the host's changes
 * reach the window without losing the guest's, and a truncate on the host
 * clears what it cut off.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dax_i.h"
#include "fake_frontend.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define RD FUSE_SETUPMAPPING_FLAG_READ
#define RW (FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE)
#define WIN (16 * MiB)
/* The window's settle time here: a change counts as settled this long after. */
#define SETTLE_US 50000u

struct fx {
    struct fake_fe fe;
    struct dax_window *w;
};

static void fx_new(struct fx *f, enum dax_policy pol)
{
    struct dax_config cfg = { .window_size = WIN, .policy = pol,
                              .decay_interval_ns = UINT64_MAX,
                              .settle_ns = SETTLE_US * UINT64_C(1000) };

    fake_init(&f->fe, WIN, 4096);
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &f->fe, &f->w), 0);
    fake_use_store(&f->fe, f->w);
}

static void fx_check(struct fx *f)
{
    if (f->fe.violations)
        fail_msg("frontend rule broken: %s", f->fe.last_violation);
    assert_int_equal(fake_leaked_fds(&f->fe, f->w), 0);
    assert_int_equal(fake_matches_table(&f->fe, f->w), 0);
}

static void fx_free(struct fx *f)
{
    fx_check(f);
    dax_window_free(f->w);
    fake_fini(&f->fe);
}

static uint8_t pat(uint64_t o, unsigned seed)
{
    return (uint8_t)(o * 131 + o / 4096 + seed);
}

/* File key gets size bytes of pattern seed, through the fake's own fd. */
static int file_fill(struct fx *f, uint64_t key, uint64_t size, unsigned seed)
{
    int fd = fake_fd(&f->fe, key);
    uint8_t *b = malloc(size ? size : 1);

    assert_true(fd >= 0 && b);
    for (uint64_t o = 0; o < size; o++)
        b[o] = pat(o, seed);
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, b, size, 0), (ssize_t)size);
    free(b);
    return fd;
}

static uint8_t file_byte(int fd, uint64_t o)
{
    uint8_t b = 0xee;

    assert_int_equal(pread(fd, &b, 1, (off_t)o), 1);
    return b;
}

static uint64_t file_size(int fd)
{
    struct stat st;

    assert_int_equal(fstat(fd, &st), 0);
    return (uint64_t)st.st_size;
}

/* The window's page at window offset m, as the frontend's mapping shows it. */
static uint8_t *win(struct fx *f, uint64_t m)
{
    return f->w->store.mem + m;
}

/* Lets the file system's clock move past the file's last change and the
 * window look again, so its stamp of the file counts (a stamp taken in the
 * same clock tick as a change could miss the next one). */
static void settle(struct fx *f)
{
    usleep(SETTLE_US + 20000);
    assert_int_equal(dax_window_sync(f->w, DAX_SYNC_CHECK), 0);
}

static void stamp_of(int fd, struct dax_file_stamp *s)
{
    assert_int_equal(dax_stamp_fd(fd, s), 0);
}

static void test_past_eof_shows_zeros(void **state)
{
    struct fx f;
    struct dax_window_stats st;

    fx_new(&f, DAX_POLICY_AUTO);
    file_fill(&f, 1, 5 * KiB, 3);
    /* The last (only) range of a 5 KiB file, as Linux asks for it: 2 MiB. */
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 2 * MiB, RD), 0);
    for (uint64_t o = 0; o < 5 * KiB; o++)
        assert_int_equal(*win(&f, 2 * MiB + o), pat(o, 3));
    for (uint64_t o = 5 * KiB; o < 2 * MiB; o++)
        assert_int_equal(*win(&f, 2 * MiB + o), 0);
    /* A range wholly past the end maps too, as zeros. */
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 8 * MiB, 2 * MiB, 4 * MiB, RW), 0);
    for (uint64_t o = 0; o < 2 * MiB; o += 4093)
        assert_int_equal(*win(&f, 4 * MiB + o), 0);
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.store_maps, 2);
    assert_int_equal(st.direct_maps, 0);
    assert_int_equal(st.store_bytes_mapped, 4 * MiB);
    assert_int_equal(st.fill_bytes, 4 * MiB);
    fx_free(&f);
}

static void test_sync_writes_back_exact_bytes(void **state)
{
    struct fx f;
    struct dax_window_stats st;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 4 * MiB, 1);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 2 * MiB, 2 * MiB, 0, RW), 0);
    /* The guest stores: two bytes far apart in one page, a run across a page. */
    *win(&f, 10) = 0xa1;
    *win(&f, 4000) = 0xa2;
    memset(win(&f, 8190), 0xa3, 5);
    assert_int_equal(file_byte(fd, 2 * MiB + 10), pat(2 * MiB + 10, 1));
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_byte(fd, 2 * MiB + 10), 0xa1);
    assert_int_equal(file_byte(fd, 2 * MiB + 4000), 0xa2);
    for (unsigned k = 0; k < 5; k++)
        assert_int_equal(file_byte(fd, 2 * MiB + 8190 + k), 0xa3);
    assert_int_equal(file_byte(fd, 2 * MiB + 11), pat(2 * MiB + 11, 1));
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.writeback_bytes, 7);
    assert_int_equal(st.writeback_runs, 4); /* the 5-byte run is cut by a page */
    /* Nothing new: nothing written. */
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.writeback_bytes, 7);
    /* A read-only mapping's stores (a guest breaking its own rules) never reach the file. */
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 2 * MiB, RD), 0);
    *win(&f, 2 * MiB + 5) = 0x77;
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_byte(fd, 5), pat(5, 1));
    fx_free(&f);
}

static void test_writeback_never_grows_the_file(void **state)
{
    struct fx f;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 8 * KiB, 2);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    *win(&f, 100) = 0x11;
    *win(&f, 10 * KiB) = 0x22; /* past the end: the file was cut short under it */
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_size(fd), 8 * KiB);
    assert_int_equal(file_byte(fd, 100), 0x11);
    fx_free(&f);
}

static void test_host_and_guest_changes_meet(void **state)
{
    struct fx f;
    struct dax_file_stamp now;
    struct dax_inode_stats is;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 4);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    /* The guest and a host process change different bytes of one page. */
    *win(&f, 4096 + 1) = 0xb1;
    uint8_t h = 0xc2;
    usleep(10000); /* a new mtime, whatever the clock's granularity */
    assert_int_equal(pwrite(fd, &h, 1, 4096 + 3), 1);
    stamp_of(fd, &now);
    /* An attribute reply shows the host's change: merged in, the guest's kept. */
    dax_inode_attr(f.w, 1, &now);
    assert_int_equal(*win(&f, 4096 + 3), 0xc2);
    assert_int_equal(*win(&f, 4096 + 1), 0xb1);
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_byte(fd, 4096 + 1), 0xb1);
    assert_int_equal(file_byte(fd, 4096 + 3), 0xc2); /* not lost to the write-back */
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_int_equal(is.host_changes, 1);
    /* The same stamp again: nothing to merge, nothing counted. */
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now);
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_int_equal(is.host_changes, 1);
    fx_free(&f);
}

/* A host change right after the window's own write, within the file system's
 * clock tick, carries the same stamp: the window must still see it. */
static void test_change_in_the_same_tick(void **state)
{
    struct fx f;
    struct dax_file_stamp now;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 15);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    settle(&f);
    for (unsigned k = 0; k < 20; k++) {
        *win(&f, 64 + k) = (uint8_t)(0x80 + k);
        assert_int_equal(dax_inode_sync(f.w, 1), 0); /* the window's write */
        uint8_t h = (uint8_t)k;
        assert_int_equal(pwrite(fd, &h, 1, 9000 + k), 1); /* at once, the host's */
        stamp_of(fd, &now);
        dax_inode_attr(f.w, 1, &now);
        assert_int_equal(*win(&f, 9000 + k), k);
    }
    fx_free(&f);
}

/* The stamp a look took right after a change, in the same clock tick, cannot
 * tell the next change in that tick: it never counts, however late it is kept. */
static void test_look_counts_by_its_own_time(void **state)
{
    struct fx f;
    struct dax_file_stamp s;
    unsigned tries = 0;
    bool valid;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 17);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RD), 0);
    do { /* a look in the tick of the change (a tick boundary between is rare) */
        uint8_t h = (uint8_t)tries;

        assert_int_equal(pwrite(fd, &h, 1, 300), 1);
        stamp_of(fd, &s);
    } while (s.taken_ns > s.ctime_ns && ++tries < 100);
    assert_true(tries < 100);
    usleep(20000); /* the clock has moved on by the time the stamp is kept */
    pthread_mutex_lock(&f.w->lock);
    struct dax_inode *ino = dax_inode_find_locked(f.w, 1);
    dax_inode_set_seen_locked(f.w, ino, &s);
    valid = ino->seen_valid;
    pthread_mutex_unlock(&f.w->lock);
    assert_false(valid);
    /* A look taken after the tick and the settle time counts. */
    usleep(SETTLE_US);
    stamp_of(fd, &s);
    pthread_mutex_lock(&f.w->lock);
    dax_inode_set_seen_locked(f.w, ino, &s);
    valid = ino->seen_valid;
    pthread_mutex_unlock(&f.w->lock);
    assert_true(valid);
    fx_free(&f);
}

/* The window's own write-back moves the file's stamp; the window does not take
 * the new one as seen (a host change beside the write would hide under it): the
 * next look merges, and finds nothing of the host's. */
static void test_own_writeback_keeps_the_old_look(void **state)
{
    struct fx f;
    struct dax_file_stamp before, now;
    struct dax_inode_stats is;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 18);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    settle(&f);
    pthread_mutex_lock(&f.w->lock);
    struct dax_inode *ino = dax_inode_find_locked(f.w, 1);
    assert_true(ino->seen_valid);
    before = ino->seen;
    pthread_mutex_unlock(&f.w->lock);
    usleep(10000);
    *win(&f, 5000) = 0x3c;
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_byte(fd, 5000), 0x3c);
    pthread_mutex_lock(&f.w->lock);
    assert_true(dax_stamp_equal(&ino->seen, &before));
    pthread_mutex_unlock(&f.w->lock);
    stamp_of(fd, &now);
    assert_false(dax_stamp_equal(&now, &before));
    unsigned merges = f.w->st.merges;
    dax_inode_attr(f.w, 1, &now);
    assert_true(f.w->st.merges > merges);
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_int_equal(is.host_changes, 0);
    fx_free(&f);
}

/* Holds the fake's map calls at a gate (the fake's 'stale' hook, under its lock). */
struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool entered, open;
};

static bool gate_wait(void *arg, uint64_t moffset)
{
    struct gate *g = arg;

    (void)moffset;
    pthread_mutex_lock(&g->lock);
    g->entered = true;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return false;
}

struct setup_call {
    struct fx *f;
    int r;
};

static void *setup_second_range(void *arg)
{
    struct setup_call *c = arg;

    c->r = fake_setup(&c->f->fe, c->f->w, 1, 2 * MiB, 2 * MiB, 2 * MiB, RD);
    return NULL;
}

/*
 * A mapping's pages are read before the frontend maps them and the window
 * adds the extent. A host change after that read, and a look between the read
 * and the add: the merge after the look cannot cover the coming extent, so the
 * look must not count, and the next attribute reply (same stamp) merges.
 */
static void test_look_during_a_fill_does_not_count(void **state)
{
    struct fx f;
    struct dax_file_stamp now;
    struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    struct setup_call c = { .f = &f };
    pthread_t t;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 4 * MiB, 19);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RD), 0);
    settle(&f);
    f.fe.stale = gate_wait;
    f.fe.stale_arg = &g;
    assert_int_equal(pthread_create(&t, NULL, setup_second_range, &c), 0);
    pthread_mutex_lock(&g.lock);
    while (!g.entered)
        pthread_cond_wait(&g.cond, &g.lock);
    pthread_mutex_unlock(&g.lock);
    usleep(10000);
    uint8_t h = 0xa7;
    assert_int_equal(pwrite(fd, &h, 1, 2 * MiB + 100), 1); /* after the fill read it */
    usleep(10000);
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now);
    pthread_mutex_lock(&g.lock);
    g.open = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    f.fe.stale = NULL;
    assert_int_equal(c.r, 0);
    assert_int_equal(*win(&f, 2 * MiB + 100), pat(2 * MiB + 100, 19)); /* not merged yet */
    dax_inode_attr(f.w, 1, &now); /* the same stamp */
    assert_int_equal(*win(&f, 2 * MiB + 100), 0xa7);
    fx_free(&f);
}

static void *setup_other_file(void *arg)
{
    struct setup_call *c = arg;

    c->r = fake_setup(&c->f->fe, c->f->w, 2, 0, 1 * MiB, 3 * MiB, RD);
    return NULL;
}

struct attr_call {
    struct fx *f;
    int fd;
};

static void *attr_reply(void *arg)
{
    struct attr_call *a = arg;
    struct dax_file_stamp now;

    stamp_of(a->fd, &now);
    dax_inode_attr(a->f->w, 1, &now);
    return NULL;
}

static uint64_t merges_of(struct fx *f)
{
    pthread_mutex_lock(&f->w->lock);
    uint64_t m = f->w->st.merges;
    pthread_mutex_unlock(&f->w->lock);
    return m;
}

/*
 * A merge works a slot at a time and waits for a busy one. A host change to a
 * slot it has merged already, while it waits for the next: the look that
 * stands for the merge must be older than that change, so the next attribute
 * reply merges it.
 */
static void test_change_behind_a_merge(void **state)
{
    struct fx f;
    struct dax_file_stamp now;
    struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    struct setup_call c = { .f = &f };
    struct attr_call a = { .f = &f };
    pthread_t ta, tb;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 4 * MiB, 20);
    file_fill(&f, 2, 2 * MiB, 21);
    a.fd = fd;
    /* File 1 in slot 1's first half, then in slot 0: a merge takes slot 0 first. */
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 2 * MiB, 1 * MiB, 2 * MiB, RD), 0);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RD), 0);
    settle(&f);
    /* Slot 1 busy: file 2 being mapped into its second half. */
    f.fe.stale = gate_wait;
    f.fe.stale_arg = &g;
    assert_int_equal(pthread_create(&ta, NULL, setup_other_file, &c), 0);
    pthread_mutex_lock(&g.lock);
    while (!g.entered)
        pthread_cond_wait(&g.cond, &g.lock);
    pthread_mutex_unlock(&g.lock);
    /* A host change, and the attribute reply that shows it: a merge starts. */
    usleep(10000);
    uint8_t h = 0x11;
    assert_int_equal(pwrite(fd, &h, 1, 50), 1);
    usleep(10000);
    uint64_t m0 = merges_of(&f);
    assert_int_equal(pthread_create(&tb, NULL, attr_reply, &a), 0);
    while (merges_of(&f) == m0)
        usleep(1000);
    /* Slot 0 merged, slot 1 awaited: the host changes slot 0 again. */
    h = 0x22;
    assert_int_equal(pwrite(fd, &h, 1, 200), 1);
    usleep(10000);
    pthread_mutex_lock(&g.lock);
    g.open = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(pthread_join(tb, NULL), 0);
    f.fe.stale = NULL;
    assert_int_equal(c.r, 0);
    assert_int_equal(*win(&f, 50), 0x11);
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now);
    assert_int_equal(*win(&f, 200), 0x22);
    fx_free(&f);
}

/*
 * A write stamps the file before it copies its bytes. A merge between the two
 * reads the file without them, and the look taken for it shows the write's
 * stamp: that look must not count before the change has settled, or the bytes,
 * landing under the same stamp, would never reach the store. Stores through a
 * shared mapping of the file (a memfd: they leave its stamp as it is) stand
 * for the late bytes.
 */
static void test_bytes_after_their_stamp(void **state)
{
    struct fx f;
    struct dax_file_stamp now, later;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 22);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RD), 0);
    uint8_t *host = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(host != MAP_FAILED);
    host[700] = 0x01; /* the page mapped writable here */
    usleep(20000);
    uint8_t h = 0x5a;
    assert_int_equal(pwrite(fd, &h, 1, 600), 1); /* the write's stamp */
    usleep(20000); /* past the clock's tick, within the settle time */
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now); /* a merge, and its look */
    assert_int_equal(*win(&f, 600), 0x5a);
    host[800] = 0x6b; /* the write's bytes, late */
    stamp_of(fd, &later);
    assert_true(dax_stamp_equal(&later, &now));
    dax_inode_attr(f.w, 1, &later);
    assert_int_equal(*win(&f, 800), 0x6b);
    /* Settled: the next look counts, and the same stamp again merges nothing. */
    usleep(SETTLE_US + 20000);
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now);
    uint64_t m = merges_of(&f);
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now);
    assert_int_equal(merges_of(&f), m);
    assert_int_equal(munmap(host, 4096), 0);
    fx_free(&f);
}

static void test_host_truncate_clears_the_window(void **state)
{
    struct fx f;
    struct dax_file_stamp now;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 4 * MiB, 5);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 2 * MiB, 2 * MiB, 2 * MiB, RW), 0);
    *win(&f, 2 * MiB + 7) = 0x99; /* a guest store the truncate will take */
    /* A host process: truncate -s 1M. The window keeps showing the old bytes
     * (the frontend loses no page) until the daemon looks. */
    assert_int_equal(ftruncate(fd, 1 * MiB + 100), 0);
    assert_int_equal(*win(&f, 1 * MiB + 200), pat(1 * MiB + 200, 5));
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now);
    assert_int_equal(*win(&f, 1 * MiB + 99), pat(1 * MiB + 99, 5));
    for (uint64_t o = 1 * MiB + 100; o < 4 * MiB; o += 509)
        assert_int_equal(*win(&f, o), 0);
    assert_int_equal(*win(&f, 2 * MiB + 7), 0);
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_size(fd), 1 * MiB + 100);
    fx_free(&f);
}

static void test_removal_and_eviction_write_back(void **state)
{
    struct fx f;
    struct fuse_removemapping_one e = { 0, 2 * MiB };

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 4 * MiB, 6);
    int fd2 = file_fill(&f, 2, 2 * MiB, 7);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    assert_int_equal(fake_setup(&f.fe, f.w, 2, 0, 2 * MiB, 4 * MiB, RW), 0);
    *win(&f, 33) = 0x5a;
    *win(&f, 4 * MiB + 44) = 0x5b;
    assert_int_equal(dax_removemapping(f.w, &e, 1), 0);
    assert_int_equal(file_byte(fd, 33), 0x5a);
    assert_int_equal(dax_remove_inode(f.w, 2), 0);
    assert_int_equal(file_byte(fd2, 44), 0x5b);
    /* The pages stay for the next mapping there, which shows its own file's
     * bytes only: none of the guest's stores to the last one. */
    file_fill(&f, 3, 2 * MiB, 8);
    assert_int_equal(fake_setup(&f.fe, f.w, 3, 0, 2 * MiB, 0, 0), 0);
    assert_int_equal(*win(&f, 33), pat(33, 8));
    for (uint64_t o = 0; o < 2 * MiB; o += 4093)
        assert_int_equal(*win(&f, o), pat(o, 8));
    fx_free(&f);
}

static void test_reset_writes_back(void **state)
{
    struct fx f;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 8);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 6 * MiB, RW), 0);
    *win(&f, 6 * MiB + 1234) = 0x42;
    pthread_mutex_lock(&f.fe.lock);
    fake_reset_locked(&f.fe); /* the frontend dropped its maps */
    pthread_mutex_unlock(&f.fe.lock);
    dax_window_reset(f.w);
    assert_int_equal(file_byte(fd, 1234), 0x42);
    assert_int_equal(*win(&f, 6 * MiB + 1234), 0);
    fx_free(&f);
}

static void test_upgrade_keeps_pages(void **state)
{
    struct fx f;
    struct dax_window_stats st;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 9);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.upgrades, 1);
    assert_int_equal(st.fill_bytes, 2 * MiB); /* one copy, not two */
    *win(&f, 300) = 0x31;
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.writeback_bytes, 1);
    assert_int_equal(file_byte(fd, 300), 0x31);
    fx_free(&f);
}

static void test_split_survivor_keeps_pages(void **state)
{
    struct fx f;
    struct fuse_removemapping_one e = { 1 * MiB, 4096 };

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 10);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    *win(&f, 5) = 0x61;
    *win(&f, 1 * MiB + 9) = 0x62;
    *win(&f, 1 * MiB + 4096 + 9) = 0x63;
    assert_int_equal(dax_removemapping(f.w, &e, 1), 0); /* a page out of the middle */
    assert_int_equal(file_byte(fd, 1 * MiB + 9), 0x62);
    assert_int_equal(*win(&f, 5), 0x61); /* the survivors show what they showed */
    assert_int_equal(*win(&f, 1 * MiB + 4096 + 9), 0x63);
    *win(&f, 6) = 0x64;
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_byte(fd, 6), 0x64);
    fx_free(&f);
}

static void test_daemon_io_around_the_window(void **state)
{
    struct fx f;
    struct dax_inode_stats is;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 11);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    settle(&f);
    *win(&f, 4096 + 1) = 0xd1;
    /* FUSE_READ of that page: the guest's store is in the file first. */
    assert_int_equal(dax_inode_before_io(f.w, 1, 4096, 4096), 0);
    assert_int_equal(file_byte(fd, 4096 + 1), 0xd1);
    /* FUSE_WRITE: the window shows what it wrote. */
    settle(&f);
    assert_int_equal(dax_inode_before_io(f.w, 1, 2 * MiB - 2, 4), 0);
    uint8_t b[4] = {1, 2, 3, 4};
    assert_int_equal(pwrite(fd, b, 4, 2 * MiB - 2), 4);
    dax_inode_after_change(f.w, 1, 2 * MiB - 2, 4);
    assert_int_equal(*win(&f, 2 * MiB - 2), 1);
    assert_int_equal(*win(&f, 2 * MiB - 1), 2);
    /* Its own change is not someone else's: the next attributes merge nothing. */
    struct dax_file_stamp now;
    stamp_of(fd, &now);
    dax_inode_attr(f.w, 1, &now);
    assert_int_equal(fake_inode_stats(f.w, 1, &is), 0);
    assert_int_equal(is.host_changes, 0);
    fx_free(&f);
}

/*
 * The guest stores into a range of zeros, then truncates the file below it and
 * extends it again (its SETATTRs): the range must read zeros, as a local file
 * system's would. The stores match nothing the file has, so only their
 * write-back before the truncate lets the merge after it see them go.
 */
static void test_guest_truncate_takes_pending_stores(void **state)
{
    struct fx f;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 1 * MiB, 16);
    assert_int_equal(ftruncate(fd, 4 * MiB), 0); /* zeros from 1 MiB on */
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 2 * MiB, 2 * MiB, 0, RW), 0);
    memset(win(&f, 4096), 0x0e, 100);
    assert_int_equal(dax_inode_before_io(f.w, 1, 600 * KiB, UINT64_MAX), 0);
    assert_int_equal(ftruncate(fd, 600 * KiB), 0);
    dax_inode_after_change(f.w, 1, 600 * KiB, UINT64_MAX);
    assert_int_equal(dax_inode_before_io(f.w, 1, 4 * MiB, UINT64_MAX), 0);
    assert_int_equal(ftruncate(fd, 4 * MiB), 0);
    dax_inode_after_change(f.w, 1, 4 * MiB, UINT64_MAX);
    for (uint64_t k = 0; k < 2 * MiB; k += 97)
        assert_int_equal(*win(&f, k), 0);
    assert_int_equal(dax_inode_sync(f.w, 1), 0);
    assert_int_equal(file_byte(fd, 2 * MiB + 4096), 0);
    fx_free(&f);
}

/*
 * A file that cannot be read (a failing disk, a network file system's server
 * gone): /proc/self/mem past the mapped part of this process answers EIO. The
 * map is refused with that error (what the guest's read returns, as from a
 * local file system), before anything is mapped, and the window keeps nothing.
 */
static void test_read_error_refuses_the_map(void **state)
{
    struct fx f;
    struct dax_window_stats st;
    struct fuse_setupmapping_in in = { .fh = UINT64_MAX, .foffset = 0, .len = 2 * MiB,
                                       .flags = RD, .moffset = 2 * MiB };
    struct dax_setup req;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(dax_setup_check(f.w, &in, &req), 0);
    assert_int_equal(dax_setupmapping(f.w, 77, fd, &req), -EIO);
    close(fd);
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.extents, 0);
    assert_int_equal(st.store_maps, 0);
    assert_int_equal(f.fe.map_calls, 0);
    fx_free(&f);
}

static void test_host_changes_revoke_auto(void **state)
{
    struct fx f;
    struct dax_file_stamp now;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 12);
    assert_true(dax_policy_attr_dax(f.w, 1, 2 * MiB, true));
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RD), 0);
    for (unsigned k = 0; k < DAX_POLICY_HOST_CHANGES; k++) {
        uint8_t h = (uint8_t)(0x10 + k);
        usleep(10000);
        assert_int_equal(pwrite(fd, &h, 1, 100 + k), 1);
        stamp_of(fd, &now);
        dax_inode_attr(f.w, 1, &now);
    }
    assert_false(dax_policy_attr_dax(f.w, 1, 2 * MiB, true));
    fx_free(&f);
}

static void test_window_sync_finds_changes(void **state)
{
    struct fx f;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 13);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 0, RW), 0);
    *win(&f, 77) = 0xe7;
    uint8_t h = 0xf8;
    usleep(10000);
    assert_int_equal(pwrite(fd, &h, 1, 8000), 1);
    /* The flusher: write-back and a look at every file's stamp. */
    assert_int_equal(dax_window_sync(f.w, DAX_SYNC_WRITEBACK | DAX_SYNC_CHECK), 0);
    assert_int_equal(file_byte(fd, 77), 0xe7);
    assert_int_equal(*win(&f, 8000), 0xf8);
    /* A change the window's stamp absorbed (the race between the window's own
     * write and its look at the stamp): a check misses it, MERGE_ALL finds it. */
    h = 0xf9;
    assert_int_equal(pwrite(fd, &h, 1, 9000), 1);
    pthread_mutex_lock(&f.w->lock);
    struct dax_inode *ino = dax_inode_find_locked(f.w, 1);
    assert_int_equal(dax_stamp_fd(fd, &ino->seen), 0);
    ino->seen_valid = true;
    pthread_mutex_unlock(&f.w->lock);
    assert_int_equal(dax_window_sync(f.w, DAX_SYNC_CHECK), 0);
    assert_int_equal(*win(&f, 9000), pat(9000, 13));
    assert_int_equal(dax_window_sync(f.w, DAX_SYNC_MERGE_ALL), 0);
    assert_int_equal(*win(&f, 9000), 0xf9);
    fx_free(&f);
}

/* A restart: the next process's window takes the store and the mappings. */
static void carry(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset, uint64_t len,
                  bool writable, enum dax_backing backing)
{
    struct dax_window *n = opaque;

    assert_int_equal(backing, DAX_BACK_STORE);
    assert_int_equal(dax_window_restore_mapping(n, key, foffset, moffset, len, writable, backing),
                     0);
}

static void test_restart_carries_the_store(void **state)
{
    struct fx f;
    struct dax_window *n;
    struct dax_config cfg = { .window_size = WIN, .policy = DAX_POLICY_AUTO,
                              .decay_interval_ns = UINT64_MAX };
    int sfd, shfd;

    fx_new(&f, DAX_POLICY_AUTO);
    int fd = file_fill(&f, 1, 2 * MiB, 14);
    assert_int_equal(fake_setup(&f.fe, f.w, 1, 0, 2 * MiB, 2 * MiB, RW), 0);
    *win(&f, 2 * MiB + 50) = 0x4e; /* a store not written back yet */
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &f.fe, &n), 0);
    dax_window_store_fds(f.w, &sfd, &shfd);
    assert_int_equal(dax_window_restore_store(n, dup(sfd), dup(shfd)), 0);
    assert_int_equal(dax_for_each_mapping(f.w, carry, n), 0);
    assert_int_equal(n->store.mem[2 * MiB + 50], 0x4e);
    /* The new window writes it back: it opens the file itself (ops->open). */
    assert_int_equal(dax_inode_sync(n, 1), 0);
    assert_int_equal(file_byte(fd, 50), 0x4e);
    /* A second store under store mappings is refused (and not taken). */
    int a = dup(sfd), b = dup(shfd);
    assert_int_equal(dax_window_restore_store(n, a, b), -EINVAL);
    close(a);
    close(b);
    dax_window_free(n);
    fx_free(&f);
}

static void test_restore_store_needs_memfds(void **state)
{
    struct fx f;

    fx_new(&f, DAX_POLICY_AUTO);
    int a = memfd_create("x", MFD_CLOEXEC), b = memfd_create("y", MFD_CLOEXEC);
    assert_int_equal(ftruncate(a, 4096), 0);
    assert_int_equal(ftruncate(b, WIN), 0);
    assert_int_equal(dax_window_restore_store(f.w, a, b), -EINVAL);
    assert_int_equal(dax_window_restore_store(f.w, -1, b), -EINVAL);
    close(a);
    close(b);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_past_eof_shows_zeros),
        cmocka_unit_test(test_sync_writes_back_exact_bytes),
        cmocka_unit_test(test_writeback_never_grows_the_file),
        cmocka_unit_test(test_host_and_guest_changes_meet),
        cmocka_unit_test(test_change_in_the_same_tick),
        cmocka_unit_test(test_look_counts_by_its_own_time),
        cmocka_unit_test(test_own_writeback_keeps_the_old_look),
        cmocka_unit_test(test_look_during_a_fill_does_not_count),
        cmocka_unit_test(test_change_behind_a_merge),
        cmocka_unit_test(test_bytes_after_their_stamp),
        cmocka_unit_test(test_host_truncate_clears_the_window),
        cmocka_unit_test(test_removal_and_eviction_write_back),
        cmocka_unit_test(test_reset_writes_back),
        cmocka_unit_test(test_upgrade_keeps_pages),
        cmocka_unit_test(test_split_survivor_keeps_pages),
        cmocka_unit_test(test_daemon_io_around_the_window),
        cmocka_unit_test(test_guest_truncate_takes_pending_stores),
        cmocka_unit_test(test_read_error_refuses_the_map),
        cmocka_unit_test(test_host_changes_revoke_auto),
        cmocka_unit_test(test_window_sync_finds_changes),
        cmocka_unit_test(test_restart_carries_the_store),
        cmocka_unit_test(test_restore_store_needs_memfds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
