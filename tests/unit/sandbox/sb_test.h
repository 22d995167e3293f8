/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers for the sandbox tests: each check that changes the process (seccomp,
 * namespaces, capabilities) runs in a forked child, which reports the first
 * failed check as its exit code (the line number, folded into 1..250) and never
 * returns into cmocka.
 */
#ifndef SB_TEST_H
#define SB_TEST_H

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

/* In a child: fail with a diagnostic on stderr and an exit code naming the line. */
#define SB_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: child check failed: %s (errno %d)\n", __FILE__, __LINE__,      \
                    #cond, errno);                                                                 \
            _exit(1 + __LINE__ % 250);                                                             \
        }                                                                                          \
    } while (0)

/* Runs fn(arg) in a child; the child exits with fn's return value. Returns the
 * raw wait status. */
static inline int sb_test_fork(int (*fn)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fn(arg));
    int status;
    pid_t w;
    do {
        w = waitpid(pid, &status, 0);
    } while (w < 0 && errno == EINTR);
    assert_int_equal(w, pid);
    return status;
}

/* The child ran every check and exited 0. */
#define sb_assert_child_ok(status)                                                                 \
    do {                                                                                           \
        int st_ = (status);                                                                        \
        if (!WIFEXITED(st_) || WEXITSTATUS(st_) != 0)                                              \
            fail_msg("child: %s %d", WIFEXITED(st_) ? "exit" : "signal",                           \
                     WIFEXITED(st_) ? WEXITSTATUS(st_) : WTERMSIG(st_));                           \
    } while (0)

/* Whether we may make namespaces, mount and drop capabilities (root with
 * CAP_SYS_ADMIN). Tests that need it make the whole program a meson SKIP (77). */
static inline int sb_test_privileged(void)
{
    if (geteuid() != 0)
        return 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long eff = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    }
    fclose(f);
    return (eff >> 21) & 1; /* CAP_SYS_ADMIN */
}

/* A value from /proc/self/status ("CapEff", "Seccomp"...) as hex or decimal. */
static inline int sb_test_status_field(const char *key, int hex, unsigned long long *out)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -errno;
    char line[512];
    size_t klen = strlen(key);
    int r = -ENOENT;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            *out = strtoull(line + klen + 1, NULL, hex ? 16 : 10);
            r = 0;
            break;
        }
    }
    fclose(f);
    return r;
}

#endif
