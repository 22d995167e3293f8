/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What serves vhost-user frontends: the filesystem, the DAX backend, the device
 * of the connected frontend, and the saved-state parts made of them (see
 * connection.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "connection.h"
#include "dax_backend.h"
#include "device.h"
#include "log.h"
#include "daemon/passthrough/passthrough.h"
#include "vhost_user.h"
#include "vufs_util.h"

struct vconn {
    const struct vufsd_config *cfg;
    struct vrs_listener *listener; /* main's */
    int keeper_chan;               /* the keeper's handover channel, -1 */
    struct pt_fs *fs;
    struct vdax *dax;      /* NULL without --dax-window */
    struct vdev_config dc; /* what each device is made from */

    /* What adaptive polling looks at (daemon/qpoll.h). */
    unsigned cpus_online; /* 0: not known */
    int loadavg_fd;       /* -1: not open */

    int save_dir_fd; /* --save-state's directory, -1 */
    char *save_name;

    /* A state whose device part is still to come; NULL: nothing (more). */
    const struct vst_state *st;
    struct vst_fds *st_fds;
    bool st_handover; /* a restart: the device comes in the state */

    /* The connected frontend: its device and connection (NULL, -1: none). */
    struct vufsd_dev *dev;
    int conn_fd;
};

/* ---- The filesystem as the device sees it ------------------------------------------ */

static void vconn_fs_reset(void *fs)
{
    pt_fs_reset(fs);
}

static void vconn_fs_cancel_waits(void *fs)
{
    pt_fs_cancel_waits(fs);
}

static void vconn_fs_detach_waits(void *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx)
{
    pt_fs_detach_waits(fs, fn, ctx);
}

/* ---- Making and freeing ------------------------------------------------------------ */

/* The window, handed to the passthrough, and the stats file's directory while
 * the host's paths are visible. */
static int vconn_dax_new(struct vconn *c)
{
    const struct vufsd_config *cfg = c->cfg;
    int ret = vdax_new(cfg, c->fs, &c->dax);
    if (ret < 0) {
        vlog_err("cannot make a %llu-byte DAX window: %s", (unsigned long long)cfg->dax_window,
                 strerror(-ret));
        return ret;
    }
    /* QEMU 11.1 mmaps every BACKEND_SHMEM_MAP range PROT_READ | PROT_WRITE,
     * whatever its flags: a read-only fd fails there (EACCES) and the guest's
     * read gets EIO. The legacy protocol's frontends map with the flags given. */
    pt_fs_set_dax(c->fs, vdax_window(c->dax), cfg->dax_protocol == VUFSD_DAX_PROTO_SHMEM);
    if (cfg->stats_file && (ret = vdax_stats_prepare(c->dax, cfg->stats_file)) < 0)
        return ret;
    struct dax_window_stats st;
    dax_window_get_stats(vdax_window(c->dax), &st);
    vlog_info("DAX window: %llu MiB, policy %s, protocol %s",
              (unsigned long long)(cfg->dax_window >> 20), dax_policy_name(st.policy),
              cfg->dax_protocol == VUFSD_DAX_PROTO_LEGACY ? "legacy (SLAVE_FS_MAP/UNMAP)"
                                                          : "shmem (BACKEND_SHMEM_MAP/UNMAP)");
    return 0;
}

/* --save-state's directory, opened while the host's paths are visible. */
static int vconn_save_prepare(struct vconn *c)
{
    const char *path = c->cfg->save_state;
    if (!path)
        return 0;
    g_autofree char *dir = g_path_get_dirname(path);
    c->save_name = g_path_get_basename(path);
    c->save_dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (c->save_dir_fd < 0) {
        int ret = -errno;
        vlog_err("--save-state: cannot open %s: %s", dir, strerror(-ret));
        return ret;
    }
    return 0;
}

int vconn_new(const struct vufsd_config *cfg, const struct pt_config *ptc, struct vrs_listener *l,
              int keeper_chan, struct vconn **out)
{
    struct vconn *c = g_new0(struct vconn, 1);
    c->cfg = cfg;
    c->listener = l;
    c->keeper_chan = keeper_chan;
    c->loadavg_fd = -1;
    c->save_dir_fd = -1;
    c->conn_fd = -1;
    *out = NULL;

    int ret = pt_fs_new(ptc, &c->fs);
    if (ret < 0) {
        vlog_err("cannot serve %s: %s", cfg->shared_dir, strerror(-ret));
        vconn_free(c);
        return ret;
    }
    vlog_debug("fd budget for the guest: %ld (RLIMIT_NOFILE %llu)", pt_fs_fd_budget(c->fs),
               (unsigned long long)ptc->rlimit_nofile);
    if ((cfg->dax_window && (ret = vconn_dax_new(c)) < 0) || (ret = vconn_save_prepare(c)) < 0) {
        vconn_free(c);
        return ret;
    }
    c->dc = (struct vdev_config){
        .cfg = cfg,
        .ops = pt_fs_ops(),
        .fs = c->fs,
        .fs_reset = vconn_fs_reset,
        .fs_cancel_waits = vconn_fs_cancel_waits,
        .fs_detach_waits = vconn_fs_detach_waits,
        .dax = c->dax ? vdax_window(c->dax) : NULL,
        .queue_threads = cfg->queue_threads,
        /* Live migration; not with a DAX window: its mappings do not travel. */
        .state_save = c->dax ? NULL : vrs_migration_save,
        .state_load = c->dax ? NULL : vrs_migration_load,
    };
    *out = c;
    return 0;
}

struct pt_fs *vconn_fs(struct vconn *c)
{
    return c->fs;
}

void vconn_free(struct vconn *c)
{
    if (!c)
        return;
    pt_fs_free(c->fs);
    vdax_free(c->dax); /* after the fs, which may still drop DAX records */
    vufs_close(&c->loadavg_fd);
    vufs_close(&c->save_dir_fd);
    g_free(c->save_name);
    g_free(c);
}

int vconn_watch_load(struct vconn *c)
{
    const struct vufsd_config *cfg = c->cfg;
    if (!cfg->poll_us)
        return 0;
    const char *path = cfg->poll_loadavg ? cfg->poll_loadavg : "/proc/loadavg";
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->loadavg_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (c->loadavg_fd < 0 && cfg->poll_loadavg) {
        vlog_err("--poll-loadavg %s: %s", path, strerror(errno));
        return -1;
    }
    if (n <= 0 || c->loadavg_fd < 0) {
        vlog_warn("%s: %s; polling stops only when a poller is preempted", path,
                  c->loadavg_fd < 0 ? strerror(errno) : "no CPU count");
        return 0;
    }
    c->cpus_online = (unsigned)n;
    return 0;
}

/* ---- The saved-state parts --------------------------------------------------------- */

static struct vrs_parts vconn_parts(const struct vconn *c)
{
    return (struct vrs_parts){
        .dev = c->dev,
        .conn_fd = c->conn_fd,
        .fs = c->fs,
        .dax = c->dax ? vdax_window(c->dax) : NULL,
        .listener = c->listener,
    };
}

static void vconn_log_report(const char *what, const struct pt_state_report *rep)
{
    vlog_info("%s: %u node id(s), %u open file(s), %u lock owner(s) restored", what, rep->inodes,
              rep->handles, rep->owners);
    if (rep->inodes_lost || rep->handles_lost || rep->locks_lost)
        vlog_warn("%s: %u node id(s) not found again (ESTALE), %u open file(s) lost (EBADF), "
                  "%u lock(s) held by someone else now (EIO on those files)",
                  what, rep->inodes_lost, rep->handles_lost, rep->locks_lost);
}

int vconn_load_state(struct vconn *c, const struct vst_state *st, struct vst_fds *fds,
                     bool handover)
{
    struct vst_err err = {""};
    struct pt_state_report rep;
    struct vrs_parts p = vconn_parts(c);
    const char *what = handover ? "restart" : "--restore-state";
    int ret = vrs_load(&p, VST_PART_FS | (handover ? VST_PART_DAX : 0), st, fds, NULL, &rep, &err);
    if (ret < 0) {
        vlog_err("%s: %s", what, err.msg);
        return ret;
    }
    vconn_log_report(what, &rep);
    c->st = st;
    c->st_fds = fds;
    c->st_handover = handover;
    return 0;
}

/*
 * --save-state: the FUSE session and the filesystem, without fds, into the
 * file. With resume (SIGUSR2) the device is quiesced meanwhile (a consistent
 * picture; the guest waits a moment; a parked SETLKW is taken back and parks
 * again after) and serves on. Without (a stop) the queues stop for good
 * first, so no request is left unanswered outside the file: a parked SETLKW
 * is answered EINTR, as on any stop.
 */
static void vconn_save_file(struct vconn *c, bool resume)
{
    struct vst_writer w;
    int ret = 0;

    if (c->save_dir_fd < 0)
        return;
    if (c->dev && resume)
        ret = vdev_quiesce(c->dev);
    else if (c->dev)
        vdev_stop(c->dev);
    vst_writer_init(&w);
    struct vrs_parts p = vconn_parts(c);
    if (ret == 0)
        ret = vrs_save(&p, VST_PART_FUSE | VST_PART_FS, NULL, &w);
    if (c->dev && resume)
        vdev_resume(c->dev);
    if (ret == 0)
        ret = vrs_write_file(c->save_dir_fd, c->save_name, &w);
    if (ret < 0)
        vlog_err("cannot save the state to %s: %s", c->cfg->save_state, strerror(-ret));
    else
        vlog_info("state saved to %s (%zu bytes)", c->cfg->save_state, w.len);
    vst_writer_free(&w);
}

/* SIGHUP: hand everything to the keeper, which runs the binary at our path now. */
static void vconn_restart(struct vconn *c)
{
    struct vrs_parts p = vconn_parts(c);

    vlog_info("restart asked for: quiescing%s", c->dev ? " the device" : "");
    int ret = vrs_handover(&p, c->keeper_chan);
    if (ret == 0) {
        vlog_info("restart: the next vufsd takes over");
        _exit(0); /* nothing of what the next process now holds is touched */
    }
    vlog_err("restart did not happen (%s): serving on", strerror(-ret));
}

/* ---- A frontend's device ----------------------------------------------------------- */

/* The device for a frontend, and the DAX backend talking to it. 0 or -errno. */
static int vconn_attach(struct vconn *c, const char *what)
{
    int ret = vdev_new(&c->dc, &c->dev);
    if (ret < 0) {
        vlog_err("%scannot create the device: %s", what, strerror(-ret));
        return ret;
    }
    if (c->dax)
        vdax_attach(c->dax, c->dev);
    return 0;
}

/* The device gone (its queues stopped, in-flight requests completed, the fs
 * reset), the DAX backend detached, the connection closed. */
static void vconn_detach(struct vconn *c)
{
    vdev_free(c->dev);
    c->dev = NULL;
    if (c->dax)
        vdax_attach(c->dax, NULL);
    vufs_close(&c->conn_fd);
}

/* The device a restart handed over, serving as the old one did; none when the
 * state had none (no frontend was connected). Exits on a refused state. */
static void vconn_attach_restored(struct vconn *c)
{
    struct vst_err err = {""};
    struct vst_reader r;

    if (!vst_section(c->st, VST_SEC_VHOST, &r, NULL))
        return;
    if (vconn_attach(c, "restart: ") < 0)
        exit(1);
    struct vrs_parts p = vconn_parts(c);
    p.conn_fd = -1;
    if (vrs_load(&p, VST_PART_FUSE | VST_PART_VHOST, c->st, c->st_fds, &c->conn_fd, NULL, &err) <
        0) {
        vlog_err("restart: the handed-over device was refused: %s", err.msg);
        exit(1);
    }
    vlog_info("restart: serving the frontend on (its rings, memory and session as they were)");
}

/*
 * --restore-state: the first frontend to connect goes on with the saved FUSE
 * session. 0 or -errno (logged).
 */
static int vconn_resume_session(struct vconn *c)
{
    struct vst_err err = {""};
    struct vrs_parts p = vconn_parts(c);
    int ret = vrs_load(&p, VST_PART_FUSE, c->st, NULL, NULL, NULL, &err);
    if (ret < 0) {
        vlog_err("--restore-state: %s", err.msg);
        return ret;
    }
    vlog_info("--restore-state: the FUSE session goes on without a new INIT");
    return 0;
}

/*
 * Waits for a frontend (answering a restart or a saved-state signal meanwhile)
 * and makes its device. 1: connected; 0: a stop signal; -1: a failure (logged).
 */
static int vconn_accept(struct vconn *c, const struct vconn_signals *sig)
{
    int listen_fd = c->listener->fd;
    for (;;) {
        struct pollfd p[4] = {
            {.fd = listen_fd, .events = POLLIN},
            {.fd = sig->stop_fd, .events = POLLIN},
            {.fd = sig->restart_fd, .events = POLLIN},
            {.fd = sig->save_fd, .events = POLLIN},
        };
        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            vlog_err("poll: %s", strerror(errno));
            return -1;
        }
        if (p[1].revents & POLLIN) {
            vlog_info("signal received: stopping");
            return 0;
        }
        uint64_t v;
        if ((p[2].revents & POLLIN) && read(sig->restart_fd, &v, sizeof(v)) > 0)
            vconn_restart(c);
        if ((p[3].revents & POLLIN) && read(sig->save_fd, &v, sizeof(v)) > 0)
            vconn_save_file(c, true);
        if (!(p[0].revents & POLLIN))
            continue;
        c->conn_fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c->conn_fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            vlog_err("accept: %s", strerror(errno));
            return -1;
        }
        vlog_info("frontend connected");
        if (vconn_attach(c, "") < 0) {
            vufs_close(&c->conn_fd);
            return -1;
        }
        if (c->st) {
            /* --restore-state: the VMM that reconnects goes on with its session. */
            if (vconn_resume_session(c) < 0) {
                vconn_detach(c);
                return -1;
            }
            c->st = NULL;
        }
        return 1;
    }
}

