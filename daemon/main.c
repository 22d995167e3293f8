/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufsd: parse the command line, open the shared directory, enter the sandbox,
 * then serve one vhost-user frontend at a time (or a local /dev/fuse mount).
 *
 * Start-up order (single threaded until the first frontend connects, because the
 * sandbox's unshare, capability and setgroups steps are per thread):
 *   options -> pid namespace (sandbox=namespace) -> signal handlers -> pid file
 *   and listening socket -> rlimit -> filesystem (its fd budget follows the
 *   rlimit) -> namespaces/chroot -> (--mount: mount) -> capabilities -> seccomp
 *   -> serve.
 *
 * Exit status: 0 after SIGTERM/SIGINT or a frontend disconnect (without
 * --reconnect); 1 for bad options or a start-up failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dax_backend.h"
#include "device.h"
#include "log.h"
#include "options.h"
#include "daemon/passthrough/passthrough.h"
#include "restart.h"
#include "sandbox/sandbox.h"
#include "vhost_user.h"
#include "vufs_util.h"
#include "vufsd-config.h"


/* Locks PATH.pid; refuses when another live daemon holds it. 0 or -errno. */
static int vmain_lock_pidfile(struct vrs_listener *l)
{
    int fd = openat(l->dir_fd, l->pid_name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        int e = errno;
        vlog_err("cannot open the pid file %s: %s", l->pid_name, strerror(e));
        return -e;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n > 0)
            buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            vlog_err("another vufsd (pid %s) already serves this socket", *buf ? buf : "?");
        else
            vlog_err("cannot lock the pid file: %s", strerror(e));
        close(fd);
        return e == EWOULDBLOCK ? -EADDRINUSE : -e;
    }
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%d\n", (int)l->pid);
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
        int e = errno;
        vlog_err("cannot write the pid file: %s", strerror(e));
        close(fd);
        return -e;
    }
    l->pid_fd = fd;
    return 0;
}

