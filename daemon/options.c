/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Table-driven option parsing: every setting is one row of vopt_table naming the
 * config field it fills and how its value is read. GOption long options and
 * legacy -o keys both resolve to rows, so `--cache never` and `-o cache=never`
 * cannot drift apart.
 */
#include "options.h"

#include <errno.h>
#include <glib.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vu_msg.h"

struct vopt_enum {
    const char *name;
    int value;
};

/* The daemon's own enums; the modules' are read by their parsers (struct vopt_parser). */
static const struct vopt_enum vopt_cache_names[] = {
    {"auto", PT_CACHE_AUTO},
    {"always", PT_CACHE_ALWAYS},
    {"metadata", PT_CACHE_METADATA},
    {"never", PT_CACHE_NEVER},
    {"none", PT_CACHE_NEVER}, /* the legacy daemon's name for never */
    {NULL, 0},
};
static const struct vopt_enum vopt_handles_names[] = {
    {"never", PT_HANDLES_NEVER},
    {"prefer", PT_HANDLES_PREFER},
    {"mandatory", PT_HANDLES_MANDATORY},
    {NULL, 0},
};
static const struct vopt_enum vopt_writers_names[] = {
    {"any", PT_WRITERS_ANY},
    {"guest", PT_WRITERS_GUEST},
    {NULL, 0},
};
static const struct vopt_enum vopt_dax_protocol_names[] = {
    {"shmem", VUFSD_DAX_PROTO_SHMEM},
    {"legacy", VUFSD_DAX_PROTO_LEGACY},
    {NULL, 0},
};
static const struct vopt_enum vopt_log_names[] = {
    {"error", VUFSD_LOG_ERROR}, {"warn", VUFSD_LOG_WARN},   {"info", VUFSD_LOG_INFO},
    {"debug", VUFSD_LOG_DEBUG}, {"trace", VUFSD_LOG_DEBUG}, {NULL, 0},
};

/*
 * A module's enum, read by the module's own parser. The names for an error
 * message come from its name function, which calls a value it does not know "?".
 */
struct vopt_parser {
    int (*parse)(const char *s, void *out);
    const char *(*name)(int value);
};

static int vopt_sb_mode_parse(const char *s, void *out)
{
    return sb_mode_parse(s, out);
}
static const char *vopt_sb_mode_name(int v)
{
    return sb_mode_name((enum sb_mode)v);
}
static int vopt_sb_seccomp_parse(const char *s, void *out)
{
    return sb_seccomp_action_parse(s, out);
}
static const char *vopt_sb_seccomp_name(int v)
{
    return sb_seccomp_action_name((enum sb_seccomp_action)v);
}
static int vopt_dax_policy_parse(const char *s, void *out)
{
    return dax_policy_parse(s, out);
}
static const char *vopt_dax_policy_name(int v)
{
    return dax_policy_name((enum dax_policy)v);
}

static const struct vopt_parser vopt_sandbox = {vopt_sb_mode_parse, vopt_sb_mode_name};
static const struct vopt_parser vopt_seccomp = {vopt_sb_seccomp_parse, vopt_sb_seccomp_name};
static const struct vopt_parser vopt_dax_policy = {vopt_dax_policy_parse, vopt_dax_policy_name};


enum vopt_kind {
    VOPT_STR,    /* char * field, replaced */
    VOPT_STRS,   /* char * field, repeatable: values joined with spaces */
    VOPT_TRUE,   /* bool field set */
    VOPT_FALSE,  /* bool field cleared */
    VOPT_UINT,   /* unsigned field, decimal, at most .max */
    VOPT_U64,    /* uint64_t field, decimal */
    VOPT_FD,     /* int field, a file descriptor number */
    VOPT_ENUM,   /* enum field, one of .names */
    VOPT_MODULE, /* enum field of a module, read by .parser */
    VOPT_SIZE,   /* uint64_t field, with K/M/G suffixes, a page multiple */
    VOPT_ACCEPT, /* a switch that asks for what vufsd always does; no field */
};

struct vopt_row {
    const char *name; /* long option or legacy key, without dashes */
    enum vopt_kind kind;
    size_t off;
    const void *names; /* VOPT_ENUM: struct vopt_enum[]; VOPT_MODULE: struct vopt_parser */
    unsigned long max;
    bool legacy_only; /* only reachable through -o */
};

