/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The seccomp filter: it builds for every action and feature set, the allowlist
 * is alphabetised with a reason per entry, and in a child with the filter loaded
 * allowed syscalls work while forbidden ones are killed, logged or trapped.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include "sb_test.h"
#include "sandbox_i.h"

static const enum sb_seccomp_action all_actions[] = {
    SB_SECCOMP_KILL,
    SB_SECCOMP_LOG,
    SB_SECCOMP_TRAP,
    SB_SECCOMP_NONE,
};

static void test_allowlist_sorted_and_explained(void **state)
{
    assert_true(sb_syscalls_len > 50);
    for (size_t i = 0; i < sb_syscalls_len; i++) {
        const struct sb_syscall *s = &sb_syscalls[i];
        assert_non_null(s->reason);
        assert_true(strlen(s->reason) > 8);
        if (i > 0 && strcmp(sb_syscalls[i - 1].name, s->name) >= 0)
            fail_msg("allowlist not alphabetised at %s", s->name);
        /* Whatever a feature asks, these never appear. */
        static const char *const never[] = {
            "execve",
            "execveat",
            "process_vm_readv",
            "process_vm_writev",
            "kexec_load",
            "kexec_file_load",
            "bpf",
            "mount",
            "pivot_root",
            "chroot",
            "setns",
            "unshare",
            "init_module",
            "finit_module",
            "setgroups",
            "capset",
            "fork",
            "vfork",
            "userfaultfd",
            "perf_event_open",
            "keyctl",
        };
        for (size_t j = 0; j < sizeof(never) / sizeof(never[0]); j++) {
            if (strcmp(s->name, never[j]) == 0)
                fail_msg("%s is in the allowlist", s->name);
        }
        if (strcmp(s->name, "ptrace") == 0)
            assert_true(s->features & SB_FEAT_SANITIZER_);
    }
}

static void test_build_every_action_and_feature(void **state)
{
    for (size_t a = 0; a < sizeof(all_actions) / sizeof(all_actions[0]); a++) {
        for (unsigned feat = 0; feat <= SB_FEAT_ALL_; feat++) {
            struct sb_config cfg = {
                .mode = SB_MODE_NONE, .seccomp = all_actions[a], .features = feat};
            scmp_filter_ctx ctx = (scmp_filter_ctx)0x1;
            assert_int_equal(sb_seccomp_build(&cfg, &ctx), 0);
            if (all_actions[a] == SB_SECCOMP_NONE) {
                assert_null(ctx);
                continue;
            }
            assert_non_null(ctx);
            /* The BPF program can be produced (what seccomp_load would install). */
            int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
            assert_true(fd >= 0);
            assert_int_equal(seccomp_export_bpf(ctx, fd), 0);
            close(fd);
            seccomp_release(ctx);
        }
    }
    struct sb_config bad = {.seccomp = SB_SECCOMP_KILL, .features = 1u << 12};
    scmp_filter_ctx ctx;
    assert_int_equal(sb_seccomp_build(&bad, &ctx), -EINVAL);
    assert_null(ctx);
}

/* Allowlist entries a filter for features takes (sanitizer entries aside). */
static size_t allowlist_len(unsigned features)
{
    size_t n = 0;
    for (size_t i = 0; i < sb_syscalls_len; i++)
        n += sb_syscalls[i].features == 0 || (sb_syscalls[i].features & features & ~SB_FEAT_SANITIZER_);
    return n;
}

static void test_feature_lists_grow(void **state)
{
    size_t base = allowlist_len(0);
    assert_true(allowlist_len(SB_FEAT_XATTR) > base);
    assert_true(allowlist_len(SB_FEAT_LOCKS) > base);
    /* The DAX map path (reopen, sendmsg with SCM_RIGHTS) is all base calls. */
    assert_true(allowlist_len(SB_FEAT_DAX) == base);
    assert_true(allowlist_len(SB_FEAT_SYSLOG) > base);
    assert_true(allowlist_len(SB_FEAT_DEVFUSE) > base);
    assert_true(allowlist_len(SB_FEAT_FILE_HANDLES) > base);
    assert_true(allowlist_len(SB_FEAT_ALL_) <= sb_syscalls_len);
}

