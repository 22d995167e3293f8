/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The passthrough's saved state (daemon/passthrough/pt_state_*.c): a real pt_fs on
 * a temporary share saves what a client holds; a second pt_fs on the same
 * share loads it and must answer the same node ids and handles for the same
 * files, hold the same locks, and give ESTALE/EBADF/EIO for what could not
 * survive, never another file. Hostile states (crafted paths and handles,
 * broken structure) are refused or reach nothing outside the share.
 */
#include "pt_test.h"

#include <sys/file.h>

#include "pt_fhandle_i.h"
#include "state.h"

/* A second fs (and session) on t's share, as a new process would make. */
static struct pt_t *pt_t_on(struct pt_t *t)
{
    struct pt_t *u = calloc(1, sizeof(*u));
    assert_non_null(u);
    strcpy(u->dir, t->dir);
    pt_t_default_cfg(&u->cfg, u->dir);
    assert_int_equal(pt_t_start(u), 0);
    return u;
}

static void pt_t_down_keep(struct pt_t *t)
{
    if (t->fs)
        pt_fs_free(t->fs);
    if (t->se)
        fll_session_free(t->se);
    free(t);
}

/* t's state, without fds (fds NULL) or with them (added to fds). */
static void save(struct pt_t *t, struct vst_writer *w, struct vst_fds *fds)
{
    vst_writer_init(w);
    assert_int_equal(pt_state_save(t->fs, w, fds), 0);
    assert_int_equal(vst_writer_finish(w, fds ? VST_F_FDS : 0, fds ? fds->n : 0), 0);
}

static int load(struct pt_t *u, const struct vst_writer *w, struct vst_fds *fds,
                struct pt_state_report *rep, struct vst_err *err)
{
    struct vst_state st;
    int ret = vst_open(w->buf, w->len, &st, err);
    if (ret < 0)
        return ret;
    return pt_state_load(u->fs, &st, fds, rep, err);
}

static int getattr(struct pt_t *t, uint64_t nodeid, struct fuse_attr_out *out)
{
    PT_REQ(t, q);
    struct fuse_getattr_in in = {0};
    return t->ops->getattr(&q.r, nodeid, &in, out);
}

static ino_t host_ino(struct pt_t *t, const char *name)
{
    struct stat st;
    assert_int_equal(lstat(pt_t_path(t, name), &st), 0);
    return st.st_ino;
}

static uint64_t opendir_fh(struct pt_t *t, uint64_t nodeid)
{
    PT_REQ(t, q);
    struct fuse_open_in in = {0};
    struct fuse_open_out out;
    assert_int_equal(t->ops->opendir(&q.r, nodeid, &in, &out), 0);
    return out.fh;
}

static int setlk(struct pt_t *t, uint64_t nodeid, uint64_t fh, uint64_t owner, uint32_t type,
                 uint64_t start, uint64_t end)
{
    PT_REQ(t, q);
    struct fuse_lk_in in = {.fh = fh, .owner = owner,
                            .lk = {.start = start, .end = end, .type = type, .pid = 77}};
    return t->ops->setlk(&q.r, nodeid, &in, false);
}

/* Whether a write lock on [start, start+len) can be had by someone else now. */
static bool lockable(struct pt_t *t, const char *name, off_t start, off_t len)
{
    int fd = open(pt_t_path(t, name), O_RDWR);
    assert_true(fd >= 0);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    bool ok = fcntl(fd, F_OFD_SETLK, &fl) == 0;
    close(fd);
    return ok;
}

/* Node ids, open files (with their flags and positions in the data), a
 * directory stream: all answer in the new fs as they did. */
