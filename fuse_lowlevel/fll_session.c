/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sessions: the dispatcher, the reply writers, and the connection life cycle
 * (INIT, DESTROY, INTERRUPT).
 *
 * Request flow (fll_session_process):
 *   1. measure the readable and writable buffers (the cursor saturates sums)
 *   2. copy the fuse_in_header out once; too short -> complete without reply
 *   3. hdr.len must equal the readable bytes            -> else EINVAL
 *   4. before INIT only INIT is served                  -> else EIO
 *   5. opcode in the table, with a filesystem operation -> else ENOSYS
 *   6. room for at least a reply header                 -> else no reply
 *   7. the decoder validates its arguments and calls the filesystem
 * Requests the client expects no answer to (FORGET, BATCH_FORGET) are never
 * answered, not even with an error.
 *
 * Exactly one completion per request: fll_complete() is the only caller of the
 * transport's complete(), and asserts (debug builds) it runs once per request.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fll_i.h"
#include "fll_ops_i.h"

/* ---- Completion and replies -------------------------------------------------- */

void fll_complete(struct fll_req *r, size_t out_len)
{
    assert(!r->completed);
    assert(out_len <= r->out_size);
    r->completed = true;
    r->se->cfg.transport->complete(r, out_len);
}

/*
 * Writes the reply header for a body of size bytes (already checked to fit).
 * This is the one place where the sign of an error flips: inside fll errors
 * are negative errno values, and FUSE wants them negative in the header too,
 * so only the range is enforced here.
 */
static void put_header(struct fll_req *r, struct fll_cursor *out, int err, size_t size)
{
    assert(err == fll_op_err(err));
    struct fuse_out_header oh = {
        .len = (uint32_t)(sizeof(oh) + size),
        .error = err,
        .unique = r->hdr.unique,
    };
    bool ok = fll_cursor_put(out, &oh, sizeof(oh));
    assert(ok);
    (void)ok;
}

static void reply_err_i(struct fll_req *r, int err)
{
    if (r->out_size < sizeof(struct fuse_out_header)) {
        fll_complete(r, 0);
        return;
    }
    struct fll_cursor out;
    fll_cursor_init(&out, r->out, r->out_cnt, r->out_size);
    put_header(r, &out, err, 0);
    fll_complete(r, sizeof(struct fuse_out_header));
}

void fll_reply_err(struct fll_req *r, int err)
{
    reply_err_i(r, fll_op_err(err));
}

void fll_reply_ok2(struct fll_req *r, const void *a, size_t asize, const void *b, size_t bsize)
{
    if (!fll_out_fits(r, asize) || !fll_out_fits(r, asize + bsize)) {
        reply_err_i(r, -EIO);
        return;
    }
    struct fll_cursor out;
    fll_cursor_init(&out, r->out, r->out_cnt, r->out_size);
    put_header(r, &out, 0, asize + bsize);
    bool ok = fll_cursor_put(&out, a, asize) && fll_cursor_put(&out, b, bsize);
    assert(ok);
    (void)ok;
    fll_complete(r, sizeof(struct fuse_out_header) + asize + bsize);
}

void fll_reply_ok(struct fll_req *r, const void *arg, size_t size)
{
    fll_reply_ok2(r, arg, size, NULL, 0);
}

void fll_reply_inplace(struct fll_req *r, size_t size)
{
    assert(fll_out_fits(r, size));
    struct fll_cursor out;
    fll_cursor_init(&out, r->out, r->out_cnt, r->out_size);
    put_header(r, &out, 0, size);
    fll_complete(r, sizeof(struct fuse_out_header) + size);
}

int fll_reply_status(struct fll_req *r, int ret)
{
    if (ret == FLL_ASYNC)
        return 0; /* the operation owns the request now */
    return fll_reply_struct(r, ret, NULL, 0);
}

int fll_reply_struct(struct fll_req *r, int ret, const void *body, size_t size)
{
    ret = fll_op_err(ret);
    if (ret < 0)
        return ret;
    fll_reply_ok(r, body, size);
    return 0;
}

int fll_reply_count(struct fll_req *r, ssize_t ret, uint64_t max)
{
    if (ret < 0)
        return fll_op_err(ret);
    if ((uint64_t)ret > max)
        return -EIO;
    /* fuse_write_out and fuse_getxattr_out: the same 8 bytes. */
    struct fuse_write_out out = {.size = (uint32_t)ret};
    fll_reply_ok(r, &out, sizeof(out));
    return 0;
}