static void test_action_fallback(void **state)
{
    uint32_t act;
    assert_int_equal(sb_seccomp_action_resolve(SB_SECCOMP_KILL, 3, &act), 0);
    assert_int_equal(act, SCMP_ACT_KILL_PROCESS);
    /* Kernels before 4.14 cannot kill the process: trap rather than kill a thread. */
    assert_int_equal(sb_seccomp_action_resolve(SB_SECCOMP_KILL, 2, &act), 0);
    assert_int_equal(act, SCMP_ACT_TRAP);
    assert_int_equal(sb_seccomp_action_resolve(SB_SECCOMP_LOG, 3, &act), 0);
    assert_int_equal(act, SCMP_ACT_LOG);
    assert_int_equal(sb_seccomp_action_resolve(SB_SECCOMP_LOG, 2, &act), -EOPNOTSUPP);
    assert_int_equal(sb_seccomp_action_resolve(SB_SECCOMP_TRAP, 1, &act), 0);
    assert_int_equal(act, SCMP_ACT_TRAP);
    assert_int_equal(sb_seccomp_action_resolve(SB_SECCOMP_NONE, 3, &act), -EINVAL);

    struct sb_config cfg = {.seccomp = SB_SECCOMP_KILL};
    scmp_filter_ctx ctx;
    assert_int_equal(sb_seccomp_build_api(&cfg, 2, &ctx), 0);
    uint32_t def = 0;
    assert_int_equal(seccomp_attr_get(ctx, SCMP_FLTATR_ACT_DEFAULT, &def), 0);
    assert_int_equal(def, SCMP_ACT_TRAP);
    seccomp_release(ctx);
    assert_int_equal(sb_seccomp_build_api(&cfg, 3, &ctx), 0);
    assert_int_equal(seccomp_attr_get(ctx, SCMP_FLTATR_ACT_DEFAULT, &def), 0);
    assert_int_equal(def, SCMP_ACT_KILL_PROCESS);
    seccomp_release(ctx);
    cfg.seccomp = SB_SECCOMP_LOG;
    assert_int_equal(sb_seccomp_build_api(&cfg, 2, &ctx), -EOPNOTSUPP);
}

/* ---- Loaded filters, in children ------------------------------------------------- */

static volatile sig_atomic_t sigsys_seen;
static volatile sig_atomic_t sigsys_nr;

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
    sigsys_seen++;
    sigsys_nr = si->si_syscall;
}

static void install_sigsys_handler(void)
{
    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSYS, &sa, NULL);
}

struct forbidden {
    const char *what;
    long (*call)(void);
    int nr;
};

static long call_execve(void)
{
    char *argv[] = {(char *)"true", NULL};
    char *envp[] = {NULL};
    return syscall(SYS_execve, "/bin/true", argv, envp);
}
#if !SB_SANITIZER
static long call_ptrace(void)
{
    return syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0);
}
#endif
static long call_mount(void)
{
    /* An invalid mount: harmless even where it gets through (log mode). */
    return syscall(SYS_mount, "none", "/nonexistent-vufsd-test", "tmpfs", 0, NULL);
}
static long call_bpf(void)
{
    return syscall(SYS_bpf, -1, NULL, 0);
}
static long call_unshare(void)
{
    return syscall(SYS_unshare, CLONE_NEWNS);
}
static long call_setgroups(void)
{
    return syscall(SYS_setgroups, 0, NULL);
}
static long call_execve_missing(void)
{
    char *argv[] = {NULL};
    return syscall(SYS_execve, "/nonexistent-vufsd-test", argv, argv);
}

/* Never allowed, in any build. ptrace only outside sanitizer builds (LSan). */
static const struct forbidden forbidden_calls[] = {
    {"execve", call_execve, SYS_execve},
    {"mount", call_mount, SYS_mount},
    {"bpf", call_bpf, SYS_bpf},
    {"unshare", call_unshare, SYS_unshare},
    {"setgroups", call_setgroups, SYS_setgroups},
#if !SB_SANITIZER
    {"ptrace", call_ptrace, SYS_ptrace},
#endif
};

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* What a daemon does all day: must keep working under every action. */
static int do_allowed_work(void)
{
    if (getpid() <= 0)
        return -1;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -2;
    char buf[64];
    if (read(fd, buf, sizeof(buf)) <= 0)
        return -3;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -4;
    close(fd);
    DIR *d = opendir("/");
    if (!d || !readdir(d))
        return -5;
    closedir(d);
    void *p = malloc(1 << 20); /* mmap-backed */
    if (!p)
        return -6;
    memset(p, 1, 1 << 20);
    free(p);
    /* glibc sorts more than 1 KiB with a buffer sized against the physical
     * memory, which it asks the kernel for (sysinfo): the DAX window sorts
     * its mappings so. */
    static int v[4096];
    for (int i = 0; i < 4096; i++)
        v[i] = (i * 7919) % 4096;
    qsort(v, 4096, sizeof(v[0]), cmp_int);
    for (int i = 0; i < 4096; i++)
        if (v[i] != i)
            return -7;
    return 0;
}

