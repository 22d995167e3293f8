/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Decoders for open files, locks and DAX mappings.
 *
 * READ and WRITE are zero copy: the filesystem reads into / writes from the
 * client's own buffers, described as iovecs by the cursor. These paths take no
 * lock and allocate nothing (the iovec arrays live on the stack).
 */
#include <errno.h>
#include <string.h>

#include "fll_ops_i.h"

FLL_DECODER_STRUCT(open, struct fuse_open_in, struct fuse_open_out)

/*
 * READ: the reply body is the data. The filesystem gets the writable buffers
 * after the reply header, cut to min(in.size, what the client provided); the
 * header is written last, once the length is known.
 */
FLL_DECODER(read)
{
    struct fuse_read_in in;
    FLL_ARG(c, in);

    struct fll_cursor out;
    fll_cursor_init(&out, r->out, r->out_cnt, r->out_size);
    if (!fll_cursor_skip(&out, sizeof(struct fuse_out_header)))
        return -EIO;
    size_t n = fll_cursor_left(&out);
    if (n > in.size)
        n = in.size;

    struct iovec iov[FLL_IOV_MAX];
    int cnt = fll_cursor_iov(&out, iov, FLL_IOV_MAX, n);
    if (cnt < 0)
        return cnt == -E2BIG ? -EINVAL : cnt;
    ssize_t ret = fll_ops_of(r)->read(r, r->hdr.nodeid, &in, iov, (unsigned)cnt);
    if (ret < 0)
        return fll_op_err(ret);
    if ((size_t)ret > n)
        return -EIO; /* a filesystem bug: it claims more than it was given */
    fll_reply_inplace(r, (size_t)ret);
    return 0;
}

/*
 * WRITE: fuse_write_in, then exactly in.size bytes of data, no more, no less,
 * and never more than the max_write negotiated at INIT.
 */
FLL_DECODER(write)
{
    struct fuse_write_in in;
    FLL_ARG(c, in);
    if (in.size > fll_max_write(r->se) || in.size != fll_cursor_left(c))
        return -EINVAL;
    if (!fll_out_fits(r, sizeof(struct fuse_write_out)))
        return -EIO;

    struct iovec iov[FLL_IOV_MAX];
    int cnt = fll_cursor_iov(c, iov, FLL_IOV_MAX, in.size);
    if (cnt < 0)
        return -EINVAL;
    return fll_reply_count(r, fll_ops_of(r)->write(r, r->hdr.nodeid, &in, iov, (unsigned)cnt),
                           in.size);
}

FLL_DECODER_STATUS(release, struct fuse_release_in)

FLL_DECODER_STATUS(flush, struct fuse_flush_in)

FLL_DECODER_STATUS(fsync, struct fuse_fsync_in)

FLL_DECODER_STATUS(fallocate, struct fuse_fallocate_in)

FLL_DECODER_STRUCT(lseek, struct fuse_lseek_in, struct fuse_lseek_out)

/*
 * COPY_FILE_RANGE answers with a 32-bit count; the kernel never asks for more
 * than UINT_MAX & PAGE_MASK, so a longer request is cut to that.
 */
FLL_DECODER(copy_file_range)
{
    struct fuse_copy_file_range_in in;
    FLL_ARG(c, in);
    const uint64_t max = UINT32_MAX & ~(uint64_t)4095;
    if (in.len > max)
        in.len = max;
    if (!fll_out_fits(r, sizeof(struct fuse_write_out)))
        return -EIO;
    return fll_reply_count(r, fll_ops_of(r)->copy_file_range(r, r->hdr.nodeid, &in), in.len);
}

FLL_DECODER_STRUCT(getlk, struct fuse_lk_in, struct fuse_lk_out)

FLL_DECODER(setlk)
{
    struct fuse_lk_in in;
    FLL_ARG(c, in);
    return fll_reply_status(r, fll_ops_of(r)->setlk(r, r->hdr.nodeid, &in, false));
}

/* SETLKW may wait: the filesystem may return FLL_ASYNC and answer later. */
FLL_DECODER(setlkw)
{
    struct fuse_lk_in in;
    FLL_ARG(c, in);
    return fll_reply_status(r, fll_ops_of(r)->setlk(r, r->hdr.nodeid, &in, true));
}

FLL_DECODER_STATUS(setupmapping, struct fuse_setupmapping_in)

/*
 * REMOVEMAPPING: a u32 count, then count 16-byte entries starting right after
 * it (so at offset 4: unaligned). Each is copied out into an aligned array.
 */
FLL_DECODER(removemapping)
{
    struct fuse_removemapping_in in;
    FLL_ARG(c, in);
    if (in.count == 0 || in.count > FLL_REMOVEMAPPING_MAX)
        return -EINVAL;
    if ((uint64_t)in.count * sizeof(struct fuse_removemapping_one) != fll_cursor_left(c))
        return -EINVAL;
    struct fuse_removemapping_one one[FLL_REMOVEMAPPING_MAX];
    for (uint32_t i = 0; i < in.count; i++) {
        if (!fll_cursor_copy(c, &one[i], sizeof(one[i])))
            return -EINVAL;
    }
    return fll_reply_status(r, fll_ops_of(r)->removemapping(r, one, in.count));
}
