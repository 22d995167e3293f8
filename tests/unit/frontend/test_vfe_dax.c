/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The DAX window: backend map/unmap requests as a VMM enforces them, checked
 * through the window's bytes, and once end to end over the backend request
 * channel with the file descriptor passed as SCM_RIGHTS.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"

#define MiB (1ull << 20)

struct fix {
    struct vfe_dax *x;
    int file; /* 8 MiB memfd, byte i = (i / 4096) & 0xff ^ 0x5a */
};

static uint8_t file_byte(uint64_t i)
{
    return (uint8_t)(((i / 4096) & 0xff) ^ 0x5a);
}

static int setup_proto(void **state, enum vfe_dax_proto proto)
{
    struct fix *f = calloc(1, sizeof(*f));
    assert_int_equal(vfe_dax_new(16 * MiB, proto, &f->x), 0);
    f->file = memfd_create("dax-file", MFD_CLOEXEC);
    assert_true(f->file >= 0);
    uint8_t *buf = malloc(8 * MiB);
    for (uint64_t i = 0; i < 8 * MiB; i++)
        buf[i] = file_byte(i);
    assert_int_equal(write(f->file, buf, 8 * MiB), (ssize_t)(8 * MiB));
    free(buf);
    *state = f;
    return 0;
}

static int setup_shmem(void **state)
{
    return setup_proto(state, VFE_DAX_SHMEM);
}

static int setup_legacy(void **state)
{
    return setup_proto(state, VFE_DAX_LEGACY);
}

static int teardown(void **state)
{
    struct fix *f = *state;
    vfe_dax_free(f->x);
    close(f->file);
    free(f);
    return 0;
}

static void shmem_msg(struct vfe_msg *m, uint32_t req, uint64_t fd_off, uint64_t shm_off,
                      uint64_t len, uint64_t flags)
{
    vfe_msg_init(m, req, VFE_VU_FLAG_NEED_REPLY);
    uint8_t p[40] = { 0 };
    memcpy(p + 8, &fd_off, 8);
    memcpy(p + 16, &shm_off, 8);
    memcpy(p + 24, &len, 8);
    memcpy(p + 32, &flags, 8);
    memcpy(m->payload.raw, p, sizeof(p));
    m->size = sizeof(p);
}

static uint64_t shmem(struct fix *f, uint32_t req, uint64_t fd_off, uint64_t shm_off,
                      uint64_t len, uint64_t flags)
{
    struct vfe_msg m;
    shmem_msg(&m, req, fd_off, shm_off, len, flags);
    bool map = req == VFE_VU_BACKEND_SHMEM_MAP;
    return vfe_dax_handle(f->x, &m, &f->file, map ? 1 : 0);
}

static void test_shmem_map_read_write_unmap(void **state)
{
    struct fix *f = *state;
    uint8_t *w = vfe_dax_window(f->x);
    assert_int_equal(vfe_dax_size(f->x), 16 * MiB);
    /* Read-write 2 MiB of the file (from 2 MiB) at window offset 4 MiB. */
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 2 * MiB, 4 * MiB, 2 * MiB, 1), 0);
    assert_true(vfe_dax_is_mapped(f->x, 4 * MiB, 2 * MiB));
    assert_false(vfe_dax_is_mapped(f->x, 4 * MiB, 2 * MiB + 4096));
    for (uint64_t i = 0; i < 2 * MiB; i += 4096)
        assert_int_equal(w[4 * MiB + i], file_byte(2 * MiB + i));
    /* A store through the window reaches the file. */
    w[4 * MiB + 10] = 0xab;
    uint8_t b;
    assert_int_equal(pread(f->file, &b, 1, 2 * MiB + 10), 1);
    assert_int_equal(b, 0xab);
    struct vfe_dax_stats st;
    vfe_dax_get_stats(f->x, &st);
    assert_int_equal(st.maps, 1);
    assert_int_equal(st.mappings, 1);
    /* Exact unmap. */
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_UNMAP, 0, 4 * MiB, 2 * MiB, 0), 0);
    assert_false(vfe_dax_is_mapped(f->x, 4 * MiB, 4096));
    vfe_dax_get_stats(f->x, &st);
    assert_int_equal(st.unmaps, 1);
    assert_int_equal(st.mappings, 0);
    assert_int_equal(st.rejects, 0);
}

