/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The command line parser: long options, legacy -o forms, sizes, bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>
#include <glib.h>

#include "options.h"

struct parsed {
    struct vufsd_config cfg;
    enum vopt_action action;
    char *err;
    int ret;
};

static void parse(struct parsed *p, const char *line)
{
    g_auto(GStrv) words = g_strsplit(line, " ", -1);
    int argc = (int)g_strv_length(words);
    g_autofree char **argv = g_new0(char *, (size_t)argc + 2);
    argv[0] = (char *)"vufsd";
    for (int i = 0; i < argc; i++)
        argv[i + 1] = words[i];
    vopt_config_clear(&p->cfg);
    g_free(p->err);
    p->err = NULL;
    p->ret = vopt_parse(argc + 1, argv, &p->cfg, &p->action, &p->err);
}

static int setup(void **state)
{
    struct parsed *p = g_new0(struct parsed, 1);
    vopt_config_init(&p->cfg);
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    struct parsed *p = *state;
    vopt_config_clear(&p->cfg);
    g_free(p->err);
    g_free(p);
    return 0;
}

static void test_defaults(void **state)
{
    struct parsed *p = *state;
    parse(p, "--shared-dir /srv --socket-path /tmp/s");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->action, VOPT_RUN);
    assert_string_equal(p->cfg.shared_dir, "/srv");
    assert_string_equal(p->cfg.socket_path, "/tmp/s");
    assert_int_equal(p->cfg.listen_fd, -1);
    assert_int_equal(p->cfg.cache, PT_CACHE_AUTO);
    assert_true(p->cfg.readdirplus);
    assert_false(p->cfg.xattr);
    assert_int_equal(p->cfg.sandbox, SB_MODE_NAMESPACE);
    assert_int_equal(p->cfg.seccomp, SB_SECCOMP_KILL);
    assert_int_equal(p->cfg.thread_pool_size, 0);
    assert_int_equal(p->cfg.log_level, VUFSD_LOG_INFO);
    assert_null(vopt_unsupported(&p->cfg));
}

static void test_long_options(void **state)
{
    struct parsed *p = *state;
    parse(p, "--shared-dir=/srv --fd 5 --cache never --writeback --no-readdirplus "
             "--allow-direct-io --allow-mmap --posix-acl --security-label --killpriv-v2 "
             "--announce-submounts --readonly --inode-file-handles=mandatory "
             "--thread-pool-size 4 --rlimit-nofile 4096 --sandbox chroot --seccomp log "
             "--modcaps=+sys_admin:-mknod --translate-uid map:1000:0:1 --uid-map :0:1000:1: "
             "--log-level debug --syslog --tag myfs --xattrmap :ok:all::: --reconnect "
             "--dax-policy always --dax-protocol legacy");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->cfg.listen_fd, 5);
    assert_int_equal(p->cfg.cache, PT_CACHE_NEVER);
    assert_true(p->cfg.writeback);
    assert_false(p->cfg.readdirplus);
    assert_true(p->cfg.allow_direct_io);
    assert_true(p->cfg.allow_mmap);
    assert_true(p->cfg.posix_acl);
    assert_true(p->cfg.xattr); /* implied by --posix-acl */
    assert_true(p->cfg.security_label);
    assert_true(p->cfg.killpriv_v2);
    assert_true(p->cfg.announce_submounts);
    assert_true(p->cfg.readonly);
    assert_int_equal(p->cfg.inode_file_handles, PT_HANDLES_MANDATORY);
    assert_int_equal(p->cfg.thread_pool_size, 4);
    assert_int_equal(p->cfg.rlimit_nofile, 4096);
    assert_int_equal(p->cfg.sandbox, SB_MODE_CHROOT);
    assert_int_equal(p->cfg.seccomp, SB_SECCOMP_LOG);
    assert_string_equal(p->cfg.modcaps, "+sys_admin:-mknod");
    assert_string_equal(p->cfg.translate_uid, "map:1000:0:1");
    assert_string_equal(p->cfg.uid_map, ":0:1000:1:");
    assert_int_equal(p->cfg.log_level, VUFSD_LOG_DEBUG);
    assert_null(vopt_unsupported(&p->cfg));
    assert_true(p->cfg.syslog);
    assert_string_equal(p->cfg.tag, "myfs");
    assert_string_equal(p->cfg.xattrmap, ":ok:all:::");
    assert_true(p->cfg.reconnect);
    assert_int_equal(p->cfg.dax_policy, DAX_POLICY_ALWAYS);
    assert_int_equal(p->cfg.dax_protocol, VUFSD_DAX_PROTO_LEGACY);

    /* The id options repeat, as in the Rust daemon; the values are kept in order. */
    parse(p, "--shared-dir=/srv --fd=3 --translate-uid map:1:2:3 --translate-uid=forbid-guest:0:1 "
             "--translate-gid squash-guest:0:5:10 --uid-map :0:1000:1: --uid-map=:1:2:3: "
             "--gid-map :0:1000:1: -o translate_gid=host:5:0:1");
    assert_int_equal(p->ret, 0);
    assert_string_equal(p->cfg.translate_uid, "map:1:2:3 forbid-guest:0:1");
    assert_string_equal(p->cfg.translate_gid, "squash-guest:0:5:10 host:5:0:1");
    assert_string_equal(p->cfg.uid_map, ":0:1000:1: :1:2:3:");
    assert_string_equal(p->cfg.gid_map, ":0:1000:1:");
    /* A blank inside one value would split it into two rules: refused. */
    char *argv[] = {(char *)"vufsd", (char *)"--shared-dir=/srv", (char *)"--fd=3",
                    (char *)"--translate-uid=map:1:2:3 map:4:5:6", NULL};
    vopt_config_clear(&p->cfg);
    g_free(p->err);
    p->err = NULL;
    p->ret = vopt_parse(4, argv, &p->cfg, &p->action, &p->err);
    assert_int_equal(p->ret, -EINVAL);
    assert_non_null(strstr(p->err, "translate-uid"));

    parse(p, "--shared-dir /srv --socket-path /s --inode-file-handles");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->cfg.inode_file_handles, PT_HANDLES_PREFER);
}

