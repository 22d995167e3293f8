/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fll: the FUSE wire protocol, transport neutral.
 *
 * A transport (the daemon's virtqueues, or a /dev/fuse session) hands a request
 * over as two iovec lists: the device-readable bytes the client sent (header and
 * arguments, and WRITE data) and the device-writable buffers the reply goes into.
 * fll decodes the request through a bounds-checked cursor, validates every
 * argument, calls the filesystem through struct fll_ops, writes exactly one reply
 * into the writable buffers and tells the transport how many bytes it wrote.
 *
 * Contract with the transport:
 *   - fll_session_process() takes a request whose in/out lists stay valid until
 *     the transport's complete() callback runs for it.
 *   - complete() runs exactly once per request, from the thread that finished it
 *     (usually the caller of fll_session_process(), but an operation that waits,
 *     such as a blocking SETLKW, completes later from another thread).
 *   - out_len == 0 means "no reply" (FORGET, BATCH_FORGET, an accepted
 *     INTERRUPT, a request too short to answer).
 *
 * Contract with the filesystem (struct fll_ops):
 *   - Each operation returns 0 (or a byte count where documented) on success
 *     and a negative errno on failure; fll turns that into the single reply.
 *   - Node ids, handles and names reach the operation already bounds-checked and
 *     NUL-terminated, names additionally checked with fll_name_valid().
 *     Everything else (ids existing, counts being sane) is the filesystem's job.
 *   - An operation may return FLL_ASYNC: it then owns the request and must call
 *     fll_reply_err() exactly once later.
 *
 * Errors: negative errno everywhere; the sign flips only when the reply header's
 * error field is written (fll_reply_err and the dispatcher), as FUSE wants.
 */
#ifndef VUFS_FLL_H
#define VUFS_FLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <linux/fuse.h>

/* ---- Protocol additions newer than the system's <linux/fuse.h> ---------------- */

/*
 * FUSE_STATX is an enum constant in a 7.39+ <linux/fuse.h>, so the header's
 * version (not #ifdef) decides whether to supply it. Layouts as in the
 * kernel's include/uapi/linux/fuse.h (7.39); their sizes are pinned by static
 * assertions in fll_ops_attr.c.
 */
#if FUSE_KERNEL_MINOR_VERSION < 39
#define FUSE_STATX 52
struct fuse_sx_time {
    int64_t tv_sec;
    uint32_t tv_nsec;
    int32_t __reserved;
};

struct fuse_statx {
    uint32_t mask;
    uint32_t blksize;
    uint64_t attributes;
    uint32_t nlink;
    uint32_t uid;
    uint32_t gid;
    uint16_t mode;
    uint16_t __spare0[1];
    uint64_t ino;
    uint64_t size;
    uint64_t blocks;
    uint64_t attributes_mask;
    struct fuse_sx_time atime;
    struct fuse_sx_time btime;
    struct fuse_sx_time ctime;
    struct fuse_sx_time mtime;
    uint32_t rdev_major;
    uint32_t rdev_minor;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint64_t __spare2[14];
};

struct fuse_statx_in {
    uint32_t getattr_flags;
    uint32_t reserved;
    uint64_t fh;
    uint32_t sx_flags;
    uint32_t sx_mask;
};

struct fuse_statx_out {
    uint64_t attr_valid;
    uint32_t attr_valid_nsec;
    uint32_t flags;
    uint64_t spare[2];
    struct fuse_statx stat;
};
#endif

#ifndef FUSE_HAS_EXPIRE_ONLY
#define FUSE_HAS_EXPIRE_ONLY (1ULL << 35)
#endif
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
/* 7.39: the supplementary group extension (fuse_ext_header type 32). */
#if FUSE_KERNEL_MINOR_VERSION < 39
#define FUSE_EXT_GROUPS 32
#endif

/* The newest protocol minor version fll speaks (Linux 6.12 guests send 7.41). */
#define FLL_KERNEL_MAJOR 7
#define FLL_KERNEL_MINOR 41
/* The oldest accepted: 7.31, Linux 5.4, the first kernel with virtio-fs (and the
 * protocol version that brought the DAX opcodes and map_alignment). */
#define FLL_MIN_MINOR 31

/*
 * Returned by an operation that will reply later with fll_reply_err(). Only
 * operations whose reply is a bare header (no body) may return it: setlk,
 * release, releasedir, flush, fsync, fsyncdir, fallocate, access, unlink,
 * rmdir, rename, setxattr, removexattr, syncfs, setupmapping, removemapping.
 * Operations returning byte counts (read, write, getxattr, ...) cannot: for
 * them 1 is a length. Any other positive return from an int operation is a
 * filesystem bug and is answered with EIO.
 */
#define FLL_ASYNC 1

/* Most entries a REMOVEMAPPING may carry (the kernel's PAGE_SIZE / 16). */
#define FLL_REMOVEMAPPING_MAX 256
/* Longest name (without NUL) and symlink target (with NUL) fll accepts. */
#define FLL_NAME_MAX 255
#define FLL_PATH_MAX 4096
/* Most iovecs one READ or WRITE is split into (the virtqueue size bound). */
#define FLL_IOV_MAX 1024
/* Longest security context name (with NUL) and value: the kernel's
 * XATTR_NAME_MAX + 1 and XATTR_SIZE_MAX. */
#define FLL_SECCTX_NAME_MAX 256
#define FLL_SECCTX_VALUE_MAX 65536

/* ---- Requests -------------------------------------------------------------- */

struct fll_session;

/*
 * The security context of the inode a CREATE, MKNOD, MKDIR, SYMLINK or TMPFILE
 * makes (FUSE_SECURITY_CTX): the xattr the guest's LSM wants on it, e.g.
 * "security.selinux". Copied out of the request and validated: name is
 * NUL-terminated, starts with "security." and is at most
 * FLL_SECCTX_NAME_MAX - 1 bytes; size is 1..FLL_SECCTX_VALUE_MAX.
 */
struct fll_secctx {
    const char *name;
    const void *value;
    size_t size;
};

/*
 * One request, owned by the transport. The transport fills the fields above the
 * line; fll fills the rest. Embed it in the transport's own request struct and
 * use container_of() in complete().
 */
struct fll_req {
    struct fll_session *se;
    const struct iovec *in; /* device-readable: what the client sent */
    unsigned in_cnt;
    const struct iovec *out; /* device-writable: where the reply goes */
    unsigned out_cnt;
    unsigned queue; /* transport queue index, for statistics and logging */
    /* ------------------------------------------------------------------------ */
    struct fuse_in_header hdr; /* copied once out of the client's buffer */
    bool completed;            /* debug check: exactly one completion */
    size_t out_size;           /* total bytes of the writable buffers */
    const struct fll_secctx *secctx; /* see fll_req_secctx() */
};

/*
 * The security context the client sent with a creating request, or NULL
 * (none sent, the client's LSM had none, or FUSE_SECURITY_CTX was not
 * negotiated). Valid during the operation call only.
 */
static inline const struct fll_secctx *fll_req_secctx(const struct fll_req *r)
{
    return r->secctx;
}

/* Who sent the request (from the header copied out of guest memory). */
static inline uid_t fll_req_uid(const struct fll_req *r)
{
    return r->hdr.uid;
}
static inline gid_t fll_req_gid(const struct fll_req *r)
{
    return r->hdr.gid;
}
static inline pid_t fll_req_pid(const struct fll_req *r)
{
    return (pid_t)r->hdr.pid;
}
void *fll_req_userdata(const struct fll_req *r);

/* ---- Bounds-checked cursor over an iovec list --------------------------------- */

/*
 * A cursor over guest buffers. Every read copies out (the guest may change the
 * memory under us) and fails, returning false/NULL, when fewer bytes remain.
 */
struct fll_cursor {
    const struct iovec *iov;
    unsigned cnt;
    unsigned idx; /* current iovec */
    size_t off;   /* offset in iov[idx] */
    size_t left;  /* bytes left in the whole list (bounded by a limit) */
};

void fll_cursor_init(struct fll_cursor *c, const struct iovec *iov, unsigned cnt, size_t limit);
size_t fll_cursor_left(const struct fll_cursor *c);
bool fll_cursor_copy(struct fll_cursor *c, void *dst, size_t n);
bool fll_cursor_skip(struct fll_cursor *c, size_t n);
/* Describes the next n bytes as up to max iovecs (no copy); -EINVAL if short,
 * -E2BIG if more than max iovecs would be needed; else the iovec count. */
int fll_cursor_iov(struct fll_cursor *c, struct iovec *dst, unsigned max, size_t n);
/* Writing direction: copies src into the buffers; false if they are too small. */
bool fll_cursor_put(struct fll_cursor *c, const void *src, size_t n);

/* A name from the client: not empty, not "." or "..", no '/'. */
bool fll_name_valid(const char *name);

/* ---- Directory listings ---------------------------------------------------- */

/* The reply buffer of READDIR / READDIRPLUS, filled by the filesystem. */
struct fll_dirbuf {
    char *buf;
    size_t size;
    size_t len;
    bool plus;
};

/*
 * Appends one entry; returns false (and adds nothing) when it does not fit.
 * For READDIR pass entry == NULL; for READDIRPLUS pass the entry the lookup
 * produced (a nodeid of 0 means "no lookup was done" and costs the client nothing).
 */
bool fll_dirbuf_add(struct fll_dirbuf *db, const char *name, uint64_t ino, uint32_t type,
                    uint64_t off, const struct fuse_entry_out *entry);

/* ---- The filesystem's operations --------------------------------------------- */

/*
 * What INIT negotiated; the filesystem may adjust 'want' in its init op.
 * fll then drops any bit the client did not offer, adds FUSE_MAX_PAGES /
 * FUSE_MAP_ALIGNMENT when max_pages / map_alignment are set and offered, adds
 * FUSE_INIT_EXT when a flags2 bit is wanted, and caps max_write to the
 * session's. The reply carries min(FLL_KERNEL_MINOR, the client's minor).
 */
struct fll_conn {
    uint32_t proto_minor;   /* the client's minor version */
    uint64_t capable;       /* flags the client offered (flags | flags2 << 32) */
    uint64_t want;          /* flags the filesystem asks for (subset of capable) */
    uint32_t max_write;     /* bytes per WRITE the transport can carry */
    uint16_t max_pages;     /* pages per request */
    uint16_t map_alignment; /* log2 of the DAX mapping alignment; 0 = none */
    uint32_t max_readahead;
    uint32_t time_gran;
};

struct fll_ops {
    int (*init)(void *fs, struct fll_conn *conn);
    void (*destroy)(void *fs);
    /*
     * The session ended because its driver was reset (fll_session_driver_stopped,
     * then a new INIT): as destroy, but what the old driver set up beside the
     * session went with it (a VMM drops a DAX window's mappings on a device
     * reset). NULL: destroy is called.
     */
    void (*reset)(void *fs);

    int (*lookup)(struct fll_req *r, uint64_t parent, const char *name, struct fuse_entry_out *out);
    /* No reply: nlookup is the client's count, untrusted. */
    void (*forget)(struct fll_req *r, uint64_t nodeid, uint64_t nlookup);
    int (*getattr)(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                   struct fuse_attr_out *out);
    int (*setattr)(struct fll_req *r, uint64_t nodeid, const struct fuse_setattr_in *in,
                   struct fuse_attr_out *out);
    /* Returns the target length (not NUL-terminated in buf). */
    int (*readlink)(struct fll_req *r, uint64_t nodeid, char *buf, size_t size);
    int (*symlink)(struct fll_req *r, uint64_t parent, const char *name, const char *target,
                   struct fuse_entry_out *out);
    int (*mknod)(struct fll_req *r, uint64_t parent, const char *name,
                 const struct fuse_mknod_in *in, struct fuse_entry_out *out);
    int (*mkdir)(struct fll_req *r, uint64_t parent, const char *name,
                 const struct fuse_mkdir_in *in, struct fuse_entry_out *out);
    int (*unlink)(struct fll_req *r, uint64_t parent, const char *name);
    int (*rmdir)(struct fll_req *r, uint64_t parent, const char *name);
    /* RENAME arrives with flags == 0; RENAME2 with the client's flags. */
    int (*rename)(struct fll_req *r, uint64_t parent, const char *name, uint64_t newparent,
                  const char *newname, uint32_t flags);
    int (*link)(struct fll_req *r, uint64_t nodeid, uint64_t newparent, const char *newname,
                struct fuse_entry_out *out);
    int (*open)(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                struct fuse_open_out *out);
    int (*create)(struct fll_req *r, uint64_t parent, const char *name,
                  const struct fuse_create_in *in, struct fuse_entry_out *entry,
                  struct fuse_open_out *open);
    /* TMPFILE: name is the placeholder the client sends; parent is the directory. */
    int (*tmpfile)(struct fll_req *r, uint64_t parent, const char *name,
                   const struct fuse_create_in *in, struct fuse_entry_out *entry,
                   struct fuse_open_out *open);
    /* Reads into dst (already cut to in->size); returns bytes read. */
    ssize_t (*read)(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                    const struct iovec *dst, unsigned dst_cnt);
    /* Writes src (exactly in->size bytes, straight from client memory); returns bytes. */
    ssize_t (*write)(struct fll_req *r, uint64_t nodeid, const struct fuse_write_in *in,
                     const struct iovec *src, unsigned src_cnt);
    int (*statfs)(struct fll_req *r, uint64_t nodeid, struct fuse_statfs_out *out);
    int (*release)(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in);
    int (*fsync)(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in);
    int (*flush)(struct fll_req *r, uint64_t nodeid, const struct fuse_flush_in *in);
    /* setxattr_flags: FUSE_SETXATTR_ACL_KILL_SGID when the client sent the extended form */
    int (*setxattr)(struct fll_req *r, uint64_t nodeid, const char *name, const void *value,
                    size_t size, int flags, uint32_t setxattr_flags);
    /* size == 0: return the needed size. Else fill buf, return the length or -ERANGE. */
    ssize_t (*getxattr)(struct fll_req *r, uint64_t nodeid, const char *name, void *buf,
                        size_t size);
    ssize_t (*listxattr)(struct fll_req *r, uint64_t nodeid, void *buf, size_t size);
    int (*removexattr)(struct fll_req *r, uint64_t nodeid, const char *name);
    int (*opendir)(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                   struct fuse_open_out *out);
    /* Fills db (db->plus for READDIRPLUS) starting at in->offset. */
    int (*readdir)(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                   struct fll_dirbuf *db);
    int (*releasedir)(struct fll_req *r, uint64_t nodeid, const struct fuse_release_in *in);
    int (*fsyncdir)(struct fll_req *r, uint64_t nodeid, const struct fuse_fsync_in *in);
    int (*getlk)(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in,
                 struct fuse_lk_out *out);
    /* sleep: SETLKW. May return FLL_ASYNC and reply later with fll_reply_err(). */
    int (*setlk)(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in, bool sleep);
    int (*access)(struct fll_req *r, uint64_t nodeid, const struct fuse_access_in *in);
    int (*fallocate)(struct fll_req *r, uint64_t nodeid, const struct fuse_fallocate_in *in);
    int (*lseek)(struct fll_req *r, uint64_t nodeid, const struct fuse_lseek_in *in,
                 struct fuse_lseek_out *out);
    ssize_t (*copy_file_range)(struct fll_req *r, uint64_t nodeid,
                               const struct fuse_copy_file_range_in *in);
    int (*syncfs)(struct fll_req *r, uint64_t nodeid);
    int (*statx)(struct fll_req *r, uint64_t nodeid, const struct fuse_statx_in *in,
                 struct fuse_statx_out *out);
    /* 0: noted, no reply is sent; -EAGAIN (not seen yet) or another errno is
     * sent back to the client as FUSE defines. */
    int (*interrupt)(struct fll_req *r, uint64_t unique);
    /* DAX. entries[] are already copied out of the (unaligned) client buffer. */
    int (*setupmapping)(struct fll_req *r, uint64_t nodeid, const struct fuse_setupmapping_in *in);
    int (*removemapping)(struct fll_req *r, const struct fuse_removemapping_one *entries,
                         unsigned count);
};

/* ---- Sessions ----------------------------------------------------------------- */

struct fll_transport {
    /* The request is done; out_len bytes of reply are in r->out (0 = no reply). */
    void (*complete)(struct fll_req *r, size_t out_len);
};

struct fll_session_config {
    const struct fll_ops *ops;
    void *fs; /* passed back to ops via fll_req_userdata() */
    const struct fll_transport *transport;
    uint32_t max_write; /* largest WRITE payload the transport carries */
    uint16_t max_pages; /* most pages per request the transport's reply
                         * buffers hold (caps what INIT grants); 0 = no cap */
    /*
     * Requests the client may keep in the background at once (async direct
     * I/O, readahead, writeback): INIT's max_background, with its congestion
     * threshold at 3/4. 0 leaves the client's default, 12, which caps a
     * guest's queue depth below what a virtqueue carries.
     */
    uint16_t max_background;
};

/* 0 and *out, or -EINVAL (no ops, transport or complete()) / -ENOMEM. */
int fll_session_new(const struct fll_session_config *cfg, struct fll_session **out);
void fll_session_free(struct fll_session *se);

/*
 * Decode, validate, dispatch and reply. Never fails; thread safe; lock-free
 * except INIT and DESTROY. What a request gets:
 *   - shorter than fuse_in_header: no reply (out_len 0), no unique to answer
 *   - hdr.len != the readable bytes, or total_extlen beyond them: EINVAL
 *   - any opcode but INIT before INIT (or after DESTROY): EIO
 *   - opcode outside the table, without a decoder, or without its fll_ops
 *     member: ENOSYS (including INTERRUPT without ops->interrupt)
 *   - writable buffers shorter than fuse_out_header: no reply, op not called
 *   - an argument struct short, a string without its NUL: EINVAL
 *   - a directory entry name longer than 255: ENAMETOOLONG; empty, ".", ".."
 *     or containing '/': EINVAL (LOOKUP, MKNOD, MKDIR, SYMLINK's name, UNLINK,
 *     RMDIR, RENAME/RENAME2 both names, LINK, CREATE). TMPFILE's name is the
 *     kernel's placeholder ("/"): only NUL-terminated and bounded, never a path.
 *     SYMLINK's target: NUL-terminated within FLL_PATH_MAX, else ENAMETOOLONG.
 *   - xattr names: without their NUL: EINVAL; empty or over 255: ERANGE (VFS)
 *   - a fixed-size reply that would not fit the writable buffers: EIO, before
 *     the filesystem runs (so a LOOKUP never takes a reference in vain);
 *     variable-sized replies (READ, READDIR, READLINK, xattrs) are cut to the
 *     buffers, and a value that does not fit is ERANGE from the filesystem
 *   - WRITE: size > negotiated max_write or != the data bytes present: EINVAL
 *   - BATCH_FORGET / REMOVEMAPPING: count must describe exactly the bytes
 *     present; REMOVEMAPPING count 1..FLL_REMOVEMAPPING_MAX: else EINVAL
 *   - FORGET, BATCH_FORGET: never answered, not even their errors
 *   - with FUSE_SECURITY_CTX negotiated (the filesystem asks for it in init),
 *     CREATE, MKNOD, MKDIR, SYMLINK and TMPFILE carry a security context
 *     (fll_req_secctx; layout and checks in fll_secctx.c): a malformed one,
 *     or more than one, is EINVAL before the filesystem runs
 *   - INIT: major > 7: answered with our major/minor only (8 bytes), the
 *     client retries; major < 7 or minor < FLL_MIN_MINOR: EPROTO; a second
 *     INIT while initialized: EPROTO. With FUSE_INIT_EXT the full 64-byte
 *     fuse_init_in must be there (EINVAL otherwise).
 * Argument sizes: every client fll accepts speaks 7.31+, where all argument
 * structs have their full size (the compat sizes end at 7.12); the two that
 * still vary are fuse_init_in (FUSE_INIT_EXT) and fuse_setxattr_in
 * (16 bytes only when FUSE_SETXATTR_EXT was negotiated).
 */
void fll_session_process(struct fll_session *se, struct fll_req *r);

/* For FLL_ASYNC operations: the one reply, 0 or a negative errno. */
void fll_reply_err(struct fll_req *r, int err);

/*
 * The connection ended without a DESTROY (frontend gone, device reset,
 * /dev/fuse unmounted): if INIT had completed, calls ops->destroy exactly as
 * DESTROY would, and returns the session to its state before INIT. No-op
 * otherwise. Call it with no request of this session being processed.
 */
void fll_session_shutdown(struct fll_session *se);

/*
 * The transport's driver stopped: every queue is stopped and no request of this
 * session is being processed. Seen from the device, a driver reset (a guest
 * reboot, a crash and reboot, a kexec, a driver rebind) and a pause of the same
 * driver (a VM stopped, the source of a migration) look alike; the next request
 * tells them apart. If it is FUSE_INIT, a new driver has come: the old session
 * ends (ops->reset, else ops->destroy: node ids, handles, locks) and the
 * INIT is served. Any other request means the same driver went on, and a later
 * second INIT is refused (EPROTO) as always. Call it with no request of this
 * session being processed.
 */
void fll_session_driver_stopped(struct fll_session *se);

/* Whether INIT has completed (and DESTROY not yet received). */
bool fll_session_initialized(const struct fll_session *se);

/*
 * What a session negotiated, to carry it to another process (a daemon
 * restart, a migration): with it the new session answers the same client as
 * the old one did, with no new INIT. Plain values; the caller encodes them.
 */
struct fll_session_state {
    bool initialized;      /* INIT was answered (and no DESTROY since) */
    bool driver_stopped;   /* fll_session_driver_stopped with no request since */
    uint32_t client_minor; /* the minor the client sent in INIT */
    uint32_t proto_minor;  /* the minor answered: min(client_minor, FLL_KERNEL_MINOR) */
    uint64_t capable;      /* flags the client offered (flags | flags2 << 32) */
    uint64_t want;         /* flags answered */
    uint32_t max_write;
    uint16_t max_pages;
    uint16_t map_alignment;
    uint32_t max_readahead;
    uint32_t time_gran;
};

/* Snapshot of se's negotiation. Call with no INIT or DESTROY running. */
void fll_session_save(struct fll_session *se, struct fll_session_state *st);

/*
 * Makes a new session (state NEW, no request processed yet) answer as the one
 * st was saved from: READY with st's negotiation, or left NEW when st is not
 * initialized. The filesystem's init op is NOT called: what the filesystem
 * negotiated travels in its own state. st is untrusted: -EINVAL when it is not
 * an answer this session could have given (minor outside 31..FLL_KERNEL_MINOR
 * or not min(client_minor, ours), flags answered that were not offered,
 * max_write or max_pages above the transport's, map_alignment above 63,
 * time_gran 0 or above 10^9, anything but zeros in an uninitialized state),
 * -EBUSY when se is not NEW.
 */
int fll_session_restore(struct fll_session *se, const struct fll_session_state *st);

/* ---- /dev/fuse transport --------------------------------------------------------- */

/*
 * Serves the same fll_ops to the host kernel through /dev/fuse (no vhost-user):
 * libfuse3 is used for mounting and unmounting only; requests are read from
 * the /dev/fuse fd into per-thread buffers and decoded by fll_session_process().
 *
 * Life cycle:
 *   fll_devfuse_new()   mounts; the kernel's INIT waits in the fd
 *   fll_devfuse_loop()  serves with nthreads threads until fll_devfuse_stop()
 *                       or until the filesystem is unmounted from outside
 *   fll_devfuse_free()  tells the filesystem the connection ended
 *                       (fll_session_shutdown: ops->destroy if INIT had
 *                       completed), waits until every request it kept with
 *                       FLL_ASYNC is answered, closes the fd and unmounts
 *                       (lazily) if still mounted; then frees
 * fll_devfuse_stop() is async-signal-safe and may be called from any thread.
 * Mounting and unmounting need CAP_SYS_ADMIN (or fusermount3): a sandboxed
 * daemon calls fll_devfuse_new() before dropping privileges. The loop itself
 * only reads and writes the fd.
 */
struct fll_devfuse;

struct fll_devfuse_config {
    const struct fll_ops *ops;
    void *fs;
    const char *mountpoint;
    const char *fsname;     /* shown in /proc/mounts; NULL = "vufsd" */
    const char *mount_opts; /* extra -o options for the mount, or NULL */
    unsigned nthreads;      /* 0 = 1; at most 64 */
    uint32_t max_write;     /* 0 = 1 MiB; at least 4096 */
};

int fll_devfuse_new(const struct fll_devfuse_config *cfg, struct fll_devfuse **out);
/* Returns 0 after a stop or an unmount, or a negative errno on failure. */
int fll_devfuse_loop(struct fll_devfuse *h);
void fll_devfuse_stop(struct fll_devfuse *h);
void fll_devfuse_free(struct fll_devfuse *h);

#endif
