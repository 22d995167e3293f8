/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * RLIMIT_NOFILE. The passthrough holds an fd per inode the guest looked up, so the
 * default limit is raised as far as the system allows (capped at a million). The
 * guest's budget below it is the daemon's rule, not this module's: a guest that
 * never sends FORGET runs into EMFILE for its own lookups while the daemon keeps
 * fds for its sockets, eventfds and memory regions (CVE-2020-10717).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "sandbox_i.h"

#define SB_NOFILE_CAP 1000000u

uint64_t sb_rlimit_default(uint64_t requested, uint64_t nr_open)
{
    if (requested)
        return requested;
    if (nr_open == 0 || nr_open > SB_NOFILE_CAP)
        return SB_NOFILE_CAP;
    return nr_open;
}

/* /proc/sys/fs/nr_open, or 0 when it cannot be read. */
static uint64_t sb_read_nr_open(void)
{
    _cleanup_close_ int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || end == buf)
        return 0;
    return v;
}

int sb_apply_rlimit(const struct sb_config *cfg, uint64_t *applied)
{
    struct rlimit cur;
    if (getrlimit(RLIMIT_NOFILE, &cur) < 0)
        return -errno;

    uint64_t want = sb_rlimit_default(cfg->rlimit_nofile, sb_read_nr_open());
    struct rlimit rl = {.rlim_cur = want, .rlim_max = want};
    /* Never lower a hard limit the operator gave us beyond what we use. */
    if (cur.rlim_max != RLIM_INFINITY && cur.rlim_max > want && cfg->rlimit_nofile == 0)
        rl.rlim_max = cur.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        int err = errno;
        /* Without CAP_SYS_RESOURCE the hard limit cannot grow. An explicit
         * request is an error; the default takes what the hard limit allows. */
        if (err != EPERM || cfg->rlimit_nofile != 0)
            return -err;
        rl.rlim_cur = cur.rlim_max;
        rl.rlim_max = cur.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            return -errno;
    }
    if (applied) {
        if (getrlimit(RLIMIT_NOFILE, &cur) < 0)
            return -errno;
        *applied = cur.rlim_cur;
    }
    return 0;
}
