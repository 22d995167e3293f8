/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The recording fake filesystem, the in-memory transport and the request builder. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fll_fake.h"

static struct fllt_fake_fs *FS(struct fll_req *r)
{
    return fll_req_userdata(r);
}

static void rec(struct fll_req *r, const char *op, uint64_t nodeid, const void *in, size_t len)
{
    struct fllt_fake_fs *fs = FS(r);
    fs->calls++;
    fs->op = op;
    fs->nodeid = nodeid;
    fs->uid = fll_req_uid(r);
    fs->gid = fll_req_gid(r);
    fs->pid = fll_req_pid(r);
    fs->in_len = len < sizeof(fs->in) ? len : sizeof(fs->in);
    if (in)
        memcpy(fs->in, in, fs->in_len);
    const struct fll_secctx *sc = fll_req_secctx(r);
    fs->secctx_seen = sc != NULL;
    if (sc) {
        snprintf(fs->secctx_name, sizeof(fs->secctx_name), "%s", sc->name);
        fs->secctx_size = sc->size <= sizeof(fs->secctx_value) ? sc->size : 0;
        memcpy(fs->secctx_value, sc->value, fs->secctx_size);
    }
}

static void rec_name(char *dst, size_t max, const char *s)
{
    snprintf(dst, max, "%s", s ? s : "");
}

static void fill_entry(struct fuse_entry_out *e, uint64_t id)
{
    e->nodeid = id;
    e->generation = 7;
    e->attr.ino = id;
    e->attr.mode = 0100644;
}

static int fake_init(void *fsp, struct fll_conn *conn)
{
    struct fllt_fake_fs *fs = fsp;
    fs->calls++;
    fs->op = "init";
    fs->conn = *conn;
    fs->inited = true;
    conn->want = fs->want;
    if (fs->max_pages)
        conn->max_pages = fs->max_pages;
    if (fs->map_alignment)
        conn->map_alignment = fs->map_alignment;
    return fs->ret;
}

static void fake_destroy(void *fsp)
{
    struct fllt_fake_fs *fs = fsp;
    fs->calls++;
    fs->op = "destroy";
    fs->destroyed = true;
}

static void fake_reset(void *fsp)
{
    struct fllt_fake_fs *fs = fsp;
    fake_destroy(fsp);
    fs->op = "reset";
    fs->reset = true;
}

static int fake_lookup(struct fll_req *r, uint64_t parent, const char *name,
                       struct fuse_entry_out *out)
{
    rec(r, "lookup", parent, NULL, 0);
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    fill_entry(out, 42);
    return FS(r)->ret;
}

static void fake_forget(struct fll_req *r, uint64_t nodeid, uint64_t nlookup)
{
    struct fllt_fake_fs *fs = FS(r);
    rec(r, "forget", nodeid, NULL, 0);
    if (fs->nforgets < 64) {
        fs->forget_ids[fs->nforgets] = nodeid;
        fs->forget_counts[fs->nforgets] = nlookup;
    }
    fs->nforgets++;
}

static int fake_getattr(struct fll_req *r, uint64_t nodeid, const struct fuse_getattr_in *in,
                        struct fuse_attr_out *out)
{
    rec(r, "getattr", nodeid, in, sizeof(*in));
    out->attr_valid = 1;
    out->attr.ino = nodeid;
    out->attr.size = 1234;
    return FS(r)->ret;
}

static int fake_setattr(struct fll_req *r, uint64_t nodeid, const struct fuse_setattr_in *in,
                        struct fuse_attr_out *out)
{
    rec(r, "setattr", nodeid, in, sizeof(*in));
    out->attr.ino = nodeid;
    out->attr.size = in->size;
    return FS(r)->ret;
}

static int fake_readlink(struct fll_req *r, uint64_t nodeid, char *buf, size_t size)
{
    static const char t[] = "some/target";
    rec(r, "readlink", nodeid, NULL, 0);
    FS(r)->buf_size = size;
    if (FS(r)->ret)
        return FS(r)->ret;
    size_t n = strlen(t) < size ? strlen(t) : size;
    memcpy(buf, t, n);
    return (int)n;
}

