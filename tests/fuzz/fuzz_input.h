/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reading a fuzzer's input as a stream of small integers. Past the end every
 * read yields zero, so any input is a complete description of a test case and
 * a short input simply means "zeros from here".
 */
#ifndef FUZZ_INPUT_H
#define FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct fz_in {
    const uint8_t *p;
    size_t left;
};

static inline void fz_init(struct fz_in *in, const uint8_t *data, size_t size)
{
    in->p = data;
    in->left = size;
}

static inline uint64_t fz_bytes(struct fz_in *in, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t b = 0;
        if (in->left) {
            b = *in->p++;
            in->left--;
        }
        v |= b << (8 * i); /* little endian */
    }
    return v;
}

static inline uint8_t fz_u8(struct fz_in *in)
{
    return (uint8_t)fz_bytes(in, 1);
}
static inline uint16_t fz_u16(struct fz_in *in)
{
    return (uint16_t)fz_bytes(in, 2);
}
static inline uint32_t fz_u32(struct fz_in *in)
{
    return (uint32_t)fz_bytes(in, 4);
}
static inline uint64_t fz_u64(struct fz_in *in)
{
    return fz_bytes(in, 8);
}

/* Fills dst with the next n bytes (zeros past the end); returns bytes taken. */
static inline size_t fz_fill(struct fz_in *in, void *dst, size_t n)
{
    size_t take = n < in->left ? n : in->left;
    memcpy(dst, in->p, take);
    memset((uint8_t *)dst + take, 0, n - take);
    in->p += take;
    in->left -= take;
    return take;
}

/* The harness's own invariant broke: a finding, reported like a crash. */
#define FZ_REQUIRE(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
