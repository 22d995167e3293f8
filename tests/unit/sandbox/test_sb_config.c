/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Sandbox settings: parsing, the unsafe-combination refusal, the log line,
 * capability arithmetic with --modcaps, and the RLIMIT_NOFILE logic. */
#include <sys/resource.h>
#include <linux/capability.h>

#include "sb_test.h"
#include "sandbox_i.h"

#define BIT(c) (1ull << (c))
#define BASE_CAPS                                                                                  \
    (BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) | BIT(CAP_FSETID) |                  \
     BIT(CAP_SETGID) | BIT(CAP_SETUID) | BIT(CAP_MKNOD) | BIT(CAP_SETFCAP))

static void test_mode_parse(void **state)
{
    enum sb_mode m;
    assert_int_equal(sb_mode_parse("namespace", &m), 0);
    assert_int_equal(m, SB_MODE_NAMESPACE);
    assert_int_equal(sb_mode_parse("chroot", &m), 0);
    assert_int_equal(m, SB_MODE_CHROOT);
    assert_int_equal(sb_mode_parse("none", &m), 0);
    assert_int_equal(m, SB_MODE_NONE);
    assert_int_equal(sb_mode_parse("Namespace", &m), -EINVAL);
    assert_int_equal(sb_mode_parse("", &m), -EINVAL);
    assert_int_equal(sb_mode_parse(NULL, &m), -EINVAL);
    assert_string_equal(sb_mode_name(SB_MODE_CHROOT), "chroot");
    assert_string_equal(sb_mode_name((enum sb_mode)42), "?");

    enum sb_seccomp_action a;
    const char *names[] = {"kill", "log", "trap", "none"};
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(sb_seccomp_action_parse(names[i], &a), 0);
        assert_int_equal(a, i);
        assert_string_equal(sb_seccomp_action_name(a), names[i]);
    }
    assert_int_equal(sb_seccomp_action_parse("allow", &a), -EINVAL);
}

static void test_config_check(void **state)
{
    const char *msg = "stale";
    struct sb_config cfg = {
        .mode = SB_MODE_NAMESPACE, .shared_dir = "/srv", .seccomp = SB_SECCOMP_KILL};
    assert_int_equal(sb_config_check(&cfg, &msg), 0);
    assert_null(msg);

    /* The one refused combination, and its explicit override. */
    cfg.mode = SB_MODE_NONE;
    cfg.seccomp = SB_SECCOMP_NONE;
    assert_int_equal(sb_config_check(&cfg, &msg), -EPERM);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "unsafe"));
    cfg.unsafe_no_isolation = true;
    assert_int_equal(sb_config_check(&cfg, &msg), 0);

    /* Either defence alone is accepted. */
    cfg.unsafe_no_isolation = false;
    cfg.seccomp = SB_SECCOMP_LOG;
    assert_int_equal(sb_config_check(&cfg, NULL), 0);
    cfg.mode = SB_MODE_CHROOT;
    cfg.seccomp = SB_SECCOMP_NONE;
    assert_int_equal(sb_config_check(&cfg, NULL), 0);

    /* Isolation needs a directory to isolate into. */
    cfg.shared_dir = NULL;
    assert_int_equal(sb_config_check(&cfg, &msg), -EINVAL);
    assert_non_null(msg);
    cfg.shared_dir = "";
    assert_int_equal(sb_config_check(&cfg, NULL), -EINVAL);
    cfg.shared_dir = "/srv";

    cfg.modcaps = "+sys_admin:-bogus";
    assert_int_equal(sb_config_check(&cfg, &msg), -EINVAL);
    assert_non_null(strstr(msg, "modcaps"));
    cfg.modcaps = NULL;

    cfg.features = 1u << 20;
    assert_int_equal(sb_config_check(&cfg, NULL), -EINVAL);
    cfg.features = 0;
    cfg.mode = (enum sb_mode)7;
    assert_int_equal(sb_config_check(&cfg, NULL), -EINVAL);
    cfg.mode = SB_MODE_NONE;
    cfg.seccomp = (enum sb_seccomp_action)9;
    assert_int_equal(sb_config_check(&cfg, NULL), -EINVAL);
}

