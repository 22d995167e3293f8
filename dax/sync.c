/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Keeping a file and its store mappings in step (store.c has the pages):
 *
 *   the guest's stores -> the file   write-back: on FUSE_FSYNC and FUSE_FLUSH,
 *                                    before the daemon reads or changes the file
 *                                    for the guest, when a mapping goes, at a
 *                                    reset, and periodically (dax_window_sync);
 *   the file's changes -> the store  merge: after the daemon changed the file
 *                                    for the guest, when an attribute reply
 *                                    shows someone else did (the stamp the
 *                                    window last saw differs), and periodically.
 *
 * Each works a slot at a time: the slot is claimed SYNCING (dax_i.h), the work
 * done with the lock dropped, the slot released; a thread owns one slot at a
 * time and waits for none while it owns one. Direct mappings get one thing
 * here: their blocks allocated again after the daemon changed the file under
 * them, so a store through them cannot hit a hole on a full file system.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "dax_i.h"

/* What one pass over a file's slots does to the extents it touches. */
enum {
    ACT_WRITEBACK = 1 << 0, /* writable store extents: the guest's stores to the file */
    ACT_MERGE = 1 << 1,     /* store extents: the file's changes to the store */
    ACT_PREALLOC = 1 << 2,  /* writable direct extents: blocks allocated again */
};

/* How often a pass starts over after its file's fds were opened again. */
#define PASS_RETRIES 4

int dax_inode_open_fds_locked(struct dax_window *w, struct dax_inode *ino, bool need_rw)
{
    int fd;

    if (ino->fd >= 0 && (!need_rw || ino->fd_rw >= 0))
        return 0;
    ino->refs++;
    pthread_mutex_unlock(&w->lock);
    fd = w->ops->open(w->ctx, ino->key, need_rw, false);
    pthread_mutex_lock(&w->lock);
    dax_inode_put_locked(w, ino);
    if (fd < 0)
        return fd;
    if (ino->st.extents == 0) {
        /* Its mappings went meanwhile: nothing to keep it for. */
        pthread_mutex_unlock(&w->lock);
        close(fd);
        pthread_mutex_lock(&w->lock);
        return 1;
    }
    if (need_rw && ino->fd_rw < 0) {
        ino->fd_rw = fd;
        if (ino->fd < 0)
            ino->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    } else if (ino->fd < 0) {
        ino->fd = fd;
    } else {
        pthread_mutex_unlock(&w->lock);
        close(fd); /* another thread opened it first */
        pthread_mutex_lock(&w->lock);
    }
    return 1;
}

static void count_writeback_locked(struct dax_window *w, struct dax_inode *ino,
                                   const struct dax_store_sync *out, int r)
{
    w->st.writeback_bytes += out->bytes;
    w->st.writeback_runs += out->runs;
    ino->st.writeback_bytes += out->bytes;
    if (out->pages)
        w->st.writebacks++;
    if (r < 0) {
        w->st.writeback_errors++;
        ino->st.writeback_errors++;
        if (!ino->wb_err)
            ino->wb_err = r;
    }
}

/*
 * The owner of busy slot s writes extent i's stores back. The file's new stamp
 * is not taken as seen: it would hide a change the host made beside this
 * write; the next look merges the file instead.
 */
int dax_extent_writeback_locked(struct dax_window *w, uint32_t s, unsigned i)
{
    struct dax_extent *e = &w->slots[s].ext[i];
    struct dax_inode *ino = e->ino;
    struct dax_store_sync out = {0};
    uint64_t foffset = e->foffset, m = dax_slot_base(s) + e->off, len = e->len;
    int fd = ino->fd_rw, r;

    assert(dax_slot_busy(&w->slots[s]) && dax_extent_store(e) && e->writable);
    if (fd < 0) {
        r = -EBADF; /* its file could not be opened again: the stores stay */
        count_writeback_locked(w, ino, &out, r);
        return r;
    }
    pthread_mutex_unlock(&w->lock);
    r = dax_store_writeback(&w->store, fd, foffset, m, len, &out);
    pthread_mutex_lock(&w->lock);
    count_writeback_locked(w, ino, &out, r);
    if (out.bytes)
        ino->self_changed = true;
    return r;
}

