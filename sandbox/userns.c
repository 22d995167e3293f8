/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * --uid-map / --gid-map: a user namespace for the daemon, as the Rust
 * virtiofsd sets one up, so vufsd can run without host root.
 *
 * Each map is one or more ":INSIDE:OUTSIDE:COUNT:" ranges: ids
 * [INSIDE, INSIDE+COUNT) inside the namespace are the host's
 * [OUTSIDE, OUTSIDE+COUNT). A map not given is the caller's own id, once.
 *
 * Steps (single threaded, before the pid namespace and everything else):
 *
 *   vufsd (host uid U)
 *     | fork a helper, then unshare(CLONE_NEWUSER)
 *     |     helper: waits for the unshare, then writes the parent's maps from
 *     |     outside: /proc/PID/{uid_map,gid_map} itself when the kernel lets it
 *     |     (host root; or an unprivileged user mapping only its own ids, once,
 *     |     after "deny" to /proc/PID/setgroups), else newuidmap(1) and
 *     |     newgidmap(1), which check /etc/subuid and /etc/subgid
 *     | wait for the helper
 *     v setresgid(0)/setresuid(0): root inside the namespace (if 0 is mapped),
 *       with every capability over what the namespace owns: the pid, mount and
 *       network namespaces made next, and files of mapped owners.
 *
 * Files of unmapped host owners show as the overflow ids (65534) and cannot
 * be given away or have their ownership changed: the host enforces the map.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "sandbox_i.h"

static bool sb_read_setgroups_denied(void);
/* Read once by sb_enter_user_ns(), while /proc is still the host's. */
static bool sb_groups_denied;

int sb_idmap_parse(const char *spec, struct sb_idmap_line *out, unsigned max, unsigned *n)
{
    *n = 0;
    if (!spec)
        return 0;
    for (const char *p = spec; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        /* One ":a:b:c:" token: 3 decimal fields between 4 colons. */
        uint64_t f[3];
        if (*p++ != ':')
            return -EINVAL;
        for (int k = 0; k < 3; k++) {
            const char *start = p;
            uint64_t v = 0;
            while (*p >= '0' && *p <= '9' && p - start < 11)
                v = v * 10 + (uint64_t)(*p++ - '0');
            if (p == start || *p != ':' || v > UINT32_MAX)
                return -EINVAL;
            p++;
            f[k] = v;
        }
        if (*p != '\0' && *p != ' ')
            return -EINVAL;
        /* As the kernel's map_write(): ranges end at or before 2^32 - 1 ((uid_t)-1). */
        if (f[2] == 0 || f[0] + f[2] > UINT32_MAX || f[1] + f[2] > UINT32_MAX)
            return -EINVAL;
        if (*n == max)
            return -E2BIG;
        out[*n] = (struct sb_idmap_line){(uint32_t)f[0], (uint32_t)f[1], (uint32_t)f[2]};
        (*n)++;
    }
    return 0;
}

/* The kernel's text form: "inside outside count\n" per line. */
static size_t sb_idmap_text(const struct sb_idmap_line *l, unsigned n, char *buf, size_t size)
{
    size_t len = 0;
    for (unsigned k = 0; k < n && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%u %u %u\n", l[k].inside, l[k].outside,
                                l[k].count);
    return len < size ? len : size;
}

static int sb_write_file(const char *path, const char *text, size_t len)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, text, len);
    if (w < 0)
        return -errno;
    return (size_t)w == len ? 0 : -EIO;
}