#define F(field) offsetof(struct vufsd_config, field)

static const struct vopt_row vopt_table[] = {
    /* Long options (Rust virtiofsd names, then vufsd's own). */
    {"socket-path", VOPT_STR, F(socket_path)},
    {"fd", VOPT_FD, F(listen_fd)},
    {"socket-group", VOPT_STR, F(socket_group)},
    {"tag", VOPT_STR, F(tag)},
    {"num-request-queues", VOPT_UINT, F(num_request_queues), NULL, 16},
    {"shared-dir", VOPT_STR, F(shared_dir)},
    {"cache", VOPT_ENUM, F(cache), vopt_cache_names},
    {"writeback", VOPT_TRUE, F(writeback)},
    {"no-readdirplus", VOPT_FALSE, F(readdirplus)},
    {"allow-direct-io", VOPT_TRUE, F(allow_direct_io)},
    {"allow-mmap", VOPT_TRUE, F(allow_mmap)},
    {"xattr", VOPT_TRUE, F(xattr)},
    {"xattrmap", VOPT_STR, F(xattrmap)},
    {"posix-acl", VOPT_TRUE, F(posix_acl)},
    {"security-label", VOPT_TRUE, F(security_label)},
    {"killpriv-v2", VOPT_TRUE, F(killpriv_v2)},
    {"announce-submounts", VOPT_TRUE, F(announce_submounts)},
    {"readonly", VOPT_TRUE, F(readonly)},
    {"inode-file-handles", VOPT_ENUM, F(inode_file_handles), vopt_handles_names},
    {"thread-pool-size", VOPT_UINT, F(thread_pool_size), NULL, 1024},
    {"queue-threads", VOPT_UINT, F(queue_threads), NULL, 16},
    {"poll-us", VOPT_UINT, F(poll_us), NULL, 1000000},
    {"poll-loadavg", VOPT_STR, F(poll_loadavg)},
    {"rlimit-nofile", VOPT_U64, F(rlimit_nofile)},
    {"sandbox", VOPT_MODULE, F(sandbox), &vopt_sandbox},
    {"seccomp", VOPT_MODULE, F(seccomp), &vopt_seccomp},
    {"modcaps", VOPT_STR, F(modcaps)},
    {"translate-uid", VOPT_STRS, F(translate_uid)},
    {"translate-gid", VOPT_STRS, F(translate_gid)},
    {"uid-map", VOPT_STRS, F(uid_map)},
    {"gid-map", VOPT_STRS, F(gid_map)},
    {"log-level", VOPT_ENUM, F(log_level), vopt_log_names},
    {"syslog", VOPT_TRUE, F(syslog)},
    {"reconnect", VOPT_TRUE, F(reconnect)},
    {"mount", VOPT_STR, F(mountpoint)},
    {"dax-window", VOPT_SIZE, F(dax_window)},
    {"dax-policy", VOPT_MODULE, F(dax_policy), &vopt_dax_policy},
    {"dax-protocol", VOPT_ENUM, F(dax_protocol), vopt_dax_protocol_names},
    {"share-writers", VOPT_ENUM, F(share_writers), vopt_writers_names},
    {"stats-file", VOPT_STR, F(stats_file)},
    {"save-state", VOPT_STR, F(save_state)},
    {"restore-state", VOPT_STR, F(restore_state)},
    {"unsafe-no-isolation", VOPT_TRUE, F(unsafe_no_isolation)},

    /* Legacy -o keys (QEMU's C virtiofsd; the Rust daemon accepts them too). */
    {"source", VOPT_STR, F(shared_dir), NULL, 0, true},
    {"no_writeback", VOPT_FALSE, F(writeback), NULL, 0, true},
    {"no_xattr", VOPT_FALSE, F(xattr), NULL, 0, true},
    {"readdirplus", VOPT_TRUE, F(readdirplus), NULL, 0, true},
    {"no_readdirplus", VOPT_FALSE, F(readdirplus), NULL, 0, true},
    {"posix_acl", VOPT_TRUE, F(posix_acl), NULL, 0, true},
    {"no_posix_acl", VOPT_FALSE, F(posix_acl), NULL, 0, true},
    {"announce_submounts", VOPT_TRUE, F(announce_submounts), NULL, 0, true},
    {"killpriv_v2", VOPT_TRUE, F(killpriv_v2), NULL, 0, true},
    {"no_killpriv_v2", VOPT_FALSE, F(killpriv_v2), NULL, 0, true},
    {"security_label", VOPT_TRUE, F(security_label), NULL, 0, true},
    {"no_security_label", VOPT_FALSE, F(security_label), NULL, 0, true},
    {"allow_direct_io", VOPT_TRUE, F(allow_direct_io), NULL, 0, true},
    {"no_allow_direct_io", VOPT_FALSE, F(allow_direct_io), NULL, 0, true},
    {"log_level", VOPT_ENUM, F(log_level), vopt_log_names, 0, true},
    {"thread_pool_size", VOPT_UINT, F(thread_pool_size), NULL, 1024, true},
    /* Locks are real in vufsd; the legacy switches that turn them on are accepted. */
    {"flock", VOPT_FALSE, F(no_flock), NULL, 0, true},
    {"no_flock", VOPT_TRUE, F(no_flock), NULL, 0, true},
    {"posix_lock", VOPT_FALSE, F(no_posix_lock), NULL, 0, true},
    {"no_posix_lock", VOPT_TRUE, F(no_posix_lock), NULL, 0, true},
};