/* The owner of busy slot s merges extent i's file into the store. */
static int extent_merge_locked(struct dax_window *w, uint32_t s, unsigned i,
                               uint64_t *pages)
{
    struct dax_extent *e = &w->slots[s].ext[i];
    struct dax_inode *ino = e->ino;
    struct dax_store_sync out = {0};
    uint64_t foffset = e->foffset, m = dax_slot_base(s) + e->off, len = e->len;
    bool writable = e->writable;
    int fd = ino->fd_rw >= 0 ? ino->fd_rw : ino->fd, r;

    if (fd < 0)
        return -EBADF;
    pthread_mutex_unlock(&w->lock);
    r = dax_store_merge(&w->store, fd, foffset, m, len, writable, &out);
    pthread_mutex_lock(&w->lock);
    w->st.merges++;
    w->st.merged_pages += out.pages;
    if (r < 0)
        w->st.merge_errors++;
    *pages += out.pages;
    return r;
}

/* Allocates the blocks under [off, off + len) that lie inside the file. 0,
 * 1 when the file system cannot (the caller decides), or -errno. */
int dax_prealloc(int fd, uint64_t off, uint64_t len)
{
    struct dax_file_stamp st;
    int r = dax_stamp_fd(fd, &st);

    if (r < 0)
        return r;
    if (off >= st.size)
        return 0;
    if (len > st.size - off)
        len = st.size - off;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
        return 0;
    if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)
        return 1;
    return -errno;
}

static bool overlaps(const struct dax_extent *e, uint64_t off, uint64_t len)
{
    return e->foffset < off + len && off < e->foffset + e->len;
}

static bool extent_wants(const struct dax_extent *e, unsigned act)
{
    if (dax_extent_store(e))
        return (act & ACT_MERGE) || ((act & ACT_WRITEBACK) && e->writable);
    return (act & ACT_PREALLOC) && e->writable;
}

/* The slots (deduplicated) holding extents of ino that act touches in range. */
static uint32_t *collect_slots_locked(struct dax_window *w, struct dax_inode *ino,
                                      uint64_t off, uint64_t len, unsigned act, uint32_t *n)
{
    uint32_t *slots = malloc((ino->st.extents ? ino->st.extents : 1) * sizeof(*slots));

    *n = 0;
    if (!slots)
        return NULL;
    for (uint32_t id = ino->ext_head; id != DAX_NONE;) {
        uint32_t s = id / DAX_SLOT_MAX_EXTENTS;
        const struct dax_extent *e = &w->slots[s].ext[id % DAX_SLOT_MAX_EXTENTS];
        bool dup = false;

        if (extent_wants(e, act) && overlaps(e, off, len)) {
            for (uint32_t k = 0; k < *n && !dup; k++)
                dup = slots[k] == s;
            if (!dup)
                slots[(*n)++] = s;
        }
        id = e->ino_next;
    }
    return slots;
}

static bool needs_rw(const struct dax_window *w, const struct dax_inode *ino, unsigned act)
{
    if (!(act & (ACT_WRITEBACK | ACT_PREALLOC)))
        return false;
    for (uint32_t id = ino->ext_head; id != DAX_NONE;) {
        const struct dax_extent *e =
            &w->slots[id / DAX_SLOT_MAX_EXTENTS].ext[id % DAX_SLOT_MAX_EXTENTS];

        if (e->writable && extent_wants(e, act))
            return true;
        id = e->ino_next;
    }
    return false;
}

/*
 * One pass of act over the extents of ino overlapping [off, off + len), a slot
 * at a time. Lock held; ino referenced by the caller. *pages counts merged
 * pages. 0, the first error, or -ENOMEM.
 */
