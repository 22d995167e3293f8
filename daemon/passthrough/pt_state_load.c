/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Loading the passthrough's state (the format: pt_state_i.h) into a reset
 * filesystem: records parsed and checked, inodes and handles placed at their
 * saved node ids and handles, locks taken again.
 *
 * With fds (a restart) every object travels as the fd the old process had,
 * locks included (a lock belongs to its open file description, which the fd
 * keeps): nothing is reopened, an unlinked file that is still open survives,
 * and no lock is ever released. The records still say what each fd must be,
 * and an fd that is not (another type, device or inode number) is refused.
 *
 * What does not survive (counted in pt_state_report, logged by the caller):
 *   - an inode that cannot be found again (deleted since, never had a path
 *     (unlinked while open), moved where neither its path nor its handle
 *     leads): its node id answers ESTALE, its open files EBADF;
 *   - a lock another process took meanwhile: every read, write and lock
 *     request on that inode's open files answers EIO until the guest closes
 *     them (lock_lost), never data another lock holder wrote.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sysmacros.h>

#include "passthrough.h"
#include "pt_core_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_inode_i.h"
#include "pt_lock_i.h"
#include "pt_slots_i.h"
#include "pt_state_i.h"
#include "state.h"

static bool pt_type_valid(uint32_t t)
{
    switch (t) {
    case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR: case S_IFBLK: case S_IFIFO:
    case S_IFSOCK:
        return true;
    }
    return false;
}

static bool pt_get_fh(struct vst_reader *r, struct pt_fh *fh)
{
    uint32_t type;
    uint8_t len;
    unsigned char b[PT_FH_MAX];

    memset(fh, 0, sizeof(*fh));
    if (!vst_get_u32(r, &type) || !vst_get_u8(r, &len) || len == 0 || len > PT_FH_MAX ||
        !vst_get_bytes(r, b, len))
        return false;
    fh->type = (int32_t)type;
    if (len > PT_FH_INLINE) {
        fh->u.ext = malloc(len);
        if (!fh->u.ext)
            return false;
        memcpy(fh->u.ext, b, len);
    } else {
        memcpy(fh->u.inl, b, len);
    }
    fh->len = len;
    return true;
}

static void pt_irec_free(struct pt_irec *r)
{
    if (r->flags & PT_REC_FH)
        pt_fh_free(&r->fh);
    free(r->path);
    r->path = NULL;
}

/* Parses one inode record; the fd, if any, is not taken yet. */
static int pt_parse_inode(struct pt_load *L, struct vst_reader *r, uint32_t k, struct pt_irec *o)
{
    memset(o, 0, sizeof(*o));
    o->fdi = VST_NO_FD;
    if (!vst_get_u32(r, &o->idx) || !vst_get_u32(r, &o->gen) || !vst_get_u64(r, &o->nlookup) ||
        !vst_get_u32(r, &o->type) || !vst_get_u8(r, &o->flags) || !vst_get_u64(r, &o->dev) ||
        !vst_get_u64(r, &o->ino) || !vst_get_u64(r, &o->mnt_id))
        return vst_fail(L->err, -EBADMSG, "state: inode record %u is cut short", k);
    if (o->idx == 0 || o->idx >= PT_MAX_SLOTS)
        return vst_fail(L->err, -EINVAL, "state: inode record %u: index %u out of range", k,
                        o->idx);
    if (!pt_type_valid(o->type))
        return vst_fail(L->err, -EINVAL, "state: inode %u: file type %#o unknown", o->idx,
                        o->type);
    if (o->flags & ~PT_REC_INODE_KNOWN)
        return vst_fail(L->err, -EINVAL, "state: inode %u: unknown flags %#x", o->idx, o->flags);
    if ((o->flags & PT_REC_FD) && !L->fds)
        return vst_fail(L->err, -EINVAL, "state: inode %u names an fd, none came with it",
                        o->idx);
    if ((o->flags & PT_REC_FD) && !vst_get_u32(r, &o->fdi))
        return vst_fail(L->err, -EBADMSG, "state: inode %u is cut short", o->idx);
    if ((o->flags & PT_REC_FH) && !pt_get_fh(r, &o->fh)) {
        o->flags &= ~PT_REC_FH;
        return vst_fail(L->err, -EINVAL, "state: inode %u: bad file handle", o->idx);
    }
    if (o->flags & PT_REC_PATH) {
        uint16_t len;
        char buf[PT_STATE_PATH_MAX + 1];
        if (!vst_get_u16(r, &len) || len == 0 || len > PT_STATE_PATH_MAX ||
            !vst_get_bytes(r, buf, len) || memchr(buf, '\0', len))
            return vst_fail(L->err, -EINVAL, "state: inode %u: bad path", o->idx);
        buf[len] = '\0';
        o->path = strdup(buf);
        if (!o->path)
            return -ENOMEM;
    }
    return 0;
}

