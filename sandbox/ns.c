/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Namespaces and chroot: after sb_enter() the daemon's root is the shared
 * directory, so a path the passthrough gets wrong still cannot name a host file.
 *
 * Namespace mode, step by step (all before the first guest request):
 *
 *   host process
 *     | sb_enter_pid_ns(): unshare(CLONE_NEWPID), fork
 *     +-- parent: forwards SIGTERM/SIGINT/SIGHUP/SIGUSR1, waits, exits with the status
 *     +-- child (pid 1 in the new pid namespace): returns 0
 *           | sb_enter(): open SHARED (O_PATH) = SHARE_FD, on the original mount
 *           | unshare(NEWNS|NEWNET|NEWIPC|NEWUTS)
 *           | mount --make-rslave /        our mounts never reach the host
 *           | mount proc /proc             a proc of the new pid namespace
 *           | open /proc/self/fd (O_PATH)  kept for the passthrough's reopens
 *           | mount --rbind SHARED SHARED  pivot_root needs a mount point
 *           | chdir SHARED; pivot_root . .  old root stacked on top of the new
 *           | umount2 . MNT_DETACH         the host's tree is gone
 *           | fchdir SHARE_FD; chroot .  root = the share as the fs opened it,
 *           v chdir /                    so '..' from its older fds stops too
 *
 * Chroot mode opens the proc fd, then chroot(SHARED) and chdir("/"). It keeps the
 * host's mount, network and pid view, for containers that cannot unshare.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "sandbox_i.h"

/* The signals the keeper forwards to the daemon; the first SB_NSTOPPING end
 * it (SIGUSR1 asks for statistics, SIGUSR2 for a saved state). */
static const int sb_forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
#define SB_NFORWARDED (sizeof(sb_forwarded) / sizeof(sb_forwarded[0]))
#define SB_NSTOPPING 3

static void sb_forwarded_set(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < SB_NFORWARDED; i++)
        sigaddset(set, sb_forwarded[i]);
}

/*
 * pid 1 of a namespace ignores every signal it has no handler for, the
 * forwarded SIGTERM included. Until the daemon installs its own handlers, this
 * one turns them into the exit a default disposition would have meant.
 */
static void sb_pid1_signal(int signo)
{
    _exit(128 + signo);
}

/* ---- The keeper's side of a handover ------------------------------------------------ */

/* One message on the keeper channel (a SOCK_SEQPACKET pair), fds attached to FDS. */
#define SB_KEEPER_MAGIC 0x564b5052u /* "VKPR" */
enum { SB_KEEPER_FDS = 1, SB_KEEPER_EXEC = 2 };
/* fds per message: below the kernel's SCM_MAX_FD (253). */
#define SB_KEEPER_BATCH 250u

struct sb_keeper_hdr {
    uint32_t magic;
    uint32_t kind;
    uint32_t count; /* fds attached */
    uint32_t total; /* fds of the whole handover */
};

struct sb_keeper_run {
    const struct sb_keeper *k;
    int chan;
    int *fds;
    unsigned nfds, cap, total;
    bool armed; /* EXEC accepted: exec once the child is gone */
    bool stop;  /* a stopping signal came while armed: exit instead */
};

static void sb_keeper_drop(struct sb_keeper_run *r)
{
    for (unsigned i = 0; i < r->nfds; i++)
        close(r->fds[i]);
    free(r->fds);
    r->fds = NULL;
    r->nfds = r->cap = r->total = 0;
    r->armed = false;
}

/* Room for total fds of our own: root raises its limit as the daemon did. */
static void sb_keeper_room(unsigned total)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)total + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = want;
    if (rl.rlim_max < want)
        rl.rlim_max = want;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

static void sb_keeper_reply(int chan, int32_t status)
{
    ssize_t w = send(chan, &status, sizeof(status), MSG_NOSIGNAL);
    (void)w;
}

