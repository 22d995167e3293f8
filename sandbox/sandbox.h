/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sb: the daemon's sandbox. Namespaces or chroot, capabilities, seccomp, rlimits.
 *
 * Threat model: the guest is untrusted; the frontend (QEMU) and the operator are
 * trusted. Everything here narrows what a daemon that a guest managed to confuse
 * can still do: see the repository's docs/security.md.
 *
 * Every function returns 0 or a negative errno and never exits, so the daemon
 * decides how to log and cmocka tests can check each step in a child process.
 * The module logs nothing (see sb_describe() for the one line main logs).
 *
 * Call order, from main() (single threaded until the last step is done, because
 * unshare(CLONE_NEWNS), capabilities and setgroups are per thread or refuse a
 * shared fs_struct):
 *
 *   sb_enter_user_ns()       --uid-map/--gid-map only, first: a user namespace
 *   sb_enter_pid_ns()        namespace mode only, as early as possible: forks;
 *                            the parent waits and forwards signals and the exit
 *                            status, only the child returns (as pid 1)
 *   ... parse, open the shared directory, create the listening socket ...
 *   sb_config_check()        refuses --sandbox none + --seccomp none without the
 *                            unsafe switch
 *   sb_apply_rlimit()        RLIMIT_NOFILE
 *   sb_enter()               mount/net/ipc/uts namespaces + pivot_root, or chroot
 *   sb_drop_caps()           supplementary groups, capability sets, bounding set
 *   sb_seccomp_load()        the syscall allowlist (all threads, TSYNC)
 *   ... first guest request ...
 *
 * Files: sandbox.c (config, checks, description), rlimit.c, ns.c (pid namespace,
 * mount namespace, chroot), caps.c (libcap-ng), seccomp.c (libseccomp filter
 * construction and loading), seccomp_list.c (the allowlists, one reason each).
 */
#ifndef VUFS_SANDBOX_H
#define VUFS_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <seccomp.h>

enum sb_mode {
    SB_MODE_NAMESPACE, /* new mount, pid, net, ipc, uts namespaces + pivot_root */
    SB_MODE_CHROOT,    /* chroot into the shared directory (containers) */
    SB_MODE_NONE,      /* no filesystem isolation: main warns */
};

enum sb_seccomp_action {
    SB_SECCOMP_KILL, /* kill the whole process (TRAP where the kernel lacks it) */
    SB_SECCOMP_LOG,  /* allow, but the kernel logs the syscall (audit) */
    SB_SECCOMP_TRAP, /* SIGSYS to the thread: a handler can report it */
    SB_SECCOMP_NONE, /* no filter */
};

/* Per-feature additions to the syscall allowlist. */
enum {
    SB_FEAT_XATTR = 1u << 0,        /* get/set/list/removexattr */
    SB_FEAT_LOCKS = 1u << 1,        /* flock (POSIX/OFD locks go through fcntl) */
    SB_FEAT_DAX = 1u << 2,          /* the DAX window: needs nothing beyond the base list
                                     * (openat via /proc/self/fd, sendmsg with an fd) */
    SB_FEAT_SYSLOG = 1u << 3,       /* an AF_UNIX datagram socket to /dev/log */
    SB_FEAT_DEVFUSE = 1u << 4,      /* the /dev/fuse transport (splice, unmount) */
    SB_FEAT_FILE_HANDLES = 1u << 5, /* name_to_handle_at/open_by_handle_at */
    SB_FEAT_STATE = 1u << 6,        /* saved states: a sealed memfd for a restart,
                                     * file handles naming inodes (name_to_handle_at) */
    SB_FEAT_ALL_ = (1u << 7) - 1,
};

struct sb_config {
    enum sb_mode mode;
    const char *shared_dir; /* absolute or relative host path */
    enum sb_seccomp_action seccomp;
    unsigned features;        /* SB_FEAT_* */
    const char *modcaps;      /* "+cap:-cap", NULL or "" for none */
    uint64_t rlimit_nofile;   /* 0 = default (see sb_rlimit_default) */
    bool unsafe_no_isolation; /* allows mode NONE with seccomp NONE */
};

/* ---- Configuration --------------------------------------------------------------- */

/* NAMESPACE when running as root (euid 0), else NONE. */
enum sb_mode sb_default_mode(void);