static void roundtrip(bool with_fds)
{
    struct pt_t *t = pt_t_up();
    pt_t_write_file(t, "a", "alpha");
    assert_int_equal(mkdir(pt_t_path(t, "d"), 0755), 0);
    pt_t_write_file(t, "d/b", "bravo");
    uint64_t a = pt_t_lookup(t, FUSE_ROOT_ID, "a");
    uint64_t d = pt_t_lookup(t, FUSE_ROOT_ID, "d");
    uint64_t b = pt_t_lookup(t, d, "b");
    pt_t_lookup(t, FUSE_ROOT_ID, "a"); /* nlookup 2 */
    uint64_t fa = pt_t_open(t, a, O_RDWR | O_APPEND);
    uint64_t fb = pt_t_open(t, b, O_RDONLY);
    uint64_t fd_ = opendir_fh(t, d);
    /* Opened with O_TRUNC, then written: reopening must never truncate again. */
    pt_t_write_file(t, "tr", "old contents");
    uint64_t tr = pt_t_lookup(t, FUSE_ROOT_ID, "tr");
    uint64_t ftr = pt_t_open(t, tr, O_RDWR | O_TRUNC);
    assert_int_equal(pt_t_pwrite(t, tr, ftr, "kept", 4, 0, 0), 4);

    struct vst_writer w;
    struct vst_fds fds, recv;
    vst_fds_init(&fds);
    save(t, &w, with_fds ? &fds : NULL);
    if (with_fds) {
        /* What the keeper does: its own copies, the old fs then goes. */
        int *dup_fds = calloc(fds.n + 1, sizeof(int));
        for (unsigned k = 0; k < fds.n; k++)
            dup_fds[k] = fcntl(fds.fd[k], F_DUPFD_CLOEXEC, 3);
        assert_int_equal(vst_fds_adopt(&recv, dup_fds, fds.n), 0);
        free(dup_fds);
    }
    vst_fds_free(&fds);
    struct pt_t *u = pt_t_on(t);
    if (!with_fds) {
        /* A rename while nobody serves: the file handle finds it (root only). */
        char from[256];
        snprintf(from, sizeof(from), "%s", pt_t_path(t, "d/b"));
        assert_int_equal(rename(from, pt_t_path(t, "d/b2")), 0);
    }
    pt_t_down_keep(t);

    struct pt_state_report rep;
    struct vst_err err = {""};
    assert_int_equal(load(u, &w, with_fds ? &recv : NULL, &rep, &err), 0);
    bool handles_open = with_fds || geteuid() == 0;
    assert_int_equal(rep.inodes, handles_open ? 4 : 3);
    assert_int_equal(rep.handles, handles_open ? 4 : 3);
    assert_int_equal(rep.inodes_lost, handles_open ? 0 : 1);

    struct fuse_attr_out ao;
    assert_int_equal(getattr(u, a, &ao), 0);
    assert_int_equal(ao.attr.ino, host_ino(u, "a"));
    assert_int_equal(getattr(u, d, &ao), 0);
    assert_int_equal(ao.attr.ino, host_ino(u, "d"));
    char buf[16] = "";
    assert_int_equal(pt_t_pread(u, a, fa, buf, sizeof(buf), 0), 5);
    assert_memory_equal(buf, "alpha", 5);
    /* O_APPEND came back with the handle: a write lands at the end. */
    assert_int_equal(pt_t_pwrite(u, a, fa, "!", 1, 0, 0), 1);
    assert_int_equal(pt_t_pread(u, a, fa, buf, sizeof(buf), 0), 6);
    assert_memory_equal(buf, "alpha!", 6);
    if (handles_open) {
        assert_int_equal(getattr(u, b, &ao), 0);
        assert_int_equal(ao.attr.ino, host_ino(u, with_fds ? "d/b" : "d/b2"));
        assert_int_equal(pt_t_pread(u, b, fb, buf, sizeof(buf), 0), 5);
        assert_memory_equal(buf, "bravo", 5);
    } else {
        assert_int_equal(getattr(u, b, &ao), -ESTALE);
        assert_int_equal(pt_t_pread(u, b, fb, buf, sizeof(buf), 0), -EBADF);
    }
    assert_int_equal(pt_t_pread(u, tr, ftr, buf, sizeof(buf), 0), 4);
    assert_memory_equal(buf, "kept", 4);
    struct stat trs;
    assert_int_equal(stat(pt_t_path(u, "tr"), &trs), 0);
    assert_int_equal(trs.st_size, 4);
    /* A directory handle reads on. */
    PT_REQ(u, rq);
    char dbuf[512];
    struct fll_dirbuf db = {.buf = dbuf, .size = sizeof(dbuf)};
    struct fuse_read_in rin = {.fh = fd_, .size = sizeof(dbuf)};
    assert_int_equal(u->ops->readdir(&rq.r, d, &rin, &db), 0);
    assert_true(db.len > 0);
    /* The same object looked up again is the same node id; counts went along. */
    assert_int_equal(pt_t_lookup(u, FUSE_ROOT_ID, "a"), a);
    pt_t_forget(u, a, 3);
    assert_int_equal(getattr(u, a, &ao), 0); /* its open handle keeps it */
    assert_int_equal(pt_t_release(u, a, fa), 0);
    assert_int_equal(getattr(u, a, &ao), -ESTALE);

    if (with_fds)
        vst_fds_free(&recv);
    vst_writer_free(&w);
    pt_t_down(u);
}