_Static_assert(sizeof(struct fuse_write_out) == sizeof(struct fuse_getxattr_out) &&
                   offsetof(struct fuse_getxattr_out, size) == offsetof(struct fuse_write_out, size),
               "a count reply");

bool fll_outbuf_get(struct fll_req *r, struct fll_outbuf *ob, size_t size)
{
    ob->size = size;
    ob->heap = false;
    ob->p = NULL;
    if (size == 0)
        return true;
    struct fll_cursor out;
    fll_cursor_init(&out, r->out, r->out_cnt, r->out_size);
    if (fll_cursor_skip(&out, sizeof(struct fuse_out_header))) {
        struct iovec one;
        if (fll_cursor_iov(&out, &one, 1, size) == 1) {
            ob->p = one.iov_base;
            return true;
        }
    }
    ob->p = malloc(size);
    ob->heap = true;
    return ob->p != NULL;
}

void fll_outbuf_release(struct fll_outbuf *ob)
{
    if (ob->heap)
        free(ob->p);
    ob->p = NULL;
    ob->heap = false;
}

void fll_outbuf_reply(struct fll_req *r, struct fll_outbuf *ob, size_t len)
{
    assert(len <= ob->size);
    if (ob->heap)
        fll_reply_ok(r, ob->p, len);
    else
        fll_reply_inplace(r, len);
    fll_outbuf_release(ob);
}

/* ---- INIT / DESTROY / INTERRUPT ------------------------------------------------ */

/* The size of fuse_init_out a client of this minor expects (fs/fuse/inode.c). */
static size_t init_out_size(uint32_t minor)
{
    if (minor < 5)
        return FUSE_COMPAT_INIT_OUT_SIZE;
    if (minor < 23)
        return FUSE_COMPAT_22_INIT_OUT_SIZE;
    return sizeof(struct fuse_init_out);
}

/*
 * Pages per request to offer when the filesystem does not choose: as many as the
 * transport carries (its max_pages cap, else its max_write). The kernel reads a
 * FUSE_MAX_PAGES reply with max_pages 0 as ONE page per request, which would cut
 * every READ and WRITE to 4 KiB.
 */
static uint16_t fll_default_max_pages(const struct fll_session_config *cfg)
{
    uint32_t pages = cfg->max_pages ? cfg->max_pages : cfg->max_write / 4096;
    if (pages == 0)
        pages = 1;
    return pages > UINT16_MAX ? UINT16_MAX : (uint16_t)pages;
}