static int fake_symlink(struct fll_req *r, uint64_t parent, const char *name, const char *target,
                        struct fuse_entry_out *out)
{
    rec(r, "symlink", parent, NULL, 0);
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    rec_name(FS(r)->target, sizeof(FS(r)->target), target);
    fill_entry(out, 43);
    return FS(r)->ret;
}

static int fake_mknod(struct fll_req *r, uint64_t parent, const char *name,
                      const struct fuse_mknod_in *in, struct fuse_entry_out *out)
{
    rec(r, "mknod", parent, in, sizeof(*in));
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    fill_entry(out, 44);
    return FS(r)->ret;
}

static int fake_mkdir(struct fll_req *r, uint64_t parent, const char *name,
                      const struct fuse_mkdir_in *in, struct fuse_entry_out *out)
{
    rec(r, "mkdir", parent, in, sizeof(*in));
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    fill_entry(out, 45);
    return FS(r)->ret;
}

static int fake_unlink(struct fll_req *r, uint64_t parent, const char *name)
{
    rec(r, "unlink", parent, NULL, 0);
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    return FS(r)->ret;
}

static int fake_rmdir(struct fll_req *r, uint64_t parent, const char *name)
{
    rec(r, "rmdir", parent, NULL, 0);
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    return FS(r)->ret;
}

static int fake_rename(struct fll_req *r, uint64_t parent, const char *name, uint64_t newparent,
                       const char *newname, uint32_t flags)
{
    rec(r, "rename", parent, NULL, 0);
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    rec_name(FS(r)->newname, sizeof(FS(r)->newname), newname);
    FS(r)->newparent = newparent;
    FS(r)->flags = flags;
    return FS(r)->ret;
}

static int fake_link(struct fll_req *r, uint64_t nodeid, uint64_t newparent, const char *newname,
                     struct fuse_entry_out *out)
{
    rec(r, "link", nodeid, NULL, 0);
    FS(r)->newparent = newparent;
    rec_name(FS(r)->newname, sizeof(FS(r)->newname), newname);
    fill_entry(out, nodeid);
    return FS(r)->ret;
}

static int fake_open(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                     struct fuse_open_out *out)
{
    rec(r, "open", nodeid, in, sizeof(*in));
    out->fh = 99;
    return FS(r)->ret;
}

static int fake_create(struct fll_req *r, uint64_t parent, const char *name,
                       const struct fuse_create_in *in, struct fuse_entry_out *entry,
                       struct fuse_open_out *open)
{
    rec(r, "create", parent, in, sizeof(*in));
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    fill_entry(entry, 46);
    open->fh = 100;
    return FS(r)->ret;
}

static int fake_tmpfile(struct fll_req *r, uint64_t parent, const char *name,
                        const struct fuse_create_in *in, struct fuse_entry_out *entry,
                        struct fuse_open_out *open)
{
    rec(r, "tmpfile", parent, in, sizeof(*in));
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    fill_entry(entry, 47);
    open->fh = 101;
    return FS(r)->ret;
}

static ssize_t fake_read(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                         const struct iovec *dst, unsigned dst_cnt)
{
    struct fllt_fake_fs *fs = FS(r);
    rec(r, "read", nodeid, in, sizeof(*in));
    fs->iov_cnt = dst_cnt;
    fs->iov_bytes = 0;
    for (unsigned i = 0; i < dst_cnt; i++)
        fs->iov_bytes += dst[i].iov_len;
    if (fs->ret)
        return fs->ret;
    size_t want = fs->count < 0 ? fs->iov_bytes : (size_t)fs->count;
    size_t done = 0;
    for (unsigned i = 0; i < dst_cnt && done < want; i++) {
        unsigned char *p = dst[i].iov_base;
        for (size_t k = 0; k < dst[i].iov_len && done < want; k++, done++)
            p[k] = (unsigned char)('a' + (in->offset + done) % 26);
    }
    return (ssize_t)(fs->count < 0 ? done : (size_t)fs->count);
}

static ssize_t fake_write(struct fll_req *r, uint64_t nodeid, const struct fuse_write_in *in,
                          const struct iovec *src, unsigned src_cnt)
{
    struct fllt_fake_fs *fs = FS(r);
    rec(r, "write", nodeid, in, sizeof(*in));
    fs->iov_cnt = src_cnt;
    fs->data_len = 0;
    for (unsigned i = 0; i < src_cnt; i++) {
        if (fs->data_len + src[i].iov_len <= sizeof(fs->data))
            memcpy(fs->data + fs->data_len, src[i].iov_base, src[i].iov_len);
        fs->data_len += src[i].iov_len;
    }
    fs->iov_bytes = fs->data_len;
    if (fs->ret)
        return fs->ret;
    return fs->count < 0 ? (ssize_t)fs->data_len : fs->count;
}