static void test_roundtrip_file(void **state)
{
    roundtrip(false);
}

static void test_roundtrip_fds(void **state)
{
    roundtrip(true);
}

/*
 * Freed node ids and handles stay stale: a slot freed before the save is
 * handed out again with a newer generation, never the one the guest saw.
 */
static void test_generations(void **state)
{
    struct pt_t *t = pt_t_up();
    pt_t_write_file(t, "x", "x");
    pt_t_write_file(t, "y", "y");
    uint64_t x = pt_t_lookup(t, FUSE_ROOT_ID, "x");
    uint64_t fx = pt_t_open(t, x, O_RDONLY);
    assert_int_equal(pt_t_release(t, x, fx), 0);
    pt_t_forget(t, x, 1); /* slot and handle free */
    uint64_t y = pt_t_lookup(t, FUSE_ROOT_ID, "y");
    /* The highest slot freed too: the next process never had it at all. */
    pt_t_write_file(t, "w", "w");
    uint64_t wn = pt_t_lookup(t, FUSE_ROOT_ID, "w");
    pt_t_forget(t, wn, 1);
    struct vst_writer w;
    save(t, &w, NULL);
    struct pt_t *u = pt_t_on(t);
    pt_t_down_keep(t);
    struct pt_state_report rep;
    struct vst_err err = {""};
    assert_int_equal(load(u, &w, NULL, &rep, &err), 0);
    pt_t_write_file(u, "z", "z");
    uint64_t z = pt_t_lookup(u, FUSE_ROOT_ID, "z");
    uint64_t fz = pt_t_open(u, z, O_RDONLY);
    assert_true(z != x && z != y && z != wn);
    pt_t_write_file(u, "z2", "z2");
    uint64_t z2 = pt_t_lookup(u, FUSE_ROOT_ID, "z2");
    assert_true(z2 != x && z2 != y && z2 != wn);
    assert_int_equal(getattr(u, wn, &(struct fuse_attr_out){0}), -ESTALE);
    assert_true(fz != fx);
    struct fuse_attr_out ao;
    assert_int_equal(getattr(u, x, &ao), -ESTALE);
    assert_int_equal(pt_t_release(u, z, fz), 0);
    vst_writer_free(&w);
    pt_t_down(u);
}

/*
 * Locks: with fds they never leave (the open file description travels);
 * without, they are taken again, and one that someone else took meanwhile is
 * lost: the file's reads, writes and lock requests get EIO until it is closed.
 */