/* Serves the connected frontend until it leaves or a signal ends it: VU_SERVE_*
 * or -errno (vu_serve). */
static int vconn_serve_one(struct vconn *c, const struct vconn_signals *sig)
{
    struct vu_wake wake = {
        .stop_fd = sig->stop_fd,
        .listen_fd = c->listener->fd,
        .restart_fd = sig->restart_fd,
        .save_fd = sig->save_fd,
    };
    for (;;) {
        int ret = vu_serve(c->dev, c->conn_fd, &wake);
        if (ret == VU_SERVE_SAVE)
            vconn_save_file(c, true);
        else if (ret == VU_SERVE_RESTART)
            vconn_restart(c);
        else
            return ret;
    }
}

static int vconn_serve_loop(struct vconn *c, const struct vconn_signals *sig)
{
    for (;;) {
        if (c->st && c->st_handover) {
            vconn_attach_restored(c);
            c->st = NULL;
        }
        if (!c->dev) {
            int got = vconn_accept(c, sig);
            if (got <= 0)
                return got < 0 ? 1 : 0;
        }
        int ret = vconn_serve_one(c, sig);
        if (ret == VU_SERVE_STOP)
            vconn_save_file(c, false);
        vconn_detach(c);
        if (ret == VU_SERVE_STOP) {
            vlog_info("signal received: stopped serving the frontend");
            return 0;
        }
        if (ret < 0)
            vlog_warn("frontend connection dropped: %s", strerror(-ret));
        else
            vlog_info("frontend disconnected");
        if (!c->cfg->reconnect)
            return 0;
        vlog_info("waiting for a new frontend (--reconnect)");
    }
}

int vconn_serve(struct vconn *c, const struct vconn_signals *sig)
{
    c->dc.cpus_online = c->cpus_online;
    c->dc.loadavg_fd = c->loadavg_fd;
    int ret;
    if (c->dax && (ret = vdax_stats_start(c->dax, sig->stats_fd)) < 0) {
        vlog_err("cannot start the statistics thread: %s", strerror(-ret));
        return 1;
    }
    int status = vconn_serve_loop(c, sig);
    vlog_info("exiting");
    /* The window thread writes the guest's last stores back while the fs is there. */
    if (c->dax)
        vdax_stats_stop(c->dax);
    return status;
}
