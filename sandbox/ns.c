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
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "sandbox_i.h"

/* The signals the pid namespace parent forwards to the daemon; the first
 * SB_NSTOPPING end it (SIGUSR1 asks for statistics). */
static const int sb_forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
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

int sb_pidns_parent_wait(pid_t child)
{
    sigset_t set, old;
    sb_forwarded_set(&set);
    sigaddset(&set, SIGCHLD);
    /* Blocked signals stay pending, even SIGCHLD whose default is to ignore it. */
    if (sigprocmask(SIG_BLOCK, &set, &old) < 0)
        return 128 + SIGABRT;

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
        int sig = sigwaitinfo(&set, &si);
        if (sig > 0 && sig != SIGCHLD)
            kill(child, sig);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return code;
}

int sb_enter_pid_ns(void)
{
    if (unshare(CLONE_NEWPID) < 0)
        return -errno;

    /* Block the forwarded signals across fork so none is lost before either
     * side has its handler or sigwaitinfo() in place. */
    sigset_t set, old;
    sb_forwarded_set(&set);
    if (sigprocmask(SIG_BLOCK, &set, &old) < 0)
        return -errno;

    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        return -err;
    }
    if (pid == 0) {
        /* The parent is our link to the operator: if it dies, so do we. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct sigaction sa = {.sa_handler = sb_pid1_signal};
        sigemptyset(&sa.sa_mask);
        /* SIGUSR1 gets no handler yet: pid 1 ignores it until the daemon has one. */
        for (size_t i = 0; i < SB_NSTOPPING; i++)
            sigaction(sb_forwarded[i], &sa, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return 0;
    }

    /* _exit: the child owns every stdio buffer and atexit handler from here. */
    _exit(sb_pidns_parent_wait(pid));
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