#undef F

static const struct vopt_row *vopt_find(const char *name, bool legacy)
{
    for (size_t i = 0; i < G_N_ELEMENTS(vopt_table); i++) {
        const struct vopt_row *row = &vopt_table[i];
        if (row->legacy_only && !legacy)
            continue;
        if (strcmp(row->name, name) == 0)
            return row;
    }
    /* -o accepts the long names with '_' for '-' (cache, xattrmap, sandbox...). */
    if (legacy && strchr(name, '_')) {
        g_autofree char *dashed = g_strdup(name);
        for (char *p = dashed; *p; p++)
            if (*p == '_')
                *p = '-';
        return vopt_find(dashed, false);
    }
    return NULL;
}

static int vopt_parse_ulong(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;

    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int vopt_parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned shift = 0;

    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        return -EINVAL;
    }
    if (*end) {
        /* Optional "i", "iB" or "B" after the unit letter: K, KiB, KB all mean 1024. */
        const char *rest = end + 1;
        if (*rest == 'i')
            rest++;
        if (*rest == 'B' || *rest == 'b')
            rest++;
        if (*rest)
            return -EINVAL;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *out = (uint64_t)v << shift;
    return 0;
}

/* Applies one row; value is NULL for switches. */
static int vopt_apply(const struct vopt_row *row, const char *value, struct vufsd_config *cfg,
                      char **errmsg)
{
    void *base = (char *)cfg + row->off;
    unsigned long long n;
    int ret;

    switch (row->kind) {
    case VOPT_ACCEPT:
    case VOPT_TRUE:
    case VOPT_FALSE:
        if (value) {
            *errmsg = g_strdup_printf("option '%s' takes no value", row->name);
            return -EINVAL;
        }
        if (row->kind != VOPT_ACCEPT)
            *(bool *)base = row->kind == VOPT_TRUE;
        return 0;
    default:
        break;
    }
    if (!value) {
        *errmsg = g_strdup_printf("option '%s' needs a value", row->name);
        return -EINVAL;
    }
    switch (row->kind) {
    case VOPT_STR:
        if (!*value) {
            *errmsg = g_strdup_printf("option '%s' needs a non-empty value", row->name);
            return -EINVAL;
        }
        g_free(*(char **)base);
        *(char **)base = g_strdup(value);
        return 0;
    case VOPT_STRS: {
        /* Each value is one rule: no blank inside, since blanks join them. */
        if (!*value || strpbrk(value, " \t\n")) {
            *errmsg = g_strdup_printf("option '%s' needs a non-empty value without blanks",
                                      row->name);
            return -EINVAL;
        }
        char *old = *(char **)base;
        *(char **)base = old ? g_strdup_printf("%s %s", old, value) : g_strdup(value);
        g_free(old);
        return 0;
    }
    case VOPT_UINT:
        ret = vopt_parse_ulong(value, row->max, &n);
        if (ret < 0) {
            *errmsg = g_strdup_printf("option '%s': '%s' is not a number from 0 to %lu", row->name,
                                      value, row->max);
            return -EINVAL;
        }
        *(unsigned *)base = (unsigned)n;
        return 0;
    case VOPT_U64:
        ret = vopt_parse_ulong(value, UINT64_MAX, &n);
        if (ret < 0) {
            *errmsg = g_strdup_printf("option '%s': '%s' is not a number", row->name, value);
            return -EINVAL;
        }
        *(uint64_t *)base = n;
        return 0;
    case VOPT_FD:
        ret = vopt_parse_ulong(value, INT_MAX, &n);
        if (ret < 0) {
            *errmsg =
                g_strdup_printf("option '%s': '%s' is not a file descriptor", row->name, value);
            return -EINVAL;
        }
        *(int *)base = (int)n;
        return 0;
    case VOPT_SIZE: {
        uint64_t sz;
        long page = sysconf(_SC_PAGESIZE);
        if (vopt_parse_size(value, &sz) < 0) {
            *errmsg = g_strdup_printf("option '%s': '%s' is not a size (bytes, or K/M/G)",
                                      row->name, value);
            return -EINVAL;
        }
        if (page > 0 && sz % (uint64_t)page) {
            *errmsg = g_strdup_printf("option '%s': %s is not a multiple of the page size (%ld)",
                                      row->name, value, page);
            return -EINVAL;
        }
        *(uint64_t *)base = sz;
        return 0;
    }
    case VOPT_ENUM:
        for (const struct vopt_enum *e = row->names; e->name; e++) {
            if (strcmp(e->name, value) == 0) {
                *(int *)base = e->value;
                return 0;
            }
        }
        {
            g_autoptr(GString) s = g_string_new(NULL);
            for (const struct vopt_enum *e = row->names; e->name; e++)
                g_string_append_printf(s, "%s%s", s->len ? "|" : "", e->name);
            *errmsg =
                g_strdup_printf("option '%s': '%s' is not one of %s", row->name, value, s->str);
        }
        return -EINVAL;
    case VOPT_MODULE: {
        const struct vopt_parser *p = row->names;
        if (p->parse(value, base) == 0) {
            if (row->off == offsetof(struct vufsd_config, sandbox))
                cfg->sandbox_explicit = true;
            return 0;
        }
        g_autoptr(GString) s = g_string_new(NULL);
        for (int v = 0; strcmp(p->name(v), "?") != 0; v++)
            g_string_append_printf(s, "%s%s", s->len ? "|" : "", p->name(v));
        *errmsg = g_strdup_printf("option '%s': '%s' is not one of %s", row->name, value, s->str);
        return -EINVAL;
    }
    default:
        break;
    }
    *errmsg = g_strdup_printf("option '%s': internal error", row->name);
    return -EINVAL;
}

