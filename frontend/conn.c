/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The vhost-user socket: connect to a backend (or spawn one in its own process
 * group first), move messages and fds, and serve the backend request channel
 * in a thread.
 *
 * Process lifetime of a spawned backend:
 *   spawn (fork, setpgid, exec) -> connect retried until the socket answers,
 *   the backend dies (-ECHILD) or the timeout (-ETIMEDOUT)
 *   close: socket closed (a backend normally exits then), 2 s grace, SIGTERM
 *   to the group, 3 s, SIGKILL to the group, reaped.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "vfe.h"
#include "vfe_i.h"

struct vfe_conn {
    int fd;
    int timeout_ms;
    bool reply_ack;
    bool trace;          /* VFE_TRACE set: log every message to stderr */
    char *socket_path;
    char *tmpdir;        /* removed on close when we made it */
    pid_t pid;           /* spawned backend, also its process group; 0 = none */
    bool reaped;
    int status;
    bool on_its_own;     /* exited within the grace period after we hung up */

    /* Backend request channel; the thread owns chan_fd while running. */
    int chan_fd;
    int chan_stop_fd;    /* eventfd telling the thread to leave */
    pthread_t chan_thread;
    bool chan_running;
    vfe_backend_req_fn handler;
    vfe_backend_post_fn post;
    void *opaque;

    /* vfe_conn_call's request and reply stay together when the channel thread
     * (a VMM's commit after a map) and a test thread both call. */
    pthread_mutex_t call_lock;
    unsigned chan_count; /* atomic */
};

static int64_t deadline_after(int timeout_ms)
{
    if (timeout_ms < 0)
        return -1;
    return (int64_t)(vufs_now_ns() / 1000000ull) + timeout_ms;
}

