/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Lock checks: POSIX record locks between two processes (F_SETLK conflict,
 * F_GETLK naming the holder, F_SETLKW waiting for the release) and flock.
 *
 * The processes talk through pipes, one byte per step. Every wait is bounded
 * (PT_STEP_MS) so a broken lock implementation fails the check instead of
 * hanging it; no result depends on how long anything took.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>

#include "posix_suite.h"

#define PT_STEP_MS 120000

struct pt_child {
    pid_t pid;
    int to_child;   /* parent writes steps */
    int from_child; /* parent reads results */
};

static int pt_lock(int fd, int cmd, short type, off_t start, off_t len)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };

    return fcntl(fd, cmd, &fl);
}

/* Fork a child that runs body(fd_in, fd_out, arg) and _exits with its result. */
static int pt_spawn(struct pt_child *c, int (*body)(int in, int out, void *arg), void *arg)
{
    int down[2], up[2];

    if (pipe(down) < 0)
        return -1;
    if (pipe(up) < 0) {
        close(down[0]);
        close(down[1]);
        return -1;
    }
    c->pid = fork();
    if (c->pid < 0) {
        close(down[0]);
        close(down[1]);
        close(up[0]);
        close(up[1]);
        return -1;
    }
    if (c->pid == 0) {
        close(down[1]);
        close(up[0]);
        alarm(PT_STEP_MS / 1000 * 2);
        _exit(body(down[0], up[1], arg));
    }
    close(down[0]);
    close(up[1]);
    c->to_child = down[1];
    c->from_child = up[0];
    return 0;
}

/* Make sure a child is gone and its pipes closed; returns its exit status. */
static int pt_finish(struct pt_child *c, bool force)
{
    if (c->pid <= 0)
        return -1;
    if (force)
        kill(c->pid, SIGKILL);
    close(c->to_child);
    close(c->from_child);
    int r = pt_reap(c->pid);
    c->pid = 0;
    return r;
}

static void pt_say(int fd, char c)
{
    if (write(fd, &c, 1) != 1) {
        /* the peer is gone; its side of the check reports that */
    }
}

/* ---- F_SETLK conflict ---- */

struct pt_lock_arg {
    const char *path;
    pid_t holder;
};

/* Child: try conflicting and compatible locks while the parent holds [0,100) W. */
static int pt_child_setlk(int in, int out, void *argp)
{
    struct pt_lock_arg *arg = argp;
    int fd = open(arg->path, O_RDWR);

    if (fd < 0)
        return 10;
    if (pt_read_byte(in, PT_STEP_MS) != 'L')
        return 11;
    /* Overlapping write and read locks are refused without waiting. */
    errno = 0;
    if (pt_lock(fd, F_SETLK, F_WRLCK, 50, 10) == 0 || (errno != EAGAIN && errno != EACCES))
        return 12;
    errno = 0;
    if (pt_lock(fd, F_SETLK, F_RDLCK, 0, 1) == 0 || (errno != EAGAIN && errno != EACCES))
        return 13;
    /* A range after the held one is free. */
    if (pt_lock(fd, F_SETLK, F_WRLCK, 100, 10) < 0)
        return 14;
    pt_say(out, 'D');
    if (pt_read_byte(in, PT_STEP_MS) != 'U')
        return 15;
    /* After the parent's unlock the whole range is free. */
    if (pt_lock(fd, F_SETLK, F_WRLCK, 0, 100) < 0)
        return 16;
    return 0;
}

int pt_check_posix_lock_conflict(struct pt_ctx *ctx)
{
    char path[sizeof(ctx->workdir) + 64];
    struct pt_child c = { 0 };

    snprintf(path, sizeof(path), "%s/lk", ctx->workdir);
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT, 0644);
    SYS(ctx, fd);
    SYS(ctx, pt_lock(fd, F_SETLK, F_WRLCK, 0, 100));
    struct pt_lock_arg arg = { .path = path };
    SYS(ctx, pt_spawn(&c, pt_child_setlk, &arg));
    pt_say(c.to_child, 'L');
    int b = pt_read_byte(c.from_child, PT_STEP_MS);
    if (b != 'D') {
        int st = pt_finish(&c, true);
        return FAILF(ctx, "child's conflicting locks (status %d)", st);
    }
    if (pt_lock(fd, F_SETLK, F_UNLCK, 0, 100) < 0) {
        pt_finish(&c, true);
        return FAILF(ctx, "unlock: %s", strerror(errno));
    }
    pt_say(c.to_child, 'U');
    int st = pt_finish(&c, false);
    EXPECT(ctx, st == 0, "child status %d (12/13: conflicting lock granted, 14: free range "
                         "refused, 16: lock not released)", st);
    return 0;
}