int vopt_parse_legacy(const char *opts, struct vufsd_config *cfg, char **errmsg)
{
    g_autoptr(GString) item = g_string_new(NULL);
    const char *p = opts;

    for (;;) {
        if (*p == '\\' && p[1] == ',') {
            g_string_append_c(item, ',');
            p += 2;
            continue;
        }
        if (*p && *p != ',') {
            g_string_append_c(item, *p++);
            continue;
        }
        if (item->len) {
            char *eq = strchr(item->str, '=');
            if (eq)
                *eq = '\0';
            const struct vopt_row *row = vopt_find(item->str, true);
            if (!row) {
                *errmsg = g_strdup_printf("unknown option '-o %s'", item->str);
                return -EINVAL;
            }
            int ret = vopt_apply(row, eq ? eq + 1 : NULL, cfg, errmsg);
            if (ret < 0)
                return ret;
            g_string_truncate(item, 0);
        }
        if (!*p)
            return 0;
        p++;
    }
}

void vopt_config_init(struct vufsd_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen_fd = -1;
    cfg->cache = PT_CACHE_AUTO;
    cfg->num_request_queues = 1;
    cfg->readdirplus = true;
    cfg->inode_file_handles = PT_HANDLES_NEVER;
    cfg->dax_policy = DAX_POLICY_AUTO;
    cfg->dax_protocol = VUFSD_DAX_PROTO_SHMEM;
    cfg->sandbox = SB_MODE_NAMESPACE;
    cfg->seccomp = SB_SECCOMP_KILL;
    cfg->log_level = VUFSD_LOG_INFO;
    cfg->poll_us = UINT_MAX; /* not given: VUFSD_POLL_US_DEFAULT, resolved in vopt_parse */
}