static int pass_locked(struct dax_window *w, struct dax_inode *ino, uint64_t off, uint64_t len,
                       unsigned act, uint64_t *pages)
{
    int first = 0;

    for (int tries = 0; tries < PASS_RETRIES; tries++) {
        bool rw = needs_rw(w, ino, act);
        int o = dax_inode_open_fds_locked(w, ino, rw);
        uint32_t n;

        if (o < 0)
            return o;
        if (o > 0)
            continue; /* the lock was dropped: look again */
        _cleanup_free_ uint32_t *slots = collect_slots_locked(w, ino, off, len, act, &n);
        if (!slots)
            return -ENOMEM;
        bool reopened = false;
        for (uint32_t k = 0; k < n && !reopened; k++) {
            uint32_t s = slots[k];

            dax_slot_wait_idle_locked(w, s);
            if (w->slots[s].state != DAX_SLOT_MAPPED)
                continue;
            if (ino->fd < 0 || (rw && ino->fd_rw < 0)) {
                reopened = true; /* its fds went and came back meanwhile */
                break;
            }
            dax_slot_set_state_locked(w, s, DAX_SLOT_SYNCING);
            for (unsigned i = 0; i < DAX_SLOT_MAX_EXTENTS; i++) {
                struct dax_extent *e = &w->slots[s].ext[i];
                int r = 0;

                if (e->ino != ino || !overlaps(e, off, len) || !extent_wants(e, act))
                    continue;
                if (dax_extent_store(e) && e->writable && (act & ACT_WRITEBACK))
                    r = dax_extent_writeback_locked(w, s, i);
                if (r == 0 && dax_extent_store(e) && (act & ACT_MERGE))
                    r = extent_merge_locked(w, s, i, pages);
                if (!dax_extent_store(e) && (act & ACT_PREALLOC)) {
                    uint64_t a = e->foffset > off ? e->foffset : off;
                    uint64_t b = e->foffset + e->len < off + len ? e->foffset + e->len
                                                                 : off + len;
                    int fd = ino->fd_rw;

                    pthread_mutex_unlock(&w->lock);
                    r = dax_prealloc(fd, a, b - a);
                    pthread_mutex_lock(&w->lock);
                    if (r < 0)
                        w->st.prealloc_errors++;
                    r = r > 0 ? 0 : r;
                }
                if (r < 0 && !first)
                    first = r;
            }
            dax_slot_release_locked(w, s);
        }
        if (!reopened)
            return first;
    }
    return first ? first : -EAGAIN;
}

/* Finds key's record and references it, if it has extents: NULL otherwise. */
static struct dax_inode *get_mapped_locked(struct dax_window *w, uint64_t key)
{
    struct dax_inode *ino = dax_inode_find_locked(w, key);

    if (!ino || ino->st.extents == 0)
        return NULL;
    ino->refs++;
    return ino;
}

/* A merge of the whole file found it changed by someone else: counted. */
static void host_changed_locked(struct dax_window *w, struct dax_inode *ino)
{
    dax_inode_decay_locked(w, ino);
    ino->st.host_changes++;
    ino->st.recent_host_changes++;
    w->st.host_changes++;
}

/*
 * Merges every store extent of ino; a change found (pages, or a new size the
 * daemon did not make) counts as the host's. The look comes first: a change
 * after it that the merge missed makes the next look differ. It becomes the
 * seen stamp only if no slot change was bringing store extents of ino when it
 * was taken (one that read the file before it would not be covered).
 */
static int merge_all_locked(struct dax_window *w, struct dax_inode *ino,
                            const struct dax_file_stamp *now)
{
    struct dax_file_stamp look;
    uint64_t pages = 0;
    bool size_moved = ino->seen_valid && !ino->self_changed && now && now->size != ino->seen.size;
    bool looked = false;
    int r, fd;

    r = dax_inode_open_fds_locked(w, ino, false);
    for (int tries = 1; r > 0 && tries < PASS_RETRIES; tries++)
        r = dax_inode_open_fds_locked(w, ino, false); /* the lock was dropped */
    fd = ino->fd_rw >= 0 ? ino->fd_rw : ino->fd;
    if (r == 0 && fd >= 0 && ino->store_coming == 0)
        looked = dax_stamp_fd(fd, &look) == 0;
    ino->self_changed = false;
    r = r < 0 ? r : pass_locked(w, ino, 0, UINT64_MAX, ACT_MERGE, &pages);
    if (pages || size_moved)
        host_changed_locked(w, ino);
    if (r == 0 && looked)
        dax_inode_set_seen_locked(w, ino, &look);
    else
        ino->seen_valid = false;
    return r;
}

