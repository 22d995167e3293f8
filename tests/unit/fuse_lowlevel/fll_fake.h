/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Test helpers for fuse_lowlevel: a recording fake filesystem, an in-memory
 * transport, and a request builder. The request bytes are built contiguously
 * and then cut into iovecs of a chosen size, so every decoder is exercised
 * across iovec boundaries.
 */
#ifndef VUFS_FLL_FAKE_H
#define VUFS_FLL_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fll.h"

#define FAKE_MSG_MAX (1u << 20)
#define FAKE_OUT_MAX ((1u << 20) + 4096)
#define FAKE_IOV_MAX 4096

/* What the fake filesystem saw, and what it answers. */
struct fllt_fake_fs {
    /* Answers */
    int ret;       /* for int operations (0 = success) */
    ssize_t count; /* for read/write/xattr/readlink: bytes; -1 = all offered */
    bool async;    /* setlk answers FLL_ASYNC and keeps the request */
    uint64_t want; /* init: flags to ask for (masked with capable by fll) */
    uint16_t max_pages;
    uint16_t map_alignment;

    /* Records */
    int calls;      /* every operation call, destroy and forgets included */
    const char *op; /* name of the last operation */
    uint64_t nodeid, parent, newparent;
    uint32_t uid, gid; /* the caller, from the request header */
    int32_t pid;
    char name[FLL_NAME_MAX + 2];
    char newname[FLL_NAME_MAX + 2];
    char target[FLL_PATH_MAX + 1];
    uint32_t flags; /* rename flags, setxattr flags, setlk sleep */
    uint32_t setxattr_flags;
    unsigned char in[256]; /* the argument struct the operation got */
    size_t in_len;
    unsigned char data[FAKE_MSG_MAX]; /* write data / xattr value, gathered */
    size_t data_len;
    unsigned iov_cnt; /* read/write: iovecs given */
    size_t iov_bytes; /* read/write: bytes they describe */
    size_t buf_size;  /* readlink/xattr/readdir: buffer offered */
    uint64_t forget_ids[64];
    uint64_t forget_counts[64];
    unsigned nforgets;
    struct fuse_removemapping_one rm[FLL_REMOVEMAPPING_MAX];
    unsigned rm_count;
    bool secctx_seen; /* the last operation got a security context */
    char secctx_name[FLL_SECCTX_NAME_MAX];
    unsigned char secctx_value[FLL_SECCTX_VALUE_MAX];
    size_t secctx_size;
    struct fll_conn conn; /* as init saw it */
    bool inited, destroyed;
    bool reset; /* ended by fll_ops.reset (destroyed is set too) */
    struct fll_req *pending; /* the request kept by an async setlk */
};

extern const struct fll_ops fllt_fake_ops;
void fllt_fake_reset(struct fllt_fake_fs *fs);

/* A transport that records completions; one request in flight at a time. */
struct fllt_fake_req {
    struct fll_req req; /* first */
    struct fllt_harness *h;
};

struct fllt_harness {
    struct fllt_fake_fs fs;
    struct fll_session *se;
    struct fll_transport tr;
    struct fllt_fake_req fr;
    int completions;
    size_t out_len;
    struct fuse_out_header oh; /* the reply header, when out_len >= 16 */
    struct iovec in_iov[FAKE_IOV_MAX];
    struct iovec out_iov[FAKE_IOV_MAX];
    unsigned char out[FAKE_OUT_MAX];
};

/* A request under construction. */
struct fllt_msg {
    unsigned char b[FAKE_MSG_MAX];
    size_t len;
    uint64_t unique;
};

struct fllt_harness *fllt_new(uint32_t max_write);
void fllt_free(struct fllt_harness *h);

void fllt_msg_init(struct fllt_msg *m, uint32_t opcode, uint64_t nodeid);
void fllt_msg_put(struct fllt_msg *m, const void *p, size_t n);
void fllt_msg_str(struct fllt_msg *m, const char *s); /* with its NUL */
void fllt_msg_end(struct fllt_msg *m);                /* hdr.len = bytes built */
void fllt_msg_set_len(struct fllt_msg *m, uint32_t len);

/*
 * Processes m: the request cut into iovecs of in_chunk bytes (0 = one iovec),
 * into out_size bytes of reply buffers cut into out_chunk bytes (0 = one).
 * Resets the completion records first.
 */
void fllt_send(struct fllt_harness *h, const struct fllt_msg *m, size_t in_chunk, size_t out_size,
               size_t out_chunk);
/* fllt_send with one in iovec and a large single reply buffer. */
void fllt_send1(struct fllt_harness *h, const struct fllt_msg *m);
/* Sends INIT 7.minor with the given flags; returns the reply error. */
int fllt_init(struct fllt_harness *h, uint32_t minor, uint64_t flags);

/* A payload pointer into the reply (after the header). */
static inline const void *fllt_body(const struct fllt_harness *h)
{
    return h->out + sizeof(struct fuse_out_header);
}

/* Byte-level fuzz entry: see fll_fuzz.c. */
int fll_fuzz_one(const uint8_t *data, size_t size);

#endif