static void test_legacy_o(void **state)
{
    struct parsed *p = *state;
    parse(p, "--socket-path /s -o source=/srv,cache=none,no_readdirplus,xattr,writeback "
             "-o sandbox=chroot,log_level=warn,killpriv_v2,flock,posix_lock "
             "-o xattrmap=:map\\,x::user.virtiofs.:");
    assert_int_equal(p->ret, 0);
    assert_string_equal(p->cfg.shared_dir, "/srv");
    assert_int_equal(p->cfg.cache, PT_CACHE_NEVER);
    assert_false(p->cfg.readdirplus);
    assert_true(p->cfg.xattr);
    assert_true(p->cfg.writeback);
    assert_int_equal(p->cfg.sandbox, SB_MODE_CHROOT);
    assert_int_equal(p->cfg.log_level, VUFSD_LOG_WARN);
    assert_true(p->cfg.killpriv_v2);
    assert_string_equal(p->cfg.xattrmap, ":map,x::user.virtiofs.:");

    parse(p, "--socket-path /s -o source=/srv,xattr,no_xattr,no_writeback");
    assert_int_equal(p->ret, 0);
    assert_false(p->cfg.xattr);
    assert_false(p->cfg.writeback);

    parse(p, "--socket-path /s -o source=/srv,bogus_key");
    assert_int_equal(p->ret, -EINVAL);
    assert_non_null(strstr(p->err, "bogus_key"));
    parse(p, "--socket-path /s -o source=/srv,writeback=1");
    assert_int_equal(p->ret, -EINVAL);
    parse(p, "--socket-path /s -o source=");
    assert_int_equal(p->ret, -EINVAL);
    parse(p, "--socket-path /s -o source=/srv,no_flock,no_posix_lock");
    assert_int_equal(p->ret, 0);
    assert_true(p->cfg.no_flock);
    assert_true(p->cfg.no_posix_lock);
    parse(p, "--socket-path /s -o source=/srv,no_flock,flock,posix_lock");
    assert_int_equal(p->ret, 0);
    assert_false(p->cfg.no_flock);
    assert_false(p->cfg.no_posix_lock);
}