/* INIT; called with se->init_lock held and the state NEW. */
static int init_locked(struct fll_req *r, struct fll_cursor *c)
{
    struct fll_session *se = r->se;
    struct fuse_init_in in = {0};

    fll_assert_state(se, FLL_STATE_NEW);
    /* major, minor, max_readahead, flags: present in every protocol version. */
    if (!fll_cursor_copy(c, &in, offsetof(struct fuse_init_in, flags2)))
        return -EINVAL;

    if (in.major > FUSE_KERNEL_VERSION) {
        /*
         * A newer major: answer with ours only; the client retries INIT with
         * a major it shares with us (fuse.h "INIT request and reply").
         */
        struct fuse_init_out out = {
            .major = FUSE_KERNEL_VERSION,
            .minor = FLL_KERNEL_MINOR,
        };
        fll_reply_ok(r, &out, FUSE_COMPAT_INIT_OUT_SIZE);
        return 0;
    }
    /*
     * Older than 7.31 (Linux 5.4, the first kernel with virtio-fs): every
     * virtio-fs client speaks 7.31 or newer, so an older one is not a client
     * we can serve correctly; refuse rather than guess at old layouts.
     */
    if (in.major < FUSE_KERNEL_VERSION || in.minor < FLL_MIN_MINOR)
        return -EPROTO;

    uint64_t capable = in.flags;
    if (in.flags & FUSE_INIT_EXT) {
        /* 7.36+: flags2 and 44 reserved bytes follow, all of them present. */
        uint32_t rest[12];
        if (!fll_cursor_copy(c, rest, sizeof(rest)))
            return -EINVAL;
        in.flags2 = rest[0];
        capable |= (uint64_t)in.flags2 << 32;
    }

    struct fll_conn conn = {
        .proto_minor = in.minor,
        .capable = capable,
        .want = 0,
        .max_write = se->cfg.max_write,
        .max_pages = fll_default_max_pages(&se->cfg),
        .map_alignment = 0,
        .max_readahead = in.max_readahead,
        .time_gran = 1,
    };
    const struct fll_ops *ops = se->cfg.ops;
    if (ops->init) {
        int ret = fll_op_err(ops->init(se->cfg.fs, &conn));
        if (ret < 0)
            return ret;
    }
    /* The filesystem may ask, never grant itself what the client did not offer. */
    conn.want &= capable;
    if (conn.max_write > se->cfg.max_write)
        conn.max_write = se->cfg.max_write;
    if (conn.max_readahead > in.max_readahead)
        conn.max_readahead = in.max_readahead;
    if (se->cfg.max_pages && conn.max_pages > se->cfg.max_pages)
        conn.max_pages = se->cfg.max_pages;
    if (conn.max_pages && (capable & FUSE_MAX_PAGES))
        conn.want |= FUSE_MAX_PAGES;
    if (conn.map_alignment && (capable & FUSE_MAP_ALIGNMENT))
        conn.want |= FUSE_MAP_ALIGNMENT;
    if (conn.want >> 32)
        conn.want |= FUSE_INIT_EXT; /* flags2 is only read when this is set */
    if (!(conn.want & FUSE_MAX_PAGES))
        conn.max_pages = 0;
    if (!(conn.want & FUSE_MAP_ALIGNMENT))
        conn.map_alignment = 0;
    conn.proto_minor = in.minor < FLL_KERNEL_MINOR ? in.minor : FLL_KERNEL_MINOR;

    struct fuse_init_out out = {
        .major = FUSE_KERNEL_VERSION,
        .minor = conn.proto_minor,
        .max_readahead = conn.max_readahead,
        .flags = (uint32_t)conn.want,
        .max_write = conn.max_write,
        .time_gran = conn.time_gran,
        .max_pages = conn.max_pages,
        .max_background = se->cfg.max_background,
        .congestion_threshold = (uint16_t)(se->cfg.max_background / 4 * 3),
        .map_alignment = conn.map_alignment,
        .flags2 = (uint32_t)(conn.want >> 32),
    };
    size_t size = init_out_size(in.minor);
    if (!fll_out_fits(r, size))
        return -EIO;

    se->conn = conn;
    __atomic_store_n(&se->max_write, conn.max_write, __ATOMIC_RELAXED);
    __atomic_store_n(&se->setxattr_ext, (conn.want & FUSE_SETXATTR_EXT) != 0, __ATOMIC_RELAXED);
    __atomic_store_n(&se->secctx, (conn.want & FUSE_SECURITY_CTX) != 0, __ATOMIC_RELAXED);
    __atomic_store_n(&se->client_minor, in.minor, __ATOMIC_RELAXED);
    __atomic_store_n(&se->state, FLL_STATE_READY, __ATOMIC_RELEASE);
    fll_reply_ok(r, &out, size);
    return 0;
}

/* READY -> NEW, telling the filesystem (reset: the driver was reset, see
 * fll_ops.reset). Returns false if not READY. */
static bool destroy_locked(struct fll_session *se, bool reset)
{
    if (fll_state_get(se) != FLL_STATE_READY)
        return false;
    if (reset && se->cfg.ops->reset)
        se->cfg.ops->reset(se->cfg.fs);
    else if (se->cfg.ops->destroy)
        se->cfg.ops->destroy(se->cfg.fs);
    __atomic_store_n(&se->state, FLL_STATE_NEW, __ATOMIC_RELEASE);
    return true;
}

static int fll_do_init(struct fll_req *r, struct fll_cursor *c)
{
    struct fll_session *se = r->se;

    pthread_mutex_lock(&se->init_lock);
    /* The first request after the driver stopped: a new driver (see fll.h). */
    if (__atomic_exchange_n(&se->driver_stopped, false, __ATOMIC_ACQ_REL))
        destroy_locked(se, true);
    int ret = fll_state_get(se) == FLL_STATE_NEW ? init_locked(r, c) : -EPROTO;
    pthread_mutex_unlock(&se->init_lock);
    return ret;
}

