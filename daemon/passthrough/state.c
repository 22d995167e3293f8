/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The passthrough's part of a saved state (state.h): sections VST_SEC_FS,
 * VST_SEC_FS_INODES, VST_SEC_FS_HANDLES and VST_SEC_FS_LOCKS.
 *
 * What is saved, per kind (version 1 of each section):
 *
 *   FS       u8 writeback, dont_mask, killpriv_v2, dax_attr (what INIT negotiated)
 *            u32 inode generation floor, u32 handle generation floor (one more
 *              than any generation handed out: freed node ids and handles stay
 *              stale in the next process)
 *            u32 nmounts, then per mount u64 mnt_id + u32 fd index (with fds:
 *              the mount fds inode file handles are opened on)
 *   INODES   u32 count, then per inode
 *              u32 idx, u32 gen, u64 nlookup, u32 type (S_IFMT bits), u8 flags,
 *              u64 dev, u64 ino, u64 mnt_id,
 *              [PT_REC_FD] u32 fd index of its O_PATH fd
 *              [PT_REC_FH] u32 handle type, u8 len (<= 128), len bytes
 *              [PT_REC_PATH] u16 len (1..4095), len bytes: the path from the
 *                share's root, '/'-separated names
 *   HANDLES  u32 count, then per handle
 *              u32 idx, u32 gen, u64 nodeid, u32 host open flags, u8 flags,
 *              [PT_REC_FD] u32 fd index
 *   LOCKS    u32 count, then per POSIX lock owner
 *              u64 nodeid, u64 owner, u32 pid, u8 flags, [PT_REC_FD] u32 fd index,
 *              u16 nlocks, then per lock u8 write, u64 start, u64 len (0 = to EOF)
 *
 * With fds (a restart) every object travels as the fd the old process had,
 * locks included (a lock belongs to its open file description, which the fd
 * keeps): nothing is reopened, an unlinked file that is still open survives,
 * and no lock is ever released. The records still say what each fd must be,
 * and an fd that is not (another type, device or inode number) is refused.
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

#include "pt_i.h"
#include "state.h"

#define PT_REC_FD 0x1u
#define PT_REC_FH 0x2u
#define PT_REC_PATH 0x4u
#define PT_REC_HASHED 0x8u
#define PT_REC_INODE_KNOWN (PT_REC_FD | PT_REC_FH | PT_REC_PATH | PT_REC_HASHED)

#define PT_HREC_DIR 0x1u
#define PT_HREC_FD 0x2u
#define PT_HREC_FLOCK_SH 0x4u
#define PT_HREC_FLOCK_EX 0x8u
#define PT_HREC_KNOWN (PT_HREC_DIR | PT_HREC_FD | PT_HREC_FLOCK_SH | PT_HREC_FLOCK_EX)

#define PT_OREC_FD 0x1u

/* Locks one owner may bring (a state without fds); more is refused. */
#define PT_STATE_MAX_LOCKS 4096u
/* Longest saved path, without NUL. */
#define PT_STATE_PATH_MAX 4095u
/* Host open flags a handle can have (pt_open_flags, opendir). */
#define PT_STATE_OPEN_FLAGS                                                                        \
    (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME | O_DIRECT | O_DIRECTORY)

/* Smallest encoded record of each kind: counts are checked against what is left. */
#define PT_IREC_MIN (4 + 4 + 8 + 4 + 1 + 8 + 8 + 8)
#define PT_HREC_MIN (4 + 4 + 8 + 4 + 1)
#define PT_OREC_MIN (8 + 8 + 4 + 1 + 2)

/* ---- Saving ------------------------------------------------------------------------- */

struct pt_save_inode {
    struct pt_inode *i; /* referenced while saving */
    uint32_t idx, gen;
    uint64_t nlookup;
    uint32_t type;
    uint64_t dev, ino, mnt_id;
    bool hashed;
    int fd; /* the inode's own O_PATH fd, or -1 */
    bool has_fh;
    struct pt_fh fh; /* a copy (inline or heap, pt_fh_free) */
};

struct pt_save {
    struct pt_fs *fs;
    struct pt_save_inode *v;
    size_t n, cap;
    bool oom;
};

/*
 * Room for element n of *vp, a vector of cap elements of size bytes that
 * doubles from first: false (and *oom set) when out of memory. vp points at
 * the vector's pointer, whatever its element type.
 */
static bool pt_save_room(void *vp, size_t *cap, size_t n, size_t size, size_t first, bool *oom)
{
    if (*oom)
        return false;
    if (n < *cap)
        return true;
    size_t ncap = *cap ? 2 * *cap : first;
    void *v;
    memcpy(&v, vp, sizeof(v));
    v = realloc(v, ncap * size);
    if (!v) {
        *oom = true;
        return false;
    }
    memcpy(vp, &v, sizeof(v));
    *cap = ncap;
    return true;
}

