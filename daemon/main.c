/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vufsd: parse the command line, then start in one of four modes, each a list
 * of named start-up steps (vmain_run_*), and hand over to what serves:
 *
 *   serve       a fresh daemon for a vhost-user frontend
 *   restore     the same, going on from --restore-state's file
 *   handover    a restart: the keeper ran this binary with the previous
 *               daemon's state and fds, and its frontend is served on
 *   mount       a local /dev/fuse mount (--mount)
 *
 * Start-up is single threaded until serving begins: the sandbox's unshare,
 * capability and setgroups steps are per thread. What serves a frontend (the
 * filesystem, the DAX backend, the device) is owned by connection.c.
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

#include <glib.h>

#include "connection.h"
#include "log.h"
#include "options.h"
#include "daemon/passthrough/passthrough.h"
#include "restart.h"
#include "sandbox/sandbox.h"
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

/* ---- Start-up steps ---------------------------------------------------------------- */

/* What start-up makes, step by step, and hands over to what serves. */
struct vmain {
    struct vufsd_config cfg;
    char **argv;
    bool handover; /* started by the keeper with a restart's state */
    struct sb_config sbc;
    char *mount_caps; /* --mount: the modcaps handed to the sandbox */
    char *exe;        /* what a restart runs */
    int keeper_chan;  /* the keeper's handover channel, -1 */
    struct vrs_listener l;
    /* A state to go on from: a restart's, or --restore-state's file. */
    void *st_buf; /* NULL: none */
    size_t st_len;
    struct vst_state st;
    struct vst_fds st_fds;
    uint64_t nofile;    /* RLIMIT_NOFILE in force */
    struct vconn *conn; /* the filesystem, the DAX backend, the device */
};

/* The modes, as marks on the steps each takes. */
enum {
    VMAIN_SERVE = 1 << 0,    /* a fresh daemon for a vhost-user frontend */
    VMAIN_RESTORE = 1 << 1,  /* the same, going on from --restore-state's file */
    VMAIN_HANDOVER = 1 << 2, /* a restart: the keeper ran this binary with the state */
    VMAIN_MOUNT = 1 << 3,    /* --mount: a local /dev/fuse mount */
};
#define VMAIN_VHOST_USER (VMAIN_SERVE | VMAIN_RESTORE | VMAIN_HANDOVER)
#define VMAIN_ALL        (VMAIN_VHOST_USER | VMAIN_MOUNT)

/*
 * One start-up step: what it does (0, or -1 after logging why not), the modes
 * that take it, and why it comes where it does in vmain_startup, whose order
 * is the ordering rules.
 */
struct vmain_step {
    const char *name;
    int (*run)(struct vmain *m);
    unsigned modes;
    const char *why;
};

/* --uid-map/--gid-map: a user namespace, and the namespace sandbox inside it. */
static int vmain_step_user_ns(struct vmain *m)
{
    struct vufsd_config *cfg = &m->cfg;
    if (!cfg->uid_map && !cfg->gid_map)
        return 0;
    if (cfg->sandbox_explicit && cfg->sandbox != SB_MODE_NAMESPACE) {
        vlog_err("--uid-map/--gid-map need --sandbox namespace");
        return -1;
    }
    cfg->sandbox = SB_MODE_NAMESPACE;
    if (m->handover)
        return 0; /* the keeper ran this binary inside the namespace */
    const char *why_ns = NULL;
    int ret = sb_enter_user_ns(cfg->uid_map, cfg->gid_map, &why_ns);
    if (ret < 0) {
        vlog_err("cannot enter a user namespace: %s: %s", why_ns ? why_ns : "failed",
                 strerror(-ret));
        return -1;
    }
    if (why_ns)
        vlog_warn("user namespace: %s", why_ns);
    vlog_info("user namespace entered (uid map %s, gid map %s)",
              cfg->uid_map ? cfg->uid_map : "own uid", cfg->gid_map ? cfg->gid_map : "own gid");
    return 0;
}

static int vmain_step_sandbox_settings(struct vmain *m)
{
    struct vufsd_config *cfg = &m->cfg;
    m->sbc = vmain_sb_config(cfg);
    /* --mount: unmounting at the end needs CAP_SYS_ADMIN (a user's -sys_admin still wins). */
    if (cfg->mountpoint) {
        m->mount_caps = g_strdup_printf("+sys_admin%s%s", cfg->modcaps && *cfg->modcaps ? ":" : "",
                                        cfg->modcaps ? cfg->modcaps : "");
        m->sbc.modcaps = m->mount_caps;
    }
    const char *why = NULL;
    if (sb_config_check(&m->sbc, &why) < 0) {
        vlog_err("sandbox settings refused: %s", why ? why : "invalid");
        return -1;
    }
    return 0;
}