static void test_bad_input(void **state)
{
    struct parsed *p = *state;
    const char *bad[] = {
        "--shared-dir /srv --socket-path /s --bogus",
        "--shared-dir /srv --socket-path /s --cache sometimes",
        "--shared-dir /srv --socket-path /s --thread-pool-size -1",
        "--shared-dir /srv --socket-path /s --thread-pool-size 4x",
        "--shared-dir /srv --socket-path /s --thread-pool-size 100000",
        "--shared-dir /srv --fd abc",
        "--shared-dir /srv --fd -3",
        "--shared-dir /srv --socket-path /s --sandbox jail",
        "--shared-dir /srv --socket-path /s --seccomp maybe",
        "--shared-dir /srv --socket-path /s --log-level loud",
        "--shared-dir /srv --socket-path /s --dax-window 12345",
        "--shared-dir /srv --socket-path /s --dax-window 1X",
        "--shared-dir /srv --socket-path /s --dax-window 99999999999999999999G",
        "--shared-dir /srv --socket-path /s stray-argument",
        "--shared-dir /srv",                           /* no transport */
        "--socket-path /s",                            /* no directory */
        "--shared-dir /srv --socket-path /s --fd 3",   /* two transports */
        "--shared-dir /srv --fd 3 --socket-group kvm", /* group without a path */
        "--shared-dir /srv --mount /mnt --reconnect",
        "--shared-dir /srv --socket-path /s --sandbox none --seccomp none",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        parse(p, bad[i]);
        if (p->ret != -EINVAL)
            fail_msg("accepted: %s", bad[i]);
        assert_non_null(p->err);
        assert_true(strlen(p->err) > 0);
    }
    parse(p, "--shared-dir /srv --socket-path /s --sandbox none --seccomp none "
             "--unsafe-no-isolation");
    assert_int_equal(p->ret, 0);
}

/*
 * The sandbox's and the window's settings are their modules' enums, read by
 * their parsers: every name the module gives is accepted and lands as that
 * value, and a bad one is refused with the module's names listed.
 */
static void test_module_enums(void **state)
{
    struct parsed *p = *state;
    g_autofree char *line = NULL;

    for (int m = SB_MODE_NAMESPACE; m <= SB_MODE_NONE; m++) {
        g_free(line);
        line = g_strdup_printf("--shared-dir /srv --socket-path /s --sandbox %s --seccomp kill",
                               sb_mode_name((enum sb_mode)m));
        parse(p, line);
        assert_int_equal(p->ret, 0);
        assert_int_equal(p->cfg.sandbox, m);
        assert_true(p->cfg.sandbox_explicit);
    }
    for (int a = SB_SECCOMP_KILL; a <= SB_SECCOMP_NONE; a++) {
        g_free(line);
        line = g_strdup_printf("--shared-dir /srv --socket-path /s -o seccomp=%s",
                               sb_seccomp_action_name((enum sb_seccomp_action)a));
        parse(p, line);
        assert_int_equal(p->ret, 0);
        assert_int_equal(p->cfg.seccomp, a);
    }
    for (int d = DAX_POLICY_NEVER; d <= DAX_POLICY_AUTO; d++) {
        g_free(line);
        line = g_strdup_printf("--shared-dir /srv --socket-path /s --dax-policy %s",
                               dax_policy_name((enum dax_policy)d));
        parse(p, line);
        assert_int_equal(p->ret, 0);
        assert_int_equal(p->cfg.dax_policy, d);
    }
    parse(p, "--shared-dir /srv --socket-path /s --sandbox jail");
    assert_int_equal(p->ret, -EINVAL);
    assert_string_equal(p->err, "option 'sandbox': 'jail' is not one of namespace|chroot|none");
    parse(p, "--shared-dir /srv --socket-path /s --seccomp maybe");
    assert_string_equal(p->err, "option 'seccomp': 'maybe' is not one of kill|log|trap|none");
    parse(p, "--shared-dir /srv --socket-path /s --dax-policy often");
    assert_string_equal(p->err, "option 'dax-policy': 'often' is not one of never|always|auto");
}

static void test_actions(void **state)
{
    struct parsed *p = *state;
    parse(p, "--print-capabilities");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->action, VOPT_PRINT_CAPABILITIES);
    parse(p, "-V");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->action, VOPT_VERSION);
    parse(p, "--version");
    assert_int_equal(p->action, VOPT_VERSION);
    g_autofree char *json = vopt_capabilities_json();
    assert_non_null(strstr(json, "\"type\": \"fs\""));
    assert_non_null(strstr(json, "\"features\""));
}