static struct pt_mount *pt_load_mount(struct pt_load *L, uint64_t mnt_id)
{
    for (unsigned k = 0; k < L->nmounts; k++)
        if (L->mounts[k] && L->mounts[k]->mnt_id == mnt_id)
            return L->mounts[k];
    if (L->fs->root_mnt && L->fs->root_mnt->mnt_id == mnt_id)
        return L->fs->root_mnt;
    return NULL;
}

/* Restores one (non-root) inode record: 0 (restored or counted lost) or -errno. */
static int pt_load_inode(struct pt_load *L, struct pt_irec *r)
{
    struct pt_fs *fs = L->fs;
    struct pt_inode_image im = {
        .idx = r->idx, .gen = r->gen, .nlookup = r->nlookup, .type = r->type,
        .hashed = r->flags & PT_REC_HASHED, .fd = -1,
    };
    struct statx st;
    int fd = -1, ret;

    if (r->flags & PT_REC_FD) {
        ret = vst_fd_take(L->fds, r->fdi, &fd);
        if (ret < 0)
            return vst_fail(L->err, ret, "state: inode %u: fd %u missing or used twice", r->idx,
                            r->fdi);
        if (pt_statx_fd(fd, &st) < 0 || (st.stx_mode & S_IFMT) != r->type ||
            makedev(st.stx_dev_major, st.stx_dev_minor) != (dev_t)r->dev ||
            st.stx_ino != r->ino) {
            close(fd);
            return vst_fail(L->err, -EINVAL, "state: inode %u: its fd is another object",
                            r->idx);
        }
    } else if ((r->flags & PT_REC_FH) && L->fds) {
        /* A restart with file handles: opened on the mount fd handed over. */
        struct pt_mount *m = pt_load_mount(L, r->mnt_id);
        if (!m)
            return vst_fail(L->err, -EINVAL, "state: inode %u: no mount %llu for its handle",
                            r->idx, (unsigned long long)r->mnt_id);
        int hfd = pt_fh_open(m, &r->fh, O_PATH | O_NOFOLLOW);
        if (hfd < 0 || pt_statx_fd(hfd, &st) < 0 || (st.stx_mode & S_IFMT) != r->type ||
            makedev(st.stx_dev_major, st.stx_dev_minor) != (dev_t)r->dev ||
            st.stx_ino != r->ino) {
            if (hfd >= 0)
                close(hfd);
            L->rep->inodes_lost++; /* deleted on the host meanwhile */
            return 0;
        }
        close(hfd);
        pthread_mutex_lock(&fs->mnts.lock);
        m->refs++;
        pthread_mutex_unlock(&fs->mnts.lock);
        im.mnt = m;
        im.fh = r->fh;
        im.dev = (dev_t)r->dev;
        im.ino = (ino_t)r->ino;
        im.mnt_id = r->mnt_id;
        ret = pt_inode_restore(fs, &im, &(struct pt_inode *){NULL});
        if (ret < 0) {
            pt_mnt_put(fs, m);
            if (ret == -EEXIST)
                return vst_fail(L->err, ret, "state: inode %u named twice", r->idx);
            return ret;
        }
        r->flags &= ~PT_REC_FH; /* the inode took the handle */
        L->rep->inodes++;
        return 0;
    } else {
        fd = pt_find_again(L, r, &st);
        if (fd < 0) {
            L->rep->inodes_lost++;
            return 0;
        }
    }
    im.dev = makedev(st.stx_dev_major, st.stx_dev_minor);
    im.ino = st.stx_ino;
    im.mnt_id = st.stx_mnt_id;
    if (fs->handles != PT_HANDLES_NEVER &&
        pt_fh_make(fs, fd, r->type, st.stx_mnt_id, &im.fh, &im.mnt) == 0) {
        close(fd);
        fd = -1;
    } else if (fs->handles == PT_HANDLES_MANDATORY) {
        close(fd);
        L->rep->inodes_lost++;
        return 0;
    } else if (pt_fd_reserve(fs) < 0) {
        close(fd);
        L->rep->inodes_lost++; /* past the fd budget */
        return 0;
    }
    im.fd = fd;
    struct pt_inode *i;
    ret = pt_inode_restore(fs, &im, &i);
    if (ret < 0) {
        if (fd >= 0) {
            close(fd);
            pt_fd_unreserve(fs);
        } else {
            pt_fh_free(&im.fh);
            pt_mnt_put(fs, im.mnt);
        }
        if (ret == -EEXIST && (r->flags & PT_REC_FD))
            return vst_fail(L->err, ret, "state: inode %u named twice", r->idx);
        if (ret == -EEXIST) {
            L->rep->inodes_lost++; /* two records found the same object */
            return 0;
        }
        return ret;
    }
    L->rep->inodes++;
    return 0;
}

