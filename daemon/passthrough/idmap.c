/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * --translate-uid / --translate-gid: uid and gid translation between guest and
 * host, in the Rust virtiofsd's syntax and meaning. Each option is one rule,
 * and may be given many times:
 *
 *   map:GUEST:HOST:COUNT           [GUEST, GUEST+COUNT) <-> [HOST, HOST+COUNT)
 *   guest:GUEST:HOST:COUNT         guest -> host only
 *   host:HOST:GUEST:COUNT          host -> guest only
 *   squash-guest:GUEST:HOST:COUNT  every guest id of the range -> HOST
 *   squash-host:HOST:GUEST:COUNT   every host id of the range -> GUEST
 *   forbid-guest:GUEST:COUNT       a guest id of the range fails (EPERM)
 *
 * The type is letters, digits, '-' and '_' (any case); the character after it
 * separates every field (':' above, but "map/1000/5000/10" is the same rule).
 * Numbers are decimal u32. An id no rule covers maps to itself. Each direction
 * is a separate table: a rule whose range intersects an earlier rule's range
 * in the same direction is refused, as is a range that runs past 2^32 - 1
 * or is empty.
 *
 * Where the daemon applies them:
 *   guest -> host: the caller's uid/gid of creating requests (the ids new
 *     objects get, and ACCESS checks), and SETATTR's new owner/group;
 *   host -> guest: st_uid/st_gid in every attribute reply (LOOKUP, GETATTR,
 *     SETATTR, CREATE, MKNOD, MKDIR, SYMLINK, LINK, READDIRPLUS, STATX).
 * Not translated: ids inside POSIX ACL xattrs (the Rust daemon does not either).
 *
 * The functions below are pure (no daemon state), for the unit tests.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fll.h"
#include "passthrough.h"
#include "pt_fs_i.h"
#include "pt_idmap_i.h"