static int fll_do_destroy(struct fll_req *r, struct fll_cursor *c)
{
    struct fll_session *se = r->se;

    pthread_mutex_lock(&se->init_lock);
    bool ok = destroy_locked(se, false);
    pthread_mutex_unlock(&se->init_lock);
    if (!ok)
        return -EIO;
    fll_reply_ok(r, NULL, 0);
    return 0;
}

void fll_session_driver_stopped(struct fll_session *se)
{
    __atomic_store_n(&se->driver_stopped, true, __ATOMIC_RELEASE);
}

void fll_session_shutdown(struct fll_session *se)
{
    pthread_mutex_lock(&se->init_lock);
    destroy_locked(se, false);
    pthread_mutex_unlock(&se->init_lock);
}

/*
 * INTERRUPT: no reply when the filesystem took note of it; an error (ENOSYS
 * without an interrupt op, EAGAIN "not seen yet") is sent back as FUSE
 * defines.
 */
static int fll_do_interrupt(struct fll_req *r, struct fll_cursor *c)
{
    struct fuse_interrupt_in in;
    FLL_ARG(c, in);
    int ret = fll_op_err(fll_ops_of(r)->interrupt(r, in.unique));
    if (ret < 0)
        return ret;
    fll_complete(r, 0);
    return 0;
}

/* ---- The dispatch table ----------------------------------------------------------- */

/*
 * .op is offsetof(struct fll_ops, member) + 1 of the operation that must be
 * present (ENOSYS otherwise); 0 for opcodes that work without one.
 */
#define OP(member) (offsetof(struct fll_ops, member) + 1)

struct fll_opentry {
    fll_handler fn;
    size_t op;
    bool noreply;
};

static const struct fll_opentry fll_table[] = {
    [FUSE_LOOKUP] = {fll_do_lookup, OP(lookup)},
    [FUSE_FORGET] = {fll_do_forget, OP(forget), true},
    [FUSE_GETATTR] = {fll_do_getattr, OP(getattr)},
    [FUSE_SETATTR] = {fll_do_setattr, OP(setattr)},
    [FUSE_READLINK] = {fll_do_readlink, OP(readlink)},
    [FUSE_SYMLINK] = {fll_do_symlink, OP(symlink)},
    [FUSE_MKNOD] = {fll_do_mknod, OP(mknod)},
    [FUSE_MKDIR] = {fll_do_mkdir, OP(mkdir)},
    [FUSE_UNLINK] = {fll_do_unlink, OP(unlink)},
    [FUSE_RMDIR] = {fll_do_rmdir, OP(rmdir)},
    [FUSE_RENAME] = {fll_do_rename, OP(rename)},
    [FUSE_LINK] = {fll_do_link, OP(link)},
    [FUSE_OPEN] = {fll_do_open, OP(open)},
    [FUSE_READ] = {fll_do_read, OP(read)},
    [FUSE_WRITE] = {fll_do_write, OP(write)},
    [FUSE_STATFS] = {fll_do_statfs, OP(statfs)},
    [FUSE_RELEASE] = {fll_do_release, OP(release)},
    [FUSE_FSYNC] = {fll_do_fsync, OP(fsync)},
    [FUSE_SETXATTR] = {fll_do_setxattr, OP(setxattr)},
    [FUSE_GETXATTR] = {fll_do_getxattr, OP(getxattr)},
    [FUSE_LISTXATTR] = {fll_do_listxattr, OP(listxattr)},
    [FUSE_REMOVEXATTR] = {fll_do_removexattr, OP(removexattr)},
    [FUSE_FLUSH] = {fll_do_flush, OP(flush)},
    [FUSE_INIT] = {fll_do_init, 0},
    [FUSE_OPENDIR] = {fll_do_opendir, OP(opendir)},
    [FUSE_READDIR] = {fll_do_readdir, OP(readdir)},
    [FUSE_RELEASEDIR] = {fll_do_releasedir, OP(releasedir)},
    [FUSE_FSYNCDIR] = {fll_do_fsyncdir, OP(fsyncdir)},
    [FUSE_GETLK] = {fll_do_getlk, OP(getlk)},
    [FUSE_SETLK] = {fll_do_setlk, OP(setlk)},
    [FUSE_SETLKW] = {fll_do_setlkw, OP(setlk)},
    [FUSE_ACCESS] = {fll_do_access, OP(access)},
    [FUSE_CREATE] = {fll_do_create, OP(create)},
    [FUSE_INTERRUPT] = {fll_do_interrupt, OP(interrupt)},
    [FUSE_DESTROY] = {fll_do_destroy, 0},
    [FUSE_BATCH_FORGET] = {fll_do_batch_forget, OP(forget), true},
    [FUSE_FALLOCATE] = {fll_do_fallocate, OP(fallocate)},
    [FUSE_READDIRPLUS] = {fll_do_readdirplus, OP(readdir)},
    [FUSE_RENAME2] = {fll_do_rename2, OP(rename)},
    [FUSE_LSEEK] = {fll_do_lseek, OP(lseek)},
    [FUSE_COPY_FILE_RANGE] = {fll_do_copy_file_range, OP(copy_file_range)},
    [FUSE_SETUPMAPPING] = {fll_do_setupmapping, OP(setupmapping)},
    [FUSE_REMOVEMAPPING] = {fll_do_removemapping, OP(removemapping)},
    [FUSE_SYNCFS] = {fll_do_syncfs, OP(syncfs)},
    [FUSE_TMPFILE] = {fll_do_tmpfile, OP(tmpfile)},
    [FUSE_STATX] = {fll_do_statx, OP(statx)},
};

