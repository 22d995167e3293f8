/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * One real SETUPMAPPING against the daemon, for tests/trace_setupmapping.py.
 *
 *   setupmapping_once --backend CMD [--log FILE]
 *
 * CMD is the daemon's command line ({socket} and {dir} are filled in; the
 * trace puts gdb in front of vufsd). Its output goes to FILE (default: ours).
 * The frontend is QEMU 11.1 as the in-tree frontend plays it: the mainline
 * mapping protocol (BACKEND_SHMEM_MAP), guest memory region by region, and
 * every mapping a memory region of its own, answered first and added with
 * ADD_MEM_REG after (vfe_dax_report_regions). The daemon is expected to run
 * with --dax-window 8M and --dax-policy always.
 *
 * Steps: a share holding one 2 MiB file (data.bin), connect, start, INIT, LOOKUP and
 * OPEN of the file, then exactly one SETUPMAPPING of the whole file at window
 * offset 0, readable and writable; its reply must be success with the file's
 * bytes in the window. Then the frontend hangs up and the daemon must exit by
 * itself with status 0. Exits 0, or 1 with a line on stderr saying what failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vfe.h"
#include "integration/it_util.h"

#define MiB     (1ull << 20)
#define WINDOW  (8 * MiB)
#define FILE_SZ (2 * MiB)
#define WIN_GPA 0x10000000000ull
/* gdb stops the daemon at every breakpoint: generous, never reached when it works. */
#define TIMEOUT_MS 30000

/* The file's bytes. */
static uint8_t pattern(uint64_t off)
{
    return (uint8_t)(off * 7 + 3);
}

static int fail(const char *what, int err)
{
    fprintf(stderr, "setupmapping_once: %s: %s\n", what, strerror(err < 0 ? -err : err));
    return 1;
}

static int run(const char *backend, const char *log, const char *dir)
{
    struct vfe_dax *x = NULL;
    struct vfe_dev *dev = NULL;
    struct vfe_fuse *fuse = NULL;
    int ret = 1, r;

    r = vfe_dax_new(WINDOW, VFE_DAX_SHMEM, &x);
    if (r < 0)
        return fail("window", r);
    struct vfe_dev_config dc = {
        .conn = {.backend_cmd = backend, .dir = dir, .backend_log = log, .timeout_ms = TIMEOUT_MS},
        .request_queues = 1,
        .protocol_features = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                             (1ull << VFE_VU_PF_BACKEND_REQ) | (1ull << VFE_VU_PF_BACKEND_SEND_FD) |
                             (1ull << VFE_VU_PF_SHMEM) | (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS),
        .backend_req = vfe_dax_handle,
        .backend_post = vfe_dax_post,
        .backend_req_opaque = x,
    };
    r = vfe_dev_connect(&dc, &dev);
    if (r < 0) {
        fail("connect", r);
        goto out;
    }
    uint64_t pf = vfe_dev_protocol_features(dev);
    if (!(pf & (1ull << VFE_VU_PF_SHMEM)) || !(pf & (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS))) {
        fprintf(stderr, "setupmapping_once: SHMEM or CONFIGURE_MEM_SLOTS not negotiated\n");
        goto out;
    }
    vfe_dax_report_regions(x, dev, WIN_GPA, 0);
    r = vfe_dev_start(dev);
    if (r < 0) {
        fail("start", r);
        goto out;
    }
    struct vfe_fuse_config fc = {.depth = 4,
                                 .timeout_ms = TIMEOUT_MS,
                                 .uid = (uint32_t)getuid(),
                                 .gid = (uint32_t)getgid(),
                                 .pid = (uint32_t)getpid(),
                                 .init_flags = FUSE_MAP_ALIGNMENT | FUSE_HAS_INODE_DAX};
    r = vfe_fuse_new(dev, &fc, &fuse);
    if (r < 0) {
        fail("FUSE client", r);
        goto out;
    }
    struct vfe_fuse_init_result init;
    r = vfe_fuse_init(fuse, &init);
    if (r < 0) {
        fail("INIT", r);
        goto out;
    }
    struct fuse_entry_out eo;
    r = vfe_fuse_lookup(fuse, FUSE_ROOT_ID, "data.bin", &eo);
    if (r < 0) {
        fail("LOOKUP", r);
        goto out;
    }
    if (!(eo.attr.flags & FUSE_ATTR_DAX)) {
        fprintf(stderr, "setupmapping_once: no FUSE_ATTR_DAX (is --dax-policy always set?)\n");
        goto out;
    }
    struct fuse_open_out oo;
    r = vfe_fuse_open(fuse, eo.nodeid, O_RDWR, &oo);
    if (r < 0) {
        fail("OPEN", r);
        goto out;
    }
    /* The one request; a Linux guest sends fh ~0. */
    r = vfe_fuse_setupmapping(fuse, eo.nodeid, ~0ull, 0, FILE_SZ,
                              FUSE_SETUPMAPPING_FLAG_READ | FUSE_SETUPMAPPING_FLAG_WRITE, 0);
    if (r < 0) {
        fail("SETUPMAPPING", r);
        goto out;
    }
    if (!vfe_dax_is_mapped(x, 0, FILE_SZ)) {
        fprintf(stderr, "setupmapping_once: the reply came before the mapping\n");
        goto out;
    }
    const uint8_t *win = vfe_dax_window(x);
    for (uint64_t i = 0; i < FILE_SZ; i++)
        if (win[i] != pattern(i)) {
            fprintf(stderr, "setupmapping_once: window byte %" PRIu64 " is %u\n", i, win[i]);
            goto out;
        }
    struct vfe_dax_stats st;
    vfe_dax_get_stats(x, &st);
    if (st.maps != 1 || st.rejects != 0) {
        fprintf(stderr, "setupmapping_once: %" PRIu64 " maps, %" PRIu64 " refused\n", st.maps,
                st.rejects);
        goto out;
    }
    ret = 0;
out:
    vfe_fuse_free(fuse);
    if (dev) {
        int status = 0;
        bool own = false;
        r = vfe_dev_close_status(dev, &status, &own);
        if (ret == 0 && (r < 0 || !own || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
            fprintf(stderr,
                    "setupmapping_once: the backend did not exit by itself with status 0 "
                    "(status %#x)\n",
                    (unsigned)status);
            ret = 1;
        }
    }
    vfe_dax_free(x);
    return ret;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"backend", required_argument, NULL, 'b'},
        {"log", required_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    const char *backend = NULL, *log = NULL;
    int c;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'b')
            backend = optarg;
        else if (c == 'l')
            log = optarg;
        else
            return 2;
    }
    if (!backend || optind != argc) {
        fprintf(stderr, "usage: %s --backend CMD [--log FILE]\n", argv[0]);
        return 2;
    }
    char *dir = it_make_data_share("vufsd-setupmapping", FILE_SZ, pattern);
    if (!dir)
        return fail("the share", errno ? errno : EIO);
    int ret = run(backend, log, dir);
    it_rm_tree(dir);
    free(dir);
    return ret;
}
