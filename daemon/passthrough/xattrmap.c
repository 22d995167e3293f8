/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The --xattrmap rule language (compatible with virtiofsd's).
 *
 * A mapping is a list of rules; each rule's first non-blank character is its
 * field separator:   :type:scope:key:prepend:
 *   type   prefix | ok | bad | unsupported | map
 *   scope  client | server | all      (absent for 'map')
 * Client direction (getxattr/setxattr/removexattr), first rule whose scope has
 * 'client' and whose key starts the name wins:
 *   prefix       host name = prepend + name
 *   ok           name unchanged
 *   bad          -EPERM (getxattr turns it into ENODATA)
 *   unsupported  -EOPNOTSUPP
 * Server direction (listxattr), first rule whose scope has 'server' and whose
 * prepend starts the host name wins:
 *   prefix       client sees the name with prepend removed
 *   ok           unchanged
 *   bad, unsupported   hidden
 * ':map:key:prepend:' expands to
 *   :prefix:all:key:prepend:  :bad:server::key:  :bad:client:prepend::  :ok:all:::
 * or, with an empty key, to  :prefix:all::prepend:  :bad:all:::
 * A final ':bad:all:::' is always appended so that every name matches a rule.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt_xattrmap_i.h"

#define PT_XMAP_MAX_RULES 1024

__attribute__((format(printf, 3, 4)))
static void pt_xmap_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int pt_xmap_add(struct pt_xattrmap *m, enum pt_xmap_type type, unsigned scope,
                       const char *key, size_t keylen, const char *prep, size_t preplen)
{
    struct pt_xmap_rule *nr;

    if (m->n >= PT_XMAP_MAX_RULES)
        return -E2BIG;
    nr = realloc(m->rules, (m->n + 1) * sizeof(*nr));
    if (!nr)
        return -ENOMEM;
    m->rules = nr;
    nr = &m->rules[m->n];
    nr->type = type;
    nr->scope = scope;
    nr->key = strndup(key, keylen);
    nr->prepend = strndup(prep, preplen);
    if (!nr->key || !nr->prepend) {
        free(nr->key);
        free(nr->prepend);
        return -ENOMEM;
    }
    m->n++;
    return 0;
}

/* Reads the field up to the next sep; *p moves past the separator. */
static bool pt_xmap_field(const char **p, char sep, const char **start, size_t *len)
{
    const char *e = strchr(*p, sep);

    if (!e)
        return false;
    *start = *p;
    *len = (size_t)(e - *p);
    *p = e + 1;
    return true;
}

static bool pt_xmap_is(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && memcmp(s, word, len) == 0;
}

int pt_xattrmap_parse(const char *spec, struct pt_xattrmap *m, char *err, size_t errlen)
{
    const char *p = spec;
    unsigned nrule = 0;
    int ret;

    memset(m, 0, sizeof(*m));
    for (;;) {
        const char *type, *scope = NULL, *key, *prep;
        size_t tlen, slen = 0, klen, plen;
        char sep;

        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        nrule++;
        sep = *p++;
        if (!pt_xmap_field(&p, sep, &type, &tlen))
            goto syntax;
        if (pt_xmap_is(type, tlen, "map")) {
            if (!pt_xmap_field(&p, sep, &key, &klen) || !pt_xmap_field(&p, sep, &prep, &plen))
                goto syntax;
            if (klen == 0) {
                ret = pt_xmap_add(m, PT_XMAP_PREFIX, PT_XMAP_CLIENT | PT_XMAP_SERVER, "", 0,
                                  prep, plen);
                if (!ret)
                    ret = pt_xmap_add(m, PT_XMAP_BAD, PT_XMAP_CLIENT | PT_XMAP_SERVER, "", 0,
                                      "", 0);
            } else {
                ret = pt_xmap_add(m, PT_XMAP_PREFIX, PT_XMAP_CLIENT | PT_XMAP_SERVER, key, klen,
                                  prep, plen);
                if (!ret)
                    ret = pt_xmap_add(m, PT_XMAP_BAD, PT_XMAP_SERVER, "", 0, key, klen);
                if (!ret)
                    ret = pt_xmap_add(m, PT_XMAP_BAD, PT_XMAP_CLIENT, prep, plen, "", 0);
                if (!ret)
                    ret = pt_xmap_add(m, PT_XMAP_OK, PT_XMAP_CLIENT | PT_XMAP_SERVER, "", 0,
                                      "", 0);
            }
            if (ret < 0)
                goto fail;
            continue;
        }
        enum pt_xmap_type t;
        unsigned sc;
        if (pt_xmap_is(type, tlen, "prefix"))
            t = PT_XMAP_PREFIX;
        else if (pt_xmap_is(type, tlen, "ok"))
            t = PT_XMAP_OK;
        else if (pt_xmap_is(type, tlen, "bad"))
            t = PT_XMAP_BAD;
        else if (pt_xmap_is(type, tlen, "unsupported"))
            t = PT_XMAP_UNSUPPORTED;
        else {
            pt_xmap_err(err, errlen, "xattrmap rule %u: unknown type '%.*s'", nrule, (int)tlen,
                        type);
            ret = -EINVAL;
            goto fail;
        }
        if (!pt_xmap_field(&p, sep, &scope, &slen) || !pt_xmap_field(&p, sep, &key, &klen) ||
            !pt_xmap_field(&p, sep, &prep, &plen))
            goto syntax;
        if (pt_xmap_is(scope, slen, "client"))
            sc = PT_XMAP_CLIENT;
        else if (pt_xmap_is(scope, slen, "server"))
            sc = PT_XMAP_SERVER;
        else if (pt_xmap_is(scope, slen, "all"))
            sc = PT_XMAP_CLIENT | PT_XMAP_SERVER;
        else {
            pt_xmap_err(err, errlen, "xattrmap rule %u: unknown scope '%.*s'", nrule,
                        (int)slen, scope);
            ret = -EINVAL;
            goto fail;
        }
        ret = pt_xmap_add(m, t, sc, key, klen, prep, plen);
        if (ret < 0)
            goto fail;
    }
    if (m->n == 0) {
        pt_xmap_err(err, errlen, "xattrmap: no rules");
        ret = -EINVAL;
        goto fail;
    }
    ret = pt_xmap_add(m, PT_XMAP_BAD, PT_XMAP_CLIENT | PT_XMAP_SERVER, "", 0, "", 0);
    if (ret < 0)
        goto fail;
    return 0;

syntax:
    pt_xmap_err(err, errlen, "xattrmap rule %u: missing fields or separator", nrule);
    ret = -EINVAL;
fail:
    pt_xattrmap_free(m);
    return ret;
}

void pt_xattrmap_free(struct pt_xattrmap *m)
{
    for (size_t k = 0; k < m->n; k++) {
        free(m->rules[k].key);
        free(m->rules[k].prepend);
    }
    free(m->rules);
    m->rules = NULL;
    m->n = 0;
}

static bool pt_starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int pt_xattrmap_to_server(const struct pt_xattrmap *m, const char *name, char **out)
{
    *out = NULL;
    for (size_t k = 0; k < m->n; k++) {
        const struct pt_xmap_rule *ru = &m->rules[k];
        if (!(ru->scope & PT_XMAP_CLIENT) || !pt_starts(name, ru->key))
            continue;
        switch (ru->type) {
        case PT_XMAP_PREFIX: {
            size_t a = strlen(ru->prepend), b = strlen(name);
            char *s = malloc(a + b + 1);
            if (!s)
                return -ENOMEM;
            memcpy(s, ru->prepend, a);
            memcpy(s + a, name, b + 1);
            *out = s;
            return 0;
        }
        case PT_XMAP_OK:
            *out = strdup(name);
            return *out ? 0 : -ENOMEM;
        case PT_XMAP_BAD:
            return -EPERM;
        case PT_XMAP_UNSUPPORTED:
            return -EOPNOTSUPP;
        }
    }
    return -EPERM;
}

int pt_xattrmap_to_client(const struct pt_xattrmap *m, const char *name, char **out)
{
    *out = NULL;
    for (size_t k = 0; k < m->n; k++) {
        const struct pt_xmap_rule *ru = &m->rules[k];
        if (!(ru->scope & PT_XMAP_SERVER) || !pt_starts(name, ru->prepend))
            continue;
        switch (ru->type) {
        case PT_XMAP_PREFIX:
            if (name[strlen(ru->prepend)] == '\0')
                return 0; /* nothing left of the name: hide it */
            *out = strdup(name + strlen(ru->prepend));
            return *out ? 1 : -ENOMEM;
        case PT_XMAP_OK:
            *out = strdup(name);
            return *out ? 1 : -ENOMEM;
        case PT_XMAP_BAD:
        case PT_XMAP_UNSUPPORTED:
            return 0;
        }
    }
    return 0;
}