static void locks(bool with_fds, bool stolen)
{
    struct pt_t *t = pt_t_up();
    pt_t_write_file(t, "l", "lockdata");
    uint64_t n = pt_t_lookup(t, FUSE_ROOT_ID, "l");
    uint64_t fh = pt_t_open(t, n, O_RDWR);
    assert_int_equal(setlk(t, n, fh, 0xab, F_WRLCK, 0, 3), 0);
    assert_false(lockable(t, "l", 0, 4));
    assert_true(lockable(t, "l", 4, 4));

    struct vst_writer w;
    struct vst_fds fds, recv;
    vst_fds_init(&fds);
    save(t, &w, with_fds ? &fds : NULL);
    if (with_fds) {
        int *dup_fds = calloc(fds.n + 1, sizeof(int));
        for (unsigned k = 0; k < fds.n; k++)
            dup_fds[k] = fcntl(fds.fd[k], F_DUPFD_CLOEXEC, 3);
        assert_int_equal(vst_fds_adopt(&recv, dup_fds, fds.n), 0);
        free(dup_fds);
    }
    vst_fds_free(&fds);
    struct pt_t *u = pt_t_on(t);
    pt_t_down_keep(t); /* the old process is gone */
    /* With fds the lock never went away; without, it did. */
    assert_true(lockable(u, "l", 0, 4) == !with_fds);
    int thief = -1;
    if (stolen) {
        thief = open(pt_t_path(u, "l"), O_RDWR);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 2, .l_len = 1};
        assert_int_equal(fcntl(thief, F_OFD_SETLK, &fl), 0);
    }
    struct pt_state_report rep;
    struct vst_err err = {""};
    assert_int_equal(load(u, &w, with_fds ? &recv : NULL, &rep, &err), 0);
    assert_int_equal(rep.owners, 1);
    char buf[8];
    if (stolen) {
        assert_int_equal(rep.locks_lost, 1);
        assert_int_equal(pt_t_pread(u, n, fh, buf, sizeof(buf), 0), -EIO);
        assert_int_equal(pt_t_pwrite(u, n, fh, "x", 1, 0, 0), -EIO);
        assert_int_equal(setlk(u, n, fh, 0xab, F_UNLCK, 0, 3), -EIO);
        close(thief);
        /* Closed: the file is usable again through a new open. */
        assert_int_equal(pt_t_release(u, n, fh), 0);
        pt_t_lookup(u, FUSE_ROOT_ID, "l");
        fh = pt_t_open(u, n, O_RDWR);
        assert_int_equal(pt_t_pread(u, n, fh, buf, sizeof(buf), 0), 8);
    } else {
        assert_int_equal(rep.locks_lost, 0);
        assert_false(lockable(u, "l", 0, 4)); /* held again, by the restored owner */
        assert_true(lockable(u, "l", 4, 4));
        assert_int_equal(pt_t_pread(u, n, fh, buf, sizeof(buf), 0), 8);
        /* The owner unlocks through the new fs. */
        assert_int_equal(setlk(u, n, fh, 0xab, F_UNLCK, 0, 3), 0);
        assert_true(lockable(u, "l", 0, 4));
    }
    if (with_fds)
        vst_fds_free(&recv);
    vst_writer_free(&w);
    pt_t_down(u);
}

static void test_locks_fds(void **state)
{
    locks(true, false);
}

static void test_locks_file(void **state)
{
    locks(false, false);
}

static void test_locks_stolen(void **state)
{
    locks(false, true);
}

/* A file deleted, and another made at its name, while nobody served: the old
 * node id is stale; the new file is not handed out under it. */