/* The root's record: the same directory, or the state is for another share. */
static int pt_load_root(struct pt_load *L, struct pt_irec *r)
{
    struct pt_inode *root = L->fs->root;
    struct statx st;

    if (r->flags & PT_REC_FD) {
        int fd;
        int ret = vst_fd_take(L->fds, r->fdi, &fd);
        if (ret < 0)
            return vst_fail(L->err, ret, "state: the root's fd %u is missing", r->fdi);
        close(fd); /* the new process opened the share itself */
    }
    if (r->gen != 0 || r->type != S_IFDIR || !pt_same_object(root->fd, r, &st))
        return vst_fail(L->err, -EINVAL,
                        "state: saved for another shared directory (its root differs)");
    pthread_mutex_lock(&L->fs->itab.lock);
    root->nlookup = r->nlookup;
    pthread_mutex_unlock(&L->fs->itab.lock);
    return 0;
}

static int pt_irec_cmp(const void *a, const void *b)
{
    const struct pt_irec *x = a, *y = b;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Opens the version 1 table section type (named table in messages) and reads
 * its record count: at least min, and no more than records of at least
 * rec_min bytes the section can hold (counted names a record).
 */
static int pt_load_table(struct pt_load *L, const struct vst_state *st, uint32_t type,
                         const char *table, const char *counted, size_t rec_min, uint32_t min,
                         struct vst_reader *r, uint32_t *count)
{
    uint32_t ver;

    if (!vst_section(st, type, r, &ver))
        return vst_fail(L->err, -EINVAL, "state: no %s table", table);
    if (ver != 1)
        return vst_fail(L->err, -EINVAL, "state: %s table version %u unknown", table, ver);
    if (!vst_get_u32(r, count) || *count < min || *count > r->left / rec_min)
        return vst_fail(L->err, -EBADMSG, "state: %s count %u does not fit its section",
                        counted, *count);
    return 0;
}

static int pt_load_inodes(struct pt_load *L, const struct vst_state *st, uint32_t *gen_floor)
{
    struct vst_reader r;
    uint32_t count;
    int ret = pt_load_table(L, st, VST_SEC_FS_INODES, "inode", "inode", PT_IREC_MIN, 1, &r, &count);

    if (ret < 0)
        return ret;
    struct pt_irec *v = calloc(count, sizeof(*v));
    if (!v)
        return -ENOMEM;
    uint32_t n = 0;
    for (; n < count && ret == 0; n++)
        ret = pt_parse_inode(L, &r, n, &v[n]);
    if (ret == 0 && !vst_reader_done(&r))
        ret = vst_fail(L->err, -EBADMSG, "state: bytes left over after the inode table");
    if (ret == 0) {
        qsort(v, count, sizeof(*v), pt_irec_cmp);
        for (uint32_t k = 1; k < count && ret == 0; k++)
            if (v[k].idx == v[k - 1].idx)
                ret = vst_fail(L->err, -EINVAL, "state: inode %u named twice", v[k].idx);
        if (ret == 0 && v[0].idx != 1)
            ret = vst_fail(L->err, -EINVAL, "state: the root (inode 1) is missing");
    }
    if (ret == 0)
        ret = pt_load_root(L, &v[0]);
    for (uint32_t k = 1; k < count && ret == 0; k++) {
        if (v[k].gen >= *gen_floor)
            *gen_floor = v[k].gen == UINT32_MAX ? UINT32_MAX : v[k].gen + 1;
        ret = pt_load_inode(L, &v[k]);
    }
    for (uint32_t k = 0; k < n; k++)
        pt_irec_free(&v[k]);
    free(v);
    return ret;
}

/* The handles: 0 (each restored or counted lost) or -errno for a bad state. */
static int pt_load_handles(struct pt_load *L, const struct vst_state *st, uint32_t *gen_floor)
{
    struct pt_fs *fs = L->fs;
    struct vst_reader r;
    uint32_t count;

    int sec = pt_load_table(L, st, VST_SEC_FS_HANDLES, "handle", "handle", PT_HREC_MIN, 0, &r,
                            &count);
    if (sec < 0)
        return sec;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t idx, gen, hflags, fdi = VST_NO_FD;
        uint64_t nodeid;
        uint8_t flags;
        if (!vst_get_u32(&r, &idx) || !vst_get_u32(&r, &gen) || !vst_get_u64(&r, &nodeid) ||
            !vst_get_u32(&r, &hflags) || !vst_get_u8(&r, &flags) ||
            ((flags & PT_HREC_FD) && !vst_get_u32(&r, &fdi)))
            return vst_fail(L->err, -EBADMSG, "state: handle record %u is cut short", k);
        bool is_dir = flags & PT_HREC_DIR;
        if (idx == 0 || idx >= PT_MAX_SLOTS || (flags & ~PT_HREC_KNOWN) ||
            ((flags & PT_HREC_FD) && !L->fds) ||
            (flags & (PT_HREC_FLOCK_SH | PT_HREC_FLOCK_EX)) ==
                (PT_HREC_FLOCK_SH | PT_HREC_FLOCK_EX) ||
            (hflags & ~(uint32_t)PT_STATE_OPEN_FLAGS) || (hflags & O_ACCMODE) == O_ACCMODE ||
            (is_dir ? hflags != (O_RDONLY | O_DIRECTORY) : (hflags & O_DIRECTORY) != 0))
            return vst_fail(L->err, -EINVAL, "state: handle record %u is malformed", k);
        if (fs->readonly && ((hflags & O_ACCMODE) != O_RDONLY || (hflags & O_TRUNC)))
            return vst_fail(L->err, -EINVAL, "state: handle %u writes to a --readonly share",
                            idx);
        if (gen >= *gen_floor)
            *gen_floor = gen == UINT32_MAX ? UINT32_MAX : gen + 1;

        int fd = -1;
        if (flags & PT_HREC_FD) {
            int ret = vst_fd_take(L->fds, fdi, &fd);
            if (ret < 0)
                return vst_fail(L->err, ret, "state: handle %u: fd %u missing or used twice",
                                idx, fdi);
        }
        _cleanup_inode_ struct pt_inode *i = NULL;
        if (pt_inode_get(fs, nodeid, &i) < 0 || (is_dir != (i->type == S_IFDIR)) ||
            (!is_dir && i->type != S_IFREG)) {
            if (fd >= 0)
                close(fd);
            if (i)
                return vst_fail(L->err, -EINVAL, "state: handle %u: wrong type of node", idx);
            L->rep->handles_lost++; /* its inode was not found again */
            continue;
        }
        if (pt_fd_reserve(fs) < 0) {
            if (fd >= 0)
                close(fd);
            L->rep->handles_lost++;
            continue;
        }
        if (fd >= 0) {
            struct stat sb;
            int fl = fcntl(fd, F_GETFL);
            if (fstat(fd, &sb) < 0 || sb.st_dev != i->dev || sb.st_ino != i->ino || fl < 0 ||
                (fl & O_PATH) || (fl & O_ACCMODE) != (int)(hflags & O_ACCMODE)) {
                close(fd);
                pt_fd_unreserve(fs);
                return vst_fail(L->err, -EINVAL, "state: handle %u: its fd is another file",
                                idx);
            }
        } else {
            /* Reopened as it was opened, never truncating again. */
            fd = pt_reopen(fs, i, (int)(hflags & ~(uint32_t)O_TRUNC));
            if (fd < 0) {
                pt_fd_unreserve(fs);
                L->rep->handles_lost++;
                continue;
            }
            if ((flags & (PT_HREC_FLOCK_SH | PT_HREC_FLOCK_EX)) &&
                flock(fd, (flags & PT_HREC_FLOCK_EX ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
                atomic_store(&i->lock_lost, true);
                L->rep->locks_lost++;
            }
        }
        int ret = pt_handle_restore(fs, idx, gen, i, fd, (int)hflags, is_dir);
        if (ret < 0) {
            close(fd);
            pt_fd_unreserve(fs);
            if (ret == -EEXIST)
                return vst_fail(L->err, ret, "state: handle %u named twice", idx);
            return ret;
        }
        L->rep->handles++;
    }
    if (!vst_reader_done(&r))
        return vst_fail(L->err, -EBADMSG, "state: bytes left over after the handle table");
    return 0;
}

/* Takes the locks of one owner again on a new open file description. */
static void pt_relock(struct pt_load *L, struct pt_inode *i, int fd,
                      const struct pt_held_lock *l, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        struct flock fl = {
            .l_type = l[k].write ? F_WRLCK : F_RDLCK,
            .l_whence = SEEK_SET,
            .l_start = (off_t)l[k].start,
            .l_len = (off_t)l[k].len,
        };
        if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
            atomic_store(&i->lock_lost, true);
            L->rep->locks_lost++;
        } else {
            L->rep->locks++;
        }
    }
}