/* "namespace"/"chroot"/"none" and "kill"/"log"/"trap"/"none"; -EINVAL if unknown. */
int sb_mode_parse(const char *s, enum sb_mode *out);
int sb_seccomp_action_parse(const char *s, enum sb_seccomp_action *out);
const char *sb_mode_name(enum sb_mode m);
const char *sb_seccomp_action_name(enum sb_seccomp_action a);

/*
 * Refuses dangerous or inconsistent settings before anything is applied:
 * -EPERM for mode NONE + seccomp NONE without unsafe_no_isolation, -EINVAL for a
 * missing shared_dir (namespace/chroot), bad modcaps or unknown features.
 * *msg (if msg is given) points to a static sentence saying why; NULL on success.
 */
int sb_config_check(const struct sb_config *cfg, const char **msg);

/*
 * The effective security settings as one log line, e.g.
 * "sandbox=namespace seccomp=kill features=xattr,locks caps=chown,... nofile=1000000".
 * Returns the length snprintf would have written (the line is truncated to size).
 */
int sb_describe(const struct sb_config *cfg, char *buf, size_t size);

/* ---- Resource limits ------------------------------------------------------------- */

/*
 * The RLIMIT_NOFILE to ask for: requested if non-zero, else
 * min(1,000,000, nr_open). nr_open is /proc/sys/fs/nr_open (0 = unknown).
 */
uint64_t sb_rlimit_default(uint64_t requested, uint64_t nr_open);

/*
 * Sets RLIMIT_NOFILE (soft and hard) to sb_rlimit_default(cfg->rlimit_nofile,
 * nr_open). Without CAP_SYS_RESOURCE the hard limit cannot grow: an explicit
 * request above it fails with -EPERM, the default settles for the hard limit.
 * *applied (optional) receives the soft limit in force afterwards.
 */
int sb_apply_rlimit(const struct sb_config *cfg, uint64_t *applied);

/* ---- User namespace (--uid-map / --gid-map) ----------------------------------------- */

/* One range of a uid_map or gid_map: [inside, inside+count) = host [outside, ...). */
struct sb_idmap_line {
    uint32_t inside, outside, count;
};
#define SB_IDMAP_MAX 16

/*
 * Parses space-separated ":INSIDE:OUTSIDE:COUNT:" ranges (the Rust virtiofsd's
 * --uid-map form; repeated options arrive joined with spaces) into out.
 * NULL is no range. -EINVAL on syntax, COUNT 0 or a range past 2^32 - 2 (the
 * kernel never maps (uid_t)-1); -E2BIG past max.
 */
int sb_idmap_parse(const char *spec, struct sb_idmap_line *out, unsigned max, unsigned *n);

/*
 * Called first, single threaded, when --uid-map or --gid-map is given: a new
 * user namespace with those maps (a missing one maps the caller's own id
 * once), written from outside by a helper process (directly, or with
 * newuidmap/newgidmap where the kernel requires them), then uid and gid 0
 * inside it. 0 (with *msg set to a warning when 0 is not mapped), or -errno
 * with *msg saying what failed. Steps and rules: userns.c.
 */
int sb_enter_user_ns(const char *uid_map, const char *gid_map, const char **msg);

/* Whether sb_enter_user_ns() left setgroups(2) forbidden ("deny"): nobody can
 * change the supplementary groups then, so there is nothing to drop. */
bool sb_setgroups_denied(void);

/* ---- Namespaces and chroot ---------------------------------------------------------- */

/*
 * Namespace mode, called early and single threaded: unshare(CLONE_NEWPID) and
 * fork. Returns 0 in the child, which is pid 1 of the new namespace (SIGTERM,
 * SIGINT and SIGHUP are given a handler that exits 128+signo until the daemon
 * installs its own, since pid 1 ignores signals without a handler). The parent
 * never returns: it forwards SIGTERM/SIGINT/SIGHUP to the child, waits, and exits
 * with the child's status. Returns -errno (no fork happened) on failure.
 */
int sb_enter_pid_ns(void);

/*
 * The keeper: a parent process that stays outside every sandbox for the
 * daemon's life, forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to it,
 * exits with its status, and can run a new binary in its place (a restart or
 * an upgrade under a running guest) without the daemon ever gaining execve:
 *
 *   daemon (child, sandboxed)                keeper (parent, pid file names it)
 *     sb_keeper_handover(fds) -------------->  holds the fds, checks k->exe
 *     <-------------------------------- 0 (accepted) or -errno (refused)
 *     _exit(0) when accepted                 waits for the child to be gone,
 *                                            moves the fds to BASE..BASE+N-1,
 *                                            sets k->env_name to "BASE:N" and
 *                                            execs k->exe with k->argv (same pid)
 *   new binary: sb_enter_keeper again (the parent's copies of the fds are
 *   closed there), then sb_handover_take in the child.
 *
 * A stopping signal (SIGTERM, SIGINT) that comes while a handover is under way
 * wins: the keeper exits instead of running the new binary.
 */
