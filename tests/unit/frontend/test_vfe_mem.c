/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Guest memory: layout, translation, cross-region copies, the allocator. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "vfe.h"

static int setup_default(void **state)
{
    struct vfe_mem *m = NULL;
    assert_int_equal(vfe_mem_new(NULL, &m), 0);
    *state = m;
    return 0;
}

static int teardown(void **state)
{
    vfe_mem_free(*state);
    return 0;
}

static void test_default_layout(void **state)
{
    struct vfe_mem *m = *state;
    assert_true(vfe_mem_nregions(m) >= 3);
    struct vfe_vu_region r[8];
    for (unsigned i = 0; i < vfe_mem_nregions(m); i++) {
        vfe_mem_region(m, i, &r[i]);
        assert_true(r[i].memory_size > 0);
        /* userspace_addr is our real mapping: translation agrees. */
        assert_ptr_equal(vfe_mem_gpa_to_hva(m, r[i].guest_phys_addr, 1),
                         (void *)(uintptr_t)r[i].userspace_addr);
    }
    /* Region 0 is apart from region 1 in GPA space; 1 and 2 are adjacent. */
    assert_true(r[0].guest_phys_addr + r[0].memory_size < r[1].guest_phys_addr);
    assert_int_equal(r[1].guest_phys_addr + r[1].memory_size, r[2].guest_phys_addr);
    /* ... but not in our address space, and the file offsets differ. */
    assert_true(r[1].userspace_addr + r[1].memory_size != r[2].userspace_addr);
    assert_true(r[1].mmap_offset != r[2].mmap_offset);
    assert_true(vfe_mem_fd(m) >= 0);
}

static void test_translate(void **state)
{
    struct vfe_mem *m = *state;
    struct vfe_vu_region r1, r2;
    vfe_mem_region(m, 1, &r1);
    vfe_mem_region(m, 2, &r2);
    uint64_t end1 = r1.guest_phys_addr + r1.memory_size;
    /* Inside one region. */
    uint8_t *p = vfe_mem_gpa_to_hva(m, end1 - 16, 16);
    assert_non_null(p);
    uint64_t back;
    assert_int_equal(vfe_mem_hva_to_gpa(m, p, 16, &back), 0);
    assert_int_equal(back, end1 - 16);
    /* Across the boundary: not one mapping. */
    assert_null(vfe_mem_gpa_to_hva(m, end1 - 16, 17));
    assert_int_equal(vfe_mem_hva_to_gpa(m, p, 17, &back), -EFAULT);
    /* Holes, and a length that wraps. */
    assert_null(vfe_mem_gpa_to_hva(m, 0x80000000ull, 1));
    assert_null(vfe_mem_gpa_to_hva(m, r1.guest_phys_addr, UINT64_MAX));
    int local;
    assert_int_equal(vfe_mem_hva_to_gpa(m, &local, 1, &back), -EFAULT);
}

static void test_copy_across_regions(void **state)
{
    struct vfe_mem *m = *state;
    struct vfe_vu_region r1, r2;
    vfe_mem_region(m, 1, &r1);
    vfe_mem_region(m, 2, &r2);
    uint64_t boundary = r2.guest_phys_addr;
    uint8_t src[300], dst[300];
    for (unsigned i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 7 + 1);
    assert_int_equal(vfe_mem_write(m, boundary - 100, src, sizeof(src)), 0);
    memset(dst, 0, sizeof(dst));
    assert_int_equal(vfe_mem_read(m, boundary - 100, dst, sizeof(dst)), 0);
    assert_memory_equal(src, dst, sizeof(src));
    /* The bytes really are split: 100 at the end of region 1's mapping, 200 at
     * the start of region 2's, seen through an independent mapping of the fd. */
    size_t flen = r2.mmap_offset + r2.memory_size;
    uint8_t *file = mmap(NULL, flen, PROT_READ, MAP_SHARED, vfe_mem_fd(m), 0);
    assert_true(file != MAP_FAILED);
    assert_memory_equal(file + r1.mmap_offset + r1.memory_size - 100, src, 100);
    assert_memory_equal(file + r2.mmap_offset, src + 100, 200);
    munmap(file, flen);
    /* A copy running into a hole fails. */
    struct vfe_vu_region r0;
    vfe_mem_region(m, 0, &r0);
    assert_int_equal(vfe_mem_write(m, r0.guest_phys_addr + r0.memory_size - 10, src, 20),
                     -EFAULT);
    assert_int_equal(vfe_mem_fill(m, boundary - 2, 0xab, 4), 0);
    assert_int_equal(vfe_mem_read(m, boundary - 2, dst, 4), 0);
    assert_int_equal(dst[0], 0xab);
    assert_int_equal(dst[3], 0xab);
}

static void test_alloc_basic(void **state)
{
    struct vfe_mem *m = *state;
    uint64_t g[64];
    for (unsigned i = 0; i < 64; i++) {
        uint64_t align = 1ull << (6 + i % 7);
        assert_int_equal(vfe_mem_alloc(m, 1000 + i * 37, align, &g[i]), 0);
        assert_int_equal(g[i] % align, 0);
        /* Never across a region boundary. */
        assert_non_null(vfe_mem_gpa_to_hva(m, g[i], 1000 + i * 37));
        for (unsigned j = 0; j < i; j++) {
            uint64_t a = g[i], alen = 1000 + i * 37, b = g[j], blen = 1000 + j * 37;
            assert_false(a < b + blen && b < a + alen);
        }
    }
    /* Round robin: more than one region got blocks. */
    struct vfe_vu_region r0;
    vfe_mem_region(m, 0, &r0);
    bool in0 = false, out0 = false;
    for (unsigned i = 0; i < 64; i++) {
        if (g[i] < r0.guest_phys_addr + r0.memory_size)
            in0 = true;
        else
            out0 = true;
    }
    assert_true(in0 && out0);
    uint64_t total = vfe_mem_allocated(m);
    assert_int_equal(vfe_mem_free_block(m, g[10]), 0);
    assert_int_equal(vfe_mem_free_block(m, g[10]), -ENOENT);
    assert_int_equal(vfe_mem_allocated(m), total - (1000 + 10 * 37));
    assert_int_equal(vfe_mem_alloc(m, 0, 64, &g[0]), -EINVAL);
    assert_int_equal(vfe_mem_alloc(m, 64, 3, &g[0]), -EINVAL);
    assert_int_equal(vfe_mem_alloc_in(m, 99, 64, 64, &g[0]), -EINVAL);
}