static int pt_load_locks(struct pt_load *L, const struct vst_state *st)
{
    struct pt_fs *fs = L->fs;
    struct vst_reader r;
    uint32_t count;
    int ret = pt_load_table(L, st, VST_SEC_FS_LOCKS, "lock", "lock owner", PT_OREC_MIN, 0, &r, &count);

    if (ret < 0)
        return ret;
    struct pt_held_lock *held = calloc(PT_STATE_MAX_LOCKS, sizeof(*held));
    if (!held)
        return -ENOMEM;
    for (uint32_t k = 0; k < count && ret == 0; k++) {
        uint64_t nodeid, owner;
        uint32_t pid, fdi = VST_NO_FD;
        uint8_t flags;
        uint16_t nlocks;
        if (!vst_get_u64(&r, &nodeid) || !vst_get_u64(&r, &owner) || !vst_get_u32(&r, &pid) ||
            !vst_get_u8(&r, &flags) || ((flags & PT_OREC_FD) && !vst_get_u32(&r, &fdi)) ||
            !vst_get_u16(&r, &nlocks)) {
            ret = vst_fail(L->err, -EBADMSG, "state: lock owner %u is cut short", k);
            break;
        }
        if ((flags & ~PT_OREC_FD) || ((flags & PT_OREC_FD) && !L->fds) ||
            nlocks > PT_STATE_MAX_LOCKS || ((flags & PT_OREC_FD) && nlocks)) {
            ret = vst_fail(L->err, -EINVAL, "state: lock owner %u is malformed", k);
            break;
        }
        for (unsigned j = 0; j < nlocks; j++) {
            uint8_t wr;
            if (!vst_get_u8(&r, &wr) || wr > 1 || !vst_get_u64(&r, &held[j].start) ||
                !vst_get_u64(&r, &held[j].len) || held[j].start > (uint64_t)INT64_MAX ||
                held[j].len > (uint64_t)INT64_MAX - held[j].start) {
                ret = vst_fail(L->err, -EINVAL, "state: lock owner %u: bad lock %u", k, j);
                break;
            }
            held[j].write = wr;
            held[j].flock = false;
        }
        if (ret < 0)
            break;
        int fd = -1;
        if (flags & PT_OREC_FD) {
            ret = vst_fd_take(L->fds, fdi, &fd);
            if (ret < 0) {
                vst_fail(L->err, ret, "state: lock owner %u: fd %u missing or used twice", k,
                         fdi);
                break;
            }
        }
        _cleanup_inode_ struct pt_inode *i = NULL;
        if (pt_inode_get(fs, nodeid, &i) < 0 || i->type != S_IFREG) {
            if (fd >= 0)
                close(fd);
            if (i) {
                ret = vst_fail(L->err, -EINVAL, "state: lock owner %u on a non-file", k);
                break;
            }
            L->rep->locks_lost += nlocks;
            continue;
        }
        if (fd >= 0) {
            struct stat sb;
            if (fstat(fd, &sb) < 0 || sb.st_dev != i->dev || sb.st_ino != i->ino) {
                close(fd);
                ret = vst_fail(L->err, -EINVAL, "state: lock owner %u: its fd is another file",
                               k);
                break;
            }
        } else {
            fd = fs->readonly ? -EROFS : pt_reopen(fs, i, O_RDWR);
            if (fd < 0)
                fd = pt_reopen(fs, i, O_RDONLY);
            if (fd < 0) {
                atomic_store(&i->lock_lost, true);
                L->rep->locks_lost += nlocks;
                continue;
            }
            pt_relock(L, i, fd, held, nlocks);
        }
        if (pt_fd_reserve(fs) < 0) {
            close(fd);
            if (nlocks)
                atomic_store(&i->lock_lost, true);
            L->rep->locks_lost += nlocks;
            continue;
        }
        int r2 = pt_lock_owner_restore(i, owner, fd, pid);
        if (r2 < 0) {
            close(fd);
            pt_fd_unreserve(fs);
            if (r2 == -ENOMEM) {
                ret = r2;
                break;
            }
            if (nlocks)
                atomic_store(&i->lock_lost, true);
            L->rep->locks_lost += nlocks;
            continue;
        }
        L->rep->owners++;
    }
    free(held);
    if (ret == 0 && !vst_reader_done(&r))
        ret = vst_fail(L->err, -EBADMSG, "state: bytes left over after the lock table");
    return ret;
}