/* newuidmap/newgidmap PID inside outside count ...: 0, or -errno / -EPERM. */
static int sb_run_newidmap(const char *tool, pid_t pid, const struct sb_idmap_line *l, unsigned n)
{
    char *argv[2 + 3 * SB_IDMAP_MAX + 1];
    char nums[1 + 3 * SB_IDMAP_MAX][16];
    unsigned a = 0;

    argv[a++] = (char *)tool;
    snprintf(nums[0], sizeof(nums[0]), "%d", (int)pid);
    argv[a++] = nums[0];
    for (unsigned k = 0; k < n; k++) {
        uint32_t v[3] = {l[k].inside, l[k].outside, l[k].count};
        for (int j = 0; j < 3; j++) {
            char *s = nums[1 + 3 * k + (unsigned)j];
            snprintf(s, 16, "%u", v[j]);
            argv[a++] = s;
        }
    }
    argv[a] = NULL;
    pid_t c = fork();
    if (c < 0)
        return -errno;
    if (c == 0) {
        execvp(tool, argv);
        _exit(127);
    }
    int st;
    while (waitpid(c, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return -ENOENT;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

/* What the helper reports back through the pipe: 0, or which step failed. */
enum sb_map_step {
    SB_MAP_OK,
    SB_MAP_SETGROUPS,
    SB_MAP_WRITE_UID,
    SB_MAP_WRITE_GID,
    SB_MAP_NO_NEWUIDMAP,
    SB_MAP_NO_NEWGIDMAP,
    SB_MAP_NEWUIDMAP,
    SB_MAP_NEWGIDMAP,
};

static const char *const sb_map_msg[] = {
    [SB_MAP_OK] = NULL,
    [SB_MAP_SETGROUPS] = "cannot write setgroups of the user namespace",
    [SB_MAP_WRITE_UID] = "cannot write uid_map",
    [SB_MAP_WRITE_GID] = "cannot write gid_map",
    [SB_MAP_NO_NEWUIDMAP] = "newuidmap(1) is needed for this --uid-map and was not found",
    [SB_MAP_NO_NEWGIDMAP] = "newgidmap(1) is needed for this --gid-map and was not found",
    [SB_MAP_NEWUIDMAP] = "newuidmap(1) refused the --uid-map (see /etc/subuid)",
    [SB_MAP_NEWGIDMAP] = "newgidmap(1) refused the --gid-map (see /etc/subgid)",
};

struct sb_map_result {
    int err;  /* 0 or -errno */
    int step; /* enum sb_map_step */
};

/*
 * One map for pid, from outside its namespace. Directly when allowed: as host
 * root (CAP_SETUID/CAP_SETGID over the parent namespace), or a single line
 * mapping the writer's own id once; else through the setuid helper.
 */
static struct sb_map_result sb_write_map(pid_t pid, bool gid, const struct sb_idmap_line *l,
                                         unsigned n, uint32_t own)
{
    char path[64], text[SB_IDMAP_MAX * 40];
    bool direct = geteuid() == 0 || (n == 1 && l[0].outside == own && l[0].count == 1);

    if (direct) {
        if (gid && geteuid() != 0) {
            /* An unprivileged gid_map needs setgroups denied first. */
            snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
            int r = sb_write_file(path, "deny", 4);
            if (r < 0)
                return (struct sb_map_result){r, SB_MAP_SETGROUPS};
        }
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, gid ? "gid_map" : "uid_map");
        int r = sb_write_file(path, text, sb_idmap_text(l, n, text, sizeof(text)));
        return (struct sb_map_result){r, r == 0 ? SB_MAP_OK
                                         : gid  ? SB_MAP_WRITE_GID
                                                : SB_MAP_WRITE_UID};
    }
    int r = sb_run_newidmap(gid ? "newgidmap" : "newuidmap", pid, l, n);
    if (r == -ENOENT)
        return (struct sb_map_result){r, gid ? SB_MAP_NO_NEWGIDMAP : SB_MAP_NO_NEWUIDMAP};
    if (r < 0)
        return (struct sb_map_result){r, gid ? SB_MAP_NEWGIDMAP : SB_MAP_NEWUIDMAP};
    return (struct sb_map_result){0, SB_MAP_OK};
}

int sb_enter_user_ns(const char *uid_map, const char *gid_map, const char **msg)
{
    struct sb_idmap_line um[SB_IDMAP_MAX], gm[SB_IDMAP_MAX];
    unsigned nu, ng;
    int go[2], done[2];
    static const char *no_msg;

    if (!msg)
        msg = &no_msg;
    *msg = NULL;
    if (sb_idmap_parse(uid_map, um, SB_IDMAP_MAX, &nu) < 0 ||
        sb_idmap_parse(gid_map, gm, SB_IDMAP_MAX, &ng) < 0) {
        *msg = "a map is ':INSIDE:OUTSIDE:COUNT:' (decimal ids, COUNT > 0), at most "
               "16 of them";
        return -EINVAL;
    }
    uid_t euid = geteuid();
    gid_t egid = getegid();
    if (nu == 0)
        um[nu++] = (struct sb_idmap_line){euid, euid, 1};
    if (ng == 0)
        gm[ng++] = (struct sb_idmap_line){egid, egid, 1};

    if (pipe2(go, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(done, O_CLOEXEC) < 0) {
        int err = -errno;
        close(go[0]);
        close(go[1]);
        return err;
    }
    pid_t parent = getpid();
    pid_t helper = fork();
    if (helper < 0) {
        int err = -errno;
        close(go[0]);
        close(go[1]);
        close(done[0]);
        close(done[1]);
        return err;
    }
    if (helper == 0) {
        char c;
        close(go[1]);
        close(done[0]);
        /* Wait for the unshare (or the parent's failure: EOF). */
        if (read(go[0], &c, 1) != 1)
            _exit(1);
        struct sb_map_result res = sb_write_map(parent, false, um, nu, euid);
        if (res.err == 0)
            res = sb_write_map(parent, true, gm, ng, egid);
        _exit(write(done[1], &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1);
    }
    close(go[0]);
    close(done[1]);
    int ret = 0;
    char c = 'G';
    struct sb_map_result res = {-EPIPE, SB_MAP_OK};
    if (unshare(CLONE_NEWUSER) < 0) {
        ret = -errno;
        *msg = "cannot create a user namespace";
    } else if (write(go[1], &c, 1) != 1 || read(done[0], &res, sizeof(res)) != sizeof(res) ||
               res.err != 0) {
        ret = res.err < 0 ? res.err : -EIO;
        *msg = res.step > SB_MAP_OK && res.step <= SB_MAP_NEWGIDMAP
                   ? sb_map_msg[res.step]
                   : "the helper writing the id maps failed";
    }
    close(go[1]);
    close(done[0]);
    int st;
    while (waitpid(helper, &st, 0) < 0 && errno == EINTR)
        ;
    if (ret < 0)
        return ret;
    sb_groups_denied = sb_read_setgroups_denied();
    /*
     * Root inside, with the namespace's full capability set. Raw syscalls for
     * this thread only (there is no other thread yet, but glibc's wrappers
     * would signal every thread). Not fatal when 0 is not mapped: the daemon
     * then runs as the mapped ids, without capabilities.
     */
    if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
        *msg = "0 is not mapped: the daemon runs without capabilities in its namespace";
    return 0;
}

static bool sb_read_setgroups_denied(void)
{
    char buf[8] = "";
    _cleanup_close_ int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    return n >= 4 && strncmp(buf, "deny", 4) == 0;
}

bool sb_setgroups_denied(void)
{
    return sb_groups_denied;
}
