/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * READDIR / READDIRPLUS reply bodies: a packed run of fuse_dirent (or
 * fuse_direntplus) records, each padded with zeroes to FUSE_DIRENT_ALIGN so the
 * next starts 8-byte aligned. The buffer may be client memory: it is only ever
 * written here, never read back.
 */
#include <string.h>

#include "fll_i.h"

bool fll_dirbuf_add(struct fll_dirbuf *db, const char *name, uint64_t ino, uint32_t type,
                    uint64_t off, const struct fuse_entry_out *entry)
{
    if (name == NULL)
        return false;
    size_t namelen = strlen(name);
    if (namelen == 0 || namelen > FLL_NAME_MAX)
        return false;

    size_t head = db->plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET;
    size_t reclen = FUSE_DIRENT_ALIGN(head + namelen);
    if (db->len > db->size || reclen > db->size - db->len)
        return false;

    char *p = db->buf + db->len;
    struct fuse_dirent d = {
        .ino = ino,
        .off = off,
        .namelen = (uint32_t)namelen,
        .type = type,
    };
    if (db->plus) {
        struct fuse_entry_out e;
        if (entry)
            e = *entry;
        else
            memset(&e, 0, sizeof(e));
        memcpy(p, &e, sizeof(e));
        memcpy(p + offsetof(struct fuse_direntplus, dirent), &d, FUSE_NAME_OFFSET);
    } else {
        memcpy(p, &d, FUSE_NAME_OFFSET);
    }
    memcpy(p + head, name, namelen);
    memset(p + head + namelen, 0, reclen - head - namelen);
    db->len += reclen;
    return true;
}
