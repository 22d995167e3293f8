/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Caller credentials for creating operations (CREATE, MKNOD, MKDIR, SYMLINK,
 * TMPFILE, and the permission check of ACCESS).
 *
 * The calling thread alone takes the request's uid/gid as its effective ids
 * with raw setresuid/setresgid system calls: glibc's wrappers would change every
 * thread of the process. A non-zero effective uid also clears the thread's
 * effective capabilities (CAP_FSETID, CAP_DAC_OVERRIDE...), so the host kernel
 * applies the rules of a local filesystem: the group of the new object follows
 * an SGID directory, and the SGID bit of a new file is dropped when the caller
 * is not in that group (CVE-2022-0358; supplementary groups were dropped in
 * pt_fs_new). Going back to uid 0 restores the effective capabilities from the
 * permitted set.
 *
 * Only a daemon running as root switches (fs->switch_creds); an unprivileged
 * daemon creates everything as itself, as any unprivileged program would.
 * With --translate-uid/gid the ids taken are the guest's translated to host
 * ids (idmap.c); a forbidden guest id fails the operation with EPERM.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "pt_core_i.h"
#include "pt_cred_i.h"
#include "pt_fs_i.h"
#include "pt_idmap_i.h"
#include "pt_inode_i.h"

int pt_cred_enter(struct pt_fs *fs, const struct fll_req *r, struct pt_cred *c)
{
    uid_t uid;
    gid_t gid;

    c->switched = false;
    /* The host ids the guest's ids translate to (--translate-uid/gid). */
    int ret = pt_req_host_ids(fs, r, &uid, &gid);
    if (ret < 0)
        return ret;
    if (!fs->switch_creds || (uid == 0 && gid == 0))
        return 0;
    /* (uid_t)-1 means "unchanged" to the kernel: never let the client pick it. */
    if (uid == (uid_t)-1 || gid == (gid_t)-1)
        return -EINVAL;
    if (syscall(SYS_setresgid, -1, gid, -1) < 0)
        return -errno;
    if (syscall(SYS_setresuid, -1, uid, -1) < 0) {
        int err = -errno;
        if (syscall(SYS_setresgid, -1, 0, -1) < 0)
            abort(); /* cannot restore our own identity: no safe way on */
        return err;
    }
    c->switched = true;
    return 0;
}

int pt_openat_as_caller(struct pt_fs *fs, const struct fll_req *r, int dirfd, const char *name,
                        int flags, mode_t mode)
{
    _cleanup_cred_ struct pt_cred cred = {0};
    int ret = pt_cred_enter(fs, r, &cred);

    if (ret < 0)
        return ret;
    ret = openat(dirfd, name, flags | O_CLOEXEC, mode);
    return ret < 0 ? -errno : ret;
}

void pt_cred_leave(struct pt_cred *c)
{
    int saved = errno;

    if (!c->switched)
        return;
    /* uid first: changing the gid back needs CAP_SETGID, which uid 0 restores. */
    if (syscall(SYS_setresuid, -1, 0, -1) < 0 || syscall(SYS_setresgid, -1, 0, -1) < 0)
        abort(); /* running on as the client's user would be a privilege bug */
    c->switched = false;
    errno = saved;
}

/*
 * Without FUSE_DONT_MASK the client applied its umask already. With it (POSIX
 * ACLs), the umask applies only when the parent has no default ACL, which then
 * decides instead (the host kernel applies it since our process umask is 0).
 */
mode_t pt_create_mode(struct pt_fs *fs, struct pt_inode *parent, mode_t mode, uint32_t umask)
{
    if (!atomic_load(&fs->dont_mask))
        return mode & ~(mode_t)umask & 07777;
    if (pt_xattr_call(fs, parent, PT_XGET, "system.posix_acl_default", NULL, 0, 0) > 0)
        return mode & 07777;
    return mode & ~(mode_t)umask & 07777;
}