void vopt_config_clear(struct vufsd_config *cfg)
{
    g_free(cfg->socket_path);
    g_free(cfg->socket_group);
    g_free(cfg->tag);
    g_free(cfg->mountpoint);
    g_free(cfg->shared_dir);
    g_free(cfg->xattrmap);
    g_free(cfg->poll_loadavg);
    g_free(cfg->translate_uid);
    g_free(cfg->translate_gid);
    g_free(cfg->uid_map);
    g_free(cfg->gid_map);
    g_free(cfg->stats_file);
    g_free(cfg->save_state);
    g_free(cfg->restore_state);
    g_free(cfg->modcaps);
    vopt_config_init(cfg);
}

/* GOption state: the config being filled, and the switches that are not settings. */
struct vopt_state {
    struct vufsd_config *cfg;
    gboolean print_caps;
    gboolean version;
    gboolean foreground; /* legacy -f: vufsd always runs in the foreground */
};

static gboolean vopt_cb(const gchar *option_name, const gchar *value, gpointer data, GError **error)
{
    struct vopt_state *st = data;
    char *msg = NULL;
    const char *name = option_name;
    int ret;

    while (*name == '-')
        name++;
    if (strcmp(name, "o") == 0) {
        ret = vopt_parse_legacy(value, st->cfg, &msg);
    } else if (strcmp(name, "d") == 0) {
        st->cfg->log_level = VUFSD_LOG_DEBUG;
        return TRUE;
    } else if (strcmp(name, "inode-file-handles") == 0 && !value) {
        st->cfg->inode_file_handles = PT_HANDLES_PREFER; /* bare switch, as Rust's */
        return TRUE;
    } else {
        const struct vopt_row *row = vopt_find(name, false);
        if (!row) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION, "unknown option %s",
                        option_name);
            return FALSE;
        }
        ret = vopt_apply(row, value, st->cfg, &msg);
    }
    if (ret < 0) {
        g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, msg);
        g_free(msg);
        return FALSE;
    }
    return TRUE;
}

#define CB_ARG(lname, desc, argdesc)                                                               \
    {                                                                                              \
        lname, 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)vopt_cb, desc, argdesc                       \
    }
#define CB_SW(lname, desc)                                                                         \
    {                                                                                              \
        lname, 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK, (gpointer)vopt_cb, desc, NULL       \
    }

