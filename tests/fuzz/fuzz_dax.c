/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the DAX window manager (dax/) driven by guest-shaped
 * SETUPMAPPING/REMOVEMAPPING sequences, with the unit tests' fake frontend that
 * enforces the mainline frontend's rules (aligned, in the window, one 2 MiB slot,
 * no overlapping map, exact unmap).
 *
 * Input (little endian; zeros past the end):
 *   u8   window: slots - 1 (low 3 bits: 1..8 slots of 2 MiB), bit 3: 64 KiB pages,
 *        bits 4-5: injected frontend failure rate (0, 5, 20, 50 %),
 *        bit 6: the frontend takes batched unmaps (the legacy protocol's 8 per message)
 *   then operations until the input ends, each an opcode byte (mod 8):
 *     0 SETUPMAPPING  key u8, foffset, len, moffset, flags  (each value: see fz_val)
 *     1 REMOVEMAPPING count u16 (up to 300), then count x (moffset, len)
 *     2 remove_inode key   3 inode_forget key
 *     4 a Linux guest's SETUPMAPPING: key, file range u8, slot u8, writable u8
 *     5 reset              6 policy answer: key, file size, regular u8
 *     7 statistics dump
 * Values come as a mode byte then either a raw u64 (odd mode: hostile extremes
 * included) or a small page multiple (even mode), so both rejection and
 * acceptance paths are reached.
 *
 * Invariants, after every operation: the fake frontend saw no rule violation, and
 * the window's table matches the frontend's mappings (an injected failure changes
 * nothing on either side, as struct dax_ops promises).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dax.h"
#include "fake_frontend.h"
#include "fuzz_input.h"

static uint64_t fz_val(struct fz_in *in, uint64_t page)
{
    uint8_t mode = fz_u8(in);
    if (mode & 1)
        return fz_u64(in);
    return (uint64_t)fz_u16(in) * page;
}

static uint64_t fz_len(struct fz_in *in, uint64_t page)
{
    uint8_t mode = fz_u8(in);
    if (mode & 1)
        return fz_u64(in);
    return ((uint64_t)fz_u8(in) + 1) * page;
}

/*
 * A batched unmap as one frontend message: all or nothing, one injected failure
 * decision for the whole batch, entries applied in order. (The fake frontend's
 * own batch callback counts two entries of one slot as concurrent calls, which
 * a single message is not.)
 */
static int fz_unmap_batch(void *ctx, const struct fuse_removemapping_one *e, unsigned n)
{
    struct fake_fe *fe = ctx;
    if (n == 0 || n > DAX_UNMAP_BATCH) {
        fe->violations++;
        snprintf(fe->last_violation, sizeof(fe->last_violation), "bad batch size %u", n);
        return -EINVAL;
    }
    if (fe->fail_pct && fake_rand(&fe->rng) % 100 < fe->fail_pct) {
        fe->injected++;
        return -EIO;
    }
    unsigned pct = fe->fail_pct;
    fe->fail_pct = 0;
    int r = 0;
    for (unsigned i = 0; i < n && r == 0; i++)
        r = fake_ops.unmap(ctx, e[i].moffset, e[i].len);
    fe->fail_pct = pct;
    return r;
}

static struct dax_ops fz_ops_batch;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz_in in;
    fz_init(&in, data, size);

    uint8_t w0 = fz_u8(&in);
    uint64_t slots = (w0 & 7) + 1;
    uint64_t page = (w0 & 8) ? 65536 : 4096;
    static const unsigned fail[4] = {0, 5, 20, 50};

    static struct fake_fe fe;
    fake_init(&fe, slots * DAX_RANGE_SIZE, page);
    fe.fail_pct = fail[(w0 >> 4) & 3];

    struct dax_config cfg = {
        .window_size = slots * DAX_RANGE_SIZE,
        .page_size = page,
        .policy = DAX_POLICY_AUTO,
        .decay_interval_ns = UINT64_MAX, /* deterministic */
    };
    fz_ops_batch = fake_ops;
    fz_ops_batch.unmap_batch = fz_unmap_batch;
    struct dax_window *w = NULL;
    if (dax_window_new(&cfg, (w0 & 64) ? &fz_ops_batch : &fake_ops, &fe, &w) != 0)
        abort();

    static struct fuse_removemapping_one ents[300];
    unsigned ops = 0;
    while (in.left && ops++ < 256) {
        uint8_t op = fz_u8(&in) & 7;
        switch (op) {
        case 0: {
            uint64_t key = fz_u8(&in);
            uint64_t foffset = fz_val(&in, page);
            uint64_t len = fz_len(&in, page);
            uint64_t moffset = fz_val(&in, page);
            uint64_t flags = fz_u8(&in);
            if (flags & 0x80)
                flags = fz_u64(&in);
            if (fake_check(w, moffset, len, foffset, flags) == 0) {
                FZ_REQUIRE(len > 0 && moffset < slots * DAX_RANGE_SIZE &&
                           len <= slots * DAX_RANGE_SIZE - moffset);
                (void)fake_setup(&fe, w, key, foffset, len, moffset, flags);
            }
            break;
        }
        case 1: {
            unsigned count = fz_u16(&in) % 301;
            for (unsigned i = 0; i < count; i++) {
                ents[i].moffset = fz_val(&in, page);
                ents[i].len = fz_len(&in, page);
            }
            if (dax_remove_check(w, ents, count) == 0) {
                FZ_REQUIRE(count <= DAX_REMOVE_MAX_ENTRIES);
                (void)dax_removemapping(w, ents, count);
            }
            break;
        }
        case 2:
            (void)dax_remove_inode(w, fz_u8(&in));
            break;
        case 3:
            (void)dax_inode_forget(w, fz_u8(&in));
            break;
        case 4: {
            uint64_t key = fz_u8(&in);
            uint64_t foffset = (uint64_t)fz_u8(&in) * DAX_RANGE_SIZE;
            uint64_t moffset = (uint64_t)(fz_u8(&in) % slots) * DAX_RANGE_SIZE;
            uint64_t flags = FUSE_SETUPMAPPING_FLAG_READ |
                             (fz_u8(&in) & 1 ? FUSE_SETUPMAPPING_FLAG_WRITE : 0);
            FZ_REQUIRE(fake_check(w, moffset, DAX_RANGE_SIZE, foffset, flags) == 0);
            (void)fake_setup(&fe, w, key, foffset, DAX_RANGE_SIZE, moffset, flags);
            break;
        }
        case 5:
            dax_window_reset(w);
            /* The frontend drops its maps itself on a reset. */
            fake_fini(&fe);
            fake_init(&fe, slots * DAX_RANGE_SIZE, page);
            fe.fail_pct = fail[(w0 >> 4) & 3];
            break;
        case 6: {
            uint64_t key = fz_u8(&in);
            uint64_t fsize = fz_val(&in, page);
            (void)dax_policy_attr_dax(w, key, fsize, fz_u8(&in) & 1);
            break;
        }
        case 7: {
            FILE *f = fopen("/dev/null", "w");
            FZ_REQUIRE(f && dax_stats_json(w, f) == 0);
            fclose(f);
            break;
        }
        }
        if (fe.violations) {
            fprintf(stderr, "frontend rule broken: %s\n", fe.last_violation);
            abort();
        }
        FZ_REQUIRE(fake_matches_table(&fe, w) == 0);
    }

    dax_window_free(w);
    fake_fini(&fe);
    return 0;
}