__attribute__((format(printf, 3, 4)))
static void pt_idmap_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Decimal u32, the whole field; false otherwise. */
static bool pt_idmap_u32(const char *s, size_t len, uint32_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 10)
        return false;
    for (size_t k = 0; k < len; k++) {
        if (!isdigit((unsigned char)s[k]))
            return false;
        v = v * 10 + (uint64_t)(s[k] - '0');
    }
    if (v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

static int pt_idmap_insert(struct pt_idmap_dir *d, const struct pt_idmap_ent *ne, char *err,
                           size_t errlen, const char *spec)
{
    for (size_t k = 0; k < d->n; k++) {
        const struct pt_idmap_ent *e = &d->e[k];
        if (ne->from < (uint64_t)e->from + e->count && e->from < (uint64_t)ne->from + ne->count) {
            pt_idmap_err(err, errlen, "%s: range [%u, %llu) intersects an earlier rule's", spec,
                         ne->from, (unsigned long long)ne->from + ne->count);
            return -EINVAL;
        }
    }
    struct pt_idmap_ent *grown = realloc(d->e, (d->n + 1) * sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    d->e = grown;
    d->e[d->n++] = *ne;
    return 0;
}

int pt_idmap_add(struct pt_idmap *m, const char *spec, char *err, size_t errlen)
{
    char type[32];
    size_t tlen = 0;
    const char *p = spec;
    uint32_t f[4] = {0};
    unsigned nf = 0;

    while (*p && (isalnum((unsigned char)*p) || *p == '-' || *p == '_')) {
        if (tlen + 1 >= sizeof(type)) {
            pt_idmap_err(err, errlen, "%s: unknown mapping type", spec);
            return -EINVAL;
        }
        type[tlen++] = (char)tolower((unsigned char)*p);
        p++;
    }
    type[tlen] = '\0';
    if (*p == '\0') {
        pt_idmap_err(err, errlen, "%s: expected TYPE:ID:...", spec);
        return -EINVAL;
    }
    char sep = *p++;
    for (;;) {
        const char *end = strchr(p, sep);
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (nf == 4 || !pt_idmap_u32(p, len, &f[nf])) {
            pt_idmap_err(err, errlen, "%s: fields must be 2 or 3 decimal ids", spec);
            return -EINVAL;
        }
        nf++;
        if (!end)
            break;
        p = end + 1;
    }

    /* The rule types: which directions they fill, how, and their field count. */
    static const struct {
        const char *name;
        bool to_host, to_guest;
        enum pt_idmap_kind kind;
        unsigned fields;
    } types[] = {
        {"map", true, true, PT_ID_RANGE, 3},
        {"guest", true, false, PT_ID_RANGE, 3},
        {"host", false, true, PT_ID_RANGE, 3},
        {"squash-guest", true, false, PT_ID_SQUASH, 3},
        {"squash-host", false, true, PT_ID_SQUASH, 3},
        {"forbid-guest", true, false, PT_ID_FAIL, 2},
    };
    size_t t = 0;
    while (t < sizeof(types) / sizeof(types[0]) && strcmp(type, types[t].name) != 0)
        t++;
    if (t == sizeof(types) / sizeof(types[0])) {
        pt_idmap_err(err, errlen, "%s: unknown mapping type '%s'", spec, type);
        return -EINVAL;
    }
    bool to_host = types[t].to_host, to_guest = types[t].to_guest;
    unsigned want = types[t].fields;
    struct pt_idmap_ent g = {0}, h = {0};
    if (types[t].kind == PT_ID_FAIL) {
        g = (struct pt_idmap_ent){f[0], nf > 1 ? f[1] : 0, 0, PT_ID_FAIL};
    } else if (to_host && to_guest) { /* map: guest:host:count both ways */
        g = (struct pt_idmap_ent){f[0], f[2], f[1], types[t].kind};
        h = (struct pt_idmap_ent){f[1], f[2], f[0], types[t].kind};
    } else if (to_host) {
        g = (struct pt_idmap_ent){f[0], f[2], f[1], types[t].kind};
    } else {
        h = (struct pt_idmap_ent){f[0], f[2], f[1], types[t].kind};
    }
    if (nf != want) {
        pt_idmap_err(err, errlen, "%s: '%s' takes %u fields, not %u", spec, type, want, nf);
        return -EINVAL;
    }
    /* Ranges: not empty, inside the u32 ids, for the source and a 1:1 target. */
    const struct pt_idmap_ent *chk[2] = {to_host ? &g : NULL, to_guest ? &h : NULL};
    for (unsigned k = 0; k < 2; k++) {
        const struct pt_idmap_ent *e = chk[k];
        if (!e)
            continue;
        if (e->count == 0 || (uint64_t)e->from + e->count > (uint64_t)UINT32_MAX + 1 ||
            (e->kind == PT_ID_RANGE && (uint64_t)e->to + e->count > (uint64_t)UINT32_MAX + 1)) {
            pt_idmap_err(err, errlen, "%s: empty range or ids past 4294967295", spec);
            return -EINVAL;
        }
    }
    int ret = 0;
    if (to_host)
        ret = pt_idmap_insert(&m->to_host, &g, err, errlen, spec);
    if (ret == 0 && to_guest) {
        ret = pt_idmap_insert(&m->to_guest, &h, err, errlen, spec);
        if (ret < 0 && to_host)
            m->to_host.n--; /* all or nothing */
    }
    return ret;
}

int pt_idmap_parse(struct pt_idmap *m, const char *specs, char *err, size_t errlen)
{
    char *copy = strdup(specs);
    char *save = NULL;
    int ret = 0;

    if (!copy)
        return -ENOMEM;
    /* The option parser joins repeated options with spaces. */
    for (char *tok = strtok_r(copy, " ", &save); tok && ret == 0; tok = strtok_r(NULL, " ", &save))
        ret = pt_idmap_add(m, tok, err, errlen);
    free(copy);
    return ret;
}

void pt_idmap_free(struct pt_idmap *m)
{
    free(m->to_host.e);
    free(m->to_guest.e);
    memset(m, 0, sizeof(*m));
}

static const struct pt_idmap_ent *pt_idmap_find(const struct pt_idmap_dir *d, uint32_t id)
{
    for (size_t k = 0; k < d->n; k++)
        if (id >= d->e[k].from && (uint64_t)id < (uint64_t)d->e[k].from + d->e[k].count)
            return &d->e[k];
    return NULL;
}

static uint32_t pt_idmap_apply(const struct pt_idmap_ent *e, uint32_t id)
{
    return e->kind == PT_ID_SQUASH ? e->to : e->to + (id - e->from);
}

int pt_idmap_to_host(const struct pt_idmap *m, uint32_t guest, uint32_t *host)
{
    const struct pt_idmap_ent *e = pt_idmap_find(&m->to_host, guest);

    if (e && e->kind == PT_ID_FAIL)
        return -EPERM;
    *host = e ? pt_idmap_apply(e, guest) : guest;
    return 0;
}

uint32_t pt_idmap_to_guest(const struct pt_idmap *m, uint32_t host)
{
    const struct pt_idmap_ent *e = pt_idmap_find(&m->to_guest, host);

    return e ? pt_idmap_apply(e, host) : host;
}

/* ---- The daemon's use ------------------------------------------------------------ */

int pt_req_host_ids(const struct pt_fs *fs, const struct fll_req *r, uid_t *uid, gid_t *gid)
{
    uint32_t u = fll_req_uid(r), g = fll_req_gid(r);
    int ret = pt_idmap_to_host(&fs->uidmap, u, &u);

    if (ret == 0)
        ret = pt_idmap_to_host(&fs->gidmap, g, &g);
    *uid = u;
    *gid = g;
    return ret;
}

void pt_attr_to_guest(const struct pt_fs *fs, struct fuse_attr *a)
{
    a->uid = pt_idmap_to_guest(&fs->uidmap, a->uid);
    a->gid = pt_idmap_to_guest(&fs->gidmap, a->gid);
}

int pt_fs_check_ids(const struct pt_config *cfg, char *err, size_t errlen)
{
    struct pt_idmap m = {0};
    int ret = 0;

    if (cfg->translate_uid)
        ret = pt_idmap_parse(&m, cfg->translate_uid, err, errlen);
    pt_idmap_free(&m);
    if (ret == 0 && cfg->translate_gid)
        ret = pt_idmap_parse(&m, cfg->translate_gid, err, errlen);
    pt_idmap_free(&m);
    return ret;
}
