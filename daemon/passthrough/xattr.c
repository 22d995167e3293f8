/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Extended attributes: GETXATTR, SETXATTR, LISTXATTR, REMOVEXATTR (--xattr),
 * with the optional --xattrmap name mapping and POSIX ACLs (--posix-acl).
 *
 * O_PATH fds cannot take f*xattr calls: regular files and directories are
 * reopened read-only through proc_self_fd; symlinks and special files go through
 * the path form on their /proc magic link, which leads to the object itself (for
 * a symlink: the link, not its target) without opening it (pt_xattr_call, core.c).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "pt_core_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_idmap_i.h"
#include "pt_inode_i.h"
#include "pt_ops_i.h"
#include "pt_xattrmap_i.h"
#include "vufs_util.h"

#define PT_XATTR_LIST_MAX 65536

static bool pt_is_acl_name(const char *name)
{
    return strcmp(name, "system.posix_acl_access") == 0 ||
           strcmp(name, "system.posix_acl_default") == 0;
}

/* Host name for a client name; *owned gets the allocation to free. */
static int pt_xattr_host_name(struct pt_fs *fs, const char *name, const char **host,
                              char **owned)
{
    int ret;

    *owned = NULL;
    *host = name;
    if (!fs->posix_acl && pt_is_acl_name(name))
        return -EOPNOTSUPP;
    if (!fs->have_xmap)
        return 0;
    ret = pt_xattrmap_to_server(&fs->xmap, name, owned);
    if (ret < 0)
        return ret;
    *host = *owned;
    return 0;
}

/* The inode of an xattr operation: ENOSYS when xattrs are off (--xattr), EROFS
 * for a change on a read-only share. */
static int pt_xattr_inode(struct pt_fs *fs, uint64_t nodeid, bool change, struct pt_inode **out)
{
    if (!fs->xattr)
        return -ENOSYS;
    int ret = pt_inode_get(fs, nodeid, out);
    if (ret < 0)
        return ret;
    return change && fs->readonly ? -EROFS : 0;
}

int pt_op_setxattr(struct fll_req *r, uint64_t nodeid, const char *name, const void *value,
                   size_t size, int flags, uint32_t setxattr_flags)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_free_ char *owned = NULL;
    const char *host;
    char num[PT_PROC_PATH_MAX];
    ssize_t n;
    int ret;

    ret = pt_xattr_inode(fs, nodeid, true, &i);
    if (ret < 0)
        return ret;
    if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
        return -EINVAL;
    ret = pt_xattr_host_name(fs, name, &host, &owned);
    if (ret < 0)
        return ret;
    if (fs->cap_mapped && strcmp(host, fs->cap_mapped) == 0)
        atomic_store(&i->cap_clean, false);
    n = pt_xattr_call(fs, i, PT_XSET, host, (void *)value, size, flags);
    if (n < 0)
        return (int)n;
    /*
     * Setting an access ACL drops the SGID bit when the caller is not in the
     * owning group (the client tells us with FUSE_SETXATTR_ACL_KILL_SGID); as
     * root the host kernel would keep it.
     */
    if ((setxattr_flags & FUSE_SETXATTR_ACL_KILL_SGID) &&
        strcmp(name, "system.posix_acl_access") == 0) {
        _cleanup_ifd_ struct pt_ifd f = PT_IFD_NONE;
        struct statx st;
        ret = pt_inode_fd(fs, i, &f);
        if (ret < 0)
            return ret;
        ret = pt_statx_fd(f.fd, &st);
        if (ret < 0)
            return ret;
        uid_t huid;
        gid_t hgid;
        /* The caller as host ids; a forbidden one is no member of anything. */
        bool keeps = pt_req_host_ids(fs, r, &huid, &hgid) == 0 &&
                     (hgid == st.stx_gid || huid == 0);
        if ((st.stx_mode & S_ISGID) && !keeps &&
            i->type != S_IFLNK &&
            fchmodat(fs->proc_self_fd, pt_proc_name(num, f.fd), st.stx_mode & 07777 & ~S_ISGID,
                     0) < 0)
            return -errno;
    }
    return 0;
}

/*
 * op on one client name of nodeid (a get, or a removal when change): the
 * inode, the host name, the call. A name the map forbids (-EPERM) fails with
 * forbidden.
 */
static ssize_t pt_xattr_named(struct fll_req *r, uint64_t nodeid, const char *name,
                              enum pt_xop op, bool change, int forbidden, void *buf, size_t size)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_free_ char *owned = NULL;
    const char *host;
    int ret;

    ret = pt_xattr_inode(fs, nodeid, change, &i);
    if (ret < 0)
        return ret;
    ret = pt_xattr_host_name(fs, name, &host, &owned);
    if (ret == -EPERM)
        return forbidden;
    if (ret < 0)
        return ret;
    return pt_xattr_call(fs, i, op, host, buf, size, 0);
}

ssize_t pt_op_getxattr(struct fll_req *r, uint64_t nodeid, const char *name, void *buf,
                       size_t size)
{
    /* A 'bad' name simply does not exist for the client. */
    return pt_xattr_named(r, nodeid, name, PT_XGET, false, -ENODATA, buf, size);
}

ssize_t pt_op_listxattr(struct fll_req *r, uint64_t nodeid, void *buf, size_t size)
{
    struct pt_fs *fs = pt_fs_of(r);
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_free_ char *raw = NULL;
    ssize_t n, total = 0;
    int ret;

    ret = pt_xattr_inode(fs, nodeid, false, &i);
    if (ret < 0)
        return ret;
    if (!fs->have_xmap)
        return pt_xattr_call(fs, i, PT_XLIST, NULL, buf, size, 0);
    /* Mapped: fetch the whole host list, translate each name, then size or copy. */
    raw = malloc(PT_XATTR_LIST_MAX);
    if (!raw)
        return -ENOMEM;
    n = pt_xattr_call(fs, i, PT_XLIST, NULL, raw, PT_XATTR_LIST_MAX, 0);
    if (n < 0)
        return n;
    for (ssize_t pos = 0; pos < n;) {
        const char *hname = raw + pos;
        size_t hlen = strnlen(hname, (size_t)(n - pos));
        _cleanup_free_ char *cname = NULL;
        pos += (ssize_t)hlen + 1;
        if (hlen == 0 || pos > n)
            continue;
        ret = pt_xattrmap_to_client(&fs->xmap, hname, &cname);
        if (ret < 0)
            return ret;
        if (ret == 0)
            continue;
        size_t clen = strlen(cname) + 1;
        if (size) {
            if ((size_t)total + clen > size)
                return -ERANGE;
            memcpy((char *)buf + total, cname, clen);
        }
        total += (ssize_t)clen;
    }
    return total;
}

int pt_op_removexattr(struct fll_req *r, uint64_t nodeid, const char *name)
{
    return (int)pt_xattr_named(r, nodeid, name, PT_XREMOVE, true, -EPERM, NULL, 0);
}
