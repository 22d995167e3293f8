/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Namespaces, chroot and capabilities, each in a forked child: after the switch
 * nothing of the host is visible, /proc/self/fd still reopens our fds, and the
 * capability sets are exactly the ones asked for. Needs root (CAP_SYS_ADMIN);
 * without it the program is a meson SKIP, never a pass.
 */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <linux/capability.h>

#include "sb_test.h"
#include "sandbox_i.h"

#define BIT(c) (1ull << (c))
#define BASE_CAPS                                                                                  \
    (BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) | BIT(CAP_FSETID) |                  \
     BIT(CAP_SETGID) | BIT(CAP_SETUID) | BIT(CAP_MKNOD) | BIT(CAP_SETFCAP))

/* A pid namespace of its own, as the daemon's keeper makes it (the caller
 * becomes its pid 1; the keeper outside waits and forwards its status). */
static int enter_pid_ns(void)
{
    static const struct sb_keeper k = {.new_pid_ns = true};
    return sb_enter_keeper(&k, NULL);
}

static char share[256];

/* A scratch shared directory: two files and a subdirectory. */
static int setup_share(void **state)
{
    snprintf(share, sizeof(share), "/tmp/vufsd-sb-test-XXXXXX");
    if (!mkdtemp(share))
        return -1;
    char p[320];
    snprintf(p, sizeof(p), "%s/hello", share);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    fputs("hello from the share\n", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/sub", share);
    if (mkdir(p, 0755) < 0)
        return -1;
    snprintf(p, sizeof(p), "%s/sub/inner", share);
    f = fopen(p, "w");
    if (!f)
        return -1;
    fclose(f);
    return 0;
}

static int teardown_share(void **state)
{
    char p[320];
    snprintf(p, sizeof(p), "%s/sub/inner", share);
    unlink(p);
    snprintf(p, sizeof(p), "%s/sub", share);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/hello", share);
    unlink(p);
    rmdir(share);
    return 0;
}

/* "/" holds exactly the share's entries: hello and sub. */
static int check_root_is_share(void)
{
    DIR *d = opendir("/");
    if (!d)
        return 0;
    int seen = 0, others = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!strcmp(e->d_name, "hello") || !strcmp(e->d_name, "sub"))
            seen++;
        else
            others++;
    }
    closedir(d);
    return seen == 2 && others == 0;
}

/* The host's files are unreachable by path, '..' included. */
static int check_host_invisible(void)
{
    struct stat st;
    if (stat("/etc/passwd", &st) == 0 || errno != ENOENT)
        return 0;
    if (stat("/../../etc/passwd", &st) == 0 || stat("/proc/self/status", &st) == 0)
        return 0;
    char p[320];
    snprintf(p, sizeof(p), "%s/hello", share); /* the host path of a shared file */
    if (stat(p, &st) == 0)
        return 0;
    struct stat root, dotdot;
    if (stat("/", &root) < 0 || stat("/..", &dotdot) < 0)
        return 0;
    return root.st_ino == dotdot.st_ino && root.st_dev == dotdot.st_dev;
}

/* Reopen an fd through the kept /proc/self/fd, as the passthrough does. */
static int check_proc_reopen(int proc_fd)
{
    int opath = open("/hello", O_PATH | O_CLOEXEC);
    if (opath < 0)
        return 0;
    char name[16];
    snprintf(name, sizeof(name), "%d", opath);
    int fd = openat(proc_fd, name, O_RDONLY | O_CLOEXEC);
    close(opath);
    if (fd < 0)
        return 0;
    char buf[64] = {0};
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n > 0 && strcmp(buf, "hello from the share\n") == 0;
}

/*
 * The filesystem opens the share before the sandbox; '..' from that fd (and
 * from anything opened through it) must stop at the share afterwards, exactly
 * as '..' of "/" does.
 */
static int check_old_fd_confined(int share_fd)
{
    struct stat root, up, upup;
    if (stat("/", &root) < 0 || fstatat(share_fd, "..", &up, 0) < 0 ||
        fstatat(share_fd, "sub/../..", &upup, 0) < 0)
        return 0;
    return up.st_ino == root.st_ino && up.st_dev == root.st_dev && upup.st_ino == root.st_ino &&
           upup.st_dev == root.st_dev;
}