static void pt_fh_copy(struct pt_fh *dst, const struct pt_fh *src, bool *oom)
{
    memset(dst, 0, sizeof(*dst));
    dst->type = src->type;
    if (src->len > PT_FH_INLINE) {
        dst->u.ext = malloc(src->len);
        if (!dst->u.ext) {
            *oom = true;
            return;
        }
        memcpy(dst->u.ext, src->u.ext, src->len);
    } else {
        memcpy(dst->u.inl, src->u.inl, src->len);
    }
    dst->len = src->len;
}

static const unsigned char *pt_fh_data(const struct pt_fh *fh)
{
    return fh->len > PT_FH_INLINE ? fh->u.ext : fh->u.inl;
}

/* Under pt_itab.lock (pt_itab_image): a copy of i, referenced. */
static void pt_save_inode_cb(void *ctx, const struct pt_inode *ci)
{
    struct pt_save *s = ctx;
    struct pt_inode *i = (struct pt_inode *)ci;

    if (!pt_save_room(&s->v, &s->cap, s->n, sizeof(*s->v), 256, &s->oom))
        return;
    struct pt_save_inode *r = &s->v[s->n];
    memset(r, 0, sizeof(*r));
    r->i = i;
    r->idx = i->idx;
    r->gen = i->gen;
    r->nlookup = i->nlookup;
    r->type = i->type;
    r->dev = (uint64_t)i->dev;
    r->ino = (uint64_t)i->ino;
    r->mnt_id = i->mnt_id;
    r->hashed = i->hashed;
    r->fd = i->fd;
    if (i->mnt) {
        pt_fh_copy(&r->fh, &i->fh, &s->oom);
        r->has_fh = !s->oom;
    }
    atomic_fetch_add(&i->rs, 1); /* LIVE, the table lock held: kept until the state is written */
    s->n++;
}

/* The path of the object behind fd from the share's root, or false. */
static bool pt_save_path(struct pt_fs *fs, int fd, const char *root, char *out, size_t size)
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
static bool pt_save_fh(int fd, struct pt_fh *fh)
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

static void pt_put_fh(struct vst_writer *w, const struct pt_fh *fh)
{
    vst_put_u32(w, (uint32_t)fh->type);
    vst_put_u8(w, fh->len);
    vst_put_bytes(w, pt_fh_data(fh), fh->len);
}

static int pt_save_inodes(struct pt_fs *fs, struct pt_save *s, struct vst_writer *w,
                          struct vst_fds *fds)
{
    char root[PATH_MAX + 1] = "";
    char path[PT_STATE_PATH_MAX + 1];
    int ret = 0;

    if (!fds) {
        char num[PT_PROC_PATH_MAX];
        ssize_t n = readlinkat(fs->proc_self_fd, pt_proc_name(num, fs->root->fd), root,
                               sizeof(root) - 1);
        if (n <= 0 || (size_t)n >= sizeof(root) - 1)
            return -ENAMETOOLONG;
        root[n] = '\0';
    }
    vst_section_begin(w, VST_SEC_FS_INODES, 1);
    vst_put_u32(w, (uint32_t)s->n);
    for (size_t k = 0; k < s->n && ret == 0; k++) {
        struct pt_save_inode *r = &s->v[k];
        uint32_t fdi = VST_NO_FD;
        bool has_path = false;
        uint8_t flags = r->hashed ? PT_REC_HASHED : 0;

        if (fds && r->fd >= 0) {
            ret = vst_fd_add(fds, r->fd, &fdi);
            flags |= PT_REC_FD;
        }
        if (!fds && r->idx != 1) {
            /* Found again by path and recognised by handle (state.c header). */
            struct pt_ifd f = PT_IFD_NONE;
            if (pt_inode_fd(fs, r->i, &f) == 0) {
                has_path = pt_save_path(fs, f.fd, root, path, sizeof(path));
                if (!r->has_fh)
                    r->has_fh = pt_save_fh(f.fd, &r->fh);
                pt_ifd_close(&f);
            }
        }
        if (!fds && r->idx == 1 && !r->has_fh)
            r->has_fh = pt_save_fh(r->fd, &r->fh);
        if (r->has_fh)
            flags |= PT_REC_FH;
        if (has_path)
            flags |= PT_REC_PATH;
        vst_put_u32(w, r->idx);
        vst_put_u32(w, r->gen);
        vst_put_u64(w, r->nlookup);
        vst_put_u32(w, r->type);
        vst_put_u8(w, flags);
        vst_put_u64(w, r->dev);
        vst_put_u64(w, r->ino);
        vst_put_u64(w, r->mnt_id);
        if (flags & PT_REC_FD)
            vst_put_u32(w, fdi);
        if (flags & PT_REC_FH)
            pt_put_fh(w, &r->fh);
        if (flags & PT_REC_PATH) {
            vst_put_u16(w, (uint16_t)strlen(path));
            vst_put_bytes(w, path, strlen(path));
        }
    }
    vst_section_end(w);
    return ret;
}

