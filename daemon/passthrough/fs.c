/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The passthrough filesystem as a whole: creation from the daemon's settings,
 * INIT negotiation, reset, the fd budget, the operations table, STATFS, SYNCFS.
 *
 * Lifecycle: pt_fs_new -> SERVING (any number of INIT .. DESTROY/reset rounds;
 * reset drops every inode but the root and every handle) -> pt_fs_free (after
 * the transport stopped calling the operations).
 */
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statfs.h>

#include "fll.h"
#include "passthrough.h"
#include "pt_core_i.h"
#include "pt_dax_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_idmap_i.h"
#include "pt_inode_i.h"
#include "pt_lock_i.h"
#include "pt_ops_i.h"
#include "pt_xattrmap_i.h"
#include "vufs_util.h"

/* ---- fd budget (CVE-2020-10717) ---------------------------------------------- */

/* The one fd budget rule (passthrough.h). */
static long pt_budget_for(uint64_t nofile)
{
    long n = (long)(nofile > (uint64_t)LONG_MAX / 2 ? (uint64_t)LONG_MAX / 2 : nofile);
    long budget = n - PT_FD_HEADROOM_FIXED - n * PT_FD_HEADROOM_PERCENT / 100;

    return budget < 8 ? 8 : budget;
}

long pt_fs_fd_budget(const struct pt_fs *fs)
{
    return atomic_load(&((struct pt_fs *)fs)->fd_budget);
}

/* ---- Creation ------------------------------------------------------------------ */

static double pt_cache_timeout(enum pt_cache c)
{
    switch (c) {
    case PT_CACHE_ALWAYS:
    case PT_CACHE_METADATA:
        return 86400.0;
    case PT_CACHE_NEVER:
        return 0.0;
    case PT_CACHE_AUTO:
    default:
        return 1.0;
    }
}

static int pt_fs_setup_xattr(struct pt_fs *fs, const struct pt_config *cfg)
{
    char err[128] = "";
    char *mapped = NULL;
    int ret;

    fs->xattr = cfg->xattr || cfg->xattrmap;
    fs->posix_acl = cfg->posix_acl;
    if (fs->posix_acl && !fs->xattr)
        return -EINVAL; /* ACLs are xattrs */
    if (!cfg->xattrmap)
        return 0;
    ret = pt_xattrmap_parse(cfg->xattrmap, &fs->xmap, err, sizeof(err));
    if (ret < 0)
        return ret;
    fs->have_xmap = true;
    /* Where the client's security.capability lives on the host, if elsewhere. */
    ret = pt_xattrmap_to_server(&fs->xmap, "security.capability", &mapped);
    if (ret == 0 && strcmp(mapped, "security.capability") != 0)
        fs->cap_mapped = mapped;
    else
        free(mapped);
    return ret == -ENOMEM ? ret : 0;
}

/*
 * --inode-file-handles: the share's root gives the first handle and the mount
 * fd of the share's own mount (the root directory reopened read-only). A share
 * on a filesystem without handles fails with mandatory, and serves with O_PATH
 * fds with prefer.
 */
static int pt_fs_setup_handles(struct pt_fs *fs, enum pt_inode_handles mode)
{
    int ret;

    if (mode == PT_HANDLES_NEVER)
        return 0;
    ret = pt_fh_make(fs, fs->root->fd, S_IFDIR, fs->root->mnt_id, &fs->root_fh, &fs->root_mnt);
    if (ret < 0)
        return mode == PT_HANDLES_MANDATORY ? ret : 0;
    fs->handles = mode;
    return 0;
}

int pt_fs_check_handles(struct pt_fs *fs, bool *fell_back)
{
    int fd;

    *fell_back = false;
    if (fs->handles == PT_HANDLES_NEVER)
        return 0;
    fd = pt_fh_open(fs->root_mnt, &fs->root_fh, O_PATH);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (fs->handles == PT_HANDLES_MANDATORY)
        return fd;
    fs->handles = PT_HANDLES_NEVER;
    *fell_back = true;
    return 0;
}

/*
 * In a user namespace whose setgroups is "deny" (--uid-map as an unprivileged
 * user) the supplementary groups cannot be changed by anyone, so there is
 * nothing to drop.
 */
static bool pt_setgroups_denied(void)
{
    char buf[8] = "";
    int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n >= 4 && strncmp(buf, "deny", 4) == 0;
}

void pt_fs_free(struct pt_fs *fs)
{
    if (!fs)
        return;
    pt_locks_cancel_all(fs, -EINTR, true);
    pt_htab_destroy(fs);
    pt_fdc_destroy(fs); /* before the inodes it points to */
    pt_itab_destroy(fs);
    pt_fh_free(&fs->root_fh);
    pt_mnts_destroy(fs); /* with the root's mount */
    if (fs->proc_self_fd >= 0)
        close(fs->proc_self_fd);
    pt_xattrmap_free(&fs->xmap);
    pt_idmap_free(&fs->uidmap);
    pt_idmap_free(&fs->gidmap);
    free(fs->cap_mapped);
    pthread_mutex_destroy(&fs->cwd_lock);
    for (unsigned k = 0; k < PT_INODE_LOCK_STRIPES; k++)
        pthread_mutex_destroy(&fs->inode_locks[k]);
    pthread_mutex_destroy(&fs->locks.lock);
    pthread_cond_destroy(&fs->locks.cond);
    free(fs);
}

