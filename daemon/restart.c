/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Saved states put together, and how they travel: see restart.h. Sections
 * written here (version 1 each, DAX version 2):
 *
 *   ORIGIN    u16 len, the writer's "vufsd VERSION" (informational)
 *   FUSE      u8 initialized, u8 driver_stopped, u32 client_minor,
 *             u32 proto_minor, u64 capable, u64 want, u32 max_write,
 *             u16 max_pages, u16 map_alignment, u32 max_readahead, u32 time_gran
 *   DAX       u64 window size, u32 window store, u32 its shadow (fd indices,
 *             VST_NO_FD in a state without fds), u32 count, per mapping
 *             u64 node id, u64 file offset, u64 window offset, u64 length,
 *             u8 writable, u8 backing (enum dax_backing). Version 1 had no
 *             store and only file mappings.
 *   LISTENER  u8 kind (0 none, 1 an fd given with --fd, 2 --socket-path),
 *             u32 listening socket, u32 directory, u32 pid file (fd indices),
 *             u8 bound, u16 len + socket name, u16 len + pid file name
 */
#include "restart.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "dax/dax.h"
#include "device.h"
#include "fuse_lowlevel/fll.h"
#include "log.h"
#include "daemon/passthrough/passthrough.h"
#include "sandbox/sandbox.h"
#include "vufs_util.h"
#include "vufsd-config.h"

/* ---- FUSE --------------------------------------------------------------------------- */

static void vrs_save_fuse(struct vufsd_dev *dev, struct vst_writer *w)
{
    struct fll_session_state s;
    fll_session_save(dev->se, &s);
    vst_section_begin(w, VST_SEC_FUSE, 1);
    vst_put_u8(w, s.initialized);
    vst_put_u8(w, s.driver_stopped);
    vst_put_u32(w, s.client_minor);
    vst_put_u32(w, s.proto_minor);
    vst_put_u64(w, s.capable);
    vst_put_u64(w, s.want);
    vst_put_u32(w, s.max_write);
    vst_put_u16(w, s.max_pages);
    vst_put_u16(w, s.map_alignment);
    vst_put_u32(w, s.max_readahead);
    vst_put_u32(w, s.time_gran);
    vst_section_end(w);
}

static int vrs_load_fuse(struct vufsd_dev *dev, const struct vst_state *st, struct vst_err *err)
{
    struct fll_session_state s;
    struct vst_reader r;
    uint32_t ver;

    if (!vst_section(st, VST_SEC_FUSE, &r, &ver))
        return vst_fail(err, -EINVAL, "state: no FUSE session");
    if (ver != 1)
        return vst_fail(err, -EINVAL, "state: FUSE section version %u unknown", ver);
    if (!vst_get_bool(&r, &s.initialized) || !vst_get_bool(&r, &s.driver_stopped) ||
        !vst_get_u32(&r, &s.client_minor) || !vst_get_u32(&r, &s.proto_minor) ||
        !vst_get_u64(&r, &s.capable) || !vst_get_u64(&r, &s.want) ||
        !vst_get_u32(&r, &s.max_write) || !vst_get_u16(&r, &s.max_pages) ||
        !vst_get_u16(&r, &s.map_alignment) || !vst_get_u32(&r, &s.max_readahead) ||
        !vst_get_u32(&r, &s.time_gran) || !vst_reader_done(&r))
        return vst_fail(err, -EBADMSG, "state: FUSE section malformed");
    int ret = fll_session_restore(dev->se, &s);
    if (ret < 0)
        return vst_fail(err, ret, "state: the FUSE session is not one this vufsd could answer");
    return 0;
}

/* ---- DAX ---------------------------------------------------------------------------- */

struct vrs_dax_save {
    struct vst_writer *w;
    uint32_t n;
};

static void vrs_dax_count(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset,
                          uint64_t len, bool writable, enum dax_backing backing)
{
    struct vrs_dax_save *s = opaque;
    s->n++;
}

static void vrs_dax_put(void *opaque, uint64_t key, uint64_t foffset, uint64_t moffset,
                        uint64_t len, bool writable, enum dax_backing backing)
{
    struct vrs_dax_save *s = opaque;
    if (s->n == 0)
        return; /* one more than counted: a live window (not quiesced) */
    s->n--;
    vst_put_u64(s->w, key);
    vst_put_u64(s->w, foffset);
    vst_put_u64(s->w, moffset);
    vst_put_u64(s->w, len);
    vst_put_u8(s->w, writable);
    vst_put_u8(s->w, (uint8_t)backing);
}