#define FLL_TABLE_LEN (sizeof(fll_table) / sizeof(fll_table[0]))

static const struct fll_opentry *table_entry(uint32_t opcode)
{
    if (opcode >= FLL_TABLE_LEN || fll_table[opcode].fn == NULL)
        return NULL;
    return &fll_table[opcode];
}

static bool op_present(const struct fll_ops *ops, const struct fll_opentry *e)
{
    if (e->op == 0)
        return true;
    void (*fn)(void);
    memcpy(&fn, (const char *)ops + e->op - 1, sizeof(fn));
    return fn != NULL;
}

/* ---- Sessions ----------------------------------------------------------------------- */

int fll_session_new(const struct fll_session_config *cfg, struct fll_session **out)
{
    *out = NULL;
    if (cfg == NULL || cfg->ops == NULL || cfg->transport == NULL ||
        cfg->transport->complete == NULL)
        return -EINVAL;
    struct fll_session *se = calloc(1, sizeof(*se));
    if (se == NULL)
        return -ENOMEM;
    se->cfg = *cfg;
    pthread_mutex_init(&se->init_lock, NULL);
    se->state = FLL_STATE_NEW;
    *out = se;
    return 0;
}

void fll_session_free(struct fll_session *se)
{
    if (se == NULL)
        return;
    pthread_mutex_destroy(&se->init_lock);
    free(se);
}

bool fll_session_initialized(const struct fll_session *se)
{
    return fll_state_get(se) == FLL_STATE_READY;
}

void fll_session_save(struct fll_session *se, struct fll_session_state *st)
{
    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&se->init_lock);
    if (fll_state_get(se) == FLL_STATE_READY) {
        const struct fll_conn *c = &se->conn;
        st->initialized = true;
        st->driver_stopped = __atomic_load_n(&se->driver_stopped, __ATOMIC_ACQUIRE);
        st->client_minor = __atomic_load_n(&se->client_minor, __ATOMIC_RELAXED);
        st->proto_minor = c->proto_minor;
        st->capable = c->capable;
        st->want = c->want;
        st->max_write = c->max_write;
        st->max_pages = c->max_pages;
        st->map_alignment = c->map_alignment;
        st->max_readahead = c->max_readahead;
        st->time_gran = c->time_gran;
    }
    pthread_mutex_unlock(&se->init_lock);
}

/* Whether st is an answer init_locked could have given on this session. */
static bool restore_valid(const struct fll_session *se, const struct fll_session_state *st)
{
    if (!st->initialized)
        return !st->driver_stopped && !st->client_minor && !st->proto_minor && !st->capable &&
               !st->want && !st->max_write && !st->max_pages && !st->map_alignment &&
               !st->max_readahead && !st->time_gran;
    uint32_t ours = st->client_minor < FLL_KERNEL_MINOR ? st->client_minor : FLL_KERNEL_MINOR;
    if (st->client_minor < FLL_MIN_MINOR || st->proto_minor != ours)
        return false;
    if (st->want & ~st->capable)
        return false;
    if (st->max_write == 0 || st->max_write > se->cfg.max_write)
        return false;
    if (se->cfg.max_pages && st->max_pages > se->cfg.max_pages)
        return false;
    if (!(st->want & FUSE_MAX_PAGES) && st->max_pages)
        return false;
    if (!(st->want & FUSE_MAP_ALIGNMENT) && st->map_alignment)
        return false;
    if (st->map_alignment > 63)
        return false;
    if (st->time_gran == 0 || st->time_gran > 1000000000u)
        return false;
    /* flags2 bits are only read by the client with FUSE_INIT_EXT. */
    if ((st->want >> 32) && !(st->want & FUSE_INIT_EXT))
        return false;
    return true;
}