/* Reads one message from the child; false when the channel is done. */
static bool sb_keeper_read(struct sb_keeper_run *r)
{
    struct sb_keeper_hdr h;
    union {
        char buf[CMSG_SPACE(SB_KEEPER_BATCH * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n = recvmsg(r->chan, &mh, MSG_CMSG_CLOEXEC);
    if (n <= 0)
        return n < 0 && errno == EINTR;

    int got[SB_KEEPER_BATCH];
    unsigned ngot = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < cnt && ngot < SB_KEEPER_BATCH; i++)
            memcpy(&got[ngot++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
    }
    bool bad = (size_t)n != sizeof(h) || h.magic != SB_KEEPER_MAGIC ||
               (mh.msg_flags & MSG_CTRUNC) || h.count != ngot || r->armed;
    if (!bad && h.kind == SB_KEEPER_FDS) {
        if (r->nfds == 0) {
            r->total = h.total;
            sb_keeper_room(h.total);
        }
        if (h.total != r->total || h.total > SB_KEEPER_MAX_FDS || r->nfds + ngot > r->total) {
            bad = true;
        } else {
            if (r->nfds + ngot > r->cap) {
                unsigned cap = r->total;
                int *f = realloc(r->fds, cap * sizeof(*f));
                if (!f)
                    bad = true;
                else {
                    r->fds = f;
                    r->cap = cap;
                }
            }
            for (unsigned i = 0; !bad && i < ngot; i++)
                r->fds[r->nfds++] = got[i];
            if (!bad)
                return true;
        }
    }
    if (!bad && h.kind == SB_KEEPER_EXEC && ngot == 0) {
        /* The binary at the path now (an upgrade); the child stays until we answer. */
        int32_t status = 0;
        if (!r->k || !r->k->exe || r->nfds == 0 || r->nfds != r->total)
            status = -EINVAL;
        else if (access(r->k->exe, X_OK) < 0)
            status = -errno;
        sb_keeper_reply(r->chan, status);
        if (status == 0)
            r->armed = true;
        else
            sb_keeper_drop(r);
        return true;
    }
    for (unsigned i = 0; i < ngot; i++)
        close(got[i]);
    sb_keeper_drop(r);
    sb_keeper_reply(r->chan, -EPROTO);
    return true;
}

/*
 * The child is gone after handing everything over: the fds move to numbers
 * above all of ours, base .. base + n - 1 in order, without close-on-exec,
 * and the new binary learns them from k->env_name ("BASE:N"). Returns only
 * when the exec failed.
 */
static void sb_keeper_exec(struct sb_keeper_run *r, int sfd, const sigset_t *mask)
{
    int top = r->chan > sfd ? r->chan : sfd;
    for (unsigned i = 0; i < r->nfds; i++)
        if (r->fds[i] > top)
            top = r->fds[i];
    int base = top + 1;
    for (unsigned i = 0; i < r->nfds; i++) {
        int nfd = fcntl(r->fds[i], F_DUPFD, base + (int)i);
        if (nfd != base + (int)i) {
            if (nfd >= 0)
                close(nfd);
            return;
        }
        close(r->fds[i]);
        r->fds[i] = nfd;
    }
    char val[32];
    snprintf(val, sizeof(val), "%d:%u", base, r->nfds);
    if (setenv(r->k->env_name, val, 1) < 0)
        return;
    close(r->chan);
    r->chan = -1;
    close(sfd);
    /* The new binary starts with the mask the daemon first started with. */
    sigprocmask(SIG_SETMASK, mask, NULL);
    execv(r->k->exe, r->k->argv);
    int e = errno;
    char msg[256];
    int len = snprintf(msg, sizeof(msg), "vufsd: restart: cannot run %s: %s\n", r->k->exe,
                       strerror(e));
    if (len > 0 && write(STDERR_FILENO, msg, (size_t)len) < 0)
        return;
}

/* Without signalfd: forward and wait (no handover possible). */
static int sb_keeper_wait_simple(pid_t child, const sigset_t *set)
{
    int code = -1;
    while (code < 0) {
        int status;
        pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child) {
            if (WIFEXITED(status))
                code = WEXITSTATUS(status);
            else if (WIFSIGNALED(status))
                code = 128 + WTERMSIG(status);
            continue; /* stopped/continued: keep waiting */
        }
        if (w < 0 && errno != EINTR) {
            code = 128 + SIGABRT; /* not our child: nothing sane left to forward to */
            continue;
        }
        siginfo_t si;
        int sig = sigwaitinfo(set, &si);
        if (sig > 0 && sig != SIGCHLD)
            kill(child, sig);
    }
    return code;
}

static bool sb_stopping(int sig)
{
    for (size_t i = 0; i < SB_NSTOPPING; i++)
        if (sb_forwarded[i] == sig && sig != SIGHUP)
            return true;
    return false;
}

int sb_keeper_wait(pid_t child, int chan, const struct sb_keeper *k, const sigset_t *exec_mask)
{
    sigset_t set, old;
    sb_forwarded_set(&set);
    sigaddset(&set, SIGCHLD);
    /* Blocked signals stay pending, even SIGCHLD whose default is to ignore it. */
    if (sigprocmask(SIG_BLOCK, &set, &old) < 0)
        return 128 + SIGABRT;

    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        if (chan >= 0)
            close(chan);
        int code = sb_keeper_wait_simple(child, &set);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return code;
    }
    struct sb_keeper_run r = {.k = k, .chan = chan};
    int code = -1;
    while (code < 0) {
        int status;
        pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child && (WIFEXITED(status) || WIFSIGNALED(status))) {
            code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (r.armed && !r.stop && code == 0) {
                sb_keeper_exec(&r, sfd, exec_mask ? exec_mask : &old);
                code = 1; /* the exec failed: the device is lost */
            }
            break;
        }
        if (w < 0 && errno != EINTR) {
            code = 128 + SIGABRT;
            break;
        }
        struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = r.chan, .events = POLLIN}};
        if (poll(p, r.chan >= 0 ? 2 : 1, -1) < 0)
            continue;
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo != SIGCHLD) {
                if (r.armed && sb_stopping((int)si.ssi_signo))
                    r.stop = true; /* stopped during a restart: no exec */
                kill(child, (int)si.ssi_signo);
            }
        }
        if (r.chan >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !sb_keeper_read(&r)) {
            close(r.chan); /* the child closed its end: it is on its way out */
            r.chan = -1;
        }
    }
    sb_keeper_drop(&r);
    if (r.chan >= 0)
        close(r.chan);
    close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return code;
}