static int fake_statfs(struct fll_req *r, uint64_t nodeid, struct fuse_statfs_out *out)
{
    rec(r, "statfs", nodeid, NULL, 0);
    out->st.blocks = 1000;
    out->st.bsize = 4096;
    return FS(r)->ret;
}

#define SIMPLE(fn, type)                                                                           \
    static int fake_##fn(struct fll_req *r, uint64_t nodeid, const type *in)                       \
    {                                                                                              \
        rec(r, #fn, nodeid, in, sizeof(*in));                                                      \
        return FS(r)->ret;                                                                         \
    }
SIMPLE(release, struct fuse_release_in)
SIMPLE(releasedir, struct fuse_release_in)
SIMPLE(fsync, struct fuse_fsync_in)
SIMPLE(fsyncdir, struct fuse_fsync_in)
SIMPLE(flush, struct fuse_flush_in)
SIMPLE(access, struct fuse_access_in)
SIMPLE(fallocate, struct fuse_fallocate_in)
SIMPLE(setupmapping, struct fuse_setupmapping_in)

static int fake_setxattr(struct fll_req *r, uint64_t nodeid, const char *name, const void *value,
                         size_t size, int flags, uint32_t setxattr_flags)
{
    struct fllt_fake_fs *fs = FS(r);
    rec(r, "setxattr", nodeid, NULL, 0);
    rec_name(fs->name, sizeof(fs->name), name);
    memcpy(fs->data, value, size);
    fs->data_len = size;
    fs->flags = (uint32_t)flags;
    fs->setxattr_flags = setxattr_flags;
    return fs->ret;
}

static ssize_t fake_getxattr(struct fll_req *r, uint64_t nodeid, const char *name, void *buf,
                             size_t size)
{
    static const char v[] = "value-of-xattr";
    struct fllt_fake_fs *fs = FS(r);
    rec(r, "getxattr", nodeid, NULL, 0);
    rec_name(fs->name, sizeof(fs->name), name);
    fs->buf_size = size;
    if (fs->ret)
        return fs->ret;
    if (size == 0)
        return (ssize_t)strlen(v);
    if (size < strlen(v))
        return -ERANGE;
    memcpy(buf, v, strlen(v));
    return fs->count >= 0 ? fs->count : (ssize_t)strlen(v);
}

static ssize_t fake_listxattr(struct fll_req *r, uint64_t nodeid, void *buf, size_t size)
{
    static const char v[] = "user.a\0user.b"; /* 14 bytes with both NULs */
    struct fllt_fake_fs *fs = FS(r);
    rec(r, "listxattr", nodeid, NULL, 0);
    fs->buf_size = size;
    if (fs->ret)
        return fs->ret;
    if (size == 0)
        return sizeof(v);
    if (size < sizeof(v))
        return -ERANGE;
    memcpy(buf, v, sizeof(v));
    return sizeof(v);
}

static int fake_removexattr(struct fll_req *r, uint64_t nodeid, const char *name)
{
    rec(r, "removexattr", nodeid, NULL, 0);
    rec_name(FS(r)->name, sizeof(FS(r)->name), name);
    return FS(r)->ret;
}

static int fake_opendir(struct fll_req *r, uint64_t nodeid, const struct fuse_open_in *in,
                        struct fuse_open_out *out)
{
    rec(r, "opendir", nodeid, in, sizeof(*in));
    out->fh = 77;
    return FS(r)->ret;
}

/* Three entries "a", "bb", "ccc" from in->offset on, as many as fit. */
static int fake_readdir(struct fll_req *r, uint64_t nodeid, const struct fuse_read_in *in,
                        struct fll_dirbuf *db)
{
    static const char *names[] = {"a", "bb", "ccc"};
    rec(r, db->plus ? "readdirplus" : "readdir", nodeid, in, sizeof(*in));
    FS(r)->buf_size = db->size;
    if (FS(r)->ret)
        return FS(r)->ret;
    for (uint64_t i = in->offset; i < 3; i++) {
        struct fuse_entry_out e = {0};
        fill_entry(&e, 100 + i);
        if (!fll_dirbuf_add(db, names[i], 100 + i, 8, i + 1, &e))
            break;
    }
    return 0;
}

static int fake_getlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in,
                      struct fuse_lk_out *out)
{
    rec(r, "getlk", nodeid, in, sizeof(*in));
    out->lk = in->lk;
    out->lk.pid = 555;
    return FS(r)->ret;
}

