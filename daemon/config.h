/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's settings, filled by the command line parser (options.c) and read
 * by main, which hands each part its own settings (struct pt_config, struct
 * sb_config, the window's struct dax_config). After parsing it is never written
 * again. A setting a module defines is that module's enum, read by that
 * module's parser: one definition per rule.
 */
#ifndef VUFSD_CONFIG_H
#define VUFSD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dax/dax.h"
#include "daemon/passthrough/passthrough.h"
#include "sandbox/sandbox.h"

enum vufsd_dax_protocol {
    VUFSD_DAX_PROTO_SHMEM,  /* mainline BACKEND_SHMEM_MAP/UNMAP (ids 9/10) */
    VUFSD_DAX_PROTO_LEGACY, /* virtio-fs branch SLAVE_FS_MAP/UNMAP (ids 6/7) */
};

enum vufsd_log_level {
    VUFSD_LOG_ERROR,
    VUFSD_LOG_WARN,
    VUFSD_LOG_INFO,
    VUFSD_LOG_DEBUG,
};

/*
 * --poll-us when not given: QEMU's default poll-max-ns for an IOThread (32 768
 * ns), the cap of the same adaptive rule (daemon/qpoll.h). Polling costs CPU only
 * while a queue is busy and a CPU is free for it.
 */
#define VUFSD_POLL_US_DEFAULT 32u

struct vufsd_config {
    /* Transport */
    char *socket_path;   /* --socket-path */
    int listen_fd;       /* --fd, -1 when unset */
    char *socket_group;  /* --socket-group */
    char *tag;           /* --tag: offered in the config space (GET_CONFIG) */
    unsigned num_request_queues; /* --num-request-queues: in the config space, default 1 */
    char *mountpoint;    /* --mount: serve /dev/fuse instead of vhost-user */
    bool reconnect;      /* --reconnect: listen again after a disconnect */
    unsigned thread_pool_size; /* --thread-pool-size, 0 = serve in queue threads */
    unsigned queue_threads; /* --queue-threads: request queue threads, 0 = one per CPU */
    unsigned poll_us;    /* --poll-us: adaptive busy-poll cap, 0 = off (VUFSD_POLL_US_DEFAULT) */
    char *poll_loadavg;  /* --poll-loadavg: the running-task count's file, NULL = /proc/loadavg */

    /* Filesystem */
    char *shared_dir;    /* --shared-dir / -o source= */
    enum pt_cache cache;
    bool writeback;
    bool readdirplus;    /* cleared by --no-readdirplus */
    bool allow_direct_io;
    bool allow_mmap;
    bool xattr;
    char *xattrmap;      /* --xattrmap rules, raw */
    bool posix_acl;
    bool security_label;
    bool killpriv_v2;
    bool announce_submounts;
    /* -o no_posix_lock / no_flock (libvirt with locking off): the guest
     * kernel keeps those locks local, as with the legacy daemon. */
    bool no_posix_lock;
    bool no_flock;
    bool readonly;
    enum pt_inode_handles inode_file_handles;
    char *translate_uid; /* --translate-uid, raw */
    char *translate_gid;
    char *uid_map;       /* --uid-map, raw */
    char *gid_map;

    /* DAX */
    uint64_t dax_window;           /* bytes; 0 = no DAX */
    enum dax_policy dax_policy;
    enum vufsd_dax_protocol dax_protocol;
    enum pt_writers share_writers; /* --share-writers */
    char *stats_file;

    /* Restart */
    char *save_state;    /* --save-state: written on SIGUSR2 and on stop */
    char *restore_state; /* --restore-state: loaded before serving */

    /* Security */
    enum sb_mode sandbox;
    bool sandbox_explicit; /* --sandbox (or -o sandbox=) was given */
    enum sb_seccomp_action seccomp;
    char *modcaps;       /* --modcaps=+cap:-cap */
    uint64_t rlimit_nofile; /* 0 = default */
    bool unsafe_no_isolation; /* allows --sandbox none with --seccomp none */

    /* Logging */
    enum vufsd_log_level log_level;
    bool syslog;
};

#endif