static const GOptionEntry vopt_entries[] = {
    CB_ARG("shared-dir", "Shared directory path", "DIR"),
    CB_ARG("socket-path", "vhost-user socket path (a pid file PATH.pid is kept next to it)",
           "PATH"),
    CB_ARG("fd", "File descriptor of a listening vhost-user socket", "N"),
    CB_ARG("socket-group", "Name of the group that owns the socket", "GROUP"),
    CB_ARG("tag",
           "Tag the guest mounts, told through the virtio config space (GET_CONFIG) to a "
           "frontend that asks the backend for it (QEMU's vhost-user-test-device-pci); "
           "without it that is not offered",
           "TAG"),
    CB_ARG("num-request-queues",
           "Request queues told through the config space with --tag (1-16, default 1; the "
           "frontend's queue count must be this plus the hiprio queue)",
           "N"),
    CB_ARG("cache", "Caching policy", "auto|always|metadata|never"),
    CB_SW("writeback", "Enable the writeback cache"),
    CB_SW("no-readdirplus", "Disable READDIRPLUS"),
    CB_SW("allow-direct-io", "Honour O_DIRECT from the guest"),
    CB_SW("allow-mmap", "Allow shared mmap with cache=never"),
    CB_SW("xattr", "Enable extended attributes"),
    CB_ARG("xattrmap", "Extended attribute mapping rules", "RULES"),
    CB_SW("posix-acl", "Enable POSIX ACLs (implies --xattr)"),
    CB_SW("security-label", "Enable security label support"),
    CB_SW("killpriv-v2", "Enable FUSE_HANDLE_KILLPRIV_V2"),
    CB_SW("announce-submounts", "Tell the guest about submounts"),
    CB_SW("readonly", "Export the shared directory read-only"),
    {"inode-file-handles", 0, G_OPTION_FLAG_OPTIONAL_ARG, G_OPTION_ARG_CALLBACK, (gpointer)vopt_cb,
     "Use file handles for inodes", "never|prefer|mandatory"},
    CB_ARG("thread-pool-size", "Worker threads (0 = serve in the queue threads)", "N"),
    CB_ARG("queue-threads", "Threads serving the request queues (0 = one per CPU, the default)",
           "N"),
    CB_ARG("poll-us", "Cap of the adaptive busy-poll of busy queues (default 32; 0 = never poll)",
           "USEC"),
    CB_ARG("poll-loadavg",
           "File in /proc/loadavg's format polling reads the running tasks from (default "
           "/proc/loadavg)",
           "FILE"),
    CB_ARG("rlimit-nofile", "RLIMIT_NOFILE to set", "N"),
    CB_ARG("sandbox", "Sandbox mode", "namespace|chroot|none"),
    CB_ARG("seccomp", "Action on a syscall outside the allowlist", "kill|log|trap|none"),
    CB_ARG("modcaps", "Modify the capability set", "+CAP:-CAP"),
    CB_ARG("translate-uid", "Translate uids between guest and host", "MAP"),
    CB_ARG("translate-gid", "Translate gids between guest and host", "MAP"),
    CB_ARG("uid-map", "uid map for the user namespace", ":NS:HOST:COUNT:"),
    CB_ARG("gid-map", "gid map for the user namespace", ":NS:HOST:COUNT:"),
    CB_ARG("log-level", "Log level", "error|warn|info|debug"),
    CB_SW("syslog", "Log to syslog instead of stderr"),
    {"print-capabilities", 0, 0, G_OPTION_ARG_NONE, NULL,
     "Print the vhost-user backend capabilities as JSON and exit", NULL},
    {"version", 'V', 0, G_OPTION_ARG_NONE, NULL, "Print the version and exit", NULL},
    CB_SW("reconnect", "Listen again after the frontend disconnects"),
    CB_ARG("mount",
           "Serve a local FUSE mount through /dev/fuse instead of vhost-user "
           "(implies --sandbox none; namespace and chroot are refused)",
           "MOUNTPOINT"),
    CB_ARG("dax-window", "DAX window size (K/M/G suffixes, page multiple; 0 = no DAX)", "SIZE"),
    CB_ARG("dax-policy", "Which files use the DAX window (default auto)", "never|always|auto"),
    CB_ARG("dax-protocol", "Frontend mapping protocol (default shmem)", "shmem|legacy"),
    CB_ARG("share-writers",
           "Who changes the shared files: any host process too (default), or the guest "
           "alone (the DAX window may then map them directly)", "any|guest"),
    CB_ARG("stats-file", "Rewrite the DAX statistics (JSON) in this file every second", "PATH"),
    CB_ARG("save-state",
           "Write what the guest holds (FUSE session, node ids, open files, locks) to this "
           "file on SIGUSR2 and when stopping with a frontend connected, for --restore-state",
           "PATH"),
    CB_ARG("restore-state",
           "Start from a state --save-state wrote: the frontend that connects next (a VMM "
           "reconnecting) goes on with its node ids, open files and locks; objects that "
           "cannot be found again answer ESTALE (see the man page)",
           "PATH"),
    CB_SW("unsafe-no-isolation", "Allow --sandbox none together with --seccomp none"),
    {"o", 'o', 0, G_OPTION_ARG_CALLBACK, (gpointer)vopt_cb, "Legacy options", "KEY[=VALUE],..."},
    {"d", 'd', G_OPTION_FLAG_NO_ARG | G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_CALLBACK,
     (gpointer)vopt_cb, "Debug log level (legacy)", NULL},
    {"foreground", 'f', G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, NULL,
     "Run in the foreground (always; legacy)", NULL},
    {NULL},
};