/* VST_SEC_FS: what INIT negotiated, the generation floors, the mount fds. */
static int pt_load_fs(struct pt_load *L, const struct vst_state *st, bool neg[4], uint32_t *igen,
                      uint32_t *hgen)
{
    struct pt_fs *fs = L->fs;
    struct vst_reader r;
    uint32_t ver, nmounts;

    if (!vst_section(st, VST_SEC_FS, &r, &ver))
        return vst_fail(L->err, -EINVAL, "state: no filesystem section");
    if (ver != 1)
        return vst_fail(L->err, -EINVAL, "state: filesystem section version %u unknown", ver);
    for (int k = 0; k < 4; k++)
        if (!vst_get_bool(&r, &neg[k]))
            return vst_fail(L->err, -EINVAL, "state: filesystem section: bad flag");
    if (!vst_get_u32(&r, igen) || !vst_get_u32(&r, hgen) || !vst_get_u32(&r, &nmounts))
        return vst_fail(L->err, -EBADMSG, "state: filesystem section is cut short");
    if (nmounts > r.left / 12 || (nmounts && !L->fds))
        return vst_fail(L->err, -EINVAL, "state: %u mount fds", nmounts);
    L->mounts = calloc(nmounts ? nmounts : 1, sizeof(*L->mounts));
    if (!L->mounts)
        return -ENOMEM;
    for (uint32_t k = 0; k < nmounts; k++) {
        uint64_t mnt_id;
        uint32_t fdi;
        int fd;
        if (!vst_get_u64(&r, &mnt_id) || !vst_get_u32(&r, &fdi))
            return vst_fail(L->err, -EBADMSG, "state: mount %u is cut short", k);
        int ret = vst_fd_take(L->fds, fdi, &fd);
        if (ret < 0)
            return vst_fail(L->err, ret, "state: mount %u: fd %u missing or used twice", k, fdi);
        struct statx sx;
        int fl = fcntl(fd, F_GETFL);
        if (pt_statx_fd(fd, &sx) < 0 || sx.stx_mnt_id != mnt_id || fl < 0 || (fl & O_PATH) ||
            ((sx.stx_mode & S_IFMT) != S_IFDIR && (sx.stx_mode & S_IFMT) != S_IFREG)) {
            close(fd);
            return vst_fail(L->err, -EINVAL, "state: mount %u: its fd is not on that mount", k);
        }
        if (pt_load_mount(L, mnt_id)) {
            close(fd); /* the share's own: opened by this process */
            continue;
        }
        L->mounts[L->nmounts] = pt_mnt_adopt(fs, mnt_id, fd);
        if (!L->mounts[L->nmounts])
            return -ENOMEM;
        L->nmounts++;
    }
    if (!vst_reader_done(&r))
        return vst_fail(L->err, -EBADMSG, "state: bytes left over in the filesystem section");
    return 0;
}

