/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The passthrough filesystem: serves the shared directory through struct fll_ops.
 * Part of daemon/ (prefix pt_), built as a library of its own that uses
 * fuse_lowlevel/ and dax/ only: it knows its settings (struct pt_config), never
 * the command line's.
 */
#ifndef VUFSD_PASSTHROUGH_H
#define VUFSD_PASSTHROUGH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fll.h"

/* How long the guest may cache entries and attributes, and its page cache. */
enum pt_cache {
    PT_CACHE_AUTO,     /* entry/attr timeout 1 s */
    PT_CACHE_ALWAYS,   /* 86400 s, keep page cache across opens */
    PT_CACHE_METADATA, /* attrs cached, data direct */
    PT_CACHE_NEVER,    /* 0 s, direct I/O */
};

/*
 * Who changes the shared directory's files (--share-writers): any process on
 * the host as well as the guest (the default), or the guest alone. Decides
 * whether the DAX window may map files themselves (pt_dax.c).
 */
enum pt_writers {
    PT_WRITERS_ANY,
    PT_WRITERS_GUEST,
};

/* What a known inode keeps (--inode-file-handles). */
enum pt_inode_handles {
    PT_HANDLES_NEVER,     /* an O_PATH fd */
    PT_HANDLES_PREFER,    /* a file handle where the filesystem makes one, else the fd */
    PT_HANDLES_MANDATORY, /* a file handle, or the lookup fails */
};

struct pt_config {
    const char *shared_dir;
    enum pt_cache cache;
    bool writeback;
    bool readdirplus;
    bool allow_direct_io;
    bool allow_mmap;
    bool xattr;
    const char *xattrmap;   /* --xattrmap rules, or NULL (implies xattr) */
    bool posix_acl;         /* needs xattr */
    bool security_label;
    bool killpriv_v2;
    bool announce_submounts;
    bool no_posix_lock;     /* the guest keeps POSIX locks local */
    bool no_flock;          /* the guest keeps flock locks local */
    bool readonly;
    enum pt_writers writers;
    enum pt_inode_handles inode_file_handles;
    const char *translate_uid; /* space-separated --translate-uid rules, or NULL */
    const char *translate_gid;
    /* The RLIMIT_NOFILE the fd budget is cut from; 0 = the limit in force. */
    uint64_t rlimit_nofile;
};

struct pt_fs;

/*
 * Opens the shared directory (cfg->shared_dir) and prepares the inode and handle
 * tables: 0 and *out, or a negative errno (*out NULL). Called before the sandbox
 * is entered, so the directory is resolved on the host; after pivot_root the fs
 * keeps working through its fds. cfg is not kept.
 */
int pt_fs_new(const struct pt_config *cfg, struct pt_fs **out);
void pt_fs_free(struct pt_fs *fs);

/* The operations table to hand to fll_session_new() with fs as userdata. */
const struct fll_ops *pt_fs_ops(void);

/*
 * Forgets every inode and handle the client knew (DESTROY, device reset,
 * frontend disconnect): the next INIT starts from a clean table. SETLKW
 * requests still waiting for their lock are completed first with EINTR
 * (fll_reply_err from the calling thread), so the transport must call this
 * while their request buffers are still valid.
 */
void pt_fs_reset(struct pt_fs *fs);

/*
 * Completes every SETLKW still waiting for its lock with EINTR, now, from the
 * calling thread (fll_reply_err -> the transport's complete()). A parked SETLKW
 * counts as in flight for the transport, so a transport that waits for its
 * queues to drain (stop, reset, disconnect) must call this first, while the
 * request buffers are still mapped; otherwise the drain waits for a lock that
 * another client may never release.
 */
void pt_fs_cancel_waits(struct pt_fs *fs);

/*
 * The fd budget (CVE-2020-10717): inode O_PATH fds, open handles and lock
 * descriptions the fs may hold (with file handles also the mount fds and the
 * fd cache). The one rule: cfg->rlimit_nofile minus 64 + 5 % headroom for the
 * daemon itself (its sockets, eventfds, memory regions, logs), at least 8;
 * past it, LOOKUP, OPEN, CREATE... fail with EMFILE while everything already
 * open keeps working.
 */
long pt_fs_fd_budget(const struct pt_fs *fs);

/*
 * --inode-file-handles prefer|mandatory: known inodes keep a file handle instead
 * of an O_PATH fd, so their number is not bounded by RLIMIT_NOFILE. pt_fs_new
 * fails with mandatory when the share's filesystem makes no handles (prefer
 * serves with fds). Opening a handle needs CAP_DAC_READ_SEARCH: once the
 * sandbox has dropped what it drops, pt_fs_check_handles opens the root's
 * handle; mandatory fails with its errno, prefer goes back to O_PATH fds
 * (*fell_back). Call it before serving.
 */