struct pt_save_handle {
    uint32_t idx, gen;
};

struct pt_save_handles {
    struct pt_save_handle *v;
    size_t n, cap;
    bool oom;
};

static void pt_save_handle_cb(void *ctx, const struct pt_handle *h)
{
    struct pt_save_handles *s = ctx;
    if (!pt_save_room(&s->v, &s->cap, s->n, sizeof(*s->v), 256, &s->oom))
        return;
    s->v[s->n++] = (struct pt_save_handle){
        .idx = h->idx, .gen = (uint32_t)(atomic_load(&h->state) >> 32)};
}

/* The flock a handle's own open file description holds (a state without fds). */
static uint8_t pt_save_flock(struct pt_fs *fs, int fd)
{
    struct pt_held_lock l[4];
    int n = pt_fd_locks(fs, fd, l, 4);
    for (int k = 0; k < n; k++)
        if (l[k].flock)
            return l[k].write ? PT_HREC_FLOCK_EX : PT_HREC_FLOCK_SH;
    return 0;
}

static int pt_save_handles(struct pt_fs *fs, struct vst_writer *w, struct vst_fds *fds,
                           uint32_t *gen_floor)
{
    struct pt_save_handles s = {0};
    int ret = 0;

    pt_htab_image(fs, pt_save_handle_cb, &s, gen_floor);
    if (s.oom) {
        free(s.v);
        return -ENOMEM;
    }
    /* Handles closed meanwhile (a live snapshot) are left out: count first. */
    struct pt_handle **hs = calloc(s.n ? s.n : 1, sizeof(*hs));
    if (!hs) {
        free(s.v);
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t k = 0; k < s.n; k++)
        if (pt_handle_get(fs, s.v[k].idx | ((uint64_t)s.v[k].gen << 32), 0, &hs[n]) == 0)
            n++;
    vst_section_begin(w, VST_SEC_FS_HANDLES, 1);
    vst_put_u32(w, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        struct pt_handle *h = hs[k];
        uint8_t flags = h->is_dir ? PT_HREC_DIR : 0;
        uint32_t fdi = VST_NO_FD;
        if (fds) {
            if (ret == 0)
                ret = vst_fd_add(fds, h->fd, &fdi);
            flags |= PT_HREC_FD;
        } else {
            flags |= pt_save_flock(fs, h->fd);
        }
        vst_put_u32(w, h->idx);
        vst_put_u32(w, (uint32_t)(atomic_load(&h->state) >> 32));
        vst_put_u64(w, h->nodeid);
        vst_put_u32(w, (uint32_t)h->flags);
        vst_put_u8(w, flags);
        if (flags & PT_HREC_FD)
            vst_put_u32(w, fdi);
    }
    vst_section_end(w);
    for (size_t k = 0; k < n; k++)
        pt_handle_put(hs[k]);
    free(hs);
    free(s.v);
    return ret;
}

struct pt_save_owner {
    uint64_t nodeid, owner;
    uint32_t pid;
    int fd;
};

struct pt_save_owners {
    struct pt_save_owner *v;
    size_t n, cap;
    uint64_t nodeid;
    bool oom;
};

static void pt_save_owner_cb(void *ctx, uint64_t owner, int fd, uint32_t pid)
{
    struct pt_save_owners *s = ctx;
    if (!pt_save_room(&s->v, &s->cap, s->n, sizeof(*s->v), 64, &s->oom))
        return;
    s->v[s->n++] = (struct pt_save_owner){
        .nodeid = s->nodeid, .owner = owner, .pid = pid, .fd = fd};
}

static int pt_save_locks(struct pt_fs *fs, struct pt_save *si, struct vst_writer *w,
                         struct vst_fds *fds)
{
    struct pt_save_owners s = {0};
    struct pt_held_lock *held = NULL;
    int ret = 0;

