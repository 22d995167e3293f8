/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The saved state of what the guest holds (prefix vst_): the format, its
 * encoder and its bounds-checked decoder. Private to daemon/; the parts come
 * from each module through its own API (fll_session_save/restore,
 * dax_window_restore_mapping, pt_state_save/load, vdev_state_save/load) and
 * restart.c puts them together.
 *
 * A state is UNTRUSTED input when it is loaded: it may come from a file an
 * operator names, from a migration stream, or be corrupted. Every count,
 * length, index, id and handle in it is checked before use, and a reader
 * refuses the whole state with a sentence saying what was wrong (vst_err)
 * rather than using part of a state it cannot trust.
 *
 * Layout, all integers little-endian, no padding, no alignment:
 *
 *   header, VST_HEADER_SIZE (40) bytes
 *     magic      8   "VUFSDST\0"
 *     version    u32 VST_VERSION; a reader refuses any other
 *     flags      u32 VST_F_*; unknown bits are refused
 *     length     u64 bytes of the whole state, header included
 *     nfds       u32 fds that come with the state (VST_F_FDS only, else 0)
 *     nsections  u32
 *     crc        u32 CRC-32C (Castagnoli) of the bytes after the header
 *     reserved   u32 0
 *   nsections sections, in strictly increasing type order (no repeats):
 *     type       u32 VST_SEC_*; with VST_SEC_OPTIONAL set, a reader that does
 *                    not know the type skips it; any other unknown type is refused
 *     version    u32 the layout version of this section's payload
 *     length     u64 payload bytes that follow; within the state
 *     payload    length bytes, laid out as the section's writer says
 *
 * Nothing may follow the last section. Inside a payload a reader reads fields
 * in order through struct vst_reader, which fails (and stays failed) on the
 * first read past the end; a section whose payload has bytes left over after
 * its reader is done is refused too (vst_reader_done).
 *
 * fds: a state handed from one vufsd process to the next (a restart) carries
 * fds beside it: the vhost-user connection, guest memory, eventfds, the
 * inodes' and handles' fds. Records name them by index into that list
 * (VST_NO_FD: none). A state without fds (a file for --restore-state, a
 * migration) names objects by file handle and path and has VST_F_FDS clear.
 */
#ifndef VUFSD_STATE_H
#define VUFSD_STATE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VST_MAGIC "VUFSDST"  /* + its NUL: 8 bytes */
#define VST_VERSION 1u
#define VST_HEADER_SIZE 40u
/* Largest state read at all: 1 GiB (4M inodes with paths stay well below). */
#define VST_MAX_SIZE (UINT64_C(1) << 30)
/* Most fds a state may come with (every region, eventfd, inode, handle...). */
#define VST_MAX_FDS (1u << 22)

/* Header flags. */
#define VST_F_FDS 0x1u /* records name fds handed over with the state */
#define VST_F_KNOWN VST_F_FDS

/* Section types, in the order they appear. */
#define VST_SEC_OPTIONAL 0x80000000u
enum vst_section {
    VST_SEC_ORIGIN = 1,     /* the vufsd that wrote it (restart.c) */
    VST_SEC_FUSE = 2,       /* the FUSE session: INIT's answer (restart.c, fll) */
    VST_SEC_FS = 3,         /* passthrough: what INIT negotiated, generations, mounts */
    VST_SEC_FS_INODES = 4,  /* passthrough: node ids and what each names */
    VST_SEC_FS_HANDLES = 5, /* passthrough: open files and directories */
    VST_SEC_FS_LOCKS = 6,   /* passthrough: lock owners and the locks held */
    VST_SEC_DAX = 7,        /* the DAX window's mappings (restart.c, dax) */
    VST_SEC_VHOST = 8,      /* the vhost-user device: features, memory, rings (device_state.c) */
    VST_SEC_LISTENER = 9,   /* a restart: the listening socket and pid file (restart.c) */
    VST_SEC_LAST_ = VST_SEC_LISTENER,
};

/* The parts a state may hold (daemon/restart.c: vrs_save/vrs_load). */
enum {
    VST_PART_FUSE = 1u << 0,     /* VST_SEC_FUSE */
    VST_PART_FS = 1u << 1,       /* VST_SEC_FS .. VST_SEC_FS_LOCKS */
    VST_PART_DAX = 1u << 2,      /* VST_SEC_DAX */
    VST_PART_VHOST = 1u << 3,    /* VST_SEC_VHOST (needs fds) */
    VST_PART_LISTENER = 1u << 4, /* VST_SEC_LISTENER (needs fds) */
};

#define VST_NO_FD UINT32_MAX