/*
 * The largest window QEMU 11.1 carries (the generic vhost-user device, shmem
 * protocol): it must be a power of two (a PCI BAR; any other size aborts QEMU at
 * realize), and QEMU turns each live 2 MiB mapping into a guest memory region,
 * aborting (an assertion in vhost-user.c) past VHOST_USER_MAX_RAM_SLOTS = 512
 * regions, guest RAM included. 512 MiB (256 ranges) leaves 256 regions for RAM;
 * 1 GiB (512 ranges) leaves none.
 */
#define VOPT_RANGE            (UINT64_C(2) << 20)
#define VOPT_QEMU_MAX_REGIONS 512u
#define VOPT_SHMEM_WINDOW_MAX (UINT64_C(512) << 20)

static int vopt_validate(const struct vufsd_config *cfg, char **errmsg)
{
    int transports = !!cfg->socket_path + (cfg->listen_fd >= 0) + !!cfg->mountpoint;

    if (transports == 0) {
        *errmsg = g_strdup("one of --socket-path, --fd or --mount is required");
        return -EINVAL;
    }
    if (transports > 1) {
        *errmsg = g_strdup("--socket-path, --fd and --mount are mutually exclusive");
        return -EINVAL;
    }
    if (!cfg->shared_dir) {
        *errmsg = g_strdup("--shared-dir (or -o source=) is required");
        return -EINVAL;
    }
    if (cfg->socket_group && !cfg->socket_path) {
        *errmsg = g_strdup("--socket-group needs --socket-path");
        return -EINVAL;
    }
    if (cfg->reconnect && cfg->mountpoint) {
        *errmsg = g_strdup("--reconnect makes no sense with --mount");
        return -EINVAL;
    }
    if (cfg->mountpoint && cfg->sandbox != SB_MODE_NONE) {
        /* Only reached with an explicit --sandbox: vopt_parse defaults it to none. */
        *errmsg = g_strdup("--mount works only with --sandbox none: the mount must be made, and "
                           "later removed, in the host's mount namespace, which needs "
                           "CAP_SYS_ADMIN there (seccomp still applies)");
        return -EINVAL;
    }
    if (cfg->sandbox == SB_MODE_NONE && cfg->seccomp == SB_SECCOMP_NONE &&
        !cfg->unsafe_no_isolation) {
        *errmsg = g_strdup("--sandbox none with --seccomp none leaves the host unprotected "
                           "against the guest; add --unsafe-no-isolation to really do that");
        return -EINVAL;
    }
    if (cfg->poll_us != UINT_MAX && cfg->poll_us && cfg->mountpoint) {
        *errmsg = g_strdup("--poll-us polls virtqueues: it needs a vhost-user frontend, not --mount");
        return -EINVAL;
    }
    if (cfg->dax_window && cfg->mountpoint) {
        *errmsg = g_strdup("--dax-window needs a vhost-user frontend, not --mount");
        return -EINVAL;
    }
    if (cfg->dax_window && cfg->dax_protocol == VUFSD_DAX_PROTO_SHMEM &&
        ((cfg->dax_window & (cfg->dax_window - 1)) || cfg->dax_window < VOPT_RANGE ||
         cfg->dax_window > VOPT_SHMEM_WINDOW_MAX)) {
        *errmsg = g_strdup_printf(
            "--dax-window with the shmem protocol must be a power of two from 2M to %lluM: "
            "QEMU exposes the window as a PCI BAR (a power of two) and makes every live 2 MiB "
            "mapping a guest memory region of its own, and it aborts past %u regions with "
            "guest RAM counted, which a 1G window (512 ranges) can reach",
            (unsigned long long)(VOPT_SHMEM_WINDOW_MAX >> 20), VOPT_QEMU_MAX_REGIONS);
        return -EINVAL;
    }
    if (cfg->tag && (cfg->tag[0] == '\0' || strlen(cfg->tag) > VU_FS_TAG_SIZE)) {
        *errmsg = g_strdup_printf("--tag must be 1 to %u bytes long", VU_FS_TAG_SIZE);
        return -EINVAL;
    }
    if (cfg->num_request_queues == 0 || cfg->num_request_queues > 16) {
        *errmsg = g_strdup("--num-request-queues must be 1 to 16");
        return -EINVAL;
    }
    if ((cfg->save_state || cfg->restore_state) && cfg->mountpoint) {
        *errmsg = g_strdup("--save-state and --restore-state keep a vhost-user frontend's "
                           "session: not with --mount");
        return -EINVAL;
    }
    if (cfg->stats_file && !cfg->dax_window) {
        *errmsg = g_strdup("--stats-file writes the DAX window's statistics: it needs --dax-window");
        return -EINVAL;
    }
    return 0;
}