static void *thread_fn(void *arg)
{
    *(int *)arg = do_allowed_work() == 0 ? 42 : 1;
    return NULL;
}

static int child_allowed(void *arg)
{
    enum sb_seccomp_action a = *(enum sb_seccomp_action *)arg;
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = a, .features = SB_FEAT_ALL_};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    unsigned long long mode = 0;
    SB_CHECK(sb_test_status_field("Seccomp", 0, &mode) == 0);
    SB_CHECK(mode == (a == SB_SECCOMP_NONE ? 0 : 2));
    SB_CHECK(do_allowed_work() == 0);
    /* Threads are clones with CLONE_THREAD (clone3 is answered ENOSYS). */
    int result = 0;
    pthread_t t;
    SB_CHECK(pthread_create(&t, NULL, thread_fn, &result) == 0);
    SB_CHECK(pthread_join(t, NULL) == 0);
    SB_CHECK(result == 42);
    SB_CHECK(prctl(PR_SET_NAME, "vufsd-test", 0, 0, 0) == 0);
    return 0;
}

static void test_allowed_syscalls_work(void **state)
{
    for (size_t a = 0; a < sizeof(all_actions) / sizeof(all_actions[0]); a++) {
        enum sb_seccomp_action act = all_actions[a];
        sb_assert_child_ok(sb_test_fork(child_allowed, &act));
    }
}

static int child_forbidden_kill(void *arg)
{
    const struct forbidden *f = arg;
    struct sb_config cfg = {
        .mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_KILL, .features = SB_FEAT_ALL_};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    f->call();
    return 3; /* still alive: the filter let it through */
}

static void test_kill(void **state)
{
    for (size_t i = 0; i < sizeof(forbidden_calls) / sizeof(forbidden_calls[0]); i++) {
        int st = sb_test_fork(child_forbidden_kill, (void *)&forbidden_calls[i]);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSYS)
            fail_msg("%s: expected death by SIGSYS, got %s %d", forbidden_calls[i].what,
                     WIFEXITED(st) ? "exit" : "signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
}

/* KILL means the whole process, not just the offending thread. */
static void *thread_execve(void *arg)
{
    call_execve();
    return NULL;
}

static int child_kill_from_thread(void *arg)
{
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_KILL};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    pthread_t t;
    SB_CHECK(pthread_create(&t, NULL, thread_execve, NULL) == 0);
    pthread_join(t, NULL);
    return 4;
}

/* A thread that existed before the load is filtered too (TSYNC). */
static int pipe_fds[2];
static void *thread_waits_then_execs(void *arg)
{
    char c;
    if (read(pipe_fds[0], &c, 1) == 1)
        call_execve();
    return NULL;
}

static int child_tsync(void *arg)
{
    SB_CHECK(pipe(pipe_fds) == 0);
    pthread_t t;
    SB_CHECK(pthread_create(&t, NULL, thread_waits_then_execs, NULL) == 0);
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_KILL};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    SB_CHECK(write(pipe_fds[1], "x", 1) == 1);
    pthread_join(t, NULL);
    return 5;
}

static void test_kill_whole_process(void **state)
{
    int st = sb_test_fork(child_kill_from_thread, NULL);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGSYS);
    st = sb_test_fork(child_tsync, NULL);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGSYS);
}

static int child_trap(void *arg)
{
    const struct forbidden *f = arg;
    install_sigsys_handler();
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_TRAP};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    SB_CHECK(sigsys_seen == 0);
    f->call();
    SB_CHECK(sigsys_seen == 1);
    SB_CHECK(sigsys_nr == f->nr);
    SB_CHECK(do_allowed_work() == 0);
    SB_CHECK(sigsys_seen == 1);
    return 0;
}

static void test_trap(void **state)
{
    for (size_t i = 0; i < sizeof(forbidden_calls) / sizeof(forbidden_calls[0]); i++)
        sb_assert_child_ok(sb_test_fork(child_trap, (void *)&forbidden_calls[i]));
}

/* Log mode: the call goes through (and the kernel logs it); the process lives. */
static int child_log(void *arg)
{
    install_sigsys_handler();
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_LOG};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    errno = 0;
    SB_CHECK(call_execve_missing() == -1 && errno == ENOENT);
    errno = 0;
    SB_CHECK(call_mount() == -1 && errno == ENOENT);
    SB_CHECK(sigsys_seen == 0);
    return 0;
}

