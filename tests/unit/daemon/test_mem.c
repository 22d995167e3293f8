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
    struct vmem_table *t = vmem_table_new();
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
    struct vmem_table *n = vmem_table_copy(t);
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
    struct vmem_table *t = vmem_table_new();
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
    struct vmem_table *t = vmem_table_new();
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

/* Which bits of a log are set, as a string of '0'/'1' for pages 0..n-1. */
static const char *log_pages(const uint8_t *bits, unsigned n)
{
    static char buf[256];
    for (unsigned p = 0; p < n && p < sizeof(buf) - 1; p++)
        buf[p] = (bits[p / 8] >> (p % 8)) & 1 ? '1' : '0';
    buf[n < sizeof(buf) - 1 ? n : sizeof(buf) - 1] = 0;
    return buf;
}

/* Page boundaries: a byte, a range ending on a boundary, one starting on it, ranges
 * across byte boundaries of the bitmap, and bits already set by the frontend kept. */
static void test_log_bits(void **state)
{
    (void)state;
    uint8_t bits[4] = {0};

    vmem_log_mark_bits(bits, sizeof(bits), 0x1fff, 1); /* last byte of page 1 */
    assert_string_equal(log_pages(bits, 32), "01000000000000000000000000000000");
    vmem_log_mark_bits(bits, sizeof(bits), 0x3000, 0x1000); /* exactly page 3 */
    assert_string_equal(log_pages(bits, 32), "01010000000000000000000000000000");
    vmem_log_mark_bits(bits, sizeof(bits), 0x5fff, 2); /* pages 5 and 6 */
    assert_string_equal(log_pages(bits, 32), "01010110000000000000000000000000");
    vmem_log_mark_bits(bits, sizeof(bits), 0x7000, 0x9000); /* pages 7..15: two bytes */
    assert_string_equal(log_pages(bits, 32), "01010111111111110000000000000000");
    vmem_log_mark_bits(bits, sizeof(bits), 0x11000, 0); /* empty: nothing */
    assert_string_equal(log_pages(bits, 32), "01010111111111110000000000000000");
    memset(bits, 0, sizeof(bits));
    bits[3] = 0x80; /* page 31, set by someone else */
    vmem_log_mark_bits(bits, sizeof(bits), 0x12345, 0x8000); /* pages 18..26 */
    assert_string_equal(log_pages(bits, 32), "00000000000000000011111111100001");
}

/* Past the log's end nothing is written; a range running past 2^64 stops there. */
static void test_log_bits_overflow(void **state)
{
    (void)state;
    uint8_t buf[4] = {0};
    uint8_t *bits = buf + 1; /* a 2-byte log with guards on both sides */

    vmem_log_mark_bits(bits, 2, 0xe000, 0x100000); /* pages 14..: clipped at 15 */
    assert_int_equal(buf[0], 0);
    assert_int_equal(buf[2], 0xc0);
    assert_int_equal(buf[3], 0);
    vmem_log_mark_bits(bits, 2, 0x10000, 1); /* page 16: beyond the log */
    assert_int_equal(buf[3], 0);
    vmem_log_mark_bits(bits, 2, UINT64_MAX - 10, 100); /* wraps: ignored, beyond */
    vmem_log_mark_bits(bits, 2, UINT64_MAX, UINT64_MAX);
    assert_int_equal(buf[3], 0);
    memset(buf, 0, sizeof(buf));
    vmem_log_mark_bits(bits, 2, 0, UINT64_MAX); /* everything the log holds */
    assert_int_equal(buf[0], 0);
    assert_int_equal(buf[1], 0xff);
    assert_int_equal(buf[2], 0xff);
    assert_int_equal(buf[3], 0);
    vmem_log_mark_bits(bits, 0, 0, 1); /* an empty log */
}

/* A real shared log: offsets inside the fd, and the sizes refused. */
static void test_log_map(void **state)
{
    (void)state;
    int fd = memfd(0x3000);
    struct vmem_log *l;

    assert_int_equal(vmem_log_map(fd, 0, 0, &l), -EINVAL);
    assert_null(l);
    assert_int_equal(vmem_log_map(fd, 0x3001, 0, &l), -EINVAL);       /* longer than the fd */
    assert_int_equal(vmem_log_map(fd, 0x100, 0x2f01, &l), -EINVAL);   /* ends past it */
    assert_int_equal(vmem_log_map(fd, 16, UINT64_MAX - 8, &l), -EINVAL); /* wraps */
    assert_int_equal(vmem_log_map(fd, VMEM_LOG_MAX + 1, 0, &l), -EINVAL);
    assert_int_equal(vmem_log_map(-1, 16, 0, &l), -EBADF);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(vmem_log_map(pfd[0], 16, 0, &l), -EINVAL); /* not a file */
    close(pfd[0]);
    close(pfd[1]);

    /* At an unaligned offset: the marks land in the fd at that offset. */
    assert_int_equal(vmem_log_map(fd, 0x100, 0x1010, &l), 0);
    vmem_log_mark(l, 9 * VMEM_LOG_PAGE, 1);
    uint8_t *view = mmap(NULL, 0x3000, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(view != MAP_FAILED);
    assert_int_equal(view[0x1011], 0x02);
    assert_int_equal(view[0x1010], 0);
    vmem_log_free(l);
    munmap(view, 0x3000);
    close(fd);
}

/* Host iovecs back to guest pages: a buffer straddling two regions that are not
 * contiguous in guest-physical space, and one outside every region. */
static void test_log_iov_straddle(void **state)
{
    (void)state;
    static uint8_t ram[0x6000];
    struct vq_mem m = {.nregions = 2};
    m.r[0] = (struct vmem_region){.gpa = 0x0, .size = 0x3000, .uva = 0x100000, .host = ram};
    m.r[1] = (struct vmem_region){
        .gpa = 0x10000, .size = 0x3000, .uva = 0x103000, .host = ram + 0x3000};
    uint8_t bits[4] = {0};
    struct vmem_log l = {.bits = bits, .size = sizeof(bits)};

    /* A 0x2000-byte buffer at gpa 0x2800: 0x800 in region 0, the rest at 0x10000. */
    struct iovec iov[4];
    unsigned cnt = 0;
    assert_int_equal(vmem_gpa_iov(&m, 0x2800, 0x800, iov, 4, &cnt), 0);
    assert_int_equal(vmem_gpa_iov(&m, 0x10000, 0x1800, iov, 4, &cnt), 0);
    assert_int_equal(cnt, 2);
    /* Only the first 0x1000 bytes were written: page 2 and page 16. */
    vmem_log_mark_iov(&l, &m, iov, cnt, 0x1000);
    assert_string_equal(log_pages(bits, 32), "00100000000000001000000000000000");
    /* All of it: pages 16 and 17 too; a foreign pointer marks nothing. */
    iov[2] = (struct iovec){.iov_base = bits, .iov_len = 64};
    vmem_log_mark_iov(&l, &m, iov, 3, SIZE_MAX);
    assert_string_equal(log_pages(bits, 32), "00100000000000001100000000000000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desc_check),
        cmocka_unit_test(test_map_translate_swap),
        cmocka_unit_test(test_map_bad_fd),
        cmocka_unit_test(test_window_regions),
        cmocka_unit_test(test_log_bits),
        cmocka_unit_test(test_log_bits_overflow),
        cmocka_unit_test(test_log_map),
        cmocka_unit_test(test_log_iov_straddle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