/* A mount below the share on the host (a submount) stays visible inside. */
static int make_submount(void)
{
    char p[320];
    snprintf(p, sizeof(p), "%s/sub", share);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
        mount("vufsd-sub", p, "tmpfs", 0, NULL) < 0)
        return 0;
    snprintf(p, sizeof(p), "%s/sub/on-submount", share);
    int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return 0;
    close(fd);
    /* Like the host's namespace, this one must outlive our leaving it (a dead
     * namespace's mounts are dissolved): a helper stays in it until we exit. */
    int keep[2];
    if (pipe(keep) < 0)
        return 0;
    pid_t helper = fork();
    if (helper < 0)
        return 0;
    if (helper == 0) {
        char c;
        close(keep[1]);
        while (read(keep[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(keep[0]); /* keep[1] stays open until this child exits */
    return 1;
}

static int child_namespace(void *arg)
{
    int with_pidns = *(int *)arg;
    if (with_pidns) {
        int r = enter_pid_ns();
        SB_CHECK(r == 0); /* only the child of the namespace gets here */
        SB_CHECK(getpid() == 1);
    }
    struct utsname host;
    SB_CHECK(uname(&host) == 0);
    SB_CHECK(make_submount());
    int share_fd = open(share, O_PATH | O_DIRECTORY | O_CLOEXEC);
    SB_CHECK(share_fd >= 0);

    struct sb_config cfg = {.mode = SB_MODE_NAMESPACE, .shared_dir = share};
    int proc_fd = -1;
    SB_CHECK(sb_enter(&cfg, &proc_fd) == 0);
    SB_CHECK(proc_fd >= 0);
    SB_CHECK(check_root_is_share());
    SB_CHECK(check_host_invisible());
    SB_CHECK(check_proc_reopen(proc_fd));
    SB_CHECK(check_old_fd_confined(share_fd));
    SB_CHECK(access("/sub/on-submount", F_OK) == 0);
    SB_CHECK(faccessat(share_fd, "sub/on-submount", F_OK, 0) == 0);
    close(share_fd);
    char cwd[64];
    SB_CHECK(getcwd(cwd, sizeof(cwd)) && strcmp(cwd, "/") == 0);

    /* The new network namespace has only a loopback, which is down. */
    struct if_nameindex *ifs = if_nameindex();
    SB_CHECK(ifs);
    int n = 0;
    for (struct if_nameindex *i = ifs; i->if_index; i++, n++)
        SB_CHECK(strcmp(i->if_name, "lo") == 0);
    if_freenameindex(ifs);
    SB_CHECK(n <= 1);

    /* Our own uts namespace: renaming it leaves the host's name alone. */
    SB_CHECK(sethostname("vufsd-sandbox", 13) == 0);

    if (with_pidns) {
        /* The fresh proc belongs to the new namespace: our fd table is pid 1's. */
        int st = openat(proc_fd, "../status", O_RDONLY | O_CLOEXEC);
        SB_CHECK(st >= 0);
        char buf[256] = {0};
        SB_CHECK(read(st, buf, sizeof(buf) - 1) > 0);
        close(st);
        SB_CHECK(strstr(buf, "\nPid:\t1\n") != NULL);
    }
    close(proc_fd);
    return 0;
}

static void test_namespace(void **state)
{
    struct utsname before, after;
    assert_int_equal(uname(&before), 0);
    int with_pidns = 0;
    sb_assert_child_ok(sb_test_fork(child_namespace, &with_pidns));
    with_pidns = 1;
    sb_assert_child_ok(sb_test_fork(child_namespace, &with_pidns));
    assert_int_equal(uname(&after), 0);
    assert_string_equal(before.nodename, after.nodename);

    /* The share itself is untouched on the host (no directory added for put_old). */
    char p[320];
    snprintf(p, sizeof(p), "%s/hello", share);
    assert_int_equal(access(p, R_OK), 0);
    DIR *d = opendir(share);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    assert_int_equal(n, 2);
}

static int child_chroot(void *arg)
{
    SB_CHECK(make_submount());
    int share_fd = open(share, O_PATH | O_DIRECTORY | O_CLOEXEC);
    SB_CHECK(share_fd >= 0);
    struct sb_config cfg = {.mode = SB_MODE_CHROOT, .shared_dir = share};
    int proc_fd = -1;
    SB_CHECK(sb_enter(&cfg, &proc_fd) == 0);
    SB_CHECK(proc_fd >= 0);
    SB_CHECK(check_root_is_share());
    SB_CHECK(check_host_invisible());
    SB_CHECK(check_proc_reopen(proc_fd));
    SB_CHECK(check_old_fd_confined(share_fd));
    SB_CHECK(access("/sub/on-submount", F_OK) == 0);
    close(share_fd);
    close(proc_fd);
    return 0;
}

static void test_chroot(void **state)
{
    sb_assert_child_ok(sb_test_fork(child_chroot, NULL));
}

static int child_none(void *arg)
{
    struct sb_config cfg = {.mode = SB_MODE_NONE};
    int proc_fd = -1;
    SB_CHECK(sb_enter(&cfg, &proc_fd) == 0);
    SB_CHECK(proc_fd >= 0);
    struct stat st;
    SB_CHECK(stat("/etc/passwd", &st) == 0 || errno != ENOENT); /* nothing hidden */
    SB_CHECK(sb_enter(&cfg, NULL) == 0);
    close(proc_fd);
    return 0;
}

static int child_errors(void *arg)
{
    int proc_fd = 7;
    struct sb_config cfg = {.mode = SB_MODE_NAMESPACE, .shared_dir = "/nonexistent-vufsd"};
    SB_CHECK(sb_enter(&cfg, &proc_fd) == -ENOENT);
    SB_CHECK(proc_fd == -1);
    cfg.shared_dir = NULL;
    SB_CHECK(sb_enter(&cfg, &proc_fd) == -EINVAL);
    cfg.mode = SB_MODE_CHROOT;
    SB_CHECK(sb_enter(&cfg, &proc_fd) == -EINVAL);
    cfg.shared_dir = "/nonexistent-vufsd";
    SB_CHECK(sb_enter(&cfg, &proc_fd) == -ENOENT);
    cfg.mode = (enum sb_mode)9;
    SB_CHECK(sb_enter(&cfg, &proc_fd) == -EINVAL);
    return 0;
}

static void test_none_and_errors(void **state)
{
    sb_assert_child_ok(sb_test_fork(child_none, NULL));
    sb_assert_child_ok(sb_test_fork(child_errors, NULL));
}

/* ---- pid namespace: exit status and signal forwarding ------------------------------ */

static int child_pidns_exit(void *arg)
{
    if (enter_pid_ns() != 0)
        return 99;
    /* pid 1 of the new namespace; the parent exits with our status. */
    _exit(getpid() == 1 ? 42 : 98);
}

static int ready_pipe[2];

static int child_pidns_signal(void *arg)
{
    if (enter_pid_ns() != 0)
        return 99;
    close(ready_pipe[0]);
    if (write(ready_pipe[1], "r", 1) != 1)
        _exit(97);
    for (;;)
        pause(); /* until the forwarded SIGTERM ends us */
}

static void test_pid_namespace(void **state)
{
    int st = sb_test_fork(child_pidns_exit, NULL);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 42);

    assert_int_equal(pipe(ready_pipe), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_pidns_signal(NULL));
    close(ready_pipe[1]);
    char c;
    assert_int_equal(read(ready_pipe[0], &c, 1), 1); /* pid 1 runs, handler installed */
    close(ready_pipe[0]);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 128 + SIGTERM);
}

/* ---- Capabilities ---------------------------------------------------------------- */

struct caps_case {
    unsigned features;
    const char *modcaps;
    uint64_t expect;
};

static int child_caps(void *arg)
{
    const struct caps_case *c = arg;
    gid_t extra[2] = {1234, 5678};
    SB_CHECK(setgroups(2, extra) == 0);
    SB_CHECK(getgroups(0, NULL) == 2);
    unsigned long long start = 0;
    SB_CHECK(sb_test_status_field("CapEff", 1, &start) == 0);

    struct sb_config cfg = {.mode = SB_MODE_NONE, .features = c->features, .modcaps = c->modcaps};
    SB_CHECK(sb_drop_caps(&cfg) == 0);

    unsigned long long eff = 0, prm = 0, inh = 0, bnd = 0, amb = 0;
    SB_CHECK(sb_test_status_field("CapEff", 1, &eff) == 0);
    SB_CHECK(sb_test_status_field("CapPrm", 1, &prm) == 0);
    SB_CHECK(sb_test_status_field("CapInh", 1, &inh) == 0);
    SB_CHECK(sb_test_status_field("CapBnd", 1, &bnd) == 0);
    SB_CHECK(sb_test_status_field("CapAmb", 1, &amb) == 0);
    if (eff != c->expect || prm != c->expect)
        fprintf(stderr, "CapEff %llx CapPrm %llx expected %llx\n", eff, prm,
                (unsigned long long)c->expect);
    SB_CHECK(eff == c->expect);
    SB_CHECK(prm == c->expect);
    SB_CHECK(inh == 0);
    SB_CHECK(amb == 0);
    /* Emptying the bounding set needs CAP_SETPCAP at the start. */
    SB_CHECK((start & BIT(CAP_SETPCAP)) ? bnd == 0 : bnd != 0);
    /* CVE-2022-0358: no supplementary group survives. */
    SB_CHECK(getgroups(0, NULL) == 0);
    /* And the dropped ones are really gone. */
    if (!(c->expect & BIT(CAP_SYS_ADMIN)))
        SB_CHECK(unshare(CLONE_NEWUTS) == -1 && errno == EPERM);
    return 0;
}

static void test_caps_exact(void **state)
{
    const struct caps_case cases[] = {
        {0, NULL, BASE_CAPS},
        {SB_FEAT_XATTR | SB_FEAT_LOCKS | SB_FEAT_DAX, NULL, BASE_CAPS},
        {SB_FEAT_FILE_HANDLES, NULL, BASE_CAPS | BIT(CAP_DAC_READ_SEARCH)},
        {0, "+sys_admin:-mknod", (BASE_CAPS | BIT(CAP_SYS_ADMIN)) & ~BIT(CAP_MKNOD)},
        {0, "-chown:-dac_override:-fowner:-fsetid:-setgid:-setuid:-mknod:-setfcap", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        sb_assert_child_ok(sb_test_fork(child_caps, (void *)&cases[i]));
}

static int child_caps_bad(void *arg)
{
    unsigned long long before = 0, after = 0;
    SB_CHECK(sb_test_status_field("CapEff", 1, &before) == 0);
    struct sb_config cfg = {.mode = SB_MODE_NONE, .modcaps = "+chown:-nosuchcap"};
    SB_CHECK(sb_drop_caps(&cfg) == -EINVAL);
    SB_CHECK(sb_test_status_field("CapEff", 1, &after) == 0);
    SB_CHECK(before == after); /* nothing applied on a bad list */
    return 0;
}

/* An unprivileged daemon has nothing to drop: success, no change. */
static int child_caps_unprivileged(void *arg)
{
    SB_CHECK(setgroups(0, NULL) == 0);
    SB_CHECK(setresgid(65534, 65534, 65534) == 0);
    SB_CHECK(setresuid(65534, 65534, 65534) == 0);
    unsigned long long eff = 1;
    SB_CHECK(sb_test_status_field("CapEff", 1, &eff) == 0 && eff == 0);
    struct sb_config cfg = {.mode = SB_MODE_NONE};
    SB_CHECK(sb_drop_caps(&cfg) == 0);
    return 0;
}

static void test_caps_errors(void **state)
{
    sb_assert_child_ok(sb_test_fork(child_caps_bad, NULL));
    sb_assert_child_ok(sb_test_fork(child_caps_unprivileged, NULL));
}

/* The whole sequence main runs, in order, then real work inside the sandbox. */
static int child_full_sequence(void *arg)
{
    SB_CHECK(enter_pid_ns() == 0);
    struct sb_config cfg = {.mode = SB_MODE_NAMESPACE,
                            .shared_dir = share,
                            .seccomp = SB_SECCOMP_KILL,
                            .features = SB_FEAT_XATTR};
    SB_CHECK(sb_config_check(&cfg, NULL) == 0);
    SB_CHECK(sb_apply_rlimit(&cfg, NULL) == 0);
    int proc_fd = -1;
    SB_CHECK(sb_enter(&cfg, &proc_fd) == 0);
    SB_CHECK(sb_drop_caps(&cfg) == 0);
    SB_CHECK(sb_seccomp_load(&cfg) == 0);
    SB_CHECK(check_root_is_share());
    SB_CHECK(check_host_invisible());
    SB_CHECK(check_proc_reopen(proc_fd));
    int fd = open("/sub/new", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    SB_CHECK(fd >= 0);
    SB_CHECK(write(fd, "x", 1) == 1);
    close(fd);
    SB_CHECK(unlinkat(AT_FDCWD, "/sub/new", 0) == 0); /* the daemon only uses *at() */
    _exit(0);
}

static void test_full_sequence(void **state)
{
    sb_assert_child_ok(sb_test_fork(child_full_sequence, NULL));
}

int main(void)
{
    if (!sb_test_privileged()) {
        fprintf(stderr, "needs root with CAP_SYS_ADMIN: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_namespace),       cmocka_unit_test(test_chroot),
        cmocka_unit_test(test_none_and_errors), cmocka_unit_test(test_pid_namespace),
        cmocka_unit_test(test_caps_exact),      cmocka_unit_test(test_caps_errors),
        cmocka_unit_test(test_full_sequence),
    };
    return cmocka_run_group_tests(tests, setup_share, teardown_share);
}