static int fake_setlk(struct fll_req *r, uint64_t nodeid, const struct fuse_lk_in *in, bool sleep)
{
    rec(r, sleep ? "setlkw" : "setlk", nodeid, in, sizeof(*in));
    FS(r)->flags = sleep;
    if (FS(r)->async) {
        FS(r)->pending = r;
        return FLL_ASYNC;
    }
    return FS(r)->ret;
}

static int fake_lseek(struct fll_req *r, uint64_t nodeid, const struct fuse_lseek_in *in,
                      struct fuse_lseek_out *out)
{
    rec(r, "lseek", nodeid, in, sizeof(*in));
    out->offset = in->offset + 1;
    return FS(r)->ret;
}

static ssize_t fake_copy_file_range(struct fll_req *r, uint64_t nodeid,
                                    const struct fuse_copy_file_range_in *in)
{
    rec(r, "copy_file_range", nodeid, in, sizeof(*in));
    if (FS(r)->ret)
        return FS(r)->ret;
    return (ssize_t)in->len;
}

static int fake_syncfs(struct fll_req *r, uint64_t nodeid)
{
    rec(r, "syncfs", nodeid, NULL, 0);
    return FS(r)->ret;
}

static int fake_statx(struct fll_req *r, uint64_t nodeid, const struct fuse_statx_in *in,
                      struct fuse_statx_out *out)
{
    rec(r, "statx", nodeid, in, sizeof(*in));
    out->stat.mask = in->sx_mask;
    out->stat.ino = nodeid;
    return FS(r)->ret;
}

static int fake_interrupt(struct fll_req *r, uint64_t unique)
{
    rec(r, "interrupt", unique, NULL, 0);
    return FS(r)->ret;
}

static int fake_removemapping(struct fll_req *r, const struct fuse_removemapping_one *entries,
                              unsigned count)
{
    struct fllt_fake_fs *fs = FS(r);
    rec(r, "removemapping", 0, NULL, 0);
    memcpy(fs->rm, entries, count * sizeof(*entries));
    fs->rm_count = count;
    return fs->ret;
}

const struct fll_ops fllt_fake_ops = {
    .init = fake_init,
    .destroy = fake_destroy,
    .reset = fake_reset,
    .lookup = fake_lookup,
    .forget = fake_forget,
    .getattr = fake_getattr,
    .setattr = fake_setattr,
    .readlink = fake_readlink,
    .symlink = fake_symlink,
    .mknod = fake_mknod,
    .mkdir = fake_mkdir,
    .unlink = fake_unlink,
    .rmdir = fake_rmdir,
    .rename = fake_rename,
    .link = fake_link,
    .open = fake_open,
    .create = fake_create,
    .tmpfile = fake_tmpfile,
    .read = fake_read,
    .write = fake_write,
    .statfs = fake_statfs,
    .release = fake_release,
    .fsync = fake_fsync,
    .flush = fake_flush,
    .setxattr = fake_setxattr,
    .getxattr = fake_getxattr,
    .listxattr = fake_listxattr,
    .removexattr = fake_removexattr,
    .opendir = fake_opendir,
    .readdir = fake_readdir,
    .releasedir = fake_releasedir,
    .fsyncdir = fake_fsyncdir,
    .getlk = fake_getlk,
    .setlk = fake_setlk,
    .access = fake_access,
    .fallocate = fake_fallocate,
    .lseek = fake_lseek,
    .copy_file_range = fake_copy_file_range,
    .syncfs = fake_syncfs,
    .statx = fake_statx,
    .interrupt = fake_interrupt,
    .setupmapping = fake_setupmapping,
    .removemapping = fake_removemapping,
};

void fllt_fake_reset(struct fllt_fake_fs *fs)
{
    memset(fs, 0, sizeof(*fs));
    fs->count = -1;
}