int sb_pidns_parent_wait(pid_t child)
{
    return sb_keeper_wait(child, -1, NULL, NULL);
}

/* The fds a keeper handed this process (k->env_name), closed (the parent's copies). */
static void sb_handover_close(const char *env_name)
{
    int base;
    unsigned n;
    const char *v = env_name ? getenv(env_name) : NULL;
    if (!v || sscanf(v, "%d:%u", &base, &n) != 2 || base < 3 || n > SB_KEEPER_MAX_FDS)
        return;
    for (unsigned i = 0; i < n; i++)
        close(base + (int)i);
}

int sb_enter_keeper(const struct sb_keeper *k, int *chan_fd)
{
    if (chan_fd)
        *chan_fd = -1;
    if (k->new_pid_ns && unshare(CLONE_NEWPID) < 0) {
        /*
         * After a restart this process already made a pid namespace for its
         * children (that one died with the old daemon): point the next child
         * back at our own namespace first, then make a new one.
         */
        int e = errno;
        int nsfd = e == EINVAL ? open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC) : -1;
        if (nsfd < 0)
            return -e;
        int r = setns(nsfd, CLONE_NEWPID);
        close(nsfd);
        if (r < 0 || unshare(CLONE_NEWPID) < 0)
            return -e;
    }

    int sv[2] = {-1, -1};
    if (chan_fd && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;

    /* Block the forwarded signals across fork so none is lost before either
     * side has its handler or its wait in place. */
    sigset_t set, old;
    sb_forwarded_set(&set);
    if (sigprocmask(SIG_BLOCK, &set, &old) < 0) {
        int e = errno;
        if (sv[0] >= 0) {
            close(sv[0]);
            close(sv[1]);
        }
        return -e;
    }

    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (sv[0] >= 0) {
            close(sv[0]);
            close(sv[1]);
        }
        return -err;
    }
    if (pid == 0) {
        /* The parent is our link to the operator: if it dies, so do we. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (k->new_pid_ns) {
            struct sigaction sa = {.sa_handler = sb_pid1_signal};
            sigemptyset(&sa.sa_mask);
            /* SIGUSR1/2 get no handler yet: pid 1 ignores them until the daemon has one. */
            for (size_t i = 0; i < SB_NSTOPPING; i++)
                sigaction(sb_forwarded[i], &sa, NULL);
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (sv[0] >= 0) {
            close(sv[0]);
            *chan_fd = sv[1];
        }
        return 0;
    }

    if (sv[1] >= 0)
        close(sv[1]);
    sb_handover_close(k->env_name);
    /* _exit: the child owns every stdio buffer and atexit handler from here. */
    _exit(sb_keeper_wait(pid, sv[0], k, &old));
}

