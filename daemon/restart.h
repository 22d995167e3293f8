/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Saved states put together (prefix vrs_): which parts a state holds, how
 * they are saved and loaded in order, and the two ways a state travels:
 *
 *   - a restart or an upgrade under a running guest (SIGHUP): the device is
 *     quiesced, the whole state (with its fds: the frontend's connection,
 *     guest memory, eventfds, the backend channel, inode and handle fds, the
 *     listening socket and pid file) goes to the keeper as a sealed memfd,
 *     the keeper runs the binary at the daemon's path now, and that process
 *     loads it and serves on: QEMU sees no disconnect;
 *   - a file (--save-state FILE, written on SIGUSR2 and when the daemon stops;
 *     read back with --restore-state FILE): the FUSE session and the
 *     filesystem without fds (objects by path and file handle), for a VMM
 *     that connects again to a new daemon. A migration stream carries the
 *     same parts (VST_PART_FUSE | VST_PART_FS).
 *
 * The format is in state.h; each module saves and checks its own part.
 */
#ifndef VUFSD_RESTART_H
#define VUFSD_RESTART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "state/state.h"

struct vufsd_dev;
struct pt_fs;
struct pt_state_report;
struct dax_window;

/* The environment variable the keeper names the handed-over fds in. */
#define VRS_HANDOVER_ENV "VUFSD_HANDOVER_FDS"
/* How long the daemon waits for the keeper's answer to a handover. */
#define VRS_HANDOVER_TIMEOUT_MS 10000

/* The listening side: socket, pid file, and how to remove both at exit. */
struct vrs_listener {
    int fd;
    int dir_fd;      /* directory of --socket-path, kept across pivot_root for cleanup */
    char *sock_name; /* basename of the socket */
    char *pid_name;  /* basename of the pid file */
    int pid_fd;      /* locked with flock for the daemon's lifetime */
    pid_t pid;       /* what the pid file says: the process an operator signals */
    bool bound;      /* we created the socket file (so we remove it) */
};

/* What a state is saved from or loaded into; absent parts are NULL / -1. */
struct vrs_parts {
    struct vufsd_dev *dev;   /* the connected frontend's device, or NULL */
    int conn_fd;             /* its connection */
    struct pt_fs *fs;
    struct dax_window *dax;  /* NULL without --dax-window */
    struct vrs_listener *listener;
};

/*
 * Saves parts (VST_PART_*) of p into w (begun with vst_writer_init) and
 * finishes it: an ORIGIN section first, then the parts in section order. With
 * fds the records name fds added to it (VST_PART_VHOST and VST_PART_LISTENER
 * need fds); without, none. The device must be quiesced (vdev_quiesce) for
 * FUSE, FS, DAX and VHOST to be consistent. 0 or -errno.
 */
int vrs_save(const struct vrs_parts *p, unsigned parts, struct vst_fds *fds,
             struct vst_writer *w);

/*
 * Loads parts of an opened state into p: FS (into a fresh p->fs) and DAX (into
 * p->dax) before the sandbox is entered; FUSE, VHOST (into a fresh p->dev;
 * *conn_fd gets the frontend's connection) and LISTENER (into p->listener)
 * when asked. A part the state lacks is an error, except DAX (a state from a
 * daemon without a window, or a file: the window starts empty). rep (FS) says
 * what was restored and lost. 0 or -errno with err saying why.
 */
int vrs_load(const struct vrs_parts *p, unsigned parts, const struct vst_state *st,
             struct vst_fds *fds, int *conn_fd, struct pt_state_report *rep,
             struct vst_err *err);

/* The writer of a state, from its ORIGIN section ("vufsd 0.1.0"), for the log. */
void vrs_origin(const struct vst_state *st, char *buf, size_t size);

/*
 * The device's state_save and state_load (vdev_config) for live migration: the
 * FUSE session and the filesystem's parts (VST_PART_FUSE | VST_PART_FS) of
 * dev, without fds. The migration transfer (migration.c) reaches them only
 * through the device's callbacks. 0 or -errno; loading logs why it refuses.
 */
int vrs_migration_save(struct vufsd_dev *dev, uint8_t **buf, size_t *len);
int vrs_migration_load(struct vufsd_dev *dev, const uint8_t *buf, size_t len);

/* A sealed memfd (no write, grow, shrink or further seal) holding the state. */
int vrs_memfd(const struct vst_writer *w);
/* Reads a whole state from fd (at most VST_MAX_SIZE): 0 with *buf (malloc'ed)
 * and *len, or -errno. */
int vrs_read_all(int fd, void **buf, size_t *len);
/* Replaces dir_fd/name with the state, atomically (a temporary file renamed
 * over it after fsync), mode 0600. 0 or -errno. */
int vrs_write_file(int dir_fd, const char *name, const struct vst_writer *w);

/*
 * A restart: quiesces p->dev (if any), saves everything with fds into a sealed
 * memfd and hands it, with every fd it names, to the keeper on chan. 0 when
 * the keeper accepted: the caller must _exit(0) now. Otherwise the device is
 * resumed and -errno says why the restart did not happen.
 */
int vrs_handover(const struct vrs_parts *p, int chan);

/* The state a handover brought this process: 1 with *buf and *len (the memfd
 * read) and fds (the rest, owned), 0 when this process was not started by one. */
int vrs_take_handover(void **buf, size_t *len, struct vst_fds *fds);

#endif