/* Why a state was refused: one sentence, for the log. */
struct vst_err {
    char msg[256];
};

/* Fills err (if any) and returns ret (a negative errno). */
int vst_fail(struct vst_err *err, int ret, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Writing ------------------------------------------------------------------------ */

struct vst_writer {
    uint8_t *buf;
    size_t len, cap;
    bool oom;          /* an allocation failed: vst_writer_finish says -ENOMEM */
    size_t sec_start;  /* offset of the open section's header, 0 = none */
    uint32_t last_type;
    uint32_t nsections;
};

void vst_writer_init(struct vst_writer *w);
void vst_writer_free(struct vst_writer *w);
void vst_put_u8(struct vst_writer *w, uint8_t v);
void vst_put_u16(struct vst_writer *w, uint16_t v);
void vst_put_u32(struct vst_writer *w, uint32_t v);
void vst_put_u64(struct vst_writer *w, uint64_t v);
void vst_put_bytes(struct vst_writer *w, const void *p, size_t n);
/* Sections must be begun in increasing type order and ended before the next. */
void vst_section_begin(struct vst_writer *w, uint32_t type, uint32_t version);
void vst_section_end(struct vst_writer *w);
/* Writes the header (flags, nfds, length, CRC). 0 or -ENOMEM. The state is
 * w->buf[0 .. w->len). */
int vst_writer_finish(struct vst_writer *w, uint32_t flags, uint32_t nfds);

/* ---- Reading ------------------------------------------------------------------------ */

/* A cursor over one section's payload. A read past the end fails, leaves the
 * output zero and marks the reader bad: later reads fail too. */
struct vst_reader {
    const uint8_t *p;
    size_t left;
    bool bad;
};

bool vst_get_u8(struct vst_reader *r, uint8_t *v);
bool vst_get_u16(struct vst_reader *r, uint16_t *v);
bool vst_get_u32(struct vst_reader *r, uint32_t *v);
bool vst_get_u64(struct vst_reader *r, uint64_t *v);
bool vst_get_bool(struct vst_reader *r, bool *v); /* a byte that must be 0 or 1 */
bool vst_get_bytes(struct vst_reader *r, void *dst, size_t n);
/* Whether the reader consumed its payload exactly and never failed. */
bool vst_reader_done(const struct vst_reader *r);

#define VST_MAX_SECTIONS 32u

/* An opened (header- and section-checked) state; points into the caller's buffer. */
struct vst_state {
    uint32_t flags;
    uint32_t nfds;
    unsigned nsections;
    struct {
        uint32_t type, version;
        const uint8_t *payload;
        size_t len;
    } sec[VST_MAX_SECTIONS];
};

/*
 * Checks the header and the section table of len bytes at buf: magic,
 * version, flags, length == len (at most VST_MAX_SIZE), nfds (0 without
 * VST_F_FDS, at most VST_MAX_FDS), CRC, sections inside the state, in order,
 * none unknown unless optional, nothing after the last. 0 or -EINVAL/-EBADMSG
 * with err saying why.
 */
int vst_open(const void *buf, size_t len, struct vst_state *st, struct vst_err *err);
/* The payload of section type (and its version): true, or false when absent. */
bool vst_section(const struct vst_state *st, uint32_t type, struct vst_reader *r,
                 uint32_t *version);

/* CRC-32C of n bytes, continuing from crc (0 to start). */
uint32_t vst_crc32c(uint32_t crc, const void *p, size_t n);

/* ---- fds that travel with a state ---------------------------------------------------- */

/*
 * Saving: the fds a state names, in index order, borrowed (the writer's owners
 * keep them). Loading: the fds received with the state, owned by the set until
 * a record takes one; vst_fds_free closes every fd never taken, so an fd a
 * hostile or damaged state does not name is not leaked.
 */
struct vst_fds {
    int *fd;
    bool *taken;
    unsigned n, cap;
    bool owned; /* loading: close what is not taken */
};

void vst_fds_init(struct vst_fds *f);
/* A set that owns fds[0..n) (received); -ENOMEM. */
int vst_fds_adopt(struct vst_fds *f, const int *fds, unsigned n);
void vst_fds_free(struct vst_fds *f);
/* Saving: records fd and gives its index. With f NULL (a state without fds)
 * *index is VST_NO_FD. 0 or -ENOMEM, -E2BIG past VST_MAX_FDS. */
int vst_fd_add(struct vst_fds *f, int fd, uint32_t *index);
/* Loading: takes the fd at index (the caller owns it from now on). -EBADF when
 * index is out of range, was taken already, or f is NULL. */
int vst_fd_take(struct vst_fds *f, uint32_t index, int *fd);

#endif