static void test_alloc_exhaust_and_reuse(void **state)
{
    struct vfe_mem_config cfg = { .nregions = 2, .gpa = { 0, 0x10000 }, .size = { 8192, 4096 } };
    struct vfe_mem *m = NULL;
    assert_int_equal(vfe_mem_new(&cfg, &m), 0);
    uint64_t a, b, c, d;
    assert_int_equal(vfe_mem_alloc_in(m, 0, 4096, 4096, &a), 0);
    assert_int_equal(vfe_mem_alloc_in(m, 0, 4096, 4096, &b), 0);
    assert_int_equal(vfe_mem_alloc_in(m, 0, 1, 64, &c), -ENOMEM);
    assert_int_equal(vfe_mem_alloc(m, 4096, 64, &c), 0);
    assert_int_equal(c, 0x10000);
    assert_int_equal(vfe_mem_alloc(m, 64, 64, &d), -ENOMEM);
    /* A freed hole in the middle is found again. */
    assert_int_equal(vfe_mem_free_block(m, a), 0);
    assert_int_equal(vfe_mem_alloc(m, 2048, 64, &d), 0);
    assert_int_equal(d, a);
    assert_int_equal(vfe_mem_alloc(m, 2048, 64, &d), 0);
    assert_int_equal(d, a + 2048);
    (void)b;
    vfe_mem_free(m);
}

static void test_straddle(void **state)
{
    struct vfe_mem *m = *state;
    uint64_t s1, s2, s3;
    assert_int_equal(vfe_mem_alloc_straddle(m, 64 * 1024, &s1), 0);
    uint64_t b1 = vfe_mem_straddle_boundary(m, s1, 64 * 1024);
    assert_true(b1 != 0);
    assert_true(s1 < b1 && b1 < s1 + 64 * 1024);
    assert_int_equal(b1 - s1, 32 * 1024); /* half on each side */
    /* The default layout has two adjacent pairs: a second one fits, a third not. */
    assert_int_equal(vfe_mem_alloc_straddle(m, 8192, &s2), 0);
    uint64_t b2 = vfe_mem_straddle_boundary(m, s2, 8192);
    assert_true(b2 != 0 && b2 != b1);
    assert_int_equal(vfe_mem_alloc_straddle(m, 8192, &s3), -EBUSY);
    /* Normal blocks never overlap the straddling ones. */
    for (unsigned i = 0; i < 200; i++) {
        uint64_t g;
        if (vfe_mem_alloc(m, 1 << 20, 4096, &g) < 0)
            break;
        assert_false(g < s1 + 64 * 1024 && s1 < g + (1 << 20));
        assert_false(g < s2 + 8192 && s2 < g + (1 << 20));
    }
    assert_int_equal(vfe_mem_free_block(m, s1), 0);
    assert_int_equal(vfe_mem_alloc_straddle(m, 4096, &s3), 0);
    assert_int_equal(vfe_mem_straddle_boundary(m, s3, 4096), b1);
    assert_int_equal(vfe_mem_alloc_straddle(m, 1, &s3), -EINVAL);
    assert_int_equal(vfe_mem_straddle_boundary(m, 0, 4096), 0);
}

static void test_straddle_needs_adjacent(void **state)
{
    struct vfe_mem_config cfg = { .nregions = 2, .gpa = { 0, 0x100000 },
                                  .size = { 65536, 65536 } };
    struct vfe_mem *m = NULL;
    assert_int_equal(vfe_mem_new(&cfg, &m), 0);
    uint64_t g;
    assert_int_equal(vfe_mem_alloc_straddle(m, 4096, &g), -ENOENT);
    vfe_mem_free(m);
}

static void test_bad_config(void **state)
{
    struct vfe_mem *m = NULL;
    struct vfe_mem_config overlap = { .nregions = 2, .gpa = { 0, 4096 }, .size = { 8192, 4096 } };
    assert_int_equal(vfe_mem_new(&overlap, &m), -EINVAL);
    struct vfe_mem_config unaligned = { .nregions = 1, .gpa = { 100 }, .size = { 4096 } };
    assert_int_equal(vfe_mem_new(&unaligned, &m), -EINVAL);
    struct vfe_mem_config empty = { .nregions = 1, .gpa = { 0 }, .size = { 0 } };
    assert_int_equal(vfe_mem_new(&empty, &m), -EINVAL);
    struct vfe_mem_config wrap = { .nregions = 1, .gpa = { UINT64_MAX - 4095 },
                                   .size = { 8192 } };
    assert_int_equal(vfe_mem_new(&wrap, &m), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_default_layout, setup_default, teardown),
        cmocka_unit_test_setup_teardown(test_translate, setup_default, teardown),
        cmocka_unit_test_setup_teardown(test_copy_across_regions, setup_default, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_basic, setup_default, teardown),
        cmocka_unit_test(test_alloc_exhaust_and_reuse),
        cmocka_unit_test_setup_teardown(test_straddle, setup_default, teardown),
        cmocka_unit_test(test_straddle_needs_adjacent),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