static uint64_t vrs_window_size(struct dax_window *dax)
{
    struct dax_window_stats st;
    dax_window_get_stats(dax, &st);
    return st.window_size;
}

static int vrs_save_dax(struct dax_window *dax, struct vst_writer *w, struct vst_fds *fds)
{
    struct vrs_dax_save s = {.w = w};
    uint32_t fi[2] = {VST_NO_FD, VST_NO_FD};
    int store_fd, shadow_fd;
    int ret = dax_for_each_mapping(dax, vrs_dax_count, &s);
    if (ret < 0)
        return ret;
    /* The store's pages are the guest's view of its store mappings: they go with the state. */
    dax_window_store_fds(dax, &store_fd, &shadow_fd);
    if (fds && ((ret = vst_fd_add(fds, store_fd, &fi[0])) < 0 ||
                (ret = vst_fd_add(fds, shadow_fd, &fi[1])) < 0))
        return ret;
    vst_section_begin(w, VST_SEC_DAX, 2);
    vst_put_u64(w, vrs_window_size(dax));
    vst_put_u32(w, fi[0]);
    vst_put_u32(w, fi[1]);
    vst_put_u32(w, s.n);
    ret = dax_for_each_mapping(dax, vrs_dax_put, &s);
    /* The device is quiesced: nothing maps between the two passes. */
    if (ret == 0 && s.n != 0)
        ret = -EAGAIN;
    vst_section_end(w);
    return ret;
}

/* The old process's window store, when the state carries it: true if taken. */
static int vrs_load_dax_store(const struct vrs_parts *p, struct vst_reader *r,
                              struct vst_fds *fds, bool *have, struct vst_err *err)
{
    uint32_t fi[2];
    int fd[2] = {-1, -1};

    *have = false;
    if (!vst_get_u32(r, &fi[0]) || !vst_get_u32(r, &fi[1]))
        return vst_fail(err, -EBADMSG, "state: DAX section malformed");
    if (fi[0] == VST_NO_FD && fi[1] == VST_NO_FD)
        return 0;
    if (!fds || fi[0] == VST_NO_FD || fi[1] == VST_NO_FD || vst_fd_take(fds, fi[0], &fd[0]) < 0 ||
        vst_fd_take(fds, fi[1], &fd[1]) < 0) {
        vufs_close(&fd[0]);
        return vst_fail(err, -EBADF, "state: the DAX window store's fds are missing");
    }
    int ret = dax_window_restore_store(p->dax, fd[0], fd[1]);
    if (ret < 0) {
        close(fd[0]);
        close(fd[1]);
        return vst_fail(err, ret, "state: the DAX window store refused: %s", strerror(-ret));
    }
    *have = true;
    return 0;
}

static int vrs_load_dax(const struct vrs_parts *p, const struct vst_state *st,
                        struct vst_fds *fds, struct vst_err *err)
{
    struct vst_reader r;
    uint32_t ver, n;
    uint64_t size;
    bool have_store = false;
    int ret;