/* ---- F_GETLK reports the holder ---- */

static int pt_child_getlk(int in, int out, void *argp)
{
    struct pt_lock_arg *arg = argp;
    int fd = open(arg->path, O_RDWR);

    if (fd < 0)
        return 10;
    if (pt_read_byte(in, PT_STEP_MS) != 'L')
        return 11;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 10, .l_len = 5 };
    if (fcntl(fd, F_GETLK, &fl) < 0)
        return 12;
    if (fl.l_type != F_RDLCK || fl.l_pid != arg->holder || fl.l_start != 0 || fl.l_len != 20)
        fprintf(stderr, "  F_GETLK: type %d pid %d start %lld len %lld; expected type %d pid %d "
                "start 0 len 20\n", fl.l_type, (int)fl.l_pid, (long long)fl.l_start,
                (long long)fl.l_len, F_RDLCK, (int)arg->holder);
    if (fl.l_type != F_RDLCK)
        return 13;
    if (fl.l_pid != arg->holder)
        return 14;
    if (fl.l_start != 0 || fl.l_len != 20)
        return 15;
    /* A free range: F_GETLK says F_UNLCK. */
    struct flock free_fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 40, .l_len = 5 };
    if (fcntl(fd, F_GETLK, &free_fl) < 0 || free_fl.l_type != F_UNLCK)
        return 16;
    /* A read lock is compatible with the holder's read lock. */
    struct flock rd = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 20 };
    if (fcntl(fd, F_GETLK, &rd) < 0 || rd.l_type != F_UNLCK)
        return 17;
    pt_say(out, 'D');
    return 0;
}

int pt_check_posix_getlk(struct pt_ctx *ctx)
{
    char path[sizeof(ctx->workdir) + 64];
    struct pt_child c = { 0 };

    snprintf(path, sizeof(path), "%s/getlk", ctx->workdir);
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT, 0644);
    SYS(ctx, fd);
    SYS(ctx, pt_lock(fd, F_SETLK, F_RDLCK, 0, 20));
    struct pt_lock_arg arg = { .path = path, .holder = getpid() };
    SYS(ctx, pt_spawn(&c, pt_child_getlk, &arg));
    pt_say(c.to_child, 'L');
    (void)pt_read_byte(c.from_child, PT_STEP_MS);
    int st = pt_finish(&c, false);
    EXPECT(ctx, st == 0, "child status %d (13: wrong l_type, 14: l_pid is not the holder, "
                         "15: wrong range, 16/17: F_UNLCK expected)", st);
    return 0;
}

/* ---- F_SETLKW waits for the release ---- */

