/* SPDX-License-Identifier: GPL-2.0-or-later */
/* uid/gid translation, --translate-uid/gid (idmap.c). */
#ifndef VUFSD_PT_IDMAP_I_H
#define VUFSD_PT_IDMAP_I_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fll.h"

struct pt_fs;

enum pt_idmap_kind { PT_ID_RANGE, PT_ID_SQUASH, PT_ID_FAIL };

/* [from, from + count) -> to + (id - from) (RANGE), to (SQUASH) or EPERM (FAIL). */
struct pt_idmap_ent {
    uint32_t from;
    uint64_t count;
    uint32_t to;
    enum pt_idmap_kind kind;
};

struct pt_idmap_dir {
    struct pt_idmap_ent *e;
    size_t n;
};

/* One of uids or gids: the two directions are independent tables. */
struct pt_idmap {
    struct pt_idmap_dir to_host;
    struct pt_idmap_dir to_guest;
};

/* Adds one --translate-uid/gid rule; -EINVAL with a message in err. */
int pt_idmap_add(struct pt_idmap *m, const char *spec, char *err, size_t errlen);
/* Adds space-separated rules (repeated options, as the option parser joins them). */
int pt_idmap_parse(struct pt_idmap *m, const char *specs, char *err, size_t errlen);
void pt_idmap_free(struct pt_idmap *m);
/* 0 and *host, or -EPERM for a forbidden guest id. Unmapped ids map to themselves. */
int pt_idmap_to_host(const struct pt_idmap *m, uint32_t guest, uint32_t *host);
uint32_t pt_idmap_to_guest(const struct pt_idmap *m, uint32_t host);
/* The request's caller as host ids; -EPERM when a rule forbids either. */
int pt_req_host_ids(const struct pt_fs *fs, const struct fll_req *r, uid_t *uid, gid_t *gid);
/* Host uid/gid of an attribute reply, as the guest sees them. */
void pt_attr_to_guest(const struct pt_fs *fs, struct fuse_attr *a);

#endif