static int vmain_listen_path(struct vrs_listener *l, const struct vufsd_config *cfg)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    g_autofree char *path = g_strdup(cfg->socket_path);
    g_autofree char *dir = g_path_get_dirname(path);
    int ret;

    l->sock_name = g_path_get_basename(path);
    l->pid_name = g_strdup_printf("%s.pid", l->sock_name);
    if (strlen(cfg->socket_path) >= sizeof(sa.sun_path)) {
        vlog_err("--socket-path is longer than %zu bytes", sizeof(sa.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    l->dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (l->dir_fd < 0) {
        ret = -errno;
        vlog_err("cannot open the socket's directory %s: %s", dir, strerror(-ret));
        return ret;
    }
    ret = vmain_lock_pidfile(l);
    if (ret < 0)
        return ret;
    /* We hold the lock: any socket left at the path is stale. */
    if (unlinkat(l->dir_fd, l->sock_name, 0) == 0)
        vlog_info("removed a stale socket at %s", cfg->socket_path);

    l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0)
        return -errno;
    memcpy(sa.sun_path, cfg->socket_path, strlen(cfg->socket_path) + 1);
    mode_t old = umask(0077);
    ret = bind(l->fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    l->bound = ret == 0;
    if (ret < 0 || listen(l->fd, 1) < 0) {
        ret = -errno;
        vlog_err("cannot listen on %s: %s", cfg->socket_path, strerror(-ret));
        return ret;
    }
    if (cfg->socket_group) {
        struct group *g = getgrnam(cfg->socket_group);
        if (!g) {
            vlog_err("--socket-group: no group named %s", cfg->socket_group);
            return -ENOENT;
        }
        if (fchownat(l->dir_fd, l->sock_name, (uid_t)-1, g->gr_gid, 0) < 0 ||
            fchmodat(l->dir_fd, l->sock_name, 0660, 0) < 0) {
            ret = -errno;
            vlog_err("cannot give the socket to group %s: %s", cfg->socket_group, strerror(-ret));
            return ret;
        }
    }
    vlog_info("listening on %s", cfg->socket_path);
    return 0;
}

static int vmain_listen_fd(struct vrs_listener *l, int fd)
{
    int accepting = 0;
    socklen_t len = sizeof(accepting);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) < 0 || !accepting) {
        vlog_err("--fd %d is not a listening socket", fd);
        return -ENOTSOCK;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    l->fd = fd;
    vlog_info("listening on fd %d", fd);
    return 0;
}

static void vmain_listener_close(struct vrs_listener *l)
{
    vufs_close(&l->fd);
    /* Only what is ours: a daemon refused by the pid file lock removes nothing. */
    if (l->dir_fd >= 0 && l->pid_fd >= 0) {
        if (l->bound)
            unlinkat(l->dir_fd, l->sock_name, 0);
        unlinkat(l->dir_fd, l->pid_name, 0); /* still ours: we hold the lock */
    }
    vufs_close(&l->pid_fd);
    vufs_close(&l->dir_fd);
    g_free(l->sock_name);
    g_free(l->pid_name);
}

/* ---- Signals ----------------------------------------------------------------------- */

/*
 * SIGTERM/SIGINT write to an eventfd the serving loops poll, SIGHUP (a
 * restart) and SIGUSR2 (a saved state, with --save-state) to theirs; SIGUSR1
 * (the DAX statistics) to one the statistics thread polls. A handler rather
 * than a sigwait thread: write(2) is in every seccomp allowlist, and any
 * thread may take the signal (the loops retry on EINTR).
 */
static int vmain_stop_fd = -1;
static int vmain_stats_fd = -1;
static int vmain_restart_fd = -1;
static int vmain_save_fd = -1;

static void vmain_on_signal(int sig)
{
    int saved = errno;
    uint64_t one = 1;
    int fd = sig == SIGUSR1   ? vmain_stats_fd
             : sig == SIGHUP  ? vmain_restart_fd
             : sig == SIGUSR2 ? vmain_save_fd
                              : vmain_stop_fd;
    ssize_t w = write(fd, &one, sizeof(one));
    (void)w;
    errno = saved;
}

/*
 * A signal the daemon acts on only when on, through the eventfd *fd; otherwise
 * ignored, as its default action would end the daemon.
 */
static int vmain_optional_signal(int sig, bool on, int *fd)
{
    struct sigaction sa = {.sa_handler = vmain_on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (!on) {
        signal(sig, SIG_IGN);
        return 0;
    }
    *fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (*fd < 0 || sigaction(sig, &sa, NULL) < 0)
        return -errno;
    return 0;
}

static int vmain_install_signals(bool save_state)
{
    struct sigaction sa = {.sa_handler = vmain_on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    vmain_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    vmain_restart_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (vmain_stop_fd < 0 || vmain_restart_fd < 0)
        return -errno;
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0 ||
        sigaction(SIGHUP, &sa, NULL) < 0)
        return -errno;
    /* SIGUSR2 saves the state, with --save-state only. */
    return vmain_optional_signal(SIGUSR2, save_state, &vmain_save_fd);
}

/* SIGUSR1 writes the DAX statistics, with a window only. */
static int vmain_install_stats_signal(bool dax)
{
    return vmain_optional_signal(SIGUSR1, dax, &vmain_stats_fd);
}

/* ---- Serving ----------------------------------------------------------------------- */

static void vmain_fs_reset(void *fs)
{
    pt_fs_reset(fs);
}

static void vmain_fs_cancel_waits(void *fs)
{
    pt_fs_cancel_waits(fs);
}

/*
 * What adaptive polling looks at to tell whether a CPU is free (daemon/qpoll.h):
 * the CPUs online and /proc/loadavg, both out of reach once the sandbox has
 * pivoted or chrooted into the shared directory, so taken before.
 */
struct vmain_load {
    unsigned cpus_online; /* 0: not known */
    int loadavg_fd;       /* -1: not open */
};

/* 0, or -1 when --poll-loadavg names a file that does not open. */
static int vmain_load_open(struct vmain_load *ld, const struct vufsd_config *cfg)
{
    ld->cpus_online = 0;
    ld->loadavg_fd = -1;
    if (!cfg->poll_us)
        return 0;
    const char *path = cfg->poll_loadavg ? cfg->poll_loadavg : "/proc/loadavg";
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ld->loadavg_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (ld->loadavg_fd < 0 && cfg->poll_loadavg) {
        vlog_err("--poll-loadavg %s: %s", path, strerror(errno));
        return -1;
    }
    if (n <= 0 || ld->loadavg_fd < 0) {
        vlog_warn("%s: %s; polling stops only when a poller is preempted", path,
                  ld->loadavg_fd < 0 ? strerror(errno) : "no CPU count");
        return 0;
    }
    ld->cpus_online = (unsigned)n;
    return 0;
}

static void vmain_fs_detach_waits(void *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx)
{
    pt_fs_detach_waits(fs, fn, ctx);
}

/* What serving needs besides the config: the fs, the window, the listener, and a
 * state loaded before the sandbox whose device part is still to come. */
struct vmain_ctx {
    const struct vufsd_config *cfg;
    struct vrs_listener *l;
    struct pt_fs *fs;
    struct vdax *dax;
    int keeper_chan;              /* the keeper's handover channel, -1 */
    const struct vmain_load *load; /* what adaptive polling looks at */
    const struct vst_state *st;   /* NULL: nothing (more) to restore */
    struct vst_fds *st_fds;
    bool st_handover;             /* a restart: the device comes in the state */
    int save_dir_fd;              /* --save-state's directory, -1 */
    char *save_name;
};

static struct vrs_parts vmain_parts(const struct vmain_ctx *ctx, struct vufsd_dev *dev, int conn)
{
    return (struct vrs_parts){
        .dev = dev,
        .conn_fd = conn,
        .fs = ctx->fs,
        .dax = ctx->dax ? vdax_window(ctx->dax) : NULL,
        .listener = ctx->l,
    };
}

/*
 * --save-state: the FUSE session and the filesystem, without fds, into the
 * file. With resume (SIGUSR2) the device is quiesced meanwhile (a consistent
 * picture; the guest waits a moment; a parked SETLKW is taken back and parks
 * again after) and serves on. Without (a stop) the queues stop for good
 * first, so no request is left unanswered outside the file: a parked SETLKW
 * is answered EINTR, as on any stop.
 */
static void vmain_save_file(struct vmain_ctx *ctx, struct vufsd_dev *dev, int conn, bool resume)
{
    struct vst_writer w;
    int ret = 0;

    if (ctx->save_dir_fd < 0)
        return;
    if (dev && resume)
        ret = vdev_quiesce(dev);
    else if (dev)
        vdev_stop(dev);
    vst_writer_init(&w);
    struct vrs_parts p = vmain_parts(ctx, dev, conn);
    if (ret == 0)
        ret = vrs_save(&p, VST_PART_FUSE | VST_PART_FS, NULL, &w);
    if (dev && resume)
        vdev_resume(dev);
    if (ret == 0)
        ret = vrs_write_file(ctx->save_dir_fd, ctx->save_name, &w);
    if (ret < 0)
        vlog_err("cannot save the state to %s: %s", ctx->cfg->save_state, strerror(-ret));
    else
        vlog_info("state saved to %s (%zu bytes)", ctx->cfg->save_state, w.len);
    vst_writer_free(&w);
}

/* SIGHUP: hand everything to the keeper, which runs the binary at our path now. */
static void vmain_restart(struct vmain_ctx *ctx, struct vufsd_dev *dev, int conn)
{
    struct vrs_parts p = vmain_parts(ctx, dev, conn);

    vlog_info("restart asked for: quiescing%s", dev ? " the device" : "");
    int ret = vrs_handover(&p, ctx->keeper_chan);
    if (ret == 0) {
        vlog_info("restart: the next vufsd takes over");
        _exit(0); /* nothing of what the next process now holds is touched */
    }
    vlog_err("restart did not happen (%s): serving on", strerror(-ret));
}

/* The device a restart handed over, serving as the old one did; NULL when the
 * state had none (no frontend was connected). Exits on a refused state. */
static struct vufsd_dev *vmain_restored_dev(struct vmain_ctx *ctx, const struct vdev_config *dc,
                                            int *conn)
{
    struct vst_err err = {""};
    struct vst_reader r;
    struct vufsd_dev *dev = NULL;

    *conn = -1;
    if (!vst_section(ctx->st, VST_SEC_VHOST, &r, NULL))
        return NULL;
    int e = vdev_new(dc, &dev);
    if (e < 0) {
        vlog_err("restart: cannot create the device: %s", strerror(-e));
        exit(1);
    }
    if (ctx->dax)
        vdax_attach(ctx->dax, dev);
    struct vrs_parts p = vmain_parts(ctx, dev, -1);
    int ret = vrs_load(&p, VST_PART_FUSE | VST_PART_VHOST, ctx->st, ctx->st_fds, conn, NULL,
                       &err);
    if (ret < 0) {
        vlog_err("restart: the handed-over device was refused: %s", err.msg);
        exit(1);
    }
    vlog_info("restart: serving the frontend on (its rings, memory and session as they were)");
    return dev;
}

static int vmain_serve(struct vmain_ctx *ctx)
{
    const struct vufsd_config *cfg = ctx->cfg;
    int listen_fd = ctx->l->fd;
    struct vdev_config dc = {
        .cfg = cfg,
        .ops = pt_fs_ops(),
        .fs = ctx->fs,
        .fs_reset = vmain_fs_reset,
        .fs_cancel_waits = vmain_fs_cancel_waits,
        .fs_detach_waits = vmain_fs_detach_waits,
        .dax = ctx->dax ? vdax_window(ctx->dax) : NULL,
        .queue_threads = cfg->queue_threads,
        .cpus_online = ctx->load->cpus_online,
        .loadavg_fd = ctx->load->loadavg_fd,
        /* Live migration; not with a DAX window: its mappings do not travel. */
        .state_save = ctx->dax ? NULL : vrs_migration_save,
        .state_load = ctx->dax ? NULL : vrs_migration_load,
    };
    struct vu_wake wake = {
        .stop_fd = vmain_stop_fd,
        .listen_fd = listen_fd,
        .restart_fd = vmain_restart_fd,
        .save_fd = vmain_save_fd,
    };

    for (;;) {
        int conn = -1;
        struct vufsd_dev *dev = NULL;
        if (ctx->st && ctx->st_handover) {
            dev = vmain_restored_dev(ctx, &dc, &conn);
            ctx->st = NULL;
        }
        while (!dev) {
            struct pollfd p[4] = {
                {.fd = listen_fd, .events = POLLIN},
                {.fd = vmain_stop_fd, .events = POLLIN},
                {.fd = vmain_restart_fd, .events = POLLIN},
                {.fd = vmain_save_fd, .events = POLLIN},
            };
            if (poll(p, 4, -1) < 0) {
                if (errno == EINTR)
                    continue;
                vlog_err("poll: %s", strerror(errno));
                return 1;
            }
            if (p[1].revents & POLLIN) {
                vlog_info("signal received: stopping");
                return 0;
            }
            uint64_t v;
            if ((p[2].revents & POLLIN) && read(vmain_restart_fd, &v, sizeof(v)) > 0)
                vmain_restart(ctx, NULL, -1);
            if ((p[3].revents & POLLIN) && read(vmain_save_fd, &v, sizeof(v)) > 0)
                vmain_save_file(ctx, NULL, -1, true);
            if (!(p[0].revents & POLLIN))
                continue;
            conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (conn < 0) {
                if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                    continue;
                vlog_err("accept: %s", strerror(errno));
                return 1;
            }
            vlog_info("frontend connected");
            int err = vdev_new(&dc, &dev);
            if (err < 0) {
                vlog_err("cannot create the device: %s", strerror(-err));
                close(conn);
                return 1;
            }
            if (ctx->dax)
                vdax_attach(ctx->dax, dev);
            if (ctx->st) {
                /* --restore-state: the VMM that reconnects goes on with its session. */
                struct vst_err serr = {""};
                struct vrs_parts parts = vmain_parts(ctx, dev, conn);
                if (vrs_load(&parts, VST_PART_FUSE, ctx->st, NULL, NULL, NULL, &serr) < 0) {
                    vlog_err("--restore-state: %s", serr.msg);
                    vdev_free(dev);
                    close(conn);
                    return 1;
                }
                vlog_info("--restore-state: the FUSE session goes on without a new INIT");
                ctx->st = NULL;
            }
        }
        int ret;
        for (;;) {
            ret = vu_serve(dev, conn, &wake);
            if (ret == VU_SERVE_SAVE) {
                vmain_save_file(ctx, dev, conn, true);
                continue;
            }
            if (ret == VU_SERVE_RESTART) {
                vmain_restart(ctx, dev, conn);
                continue;
            }
            break;
        }
        if (ret == VU_SERVE_STOP)
            vmain_save_file(ctx, dev, conn, false);
        vdev_free(dev); /* stops the queues, completes in-flight requests, resets the fs */
        if (ctx->dax)
            vdax_attach(ctx->dax, NULL);
        close(conn);
        if (ret == VU_SERVE_STOP) {
            vlog_info("signal received: stopped serving the frontend");
            return 0;
        }
        if (ret < 0)
            vlog_warn("frontend connection dropped: %s", strerror(-ret));
        else
            vlog_info("frontend disconnected");
        if (!cfg->reconnect)
            return 0;
        vlog_info("waiting for a new frontend (--reconnect)");
    }
}

static struct sb_config vmain_sb_config(const struct vufsd_config *cfg)
{
    unsigned features = SB_FEAT_LOCKS;
    if (cfg->xattr || cfg->posix_acl || cfg->security_label)
        features |= SB_FEAT_XATTR;
    if (cfg->syslog)
        features |= SB_FEAT_SYSLOG;
    if (cfg->mountpoint)
        features |= SB_FEAT_DEVFUSE;
    if (cfg->inode_file_handles != PT_HANDLES_NEVER)
        features |= SB_FEAT_FILE_HANDLES;
    if (cfg->dax_window)
        features |= SB_FEAT_DAX;
    if (!cfg->mountpoint)
        features |= SB_FEAT_STATE; /* SIGHUP restarts, --save-state saves */
    return (struct sb_config){
        .mode = cfg->sandbox,
        .shared_dir = cfg->shared_dir,
        .seccomp = cfg->seccomp,
        .features = features,
        .modcaps = cfg->modcaps,
        .rlimit_nofile = cfg->rlimit_nofile,
        .unsafe_no_isolation = cfg->unsafe_no_isolation,
    };
}

/* The passthrough's settings; its fd budget is cut from the limit in force. */
static struct pt_config vmain_pt_config(const struct vufsd_config *cfg, uint64_t nofile)
{
    return (struct pt_config){
        .shared_dir = cfg->shared_dir,
        .cache = cfg->cache,
        .writeback = cfg->writeback,
        .readdirplus = cfg->readdirplus,
        .allow_direct_io = cfg->allow_direct_io,
        .allow_mmap = cfg->allow_mmap,
        .xattr = cfg->xattr,
        .xattrmap = cfg->xattrmap,
        .posix_acl = cfg->posix_acl,
        .security_label = cfg->security_label,
        .killpriv_v2 = cfg->killpriv_v2,
        .announce_submounts = cfg->announce_submounts,
        .no_posix_lock = cfg->no_posix_lock,
        .no_flock = cfg->no_flock,
        .readonly = cfg->readonly,
        .writers = cfg->share_writers,
        .inode_file_handles = cfg->inode_file_handles,
        .translate_uid = cfg->translate_uid,
        .translate_gid = cfg->translate_gid,
        .rlimit_nofile = nofile,
    };
}

/* ---- --mount ----------------------------------------------------------------------- */

/*
 * The mount is made after the filesystem is open and before capabilities are
 * dropped (mount(2) needs CAP_SYS_ADMIN); vmain_sb_config keeps CAP_SYS_ADMIN and
 * the seccomp /dev/fuse feature allows umount2, so the mount is removed at the
 * end. SIGTERM/SIGINT/SIGHUP stop the loop; one arriving before the mount
 * exists is remembered and stops it as soon as it does.
 */
static struct fll_devfuse *vmain_devfuse; /* atomic */
static int vmain_devfuse_stopping;        /* atomic */

static void vmain_on_devfuse_signal(int sig)
{
    int saved = errno;
    (void)sig;
    __atomic_store_n(&vmain_devfuse_stopping, 1, __ATOMIC_SEQ_CST);
    fll_devfuse_stop(__atomic_load_n(&vmain_devfuse, __ATOMIC_SEQ_CST));
    errno = saved;
}

static int vmain_install_devfuse_signals(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa = {.sa_handler = vmain_on_devfuse_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return -errno;
    return 0;
}

static int vmain_mount(const struct vufsd_config *cfg, struct pt_fs *fs)
{
    struct fll_devfuse_config dc = {
        .ops = pt_fs_ops(),
        .fs = fs,
        .mountpoint = cfg->mountpoint,
        .fsname = "vufsd",
        /* Root serves every host user, each checked as its caller (like a guest's). */
        .mount_opts = geteuid() == 0 ? "allow_other" : NULL,
        .nthreads = cfg->thread_pool_size ? cfg->thread_pool_size : 1,
    };
    struct fll_devfuse *h = NULL;
    int ret = fll_devfuse_new(&dc, &h);
    if (ret < 0) {
        vlog_err("cannot mount %s: %s", cfg->mountpoint, strerror(-ret));
        return ret;
    }
    __atomic_store_n(&vmain_devfuse, h, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&vmain_devfuse_stopping, __ATOMIC_SEQ_CST))
        fll_devfuse_stop(h);
    vlog_info("mounted %s", cfg->mountpoint);
    return 0;
}

/* Serves the mount made by vmain_mount until a signal or an unmount, then unmounts. */
static int vmain_run_devfuse(const struct vufsd_config *cfg)
{
    struct fll_devfuse *h = __atomic_load_n(&vmain_devfuse, __ATOMIC_SEQ_CST);
    int ret = fll_devfuse_loop(h);
    __atomic_store_n(&vmain_devfuse, NULL, __ATOMIC_SEQ_CST);
    fll_devfuse_free(h); /* answers what the fs kept, unmounts */
    if (ret < 0) {
        vlog_err("cannot serve %s: %s", cfg->mountpoint, strerror(-ret));
        return 1;
    }
    vlog_info("unmounted %s", cfg->mountpoint);
    return 0;
}

/* Unmounts after a start-up failure between vmain_mount and serving. */
static void vmain_unmount(void)
{
    struct fll_devfuse *h = __atomic_exchange_n(&vmain_devfuse, NULL, __ATOMIC_SEQ_CST);
    fll_devfuse_free(h);
}

/* ---- DAX ----------------------------------------------------------------------------- */

/* The window, and the stats file's directory while the host's paths are visible. */
static int vmain_dax_new(const struct vufsd_config *cfg, struct pt_fs *fs, struct vdax **out)
{
    int ret = vdax_new(cfg, fs, out);
    if (ret < 0) {
        vlog_err("cannot make a %llu-byte DAX window: %s", (unsigned long long)cfg->dax_window,
                 strerror(-ret));
        return ret;
    }
    /* QEMU 11.1 mmaps every BACKEND_SHMEM_MAP range PROT_READ | PROT_WRITE,
     * whatever its flags: a read-only fd fails there (EACCES) and the guest's
     * read gets EIO. The legacy protocol's frontends map with the flags given. */
    pt_fs_set_dax(fs, vdax_window(*out), cfg->dax_protocol == VUFSD_DAX_PROTO_SHMEM);
    if (cfg->stats_file && (ret = vdax_stats_prepare(*out, cfg->stats_file)) < 0)
        return ret;
    struct dax_window_stats st;
    dax_window_get_stats(vdax_window(*out), &st);
    vlog_info("DAX window: %llu MiB, policy %s, protocol %s",
              (unsigned long long)(cfg->dax_window >> 20), dax_policy_name(st.policy),
              cfg->dax_protocol == VUFSD_DAX_PROTO_LEGACY ? "legacy (SLAVE_FS_MAP/UNMAP)"
                                                         : "shmem (BACKEND_SHMEM_MAP/UNMAP)");
    return 0;
}

/* ---- Sandbox ----------------------------------------------------------------------- */

/*
 * The sandbox, applied after the fs and the socket are open and before any
 * request; --mount mounts between the namespaces and the capability drop.
 */
static int vmain_enter_sandbox(const struct sb_config *sbc, const struct vufsd_config *cfg,
                               struct pt_fs *fs)
{
    char line[512];
    int ret;

    if ((ret = sb_enter(sbc, NULL)) < 0) {
        vlog_err("cannot enter the sandbox (%s): %s", sb_mode_name(sbc->mode), strerror(-ret));
        return ret;
    }
    if (cfg->mountpoint && (ret = vmain_mount(cfg, fs)) < 0)
        return ret;
    if ((ret = sb_drop_caps(sbc)) < 0) {
        vlog_err("cannot drop capabilities: %s", strerror(-ret));
        return ret;
    }
    if ((ret = sb_seccomp_load(sbc)) < 0) {
        vlog_err("cannot load the seccomp filter: %s", strerror(-ret));
        return ret;
    }
    sb_describe(sbc, line, sizeof(line));
    vlog_info("security: %s", line);
    if (sbc->mode == SB_MODE_NONE)
        vlog_warn("no filesystem sandbox: the guest is confined by path checks only");
    return 0;
}

/* The path of the running binary: what a restart runs (the file there now). */
static char *vmain_exe_path(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0 || (size_t)n >= sizeof(buf) - 1)
        return NULL;
    buf[n] = '\0';
    static const char deleted[] = " (deleted)";
    size_t dl = sizeof(deleted) - 1;
    if ((size_t)n > dl && strcmp(buf + n - dl, deleted) == 0)
        buf[n - dl] = '\0'; /* replaced under us: the path still names the new one */
    return g_strdup(buf);
}

/* A state to start from: the one a restart handed over, or --restore-state's file.
 * 1 with *buf and *len, 0 when there is none, -errno (logged). */
static int vmain_take_state(const struct vufsd_config *cfg, void **buf, size_t *len,
                            struct vst_fds *fds, bool *handover)
{
    int ret = vrs_take_handover(buf, len, fds);
    *handover = ret == 1;
    if (ret < 0) {
        vlog_err("restart: cannot take the handed-over state: %s", strerror(-ret));
        return ret;
    }
    if (ret == 1 || !cfg->restore_state)
        return ret;
    int fd = open(cfg->restore_state, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        ret = -errno;
        vlog_err("--restore-state %s: %s", cfg->restore_state, strerror(-ret));
        return ret;
    }
    ret = vrs_read_all(fd, buf, len);
    close(fd);
    if (ret < 0) {
        vlog_err("--restore-state %s: %s", cfg->restore_state, strerror(-ret));
        return ret;
    }
    return 1;
}

/* --save-state's directory, opened while the host's paths are visible. */
static int vmain_save_prepare(const struct vufsd_config *cfg, struct vmain_ctx *ctx)
{
    if (!cfg->save_state)
        return 0;
    g_autofree char *dir = g_path_get_dirname(cfg->save_state);
    ctx->save_name = g_path_get_basename(cfg->save_state);
    ctx->save_dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ctx->save_dir_fd < 0) {
        int ret = -errno;
        vlog_err("--save-state: cannot open %s: %s", dir, strerror(-ret));
        return ret;
    }
    return 0;
}

