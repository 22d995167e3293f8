/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Statistics: counters per inode and per window after known traffic, and the JSON
 * dump, which must parse (python3's json module reads it back) and carry the same
 * numbers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dax.h"
#include "fake_frontend.h"

#define MiB (UINT64_C(1) << 20)
#define RD FUSE_SETUPMAPPING_FLAG_READ
#define RW (FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE)

struct fx {
    struct fake_fe fe;
    struct dax_window *w;
};

static void fx_new(struct fx *f)
{
    struct dax_config cfg = { .window_size = 16 * MiB, .policy = DAX_POLICY_AUTO,
                              .decay_interval_ns = UINT64_MAX };

    fake_init(&f->fe, cfg.window_size, 4096);
    assert_int_equal(dax_window_new(&cfg, &fake_ops, &f->fe, &f->w), 0);
}

static void fx_free(struct fx *f)
{
    assert_int_equal(f->fe.violations, 0);
    dax_window_free(f->w);
    fake_fini(&f->fe);
}

static void traffic(struct fx *f)
{
    struct fuse_removemapping_one e = { 0, 2 * MiB };

    assert_int_equal(fake_setup(&f->fe, f->w, 10, 0, 2 * MiB, 0, RD), 0);
    assert_int_equal(fake_setup(&f->fe, f->w, 10, 0, 2 * MiB, 0, RW), 0);   /* upgrade */
    assert_int_equal(fake_setup(&f->fe, f->w, 10, 0, 2 * MiB, 0, RD), 0);   /* noop */
    assert_int_equal(dax_removemapping(f->w, &e, 1), 0);
    assert_int_equal(fake_setup(&f->fe, f->w, 10, 0, 2 * MiB, 2 * MiB, RD), 0); /* ghost */
    assert_int_equal(fake_setup(&f->fe, f->w, 11, 4 * MiB, 4 * MiB, 4 * MiB, RW), 0);
    assert_true(dax_policy_attr_dax(f->w, 11, 4 * MiB, true));
}

static void test_counters(void **state)
{
    struct fx f;
    struct dax_window_stats st;
    struct dax_inode_stats is;

    fx_new(&f);
    traffic(&f);
    dax_window_get_stats(f.w, &st);
    assert_int_equal(st.window_size, 16 * MiB);
    assert_int_equal(st.nslots, 8);
    assert_int_equal(st.maps, 4);
    assert_int_equal(st.upgrades, 1);
    assert_int_equal(st.noops, 1);
    assert_int_equal(st.unmaps, 1);
    assert_int_equal(st.ghost_hits, 1);
    assert_int_equal(st.extents, 3);
    assert_int_equal(st.slots_used, 3);
    assert_int_equal(st.bytes_mapped, 6 * MiB);
    assert_int_equal(st.map_lat_count, 5); /* 4 maps + 1 upgrade re-map */
    assert_true(st.map_lat_max_ns <= st.map_lat_sum_ns);
    assert_int_equal(st.inodes, 2);
    assert_int_equal(st.admitted_bytes, 4 * MiB);
    assert_int_equal(fake_inode_stats(f.w, 10, &is), 0);
    assert_int_equal(is.maps, 2);
    assert_int_equal(is.upgrades, 1);
    assert_int_equal(is.unmaps, 1);
    assert_int_equal(is.ghost_hits, 1);
    assert_int_equal(is.recent_ghost_hits, 1);
    assert_int_equal(is.bytes_mapped, 2 * MiB);
    assert_int_equal(fake_inode_stats(f.w, 11, &is), 0);
    assert_int_equal(is.extents, 2);
    assert_true(is.dax);
    assert_int_equal(fake_inode_stats(f.w, 12, &is), -ENOENT);
    fx_free(&f);
}

static const char checker[] =
    "import json,sys\n"
    "d=json.load(open(sys.argv[1]))\n"
    "w=d['window']\n"
    "assert w['size']==16<<20 and w['nslots']==8 and w['range_size']==2<<20, w\n"
    "assert w['maps']==4 and w['upgrades']==1 and w['ghost_hits']==1 and w['unmaps']==1, w\n"
    "assert w['slots_used']==3 and abs(w['occupancy']-0.375)<1e-9, w\n"
    "assert w['policy']=='auto' and w['map_latency_ns']['count']==5, w\n"
    "ino={i['key']:i for i in d['inodes']}\n"
    "assert set(ino)=={10,11}, ino\n"
    "assert ino[10]['ghost_hits']==1 and ino[10]['dax'] is False, ino\n"
    "assert ino[11]['dax'] is True and ino[11]['bytes_mapped']==4<<20, ino\n";

static int run_checker(const char *json_path)
{
    char script[] = "/tmp/dax-json-check-XXXXXX";
    char cmd[256];
    int fd = mkstemp(script), r;

    assert_true(fd >= 0);
    assert_int_equal(write(fd, checker, sizeof(checker) - 1), (ssize_t)sizeof(checker) - 1);
    close(fd);
    snprintf(cmd, sizeof(cmd), "python3 %s %s", script, json_path);
    r = system(cmd);
    unlink(script);
    return r;
}

static void test_json_parses(void **state)
{
    char path[] = "/tmp/dax-json-XXXXXX";
    struct fx f;
    FILE *fp;
    int fd;

    fx_new(&f);
    traffic(&f);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    fp = fdopen(fd, "w");
    assert_non_null(fp);
    assert_int_equal(dax_stats_json(f.w, fp), 0);
    fclose(fp);
    assert_int_equal(run_checker(path), 0);
    unlink(path);
    fx_free(&f);
}

static void test_json_empty_window(void **state)
{
    struct fx f;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp;

    fx_new(&f);
    fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    assert_int_equal(dax_stats_json(f.w, fp), 0);
    fclose(fp);
    assert_non_null(strstr(buf, "\"inodes\":[]}"));
    assert_int_equal(buf[len - 1], '\n');
    free(buf);
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_json_parses),
        cmocka_unit_test(test_json_empty_window),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
