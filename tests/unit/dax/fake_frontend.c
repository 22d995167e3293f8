/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dax_i.h"
#include "fake_frontend.h"

uint64_t fake_rand(uint64_t *s)
{
    /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static unsigned count_fds(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");

    if (!d)
        abort();
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

void fake_init(struct fake_fe *fe, uint64_t size, uint64_t page)
{
    memset(fe, 0, sizeof(*fe));
    fe->fds_at_init = count_fds();
    pthread_mutex_init(&fe->lock, NULL);
    fe->size = size;
    fe->page = page;
    fe->owner = calloc(size / page, sizeof(*fe->owner));
    fe->inflight = calloc(size / DAX_RANGE_SIZE + 1, sizeof(*fe->inflight));
    fe->rng = 0x9e3779b97f4a7c15u;
    if (!fe->owner || !fe->inflight)
        abort();
}

void fake_fini(struct fake_fe *fe)
{
    for (unsigned i = 0; i < fe->nfiles; i++)
        close(fe->files[i].fd);
    free(fe->owner);
    free(fe->inflight);
    free(fe->maps);
    pthread_mutex_destroy(&fe->lock);
}

static void violation(struct fake_fe *fe, const char *what, uint64_t moffset, uint64_t len)
{
    fe->violations++;
    snprintf(fe->last_violation, sizeof(fe->last_violation),
             "%s: moffset %#" PRIx64 " len %#" PRIx64, what, moffset, len);
}

static bool inject(struct fake_fe *fe)
{
    if (fe->fail_pct && fake_rand(&fe->rng) % 100 < fe->fail_pct) {
        fe->injected++;
        return true;
    }
    return false;
}

/* Marks the slot busy for the duration of a call; a second caller is a breach. */
static void enter(struct fake_fe *fe, uint64_t moffset, uint64_t len)
{
    uint64_t s = moffset / DAX_RANGE_SIZE;

    if (s <= fe->size / DAX_RANGE_SIZE) {
        if (fe->inflight[s]++)
            violation(fe, "concurrent calls on one slot", moffset, len);
    }
}

static void leave(struct fake_fe *fe, uint64_t moffset)
{
    uint64_t s = moffset / DAX_RANGE_SIZE;

    if (s <= fe->size / DAX_RANGE_SIZE)
        fe->inflight[s]--;
}

void fake_reset_locked(struct fake_fe *fe)
{
    memset(fe->owner, 0, fe->size / fe->page * sizeof(*fe->owner));
    for (size_t i = 0; i < fe->nmaps; i++)
        fe->maps[i].live = false;
    fe->gen++;
}

static bool is_stale(struct fake_fe *fe, uint64_t moffset)
{
    return fe->stale && fe->stale(fe->stale_arg, moffset);
}

/* Sleeps without the lock; false when a reset happened meanwhile (call is void). */
static bool nap(struct fake_fe *fe)
{
    uint64_t gen = fe->gen;

    if (fe->sleep_us) {
        pthread_mutex_unlock(&fe->lock);
        usleep(fe->sleep_us);
        pthread_mutex_lock(&fe->lock);
    }
    return fe->gen == gen;
}

/* Lock held. The file the fake made for key, made now if need be. */
static struct fake_file *file_of_key_locked(struct fake_fe *fe, uint64_t key)
{
    struct stat st;

    for (unsigned i = 0; i < fe->nfiles; i++)
        if (fe->files[i].key == key)
            return &fe->files[i];
    if (fe->nfiles == FAKE_FILES)
        return NULL;
    int fd = memfd_create("fake-dax-file", MFD_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    fe->files[fe->nfiles] = (struct fake_file){ key, fd, st.st_ino };
    return &fe->files[fe->nfiles++];
}

static bool fd_is_store_locked(struct fake_fe *fe, int fd)
{
    struct stat st;

    return fstat(fd, &st) == 0 && st.st_ino == fe->store_ino;
}

/* Lock held. Which file an fd is, or NULL (not one the fake handed out). */
static struct fake_file *file_of_fd_locked(struct fake_fe *fe, int fd)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return NULL;
    for (unsigned i = 0; i < fe->nfiles; i++)
        if (fe->files[i].ino == st.st_ino)
            return &fe->files[i];
    return NULL;
}

int fake_fd(struct fake_fe *fe, uint64_t key)
{
    pthread_mutex_lock(&fe->lock);
    struct fake_file *f = file_of_key_locked(fe, key);
    int fd = f ? f->fd : -EMFILE;
    pthread_mutex_unlock(&fe->lock);
    return fd;
}

/* fds the window keeps: its store's two, and its files' (only while mapped). */
static int window_fds(struct fake_fe *fe, struct dax_window *w)
{
    int n = 2;

    pthread_mutex_lock(&w->lock);
    for (uint32_t b = 0; b < w->ino_buckets; b++)
        for (struct dax_inode *ino = w->ino_hash[b]; ino; ino = ino->hnext) {
            int k = (ino->fd >= 0) + (ino->fd_rw >= 0);

            if (k && ino->st.extents == 0)
                violation(fe, "an fd kept for a file without mappings", 0, 0);
            n += k;
        }
    n += (int)w->nclosing;
    pthread_mutex_unlock(&w->lock);
    return n;
}

int fake_leaked_fds(struct fake_fe *fe, struct dax_window *w)
{
    return (int)count_fds() - (int)fe->fds_at_init - (int)fe->nfiles - (w ? window_fds(fe, w) : 0);
}

void fake_use_store(struct fake_fe *fe, struct dax_window *w)
{
    struct stat st;
    int fd, shadow;

    dax_window_store_fds(w, &fd, &shadow);
    if (fstat(fd, &st) < 0)
        abort();
    pthread_mutex_lock(&fe->lock);
    fe->use_store = true;
    fe->store_ino = st.st_ino;
    pthread_mutex_unlock(&fe->lock);
}

int fake_setup(struct fake_fe *fe, struct dax_window *w, uint64_t key, uint64_t foffset,
               uint64_t len, uint64_t moffset, uint64_t flags)
{
    struct fuse_setupmapping_in in = {
        .fh = UINT64_MAX, .foffset = foffset, .len = len, .flags = flags, .moffset = moffset,
    };
    struct dax_setup req;
    int r = dax_setup_check(w, &in, &req);
    int fd;

    if (r < 0)
        return r;
    pthread_mutex_lock(&fe->lock);
    req.direct = !fe->use_store;
    pthread_mutex_unlock(&fe->lock);
    fd = fake_fd(fe, key);
    return fd < 0 ? fd : dax_setupmapping(w, key, fd, &req);
}

int fake_check(const struct dax_window *w, uint64_t moffset, uint64_t len, uint64_t foffset,
               uint64_t flags)
{
    struct fuse_setupmapping_in in = {
        .fh = UINT64_MAX, .foffset = foffset, .len = len, .flags = flags, .moffset = moffset,
    };
    struct dax_setup req;

    return dax_setup_check(w, &in, &req);
}

static int fake_open_cb(void *ctx, uint64_t key, bool writable, bool for_frontend)
{
    struct fake_fe *fe = ctx;
    struct fake_file *f;
    int fd = -EMFILE;

    pthread_mutex_lock(&fe->lock);
    fe->open_calls++;
    if (fe->open_fail > 0) {
        fe->open_fail--;
        fd = -EIO;
    } else if ((f = file_of_key_locked(fe, key))) {
        fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            fd = -errno;
    }
    pthread_mutex_unlock(&fe->lock);
    return fd;
}

static int fake_map_cb(void *ctx, int fd, uint64_t foffset, uint64_t moffset, uint64_t len,
                       bool writable)
{
    struct fake_fe *fe = ctx;
    struct fake_file *file;
    uint64_t key;
    size_t idx;
    int r = 0;

    pthread_mutex_lock(&fe->lock);
    fe->map_calls++;
    file = file_of_fd_locked(fe, fd);
    if (file) {
        key = file->key;
    } else if (fe->use_store && fd_is_store_locked(fe, fd)) {
        key = FAKE_STORE_KEY;
        if (foffset != moffset) {
            violation(fe, "a store map not at its own window offset", moffset, len);
            pthread_mutex_unlock(&fe->lock);
            return -EINVAL;
        }
    } else {
        violation(fe, "map of an fd that names no file", moffset, len);
        pthread_mutex_unlock(&fe->lock);
        return -EBADF;
    }
    if (len == 0 || moffset % fe->page || len % fe->page || foffset % fe->page ||
        moffset >= fe->size || len > fe->size - moffset) {
        violation(fe, "map out of bounds or misaligned", moffset, len);
        pthread_mutex_unlock(&fe->lock);
        return -EINVAL;
    }
    if (moffset / DAX_RANGE_SIZE != (moffset + len - 1) / DAX_RANGE_SIZE) {
        violation(fe, "map crosses a slot", moffset, len);
        pthread_mutex_unlock(&fe->lock);
        return -EINVAL;
    }
    enter(fe, moffset, len);
    if (is_stale(fe, moffset) || !nap(fe)) {
        r = -EIO;
        goto out_leave;
    }
    for (uint64_t p = moffset / fe->page; p < (moffset + len) / fe->page; p++)
        if (fe->owner[p]) {
            violation(fe, "map over an existing mapping", moffset, len);
            r = -EINVAL;
            goto out_leave;
        }
    if (inject(fe)) {
        r = -EIO;
        goto out_leave;
    }
    for (idx = 0; idx < fe->nmaps && fe->maps[idx].live; idx++)
        ;
    if (idx == fe->nmaps) {
        if (fe->nmaps == fe->cap) {
            fe->cap = fe->cap ? 2 * fe->cap : 64;
            fe->maps = realloc(fe->maps, fe->cap * sizeof(*fe->maps));
            if (!fe->maps)
                abort();
        }
        fe->nmaps++;
    }
    fe->maps[idx] = (struct fake_map){ key, foffset, moffset, len, writable, true };
    for (uint64_t p = moffset / fe->page; p < (moffset + len) / fe->page; p++)
        fe->owner[p] = (uint32_t)idx + 1;
out_leave:
    leave(fe, moffset);
    pthread_mutex_unlock(&fe->lock);
    return r;
}

/* Lock held. Removes the exact mapping or records a breach. */
static int unmap_one_locked(struct fake_fe *fe, uint64_t moffset, uint64_t len)
{
    uint32_t o;
    struct fake_map *m;

    if (moffset % fe->page || moffset >= fe->size) {
        violation(fe, "unmap out of bounds", moffset, len);
        return -EINVAL;
    }
    o = fe->owner[moffset / fe->page];
    m = o ? &fe->maps[o - 1] : NULL;
    if (!m || m->moffset != moffset || m->len != len) {
        violation(fe, "unmap is not exactly one mapping", moffset, len);
        return -EINVAL;
    }
    for (uint64_t p = moffset / fe->page; p < (moffset + len) / fe->page; p++)
        fe->owner[p] = 0;
    m->live = false;
    return 0;
}

static int fake_unmap_cb(void *ctx, uint64_t moffset, uint64_t len)
{
    struct fake_fe *fe = ctx;
    int r;

    pthread_mutex_lock(&fe->lock);
    fe->unmap_calls++;
    enter(fe, moffset, len);
    if (is_stale(fe, moffset) || !nap(fe))
        r = -EIO;
    else
        r = inject(fe) ? -EIO : unmap_one_locked(fe, moffset, len);
    leave(fe, moffset);
    pthread_mutex_unlock(&fe->lock);
    return r;
}

static int fake_unmap_batch_cb(void *ctx, const struct fuse_removemapping_one *e, unsigned n)
{
    struct fake_fe *fe = ctx;
    int r = 0;

    pthread_mutex_lock(&fe->lock);
    fe->batch_calls++;
    if (n == 0 || n > DAX_UNMAP_BATCH) {
        violation(fe, "bad batch size", 0, n);
        pthread_mutex_unlock(&fe->lock);
        return -EINVAL;
    }
    /* one owner per slot: entries of the same slot in one batch are fine */
    for (unsigned i = 0; i < n; i++) {
        bool dup = false;

        for (unsigned j = 0; j < i; j++)
            dup |= e[j].moffset / DAX_RANGE_SIZE == e[i].moffset / DAX_RANGE_SIZE;
        if (!dup)
            enter(fe, e[i].moffset, e[i].len);
    }
    if (is_stale(fe, e[0].moffset) || !nap(fe) || inject(fe))
        r = -EIO;
    for (unsigned i = 0; i < n && r == 0; i++)
        r = unmap_one_locked(fe, e[i].moffset, e[i].len);
    for (unsigned i = 0; i < n; i++) {
        bool dup = false;

        for (unsigned j = 0; j < i; j++)
            dup |= e[j].moffset / DAX_RANGE_SIZE == e[i].moffset / DAX_RANGE_SIZE;
        if (!dup)
            leave(fe, e[i].moffset);
    }
    pthread_mutex_unlock(&fe->lock);
    return r;
}

const struct dax_ops fake_ops = { .map = fake_map_cb, .unmap = fake_unmap_cb, .open = fake_open_cb };
const struct dax_ops fake_ops_batch = {
    .map = fake_map_cb, .unmap = fake_unmap_cb, .unmap_batch = fake_unmap_batch_cb,
    .open = fake_open_cb,
};

const struct fake_map *fake_at(const struct fake_fe *fe, uint64_t moffset)
{
    uint32_t o = fe->owner[moffset / fe->page];

    return o ? &fe->maps[o - 1] : NULL;
}

unsigned fake_count(const struct fake_fe *fe)
{
    unsigned n = 0;

    for (size_t i = 0; i < fe->nmaps; i++)
        n += fe->maps[i].live;
    return n;
}

struct cmp_ctx {
    struct fake_fe *fe;
    unsigned seen, bad;
};

static void cmp_one(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset, uint64_t len,
                    bool writable, enum dax_backing backing)
{
    struct cmp_ctx *c = opaque;
    const struct fake_map *m = fake_at(c->fe, moffset);
    bool store = backing == DAX_BACK_STORE;

    c->seen++;
    if (!m || m->moffset != moffset || m->len != len ||
        m->key != (store ? FAKE_STORE_KEY : key) || m->foffset != (store ? moffset : foffset) ||
        m->writable != writable)
        c->bad++;
}

int fake_matches_table(struct fake_fe *fe, struct dax_window *w)
{
    struct cmp_ctx c = { .fe = fe };

    if (dax_for_each_mapping(w, cmp_one, &c) < 0)
        return -1;
    return c.bad || c.seen != fake_count(fe) ? -1 : 0;
}

int fake_inode_stats(struct dax_window *w, uint64_t key, struct dax_inode_stats *st)
{
    struct dax_window_stats ws;
    struct dax_inode_stats *all = NULL;
    size_t n = 0;
    int r = dax_stats_snapshot(w, &ws, &all, &n);

    if (r < 0)
        return r;
    r = -ENOENT;
    for (size_t i = 0; i < n; i++)
        if (all[i].key == key) {
            *st = all[i];
            r = 0;
        }
    free(all);
    return r;
}
