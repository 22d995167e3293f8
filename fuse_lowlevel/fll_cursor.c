/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The bounds-checked cursor over client buffers, and name validation.
 *
 * Every byte that comes from the client is read through a cursor and copied out
 * once: the client may rewrite its memory while we look at it, so nothing is
 * parsed in place. A cursor never moves past its limit; a short read fails and
 * leaves the cursor where it was.
 */
#include <errno.h>
#include <string.h>

#include "fll_i.h"

void fll_cursor_init(struct fll_cursor *c, const struct iovec *iov, unsigned cnt, size_t limit)
{
    size_t total = 0;

    for (unsigned i = 0; i < cnt; i++) {
        /* Saturate: the transport validated each iovec, but not their sum. */
        if (iov[i].iov_len > SIZE_MAX - total) {
            total = SIZE_MAX;
            break;
        }
        total += iov[i].iov_len;
    }
    c->iov = iov;
    c->cnt = cnt;
    c->idx = 0;
    c->off = 0;
    c->left = total < limit ? total : limit;
}

size_t fll_cursor_left(const struct fll_cursor *c)
{
    return c->left;
}

/* Steps over empty iovecs and finished ones so c->idx points at a byte. */
static void cursor_settle(struct fll_cursor *c)
{
    while (c->idx < c->cnt && c->off >= c->iov[c->idx].iov_len) {
        c->idx++;
        c->off = 0;
    }
}

/* Walks n bytes (n <= left), calling fn on each piece; fn may be NULL. */
static void cursor_walk(struct fll_cursor *c, size_t n, void (*fn)(void *ctx, char *p, size_t len),
                        void *ctx)
{
    while (n > 0) {
        cursor_settle(c);
        assert(c->idx < c->cnt);
        size_t avail = c->iov[c->idx].iov_len - c->off;
        size_t take = avail < n ? avail : n;
        if (fn)
            fn(ctx, (char *)c->iov[c->idx].iov_base + c->off, take);
        c->off += take;
        c->left -= take;
        n -= take;
    }
}

static void copy_out(void *ctx, char *p, size_t len)
{
    char **dst = ctx;
    memcpy(*dst, p, len);
    *dst += len;
}

static void copy_in(void *ctx, char *p, size_t len)
{
    const char **src = ctx;
    memcpy(p, *src, len);
    *src += len;
}

bool fll_cursor_copy(struct fll_cursor *c, void *dst, size_t n)
{
    if (n > c->left)
        return false;
    char *d = dst;
    cursor_walk(c, n, copy_out, &d);
    return true;
}

bool fll_cursor_skip(struct fll_cursor *c, size_t n)
{
    if (n > c->left)
        return false;
    cursor_walk(c, n, NULL, NULL);
    return true;
}

bool fll_cursor_put(struct fll_cursor *c, const void *src, size_t n)
{
    if (n > c->left)
        return false;
    const char *s = src;
    cursor_walk(c, n, copy_in, &s);
    return true;
}

int fll_cursor_iov(struct fll_cursor *c, struct iovec *dst, unsigned max, size_t n)
{
    if (n > c->left)
        return -EINVAL;

    /* Describe first on a copy, so a failure leaves c untouched. */
    struct fll_cursor t = *c;
    unsigned k = 0;
    size_t need = n;
    while (need > 0) {
        cursor_settle(&t);
        if (k == max)
            return -E2BIG;
        size_t avail = t.iov[t.idx].iov_len - t.off;
        size_t take = avail < need ? avail : need;
        dst[k].iov_base = (char *)t.iov[t.idx].iov_base + t.off;
        dst[k].iov_len = take;
        k++;
        t.off += take;
        t.left -= take;
        need -= take;
    }
    *c = t;
    return (int)k;
}

/*
 * Copies a string that must end with a NUL within the next max bytes (and
 * within the cursor). On failure the cursor is not moved.
 */
int fll_cursor_cstr(struct fll_cursor *c, char *dst, size_t max, int toolong)
{
    if (max == 0)
        return -EINVAL;
    struct fll_cursor t = *c;
    size_t n = 0;
    for (;;) {
        if (n == max)
            return toolong;
        if (t.left == 0)
            return -EINVAL;
        cursor_settle(&t);
        const char *p = (const char *)t.iov[t.idx].iov_base + t.off;
        size_t avail = t.iov[t.idx].iov_len - t.off;
        if (avail > t.left)
            avail = t.left;
        if (avail > max - n)
            avail = max - n;
        /* Copy first, then look for the NUL in our copy (the client's may move). */
        memcpy(dst + n, p, avail);
        const char *nul = memchr(dst + n, '\0', avail);
        size_t take = nul ? (size_t)(nul - (dst + n)) + 1 : avail;
        t.off += take;
        t.left -= take;
        n += take;
        if (nul) {
            *c = t;
            return 0;
        }
    }
}

bool fll_name_valid(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return false;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    return strchr(name, '/') == NULL;
}

int fll_cursor_name(struct fll_cursor *c, char dst[FLL_NAME_MAX + 1])
{
    int ret = fll_cursor_cstr(c, dst, FLL_NAME_MAX + 1, -ENAMETOOLONG);
    if (ret < 0)
        return ret;
    return fll_name_valid(dst) ? 0 : -EINVAL;
}
