/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The --xattrmap rule language: xattr names between client and host (xattrmap.c). */
#ifndef VUFSD_PT_XATTRMAP_I_H
#define VUFSD_PT_XATTRMAP_I_H

#include <stddef.h>

enum pt_xmap_type { PT_XMAP_PREFIX, PT_XMAP_OK, PT_XMAP_BAD, PT_XMAP_UNSUPPORTED };
#define PT_XMAP_CLIENT 1u
#define PT_XMAP_SERVER 2u

struct pt_xmap_rule {
    enum pt_xmap_type type;
    unsigned scope;
    char *key;
    char *prepend;
};

struct pt_xattrmap {
    struct pt_xmap_rule *rules;
    size_t n;
};

/* Parses rules; -EINVAL with a message in err (if non-NULL) on bad syntax. */
int pt_xattrmap_parse(const char *spec, struct pt_xattrmap *map, char *err, size_t errlen);
void pt_xattrmap_free(struct pt_xattrmap *map);
/*
 * Client name -> host name (malloc'd in *out). -EPERM for a 'bad' rule,
 * -EOPNOTSUPP for 'unsupported', -ENOMEM.
 */
int pt_xattrmap_to_server(const struct pt_xattrmap *map, const char *name, char **out);
/*
 * Host name -> client name for listxattr: 1 and *out (malloc'd) when visible,
 * 0 when hidden, -ENOMEM.
 */
int pt_xattrmap_to_client(const struct pt_xattrmap *map, const char *name, char **out);

#endif