    if (!vst_section(st, VST_SEC_DAX, &r, &ver) || !p->dax)
        return 0; /* no mapping to restore: the window starts empty */
    if (ver != 1 && ver != 2)
        return vst_fail(err, -EINVAL, "state: DAX section version %u unknown", ver);
    if (!vst_get_u64(&r, &size))
        return vst_fail(err, -EBADMSG, "state: DAX section malformed");
    if (size != vrs_window_size(p->dax))
        return vst_fail(err, -EINVAL, "state: a %llu-byte DAX window, this one has %llu",
                        (unsigned long long)size,
                        (unsigned long long)vrs_window_size(p->dax));
    if (ver == 2 && (ret = vrs_load_dax_store(p, &r, fds, &have_store, err)) < 0)
        return ret;
    if (!vst_get_u32(&r, &n) || n > r.left / (ver == 1 ? 33 : 34))
        return vst_fail(err, -EBADMSG, "state: DAX section malformed");
    for (uint32_t k = 0; k < n; k++) {
        uint64_t key, foffset, moffset, len;
        bool writable;
        uint8_t backing = DAX_BACK_FILE;
        if (!vst_get_u64(&r, &key) || !vst_get_u64(&r, &foffset) ||
            !vst_get_u64(&r, &moffset) || !vst_get_u64(&r, &len) ||
            !vst_get_bool(&r, &writable) || (ver == 2 && !vst_get_u8(&r, &backing)))
            return vst_fail(err, -EBADMSG, "state: DAX mapping %u is cut short", k);
        /* Only a regular file the guest still knows may be mapped. */
        if (pt_fs_node_type(p->fs, key) != S_IFREG)
            return vst_fail(err, -EINVAL, "state: DAX mapping %u: node %#llx is no known file",
                            k, (unsigned long long)key);
        /* A store mapping shows the old store's pages: without them, nothing. */
        if (backing == DAX_BACK_STORE && !have_store)
            return vst_fail(err, -EINVAL, "state: DAX mapping %u needs the window store", k);
        ret = dax_window_restore_mapping(p->dax, key, foffset, moffset, len, writable,
                                         (enum dax_backing)backing);
        if (ret < 0)
            return vst_fail(err, ret, "state: DAX mapping %u refused: %s", k, strerror(-ret));
        pt_fs_dax_mapped(p->fs, key);
    }
    if (!vst_reader_done(&r))
        return vst_fail(err, -EBADMSG, "state: bytes left over in the DAX section");
    return 0;
}

/* ---- Listener ----------------------------------------------------------------------- */

static void vrs_put_str(struct vst_writer *w, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    vst_put_u16(w, (uint16_t)n);
    vst_put_bytes(w, s, n);
}

static int vrs_save_listener(const struct vrs_listener *l, struct vst_writer *w,
                             struct vst_fds *fds)
{
    uint32_t fi[3];
    int ret = vst_fd_add(fds, l->fd, &fi[0]);
    if (ret == 0)
        ret = vst_fd_add(fds, l->dir_fd, &fi[1]);
    if (ret == 0)
        ret = vst_fd_add(fds, l->pid_fd, &fi[2]);
    vst_section_begin(w, VST_SEC_LISTENER, 1);
    vst_put_u8(w, l->fd < 0 ? 0 : l->dir_fd < 0 ? 1 : 2);
    for (int k = 0; k < 3; k++)
        vst_put_u32(w, fi[k]);
    vst_put_u8(w, l->bound);
    vrs_put_str(w, l->sock_name);
    vrs_put_str(w, l->pid_name);
    vst_section_end(w);
    return ret;
}

static bool vrs_get_name(struct vst_reader *r, char **out)
{
    uint16_t n;
    char buf[256];
    if (!vst_get_u16(r, &n) || n >= sizeof(buf) || !vst_get_bytes(r, buf, n) ||
        memchr(buf, '\0', n) || memchr(buf, '/', n))
        return false;
    buf[n] = '\0';
    *out = n ? g_strdup(buf) : NULL;
    return true;
}

static int vrs_load_listener(struct vrs_listener *l, const struct vst_state *st,
                             struct vst_fds *fds, struct vst_err *err)
{
    struct vst_reader r;
    uint32_t ver, fi[3];
    uint8_t kind;
    bool bound;

    if (!vst_section(st, VST_SEC_LISTENER, &r, &ver) || ver != 1)
        return vst_fail(err, -EINVAL, "state: no listening socket");
    if (!vst_get_u8(&r, &kind) || kind > 2 || !vst_get_u32(&r, &fi[0]) ||
        !vst_get_u32(&r, &fi[1]) || !vst_get_u32(&r, &fi[2]) || !vst_get_bool(&r, &bound) ||
        !vrs_get_name(&r, &l->sock_name) || !vrs_get_name(&r, &l->pid_name) ||
        !vst_reader_done(&r))
        return vst_fail(err, -EBADMSG, "state: listener section malformed");
    int fd[3] = {-1, -1, -1};
    for (int k = 0; k < 3; k++)
        if (fi[k] != VST_NO_FD && vst_fd_take(fds, fi[k], &fd[k]) < 0)
            return vst_fail(err, -EBADF, "state: listener fd %u missing", fi[k]);
    l->fd = fd[0];
    l->dir_fd = fd[1];
    l->pid_fd = fd[2];
    l->bound = bound;
    if (kind == 0 || l->fd < 0 || (kind == 2 && (l->dir_fd < 0 || l->pid_fd < 0 ||
                                                 !l->sock_name || !l->pid_name)))
        return vst_fail(err, -EINVAL, "state: listener section incomplete");
    return 0;
}

