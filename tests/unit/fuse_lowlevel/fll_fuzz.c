/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer-friendly entry point for the FUSE decoder:
 *
 *   int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fll_fuzz_one(d, n); }
 *
 * Input layout: 6 control bytes, then the request bytes.
 *   [0]    in iovec chunk size (0 = one iovec)
 *   [1]    out iovec chunk size (0 = one iovec)
 *   [2..3] reply buffer size, little endian, times 16
 *   [4]    bit 0: INIT (7.41, every flag) first; bit 1: fix hdr.len up to the
 *          real length (lets the fuzzer get past the length check); bit 2:
 *          the filesystem fails every operation with EIO
 *   [5]    filesystem answer for byte counts: 0xff = all, else that many
 * Each input gets a fresh session over the permissive fake filesystem. The
 * invariants the transport relies on are checked and abort() when broken:
 * exactly one completion, a reply within the buffer, a well-formed header
 * whose length is the completed length and whose unique is the request's.
 */
#include <stdlib.h>
#include <string.h>

#include "fll_fake.h"

static struct fllt_harness *fuzz_h;
static struct fllt_msg fuzz_m;

static void fuzz_check(struct fllt_harness *h, size_t out_size, uint64_t unique)
{
    if (h->completions != 1 || h->out_len > out_size)
        abort();
    if (h->out_len == 0)
        return;
    if (h->out_len < sizeof(struct fuse_out_header) || h->oh.len != h->out_len ||
        h->oh.unique != unique || h->oh.error > 0 || h->oh.error < -4095)
        abort();
    if (h->oh.error != 0 && h->out_len != sizeof(struct fuse_out_header))
        abort();
}

int fll_fuzz_one(const uint8_t *data, size_t size)
{
    if (size < 6 || size - 6 > sizeof(fuzz_m.b))
        return 0;
    if (fuzz_h == NULL)
        fuzz_h = fllt_new(1u << 17);
    struct fllt_harness *h = fuzz_h;

    /* A fresh session and filesystem per input. */
    fll_session_free(h->se);
    fllt_fake_reset(&h->fs);
    struct fll_session_config cfg = {
        .ops = &fllt_fake_ops,
        .fs = &h->fs,
        .transport = &h->tr,
        .max_write = 1u << 17,
    };
    if (fll_session_new(&cfg, &h->se) < 0)
        abort();

    size_t in_chunk = data[0];
    size_t out_chunk = data[1];
    size_t out_size = (size_t)(data[2] | (data[3] << 8)) * 16;
    if (out_size > sizeof(h->out))
        out_size = sizeof(h->out);
    if (data[4] & 1) {
        h->fs.want = ~0ull;
        if (fllt_init(h, FLL_KERNEL_MINOR, ~0ull) != 0)
            abort();
    }
    h->fs.ret = (data[4] & 4) ? -5 : 0;
    h->fs.count = data[5] == 0xff ? -1 : data[5];

    fuzz_m.len = size - 6;
    memcpy(fuzz_m.b, data + 6, fuzz_m.len);
    if ((data[4] & 2) && fuzz_m.len >= sizeof(struct fuse_in_header))
        fllt_msg_end(&fuzz_m);
    uint64_t unique = 0;
    if (fuzz_m.len >= sizeof(struct fuse_in_header))
        memcpy(&unique, fuzz_m.b + offsetof(struct fuse_in_header, unique), sizeof(unique));

    fllt_send(h, &fuzz_m, in_chunk, out_size, out_chunk);
    fuzz_check(h, out_size, unique);
    return 0;
}