static void test_replaced_file(void **state)
{
    struct pt_t *t = pt_t_up();
    pt_t_write_file(t, "f", "old");
    uint64_t f = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    struct vst_writer w;
    save(t, &w, NULL);
    struct pt_t *u = pt_t_on(t);
    pt_t_down_keep(t);
    assert_int_equal(unlink(pt_t_path(u, "f")), 0);
    pt_t_write_file(u, "g", "pad"); /* a tmpfs gives the next file another number */
    pt_t_write_file(u, "f", "new");
    struct pt_state_report rep;
    struct vst_err err = {""};
    assert_int_equal(load(u, &w, NULL, &rep, &err), 0);
    assert_int_equal(rep.inodes_lost, 1);
    struct fuse_attr_out ao;
    assert_int_equal(getattr(u, f, &ao), -ESTALE);
    vst_writer_free(&w);
    pt_t_down(u);
}

/* ---- Hostile states ------------------------------------------------------------------- */

struct rec {
    uint32_t idx, gen, type;
    uint64_t nlookup, dev, ino, mnt_id;
    const char *path;
    const struct pt_fh *fh;
    uint32_t fdi;
    bool fd;
};

/* A state without fds: FS (no mounts), the root's record from u's root, the
 * given inode records, then handles and locks sections given raw. */
static void craft(struct pt_t *u, struct vst_writer *w, const struct rec *recs, unsigned n,
                  void (*handles)(struct vst_writer *), uint32_t flags, uint32_t nfds)
{
    struct stat rs;
    assert_int_equal(stat(u->dir, &rs), 0);
    vst_writer_init(w);
    vst_section_begin(w, VST_SEC_FS, 1);
    for (int k = 0; k < 4; k++)
        vst_put_u8(w, 0);
    vst_put_u32(w, 10);
    vst_put_u32(w, 10);
    vst_put_u32(w, 0);
    vst_section_end(w);
    vst_section_begin(w, VST_SEC_FS_INODES, 1);
    vst_put_u32(w, n + 1);
    vst_put_u32(w, 1);
    vst_put_u32(w, 0);
    vst_put_u64(w, 1);
    vst_put_u32(w, S_IFDIR);
    vst_put_u8(w, 0x8);
    vst_put_u64(w, rs.st_dev);
    vst_put_u64(w, rs.st_ino);
    vst_put_u64(w, 0);
    for (unsigned k = 0; k < n; k++) {
        const struct rec *r = &recs[k];
        uint8_t fl = 0x8 | (r->path ? 0x4 : 0) | (r->fh ? 0x2 : 0) | (r->fd ? 0x1 : 0);
        vst_put_u32(w, r->idx);
        vst_put_u32(w, r->gen);
        vst_put_u64(w, r->nlookup);
        vst_put_u32(w, r->type);
        vst_put_u8(w, fl);
        vst_put_u64(w, r->dev);
        vst_put_u64(w, r->ino);
        vst_put_u64(w, r->mnt_id);
        if (r->fd)
            vst_put_u32(w, r->fdi);
        if (r->fh) {
            vst_put_u32(w, (uint32_t)r->fh->type);
            vst_put_u8(w, r->fh->len);
            vst_put_bytes(w, r->fh->len > PT_FH_INLINE ? r->fh->u.ext : r->fh->u.inl,
                          r->fh->len);
        }
        if (r->path) {
            vst_put_u16(w, (uint16_t)strlen(r->path));
            vst_put_bytes(w, r->path, strlen(r->path));
        }
    }
    vst_section_end(w);
    vst_section_begin(w, VST_SEC_FS_HANDLES, 1);
    if (handles)
        handles(w);
    else
        vst_put_u32(w, 0);
    vst_section_end(w);
    vst_section_begin(w, VST_SEC_FS_LOCKS, 1);
    vst_put_u32(w, 0);
    vst_section_end(w);
    assert_int_equal(vst_writer_finish(w, flags, nfds), 0);
}

/* The host's file handle of fd (inline: tests stay below PT_FH_INLINE or skip). */
static bool handle_of(int fd, struct pt_fh *fh)
{
    struct {
        struct file_handle h;
        unsigned char b[PT_FH_MAX];
    } x;
    int mnt;
    x.h.handle_bytes = PT_FH_MAX;
    if (name_to_handle_at(fd, "", &x.h, &mnt, AT_EMPTY_PATH) < 0 ||
        x.h.handle_bytes > PT_FH_INLINE)
        return false;
    fh->type = x.h.handle_type;
    fh->len = (uint8_t)x.h.handle_bytes;
    memcpy(fh->u.inl, x.b, fh->len);
    return true;
}