/* Milliseconds left until deadline (-1 = forever), never negative. */
static int ms_left(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - (int64_t)(vufs_now_ns() / 1000000ull);
    if (left < 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

static int wait_readable(int fd, int64_t deadline)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    for (;;) {
        int r = poll(&p, 1, ms_left(deadline));
        if (r > 0)
            return 0;
        if (r == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

/* ---- Spawning ----------------------------------------------------------------- */

static char *substitute(const char *arg, const char *sock, const char *dir)
{
    GString *s = g_string_new(NULL);
    for (const char *p = arg; *p;) {
        if (g_str_has_prefix(p, "{socket}")) {
            g_string_append(s, sock);
            p += strlen("{socket}");
        } else if (g_str_has_prefix(p, "{dir}")) {
            g_string_append(s, dir ? dir : "");
            p += strlen("{dir}");
        } else {
            g_string_append_c(s, *p++);
        }
    }
    return g_string_free(s, FALSE);
}

static int spawn_backend(struct vfe_conn *c, const char *cmd, const char *dir, const char *log,
                         const cpu_set_t *cpus)
{
    g_auto(GStrv) argv = NULL;
    g_autoptr(GError) err = NULL;
    if (!g_shell_parse_argv(cmd, NULL, &argv, &err))
        return -EINVAL;
    for (char **a = argv; *a; a++) {
        char *n = substitute(*a, c->socket_path, dir);
        g_free(*a);
        *a = n;
    }
    _cleanup_close_ int logfd = -1;
    if (log) {
        logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (logfd < 0)
            return -errno;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* Child: async-signal-safe calls only. A frontend that dies (a crashed
         * test) takes its backend with it. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        if (logfd >= 0) {
            dup2(logfd, STDOUT_FILENO);
            dup2(logfd, STDERR_FILENO);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        if (cpus && sched_setaffinity(0, sizeof(*cpus), cpus) < 0)
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, whichever runs first */
    c->pid = pid;
    return 0;
}

bool vfe_conn_backend_exited(struct vfe_conn *c, int *status)
{
    if (!c->pid)
        return false;
    if (!c->reaped) {
        int st;
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) {
            c->reaped = true;
            c->status = st;
        }
    }
    if (c->reaped && status)
        *status = c->status;
    return c->reaped;
}

static int try_connect(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    return TAKE_FD(fd);
}

static int connect_with_retry(struct vfe_conn *c)
{
    int64_t deadline = deadline_after(c->timeout_ms);
    for (;;) {
        int fd = try_connect(c->socket_path);
        if (fd >= 0)
            return fd;
        if (fd != -ENOENT && fd != -ECONNREFUSED)
            return fd;
        if (!c->pid)
            return fd; /* nobody will create it */
        if (vfe_conn_backend_exited(c, NULL))
            return -ECHILD;
        if (ms_left(deadline) == 0)
            return -ETIMEDOUT;
        struct timespec ts = { .tv_nsec = 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

static void kill_backend(struct vfe_conn *c)
{
    if (!c->pid)
        return;
    /* The backend usually exits when its frontend goes away. */
    c->on_its_own = true;
    for (int step = 0; step < 3 && !vfe_conn_backend_exited(c, NULL); step++) {
        if (step > 0)
            c->on_its_own = false;
        int sig = step == 0 ? 0 : step == 1 ? SIGTERM : SIGKILL;
        if (sig)
            kill(-c->pid, sig);
        int64_t deadline = deadline_after(step == 2 ? 10000 : step == 0 ? 2000 : 3000);
        while (!vfe_conn_backend_exited(c, NULL) && ms_left(deadline) > 0) {
            struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    /* Leftovers in the group (a backend's forked children). */
    kill(-c->pid, SIGKILL);
}

/* ---- Open / close ----------------------------------------------------------------- */

int vfe_conn_open(const struct vfe_conn_config *cfg, struct vfe_conn **out)
{
    if (!cfg->socket_path && !cfg->backend_cmd)
        return -EINVAL;
    struct vfe_conn *c = g_new0(struct vfe_conn, 1);
    c->fd = -1;
    c->chan_fd = -1;
    c->chan_stop_fd = -1;
    c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : VFE_DEFAULT_TIMEOUT_MS;
    pthread_mutex_init(&c->call_lock, NULL);
    c->trace = getenv("VFE_TRACE") != NULL;
    int r;
    if (cfg->socket_path) {
        c->socket_path = g_strdup(cfg->socket_path);
    } else {
        c->tmpdir = g_dir_make_tmp("vfe-XXXXXX", NULL);
        if (!c->tmpdir) {
            r = -EIO;
            goto out_close;
        }
        c->socket_path = g_build_filename(c->tmpdir, "vhost-fs.sock", NULL);
    }
    if (cfg->backend_cmd) {
        r = spawn_backend(c, cfg->backend_cmd, cfg->dir, cfg->backend_log, cfg->backend_cpus);
        if (r < 0)
            goto out_close;
    }
    r = connect_with_retry(c);
    if (r < 0)
        goto out_close;
    c->fd = r;
    *out = c;
    return 0;

out_close:
    vfe_conn_close(c);
    return r;
}

static void stop_channel(struct vfe_conn *c)
{
    if (c->chan_running) {
        uint64_t one = 1;
        if (write(c->chan_stop_fd, &one, sizeof(one)) < 0) {
            /* an eventfd write of 1 cannot fail short of overflow */
        }
        pthread_join(c->chan_thread, NULL);
        c->chan_running = false;
    }
    vufs_close(&c->chan_fd);
    vufs_close(&c->chan_stop_fd);
}

void vfe_conn_close(struct vfe_conn *c)
{
    vfe_conn_close_status(c, NULL, NULL);
}

int vfe_conn_close_status(struct vfe_conn *c, int *status, bool *on_its_own)
{
    if (!c)
        return -EINVAL;
    stop_channel(c);
    vufs_close(&c->fd);
    kill_backend(c);
    if (c->tmpdir) {
        /* Ours alone: the socket and whatever the backend left next to it
         * (vufsd keeps a pid file there). */
        GDir *dir = g_dir_open(c->tmpdir, 0, NULL);
        const char *name;
        while (dir && (name = g_dir_read_name(dir))) {
            g_autofree char *p = g_build_filename(c->tmpdir, name, NULL);
            g_unlink(p);
        }
        if (dir)
            g_dir_close(dir);
        g_rmdir(c->tmpdir);
        g_free(c->tmpdir);
    }
    int r = c->pid ? 0 : -ECHILD;
    if (status)
        *status = c->status;
    if (on_its_own)
        *on_its_own = c->pid && c->on_its_own;
    g_free(c->socket_path);
    pthread_mutex_destroy(&c->call_lock);
    g_free(c);
    return r;
}

pid_t vfe_conn_backend_pid(const struct vfe_conn *c)
{
    return c->pid;
}

int vfe_conn_fd(const struct vfe_conn *c)
{
    return c->fd;
}

const char *vfe_conn_socket_path(const struct vfe_conn *c)
{
    return c->socket_path;
}

void vfe_conn_set_reply_ack(struct vfe_conn *c, bool on)
{
    c->reply_ack = on;
}

/* ---- Message I/O -------------------------------------------------------------------- */

static int send_all(int fd, const void *buf, size_t len, const int *fds, unsigned nfds)
{
    if (nfds > VFE_VU_MAX_FDS)
        return -EINVAL;
    const uint8_t *p = buf;
    union {
        char buf[CMSG_SPACE(sizeof(int) * VFE_VU_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    bool fds_sent = nfds == 0;
    do {
        struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (!fds_sent) {
            memset(&ctl, 0, sizeof(ctl));
            mh.msg_control = ctl.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
            struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
            memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
        }
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EPIPE ? -ECONNRESET : -errno;
        }
        fds_sent = true;
        p += n;
        len -= (size_t)n;
    } while (len > 0);
    return 0;
}

static int send_on(int fd, uint32_t request, uint32_t flags, uint32_t size, const void *payload,
                   size_t payload_len, const int *fds, unsigned nfds)
{
    if (payload_len > VFE_VU_MAX_PAYLOAD)
        return -EMSGSIZE;
    struct vfe_msg m;
    m.request = request;
    m.flags = flags;
    m.size = size;
    if (payload_len)
        memcpy(m.payload.raw, payload, payload_len);
    return send_all(fd, &m, VFE_VU_HDR_SIZE + payload_len, fds, nfds);
}

static void close_fds(int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Reads exactly len bytes; fds (if any) ride on the first chunk. */
static int recv_exact(int fd, void *buf, size_t len, int *fds, unsigned *nfds, unsigned maxfds,
                      int64_t deadline)
{
    uint8_t *p = buf;
    unsigned got_fds = 0;
    int r;
    while (len > 0) {
        r = wait_readable(fd, deadline);
        if (r < 0)
            goto out_fds;
        union {
            char buf[CMSG_SPACE(sizeof(int) * VFE_VU_MAX_FDS)];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = { .iov_base = p, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
        ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            r = -errno;
            goto out_fds;
        }
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int tmp[VFE_VU_MAX_FDS];
            if (k > VFE_VU_MAX_FDS)
                k = VFE_VU_MAX_FDS;
            memcpy(tmp, CMSG_DATA(cm), k * sizeof(int));
            for (unsigned i = 0; i < k; i++) {
                if (fds && got_fds < maxfds)
                    fds[got_fds++] = tmp[i];
                else
                    close(tmp[i]);
            }
        }
        if (n == 0) {
            r = -ECONNRESET;
            goto out_fds;
        }
        p += n;
        len -= (size_t)n;
    }
    if (nfds)
        *nfds = got_fds;
    return 0;

out_fds:
    if (fds)
        close_fds(fds, got_fds);
    if (nfds)
        *nfds = 0;
    return r;
}

static int recv_on(int fd, struct vfe_msg *m, int *fds, unsigned *nfds, int timeout_ms)
{
    int64_t deadline = deadline_after(timeout_ms);
    unsigned maxfds = nfds ? *nfds : 0;
    int r = recv_exact(fd, m, VFE_VU_HDR_SIZE, fds, nfds, maxfds, deadline);
    if (r < 0)
        return r;
    if (m->size > VFE_VU_MAX_PAYLOAD) {
        /* Drain what we cannot hold, so the stream stays in sync. */
        uint8_t sink[512];
        uint32_t left = m->size;
        while (left > 0 && r == 0) {
            uint32_t k = left > sizeof(sink) ? sizeof(sink) : left;
            r = recv_exact(fd, sink, k, NULL, NULL, 0, deadline);
            left -= k;
        }
        if (fds && nfds)
            close_fds(fds, *nfds);
        if (nfds)
            *nfds = 0;
        return r < 0 ? r : -EMSGSIZE;
    }
    if (m->size) {
        r = recv_exact(fd, m->payload.raw, m->size, NULL, NULL, 0, deadline);
        if (r < 0) {
            if (fds && nfds)
                close_fds(fds, *nfds);
            if (nfds)
                *nfds = 0;
            return r;
        }
    }
    return 0;
}

static void trace_msg(const char *dir, uint32_t request, uint32_t flags, uint32_t size,
                      const void *payload, int r)
{
    uint64_t v = 0;
    if (payload && size >= 8)
        memcpy(&v, payload, 8);
    fprintf(stderr, "vfe: %s %s (%u) flags 0x%x size %u first-u64 0x%llx: %s\n", dir,
            vfe_msg_name(request), request, flags, size, (unsigned long long)v,
            r < 0 ? strerror(-r) : "ok");
}

int vfe_conn_send_raw(struct vfe_conn *c, uint32_t request, uint32_t flags, uint32_t size,
                      const void *payload, size_t payload_len, const int *fds, unsigned nfds)
{
    if (c->fd < 0)
        return -ENOTCONN;
    int r = send_on(c->fd, request, flags, size, payload, payload_len, fds, nfds);
    if (c->trace)
        trace_msg("->", request, flags, size, payload_len >= 8 ? payload : NULL, r);
    return r;
}

int vfe_conn_recv_raw(struct vfe_conn *c, struct vfe_msg *m, int *fds, unsigned *nfds,
                      int timeout_ms)
{
    if (c->fd < 0)
        return -ENOTCONN;
    int r = recv_on(c->fd, m, fds, nfds, timeout_ms);
    if (c->trace)
        trace_msg("<-", r < 0 ? 0 : m->request, r < 0 ? 0 : m->flags, r < 0 ? 0 : m->size,
                  r < 0 ? NULL : m->payload.raw, r);
    return r;
}

bool vfe_conn_wait_closed(struct vfe_conn *c, int timeout_ms)
{
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        if (wait_readable(c->fd, deadline) < 0)
            return false;
        char buf[256];
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0)
            return true;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return true; /* ECONNRESET and friends */
    }
}

static bool has_own_reply(uint32_t request, uint32_t *size)
{
    switch (request) {
    case VFE_VU_GET_FEATURES:
    case VFE_VU_GET_PROTOCOL_FEATURES:
    case VFE_VU_GET_QUEUE_NUM:
    case VFE_VU_GET_MAX_MEM_SLOTS:
    case VFE_VU_GET_STATUS:
    case VFE_VU_SET_LOG_BASE: /* with LOG_SHMFD, the only form vfe sends */
    case VFE_VU_SET_DEVICE_STATE_FD:
    case VFE_VU_CHECK_DEVICE_STATE:
        *size = sizeof(uint64_t);
        return true;
    case VFE_VU_GET_VRING_BASE:
        *size = sizeof(struct vfe_vu_state);
        return true;
    case VFE_VU_GET_SHMEM_CONFIG:
        *size = 8 + 8 * 256; /* u32 nregions, u32 padding, u64 memory_sizes[256] */
        return true;
    default:
        return false;
    }
}

static int call_locked(struct vfe_conn *c, struct vfe_msg *m, const int *fds, unsigned nfds,
                       struct vfe_msg *reply)
{
    uint32_t want = 0;
    bool own = has_own_reply(m->request, &want);
    bool ack = !own && c->reply_ack;
    if (ack)
        m->flags |= VFE_VU_FLAG_NEED_REPLY;
    int r = vfe_conn_send_raw(c, m->request, m->flags, m->size, m->payload.raw, m->size, fds,
                              nfds);
    if (r < 0)
        return r;
    if (!own && !ack)
        return 0;
    struct vfe_msg tmp;
    struct vfe_msg *rep = reply ? reply : &tmp;
    r = vfe_conn_recv_raw(c, rep, NULL, NULL, c->timeout_ms);
    if (r < 0)
        return r;
    r = vfe_msg_check_reply(rep, m->request, own ? want : sizeof(uint64_t));
    if (r < 0)
        return r;
    if (ack && rep->payload.u64 != 0)
        return -EIO;
    return 0;
}

int vfe_conn_call(struct vfe_conn *c, struct vfe_msg *m, const int *fds, unsigned nfds,
                  struct vfe_msg *reply)
{
    pthread_mutex_lock(&c->call_lock);
    int r = call_locked(c, m, fds, nfds, reply);
    pthread_mutex_unlock(&c->call_lock);
    return r;
}

int vfe_conn_get_u64(struct vfe_conn *c, uint32_t request, uint64_t *v)
{
    struct vfe_msg m, rep;
    vfe_msg_init(&m, request, 0);
    int r = vfe_conn_call(c, &m, NULL, 0, &rep);
    if (r < 0)
        return r;
    *v = rep.payload.u64;
    return 0;
}

int vfe_conn_set_u64(struct vfe_conn *c, uint32_t request, uint64_t v)
{
    struct vfe_msg m;
    vfe_msg_init(&m, request, 0);
    vfe_msg_set_u64(&m, v);
    return vfe_conn_call(c, &m, NULL, 0, NULL);
}

int vfe_conn_get_shmem_window(struct vfe_conn *c, uint64_t *size)
{
    struct vfe_msg m;
    g_autofree struct vfe_msg *rep = g_new0(struct vfe_msg, 1);
    vfe_msg_init(&m, VFE_VU_GET_SHMEM_CONFIG, 0);
    int r = vfe_conn_call(c, &m, NULL, 0, rep);
    if (r < 0)
        return r;
    uint32_t n;
    memcpy(&n, rep->payload.raw, sizeof(n));
    if (n < 1 || n > 256)
        return -EPROTO;
    memcpy(size, rep->payload.raw + 8, sizeof(*size));
    return 0;
}

/* ---- Backend request channel ------------------------------------------------------ */

static void *channel_thread(void *arg)
{
    struct vfe_conn *c = arg;
    while (vufs_wait_input(c->chan_fd, c->chan_stop_fd, -1) == 1) {
        struct vfe_msg *m = g_new(struct vfe_msg, 1);
        int fds[VFE_VU_MAX_FDS];
        unsigned nfds = VFE_VU_MAX_FDS;
        int r = recv_on(c->chan_fd, m, fds, &nfds, c->timeout_ms);
        if (r < 0) {
            g_free(m);
            if (r == -EMSGSIZE)
                continue;
            break; /* EOF or a stream we cannot resync */
        }
        __atomic_add_fetch(&c->chan_count, 1, __ATOMIC_RELAXED);
        uint64_t result = 1; /* failure unless a handler says otherwise */
        if (c->handler)
            result = c->handler(c->opaque, m, fds, nfds);
        close_fds(fds, nfds);
        if (m->flags & VFE_VU_FLAG_NEED_REPLY) {
            r = send_on(c->chan_fd, m->request, VFE_VU_VERSION | VFE_VU_FLAG_REPLY,
                        sizeof(uint64_t), &result, sizeof(result), NULL, 0);
            if (r < 0) {
                g_free(m);
                break;
            }
        }
        if (c->post)
            c->post(c->opaque, m, result);
        g_free(m);
    }
    return NULL;
}

int vfe_conn_start_backend_channel(struct vfe_conn *c, vfe_backend_req_fn handler,
                                   vfe_backend_post_fn post, void *opaque)
{
    if (c->chan_running)
        return -EBUSY;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    _cleanup_close_ int theirs = sv[1];
    c->chan_fd = sv[0];
    c->chan_stop_fd = eventfd(0, EFD_CLOEXEC);
    if (c->chan_stop_fd < 0) {
        int r = -errno;
        stop_channel(c);
        return r;
    }
    struct vfe_msg m;
    vfe_msg_init(&m, VFE_VU_SET_BACKEND_REQ_FD, 0);
    int r = vfe_conn_call(c, &m, &theirs, 1, NULL);
    if (r < 0) {
        stop_channel(c);
        return r;
    }
    c->handler = handler;
    c->post = post;
    c->opaque = opaque;
    r = pthread_create(&c->chan_thread, NULL, channel_thread, c);
    if (r) {
        stop_channel(c);
        return -r;
    }
    c->chan_running = true;
    return 0;
}

unsigned vfe_conn_backend_requests(const struct vfe_conn *c)
{
    return __atomic_load_n(&c->chan_count, __ATOMIC_RELAXED);
}
