/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Finding the objects of a saved state again on the host, when the state
 * carries no fds (pt_state_load.c), and what identifies an object for that
 * (pt_state_save.c records it).
 *
 * Without fds (a file for --restore-state, a migration) objects are found
 * again from the share: an inode by its path, walked name by name beneath the
 * share's root with O_PATH|O_NOFOLLOW (never a symlink, never '..'), and, when
 * the path has gone (a rename), by opening its file handle on the share's own
 * mount and walking the path the kernel then reports, beneath the root again.
 * Whatever is found must be the same object: the same file handle when one
 * was saved (its generation tells a new file with a reused inode number), else
 * the same device, inode number and type. A path that leaves the share cannot
 * be walked, so no object outside the share is ever reached. Handles are
 * reopened with their saved flags less O_TRUNC and O_CREAT; locks are taken
 * again without waiting.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sysmacros.h>

#include "pt_core_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_inode_i.h"
#include "pt_state_i.h"

const unsigned char *pt_fh_data(const struct pt_fh *fh)
{
    return fh->len > PT_FH_INLINE ? fh->u.ext : fh->u.inl;
}

/* The path of the object behind fd from the share's root, or false. */
bool pt_save_path(struct pt_fs *fs, int fd, const char *root, char *out, size_t size)
{
    char num[PT_PROC_PATH_MAX];
    char buf[PATH_MAX + 1];
    ssize_t n = readlinkat(fs->proc_self_fd, pt_proc_name(num, fd), buf, sizeof(buf) - 1);

    if (n <= 0 || (size_t)n >= sizeof(buf) - 1)
        return false;
    buf[n] = '\0';
    static const char deleted[] = " (deleted)";
    if ((size_t)n >= sizeof(deleted) - 1 && strcmp(buf + n - (sizeof(deleted) - 1), deleted) == 0)
        return false; /* unlinked: no name leads to it */
    size_t rl = strlen(root);
    const char *rel;
    if (strcmp(root, "/") == 0)
        rel = buf[0] == '/' ? buf + 1 : NULL;
    else if (strncmp(buf, root, rl) == 0 && buf[rl] == '/')
        rel = buf + rl + 1;
    else
        rel = NULL;
    if (!rel || !*rel || strlen(rel) > PT_STATE_PATH_MAX || strlen(rel) >= size)
        return false;
    strcpy(out, rel);
    return true;
}

/* A file handle for the object behind fd (a state without fds names inodes by it). */
bool pt_save_fh(int fd, struct pt_fh *fh)
{
    struct {
        struct file_handle h;
        unsigned char bytes[PT_FH_MAX];
    } b;
    int mnt;

    memset(fh, 0, sizeof(*fh));
    b.h.handle_bytes = PT_FH_MAX;
    b.h.handle_type = 0;
    if (name_to_handle_at(fd, "", &b.h, &mnt, AT_EMPTY_PATH) < 0 || b.h.handle_bytes == 0 ||
        b.h.handle_bytes > PT_FH_MAX)
        return false;
    fh->type = b.h.handle_type;
    if (b.h.handle_bytes > PT_FH_INLINE) {
        fh->u.ext = malloc(b.h.handle_bytes);
        if (!fh->u.ext)
            return false;
        memcpy(fh->u.ext, b.bytes, b.h.handle_bytes);
    } else {
        memcpy(fh->u.inl, b.bytes, b.h.handle_bytes);
    }
    fh->len = (uint8_t)b.h.handle_bytes;
    return true;
}

/*
 * The object at path beneath the share's root: each name checked as a guest's
 * would be, walked with O_PATH|O_NOFOLLOW, every name but the last a
 * directory. Never a symlink, '..' or an absolute path: the walk cannot leave
 * the share. An O_PATH fd or -errno.
 */
static int pt_walk_beneath(struct pt_fs *fs, const char *path)
{
    char name[NAME_MAX + 1];
    int dfd = fs->root->fd, fd = -1;

    while (*path) {
        const char *slash = strchr(path, '/');
        size_t n = slash ? (size_t)(slash - path) : strlen(path);
        if (n == 0 || n > NAME_MAX) {
            fd = -EINVAL;
            break;
        }
        memcpy(name, path, n);
        name[n] = '\0';
        if (pt_check_name(name) < 0) {
            fd = -EINVAL;
            break;
        }
        int nfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC | (slash ? O_DIRECTORY : 0));
        if (dfd != fs->root->fd)
            close(dfd);
        dfd = fs->root->fd;
        if (nfd < 0) {
            fd = -errno;
            break;
        }
        if (!slash)
            return nfd;
        dfd = nfd;
        path = slash + 1;
        if (!*path) {
            fd = -EINVAL; /* a trailing '/' */
            break;
        }
    }
    if (dfd != fs->root->fd)
        close(dfd);
    return fd < 0 ? fd : -EINVAL;
}

/* Whether the object behind fd is the one r describes; *st gets its attributes. */
bool pt_same_object(int fd, const struct pt_irec *r, struct statx *st)
{
    if (pt_statx_fd(fd, st) < 0 || (st->stx_mode & S_IFMT) != r->type)
        return false;
    if (r->flags & PT_REC_FH) {
        struct pt_fh now;
        if (pt_save_fh(fd, &now)) {
            bool same = pt_fh_equal(&now, &r->fh);
            pt_fh_free(&now);
            return same;
        }
    }
    return makedev(st->stx_dev_major, st->stx_dev_minor) == (dev_t)r->dev &&
           st->stx_ino == r->ino;
}

/* A path from /proc's view of fd, relative to the root, or false. */
static bool pt_load_path_of(struct pt_load *L, int fd, char *out, size_t size)
{
    if (!L->root_path[0])
        return false;
    return pt_save_path(L->fs, fd, L->root_path, out, size);
}

/*
 * Finds the object of a record without fds: its saved path, then its file
 * handle opened on the share's mount and the path the kernel reports for it,
 * both walked beneath the root. An O_PATH fd of the same object, or -ESTALE.
 */
int pt_find_again(struct pt_load *L, const struct pt_irec *r, struct statx *st)
{
    if (r->path) {
        int fd = pt_walk_beneath(L->fs, r->path);
        if (fd >= 0 && pt_same_object(fd, r, st))
            return fd;
        if (fd >= 0)
            close(fd);
    }
    if ((r->flags & PT_REC_FH) && L->handle_mnt_fd >= 0 && r->mnt_id == L->fs->root->mnt_id) {
        struct {
            struct file_handle h;
            unsigned char bytes[PT_FH_MAX];
        } b;
        b.h.handle_bytes = r->fh.len;
        b.h.handle_type = r->fh.type;
        memcpy(b.bytes, pt_fh_data(&r->fh), r->fh.len);
        int hfd = open_by_handle_at(L->handle_mnt_fd, &b.h, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (hfd >= 0) {
            char path[PT_STATE_PATH_MAX + 1];
            bool found = pt_load_path_of(L, hfd, path, sizeof(path));
            close(hfd);
            /* Only what a walk beneath the root reaches counts: a handle of an
             * object outside the share leads to no such path. */
            if (found) {
                int fd = pt_walk_beneath(L->fs, path);
                if (fd >= 0 && pt_same_object(fd, r, st))
                    return fd;
                if (fd >= 0)
                    close(fd);
            }
        }
    }
    return -ESTALE;
}