#define SB_KEEPER_MAX_FDS (1u << 22)

struct sb_keeper {
    bool new_pid_ns;      /* unshare(CLONE_NEWPID) first (namespace mode) */
    const char *exe;      /* the binary a handover runs; NULL: no handover */
    char *const *argv;    /* its arguments */
    const char *env_name; /* the environment variable naming the handed-over fds */
};

/*
 * Forks the keeper (with a new pid namespace for k->new_pid_ns, as
 * sb_enter_pid_ns). Returns 0 in the child with *chan_fd (if chan_fd is
 * given) the channel sb_keeper_handover uses; the parent never returns.
 * -errno (no fork happened) on failure.
 */
int sb_enter_keeper(const struct sb_keeper *k, int *chan_fd);

/*
 * Child side: hands fds[0..n) to the keeper (it keeps its own copies; the
 * caller's stay open) and asks it to run its binary. 0 when the keeper
 * accepted: the caller must _exit(0) at once, without touching anything it
 * shares with the next process. -errno when it refused (its binary is not
 * executable) or did not answer within timeout_ms: the caller goes on.
 */
int sb_keeper_handover(int chan_fd, const int *fds, unsigned n, int timeout_ms);

/*
 * The new process: the fds a handover brought (named in env_name, which is
 * then removed), close-on-exec from now on. 1 with *fds (malloc'ed) and *n,
 * 0 when this process did not come from a handover, -errno when the variable
 * is malformed or an fd is missing.
 */
int sb_handover_take(const char *env_name, int **fds, unsigned *n);

/*
 * Mode NAMESPACE: new mount, net, ipc and uts namespaces, all mounts MS_SLAVE,
 * a fresh proc (when in a new pid namespace), pivot_root into cfg->shared_dir,
 * the old root detached, and the process root pinned to cfg->shared_dir as it
 * was before the switch, so '..' from fds the filesystem opened earlier stops at
 * the share too. Mode CHROOT: chroot into cfg->shared_dir. Mode NONE: nothing.
 * The working directory is the new root afterwards. On failure the process is
 * left half-way and should exit.
 *
 * *proc_self_fd (optional) receives an O_PATH fd on /proc/self/fd (opened in
 * every mode, before the host's tree goes away), so the passthrough can reopen
 * its O_PATH fds through it after the switch. The caller owns and closes it.
 */
int sb_enter(const struct sb_config *cfg, int *proc_self_fd);

/* ---- Capabilities -------------------------------------------------------------------- */

/*
 * The capability set to keep: the passthrough's base set (CHOWN, DAC_OVERRIDE,
 * FOWNER, FSETID, SETGID, SETUID, MKNOD, SETFCAP; DAC_READ_SEARCH with
 * SB_FEAT_FILE_HANDLES) adjusted by modcaps ("+sys_admin:-mknod", names with or
 * without "cap_", any case). Bits are capability numbers. -EINVAL on a bad list.
 */
int sb_caps_compute(unsigned features, const char *modcaps, uint64_t *out);

/*
 * Drops every supplementary group, then keeps exactly sb_caps_compute() in the
 * effective and permitted sets (none inheritable or ambient) and clears the
 * bounding set. A no-op returning 0 when the process has no capabilities at all
 * (an unprivileged daemon). Per thread: call before any thread exists.
 */
int sb_drop_caps(const struct sb_config *cfg);

/* ---- Seccomp ---------------------------------------------------------------------------- */

/*
 * Builds (does not load) the filter for cfg->seccomp and cfg->features into *out
 * (release with seccomp_release). *out is NULL for SB_SECCOMP_NONE.
 */
int sb_seccomp_build(const struct sb_config *cfg, scmp_filter_ctx *out);

/* Builds and loads the filter (no_new_privs, synchronised to all threads). */
int sb_seccomp_load(const struct sb_config *cfg);

/* The number of allowlist entries for features (for logs and tests). */
size_t sb_seccomp_allowlist_len(unsigned features);

#endif