static void test_describe(void **state)
{
    char buf[512];
    struct sb_config cfg = {.mode = SB_MODE_NAMESPACE,
                            .shared_dir = "/srv",
                            .seccomp = SB_SECCOMP_KILL,
                            .features = SB_FEAT_XATTR | SB_FEAT_LOCKS,
                            .modcaps = "-mknod",
                            .rlimit_nofile = 5000};
    int n = sb_describe(&cfg, buf, sizeof(buf));
    assert_int_equal(n, (int)strlen(buf));
    assert_string_equal(buf, "sandbox=namespace seccomp=kill features=xattr,locks "
                             "caps=chown,dac_override,fowner,fsetid,setgid,setuid,setfcap "
                             "nofile=5000");

    struct sb_config none = {
        .mode = SB_MODE_NONE, .seccomp = SB_SECCOMP_NONE, .unsafe_no_isolation = true};
    sb_describe(&none, buf, sizeof(buf));
    assert_non_null(strstr(buf, "sandbox=none seccomp=none features=none"));
    assert_non_null(strstr(buf, "nofile=default"));
    assert_non_null(strstr(buf, "UNSAFE"));

    /* Truncation: returns the full length, writes a NUL-terminated prefix. */
    char small[12];
    n = sb_describe(&cfg, small, sizeof(small));
    assert_true(n > (int)sizeof(small));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, "sandbox=nam", sizeof(small) - 1);
    assert_int_equal(sb_describe(&cfg, NULL, 0), n);
}

static void test_cap_names(void **state)
{
    assert_int_equal(sb_cap_from_name("chown"), CAP_CHOWN);
    assert_int_equal(sb_cap_from_name("CAP_CHOWN"), CAP_CHOWN);
    assert_int_equal(sb_cap_from_name("cap_sys_admin"), CAP_SYS_ADMIN);
    assert_int_equal(sb_cap_from_name("Dac_Read_Search"), CAP_DAC_READ_SEARCH);
    assert_int_equal(sb_cap_from_name("cap_"), -EINVAL);
    assert_int_equal(sb_cap_from_name(""), -EINVAL);
    assert_int_equal(sb_cap_from_name("root"), -EINVAL);
    assert_int_equal(sb_cap_from_name("12"), -EINVAL);
    char longname[200];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(sb_cap_from_name(longname), -EINVAL);
}

static void test_caps_compute(void **state)
{
    uint64_t set;
    assert_int_equal(sb_caps_compute(0, NULL, &set), 0);
    assert_int_equal(set, BASE_CAPS);
    assert_int_equal(sb_caps_compute(0, "", &set), 0);
    assert_int_equal(set, BASE_CAPS);

    /* File handles need DAC_READ_SEARCH (open_by_handle_at); nothing else does. */
    assert_int_equal(sb_caps_compute(SB_FEAT_FILE_HANDLES, NULL, &set), 0);
    assert_int_equal(set, BASE_CAPS | BIT(CAP_DAC_READ_SEARCH));
    assert_int_equal(sb_caps_compute(SB_FEAT_ALL_ & ~SB_FEAT_FILE_HANDLES, NULL, &set), 0);
    assert_int_equal(set, BASE_CAPS);

    assert_int_equal(sb_caps_compute(0, "+sys_admin:-mknod", &set), 0);
    assert_int_equal(set, (BASE_CAPS | BIT(CAP_SYS_ADMIN)) & ~BIT(CAP_MKNOD));
    assert_int_equal(sb_caps_compute(0, "-chown:-cap_setfcap:+CAP_CHOWN", &set), 0);
    assert_int_equal(set, BASE_CAPS & ~BIT(CAP_SETFCAP));
    assert_int_equal(sb_caps_compute(SB_FEAT_FILE_HANDLES, "-dac_read_search", &set), 0);
    assert_int_equal(set, BASE_CAPS);

    /* Malformed lists are rejected and leave *out alone. */
    static const char *const bad[] = {
        "sys_admin",      "+",       "-",
        "+bogus",         "+chown:", ":+chown",
        "+chown::-mknod", "++chown", "+chown,-mknod",
        "+ chown",        "*chown",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        set = 0x5a5a;
        assert_int_equal(sb_caps_compute(0, bad[i], &set), -EINVAL);
        assert_int_equal(set, 0x5a5a);
    }
}

static void test_rlimit_default(void **state)
{
    assert_int_equal(sb_rlimit_default(0, 1048576), 1000000);
    assert_int_equal(sb_rlimit_default(0, 65536), 65536);
    assert_int_equal(sb_rlimit_default(0, 0), 1000000);
    assert_int_equal(sb_rlimit_default(4096, 1048576), 4096);
    assert_int_equal(sb_rlimit_default(2000000, 1048576), 2000000); /* kernel decides */
}