/* ---- Transport ------------------------------------------------------------------- */

static void h_complete(struct fll_req *r, size_t out_len)
{
    struct fllt_fake_req *fr = (struct fllt_fake_req *)r;
    struct fllt_harness *h = fr->h;
    h->completions++;
    h->out_len = out_len;
    if (out_len >= sizeof(h->oh))
        memcpy(&h->oh, h->out, sizeof(h->oh));
}

struct fllt_harness *fllt_new(uint32_t max_write)
{
    struct fllt_harness *h = calloc(1, sizeof(*h));
    if (h == NULL)
        abort();
    fllt_fake_reset(&h->fs);
    h->tr.complete = h_complete;
    h->fr.h = h;
    struct fll_session_config cfg = {
        .ops = &fllt_fake_ops,
        .fs = &h->fs,
        .transport = &h->tr,
        .max_write = max_write,
    };
    if (fll_session_new(&cfg, &h->se) < 0)
        abort();
    return h;
}

void fllt_free(struct fllt_harness *h)
{
    fll_session_free(h->se);
    free(h);
}

void fllt_msg_init(struct fllt_msg *m, uint32_t opcode, uint64_t nodeid)
{
    static uint64_t unique = 1000;
    struct fuse_in_header ih = {
        .opcode = opcode,
        .unique = ++unique,
        .nodeid = nodeid,
        .uid = 1,
        .gid = 2,
        .pid = 3,
    };
    m->len = 0;
    m->unique = ih.unique;
    fllt_msg_put(m, &ih, sizeof(ih));
}

void fllt_msg_put(struct fllt_msg *m, const void *p, size_t n)
{
    if (m->len + n > sizeof(m->b))
        abort();
    if (n == 0)
        return; /* p may be NULL then */
    memcpy(m->b + m->len, p, n);
    m->len += n;
}

void fllt_msg_str(struct fllt_msg *m, const char *s)
{
    fllt_msg_put(m, s, strlen(s) + 1);
}

void fllt_msg_set_len(struct fllt_msg *m, uint32_t len)
{
    memcpy(m->b + offsetof(struct fuse_in_header, len), &len, sizeof(len));
}

void fllt_msg_end(struct fllt_msg *m)
{
    fllt_msg_set_len(m, (uint32_t)m->len);
}

static unsigned cut(struct iovec *iov, unsigned char *p, size_t len, size_t chunk)
{
    unsigned n = 0;
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t off = 0; off < len && n < FAKE_IOV_MAX; off += chunk) {
        iov[n].iov_base = p + off;
        iov[n].iov_len = len - off < chunk ? len - off : chunk;
        n++;
    }
    return n;
}

void fllt_send(struct fllt_harness *h, const struct fllt_msg *m, size_t in_chunk, size_t out_size,
               size_t out_chunk)
{
    h->completions = 0;
    h->out_len = 0;
    memset(&h->oh, 0, sizeof(h->oh));
    memset(h->out, 0xee, out_size < sizeof(h->out) ? out_size : sizeof(h->out));
    memset(&h->fr.req, 0, sizeof(h->fr.req));
    h->fr.req.in = h->in_iov;
    h->fr.req.in_cnt = cut(h->in_iov, (unsigned char *)m->b, m->len, in_chunk);
    h->fr.req.out = h->out_iov;
    h->fr.req.out_cnt = cut(h->out_iov, h->out, out_size, out_chunk);
    fll_session_process(h->se, &h->fr.req);
}

void fllt_send1(struct fllt_harness *h, const struct fllt_msg *m)
{
    fllt_send(h, m, 0, sizeof(h->out), 0);
}

int fllt_init(struct fllt_harness *h, uint32_t minor, uint64_t flags)
{
    static struct fllt_msg m;
    struct fuse_init_in in = {
        .major = 7,
        .minor = minor,
        .max_readahead = 65536,
        .flags = (uint32_t)flags | FUSE_INIT_EXT,
        .flags2 = (uint32_t)(flags >> 32),
    };
    fllt_msg_init(&m, FUSE_INIT, 0);
    fllt_msg_put(&m, &in, sizeof(in));
    fllt_msg_end(&m);
    fllt_send1(h, &m);
    return h->oh.error;
}
