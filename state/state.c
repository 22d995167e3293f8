/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The state format: the encoder, the checked decoder, the fd list. Pure: no
 * I/O, no threads, so unit tests and the fuzzer drive it on buffers. The
 * layout is described in state.h.
 */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int vst_fail(struct vst_err *err, int ret, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return ret;
}

/* ---- CRC-32C ------------------------------------------------------------------------- */

static uint32_t vst_crc_table[256];
static bool vst_crc_ready; /* set once, before any concurrent use is possible */

static void vst_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* Castagnoli, reflected */
        vst_crc_table[i] = c;
    }
    __atomic_store_n(&vst_crc_ready, true, __ATOMIC_RELEASE);
}

uint32_t vst_crc32c(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;

    if (!__atomic_load_n(&vst_crc_ready, __ATOMIC_ACQUIRE))
        vst_crc_init(); /* idempotent: racing callers write the same table */
    crc = ~crc;
    while (n--)
        crc = vst_crc_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- Writer -------------------------------------------------------------------------- */

void vst_writer_init(struct vst_writer *w)
{
    memset(w, 0, sizeof(*w));
    /* Room for the header, filled by vst_writer_finish. */
    static const uint8_t zero[VST_HEADER_SIZE];
    vst_put_bytes(w, zero, sizeof(zero));
}

void vst_writer_free(struct vst_writer *w)
{
    free(w->buf);
    memset(w, 0, sizeof(*w));
}

void vst_put_bytes(struct vst_writer *w, const void *p, size_t n)
{
    if (w->oom || n == 0)
        return;
    if (n > VST_MAX_SIZE || w->len + n > VST_MAX_SIZE) {
        w->oom = true;
        return;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *b = realloc(w->buf, cap);
        if (!b) {
            w->oom = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void vst_le(uint8_t *out, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t vst_from_le(const uint8_t *in, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)in[i] << (8 * i);
    return v;
}

void vst_put_u8(struct vst_writer *w, uint8_t v)
{
    vst_put_bytes(w, &v, 1);
}

void vst_put_u16(struct vst_writer *w, uint16_t v)
{
    uint8_t b[2];
    vst_le(b, v, 2);
    vst_put_bytes(w, b, 2);
}

void vst_put_u32(struct vst_writer *w, uint32_t v)
{
    uint8_t b[4];
    vst_le(b, v, 4);
    vst_put_bytes(w, b, 4);
}

void vst_put_u64(struct vst_writer *w, uint64_t v)
{
    uint8_t b[8];
    vst_le(b, v, 8);
    vst_put_bytes(w, b, 8);
}

void vst_section_begin(struct vst_writer *w, uint32_t type, uint32_t version)
{
    /* A programming error, not input: the writers are ours. */
    if (w->sec_start || (w->nsections && type <= w->last_type) ||
        w->nsections >= VST_MAX_SECTIONS) {
        w->oom = true;
        return;
    }
    w->sec_start = w->len;
    w->last_type = type;
    w->nsections++;
    vst_put_u32(w, type);
    vst_put_u32(w, version);
    vst_put_u64(w, 0); /* length, patched by vst_section_end */
}

void vst_section_end(struct vst_writer *w)
{
    if (!w->sec_start) {
        w->oom = true;
        return;
    }
    if (!w->oom)
        vst_le(w->buf + w->sec_start + 8, w->len - w->sec_start - 16, 8);
    w->sec_start = 0;
}

int vst_writer_finish(struct vst_writer *w, uint32_t flags, uint32_t nfds)
{
    if (w->oom || w->sec_start || !w->buf)
        return -ENOMEM;
    uint8_t *h = w->buf;
    memset(h, 0, VST_HEADER_SIZE);
    memcpy(h, VST_MAGIC, sizeof(VST_MAGIC));
    vst_le(h + 8, VST_VERSION, 4);
    vst_le(h + 12, flags, 4);
    vst_le(h + 16, w->len, 8);
    vst_le(h + 24, nfds, 4);
    vst_le(h + 28, w->nsections, 4);
    vst_le(h + 32, vst_crc32c(0, h + VST_HEADER_SIZE, w->len - VST_HEADER_SIZE), 4);
    return 0;
}

/* ---- Reader --------------------------------------------------------------------------- */

bool vst_get_bytes(struct vst_reader *r, void *dst, size_t n)
{
    if (r->bad || n > r->left) {
        r->bad = true;
        memset(dst, 0, n);
        return false;
    }
    memcpy(dst, r->p, n);
    r->p += n;
    r->left -= n;
    return true;
}

/* The next n bytes as a little-endian number; 0 once the reader is bad. */
static uint64_t vst_get_le(struct vst_reader *r, unsigned n)
{
    uint8_t b[8];
    return vst_get_bytes(r, b, n) ? vst_from_le(b, n) : 0;
}

bool vst_get_u8(struct vst_reader *r, uint8_t *v)
{
    *v = (uint8_t)vst_get_le(r, 1);
    return !r->bad;
}

bool vst_get_u16(struct vst_reader *r, uint16_t *v)
{
    *v = (uint16_t)vst_get_le(r, 2);
    return !r->bad;
}

bool vst_get_u32(struct vst_reader *r, uint32_t *v)
{
    *v = (uint32_t)vst_get_le(r, 4);
    return !r->bad;
}

bool vst_get_u64(struct vst_reader *r, uint64_t *v)
{
    *v = vst_get_le(r, 8);
    return !r->bad;
}

bool vst_get_bool(struct vst_reader *r, bool *v)
{
    uint8_t b;
    bool ok = vst_get_u8(r, &b) && b <= 1;
    if (!ok)
        r->bad = true;
    *v = ok && b;
    return ok;
}

bool vst_reader_done(const struct vst_reader *r)
{
    return !r->bad && r->left == 0;
}

static bool vst_known_section(uint32_t type)
{
    return type >= VST_SEC_ORIGIN && type <= VST_SEC_LAST_;
}

int vst_open(const void *buf, size_t len, struct vst_state *st, struct vst_err *err)
{
    const uint8_t *b = buf;

    memset(st, 0, sizeof(*st));
    if (len < VST_HEADER_SIZE)
        return vst_fail(err, -EBADMSG, "state: %zu bytes, shorter than its header", len);
    if (memcmp(b, VST_MAGIC, sizeof(VST_MAGIC)) != 0)
        return vst_fail(err, -EBADMSG, "state: not a vufsd state (bad magic)");
    uint32_t version = (uint32_t)vst_from_le(b + 8, 4);
    if (version != VST_VERSION)
        return vst_fail(err, -EINVAL, "state: format version %u, this vufsd reads %u", version,
                        VST_VERSION);
    uint32_t flags = (uint32_t)vst_from_le(b + 12, 4);
    if (flags & ~VST_F_KNOWN)
        return vst_fail(err, -EINVAL, "state: unknown flags %#x", flags & ~VST_F_KNOWN);
    uint64_t length = vst_from_le(b + 16, 8);
    if (length != len || length > VST_MAX_SIZE)
        return vst_fail(err, -EBADMSG, "state: header says %llu bytes, %zu present",
                        (unsigned long long)length, len);
    uint32_t nfds = (uint32_t)vst_from_le(b + 24, 4);
    if (nfds > VST_MAX_FDS || (nfds && !(flags & VST_F_FDS)))
        return vst_fail(err, -EINVAL, "state: %u fds announced%s", nfds,
                        flags & VST_F_FDS ? "" : " without VST_F_FDS");
    uint32_t nsec = (uint32_t)vst_from_le(b + 28, 4);
    if (nsec > VST_MAX_SECTIONS)
        return vst_fail(err, -EINVAL, "state: %u sections (at most %u)", nsec, VST_MAX_SECTIONS);
    uint32_t crc = (uint32_t)vst_from_le(b + 32, 4);
    if (vst_from_le(b + 36, 4) != 0)
        return vst_fail(err, -EINVAL, "state: reserved header bytes are not zero");
    if (vst_crc32c(0, b + VST_HEADER_SIZE, len - VST_HEADER_SIZE) != crc)
        return vst_fail(err, -EBADMSG, "state: checksum mismatch (corrupted)");

    size_t off = VST_HEADER_SIZE;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nsec; i++) {
        if (len - off < 16)
            return vst_fail(err, -EBADMSG, "state: section %u header past the end", i);
        uint32_t type = (uint32_t)vst_from_le(b + off, 4);
        uint32_t sver = (uint32_t)vst_from_le(b + off + 4, 4);
        uint64_t slen = vst_from_le(b + off + 8, 8);
        off += 16;
        if (slen > len - off)
            return vst_fail(err, -EBADMSG, "state: section %u (type %#x) runs past the end", i,
                            type);
        if (i && type <= last)
            return vst_fail(err, -EINVAL, "state: section type %#x out of order or repeated",
                            type);
        last = type;
        if (!vst_known_section(type & ~VST_SEC_OPTIONAL)) {
            if (!(type & VST_SEC_OPTIONAL))
                return vst_fail(err, -EINVAL, "state: unknown section type %#x", type);
            off += (size_t)slen;
            continue; /* skipped: a newer writer's addition we may ignore */
        }
        unsigned k = st->nsections++;
        st->sec[k].type = type & ~VST_SEC_OPTIONAL;
        st->sec[k].version = sver;
        st->sec[k].payload = b + off;
        st->sec[k].len = (size_t)slen;
        off += (size_t)slen;
    }
    if (off != len)
        return vst_fail(err, -EBADMSG, "state: %zu bytes after the last section", len - off);
    st->flags = flags;
    st->nfds = nfds;
    return 0;
}

bool vst_section(const struct vst_state *st, uint32_t type, struct vst_reader *r,
                 uint32_t *version)
{
    for (unsigned i = 0; i < st->nsections; i++) {
        if (st->sec[i].type != type)
            continue;
        r->p = st->sec[i].payload;
        r->left = st->sec[i].len;
        r->bad = false;
        if (version)
            *version = st->sec[i].version;
        return true;
    }
    r->p = NULL;
    r->left = 0;
    r->bad = true;
    return false;
}

/* ---- fds ------------------------------------------------------------------------------ */

void vst_fds_init(struct vst_fds *f)
{
    memset(f, 0, sizeof(*f));
}

static int vst_fds_grow(struct vst_fds *f, unsigned want)
{
    if (want <= f->cap)
        return 0;
    if (want > VST_MAX_FDS)
        return -E2BIG;
    unsigned cap = f->cap ? f->cap : 64;
    while (cap < want)
        cap *= 2;
    int *fd = realloc(f->fd, cap * sizeof(*fd));
    if (!fd)
        return -ENOMEM;
    f->fd = fd;
    bool *taken = realloc(f->taken, cap * sizeof(*taken));
    if (!taken)
        return -ENOMEM;
    f->taken = taken;
    f->cap = cap;
    return 0;
}

int vst_fds_adopt(struct vst_fds *f, const int *fds, unsigned n)
{
    vst_fds_init(f);
    f->owned = true;
    int ret = vst_fds_grow(f, n);
    if (ret < 0) {
        /* Still ours to close. */
        for (unsigned i = 0; i < n; i++)
            close(fds[i]);
        return ret;
    }
    for (unsigned i = 0; i < n; i++) {
        f->fd[i] = fds[i];
        f->taken[i] = false;
    }
    f->n = n;
    return 0;
}

void vst_fds_free(struct vst_fds *f)
{
    for (unsigned i = 0; f->owned && i < f->n; i++)
        if (!f->taken[i] && f->fd[i] >= 0)
            close(f->fd[i]);
    free(f->fd);
    free(f->taken);
    memset(f, 0, sizeof(*f));
}

int vst_fd_add(struct vst_fds *f, int fd, uint32_t *index)
{
    *index = VST_NO_FD;
    if (!f || fd < 0)
        return 0;
    int ret = vst_fds_grow(f, f->n + 1);
    if (ret < 0)
        return ret;
    f->fd[f->n] = fd;
    f->taken[f->n] = false;
    *index = f->n++;
    return 0;
}

int vst_fd_take(struct vst_fds *f, uint32_t index, int *fd)
{
    *fd = -1;
    if (!f || index >= f->n || f->taken[index] || f->fd[index] < 0)
        return -EBADF;
    f->taken[index] = true;
    *fd = f->fd[index];
    return 0;
}