int vopt_parse(int argc, char **argv, struct vufsd_config *cfg, enum vopt_action *action,
               char **errmsg)
{
    struct vopt_state st = {.cfg = cfg};
    GOptionEntry entries[G_N_ELEMENTS(vopt_entries)];
    g_autoptr(GError) err = NULL;
    g_autoptr(GOptionContext) ctx = g_option_context_new("- vhost-user virtio-fs daemon");
    g_option_context_set_description(
        ctx, "Signals (to the pid in SOCKET.pid, which forwards them):\n"
             "  SIGTERM, SIGINT  stop: finish the requests in flight, exit 0\n"
             "  SIGHUP           restart, or upgrade to the binary now at vufsd's path, under a\n"
             "                   running guest: the VMM keeps its connection; node ids, open\n"
             "                   files, locks and DAX mappings stay (see vufsd(1))\n"
             "  SIGUSR1          log the DAX window statistics\n"
             "  SIGUSR2          write --save-state's file now\n"
             "With --restore-state, objects that cannot be found again answer ESTALE, and\n"
             "open files whose lock another process took meanwhile answer EIO until closed.\n");

    memcpy(entries, vopt_entries, sizeof(entries));
    for (size_t i = 0; entries[i].long_name; i++) {
        if (strcmp(entries[i].long_name, "print-capabilities") == 0)
            entries[i].arg_data = &st.print_caps;
        else if (strcmp(entries[i].long_name, "version") == 0)
            entries[i].arg_data = &st.version;
        else if (strcmp(entries[i].long_name, "foreground") == 0)
            entries[i].arg_data = &st.foreground;
    }

    GOptionGroup *group = g_option_group_new("vufsd", "vufsd options", "vufsd options", &st, NULL);
    g_option_group_add_entries(group, entries);
    g_option_context_set_main_group(ctx, group);

    /* GOption rearranges the vector it parses: give it a copy. */
    g_autofree char **args = g_new0(char *, (size_t)argc + 1);
    for (int i = 0; i < argc; i++)
        args[i] = argv[i];
    int n = argc;
    char **pargs = args;
    if (!g_option_context_parse(ctx, &n, &pargs, &err)) {
        *errmsg = g_strdup(err->message);
        return -EINVAL;
    }
    if (n > 1) {
        *errmsg = g_strdup_printf("unexpected argument '%s'", pargs[1]);
        return -EINVAL;
    }
    if (cfg->posix_acl)
        cfg->xattr = true;
    if (st.version) {
        *action = VOPT_VERSION;
        return 0;
    }
    if (st.print_caps) {
        *action = VOPT_PRINT_CAPABILITIES;
        return 0;
    }
    /* --mount: the mount lives in the host's namespace (see vopt_validate). */
    if (cfg->mountpoint && !cfg->sandbox_explicit)
        cfg->sandbox = SB_MODE_NONE;
    int ret = vopt_validate(cfg, errmsg);
    if (ret < 0)
        return ret;
    /* Polling is on unless asked off; there are no virtqueues to poll with --mount. */
    if (cfg->poll_us == UINT_MAX)
        cfg->poll_us = cfg->mountpoint ? 0 : VUFSD_POLL_US_DEFAULT;
    *action = VOPT_RUN;
    return 0;
}

const char *vopt_unsupported(const struct vufsd_config *cfg)
{
    /* Settings accepted by the parser that no part of this build acts on yet. */
    return NULL;
}

char *vopt_capabilities_json(void)
{
    /*
     * The "fs" features virtiofsd implementations print, limited to what vufsd
     * does: "separate-options" (the long options above exist next to the legacy
     * -o forms) and "migrate-precopy" (dirty page logging, VHOST_F_LOG_ALL with
     * LOG_SHMFD, and the device state transfer, DEVICE_STATE: QEMU's pre-copy
     * live migration; not with --dax-window).
     */
    return g_strdup("{\"type\": \"fs\", \"features\": [\"separate-options\", \"migrate-precopy\"]}");
}