/* The child's scheduler state from /proc/PID/stat ('S' while it sleeps in F_SETLKW). */
static char pt_proc_state(pid_t pid)
{
    char path[64], buf[512];

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

static int pt_child_setlkw(int in, int out, void *argp)
{
    struct pt_lock_arg *arg = argp;
    int fd = open(arg->path, O_RDWR);

    if (fd < 0)
        return 10;
    if (pt_read_byte(in, PT_STEP_MS) != 'L')
        return 11;
    pt_say(out, 'W'); /* about to wait */
    if (pt_lock(fd, F_SETLKW, F_WRLCK, 0, 0) < 0)
        return 12;
    pt_say(out, 'A'); /* acquired */
    /* Hold it until told, so the parent can see the conflict the other way round. */
    if (pt_read_byte(in, PT_STEP_MS) != 'R')
        return 13;
    return 0;
}

int pt_check_posix_setlkw(struct pt_ctx *ctx)
{
    char path[sizeof(ctx->workdir) + 64];
    struct pt_child c = { 0 };

    snprintf(path, sizeof(path), "%s/setlkw", ctx->workdir);
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT, 0644);
    SYS(ctx, fd);
    SYS(ctx, pt_lock(fd, F_SETLK, F_WRLCK, 0, 0));
    struct pt_lock_arg arg = { .path = path };
    SYS(ctx, pt_spawn(&c, pt_child_setlkw, &arg));
    pt_say(c.to_child, 'L');
    if (pt_read_byte(c.from_child, PT_STEP_MS) != 'W') {
        int st = pt_finish(&c, true);
        return FAILF(ctx, "child did not start (status %d)", st);
    }
    /* Wait until the child sleeps (in F_SETLKW) or reports early. */
    struct pollfd pfd = { .fd = c.from_child, .events = POLLIN };
    int spins = 0;
    for (;;) {
        if (poll(&pfd, 1, 0) > 0) {
            pt_finish(&c, true);
            return FAILF(ctx, "F_SETLKW returned while the lock was held");
        }
        if (pt_proc_state(c.pid) == 'S')
            break;
        if (++spins > 1200000) { /* a bound against a hang, not a timing check */
            pt_finish(&c, true);
            return FAILF(ctx, "the waiting child never went to sleep");
        }
        usleep(100);
    }
    /* Sleeping is not proof it is in F_SETLKW yet: it must not have the lock. */
    if (poll(&pfd, 1, 0) > 0) {
        pt_finish(&c, true);
        return FAILF(ctx, "F_SETLKW returned while the lock was held");
    }
    SYS(ctx, pt_lock(fd, F_SETLK, F_UNLCK, 0, 0));
    int b = pt_read_byte(c.from_child, PT_STEP_MS);
    if (b != 'A') {
        int st = pt_finish(&c, true);
        return FAILF(ctx, "F_SETLKW did not get the lock after the release (%d, status %d)", b, st);
    }
    /* Now the child holds it: our non-blocking attempt must fail. */
    errno = 0;
    int r = pt_lock(fd, F_SETLK, F_WRLCK, 0, 1);
    int err = errno;
    pt_say(c.to_child, 'R');
    int st = pt_finish(&c, false);
    EXPECT(ctx, r < 0 && (err == EAGAIN || err == EACCES),
           "lock granted while the child held it (%s)", r < 0 ? strerror(err) : "success");
    EXPECT(ctx, st == 0, "child status %d", st);
    return 0;
}

/* ---- flock ---- */

static int pt_child_flock(int in, int out, void *argp)
{
    struct pt_lock_arg *arg = argp;
    int fd = open(arg->path, O_RDWR);

    if (fd < 0)
        return 10;
    if (pt_read_byte(in, PT_STEP_MS) != 'L')
        return 11;
    errno = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
        return 12;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK)
        return 13;
    pt_say(out, 'D');
    if (pt_read_byte(in, PT_STEP_MS) != 'U')
        return 14;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0)
        return 15;
    return 0;
}

int pt_check_flock(struct pt_ctx *ctx)
{
    char path[sizeof(ctx->workdir) + 64];
    struct pt_child c = { 0 };

    snprintf(path, sizeof(path), "%s/flk", ctx->workdir);
    _cleanup_close_ int a = open(path, O_RDWR | O_CREAT, 0644);
    SYS(ctx, a);
    _cleanup_close_ int b = open(path, O_RDWR);
    SYS(ctx, b);
    /* Two open file descriptions in one process conflict like two processes. */
    SYS(ctx, flock(a, LOCK_SH));
    SYS(ctx, flock(b, LOCK_SH | LOCK_NB));
    SYS_ERR(ctx, flock(b, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    SYS(ctx, flock(b, LOCK_UN));
    SYS(ctx, flock(a, LOCK_EX));
    SYS_ERR(ctx, flock(b, LOCK_SH | LOCK_NB), EWOULDBLOCK);

    struct pt_lock_arg arg = { .path = path };
    SYS(ctx, pt_spawn(&c, pt_child_flock, &arg));
    pt_say(c.to_child, 'L');
    if (pt_read_byte(c.from_child, PT_STEP_MS) != 'D') {
        int st = pt_finish(&c, true);
        return FAILF(ctx, "another process got the flock we hold (status %d)", st);
    }
    if (flock(a, LOCK_UN) < 0) {
        pt_finish(&c, true);
        return FAILF(ctx, "LOCK_UN: %s", strerror(errno));
    }
    pt_say(c.to_child, 'U');
    int st = pt_finish(&c, false);
    EXPECT(ctx, st == 0, "child status %d (15: lock not free after LOCK_UN)", st);
    /* The child exited, which releases its lock: ours is free again. */
    SYS(ctx, flock(b, LOCK_EX | LOCK_NB));
    return 0;
}