/* ---- Whole states --------------------------------------------------------------------- */

int vrs_save(const struct vrs_parts *p, unsigned parts, struct vst_fds *fds,
             struct vst_writer *w)
{
    int ret = 0;

    if ((parts & (VST_PART_VHOST | VST_PART_LISTENER)) && !fds)
        return -EINVAL;
    vst_section_begin(w, VST_SEC_ORIGIN, 1);
    vrs_put_str(w, "vufsd " VUFSD_VERSION);
    vst_section_end(w);
    if ((parts & VST_PART_FUSE) && p->dev)
        vrs_save_fuse(p->dev, w);
    if (parts & VST_PART_FS)
        ret = pt_state_save(p->fs, w, fds);
    if (ret == 0 && (parts & VST_PART_DAX) && p->dax)
        ret = vrs_save_dax(p->dax, w, fds);
    if (ret == 0 && (parts & VST_PART_VHOST) && p->dev)
        ret = vdev_state_save(p->dev, p->conn_fd, w, fds);
    if (ret == 0 && (parts & VST_PART_LISTENER) && p->listener)
        ret = vrs_save_listener(p->listener, w, fds);
    if (ret < 0)
        return ret;
    return vst_writer_finish(w, fds ? VST_F_FDS : 0, fds ? fds->n : 0);
}

int vrs_load(const struct vrs_parts *p, unsigned parts, const struct vst_state *st,
             struct vst_fds *fds, int *conn_fd, struct pt_state_report *rep,
             struct vst_err *err)
{
    struct pt_state_report unused;
    int ret = 0;

    if (conn_fd)
        *conn_fd = -1;
    if (!(st->flags & VST_F_FDS))
        fds = NULL; /* a state without fds names none */
    if (parts & VST_PART_LISTENER)
        ret = vrs_load_listener(p->listener, st, fds, err);
    if (ret == 0 && (parts & VST_PART_FS))
        ret = pt_state_load(p->fs, st, fds, rep ? rep : &unused, err);
    if (ret == 0 && (parts & VST_PART_DAX))
        ret = vrs_load_dax(p, st, fds, err);
    if (ret == 0 && (parts & VST_PART_FUSE))
        ret = vrs_load_fuse(p->dev, st, err);
    if (ret == 0 && (parts & VST_PART_VHOST)) {
        struct vst_reader r;
        if (!vst_section(st, VST_SEC_VHOST, &r, NULL))
            return 0; /* saved with no frontend connected */
        ret = vdev_state_load(p->dev, st, fds, conn_fd, err);
    }
    return ret;
}

void vrs_origin(const struct vst_state *st, char *buf, size_t size)
{
    struct vst_reader r;
    uint16_t n;
    snprintf(buf, size, "an unknown writer");
    if (!vst_section(st, VST_SEC_ORIGIN, &r, NULL) || !vst_get_u16(&r, &n) || n >= size ||
        !vst_get_bytes(&r, buf, n))
        return;
    buf[n] = '\0';
    for (size_t k = 0; k < n; k++)
        if (buf[k] < 0x20 || buf[k] > 0x7e)
            buf[k] = '?'; /* logged: printable only */
}

/* ---- Live migration: the device's state_save and state_load ---------------------- */

int vrs_migration_save(struct vufsd_dev *dev, uint8_t **buf, size_t *len)
{
    struct vrs_parts p = {.dev = dev, .conn_fd = -1, .fs = dev->c.fs};
    struct vst_writer w;

    vst_writer_init(&w);
    int ret = vrs_save(&p, VST_PART_FUSE | VST_PART_FS, NULL, &w);
    if (ret < 0) {
        vst_writer_free(&w);
        return ret;
    }
    *buf = w.buf; /* the writer's buffer is the state: handed over, not freed */
    *len = w.len;
    return 0;
}

