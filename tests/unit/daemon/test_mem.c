/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Guest memory: region validation, real memfd mappings, translations, table swaps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem.h"

static int memfd(size_t size)
{
    int fd = memfd_create("guest", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    return fd;
}

static void test_desc_check(void **state)
{
    (void)state;
    struct vq_mem m = {0};
    struct vmem_desc d = {.gpa = 0x1000, .size = 0x1000, .uva = 0x100000};
    assert_int_equal(vmem_desc_check(&m, &d), 0);
    d.size = 0;
    assert_int_equal(vmem_desc_check(&m, &d), -EINVAL);
    d = (struct vmem_desc){.gpa = UINT64_MAX - 10, .size = 0x1000};
    assert_int_equal(vmem_desc_check(&m, &d), -EINVAL);
    d = (struct vmem_desc){.gpa = 0, .size = 0x1000, .uva = UINT64_MAX - 0xfff};
    assert_int_equal(vmem_desc_check(&m, &d), -EINVAL);
    d = (struct vmem_desc){.gpa = 0, .size = 0x1000, .mmap_offset = UINT64_MAX};
    assert_int_equal(vmem_desc_check(&m, &d), -EINVAL);
    /* Overlaps in either address space. */
    m.nregions = 1;
    m.r[0] = (struct vmem_region){.gpa = 0x10000, .size = 0x10000, .uva = 0x500000};
    d = (struct vmem_desc){.gpa = 0x1f000, .size = 0x2000, .uva = 0x900000};
    assert_int_equal(vmem_desc_check(&m, &d), -EEXIST);
    d = (struct vmem_desc){.gpa = 0x40000, .size = 0x2000, .uva = 0x50f000};
    assert_int_equal(vmem_desc_check(&m, &d), -EEXIST);
    d = (struct vmem_desc){.gpa = 0x20000, .size = 0x2000, .uva = 0x510000};
    assert_int_equal(vmem_desc_check(&m, &d), 0);
    m.nregions = VMEM_MAX_REGIONS;
    assert_int_equal(vmem_desc_check(&m, &d), -ENOSPC);
}

static void test_map_translate_swap(void **state)
{
    (void)state;
    int fd = memfd(0x3000);
    struct vmem_table *t = NULL;
    assert_int_equal(vmem_table_new(&t), 0);
    /* Region: file offset 0x1000.., gpa 0x40000, frontend VA 0x7f0000. */
    struct vmem_desc d = {.gpa = 0x40000, .size = 0x2000, .uva = 0x7f0000, .mmap_offset = 0x1000};
    assert_int_equal(vmem_table_add(t, &d, fd), 0);
    close(fd);

    uint8_t *h = vmem_gpa_host(&t->mem, 0x40010, 16);
    assert_non_null(h);
    assert_ptr_equal(vmem_uva_host(&t->mem, 0x7f0010, 16), h);
    memcpy(h, "hello", 6);
    assert_null(vmem_gpa_host(&t->mem, 0x41ff0, 0x20)); /* runs off the end */
    assert_null(vmem_uva_host(&t->mem, 0x40010, 16));   /* a gpa is not a uva */
    assert_null(vmem_gpa_host(&t->mem, 0x7f0010, 16));  /* and vice versa */

    /* A copy shares the mapping; dropping the original keeps it alive. */
    struct vmem_table *n = NULL;
    assert_int_equal(vmem_table_copy(t, &n), 0);
    vmem_table_unref(t);
    assert_string_equal((char *)vmem_gpa_host(&n->mem, 0x40010, 6), "hello");

    struct iovec iov[2];
    unsigned cnt = 0;
    assert_int_equal(vmem_gpa_iov(&n->mem, 0x40000, 0x2000, iov, 2, &cnt), 0);
    assert_int_equal(cnt, 1);
    cnt = 0;
    assert_int_equal(vmem_gpa_iov(&n->mem, 0x40000, 0x2001, iov, 2, &cnt), -EFAULT);

    assert_int_equal(vmem_table_remove(n, &d), 0);
    assert_int_equal(n->mem.nregions, 0);
    assert_int_equal(vmem_table_remove(n, &d), -ENOENT);
    vmem_table_unref(n);
}

static void test_map_bad_fd(void **state)
{
    (void)state;
    struct vmem_table *t = NULL;
    assert_int_equal(vmem_table_new(&t), 0);
    struct vmem_desc d = {.gpa = 0, .size = 0x1000, .uva = 0x1000};
    int fd = memfd_create("x", MFD_CLOEXEC);
    close(fd);
    assert_true(vmem_table_add(t, &d, fd) < 0);
    assert_int_equal(t->mem.nregions, 0);
    vmem_table_unref(t);
}

/*
 * A DAX window as QEMU 11.1 reports it: guest RAM, then one 2 MiB region per live
 * mapping, each a range of a host file at its own file offset. The table holds
 * RAM plus a 1 GiB window's worth (511 ranges), translates into each (only the
 * region's part of the file is mapped: the bytes are the file's at mmap_offset),
 * and removal keeps the rest in place.
 */
static void test_window_regions(void **state)
{
    (void)state;
    const uint64_t range = 2u << 20, win_gpa = 0x100000000ull, nwin = VMEM_MAX_REGIONS - 1;
    int ram = memfd(1u << 20);
    int file = memfd((size_t)(nwin + 8) * range); /* sparse */
    struct vmem_table *t = NULL;
    assert_int_equal(vmem_table_new(&t), 0);
    struct vmem_desc d = {.gpa = 0, .size = 1u << 20, .uva = 0x7f0000000000};
    assert_int_equal(vmem_table_add(t, &d, ram), 0);
    for (uint64_t i = 0; i < nwin; i++) {
        /* Window slot i maps file range nwin - i (any order, any offset). */
        uint64_t foff = (nwin - i) * range;
        assert_int_equal(pwrite(file, &foff, sizeof(foff), (off_t)(foff + 8)), sizeof(foff));
        d = (struct vmem_desc){.gpa = win_gpa + i * range, .size = range,
                               .uva = 0x7e0000000000 + i * range, .mmap_offset = foff};
        assert_int_equal(vmem_table_add(t, &d, file), 0);
    }
    assert_int_equal(t->mem.nregions, VMEM_MAX_REGIONS);
    d = (struct vmem_desc){.gpa = win_gpa + nwin * range, .size = range,
                           .uva = 0x7d0000000000, .mmap_offset = 0};
    assert_int_equal(vmem_table_add(t, &d, file), -ENOSPC);
    for (uint64_t i = 0; i < nwin; i += 97) {
        uint64_t v;
        uint64_t *h = vmem_gpa_host(&t->mem, win_gpa + i * range + 8, sizeof(v));
        assert_non_null(h);
        memcpy(&v, h, sizeof(v));
        assert_int_equal(v, (nwin - i) * range);
    }
    /* A descriptor may straddle two window ranges: split per region. */
    struct iovec iov[4];
    unsigned cnt = 0;
    assert_int_equal(vmem_gpa_iov(&t->mem, win_gpa + range - 16, 32, iov, 4, &cnt), 0);
    assert_int_equal(cnt, 2);
    /* Removing one in the middle keeps RAM first and the others translating. */
    d = (struct vmem_desc){.gpa = win_gpa + 5 * range, .size = range,
                           .uva = 0x7e0000000000 + 5 * range, .mmap_offset = (nwin - 5) * range};
    assert_int_equal(vmem_table_remove(t, &d), 0);
    assert_int_equal(t->mem.r[0].gpa, 0);
    assert_null(vmem_gpa_host(&t->mem, win_gpa + 5 * range, 8));
    assert_non_null(vmem_gpa_host(&t->mem, win_gpa + 6 * range, 8));
    vmem_table_unref(t);
    close(ram);
    close(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desc_check),
        cmocka_unit_test(test_map_translate_swap),
        cmocka_unit_test(test_map_bad_fd),
        cmocka_unit_test(test_window_regions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