int sb_enter_pid_ns(void)
{
    static const struct sb_keeper k = {.new_pid_ns = true};
    return sb_enter_keeper(&k, NULL);
}

/* ---- The daemon's side of a handover ------------------------------------------------- */

static int sb_keeper_send(int chan, uint32_t kind, const int *fds, unsigned count, unsigned total)
{
    struct sb_keeper_hdr h = {.magic = SB_KEEPER_MAGIC, .kind = kind, .count = count,
                              .total = total};
    union {
        char buf[CMSG_SPACE(SB_KEEPER_BATCH * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (count) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(count * sizeof(int));
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(count * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, count * sizeof(int));
    }
    ssize_t n;
    do {
        n = sendmsg(chan, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(h) ? 0 : n < 0 ? -errno : -EIO;
}

int sb_keeper_handover(int chan, const int *fds, unsigned n, int timeout_ms)
{
    if (chan < 0)
        return -ENOTCONN;
    if (n == 0 || n > SB_KEEPER_MAX_FDS)
        return -EINVAL;
    for (unsigned off = 0; off < n; off += SB_KEEPER_BATCH) {
        unsigned count = n - off < SB_KEEPER_BATCH ? n - off : SB_KEEPER_BATCH;
        int ret = sb_keeper_send(chan, SB_KEEPER_FDS, fds + off, count, n);
        if (ret < 0)
            return ret;
    }
    int ret = sb_keeper_send(chan, SB_KEEPER_EXEC, NULL, 0, n);
    if (ret < 0)
        return ret;
    struct pollfd p = {.fd = chan, .events = POLLIN};
    int r;
    do {
        r = poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    if (r == 0)
        return -ETIMEDOUT;
    int32_t status;
    ssize_t got = recv(chan, &status, sizeof(status), 0);
    if (got != sizeof(status))
        return got < 0 ? -errno : -EPIPE;
    return status > 0 ? -EPROTO : status;
}

int sb_handover_take(const char *env_name, int **fds, unsigned *n)
{
    *fds = NULL;
    *n = 0;
    const char *v = getenv(env_name);
    if (!v)
        return 0;
    int base;
    unsigned cnt;
    char extra;
    if (sscanf(v, "%d:%u%c", &base, &cnt, &extra) != 2 || base < 3 || cnt == 0 ||
        cnt > SB_KEEPER_MAX_FDS || base > INT32_MAX - (int)cnt) {
        unsetenv(env_name);
        return -EINVAL;
    }
    int *f = calloc(cnt, sizeof(*f));
    if (!f)
        return -ENOMEM;
    for (unsigned i = 0; i < cnt; i++) {
        f[i] = base + (int)i;
        if (fcntl(f[i], F_SETFD, FD_CLOEXEC) < 0) {
            int e = errno;
            for (unsigned j = 0; j < cnt; j++)
                if (j != i)
                    close(base + (int)j);
            free(f);
            unsetenv(env_name);
            return -e;
        }
    }
    unsetenv(env_name);
    *fds = f;
    *n = cnt;
    return 1;
}

#if SB_SANITIZER
/*
 * Sanitizer builds only. LeakSanitizer's exit-time check lists /proc/PID/task,
 * which is gone once the root is the shared directory, and then dies with a
 * fatal error (exit status 1) that would hide the daemon's real status. After a
 * root switch the check is skipped, saying so on stderr; leak checks of the
 * daemon run with --sandbox none.
 */
static volatile int sb_root_switched;

int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    static const char msg[] = "sandbox: leak check skipped, /proc is not reachable after the "
                              "root switch (check leaks with --sandbox none)\n";
    if (!sb_root_switched)
        return 0;
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
        return 1;
    return 1;
}
#define SB_NOTE_ROOT_SWITCH() (sb_root_switched = 1)
#else
#define SB_NOTE_ROOT_SWITCH() ((void)0)
#endif

static int sb_open_proc_self_fd(void)
{
    int fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int sb_enter_chroot(const struct sb_config *cfg, int *proc_self_fd)
{
    _cleanup_close_ int proc_fd = sb_open_proc_self_fd();
    if (proc_fd < 0)
        return proc_fd;
    if (chdir(cfg->shared_dir) < 0)
        return -errno;
    if (chroot(".") < 0)
        return -errno;
    SB_NOTE_ROOT_SWITCH();
    if (chdir("/") < 0)
        return -errno;
    if (proc_self_fd)
        *proc_self_fd = TAKE_FD(proc_fd);
    return 0;
}

static int sb_enter_namespace(const struct sb_config *cfg, int *proc_self_fd)
{
    /* The shared directory exactly as the filesystem opened it: same mount (of
     * the original namespace; unshare copies every mount) and same dentry. */
    _cleanup_close_ int share_fd = open(cfg->shared_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (share_fd < 0)
        return -errno;

    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
        return -errno;

    /* Slave, not private: the host unmounting something still reaches us (a
     * busy mount is never pinned by the daemon), our mounts never reach it. */
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
        return -errno;

    /* A proc of our own pid namespace. Where that is refused (a container with
     * a masked /proc) the inherited one still serves /proc/self/fd. */
    (void)mount("proc", "/proc", "proc", MS_NODEV | MS_NOEXEC | MS_NOSUID, NULL);

    _cleanup_close_ int proc_fd = sb_open_proc_self_fd();
    if (proc_fd < 0)
        return proc_fd;

    if (mount(cfg->shared_dir, cfg->shared_dir, NULL, MS_BIND | MS_REC, NULL) < 0)
        return -errno;
    if (chdir(cfg->shared_dir) < 0)
        return -errno;
    /* pivot_root(".", "."): the old root ends up stacked on the new one, so no
     * directory has to be created inside the shared directory for it. */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return -errno;
    SB_NOTE_ROOT_SWITCH();
    if (umount2(".", MNT_DETACH) < 0)
        return -errno;
    /* The filesystem's fds were opened before the switch, on the original mount
     * of the shared directory, not on the bind that is now "/": '..' from them
     * would still climb into the (detached) host tree. Rooting the process at
     * that original directory makes '..' stop there for every one of them. */
    if (fchdir(share_fd) < 0 || chroot(".") < 0)
        return -errno;
    if (chdir("/") < 0)
        return -errno;

    if (proc_self_fd)
        *proc_self_fd = TAKE_FD(proc_fd);
    return 0;
}

int sb_enter(const struct sb_config *cfg, int *proc_self_fd)
{
    if (proc_self_fd)
        *proc_self_fd = -1;
    switch (cfg->mode) {
    case SB_MODE_NAMESPACE:
        if (!cfg->shared_dir || !*cfg->shared_dir)
            return -EINVAL;
        return sb_enter_namespace(cfg, proc_self_fd);
    case SB_MODE_CHROOT:
        if (!cfg->shared_dir || !*cfg->shared_dir)
            return -EINVAL;
        return sb_enter_chroot(cfg, proc_self_fd);
    case SB_MODE_NONE: {
        int fd = sb_open_proc_self_fd();
        if (fd < 0)
            return fd;
        if (proc_self_fd)
            *proc_self_fd = fd;
        else
            close(fd);
        return 0;
    }
    }
    return -EINVAL;
}