int dax_inode_sync(struct dax_window *w, uint64_t key)
{
    struct dax_inode *ino;
    uint64_t pages = 0;
    int r = 0;

    pthread_mutex_lock(&w->lock);
    ino = dax_inode_find_locked(w, key);
    if (ino) {
        ino->refs++;
        if (ino->st.store_extents)
            pass_locked(w, ino, 0, UINT64_MAX, ACT_WRITEBACK, &pages);
        r = ino->wb_err; /* reported once, as errseq does for a local file */
        ino->wb_err = 0;
        dax_inode_put_locked(w, ino);
    }
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
    return r;
}

/*
 * One pass over [off, off + len) of key's file, if it has mappings the pass
 * can act on (write-back and merge: store extents; prealloc: direct ones). A
 * merge of the daemon's own change leaves the file's new stamp untaken: the
 * next look merges the rest.
 */
static int pass_mapped(struct dax_window *w, uint64_t key, uint64_t off, uint64_t len,
                       unsigned act)
{
    struct dax_inode *ino;
    uint64_t pages = 0;
    int r = 0;

    if (len > UINT64_MAX - off)
        len = UINT64_MAX - off;
    pthread_mutex_lock(&w->lock);
    ino = get_mapped_locked(w, key);
    if (ino) {
        if (ino->st.store_extents || (act & ACT_PREALLOC))
            r = pass_locked(w, ino, off, len, act, &pages);
        if (act & ACT_MERGE)
            ino->self_changed = true;
        dax_inode_put_locked(w, ino);
    }
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
    return r;
}

int dax_inode_before_io(struct dax_window *w, uint64_t key, uint64_t off, uint64_t len)
{
    return pass_mapped(w, key, off, len, ACT_WRITEBACK);
}

void dax_inode_after_change(struct dax_window *w, uint64_t key, uint64_t off, uint64_t len)
{
    pass_mapped(w, key, off, len, ACT_MERGE | ACT_PREALLOC);
}

void dax_inode_attr(struct dax_window *w, uint64_t key, const struct dax_file_stamp *now)
{
    struct dax_inode *ino;

    pthread_mutex_lock(&w->lock);
    ino = get_mapped_locked(w, key);
    if (ino) {
        if (ino->st.store_extents && !(ino->seen_valid && dax_stamp_equal(now, &ino->seen)))
            merge_all_locked(w, ino, now);
        dax_inode_put_locked(w, ino);
    }
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
}

/* The keys of every file with store extents. */
static uint64_t *store_keys_locked(struct dax_window *w, size_t *n)
{
    uint64_t *keys = malloc((w->ninodes ? w->ninodes : 1) * sizeof(*keys));

    *n = 0;
    if (!keys)
        return NULL;
    for (uint32_t b = 0; b < w->ino_buckets; b++)
        for (struct dax_inode *ino = w->ino_hash[b]; ino; ino = ino->hnext)
            if (ino->st.store_extents)
                keys[(*n)++] = ino->key;
    return keys;
}

int dax_window_sync(struct dax_window *w, unsigned what)
{
    _cleanup_free_ uint64_t *keys = NULL;
    size_t n;
    int first = 0;

    pthread_mutex_lock(&w->lock);
    keys = store_keys_locked(w, &n);
    if (!keys) {
        pthread_mutex_unlock(&w->lock);
        return -ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        struct dax_inode *ino = get_mapped_locked(w, keys[k]);
        uint64_t pages = 0;
        int r = 0;

        if (!ino)
            continue;
        if (ino->st.store_extents && (what & DAX_SYNC_WRITEBACK))
            r = pass_locked(w, ino, 0, UINT64_MAX, ACT_WRITEBACK, &pages);
        if (ino->st.store_extents && (what & (DAX_SYNC_CHECK | DAX_SYNC_MERGE_ALL))) {
            struct dax_file_stamp now;
            int fd = ino->fd_rw >= 0 ? ino->fd_rw : ino->fd;
            bool have = fd >= 0 && dax_stamp_fd(fd, &now) == 0;
            bool changed = !have || !ino->seen_valid || !dax_stamp_equal(&now, &ino->seen);
            int m = 0;

            if (changed || (what & DAX_SYNC_MERGE_ALL))
                m = merge_all_locked(w, ino, have ? &now : NULL);
            r = r ? r : m;
        }
        if (r < 0 && !first)
            first = r;
        dax_inode_put_locked(w, ino);
    }
    pthread_mutex_unlock(&w->lock);
    dax_close_pending(w);
    return first;
}
