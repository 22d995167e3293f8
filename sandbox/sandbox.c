/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Sandbox settings: names, defaults, the refusal of unsafe combinations, the log line. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <linux/capability.h>
#include <cap-ng.h>

#include "sandbox_i.h"

static const char *const sb_mode_names[] = {
    [SB_MODE_NAMESPACE] = "namespace",
    [SB_MODE_CHROOT] = "chroot",
    [SB_MODE_NONE] = "none",
};

static const char *const sb_action_names[] = {
    [SB_SECCOMP_KILL] = "kill",
    [SB_SECCOMP_LOG] = "log",
    [SB_SECCOMP_TRAP] = "trap",
    [SB_SECCOMP_NONE] = "none",
};

static const char *const sb_feature_names[] = {
    "xattr", "locks", "dax", "syslog", "devfuse", "file-handles", "state",
};

#define SB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

enum sb_mode sb_default_mode(void)
{
    return geteuid() == 0 ? SB_MODE_NAMESPACE : SB_MODE_NONE;
}

static int sb_lookup(const char *const *names, size_t n, const char *s)
{
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (names[i] && strcmp(names[i], s) == 0)
            return (int)i;
    }
    return -EINVAL;
}

int sb_mode_parse(const char *s, enum sb_mode *out)
{
    int i = sb_lookup(sb_mode_names, SB_ARRAY_LEN(sb_mode_names), s);
    if (i < 0)
        return i;
    *out = (enum sb_mode)i;
    return 0;
}

int sb_seccomp_action_parse(const char *s, enum sb_seccomp_action *out)
{
    int i = sb_lookup(sb_action_names, SB_ARRAY_LEN(sb_action_names), s);
    if (i < 0)
        return i;
    *out = (enum sb_seccomp_action)i;
    return 0;
}

const char *sb_mode_name(enum sb_mode m)
{
    return (unsigned)m < SB_ARRAY_LEN(sb_mode_names) ? sb_mode_names[m] : "?";
}

const char *sb_seccomp_action_name(enum sb_seccomp_action a)
{
    return (unsigned)a < SB_ARRAY_LEN(sb_action_names) ? sb_action_names[a] : "?";
}

int sb_config_check(const struct sb_config *cfg, const char **msg)
{
    const char *dummy;
    if (!msg)
        msg = &dummy;
    *msg = NULL;

    if ((unsigned)cfg->mode >= SB_ARRAY_LEN(sb_mode_names)) {
        *msg = "unknown sandbox mode";
        return -EINVAL;
    }
    if ((unsigned)cfg->seccomp >= SB_ARRAY_LEN(sb_action_names)) {
        *msg = "unknown seccomp action";
        return -EINVAL;
    }
    if (cfg->features & ~(unsigned)SB_FEAT_ALL_) {
        *msg = "unknown sandbox feature bits";
        return -EINVAL;
    }
    if (cfg->mode != SB_MODE_NONE && (!cfg->shared_dir || !*cfg->shared_dir)) {
        *msg = "the sandbox needs the shared directory";
        return -EINVAL;
    }
    uint64_t caps;
    if (sb_caps_compute(cfg->features, cfg->modcaps, &caps) < 0) {
        *msg = "--modcaps: expected +name or -name items separated by ':', with known "
               "capability names";
        return -EINVAL;
    }
    if (cfg->mode == SB_MODE_NONE && cfg->seccomp == SB_SECCOMP_NONE && !cfg->unsafe_no_isolation) {
        *msg = "--sandbox none together with --seccomp none leaves the host unprotected "
               "from the guest; add the explicit unsafe switch to run like this";
        return -EPERM;
    }
    return 0;
}

/* Appends to buf at *len (snprintf style: *len may grow past size). */
__attribute__((format(printf, 4, 5))) static void sb_append(char *buf, size_t size, size_t *len,
                                                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = *len < size ? buf + *len : NULL;
    size_t room = *len < size ? size - *len : 0;
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

int sb_describe(const struct sb_config *cfg, char *buf, size_t size)
{
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    sb_append(buf, size, &len, "sandbox=%s seccomp=%s", sb_mode_name(cfg->mode),
              sb_seccomp_action_name(cfg->seccomp));

    sb_append(buf, size, &len, " features=");
    bool any = false;
    for (size_t i = 0; i < SB_ARRAY_LEN(sb_feature_names); i++) {
        if (cfg->features & (1u << i)) {
            sb_append(buf, size, &len, "%s%s", any ? "," : "", sb_feature_names[i]);
            any = true;
        }
    }
    if (!any)
        sb_append(buf, size, &len, "none");

    uint64_t caps;
    if (sb_caps_compute(cfg->features, cfg->modcaps, &caps) < 0) {
        sb_append(buf, size, &len, " caps=invalid");
    } else {
        sb_append(buf, size, &len, " caps=");
        any = false;
        for (int cap = 0; cap <= CAP_LAST_CAP && cap < 64; cap++) {
            if (!(caps & (1ull << cap)))
                continue;
            const char *name = capng_capability_to_name((unsigned)cap);
            if (name)
                sb_append(buf, size, &len, "%s%s", any ? "," : "", name);
            else
                sb_append(buf, size, &len, "%s%d", any ? "," : "", cap);
            any = true;
        }
        if (!any)
            sb_append(buf, size, &len, "none");
    }
    if (cfg->rlimit_nofile)
        sb_append(buf, size, &len, " nofile=%" PRIu64, cfg->rlimit_nofile);
    else
        sb_append(buf, size, &len, " nofile=default");
    if (cfg->mode == SB_MODE_NONE && cfg->seccomp == SB_SECCOMP_NONE)
        sb_append(buf, size, &len, " UNSAFE");
    return len > INT32_MAX ? INT32_MAX : (int)len;
}
