/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Private to sandbox/ and its unit tests. */
#ifndef VUFS_SANDBOX_I_H
#define VUFS_SANDBOX_I_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include "sandbox.h"
#include "vufs_util.h"

/* Built with AddressSanitizer / UndefinedBehaviorSanitizer (gcc or clang). */
#if defined(__SANITIZE_ADDRESS__)
#define SB_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SB_SANITIZER 1
#endif
#endif
#ifndef SB_SANITIZER
#define SB_SANITIZER 0
#endif

/* ---- The allowlist (seccomp_list.c) ----------------------------------------------- */

/* Argument restrictions a few entries carry; the rest are allowed outright. */
enum sb_arg_rule {
    SB_ARGS_ANY,          /* no restriction */
    SB_ARGS_CLONE_THREAD, /* clone: only with CLONE_THREAD (threads, no processes) */
    SB_ARGS_ENOSYS,       /* not allowed, fails with ENOSYS (clone3: glibc falls back) */
    SB_ARGS_PRCTL,        /* prctl: only the harmless options listed in seccomp.c */
    SB_ARGS_IOCTL,        /* ioctl: TCGETS (isatty) and, for /dev/fuse, its clone op */
    SB_ARGS_SOCKET_UNIX,  /* socket: AF_UNIX only */
};

struct sb_syscall {
    const char *name;  /* libseccomp name; skipped where the arch lacks it */
    unsigned features; /* 0 = always, else any of SB_FEAT_* (or SB_FEAT_SANITIZER_) */
    enum sb_arg_rule args;
    const char *reason;
};

/* Only in sanitizer builds: what the ASan/UBSan/LSan runtimes call. */
#define SB_FEAT_SANITIZER_ (1u << 31)

extern const struct sb_syscall sb_syscalls[];
extern const size_t sb_syscalls_len;

/* ---- Seccomp internals (seccomp.c) ------------------------------------------------- */

/*
 * The libseccomp action for a configured action at a given kernel API level
 * (seccomp_api_get()): KILL is KILL_PROCESS from level 3 on, TRAP before; LOG
 * needs level 3 (-EOPNOTSUPP before). NONE has no action (-EINVAL).
 */
int sb_seccomp_action_resolve(enum sb_seccomp_action a, unsigned api_level, uint32_t *out);

/* Like sb_seccomp_build() at a given API level (tests exercise the fallback). */
int sb_seccomp_build_api(const struct sb_config *cfg, unsigned api_level, scmp_filter_ctx *out);

/* ---- Namespaces (ns.c) -------------------------------------------------------------- */

/*
 * The pid namespace parent's loop, separated so tests can run it: forwards
 * SIGTERM/SIGINT/SIGHUP to child, waits for it, and returns the exit status
 * to exit with (128+signo if it was killed by a signal).
 */
int sb_pidns_parent_wait(pid_t child);
/* The same with a handover channel (chan -1: none), what a handover runs, and
 * the signal mask it runs with (NULL: the caller's). */
int sb_keeper_wait(pid_t child, int chan, const struct sb_keeper *k, const sigset_t *exec_mask);

/* ---- Capabilities (caps.c) ----------------------------------------------------------- */

/* "chown" or "cap_chown" (any case) to a capability number; -EINVAL if unknown. */
int sb_cap_from_name(const char *name);

#endif
