/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fll internals: the session, the dispatch table entry and the helpers the
 * per-opcode decoders (fll_ops_*.c) share. Not for use outside fuse_lowlevel/.
 */
#ifndef VUFS_FLL_I_H
#define VUFS_FLL_I_H

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

#include "fll.h"
#include "vufs_util.h"

/*
 * Session state. Only INIT and DESTROY move it, both under se->init_lock; every
 * other request reads it with one acquire load (no lock on the hot path).
 *
 *        +-------+  INIT ok (major 7, minor >= 31)   +-------+
 *   ---> |  NEW  | --------------------------------> | READY |
 *        +-------+ <-------------------------------- +-------+
 *          |   ^              DESTROY                   |
 *          |   |                                        |
 *          +---+ INIT refused / major > 7 (we answer    +-- everything else
 *                with our major and wait for a new INIT)
 *
 * In NEW every opcode but INIT is answered EIO (FORGETs dropped); in READY a
 * second INIT is answered EPROTO, unless the transport said its driver stopped
 * (fll_session_driver_stopped) and INIT is the first request since: then a new
 * driver has come, READY -> NEW as on DESTROY (ops->destroy) and the INIT is
 * served (fll_do_init). se->conn is written only while the state is NEW and
 * under init_lock; the fields decoders read are published by the release store
 * of READY.
 */
enum fll_state {
    FLL_STATE_NEW = 0,
    FLL_STATE_READY = 1,
};

struct fll_session {
    struct fll_session_config cfg;
    pthread_mutex_t init_lock; /* serialises INIT and DESTROY */
    int state;                 /* enum fll_state; atomic, see above */
    /* Atomic: the driver stopped and no request came since but (maybe) INIT;
     * set by fll_session_driver_stopped, cleared by the next request. */
    bool driver_stopped;
    struct fll_conn conn;      /* negotiated; under init_lock */
    /*
     * What decoders need from the negotiation, atomic (relaxed): a request of
     * a previous connection may still be decoding while a new INIT runs.
     */
    uint32_t max_write; /* WRITE payload limit told to the client */
    bool setxattr_ext;  /* FUSE_SETXATTR_EXT negotiated */
    bool secctx;        /* FUSE_SECURITY_CTX negotiated */
    uint32_t client_minor; /* the client's own minor: < 38 sends no extensions */
};

static inline uint32_t fll_max_write(const struct fll_session *se)
{
    return __atomic_load_n(&se->max_write, __ATOMIC_RELAXED);
}

static inline bool fll_setxattr_ext(const struct fll_session *se)
{
    return __atomic_load_n(&se->setxattr_ext, __ATOMIC_RELAXED);
}

static inline bool fll_secctx_on(const struct fll_session *se)
{
    return __atomic_load_n(&se->secctx, __ATOMIC_RELAXED);
}

static inline int fll_state_get(const struct fll_session *se)
{
    return __atomic_load_n(&se->state, __ATOMIC_ACQUIRE);
}

static inline void fll_assert_state(const struct fll_session *se, int want)
{
    assert(fll_state_get(se) == want);
    (void)se;
    (void)want;
}

/*
 * A decoder: reads its arguments from c (positioned after the header), calls
 * the filesystem and either
 *   - returns a negative errno: the dispatcher sends it as the one reply, or
 *   - returns 0 having sent the one reply itself (fll_reply_ok...), having
 *     completed without reply (FORGET), or having handed the request to an
 *     FLL_ASYNC operation. After a 0 return the request must not be touched.
 */
typedef int (*fll_handler)(struct fll_req *r, struct fll_cursor *c);

/* fll_session.c */
void fll_complete(struct fll_req *r, size_t out_len);
/* Sends the header and size bytes of arg; -EIO header if it does not fit. */
void fll_reply_ok(struct fll_req *r, const void *arg, size_t size);
/* Two-part body (CREATE's entry + open). */
void fll_reply_ok2(struct fll_req *r, const void *a, size_t asize, const void *b, size_t bsize);
/* The body is already in r->out after the header (size bytes): write the header. */
void fll_reply_inplace(struct fll_req *r, size_t size);
/* Whether the reply buffers can carry a header plus size bytes of body. */
static inline bool fll_out_fits(const struct fll_req *r, size_t size)
{
    return r->out_size >= sizeof(struct fuse_out_header) &&
           r->out_size - sizeof(struct fuse_out_header) >= size;
}
static inline size_t fll_out_room(const struct fll_req *r)
{
    return r->out_size > sizeof(struct fuse_out_header)
               ? r->out_size - sizeof(struct fuse_out_header)
               : 0;
}
/* Turns an int operation's result into the header-only reply (or async). */
int fll_reply_status(struct fll_req *r, int ret);

/*
 * A contiguous buffer of size bytes for a variable-sized reply body: the
 * client's own buffer when the bytes after the header sit in one iovec, else
 * a heap copy that fll_reply_buf() writes through the cursor. NULL on ENOMEM.
 */
struct fll_outbuf {
    char *p;
    size_t size;
    bool heap;
};
bool fll_outbuf_get(struct fll_req *r, struct fll_outbuf *ob, size_t size);
/* Sends len bytes of ob as the reply body and releases ob. */
void fll_outbuf_reply(struct fll_req *r, struct fll_outbuf *ob, size_t len);
void fll_outbuf_release(struct fll_outbuf *ob);

/* fll_cursor.c: a directory entry name (0, -EINVAL, -ENAMETOOLONG). */
int fll_cursor_name(struct fll_cursor *c, char dst[FLL_NAME_MAX + 1]);
/* Any NUL-terminated string of at most max-1 bytes: 0, -EINVAL, or toolong. */
int fll_cursor_cstr(struct fll_cursor *c, char *dst, size_t max, int toolong);

/*
 * fll_secctx.c: the security context of a creating request. Storage for what
 * fll_secctx_take() copied out; r->secctx points into it while the
 * operation runs, and fll_secctx_drop() releases it.
 */
struct fll_secctx_buf {
    struct fll_secctx sc;
    char name[FLL_SECCTX_NAME_MAX];
    void *value; /* heap */
};
/*
 * Reads the security context of a CREATE, MKNOD, MKDIR, SYMLINK or TMPFILE
 * whose other arguments c has already consumed: from the request extensions
 * (7.38+ clients), or from the bytes after the arguments (7.36 and 7.37
 * clients send it as one more argument). Sets r->secctx (NULL when there is
 * none). 0, -EINVAL for anything malformed, -ENOMEM.
 */
int fll_secctx_take(struct fll_req *r, struct fll_cursor *c, struct fll_secctx_buf *b);
void fll_secctx_drop(struct fll_req *r, struct fll_secctx_buf *b);
/*
 * One fuse_secctx_header blob of exactly len bytes at c (the layout is the
 * same in both forms). Exposed for the unit tests.
 */
int fll_secctx_parse(struct fll_cursor *c, size_t len, struct fll_secctx_buf *b, bool *found);

static inline const struct fll_ops *fll_ops_of(const struct fll_req *r)
{
    return r->se->cfg.ops;
}

#define FLL_ARG(c, var)                                                                            \
    do {                                                                                           \
        if (!fll_cursor_copy((c), &(var), sizeof(var)))                                            \
            return -EINVAL;                                                                        \
    } while (0)


#endif