static void vmain_log_report(const char *what, const struct pt_state_report *rep)
{
    vlog_info("%s: %u node id(s), %u open file(s), %u lock owner(s) restored", what, rep->inodes,
              rep->handles, rep->owners);
    if (rep->inodes_lost || rep->handles_lost || rep->locks_lost)
        vlog_warn("%s: %u node id(s) not found again (ESTALE), %u open file(s) lost (EBADF), "
                  "%u lock(s) held by someone else now (EIO on those files)",
                  what, rep->inodes_lost, rep->handles_lost, rep->locks_lost);
}

int main(int argc, char **argv)
{
    struct vufsd_config cfg;
    enum vopt_action action;
    g_autofree char *errmsg = NULL;
    g_autofree char *mount_caps = NULL; /* --mount: the modcaps handed to the sandbox */
    g_autofree char *exe = NULL;
    struct vrs_listener l = {.fd = -1, .dir_fd = -1, .pid_fd = -1};
    struct vmain_load load = {.loadavg_fd = -1};
    struct vmain_ctx ctx = {.l = &l, .load = &load, .keeper_chan = -1, .save_dir_fd = -1};
    struct vst_fds st_fds;
    struct vst_state st;
    void *st_buf = NULL;
    size_t st_len = 0;
    bool handover = false;
    struct vdax *dax = NULL;
    int status = 1;

    vst_fds_init(&st_fds);
    vopt_config_init(&cfg);
    ctx.cfg = &cfg;
    if (vopt_parse(argc, argv, &cfg, &action, &errmsg) < 0) {
        fprintf(stderr, "vufsd: %s (see --help)\n", errmsg);
        vopt_config_clear(&cfg);
        return 1;
    }
    if (action == VOPT_VERSION) {
        printf("vufsd %s\n", VUFSD_VERSION);
        vopt_config_clear(&cfg);
        return 0;
    }
    if (action == VOPT_PRINT_CAPABILITIES) {
        g_autofree char *json = vopt_capabilities_json();
        printf("%s\n", json);
        vopt_config_clear(&cfg);
        return 0;
    }
    vlog_init(cfg.log_level, cfg.syslog);
    const char *unsupported = vopt_unsupported(&cfg);
    if (unsupported) {
        vlog_err("cannot honour %s", unsupported);
        goto out;
    }
    char ids_err[256] = "";
    struct pt_config ptc = vmain_pt_config(&cfg, 0);
    if (pt_fs_check_ids(&ptc, ids_err, sizeof(ids_err)) < 0) {
        vlog_err("--translate-uid/--translate-gid: %s", ids_err);
        goto out;
    }
    /* A restart: the keeper ran this binary; the user namespace is ours already. */
    bool restarted = getenv(VRS_HANDOVER_ENV) != NULL;
    /* --uid-map/--gid-map: a user namespace, and the namespace sandbox inside it. */
    if (cfg.uid_map || cfg.gid_map) {
        if (cfg.sandbox_explicit && cfg.sandbox != SB_MODE_NAMESPACE) {
            vlog_err("--uid-map/--gid-map need --sandbox namespace");
            goto out;
        }
        cfg.sandbox = SB_MODE_NAMESPACE;
        const char *why_ns = NULL;
        int ret = restarted ? 0 : sb_enter_user_ns(cfg.uid_map, cfg.gid_map, &why_ns);
        if (ret < 0) {
            vlog_err("cannot enter a user namespace: %s: %s", why_ns ? why_ns : "failed",
                     strerror(-ret));
            goto out;
        }
        if (why_ns)
            vlog_warn("user namespace: %s", why_ns);
        if (!restarted)
            vlog_info("user namespace entered (uid map %s, gid map %s)",
                      cfg.uid_map ? cfg.uid_map : "own uid", cfg.gid_map ? cfg.gid_map : "own gid");
    }
    struct sb_config sbc = vmain_sb_config(&cfg);
    /* --mount: unmounting at the end needs CAP_SYS_ADMIN (a user's -sys_admin still wins). */
    if (cfg.mountpoint) {
        mount_caps = g_strdup_printf("+sys_admin%s%s", cfg.modcaps && *cfg.modcaps ? ":" : "",
                                     cfg.modcaps ? cfg.modcaps : "");
        sbc.modcaps = mount_caps;
    }
    const char *why = NULL;
    if (sb_config_check(&sbc, &why) < 0) {
        vlog_err("sandbox settings refused: %s", why ? why : "invalid");
        goto out;
    }
    /*
     * The pid file names the process an operator signals: the keeper, which
     * stays outside every sandbox, forwards signals and runs the next binary
     * on a restart (in namespace mode the daemon is pid 1 inside, a number
     * meaningless on the host). --mount keeps no keeper: it cannot restart.
     */
    l.pid = getpid();
    if (!cfg.mountpoint) {
        exe = vmain_exe_path();
        struct sb_keeper k = {
            .new_pid_ns = sbc.mode == SB_MODE_NAMESPACE,
            .exe = exe,
            .argv = argv,
            .env_name = VRS_HANDOVER_ENV,
        };
        int ret = sb_enter_keeper(&k, &ctx.keeper_chan); /* only the child returns */
        if (ret < 0) {
            vlog_err("cannot start the keeper%s: %s", k.new_pid_ns ? " in a pid namespace" : "",
                     strerror(-ret));
            if (k.new_pid_ns)
                vlog_err("(try --sandbox chroot or none)");
            goto out;
        }
    }

    if (cfg.mountpoint && !cfg.sandbox_explicit)
        vlog_warn("--mount: no sandbox (--sandbox none), the mount is made in the host's "
                  "mount namespace; seccomp still applies");
    /* --mount: the handlers stop the /dev/fuse loop, which then unmounts. */
    if ((cfg.mountpoint ? vmain_install_devfuse_signals()
                        : vmain_install_signals(cfg.save_state != NULL)) < 0 ||
        vmain_install_stats_signal(cfg.dax_window != 0) < 0) {
        vlog_err("cannot install signal handlers: %s", strerror(errno));
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);

    vlog_info("vufsd %s starting: shared directory %s", VUFSD_VERSION, cfg.shared_dir);
    int sret = vmain_take_state(&cfg, &st_buf, &st_len, &st_fds, &handover);
    if (sret < 0)
        goto out;
    if (sret == 1) {
        struct vst_err serr = {""};
        char origin[64];
        if (vst_open(st_buf, st_len, &st, &serr) < 0 ||
            (handover && st.nfds != st_fds.n &&
             vst_fail(&serr, -EINVAL, "state: %u fds named, %u came", st.nfds, st_fds.n))) {
            vlog_err("%s: %s", handover ? "restart" : "--restore-state", serr.msg);
            goto out;
        }
        vrs_origin(&st, origin, sizeof(origin));
        vlog_info("%s: a %zu-byte state written by %s", handover ? "restart" : "--restore-state",
                  st_len, origin);
        ctx.st = &st;
        ctx.st_fds = &st_fds;
        ctx.st_handover = handover;
    }
    if (handover) {
        struct vst_err serr = {""};
        struct vrs_parts p = {.listener = &l, .conn_fd = -1};
        if (vrs_load(&p, VST_PART_LISTENER, &st, &st_fds, NULL, NULL, &serr) < 0) {
            vlog_err("restart: %s", serr.msg);
            goto out;
        }
        /* The --fd the keeper has kept since the first start: ours is in the state. */
        if (cfg.listen_fd >= 0 && cfg.listen_fd != l.fd)
            close(cfg.listen_fd);
        vlog_info("restart: listening on the socket the previous vufsd had");
    } else if (!cfg.mountpoint) {
        int ret =
            cfg.socket_path ? vmain_listen_path(&l, &cfg) : vmain_listen_fd(&l, cfg.listen_fd);
        if (ret < 0)
            goto out;
    }

    /* Before the fs: pt_fs_new derives the guest's fd budget from the limit in force. */
    uint64_t nofile = 0;
    int err = sb_apply_rlimit(&sbc, &nofile);
    if (err < 0) {
        vlog_err("cannot set RLIMIT_NOFILE: %s", strerror(-err));
        goto out;
    }
    struct pt_fs *fs = NULL;
    ptc = vmain_pt_config(&cfg, nofile);
    err = pt_fs_new(&ptc, &fs);
    if (err < 0) {
        vlog_err("cannot serve %s: %s", cfg.shared_dir, strerror(-err));
        goto out;
    }
    ctx.fs = fs;
    vlog_debug("fd budget for the guest: %ld (RLIMIT_NOFILE %llu)", pt_fs_fd_budget(fs),
               (unsigned long long)nofile);

    if (cfg.dax_window && vmain_dax_new(&cfg, fs, &dax) < 0)
        goto free_fs;
    ctx.dax = dax;
    if (vmain_save_prepare(&cfg, &ctx) < 0)
        goto free_fs;
    if (ctx.st) {
        /* The filesystem's part now, while objects can still be found on the host. */
        struct vst_err serr = {""};
        struct pt_state_report rep;
        struct vrs_parts p = vmain_parts(&ctx, NULL, -1);
        const char *what = handover ? "restart" : "--restore-state";
        if (vrs_load(&p, VST_PART_FS | (handover ? VST_PART_DAX : 0), &st, &st_fds, NULL, &rep,
                     &serr) < 0) {
            vlog_err("%s: %s", what, serr.msg);
            goto free_fs;
        }
        vmain_log_report(what, &rep);
    }

    if (!cfg.mountpoint && vmain_load_open(&load, &cfg) < 0)
        goto free_fs;
    if (vmain_enter_sandbox(&sbc, &cfg, fs) < 0) {
        vmain_unmount();
        goto free_fs;
    }
    /* Handles open with CAP_DAC_READ_SEARCH: checked with what the sandbox kept. */
    bool fell_back = false;
    err = pt_fs_check_handles(fs, &fell_back);
    if (err < 0) {
        vlog_err("--inode-file-handles=mandatory: cannot open a file handle (%s); it needs "
                 "CAP_DAC_READ_SEARCH",
                 strerror(-err));
        vmain_unmount();
        goto free_fs;
    }
    if (fell_back)
        vlog_warn("--inode-file-handles=prefer: file handles do not open here (no "
                  "CAP_DAC_READ_SEARCH?); inodes keep O_PATH fds");

    if (cfg.mountpoint) {
        status = vmain_run_devfuse(&cfg);
        goto free_fs;
    }

    if (dax && (err = vdax_stats_start(dax, vmain_stats_fd)) < 0) {
        vlog_err("cannot start the statistics thread: %s", strerror(-err));
        goto free_fs;
    }
    status = vmain_serve(&ctx);
    vlog_info("exiting");
    /* The window thread writes the guest's last stores back while the fs is there. */
    if (dax)
        vdax_stats_stop(dax);

free_fs:
    pt_fs_free(fs);
    vdax_free(dax); /* after the fs, which may still drop DAX records */
out:
    vufs_close(&load.loadavg_fd);
    vst_fds_free(&st_fds);
    free(st_buf);
    vufs_close(&ctx.save_dir_fd);
    g_free(ctx.save_name);
    vmain_listener_close(&l);
    vopt_config_clear(&cfg);
    return status;
}