static struct rec rec_of(const char *host_path, uint32_t idx, const char *path)
{
    struct stat st;
    assert_int_equal(lstat(host_path, &st), 0);
    return (struct rec){.idx = idx, .gen = 0, .nlookup = 1, .type = st.st_mode & S_IFMT,
                        .dev = st.st_dev, .ino = st.st_ino, .path = path};
}

/* Paths and handles that lead outside the share reach nothing, even when the
 * record describes the outside object exactly. */
static void test_no_escape(void **state)
{
    struct pt_t *u = pt_t_up();
    char outside[128];
    snprintf(outside, sizeof(outside), "%s-outside", u->dir);
    int fd = open(outside, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "secret", 6), 6);
    close(fd);
    assert_int_equal(symlink("/", pt_t_path(u, "up")), 0);
    assert_int_equal(mkdir(pt_t_path(u, "sub"), 0755), 0);

    const char *base = strrchr(outside, '/') + 1;
    char dotdot[160], viasym[160], abs[160], dotdot2[160];
    snprintf(dotdot, sizeof(dotdot), "../%s", base);
    snprintf(dotdot2, sizeof(dotdot2), "sub/../../%s", base);
    snprintf(viasym, sizeof(viasym), "up%s", outside);
    snprintf(abs, sizeof(abs), "%s", outside);
    struct pt_fh fh = {0};
    int ofd = open(outside, O_PATH);
    bool have_fh = handle_of(ofd, &fh);
    close(ofd);
    struct rec recs[] = {
        rec_of(outside, 2, dotdot),   rec_of(outside, 3, dotdot2), rec_of(outside, 4, viasym),
        rec_of(outside, 5, abs),      rec_of(outside, 6, "./x"),    rec_of(outside, 7, "sub//x"),
        rec_of(outside, 8, NULL),
    };
    recs[6].fh = have_fh ? &fh : NULL; /* a handle of the outside file, no path */
    struct vst_writer w;
    craft(u, &w, recs, sizeof(recs) / sizeof(recs[0]), NULL, 0, 0);
    struct pt_state_report rep;
    struct vst_err err = {""};
    assert_int_equal(load(u, &w, NULL, &rep, &err), 0);
    assert_int_equal(rep.inodes, 0);
    assert_int_equal(rep.inodes_lost, 7);
    struct fuse_attr_out ao;
    for (uint32_t idx = 2; idx <= 8; idx++)
        assert_int_equal(getattr(u, idx, &ao), -ESTALE);
    assert_int_equal(pt_t_inode_count(u->fs), 1);
    unlink(outside);
    vst_writer_free(&w);
    pt_t_down(u);
}

static void expect_refused(struct pt_t *u, struct vst_writer *w, const char *why)
{
    struct pt_state_report rep;
    struct vst_err err = {""};
    int ret = load(u, w, NULL, &rep, &err);
    if (ret >= 0 || !strstr(err.msg, why))
        fail_msg("load: %d '%s', expected a refusal saying '%s'", ret, err.msg, why);
    /* Nothing of a refused state is kept. */
    assert_int_equal(pt_t_inode_count(u->fs), 1);
    vst_writer_free(w);
}

static void handles_dir_flag_on_file(struct vst_writer *w)
{
    vst_put_u32(w, 1);
    vst_put_u32(w, 1);
    vst_put_u32(w, 0);
    vst_put_u64(w, 2);
    vst_put_u32(w, O_RDONLY | O_DIRECTORY);
    vst_put_u8(w, 0);
}

static void handles_count_lies(struct vst_writer *w)
{
    vst_put_u32(w, 1000000);
}