    for (size_t k = 0; k < si->n; k++) {
        s.nodeid = (uint64_t)si->v[k].idx | ((uint64_t)si->v[k].gen << 32);
        pt_lock_owners_image(si->v[k].i, pt_save_owner_cb, &s);
    }
    if (s.oom)
        ret = -ENOMEM;
    if (!fds && ret == 0) {
        held = calloc(PT_STATE_MAX_LOCKS, sizeof(*held));
        if (!held)
            ret = -ENOMEM;
    }
    vst_section_begin(w, VST_SEC_FS_LOCKS, 1);
    vst_put_u32(w, (uint32_t)s.n);
    for (size_t k = 0; k < s.n && ret == 0; k++) {
        const struct pt_save_owner *o = &s.v[k];
        uint32_t fdi = VST_NO_FD;
        int nheld = 0;
        if (fds) {
            ret = vst_fd_add(fds, o->fd, &fdi);
        } else {
            nheld = pt_fd_locks(fs, o->fd, held, PT_STATE_MAX_LOCKS);
            if (nheld < 0)
                ret = nheld;
        }
        vst_put_u64(w, o->nodeid);
        vst_put_u64(w, o->owner);
        vst_put_u32(w, o->pid);
        vst_put_u8(w, fds ? PT_OREC_FD : 0);
        if (fds)
            vst_put_u32(w, fdi);
        uint16_t nlocks = 0;
        for (int j = 0; j < nheld; j++)
            nlocks += !held[j].flock;
        vst_put_u16(w, nlocks);
        for (int j = 0; j < nheld; j++) {
            if (held[j].flock)
                continue;
            vst_put_u8(w, held[j].write);
            vst_put_u64(w, held[j].start);
            vst_put_u64(w, held[j].len);
        }
    }
    vst_section_end(w);
    free(held);
    free(s.v);
    return ret;
}

/* The mount fds inode handles are opened on (with fds only). */
static int pt_save_mounts(struct pt_fs *fs, struct vst_writer *w, struct vst_fds *fds)
{
    struct pt_mnts *t = &fs->mnts;
    int ret = 0;

    pthread_mutex_lock(&t->lock);
    vst_put_u32(w, fds ? t->count : 0);
    for (struct pt_mount *m = t->head; fds && m; m = m->next) {
        uint32_t fdi = VST_NO_FD;
        if (ret == 0)
            ret = vst_fd_add(fds, m->fd, &fdi);
        vst_put_u64(w, m->mnt_id);
        vst_put_u32(w, fdi);
    }
    pthread_mutex_unlock(&t->lock);
    return ret;
}

static void pt_save_no_handle(void *ctx, const struct pt_handle *h)
{
    (void)ctx;
    (void)h;
}

int pt_state_save(struct pt_fs *fs, struct vst_writer *w, struct vst_fds *fds)
{
    struct pt_save s = {.fs = fs};
    uint32_t igen = 0, hgen = 0;
    int ret = 0;

    pt_itab_image(fs, pt_save_inode_cb, &s, &igen);
    pt_htab_image(fs, pt_save_no_handle, NULL, &hgen);
    if (s.oom)
        ret = -ENOMEM;

    vst_section_begin(w, VST_SEC_FS, 1);
    vst_put_u8(w, atomic_load(&fs->writeback));
    vst_put_u8(w, atomic_load(&fs->dont_mask));
    vst_put_u8(w, atomic_load(&fs->killpriv_v2));
    vst_put_u8(w, atomic_load(&fs->dax_attr));
    vst_put_u32(w, igen);
    vst_put_u32(w, hgen);
    if (ret == 0)
        ret = pt_save_mounts(fs, w, fds);
    vst_section_end(w);
    if (ret == 0)
        ret = pt_save_inodes(fs, &s, w, fds);
    if (ret == 0)
        ret = pt_save_handles(fs, w, fds, NULL);
    if (ret == 0)
        ret = pt_save_locks(fs, &s, w, fds);
    for (size_t k = 0; k < s.n; k++) {
        if (s.v[k].has_fh)
            pt_fh_free(&s.v[k].fh);
        pt_inode_put(s.v[k].i);
    }
    free(s.v);
    return ret;
}

/* ---- Loading ------------------------------------------------------------------------ */

struct pt_irec {
    uint32_t idx, gen;
    uint64_t nlookup;
    uint32_t type;
    uint8_t flags;
    uint64_t dev, ino, mnt_id;
    uint32_t fdi;
    struct pt_fh fh;  /* PT_REC_FH */
    char *path;       /* PT_REC_PATH, NUL-terminated copy */
};

struct pt_load {
    struct pt_fs *fs;
    struct vst_fds *fds;
    struct pt_state_report *rep;
    struct vst_err *err;
    char root_path[PATH_MAX + 1]; /* the root as /proc shows it (handle fallback) */
    int handle_mnt_fd;            /* a mount fd for the share's mount, -1 */
    struct pt_mount **mounts;     /* held while inodes are restored */
    unsigned nmounts;
};

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
static bool pt_same_object(int fd, const struct pt_irec *r, struct statx *st)
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
static int pt_find_again(struct pt_load *L, const struct pt_irec *r, struct statx *st)
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

void pt_fs_detach_waits(struct pt_fs *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx)
{
    pt_locks_detach_all(fs, fn, ctx);
}

int pt_fs_node_type(struct pt_fs *fs, uint64_t nodeid)
{
    _cleanup_inode_ struct pt_inode *i = NULL;
    int ret = pt_inode_get(fs, nodeid, &i);
    return ret < 0 ? ret : (int)i->type;
}