/*
 * The pid file names the process an operator signals: the keeper, which stays
 * outside every sandbox, forwards signals and runs the next binary on a
 * restart (in namespace mode the daemon is pid 1 inside, a number meaningless
 * on the host). Only the keeper's child returns.
 */
static int vmain_step_keeper(struct vmain *m)
{
    m->l.pid = getpid();
    m->exe = vmain_exe_path();
    struct sb_keeper k = {
        .new_pid_ns = m->sbc.mode == SB_MODE_NAMESPACE,
        .exe = m->exe,
        .argv = m->argv,
        .env_name = VRS_HANDOVER_ENV,
    };
    int ret = sb_enter_keeper(&k, &m->keeper_chan);
    if (ret < 0) {
        vlog_err("cannot start the keeper%s: %s", k.new_pid_ns ? " in a pid namespace" : "",
                 strerror(-ret));
        if (k.new_pid_ns)
            vlog_err("(try --sandbox chroot or none)");
        return -1;
    }
    return 0;
}

static int vmain_step_signals(struct vmain *m)
{
    if (vmain_install_signals(m->cfg.save_state != NULL) < 0 ||
        vmain_install_stats_signal(m->cfg.dax_window != 0) < 0) {
        vlog_err("cannot install signal handlers: %s", strerror(errno));
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    vlog_info("vufsd %s starting: shared directory %s", VUFSD_VERSION, m->cfg.shared_dir);
    return 0;
}

/* --mount: the handlers stop the /dev/fuse loop, which then unmounts. */
static int vmain_step_devfuse_signals(struct vmain *m)
{
    if (!m->cfg.sandbox_explicit)
        vlog_warn("--mount: no sandbox (--sandbox none), the mount is made in the host's "
                  "mount namespace; seccomp still applies");
    if (vmain_install_devfuse_signals() < 0 || vmain_install_stats_signal(false) < 0) {
        vlog_err("cannot install signal handlers: %s", strerror(errno));
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    vlog_info("vufsd %s starting: shared directory %s", VUFSD_VERSION, m->cfg.shared_dir);
    return 0;
}

/* The state in m->st_buf opened; what = "restart" or "--restore-state". */
static int vmain_open_state(struct vmain *m, const char *what)
{
    struct vst_err serr = {""};
    char origin[64];
    if (vst_open(m->st_buf, m->st_len, &m->st, &serr) < 0 ||
        (m->handover && m->st.nfds != m->st_fds.n &&
         vst_fail(&serr, -EINVAL, "state: %u fds named, %u came", m->st.nfds, m->st_fds.n))) {
        vlog_err("%s: %s", what, serr.msg);
        return -1;
    }
    vrs_origin(&m->st, origin, sizeof(origin));
    vlog_info("%s: a %zu-byte state written by %s", what, m->st_len, origin);
    return 0;
}

static int vmain_step_take_handover(struct vmain *m)
{
    int ret = vrs_take_handover(&m->st_buf, &m->st_len, &m->st_fds);
    if (ret < 0) {
        vlog_err("restart: cannot take the handed-over state: %s", strerror(-ret));
        return -1;
    }
    if (ret == 0) {
        vlog_err("restart: no state came with %s", VRS_HANDOVER_ENV);
        return -1;
    }
    return vmain_open_state(m, "restart");
}

static int vmain_step_read_state_file(struct vmain *m)
{
    const char *path = m->cfg.restore_state;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    int ret = fd < 0 ? -errno : vrs_read_all(fd, &m->st_buf, &m->st_len);
    if (fd >= 0)
        close(fd);
    if (ret < 0) {
        vlog_err("--restore-state %s: %s", path, strerror(-ret));
        return -1;
    }
    return vmain_open_state(m, "--restore-state");
}

static int vmain_step_listen(struct vmain *m)
{
    const struct vufsd_config *cfg = &m->cfg;
    int ret =
        cfg->socket_path ? vmain_listen_path(&m->l, cfg) : vmain_listen_fd(&m->l, cfg->listen_fd);
    return ret < 0 ? -1 : 0;
}

static int vmain_step_listener_from_state(struct vmain *m)
{
    struct vst_err serr = {""};
    struct vrs_parts p = {.listener = &m->l, .conn_fd = -1};
    if (vrs_load(&p, VST_PART_LISTENER, &m->st, &m->st_fds, NULL, NULL, &serr) < 0) {
        vlog_err("restart: %s", serr.msg);
        return -1;
    }
    /* The --fd the keeper has kept since the first start: ours is in the state. */
    if (m->cfg.listen_fd >= 0 && m->cfg.listen_fd != m->l.fd)
        close(m->cfg.listen_fd);
    vlog_info("restart: listening on the socket the previous vufsd had");
    return 0;
}

static int vmain_step_rlimit(struct vmain *m)
{
    int err = sb_apply_rlimit(&m->sbc, &m->nofile);
    if (err < 0) {
        vlog_err("cannot set RLIMIT_NOFILE: %s", strerror(-err));
        return -1;
    }
    return 0;
}

static int vmain_step_share(struct vmain *m)
{
    struct pt_config ptc = vmain_pt_config(&m->cfg, m->nofile);
    return vconn_new(&m->cfg, &ptc, &m->l, m->keeper_chan, &m->conn) < 0 ? -1 : 0;
}

static int vmain_step_load_state(struct vmain *m)
{
    return vconn_load_state(m->conn, &m->st, &m->st_fds, m->handover) < 0 ? -1 : 0;
}

static int vmain_step_watch_load(struct vmain *m)
{
    return vconn_watch_load(m->conn);
}

static int vmain_step_sandbox(struct vmain *m)
{
    return vmain_enter_sandbox(&m->sbc, &m->cfg, vconn_fs(m->conn)) < 0 ? -1 : 0;
}

static int vmain_step_check_handles(struct vmain *m)
{
    bool fell_back = false;
    int err = pt_fs_check_handles(vconn_fs(m->conn), &fell_back);
    if (err < 0) {
        vlog_err("--inode-file-handles=mandatory: cannot open a file handle (%s); it needs "
                 "CAP_DAC_READ_SEARCH",
                 strerror(-err));
        return -1;
    }
    if (fell_back)
        vlog_warn("--inode-file-handles=prefer: file handles do not open here (no "
                  "CAP_DAC_READ_SEARCH?); inodes keep O_PATH fds");
    return 0;
}

/* Start-up, in order: each mode takes the steps that name it. */
static const struct vmain_step vmain_startup[] = {
    {"user namespace", vmain_step_user_ns, VMAIN_ALL,
     "first: every later step runs with the ids the namespace maps, and it makes the sandbox a "
     "namespace one"},
    {"sandbox settings", vmain_step_sandbox_settings, VMAIN_ALL,
     "checked before anything is opened or forked, after the user namespace chose the sandbox "
     "mode"},
    {"keeper", vmain_step_keeper, VMAIN_VHOST_USER,
     "before the socket, the share and any thread: the keeper stays outside every namespace and "
     "holds nothing of the share; after a restart the keeper's child closes the keeper's copies of "
     "the handed-over fds here"},
    {"signals", vmain_step_signals, VMAIN_VHOST_USER,
     "right after the keeper's fork: from here a stop signal stops the daemon in order instead of "
     "ending it"},
    {"signals (--mount)", vmain_step_devfuse_signals, VMAIN_MOUNT,
     "before the mount exists: a stop signal that comes first is remembered and unmounts at once"},
    {"state from the keeper", vmain_step_take_handover, VMAIN_HANDOVER,
     "after the keeper: the fds it handed over are this process's now; before the listener, which "
     "is in the state"},
    {"state from --restore-state", vmain_step_read_state_file, VMAIN_RESTORE,
     "before the share is opened (a refused file starts nothing), while the path is the host's"},
    {"listener", vmain_step_listen, VMAIN_SERVE | VMAIN_RESTORE,
     "before the sandbox: binds the host's path and locks its pid file"},
    {"listener from the state", vmain_step_listener_from_state, VMAIN_HANDOVER,
     "instead of binding: the socket the frontend is connected through is in the state"},
    {"RLIMIT_NOFILE", vmain_step_rlimit, VMAIN_ALL,
     "before the share: its fd budget for the guest is cut from the limit in force"},
    {"share", vmain_step_share, VMAIN_ALL,
     "before the sandbox: opens the shared directory and --stats-file's and --save-state's "
     "directories by their host paths"},
    {"saved filesystem", vmain_step_load_state, VMAIN_RESTORE | VMAIN_HANDOVER,
     "after the share is open, before the sandbox: the saved objects are found again by their host "
     "paths"},
    {"load watch", vmain_step_watch_load, VMAIN_VHOST_USER,
     "before the sandbox, which hides /proc"},
    {"sandbox", vmain_step_sandbox, VMAIN_ALL,
     "last before serving and still single threaded: unshare, setgroups and the capability drop "
     "are per thread; --mount mounts between the namespaces and the capability drop (mount(2) "
     "needs CAP_SYS_ADMIN)"},
    {"file handle check", vmain_step_check_handles, VMAIN_ALL,
     "after the sandbox: file handles open only with the capabilities it kept"},
};

/* Runs the steps mode takes. 0, or -1 when one failed (logged). */
static int vmain_start(struct vmain *m, unsigned mode)
{
    for (size_t i = 0; i < sizeof(vmain_startup) / sizeof(vmain_startup[0]); i++) {
        const struct vmain_step *st = &vmain_startup[i];
        if (!(st->modes & mode))
            continue;
        vlog_debug("start-up: %s (%s)", st->name, st->why);
        if (st->run(m) < 0)
            return -1;
    }
    return 0;
}

/* ---- The modes --------------------------------------------------------------------- */

static int vmain_serve(struct vmain *m)
{
    struct vconn_signals sig = {
        .stop_fd = vmain_stop_fd,
        .restart_fd = vmain_restart_fd,
        .save_fd = vmain_save_fd,
        .stats_fd = vmain_stats_fd,
    };
    return vconn_serve(m->conn, &sig);
}

/* A fresh daemon for a vhost-user frontend. */
static int vmain_run_serve(struct vmain *m)
{
    return vmain_start(m, VMAIN_SERVE) < 0 ? 1 : vmain_serve(m);
}

/* --restore-state: as a fresh daemon, going on from the file's filesystem and
 * FUSE session (the latter with the first frontend to connect). */
static int vmain_run_restore(struct vmain *m)
{
    return vmain_start(m, VMAIN_RESTORE) < 0 ? 1 : vmain_serve(m);
}

/* A restart: the keeper ran this binary with the previous daemon's state and
 * fds; its listener, filesystem, window and frontend go on here. */
static int vmain_run_handover(struct vmain *m)
{
    return vmain_start(m, VMAIN_HANDOVER) < 0 ? 1 : vmain_serve(m);
}

/* --mount: a local /dev/fuse mount, no keeper (it cannot restart), no socket. */
static int vmain_run_mount(struct vmain *m)
{
    return vmain_start(m, VMAIN_MOUNT) < 0 ? 1 : vmain_run_devfuse(&m->cfg);
}

/* The options given are ones this build and these settings can honour. */
static int vmain_check_config(const struct vufsd_config *cfg)
{
    const char *unsupported = vopt_unsupported(cfg);
    if (unsupported) {
        vlog_err("cannot honour %s", unsupported);
        return -1;
    }
    char ids_err[256] = "";
    struct pt_config ptc = vmain_pt_config(cfg, 0);
    if (pt_fs_check_ids(&ptc, ids_err, sizeof(ids_err)) < 0) {
        vlog_err("--translate-uid/--translate-gid: %s", ids_err);
        return -1;
    }
    return 0;
}

/* Whatever start-up made, in reverse. */
static void vmain_finish(struct vmain *m)
{
    vmain_unmount(); /* a start-up failure after the mount */
    vconn_free(m->conn);
    vst_fds_free(&m->st_fds);
    free(m->st_buf);
    vmain_listener_close(&m->l);
    g_free(m->mount_caps);
    g_free(m->exe);
    vopt_config_clear(&m->cfg);
}

int main(int argc, char **argv)
{
    struct vmain m = {
        .argv = argv,
        .keeper_chan = -1,
        .l = {.fd = -1, .dir_fd = -1, .pid_fd = -1},
    };
    enum vopt_action action;
    g_autofree char *errmsg = NULL;

    vst_fds_init(&m.st_fds);
    vopt_config_init(&m.cfg);
    if (vopt_parse(argc, argv, &m.cfg, &action, &errmsg) < 0) {
        fprintf(stderr, "vufsd: %s (see --help)\n", errmsg);
        vopt_config_clear(&m.cfg);
        return 1;
    }
    if (action == VOPT_VERSION) {
        printf("vufsd %s\n", VUFSD_VERSION);
        vopt_config_clear(&m.cfg);
        return 0;
    }
    if (action == VOPT_PRINT_CAPABILITIES) {
        g_autofree char *json = vopt_capabilities_json();
        printf("%s\n", json);
        vopt_config_clear(&m.cfg);
        return 0;
    }
    vlog_init(m.cfg.log_level, m.cfg.syslog);

    int status = 1;
    /* The keeper names the handed-over fds in the environment of the binary it runs. */
    m.handover = !m.cfg.mountpoint && getenv(VRS_HANDOVER_ENV) != NULL;
    if (vmain_check_config(&m.cfg) < 0)
        status = 1;
    else if (m.cfg.mountpoint)
        status = vmain_run_mount(&m);
    else if (m.handover)
        status = vmain_run_handover(&m);
    else if (m.cfg.restore_state)
        status = vmain_run_restore(&m);
    else
        status = vmain_run_serve(&m);
    vmain_finish(&m);
    return status;
}
