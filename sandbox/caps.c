/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Capabilities and groups. The daemon keeps only what the passthrough needs to
 * act on files for every guest user, and no supplementary group: a group the
 * daemon happened to start with would leak into files the guest creates
 * (CVE-2022-0358: an SGID-root file created through a root-owned 03777 dir).
 */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <cap-ng.h>
#include <linux/capability.h>

#include "sandbox_i.h"

/* What the passthrough needs, and why. */
static const struct {
    int cap;
    unsigned features; /* 0 = always */
} sb_base_caps[] = {
    {CAP_CHOWN, 0},                              /* SETATTR uid/gid, creates as the guest user */
    {CAP_DAC_OVERRIDE, 0},                       /* access files whatever their mode (root guest) */
    {CAP_DAC_READ_SEARCH, SB_FEAT_FILE_HANDLES}, /* open_by_handle_at */
    {CAP_FOWNER, 0},                             /* utimes, chmod on files of other users */
    {CAP_FSETID, 0},                             /* keep SUID/SGID when the guest asks for it */
    {CAP_MKNOD, 0},                              /* FUSE_MKNOD of device nodes (never opened) */
    {CAP_SETFCAP, 0},                            /* security.capability xattrs */
    {CAP_SETGID, 0},                             /* switch to the caller's gid for creates */
    {CAP_SETUID, 0},                             /* switch to the caller's uid for creates */
};

int sb_cap_from_name(const char *name)
{
    if (!name || !*name)
        return -EINVAL;
    if (strncasecmp(name, "cap_", 4) == 0)
        name += 4;
    char lower[64];
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof(lower))
        return -EINVAL;
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    int cap = capng_name_to_capability(lower);
    if (cap < 0 || cap > CAP_LAST_CAP || cap >= 64)
        return -EINVAL;
    return cap;
}

/*
 * Applies "+a:-b:..." to *set. Empty items (a doubled ':') and items without a
 * sign are rejected, so a typo never silently keeps or drops a capability.
 */
static int sb_modcaps_apply(const char *modcaps, uint64_t *set)
{
    if (!modcaps)
        return 0;
    const char *p = modcaps;
    if (*p == '\0')
        return 0;
    for (;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len < 2 || (p[0] != '+' && p[0] != '-'))
            return -EINVAL;
        char name[64];
        if (len - 1 >= sizeof(name))
            return -EINVAL;
        memcpy(name, p + 1, len - 1);
        name[len - 1] = '\0';
        int cap = sb_cap_from_name(name);
        if (cap < 0)
            return cap;
        if (p[0] == '+')
            *set |= 1ull << cap;
        else
            *set &= ~(1ull << cap);
        if (!end)
            return 0;
        p = end + 1;
    }
}

int sb_caps_compute(unsigned features, const char *modcaps, uint64_t *out)
{
    uint64_t set = 0;
    for (size_t i = 0; i < sizeof(sb_base_caps) / sizeof(sb_base_caps[0]); i++) {
        if (sb_base_caps[i].features == 0 || (sb_base_caps[i].features & features))
            set |= 1ull << sb_base_caps[i].cap;
    }
    int r = sb_modcaps_apply(modcaps, &set);
    if (r < 0)
        return r;
    *out = set;
    return 0;
}

int sb_drop_caps(const struct sb_config *cfg)
{
    uint64_t keep;
    int r = sb_caps_compute(cfg->features, cfg->modcaps, &keep);
    if (r < 0)
        return r;

    capng_clear(CAPNG_SELECT_BOTH);
    r = capng_get_caps_process();
    if (r < 0)
        return -EIO;
    if (capng_have_capabilities(CAPNG_SELECT_CAPS) == CAPNG_NONE)
        return 0; /* unprivileged: nothing to drop, setgroups would fail */

    bool can_bound = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP);

    /* Groups first: dropping them needs CAP_SETGID, which may not be kept. */
    /* In a user namespace with setgroups denied nobody can change them: go on. */
    if (setgroups(0, NULL) < 0 && !(errno == EPERM && sb_setgroups_denied()))
        return -errno;

    capng_clear(CAPNG_SELECT_ALL);
    for (int cap = 0; cap <= CAP_LAST_CAP && cap < 64; cap++) {
        if (!(keep & (1ull << cap)))
            continue;
        if (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED, (unsigned)cap) < 0)
            return -EINVAL;
    }
    /* The bounding set is emptied too (CAPNG_SELECT_ALL: caps, bounds, ambient):
     * nothing can ever be regained through a file capability. That needs
     * CAP_SETPCAP; a container that withholds it keeps its bounding set, which
     * matters little as execve is never allowed and no_new_privs is set. */
    r = capng_apply(can_bound ? CAPNG_SELECT_ALL : (CAPNG_SELECT_CAPS | CAPNG_SELECT_AMBIENT));
    if (r < 0)
        return -EPERM;
    return 0;
}
