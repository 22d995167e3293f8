/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What serves vhost-user frontends (prefix vconn_): the one owner of the
 * filesystem, the DAX backend and its window, and, while a frontend is
 * connected, its device (with the device's queues) and connection. It creates
 * them, hands each the others it works with (the window to the passthrough,
 * the device and the saved-state parts; the device to the DAX backend), and
 * destroys them, all in connection.c. main.c makes the listener, takes a state
 * to go on from and enters the sandbox; it reaches these objects only through
 * the functions below.
 *
 * Life of a vconn:
 *
 *   vconn_new            (before the sandbox: opens the shared directory,
 *                         --stats-file's and --save-state's directories)
 *   vconn_load_state     (before the sandbox: the filesystem's objects are
 *                         found again by their host paths)
 *   vconn_watch_load     (before the sandbox hides /proc)
 *   ... sandbox ...
 *   vconn_serve          (one frontend at a time until a stop, or until one
 *                         leaves without --reconnect)
 *   vconn_free
 *
 * A frontend's life inside vconn_serve: accepted -> device made and the DAX
 * backend attached to it (vconn_attach) -> served (vu_serve), a saved state
 * written on SIGUSR2, a restart handing everything to the keeper on SIGHUP ->
 * device freed (its queues stopped, in-flight requests completed, the fs
 * reset) and the backend detached (vconn_detach).
 */
#ifndef VUFSD_CONNECTION_H
#define VUFSD_CONNECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "restart.h"

struct vconn;
struct pt_config;
struct pt_fs;

/* The signal eventfds the serving loop and the statistics thread watch (-1: none). */
struct vconn_signals {
    int stop_fd;    /* SIGTERM, SIGINT */
    int restart_fd; /* SIGHUP */
    int save_fd;    /* SIGUSR2, with --save-state */
    int stats_fd;   /* SIGUSR1, with a DAX window */
};

/*
 * The filesystem (ptc), a DAX window when cfg->dax_window, and --save-state's
 * directory. l (main's, outliving every connection) and keeper_chan (-1: no
 * restart) are kept for the saved-state parts and a restart. 0 or -errno
 * (logged); on failure *out is NULL and nothing is left open.
 */
int vconn_new(const struct vufsd_config *cfg, const struct pt_config *ptc, struct vrs_listener *l,
              int keeper_chan, struct vconn **out);

/* The filesystem, for what main does with it before serving (--mount, the
 * file handle check). */
struct pt_fs *vconn_fs(struct vconn *c);

/*
 * A state to go on from: loads its filesystem part now (and with handover its
 * DAX part) and keeps st and fds (the caller's, alive until vconn_serve
 * returns) for the device's part: with handover the frontend that was being
 * served goes on at once (VST_PART_FUSE | VST_PART_VHOST); otherwise the first
 * frontend to connect goes on with the FUSE session (VST_PART_FUSE). 0 or
 * -errno (logged).
 */
int vconn_load_state(struct vconn *c, const struct vst_state *st, struct vst_fds *fds,
                     bool handover);

/* What adaptive polling looks at: the CPUs online and /proc/loadavg (or
 * --poll-loadavg), opened before the sandbox hides them. 0 or -1 (logged). */
int vconn_watch_load(struct vconn *c);

/*
 * Serves frontends after the sandbox is in place: starts the DAX statistics
 * thread, then one frontend at a time until a stop signal, or until one leaves
 * without --reconnect; the window's last stores are written back before it
 * returns. The exit status: 0, or 1 on a failure (logged).
 */
int vconn_serve(struct vconn *c, const struct vconn_signals *sig);

/* After vconn_serve, or instead of it. NULL is ignored. */
void vconn_free(struct vconn *c);

#endif
