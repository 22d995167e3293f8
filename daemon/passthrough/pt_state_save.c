/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Saving the passthrough's state (the format: pt_state_i.h): the inode table,
 * the open handles, the POSIX lock owners and their locks, the mount fds, and
 * what INIT negotiated. With fds (a restart) every object goes as its fd; without
 * (a file, a migration) as what finds it again (pt_state_find.c).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "passthrough.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_inode_i.h"
#include "pt_lock_i.h"
#include "pt_state_i.h"
#include "state.h"

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
            /* Found again by path and recognised by handle (pt_state_find.c). */
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