static void test_shmem_rules(void **state)
{
    struct fix *f = *state;
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 0, 0, 2 * MiB, 0), 0);
    /* Over an existing mapping, even partly: refused. */
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 0, 1 * MiB, 2 * MiB, 0), 1);
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 0, 0, 2 * MiB, 1), 1);
    /* Unmaps that are not exactly one mapping: refused, mapping intact. */
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_UNMAP, 0, 0, 1 * MiB, 0), 1);
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_UNMAP, 0, 0, 4 * MiB, 0), 1);
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_UNMAP, 0, 8 * MiB, 2 * MiB, 0), 1);
    assert_true(vfe_dax_is_mapped(f->x, 0, 2 * MiB));
    /* Outside the window, wrapping, unaligned, empty. */
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 0, 15 * MiB, 2 * MiB, 0), 1);
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 0, UINT64_MAX - 4095, 8192, 0), 1);
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 0, 8 * MiB + 1, 4096, 0), 1);
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 100, 8 * MiB, 4096, 0), 1);
    assert_int_equal(shmem(f, VFE_VU_BACKEND_SHMEM_MAP, 0, 8 * MiB, 0, 0), 1);
    /* No fd, a wrong size, a wrong shmid, the other protocol's ids. */
    struct vfe_msg m;
    shmem_msg(&m, VFE_VU_BACKEND_SHMEM_MAP, 0, 8 * MiB, 4096, 0);
    assert_int_equal(vfe_dax_handle(f->x, &m, NULL, 0), 1);
    m.size = 32;
    assert_int_equal(vfe_dax_handle(f->x, &m, &f->file, 1), 1);
    shmem_msg(&m, VFE_VU_BACKEND_SHMEM_MAP, 0, 8 * MiB, 4096, 0);
    m.payload.raw[0] = 1;
    assert_int_equal(vfe_dax_handle(f->x, &m, &f->file, 1), 1);
    shmem_msg(&m, VFE_VU_LEGACY_FS_MAP, 0, 8 * MiB, 4096, 0);
    assert_int_equal(vfe_dax_handle(f->x, &m, &f->file, 1), 1);
    struct vfe_dax_stats st;
    vfe_dax_get_stats(f->x, &st);
    assert_int_equal(st.maps, 1);
    assert_int_equal(st.rejects, 14);
    assert_int_equal(st.mappings, 1);
    /* A reset drops everything. */
    vfe_dax_reset(f->x);
    assert_false(vfe_dax_is_mapped(f->x, 0, 4096));
}

static uint64_t legacy(struct fix *f, uint32_t req, unsigned n, const uint64_t *fd_off,
                       const uint64_t *c_off, const uint64_t *len, const uint64_t *flags)
{
    struct vfe_msg m;
    vfe_msg_init(&m, req, VFE_VU_FLAG_NEED_REPLY);
    uint64_t arr[4][8] = { { 0 } };
    for (unsigned i = 0; i < n; i++) {
        arr[0][i] = fd_off ? fd_off[i] : 0;
        arr[1][i] = c_off[i];
        arr[2][i] = len[i];
        arr[3][i] = flags ? flags[i] : 0;
    }
    memcpy(m.payload.raw, arr, sizeof(arr));
    m.size = sizeof(arr);
    return vfe_dax_handle(f->x, &m, &f->file, req == VFE_VU_LEGACY_FS_MAP ? 1 : 0);
}

