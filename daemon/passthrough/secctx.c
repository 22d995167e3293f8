/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * --security-label: the label the guest's LSM chose for a new inode
 * (FUSE_SECURITY_CTX, fll_req_secctx) is set on the host object the
 * CREATE, MKNOD, MKDIR, SYMLINK or TMPFILE made.
 *
 * How, and why this way:
 *   - Right after the object is created, not atomically with it: Linux has no
 *     *at() call that creates with an xattr, and the host's own fscreate
 *     attribute (/proc/thread-self/attr/fscreate) only exists for SELinux
 *     hosts and only for security.selinux. Between the two steps the entry
 *     exists without its label (the Rust virtiofsd does the same when it
 *     cannot use fscreate). A TMPFILE is labelled before it has a name.
 *   - As the daemon, after the caller's ids were dropped again: writing a
 *     security.* xattr needs CAP_SYS_ADMIN or the host LSM's relabel
 *     permission, which the caller's uid never has. The default capability set
 *     has no CAP_SYS_ADMIN: on a host whose LSM does not take the name itself,
 *     the host refuses (EPERM) unless --modcaps=+sys_admin, or --xattrmap
 *     moves the name out of security.* (e.g. ":prefix:all:security.:user.virtiofs.security.:").
 *   - Through --xattrmap when configured, like SETXATTR: a "bad" rule refuses
 *     (EPERM), "unsupported" is EOPNOTSUPP.
 *   - If the label cannot be set, the new entry is removed again and the
 *     operation fails with the host's errno: the guest never gets an inode
 *     without the label it asked for.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fll.h"
#include "pt_core_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_inode_i.h"
#include "pt_secctx_i.h"
#include "pt_xattrmap_i.h"

int pt_secctx_apply(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *i, int fd)
{
    const struct fll_secctx *sc = fll_req_secctx(r);
    char *owned = NULL;
    const char *name;
    ssize_t n;

    if (!sc || !fs->security_label)
        return 0;
    name = sc->name;
    if (fs->have_xmap) {
        int ret = pt_xattrmap_to_server(&fs->xmap, sc->name, &owned);
        if (ret < 0)
            return ret;
        name = owned;
    }
    if (fd >= 0)
        n = fsetxattr(fd, name, sc->value, sc->size, 0) < 0 ? -errno : 0;
    else
        n = pt_xattr_call(fs, i, PT_XSET, name, (void *)sc->value, sc->size, 0);
    free(owned);
    return n < 0 ? (int)n : 0;
}

int pt_secctx_finish(struct pt_fs *fs, const struct fll_req *r, struct pt_inode *parent,
                     const char *name, struct fuse_entry_out *e, int unlink_flags)
{
    _cleanup_inode_ struct pt_inode *i = NULL;
    _cleanup_ifd_ struct pt_ifd pf = PT_IFD_NONE;
    int ret;

    if (!fll_req_secctx(r) || !fs->security_label)
        return 0;
    ret = pt_inode_get(fs, e->nodeid, &i);
    if (ret == 0)
        ret = pt_secctx_apply(fs, r, i, -1);
    if (ret < 0) {
        if (pt_inode_fd(fs, parent, &pf) == 0) /* an fd or a file handle */
            (void)unlinkat(pf.fd, name, unlink_flags);
        pt_inode_forget(fs, e->nodeid, 1);
        memset(e, 0, sizeof(*e));
    }
    return ret;
}