int fll_session_restore(struct fll_session *se, const struct fll_session_state *st)
{
    int ret = 0;

    pthread_mutex_lock(&se->init_lock);
    if (fll_state_get(se) != FLL_STATE_NEW) {
        ret = -EBUSY;
    } else if (!restore_valid(se, st)) {
        ret = -EINVAL;
    } else if (st->initialized) {
        se->conn = (struct fll_conn){
            .proto_minor = st->proto_minor,
            .capable = st->capable,
            .want = st->want,
            .max_write = st->max_write,
            .max_pages = st->max_pages,
            .map_alignment = st->map_alignment,
            .max_readahead = st->max_readahead,
            .time_gran = st->time_gran,
        };
        __atomic_store_n(&se->max_write, st->max_write, __ATOMIC_RELAXED);
        __atomic_store_n(&se->setxattr_ext, (st->want & FUSE_SETXATTR_EXT) != 0,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&se->secctx, (st->want & FUSE_SECURITY_CTX) != 0, __ATOMIC_RELAXED);
        __atomic_store_n(&se->client_minor, st->client_minor, __ATOMIC_RELAXED);
        __atomic_store_n(&se->driver_stopped, st->driver_stopped, __ATOMIC_RELEASE);
        __atomic_store_n(&se->state, FLL_STATE_READY, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&se->init_lock);
    return ret;
}

void *fll_req_userdata(const struct fll_req *r)
{
    return r->se->cfg.fs;
}

void fll_session_process(struct fll_session *se, struct fll_req *r)
{
    struct fll_cursor c;

    r->se = se;
    r->completed = false;
    r->secctx = NULL;
    fll_cursor_init(&c, r->out, r->out_cnt, SIZE_MAX);
    r->out_size = fll_cursor_left(&c);

    fll_cursor_init(&c, r->in, r->in_cnt, SIZE_MAX);
    size_t total = fll_cursor_left(&c);
    if (!fll_cursor_copy(&c, &r->hdr, sizeof(r->hdr))) {
        /* Not even a header: no unique to answer to. */
        memset(&r->hdr, 0, sizeof(r->hdr));
        fll_complete(r, 0);
        return;
    }

    /* Anything but INIT first after the driver stopped: the same driver went on. */
    if (r->hdr.opcode != FUSE_INIT && __atomic_load_n(&se->driver_stopped, __ATOMIC_RELAXED))
        __atomic_store_n(&se->driver_stopped, false, __ATOMIC_RELAXED);

    const struct fll_opentry *e = table_entry(r->hdr.opcode);
    bool noreply = e && e->noreply;
    int err;
    size_t extlen = (size_t)r->hdr.total_extlen * 8;
    if (r->hdr.len != total || extlen > fll_cursor_left(&c))
        err = -EINVAL;
    else if (r->hdr.opcode != FUSE_INIT && fll_state_get(se) != FLL_STATE_READY)
        err = -EIO;
    else if (e == NULL || !op_present(se->cfg.ops, e))
        err = -ENOSYS;
    else if (!noreply && r->out_size < sizeof(struct fuse_out_header)) {
        fll_complete(r, 0);
        return;
    } else {
        /*
         * Request extensions (security context, supplementary groups) trail
         * the arguments: decoders never parse into them, the creating ones
         * read them with fll_secctx_take (which finds them at hdr.len - extlen).
         */
        c.left -= extlen;
        err = e->fn(r, &c);
        if (err == 0)
            return; /* replied, completed or handed off: r is no longer ours */
        if (err > 0)
            err = -EIO;
    }
    if (noreply)
        fll_complete(r, 0);
    else
        reply_err_i(r, err);
}