static void test_legacy(void **state)
{
    struct fix *f = *state;
    uint8_t *w = vfe_dax_window(f->x);
    /* Two entries in one message (R and RW). */
    uint64_t fo[2] = { 0, 6 * MiB }, co[2] = { 0, 2 * MiB }, ln[2] = { 2 * MiB, 2 * MiB },
             fl[2] = { 1, 3 };
    assert_int_equal(legacy(f, VFE_VU_LEGACY_FS_MAP, 2, fo, co, ln, fl), 0);
    assert_true(vfe_dax_is_mapped(f->x, 0, 4 * MiB));
    assert_int_equal(w[2 * MiB + 8192], file_byte(6 * MiB + 8192));
    /* A later map replaces what it covers (a read -> write upgrade). */
    uint64_t fo2[1] = { 4 * MiB }, co2[1] = { 1 * MiB }, ln2[1] = { 2 * MiB }, fl2[1] = { 3 };
    assert_int_equal(legacy(f, VFE_VU_LEGACY_FS_MAP, 1, fo2, co2, ln2, fl2), 0);
    assert_int_equal(w[1 * MiB], file_byte(4 * MiB));
    assert_int_equal(w[0], file_byte(0));
    assert_true(vfe_dax_is_mapped(f->x, 0, 4 * MiB));
    /* A partial unmap splits; one bad entry fails the whole message first. */
    uint64_t co3[2] = { 3 * MiB, 20 * MiB }, ln3[2] = { 4096, 4096 };
    assert_int_equal(legacy(f, VFE_VU_LEGACY_FS_UNMAP, 2, NULL, co3, ln3, NULL), 1);
    assert_true(vfe_dax_is_mapped(f->x, 3 * MiB, 4096));
    assert_int_equal(legacy(f, VFE_VU_LEGACY_FS_UNMAP, 1, NULL, co3, ln3, NULL), 0);
    assert_false(vfe_dax_is_mapped(f->x, 3 * MiB, 4096));
    assert_true(vfe_dax_is_mapped(f->x, 3 * MiB + 4096, 1 * MiB - 4096));
    /* len ~0: the whole window. */
    uint64_t co4[1] = { 0 }, ln4[1] = { UINT64_MAX };
    assert_int_equal(legacy(f, VFE_VU_LEGACY_FS_UNMAP, 1, NULL, co4, ln4, NULL), 0);
    struct vfe_dax_stats st;
    vfe_dax_get_stats(f->x, &st);
    assert_int_equal(st.mappings, 0);
    /* Mainline ids are not this protocol. */
    struct vfe_msg m;
    shmem_msg(&m, VFE_VU_BACKEND_SHMEM_MAP, 0, 0, 4096, 0);
    assert_int_equal(vfe_dax_handle(f->x, &m, &f->file, 1), 1);
}

/* Over a real backend request channel: the fd travels as SCM_RIGHTS. */
static void test_over_channel(void **state)
{
    struct fix *f = *state;
    g_autofree char *dir = g_dir_make_tmp("vfe-dax-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "s", NULL);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strcpy(sa.sun_path, path);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 1), 0);
    struct vfe_conn *c;
    struct vfe_conn_config cfg = { .socket_path = path, .timeout_ms = 5000 };
    assert_int_equal(vfe_conn_open(&cfg, &c), 0);
    int peer = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    assert_true(peer >= 0);
    assert_int_equal(vfe_conn_start_backend_channel(c, vfe_dax_handle, NULL, f->x), 0);
    /* The backend side: take the channel fd out of SET_BACKEND_REQ_FD. */
    uint8_t hdr[12];
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { hdr, sizeof(hdr) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                         .msg_controllen = sizeof(ctl) };
    assert_int_equal(recvmsg(peer, &mh, 0), 12);
    struct cmsghdr *rcm = CMSG_FIRSTHDR(&mh);
    if (!rcm) {
        fail_msg("SET_BACKEND_REQ_FD came without its fd");
        return;
    }
    int chan;
    memcpy(&chan, CMSG_DATA(rcm), sizeof(int));
    /* BACKEND_SHMEM_MAP with the file attached. */
    struct vfe_msg m;
    shmem_msg(&m, VFE_VU_BACKEND_SHMEM_MAP, 4 * MiB, 8 * MiB, 1 * MiB, 0);
    struct iovec siov = { &m, 12 + 40 };
    char sctl[CMSG_SPACE(sizeof(int))];
    memset(sctl, 0, sizeof(sctl));
    struct msghdr smh = { .msg_iov = &siov, .msg_iovlen = 1, .msg_control = sctl,
                          .msg_controllen = sizeof(sctl) };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&smh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &f->file, sizeof(int));
    assert_int_equal(sendmsg(chan, &smh, 0), 52);
    uint8_t rep[20];
    ssize_t n = 0, k;
    while (n < 20 && (k = read(chan, rep + n, sizeof(rep) - (size_t)n)) > 0)
        n += k;
    assert_int_equal(n, 20);
    uint64_t ack;
    memcpy(&ack, rep + 12, 8);
    assert_int_equal(ack, 0);
    uint8_t *w = vfe_dax_window(f->x);
    assert_int_equal(w[8 * MiB + 4096], file_byte(4 * MiB + 4096));
    vfe_conn_close(c);
    close(chan);
    close(peer);
    close(lfd);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shmem_map_read_write_unmap, setup_shmem, teardown),
        cmocka_unit_test_setup_teardown(test_shmem_rules, setup_shmem, teardown),
        cmocka_unit_test_setup_teardown(test_legacy, setup_legacy, teardown),
        cmocka_unit_test_setup_teardown(test_over_channel, setup_shmem, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