static void handles_unknown_flags(struct vst_writer *w)
{
    vst_put_u32(w, 1);
    vst_put_u32(w, 1);
    vst_put_u32(w, 0);
    vst_put_u64(w, 2);
    vst_put_u32(w, O_RDONLY | O_CREAT);
    vst_put_u8(w, 0);
}

static void test_refused(void **state)
{
    struct pt_t *u = pt_t_up();
    pt_t_write_file(u, "a", "a");
    struct rec a = rec_of(pt_t_path(u, "a"), 2, "a");
    struct vst_writer w;

    struct rec dup[] = {a, a};
    craft(u, &w, dup, 2, NULL, 0, 0);
    expect_refused(u, &w, "named twice");

    struct rec big = a;
    big.idx = PT_MAX_SLOTS;
    craft(u, &w, &big, 1, NULL, 0, 0);
    expect_refused(u, &w, "out of range");

    struct rec typ = a;
    typ.type = 0170000;
    craft(u, &w, &typ, 1, NULL, 0, 0);
    expect_refused(u, &w, "file type");

    struct rec fdrec = a;
    fdrec.fd = true;
    craft(u, &w, &fdrec, 1, NULL, 0, 0);
    expect_refused(u, &w, "names an fd");

    craft(u, &w, &a, 1, handles_dir_flag_on_file, 0, 0);
    expect_refused(u, &w, "malformed");
    craft(u, &w, &a, 1, handles_unknown_flags, 0, 0);
    expect_refused(u, &w, "malformed");
    craft(u, &w, &a, 1, handles_count_lies, 0, 0);
    expect_refused(u, &w, "does not fit");

    /* Another share's root. */
    struct pt_t *other = pt_t_up();
    struct vst_writer ow;
    craft(other, &ow, NULL, 0, NULL, 0, 0);
    expect_refused(u, &ow, "another shared directory");
    pt_t_down(other);

    /* Accepted after all that: the fs is still fresh and usable. */
    craft(u, &w, &a, 1, NULL, 0, 0);
    struct pt_state_report rep;
    struct vst_err err = {""};
    assert_int_equal(load(u, &w, NULL, &rep, &err), 0);
    assert_int_equal(rep.inodes, 1);
    struct fuse_attr_out ao;
    assert_int_equal(getattr(u, 2, &ao), 0);
    vst_writer_free(&w);
    pt_t_down(u);
}

/* With fds: an fd that is not the object its record names refuses the state. */
static void test_fd_mismatch(void **state)
{
    struct pt_t *u = pt_t_up();
    pt_t_write_file(u, "a", "a");
    pt_t_write_file(u, "b", "b");
    struct rec a = rec_of(pt_t_path(u, "a"), 2, NULL);
    a.fd = true;
    a.fdi = 0;
    struct vst_writer w;
    craft(u, &w, &a, 1, NULL, VST_F_FDS, 1);
    int fb = open(pt_t_path(u, "b"), O_PATH | O_CLOEXEC);
    struct vst_fds recv;
    assert_int_equal(vst_fds_adopt(&recv, &fb, 1), 0);
    struct pt_state_report rep;
    struct vst_err err = {""};
    assert_true(load(u, &w, &recv, &rep, &err) < 0);
    assert_non_null(strstr(err.msg, "another object"));
    assert_int_equal(pt_t_inode_count(u->fs), 1);
    vst_fds_free(&recv);
    vst_writer_free(&w);
    pt_t_down(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_file), cmocka_unit_test(test_roundtrip_fds),
        cmocka_unit_test(test_generations),    cmocka_unit_test(test_locks_fds),
        cmocka_unit_test(test_locks_file),     cmocka_unit_test(test_locks_stolen),
        cmocka_unit_test(test_replaced_file),  cmocka_unit_test(test_no_escape),
        cmocka_unit_test(test_refused),        cmocka_unit_test(test_fd_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
