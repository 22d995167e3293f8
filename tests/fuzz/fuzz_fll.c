/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the FUSE decoder and dispatch (fuse_lowlevel/) over the permissive
 * fake filesystem of the unit tests. The input layout and the invariants checked
 * (one completion, reply inside the buffer, a well-formed reply header) are
 * fll_fuzz_one's, in tests/unit/fuse_lowlevel/fll_fuzz.c.
 */
#include "fll_fake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fll_fuzz_one(data, size);
}