int pt_fs_new(const struct pt_config *cfg, struct pt_fs **out)
{
    struct pt_fs *fs;
    struct statx st;
    struct rlimit rl;
    uint64_t nofile;
    int fd, ret;

    *out = NULL;
    if (!cfg->shared_dir)
        return -EINVAL;
    fs = calloc(1, sizeof(*fs));
    if (!fs)
        return -ENOMEM;
    fs->proc_self_fd = -1;
    pthread_mutex_init(&fs->cwd_lock, NULL);
    for (unsigned k = 0; k < PT_INODE_LOCK_STRIPES; k++)
        pthread_mutex_init(&fs->inode_locks[k], NULL);
    ret = pt_itab_init(fs);
    if (ret == 0)
        ret = pt_mnts_init(&fs->mnts);
    pt_fdc_init(&fs->fdc);
    if (ret == 0)
        ret = pt_htab_init(fs);
    if (ret == 0)
        ret = pt_locks_init(&fs->locks);
    if (ret < 0)
        goto fail;

    fs->cache = cfg->cache;
    fs->timeout = pt_cache_timeout(cfg->cache);
    fs->writeback_opt = cfg->writeback;
    fs->readdirplus = cfg->readdirplus;
    fs->allow_direct_io = cfg->allow_direct_io;
    fs->allow_mmap = cfg->allow_mmap;
    fs->killpriv_v2_opt = cfg->killpriv_v2;
    fs->announce_submounts = cfg->announce_submounts;
    fs->no_posix_lock = cfg->no_posix_lock;
    fs->no_flock = cfg->no_flock;
    fs->readonly = cfg->readonly;
    fs->writers = cfg->writers;
    fs->security_label = cfg->security_label;
    if (cfg->translate_uid)
        ret = pt_idmap_parse(&fs->uidmap, cfg->translate_uid, NULL, 0);
    if (ret == 0 && cfg->translate_gid)
        ret = pt_idmap_parse(&fs->gidmap, cfg->translate_gid, NULL, 0);
    if (ret < 0)
        goto fail;
    ret = pt_fs_setup_xattr(fs, cfg);
    if (ret < 0)
        goto fail;

    nofile = cfg->rlimit_nofile;
    if (!nofile)
        nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    atomic_store(&fs->fd_budget, pt_budget_for(nofile));

    fs->proc_self_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fs->proc_self_fd < 0) {
        ret = -errno;
        goto fail;
    }
    fd = open(cfg->shared_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        goto fail;
    }
    /* The first inode gets index 1, generation 0: FUSE_ROOT_ID. Never put. It
     * keeps its O_PATH fd whatever the handle setting (the xattr path form
     * returns the working directory to it). */
    ret = pt_inode_intern_fd(fs, fd, &st, false, &fs->root);
    if (ret < 0)
        goto fail;
    ret = pt_fs_setup_handles(fs, cfg->inode_file_handles);
    if (ret < 0)
        goto fail;

    if (geteuid() == 0) {
        /* Creating operations run with the caller's ids and no other group. */
        if (setgroups(0, NULL) < 0 && !(errno == EPERM && pt_setgroups_denied())) {
            ret = -errno;
            goto fail;
        }
        fs->switch_creds = true;
    }
    /* Modes arrive with the client's umask already applied (or to apply here). */
    umask(0);
    *out = fs;
    return 0;

fail:
    pt_fs_free(fs);
    return ret;
}

void pt_fs_cancel_waits(struct pt_fs *fs)
{
    pt_locks_cancel_all(fs, -EINTR, false);
}

void pt_fs_reset(struct pt_fs *fs)
{
    pt_locks_cancel_all(fs, -EINTR, false);
    pt_htab_reset(fs);
    pt_itab_reset(fs);
}

/* ---- INIT / DESTROY -------------------------------------------------------------- */

