/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Validation of the guest's mapping requests. Everything here is guest-controlled
 * and checked before it reaches the table: bounds, alignment, overflow, flags,
 * counts. Pure functions of the window geometry, no lock.
 *
 * Alignment: the device spec lets a driver map page-aligned sub-ranges, and we
 * advertise map_alignment = log2(page size) in FUSE_INIT, so page alignment (not
 * 2 MiB) is the rule for moffset, len and foffset. The table keeps such sub-slot
 * mappings as extents (dax_i.h).
 */
#include <errno.h>

#include "dax_i.h"

static bool aligned(const struct dax_window *w, uint64_t v)
{
    return (v & (w->page_size - 1)) == 0;
}

/* [moffset, moffset + len) non-empty, aligned and inside the window, no overflow. */
static int range_check(const struct dax_window *w, uint64_t moffset, uint64_t len)
{
    if (len == 0 || !aligned(w, moffset) || !aligned(w, len))
        return -EINVAL;
    if (moffset >= w->size || len > w->size - moffset)
        return -EINVAL;
    return 0;
}

int dax_setup_check(const struct dax_window *w, const struct fuse_setupmapping_in *in,
                    struct dax_setup *out)
{
    int r;

    if (in->flags & ~(uint64_t)DAX_SETUP_KNOWN_FLAGS)
        return -EINVAL;
    r = range_check(w, in->moffset, in->len);
    if (r < 0)
        return r;
    if (!aligned(w, in->foffset))
        return -EINVAL;
    /* The file range must be an off_t range: mmap takes a signed offset. */
    if (in->foffset > (uint64_t)INT64_MAX || in->len > (uint64_t)INT64_MAX - in->foffset)
        return -EOVERFLOW;
    *out = (struct dax_setup){
        .foffset = in->foffset,
        .len = in->len,
        .moffset = in->moffset,
        .writable = (in->flags & FUSE_SETUPMAPPING_FLAG_WRITE) != 0,
    };
    return 0;
}

int dax_remove_check(const struct dax_window *w, const struct fuse_removemapping_one *e,
                     unsigned count)
{
    if (count > DAX_REMOVE_MAX_ENTRIES)
        return -EINVAL;
    if (count && !e)
        return -EINVAL;
    for (unsigned i = 0; i < count; i++) {
        int r = range_check(w, e[i].moffset, e[i].len);

        if (r < 0)
            return r;
    }
    return 0;
}