int pt_state_load(struct pt_fs *fs, const struct vst_state *st, struct vst_fds *fds,
                  struct pt_state_report *rep, struct vst_err *err)
{
    struct pt_load L = {.fs = fs, .fds = fds, .rep = rep, .err = err, .handle_mnt_fd = -1};
    bool neg[4];
    uint32_t igen = 0, hgen = 0;
    int ret;

    memset(rep, 0, sizeof(*rep));
    pthread_mutex_lock(&fs->itab.lock);
    size_t known = fs->itab.count;
    pthread_mutex_unlock(&fs->itab.lock);
    if (known != 1 || atomic_load(&fs->htab.count) != 0)
        return vst_fail(err, -EBUSY, "state: the filesystem is in use already");
    if (!fds) {
        /* For handles whose path has gone: the share's mount, and the root as
         * /proc shows it, to tell where an opened handle lies. */
        char num[PT_PROC_PATH_MAX];
        ssize_t n = readlinkat(fs->proc_self_fd, pt_proc_name(num, fs->root->fd), L.root_path,
                               sizeof(L.root_path) - 1);
        L.root_path[n > 0 && (size_t)n < sizeof(L.root_path) - 1 ? n : 0] = '\0';
        L.handle_mnt_fd =
            fs->root_mnt ? fs->root_mnt->fd
                         : openat(fs->proc_self_fd, pt_proc_name(num, fs->root->fd),
                                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    ret = pt_load_fs(&L, st, neg, &igen, &hgen);
    if (ret == 0)
        ret = pt_load_inodes(&L, st, &igen);
    pt_itab_restore_finish(fs, igen);
    if (ret == 0)
        ret = pt_load_handles(&L, st, &hgen);
    pt_htab_restore_finish(fs, hgen);
    if (ret == 0)
        ret = pt_load_locks(&L, st);
    /* The mounts were held for the inodes; unused ones go now. */
    for (unsigned k = 0; k < L.nmounts; k++)
        pt_mnt_put(fs, L.mounts[k]);
    free(L.mounts);
    if (L.handle_mnt_fd >= 0 && !(fs->root_mnt && L.handle_mnt_fd == fs->root_mnt->fd))
        close(L.handle_mnt_fd);
    if (ret < 0) {
        pt_fs_reset(fs); /* nothing of a refused state is kept */
        memset(rep, 0, sizeof(*rep));
        return ret;
    }
    atomic_store(&fs->writeback, neg[0]);
    atomic_store(&fs->dont_mask, neg[1]);
    atomic_store(&fs->killpriv_v2, neg[2]);
    atomic_store(&fs->dax_attr, neg[3] && fs->dax != NULL);
    return 0;
}