static int pt_init(void *opaque, struct fll_conn *conn)
{
    struct pt_fs *fs = opaque;
    /*
     * No FUSE_EXPORT_SUPPORT: it makes the client look up "." and "..", names
     * the decoder refuses from a guest, so an export could only half work.
     */
    /*
     * FUSE_ASYNC_DIO: without it the client runs an aio/io_uring O_DIRECT
     * request synchronously, one at a time, whatever the queue depth asked.
     */
    uint64_t want = FUSE_ASYNC_READ | FUSE_ASYNC_DIO | FUSE_PARALLEL_DIROPS | FUSE_BIG_WRITES |
                    FUSE_ATOMIC_O_TRUNC | FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS |
                    FUSE_MAX_PAGES | FUSE_CACHE_SYMLINKS;

    if (fs->no_posix_lock)
        want &= ~(uint64_t)FUSE_POSIX_LOCKS;
    if (fs->no_flock)
        want &= ~(uint64_t)FUSE_FLOCK_LOCKS;

    if (fs->readdirplus)
        want |= FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO;
    if (fs->writeback_opt && !fs->readonly)
        want |= FUSE_WRITEBACK_CACHE;
    if (fs->posix_acl)
        want |= FUSE_POSIX_ACL | FUSE_DONT_MASK;
    if (fs->killpriv_v2_opt)
        want |= FUSE_HANDLE_KILLPRIV_V2;
    if (fs->announce_submounts)
        want |= FUSE_SUBMOUNTS;
    if (fs->xattr)
        want |= FUSE_SETXATTR_EXT;
    if (fs->allow_mmap)
        want |= FUSE_DIRECT_IO_ALLOW_MMAP;
    if (fs->security_label)
        want |= FUSE_SECURITY_CTX;
    conn->want |= want & conn->capable;
    pt_dax_init(fs, conn);

    atomic_store(&fs->writeback, (conn->want & FUSE_WRITEBACK_CACHE) != 0);
    atomic_store(&fs->dont_mask, (conn->want & FUSE_DONT_MASK) != 0);
    atomic_store(&fs->killpriv_v2, (conn->want & FUSE_HANDLE_KILLPRIV_V2) != 0);
    if (conn->time_gran == 0)
        conn->time_gran = 1;
    return 0;
}

/*
 * DESTROY from the guest: its mappings go first, through the frontend (a Linux
 * guest has removed them all by then). When the transport ends the session
 * instead (reset, disconnect), it has cleared the window beforehand, so nothing
 * is sent from its thread.
 */
static void pt_destroy(void *opaque)
{
    pt_dax_unmap_all(opaque);
    pt_fs_reset(opaque);
}

/* A new driver after a device reset: the frontend dropped the old driver's
 * mappings with the reset (QEMU does), so the window forgets them unsent. */
static void pt_reset(void *opaque)
{
    pt_dax_forget_all(opaque);
    pt_fs_reset(opaque);
}

/* ---- STATFS / SYNCFS --------------------------------------------------------------- */

static int pt_op_statfs(struct fll_req *r, uint64_t nodeid, struct fuse_statfs_out *out)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
    struct statfs sf;
    int ret = pt_inode_get_fd(fs, nodeid, &i, &f);

    if (ret < 0)
        return ret;
    if (fstatfs(f.fd, &sf) < 0)
        return -errno;
    memset(out, 0, sizeof(*out));
    out->st.blocks = sf.f_blocks;
    out->st.bfree = sf.f_bfree;
    out->st.bavail = sf.f_bavail;
    out->st.files = sf.f_files;
    out->st.ffree = sf.f_ffree;
    out->st.bsize = (uint32_t)sf.f_bsize;
    out->st.namelen = (uint32_t)sf.f_namelen;
    out->st.frsize = (uint32_t)sf.f_frsize;
    return 0;
}

static int pt_op_syncfs(struct fll_req *r, uint64_t nodeid)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_close_ int fd = -1;
    int ret = pt_inode_get(fs, nodeid, &i);

    if (ret < 0)
        return ret;
    /* syncfs() wants a real open file: the inode's directory or file, never special. */
    fd = pt_reopen(fs, i, O_RDONLY);
    if (fd < 0)
        return fd;
    return syncfs(fd) < 0 ? -errno : 0;
}

/* ---- The table -------------------------------------------------------------------- */

static const struct fll_ops pt_ops = {
    .init = pt_init,
    .destroy = pt_destroy,
    .reset = pt_reset,
    .lookup = pt_op_lookup,
    .forget = pt_op_forget,
    .getattr = pt_op_getattr,
    .setattr = pt_op_setattr,
    .readlink = pt_op_readlink,
    .symlink = pt_op_symlink,
    .mknod = pt_op_mknod,
    .mkdir = pt_op_mkdir,
    .unlink = pt_op_unlink,
    .rmdir = pt_op_rmdir,
    .rename = pt_op_rename,
    .link = pt_op_link,
    .open = pt_op_open,
    .create = pt_op_create,
    .tmpfile = pt_op_tmpfile,
    .read = pt_op_read,
    .write = pt_op_write,
    .statfs = pt_op_statfs,
    .release = pt_op_release,
    .fsync = pt_op_fsync,
    .flush = pt_op_flush,
    .setxattr = pt_op_setxattr,
    .getxattr = pt_op_getxattr,
    .listxattr = pt_op_listxattr,
    .removexattr = pt_op_removexattr,
    .opendir = pt_op_opendir,
    .readdir = pt_op_readdir,
    .releasedir = pt_op_releasedir,
    .fsyncdir = pt_op_fsyncdir,
    .getlk = pt_op_getlk,
    .setlk = pt_op_setlk,
    .access = pt_op_access,
    .fallocate = pt_op_fallocate,
    .lseek = pt_op_lseek,
    .copy_file_range = pt_op_copy_file_range,
    .syncfs = pt_op_syncfs,
    .statx = pt_op_statx,
    .interrupt = pt_op_interrupt,
    .setupmapping = pt_op_setupmapping,
    .removemapping = pt_op_removemapping,
};

const struct fll_ops *pt_fs_ops(void)
{
    return &pt_ops;
}