static void test_log(void **state)
{
    sb_assert_child_ok(sb_test_fork(child_log, NULL));
}

/* Feature additions are real: without SB_FEAT_XATTR, fgetxattr traps. */
static int child_feature(void *arg)
{
    unsigned features = *(unsigned *)arg;
    install_sigsys_handler();
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    SB_CHECK(fd >= 0);
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_TRAP, .features = features};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    /* Raw syscalls: a trapped call returns garbage, which a libc (or sanitizer)
     * wrapper would believe. */
    char v[8];
    syscall(SYS_fgetxattr, fd, "user.vufsd-test", v, sizeof(v));
    syscall(SYS_flock, fd, LOCK_SH);
    int trapped = sigsys_seen;
    if (features == (SB_FEAT_XATTR | SB_FEAT_LOCKS))
        SB_CHECK(trapped == 0);
    else
        SB_CHECK(trapped == 2);
    return 0;
}

static void test_features_gate_syscalls(void **state)
{
    unsigned on = SB_FEAT_XATTR | SB_FEAT_LOCKS, off = 0;
    sb_assert_child_ok(sb_test_fork(child_feature, &on));
    sb_assert_child_ok(sb_test_fork(child_feature, &off));
}

/* Processes are never created: fork (clone without CLONE_THREAD) dies. */
static int child_fork(void *arg)
{
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_KILL};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    if (p > 0)
        waitpid(p, NULL, 0);
    return 6;
}

static void test_no_new_processes(void **state)
{
    int st = sb_test_fork(child_fork, NULL);
    if (SB_SANITIZER) {
        /* Sanitizer builds let LeakSanitizer clone its tracer task. */
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 6);
    } else {
        assert_true(WIFSIGNALED(st));
        assert_int_equal(WTERMSIG(st), SIGSYS);
    }
}

#if defined(__x86_64__)
/*
 * The i386 ABI (int $0x80) has other syscall numbers: a filter that only lists
 * x86_64 numbers must not let it through. i386 getpid (20) is harmless and
 * works unfiltered, so dying here is the filter's doing.
 */
static long i386_getpid(void)
{
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
    return r;
}

static int child_i386_probe(void *arg)
{
    (void)arg;
    return i386_getpid() == getpid() ? 0 : 1;
}

static int child_foreign_arch(void *arg)
{
    (void)arg;
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_KILL};
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    i386_getpid();
    return 7;
}

/* A kernel built or booted without IA-32 emulation cannot run the call at all;
 * then the filter itself must say it: no i386 arch in it, and a foreign arch
 * kills. */
static void assert_filter_refuses_foreign_arch(void)
{
    struct sb_config cfg = {.mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_KILL};
    scmp_filter_ctx ctx = NULL;
    assert_int_equal(sb_seccomp_build(&cfg, &ctx), 0);
    assert_int_equal(seccomp_arch_exist(ctx, SCMP_ARCH_X86), -EEXIST);
    assert_int_equal(seccomp_arch_exist(ctx, SCMP_ARCH_X32), -EEXIST);
    uint32_t bad = 0;
    assert_int_equal(seccomp_attr_get(ctx, SCMP_FLTATR_ACT_BADARCH, &bad), 0);
    assert_true(bad == SCMP_ACT_KILL_PROCESS || bad == SCMP_ACT_KILL || bad == SCMP_ACT_TRAP);
    seccomp_release(ctx);
}

static void test_foreign_arch_killed(void **state)
{
    int probe = sb_test_fork(child_i386_probe, NULL);
    if (!WIFEXITED(probe) || WEXITSTATUS(probe) != 0) {
        assert_filter_refuses_foreign_arch();
        return;
    }
    int st = sb_test_fork(child_foreign_arch, NULL);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGSYS);
    assert_filter_refuses_foreign_arch();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowlist_sorted_and_explained),
        cmocka_unit_test(test_build_every_action_and_feature),
        cmocka_unit_test(test_feature_lists_grow),
        cmocka_unit_test(test_action_fallback),
        cmocka_unit_test(test_allowed_syscalls_work),
        cmocka_unit_test(test_kill),
        cmocka_unit_test(test_kill_whole_process),
        cmocka_unit_test(test_trap),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_features_gate_syscalls),
        cmocka_unit_test(test_no_new_processes),
#if defined(__x86_64__)
        cmocka_unit_test(test_foreign_arch_killed),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
