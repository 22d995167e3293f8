/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Seccomp: builds the libseccomp filter from the allowlist in seccomp_list.c and
 * loads it. The default action is the configured one; listed syscalls are
 * allowed (some with argument checks), everything else is killed, logged or
 * trapped. Syscalls of a foreign architecture (i386/x32 on x86_64) get the same
 * action: the filter only lists the native ABI.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <linux/fuse.h>

#include "sandbox_i.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif

/* prctl options allowed: each harmless to the host. */
static const unsigned long sb_prctl_allowed[] = {
    PR_GET_DUMPABLE, /* sanitizer runtime, core dump checks */
    PR_GET_NAME,     /* pthread_getname_np */
    PR_SET_NAME,     /* pthread_setname_np: worker names in logs and top */
    PR_SET_VMA,      /* glibc naming its anonymous mappings */
};

/* prctl options only a sanitizer build needs. */
static const unsigned long sb_prctl_sanitizer[] = {
    PR_SET_DUMPABLE,  /* LeakSanitizer makes the process traceable for its check */
    PR_SET_PDEATHSIG, /* its tracer task dies with us */
    PR_SET_PTRACER,   /* and is allowed to attach */
};

static void sb_filter_releasep(scmp_filter_ctx *ctx)
{
    if (*ctx)
        seccomp_release(*ctx);
}
#define _sb_cleanup_filter_ __attribute__((cleanup(sb_filter_releasep)))

int sb_seccomp_action_resolve(enum sb_seccomp_action a, unsigned api_level, uint32_t *out)
{
    switch (a) {
    case SB_SECCOMP_KILL:
        /* SECCOMP_RET_KILL_PROCESS arrived in Linux 4.14 (API level 3); before it
         * only the thread would die and the daemon would limp on: trap instead. */
        *out = api_level >= 3 ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_TRAP;
        return 0;
    case SB_SECCOMP_LOG:
        if (api_level < 3)
            return -EOPNOTSUPP;
        *out = SCMP_ACT_LOG;
        return 0;
    case SB_SECCOMP_TRAP:
        *out = SCMP_ACT_TRAP;
        return 0;
    case SB_SECCOMP_NONE:
        break;
    }
    return -EINVAL;
}

static bool sb_entry_wanted(const struct sb_syscall *s, unsigned features)
{
    if (s->features == 0)
        return true;
    if (s->features & SB_FEAT_SANITIZER_)
        return SB_SANITIZER;
    return (s->features & features) != 0;
}

static int sb_add_values(scmp_filter_ctx ctx, int nr, unsigned arg, const unsigned long *v,
                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                 SCMP_CMP(arg, SCMP_CMP_EQ, (scmp_datum_t)v[i]));
        if (r < 0)
            return r;
    }
    return 0;
}

static int sb_add_entry(scmp_filter_ctx ctx, const struct sb_syscall *s, unsigned features)
{
    int nr = seccomp_syscall_resolve_name(s->name);
    if (nr == __NR_SCMP_ERROR || nr < 0)
        return 0; /* this architecture has no such syscall */

    switch (s->args) {
    case SB_ARGS_ANY:
        return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    case SB_ARGS_CLONE_THREAD:
        if (SB_SANITIZER)
            return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
            /* The flags are the first argument on every architecture vufsd builds
             * for (x86_64, aarch64, ppc64le, s390x has them second: handled below). */
#if defined(__s390x__)
        return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                SCMP_A1(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
#else
        return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
#endif
    case SB_ARGS_ENOSYS:
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
    case SB_ARGS_PRCTL: {
        int r = sb_add_values(ctx, nr, 0, sb_prctl_allowed,
                              sizeof(sb_prctl_allowed) / sizeof(sb_prctl_allowed[0]));
        if (r == 0 && SB_SANITIZER)
            r = sb_add_values(ctx, nr, 0, sb_prctl_sanitizer,
                              sizeof(sb_prctl_sanitizer) / sizeof(sb_prctl_sanitizer[0]));
        return r;
    }
    case SB_ARGS_IOCTL: {
        unsigned long cmds[2] = {TCGETS, FUSE_DEV_IOC_CLONE};
        size_t n = (features & SB_FEAT_DEVFUSE) ? 2 : 1;
        return sb_add_values(ctx, nr, 1, cmds, n);
    }
    case SB_ARGS_SOCKET_UNIX: {
        unsigned long fam[1] = {AF_UNIX};
        return sb_add_values(ctx, nr, 0, fam, 1);
    }
    }
    return -EINVAL;
}

int sb_seccomp_build_api(const struct sb_config *cfg, unsigned api_level, scmp_filter_ctx *out)
{
    *out = NULL;
    if (cfg->features & ~(unsigned)SB_FEAT_ALL_)
        return -EINVAL;
    if (cfg->seccomp == SB_SECCOMP_NONE)
        return 0;

    uint32_t action;
    int r = sb_seccomp_action_resolve(cfg->seccomp, api_level, &action);
    if (r < 0)
        return r;

    _sb_cleanup_filter_ scmp_filter_ctx ctx = seccomp_init(action);
    if (!ctx)
        return -ENOMEM;
    /* Wrong-architecture syscalls (int 0x80 on x86_64) get the same treatment. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, action);
    if (r < 0)
        return r;
    /* Load into every thread at once; a thread left unfiltered defeats it. */
    if (api_level >= 2) {
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        if (r < 0)
            return r;
    }

    for (size_t i = 0; i < sb_syscalls_len; i++) {
        if (!sb_entry_wanted(&sb_syscalls[i], cfg->features))
            continue;
        r = sb_add_entry(ctx, &sb_syscalls[i], cfg->features);
        if (r < 0)
            return r;
    }

    *out = ctx;
    ctx = NULL;
    return 0;
}

int sb_seccomp_build(const struct sb_config *cfg, scmp_filter_ctx *out)
{
    return sb_seccomp_build_api(cfg, seccomp_api_get(), out);
}

int sb_seccomp_load(const struct sb_config *cfg)
{
    _sb_cleanup_filter_ scmp_filter_ctx ctx = NULL;
    int r = sb_seccomp_build(cfg, &ctx);
    if (r < 0 || !ctx)
        return r;
    r = seccomp_load(ctx);
    return r < 0 ? r : 0;
}
