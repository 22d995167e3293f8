/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Security contexts of new inodes (FUSE_SECURITY_CTX, protocol 7.36+).
 *
 * With the flag negotiated, the client sends the label its LSM wants on the
 * inode a CREATE, MKNOD, MKDIR, SYMLINK or TMPFILE makes. The bytes are the
 * same in both protocol forms:
 *
 *   fuse_secctx_header { size, nr_secctx }  size: bytes of the whole blob
 *   nr_secctx times:
 *     fuse_secctx { size, padding }         size: bytes of the value
 *     name, NUL-terminated                  e.g. "security.selinux"
 *     value                                 size bytes
 *     zeros up to a multiple of 8           (of fuse_secctx + name + value)
 *
 * 7.36 and 7.37 clients (Linux 5.17 to 6.2) append the blob as one more
 * argument after the names. 7.38+ clients send it as a request extension:
 * the last total_extlen * 8 bytes of the request are a list of
 * fuse_ext_header { size, type } records, and a type of 0..31 marks the blob
 * above (its header doubles as the extension header, type = nr_secctx).
 * Type FUSE_EXT_GROUPS (supplementary groups, only sent after
 * FUSE_CREATE_SUPP_GROUP, which fll never grants) is stepped over.
 *
 * Everything comes from the client, so all of it is checked: the blob's size
 * against the bytes there are, record sizes 8-byte multiples, at most one
 * security context record, nr_secctx 0 or 1 (Linux labels an inode with one
 * LSM context; more is refused rather than half applied), the name
 * NUL-terminated inside the blob with the "security." prefix, the value 1 to
 * FLL_SECCTX_VALUE_MAX bytes, and the sizes adding up exactly. Anything else
 * is EINVAL before the filesystem runs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fll_i.h"

#define SECCTX_ALIGN(n) (((n) + 7u) & ~(size_t)7u)
#define SECCTX_PREFIX   "security."

int fll_secctx_parse(struct fll_cursor *c, size_t len, struct fll_secctx_buf *b, bool *found)
{
    struct fuse_secctx_header hdr;
    struct fuse_secctx one;

    *found = false;
    if (len < sizeof(hdr) || len > fll_cursor_left(c) || !fll_cursor_copy(c, &hdr, sizeof(hdr)))
        return -EINVAL;
    if (hdr.size != len)
        return -EINVAL;
    if (hdr.nr_secctx == 0)
        return len == sizeof(hdr) ? 0 : -EINVAL;
    if (hdr.nr_secctx != 1)
        return -EINVAL;

    size_t rest = len - sizeof(hdr);
    if (rest < sizeof(one) || !fll_cursor_copy(c, &one, sizeof(one)))
        return -EINVAL;
    rest -= sizeof(one);
    if (one.size == 0 || one.size > FLL_SECCTX_VALUE_MAX)
        return -EINVAL;

    /* The name must end inside the blob: search a cursor cut to it. */
    struct fll_cursor nc = *c;
    nc.left = rest;
    if (fll_cursor_cstr(&nc, b->name, sizeof(b->name), -EINVAL) < 0)
        return -EINVAL;
    size_t namelen = strlen(b->name) + 1;
    if (strncmp(b->name, SECCTX_PREFIX, strlen(SECCTX_PREFIX)) != 0 ||
        namelen == strlen(SECCTX_PREFIX) + 1)
        return -EINVAL;
    /* The sizes must describe the blob exactly, padding included. */
    if (len != sizeof(hdr) + SECCTX_ALIGN(sizeof(one) + namelen + (size_t)one.size))
        return -EINVAL;
    if (!fll_cursor_skip(c, namelen))
        return -EINVAL;

    b->value = malloc(one.size);
    if (!b->value)
        return -ENOMEM;
    if (!fll_cursor_copy(c, b->value, one.size)) {
        free(b->value);
        b->value = NULL;
        return -EINVAL;
    }
    size_t pad = len - sizeof(hdr) - sizeof(one) - namelen - one.size;
    if (!fll_cursor_skip(c, pad)) {
        free(b->value);
        b->value = NULL;
        return -EINVAL;
    }
    b->sc.name = b->name;
    b->sc.value = b->value;
    b->sc.size = one.size;
    *found = true;
    return 0;
}

/* 7.38+: walks the extension records; at most one security context. On
 * failure b->value may hold a copy the caller frees. */
static int secctx_from_ext(struct fll_req *r, struct fll_secctx_buf *b, bool *found)
{
    /* The dispatcher checked hdr.len against the request and extlen against hdr.len. */
    size_t extlen = (size_t)r->hdr.total_extlen * 8;
    struct fll_cursor c;
    bool seen = false;

    fll_cursor_init(&c, r->in, r->in_cnt, r->hdr.len);
    if (extlen > fll_cursor_left(&c) || !fll_cursor_skip(&c, fll_cursor_left(&c) - extlen))
        return -EINVAL;

    while (fll_cursor_left(&c) > 0) {
        struct fuse_ext_header eh;
        struct fll_cursor peek = c;
        if (!fll_cursor_copy(&peek, &eh, sizeof(eh)))
            return -EINVAL;
        if (eh.size < sizeof(eh) || eh.size % 8 != 0 || eh.size > fll_cursor_left(&c))
            return -EINVAL;
        if (eh.type <= FUSE_MAX_NR_SECCTX) {
            if (seen)
                return -EINVAL;
            seen = true;
            int ret = fll_secctx_parse(&c, eh.size, b, found);
            if (ret < 0)
                return ret;
        } else if (eh.type == FUSE_EXT_GROUPS) {
            if (!fll_cursor_skip(&c, eh.size))
                return -EINVAL;
        } else {
            return -EINVAL;
        }
    }
    return 0;
}

int fll_secctx_take(struct fll_req *r, struct fll_cursor *c, struct fll_secctx_buf *b)
{
    bool found = false;
    int ret = 0;

    b->value = NULL;
    r->secctx = NULL;
    if (!fll_secctx_on(r->se))
        return 0;
    if (r->hdr.total_extlen > 0)
        ret = secctx_from_ext(r, b, &found);
    else if (__atomic_load_n(&r->se->client_minor, __ATOMIC_RELAXED) < 38 && fll_cursor_left(c) > 0)
        ret = fll_secctx_parse(c, fll_cursor_left(c), b, &found);
    if (ret < 0) {
        /* A context may have been copied before a later record failed. */
        free(b->value);
        b->value = NULL;
        return ret;
    }
    if (found)
        r->secctx = &b->sc;
    return 0;
}

void fll_secctx_drop(struct fll_req *r, struct fll_secctx_buf *b)
{
    r->secctx = NULL;
    free(b->value);
    b->value = NULL;
}