int pt_fs_check_handles(struct pt_fs *fs, bool *fell_back);

/*
 * Checks cfg's --translate-uid / --translate-gid rules (idmap.c): 0, or -EINVAL
 * with a sentence naming the bad rule in err.
 */
int pt_fs_check_ids(const struct pt_config *cfg, char *err, size_t errlen);

/*
 * Bad --translate-uid/gid rules are -EINVAL. --xattrmap implies --xattr;
 * --posix-acl without xattrs is -EINVAL.
 * pt_fs_new sets the process umask to 0 and, as root, drops supplementary groups.
 */

/*
 * DAX: serve FUSE_SETUPMAPPING/REMOVEMAPPING and FUSE_ATTR_DAX from window w
 * (node ids are its file keys). While the window is not usable (no frontend
 * that can map: dax_window_usable) the mapping requests get ENOSYS and INIT
 * offers no map_alignment, as without a window.
 * qemu_rules: the frontend maps as QEMU 11.1 does: every range writable whatever
 * the mapping's access (a file it maps needs a read-write fd), and only ranges
 * inside the file. A range the frontend maps from the file itself (a direct
 * mapping) is chosen only where that is safe: --share-writers guest, a range
 * inside the file, a local file system (pt_dax.c); everything else is backed by the
 * window store, which any size of file and a --readonly share can use.
 * Call once, before serving; pt_fs_free does not free w.
 */
struct dax_window;
void pt_fs_set_dax(struct pt_fs *fs, struct dax_window *w, bool qemu_rules);
/*
 * For the window's dax_ops.open: opens the regular file behind nodeid as the
 * daemon (the caller's access was checked by the SETUPMAPPING that made the
 * mapping), O_RDWR when writable (or for_frontend under qemu_rules) else
 * O_RDONLY: for the frontend to map (a survivor of a split) or for the window's
 * own write-back and merges. Returns the fd (the caller closes it) or -ESTALE,
 * -EINVAL (not a regular file), -EROFS (read-write on a --readonly share),
 * -errno. May free the inode it looked up, and with it its mappings
 * (pt_dax_inode_gone): call it owning no slot of the window.
 */
int pt_fs_dax_open(struct pt_fs *fs, uint64_t nodeid, bool writable, bool for_frontend);
/* A restart carried a mapping of nodeid over: its I/O goes by the window. */
void pt_fs_dax_mapped(struct pt_fs *fs, uint64_t nodeid);

/* ---- Saved state (pt_state_*.c; the container is state/state.h) --------------------- */

struct vst_writer;
struct vst_state;
struct vst_fds;
struct vst_err;

/*
 * What the guest holds in the filesystem, as sections VST_SEC_FS ..
 * VST_SEC_FS_LOCKS: what INIT negotiated, every node id with what it names,
 * every open handle with its flags, every POSIX lock owner. With fds (a
 * restart) the inodes', handles' and owners' fds are added to fds and travel
 * as they are (locks with them); with fds NULL (a file, a migration) objects
 * are named by path and file handle and locks by their ranges. Call with no
 * request running (a live snapshot is consistent per record only). 0, -ENOMEM.
 */
int pt_state_save(struct pt_fs *fs, struct vst_writer *w, struct vst_fds *fds);

struct pt_state_report {
    unsigned inodes, handles, owners, locks;        /* restored (locks: taken again) */
    unsigned inodes_lost, handles_lost, locks_lost; /* named, not restored */
};

/*
 * Loads that state into fs, which must be fresh (only its root known, no
 * handle; before any request). The state is untrusted: every count, index,
 * generation, flag, fd index and handle is checked, and each object is
 * verified before it gets its node id back (see pt_state_load.c: fds must be the
 * objects their records describe; without fds objects are found beneath the
 * share and must carry the saved file handle). An object that cannot be found
 * again is not an error: it is counted in rep and its node id answers ESTALE.
 * A malformed state, one saved for another shared directory, or an fd that is
 * not what its record says: -EINVAL/-EBADMSG with err saying why, and fs is
 * reset (nothing of the state kept). fds the state does not take stay in fds.
 */
int pt_state_load(struct pt_fs *fs, const struct vst_state *st, struct vst_fds *fds,
                  struct pt_state_report *rep, struct vst_err *err);

/* The file type (S_IFMT bits) of the inode nodeid names, or -ESTALE. */
int pt_fs_node_type(struct pt_fs *fs, uint64_t nodeid);

/*
 * A restart: every parked SETLKW is taken off its wait unanswered and its
 * request handed to fn, which must release it without a reply (the next
 * process runs the same request again from the guest's buffers).
 */
void pt_fs_detach_waits(struct pt_fs *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx);

#endif