/* Explicit limit below the current hard limit: applied exactly. */
static int child_rlimit_explicit(void *arg)
{
    struct rlimit cur;
    SB_CHECK(getrlimit(RLIMIT_NOFILE, &cur) == 0);
    uint64_t want = cur.rlim_max > 600 ? 600 : cur.rlim_max;
    struct sb_config cfg = {.mode = SB_MODE_NONE, .rlimit_nofile = want};
    uint64_t applied = 0;
    SB_CHECK(sb_apply_rlimit(&cfg, &applied) == 0);
    SB_CHECK(applied == want);
    SB_CHECK(getrlimit(RLIMIT_NOFILE, &cur) == 0);
    SB_CHECK(cur.rlim_cur == want && cur.rlim_max == want);
    /* Above the (now lowered) hard limit without CAP_SYS_RESOURCE... */
    cfg.rlimit_nofile = want + 100;
    int r = sb_apply_rlimit(&cfg, &applied);
    unsigned long long eff = 0;
    SB_CHECK(sb_test_status_field("CapEff", 1, &eff) == 0);
    if (eff & BIT(CAP_SYS_RESOURCE))
        SB_CHECK(r == 0 && applied == want + 100);
    else
        SB_CHECK(r == -EPERM);
    return 0;
}

/* Default: min(1e6, nr_open), or the hard limit when it cannot be raised. */
static int child_rlimit_default(void *arg)
{
    struct rlimit before;
    SB_CHECK(getrlimit(RLIMIT_NOFILE, &before) == 0);
    FILE *f = fopen("/proc/sys/fs/nr_open", "r");
    unsigned long long nr_open = 0;
    SB_CHECK(f && fscanf(f, "%llu", &nr_open) == 1);
    fclose(f);
    uint64_t want = sb_rlimit_default(0, nr_open);

    struct sb_config cfg = {.mode = SB_MODE_NONE};
    uint64_t applied = 0;
    SB_CHECK(sb_apply_rlimit(&cfg, &applied) == 0);
    unsigned long long eff = 0;
    SB_CHECK(sb_test_status_field("CapEff", 1, &eff) == 0);
    if ((eff & BIT(CAP_SYS_RESOURCE)) || before.rlim_max >= want)
        SB_CHECK(applied == want);
    else
        SB_CHECK(applied == before.rlim_max);
    return 0;
}

static void test_rlimit_apply(void **state)
{
    sb_assert_child_ok(sb_test_fork(child_rlimit_explicit, NULL));
    sb_assert_child_ok(sb_test_fork(child_rlimit_default, NULL));
}

/*
 * Runs body(arg) in the child of a keeper (sb_enter_keeper, no handover) that
 * a process of its own forks; returns the status that process, the keeper,
 * exits with. mask: signals blocked before the keeper forks (the child inherits them).
 */
static int keeper_status(int (*body)(int), int arg, const sigset_t *mask, pid_t *keeper)
{
    pid_t outer = fork();
    assert_true(outer >= 0);
    if (outer == 0) {
        static const struct sb_keeper k = {0};
        if (mask)
            sigprocmask(SIG_BLOCK, mask, NULL);
        if (sb_enter_keeper(&k, NULL) != 0)
            _exit(99);
        _exit(body(arg));
    }
    if (keeper)
        *keeper = outer;
    return outer;
}

static int keeper_wait(pid_t outer)
{
    int st;
    assert_int_equal(waitpid(outer, &st, 0), outer);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int body_exit(int code)
{
    return code;
}

static int body_killed(int unused)
{
    raise(SIGKILL);
    return 0;
}

/* Tells the test it waits (fd), then reports the signal that came. */
static int body_sigwait(int fd)
{
    sigset_t set;
    int sig = 0;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    if (write(fd, "r", 1) != 1 || sigwait(&set, &sig) != 0)
        return 90;
    return sig == SIGINT ? 40 : 91;
}

/* The keeper's loop: the exit status it forwards, and signals. */
static void test_keeper_wait(void **state)
{
    assert_int_equal(keeper_wait(keeper_status(body_exit, 3, NULL, NULL)), 3);
    assert_int_equal(keeper_wait(keeper_status(body_killed, 0, NULL, NULL)), 128 + SIGKILL);

    /* SIGINT sent to the keeper reaches the child (which reports it). */
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT); /* blocked in the child: no signal lost before sigwait */
    pid_t keeper;
    keeper_status(body_sigwait, ready[1], &set, &keeper);
    close(ready[1]);
    char r;
    assert_int_equal(read(ready[0], &r, 1), 1);
    close(ready[0]);
    assert_int_equal(kill(keeper, SIGINT), 0);
    assert_int_equal(keeper_wait(keeper), 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_parse),     cmocka_unit_test(test_config_check),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_cap_names),      cmocka_unit_test(test_caps_compute),
        cmocka_unit_test(test_rlimit_default),
        cmocka_unit_test(test_rlimit_apply),   cmocka_unit_test(test_keeper_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