static void test_sizes_and_unsupported(void **state)
{
    struct parsed *p = *state;
    uint64_t v;
    assert_int_equal(vopt_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(vopt_parse_size("64k", &v), 0);
    assert_int_equal(v, 65536);
    assert_int_equal(vopt_parse_size("512M", &v), 0);
    assert_int_equal(v, 512ull << 20);
    assert_int_equal(vopt_parse_size("2G", &v), 0);
    assert_int_equal(v, 2ull << 30);
    assert_int_equal(vopt_parse_size("2GiB", &v), 0);
    assert_int_equal(v, 2ull << 30);
    assert_int_equal(vopt_parse_size("", &v), -EINVAL);
    assert_int_equal(vopt_parse_size("G", &v), -EINVAL);
    assert_int_equal(vopt_parse_size("-1G", &v), -EINVAL);
    assert_int_equal(vopt_parse_size("1Q", &v), -EINVAL);
    assert_int_equal(vopt_parse_size("1Gx", &v), -EINVAL);
    assert_int_equal(vopt_parse_size("17179869184G", &v), -ERANGE);

    parse(p, "--shared-dir /srv --socket-path /s --dax-window 512M");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->cfg.dax_window, 512ull << 20);
    assert_null(vopt_unsupported(&p->cfg));
    /* The shmem protocol's window is QEMU's PCI BAR, each live range a memory
     * region: a power of two, at most 512M (QEMU aborts past 512 regions). */
    const char *bad_windows[] = {"1G", "2G", "24M", "1M", "3M"};
    for (size_t i = 0; i < sizeof(bad_windows) / sizeof(bad_windows[0]); i++) {
        char line[128];
        snprintf(line, sizeof(line), "--shared-dir /srv --socket-path /s --dax-window %s",
                 bad_windows[i]);
        parse(p, line);
        assert_int_equal(p->ret, -EINVAL);
        assert_non_null(strstr(p->err, "power of two"));
    }
    /* The legacy protocol's window is the VMM's (cache-size=): not limited here. */
    parse(p, "--shared-dir /srv --socket-path /s --dax-window 2G --dax-protocol legacy");
    assert_int_equal(p->ret, 0);
    parse(p, "--shared-dir /srv --mount /mnt --dax-window 1G");
    assert_int_equal(p->ret, -EINVAL);
    assert_non_null(strstr(p->err, "--mount"));
    /* The statistics are the window's: no window, no stats file. */
    parse(p, "--shared-dir /srv --socket-path /s --stats-file /tmp/s.json");
    assert_int_equal(p->ret, -EINVAL);
    assert_non_null(strstr(p->err, "--dax-window"));
    parse(p, "--shared-dir /srv --socket-path /s --dax-window 64M --stats-file /tmp/s.json");
    assert_int_equal(p->ret, 0);
    assert_null(vopt_unsupported(&p->cfg));

    /* --poll-us is served (queue.c), on virtqueues only. */
    parse(p, "--shared-dir /srv --socket-path /s --poll-us 50");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->cfg.poll_us, 50);
    assert_null(vopt_unsupported(&p->cfg));
    parse(p, "--shared-dir /srv --socket-path /s --poll-us 1000001");
    assert_int_equal(p->ret, -EINVAL);
    parse(p, "--shared-dir /srv --mount /mnt --poll-us 50");
    assert_int_equal(p->ret, -EINVAL);
}

/* --mount mounts in the host's namespace: it implies --sandbox none and refuses
 * an explicit namespace or chroot sandbox. */
static void test_mount_sandbox(void **state)
{
    struct parsed *p = *state;
    parse(p, "--shared-dir /srv --mount /mnt");
    assert_int_equal(p->ret, 0);
    assert_int_equal(p->cfg.sandbox, SB_MODE_NONE);
    assert_false(p->cfg.sandbox_explicit);
    assert_int_equal(p->cfg.seccomp, SB_SECCOMP_KILL); /* seccomp stays on */
    parse(p, "--shared-dir /srv --mount /mnt --sandbox none");
    assert_int_equal(p->ret, 0);
    assert_true(p->cfg.sandbox_explicit);
    parse(p, "--shared-dir /srv --mount /mnt --sandbox namespace");
    assert_int_equal(p->ret, -EINVAL);
    assert_non_null(strstr(p->err, "--mount works only with --sandbox none"));
    parse(p, "--shared-dir /srv --mount /mnt --sandbox chroot");
    assert_int_equal(p->ret, -EINVAL);
    parse(p, "--shared-dir /srv --mount /mnt -o sandbox=chroot");
    assert_int_equal(p->ret, -EINVAL);
    /* Without --mount the default stays the namespace sandbox. */
    parse(p, "--shared-dir /srv --socket-path /tmp/s");
    assert_int_equal(p->cfg.sandbox, SB_MODE_NAMESPACE);
    assert_false(p->cfg.sandbox_explicit);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_defaults),  T(test_long_options), T(test_legacy_o),
        T(test_bad_input), T(test_actions),      T(test_sizes_and_unsupported),
        T(test_mount_sandbox), T(test_module_enums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