int vrs_migration_load(struct vufsd_dev *dev, const uint8_t *buf, size_t len)
{
    struct vrs_parts p = {.dev = dev, .conn_fd = -1, .fs = dev->c.fs};
    struct vst_state st;
    struct vst_err err = {{0}};
    struct pt_state_report rep = {0};
    char origin[64];

    int ret = vst_open(buf, len, &st, &err);
    if (ret == 0) {
        vrs_origin(&st, origin, sizeof(origin));
        vlog_info("device state from %s", origin);
        ret = vrs_load(&p, VST_PART_FUSE | VST_PART_FS, &st, NULL, NULL, &rep, &err);
    }
    if (ret < 0) {
        vlog_err("device state refused: %s", err.msg[0] ? err.msg : strerror(-ret));
        return ret;
    }
    vlog_info("device state loaded: %u node ids, %u open files, %u lock owners, %u locks; "
              "lost: %u node ids, %u open files, %u locks",
              rep.inodes, rep.handles, rep.owners, rep.locks, rep.inodes_lost, rep.handles_lost,
              rep.locks_lost);
    return 0;
}

/* ---- Carriers: memfd, file ------------------------------------------------------------- */

static int vrs_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int vrs_memfd(const struct vst_writer *w)
{
    int fd = memfd_create("vufsd-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int ret = vrs_write_all(fd, w->buf, w->len);
    if (ret == 0 && fcntl(fd, F_ADD_SEALS,
                          F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        ret = -errno;
    if (ret < 0) {
        close(fd);
        return ret;
    }
    return fd;
}

int vrs_read_all(int fd, void **buf, size_t *len)
{
    struct stat st;
    *buf = NULL;
    *len = 0;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if (st.st_size < 0 || (uint64_t)st.st_size > VST_MAX_SIZE)
        return -EFBIG;
    size_t n = (size_t)st.st_size;
    char *b = malloc(n ? n : 1);
    if (!b)
        return -ENOMEM;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(b);
            return -e;
        }
        got += (size_t)r;
    }
    *buf = b;
    *len = n;
    return 0;
}

int vrs_write_file(int dir_fd, const char *name, const struct vst_writer *w)
{
    char tmp[300];
    if (snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int ret = vrs_write_all(fd, w->buf, w->len);
    if (ret == 0 && fsync(fd) < 0)
        ret = -errno;
    close(fd);
    if (ret == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
        ret = -errno;
    if (ret < 0)
        unlinkat(dir_fd, tmp, 0);
    return ret;
}

/* ---- Restart ---------------------------------------------------------------------------- */

int vrs_handover(const struct vrs_parts *p, int chan)
{
    struct vst_writer w;
    struct vst_fds fds;
    int ret = 0, memfd = -1;

    if (chan < 0)
        return -ENOTCONN;
    if (p->dev)
        ret = vdev_quiesce(p->dev);
    if (ret < 0)
        return ret;
    vst_writer_init(&w);
    vst_fds_init(&fds);
    ret = vrs_save(p, VST_PART_FUSE | VST_PART_FS | VST_PART_DAX | VST_PART_VHOST |
                          VST_PART_LISTENER,
                   &fds, &w);
    if (ret == 0) {
        memfd = vrs_memfd(&w);
        if (memfd < 0)
            ret = memfd;
    }
    if (ret == 0) {
        /* The memfd first; the state's fd index k is the handover's fd k + 1. */
        int *all = malloc((fds.n + 1) * sizeof(*all));
        if (!all) {
            ret = -ENOMEM;
        } else {
            all[0] = memfd;
            memcpy(all + 1, fds.fd, fds.n * sizeof(*all));
            vlog_info("restart: handing over a %zu-byte state and %u fds", w.len, fds.n + 1);
            ret = sb_keeper_handover(chan, all, fds.n + 1, VRS_HANDOVER_TIMEOUT_MS);
            free(all);
        }
    }
    if (memfd >= 0)
        close(memfd);
    vst_fds_free(&fds); /* borrowed: closes nothing */
    vst_writer_free(&w);
    if (ret < 0 && p->dev)
        vdev_resume(p->dev);
    return ret;
}

int vrs_take_handover(void **buf, size_t *len, struct vst_fds *fds)
{
    int *all;
    unsigned n;

    *buf = NULL;
    *len = 0;
    vst_fds_init(fds);
    int ret = sb_handover_take(VRS_HANDOVER_ENV, &all, &n);
    if (ret <= 0)
        return ret;
    ret = vrs_read_all(all[0], buf, len);
    close(all[0]);
    if (ret < 0) {
        for (unsigned k = 1; k < n; k++)
            close(all[k]);
        free(all);
        return ret;
    }
    ret = vst_fds_adopt(fds, all + 1, n - 1);
    free(all);
    if (ret < 0) {
        free(*buf);
        *buf = NULL;
        return ret;
    }
    return 1;
}
