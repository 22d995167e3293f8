/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The DAX window's frontend side (prefix vdax_): the window manager (dax/) made
 * from --dax-window/--dax-policy, its struct dax_ops speaking BACKEND_SHMEM_MAP /
 * UNMAP (9/10) or, with --dax-protocol legacy, SLAVE_FS_MAP / UNMAP (6/7) on the
 * connected frontend's backend channel, and the statistics thread (SIGUSR1,
 * --stats-file).
 *
 * Threads: the map callbacks run on queue and worker threads only (the message
 * thread never makes a window call: the device clears the window after stopping
 * its queues), each waiting for the frontend's REPLY_ACK. The frontend must
 * therefore answer the backend channel while it waits for its own messages'
 * replies (GET_VRING_BASE waits for in-flight requests, a SETUPMAPPING among
 * them).
 */
#ifndef VUFSD_DAX_BACKEND_H
#define VUFSD_DAX_BACKEND_H

#include "config.h"
#include "dax/dax.h"
#include "device.h"
#include "daemon/passthrough/passthrough.h"

struct vdax;

/*
 * cfg->dax_window > 0. fs is where the window's dax_ops.open reopens a file (a
 * survivor of a split); main hands the window to fs (pt_fs_set_dax). 0 or -errno.
 */
int vdax_new(const struct vufsd_config *cfg, struct pt_fs *fs, struct vdax **out);
/* After the statistics thread stopped and no device is attached. */
void vdax_free(struct vdax *x);
struct dax_window *vdax_window(struct vdax *x);
/* The frontend the callbacks talk to: set after vdev_new, NULL after vdev_free. */
void vdax_attach(struct vdax *x, struct vufsd_dev *dev);

/*
 * The statistics: opens --stats-file's directory now (call before the sandbox:
 * the path is the host's) and keeps it for the thread. 0 or -errno.
 */
int vdax_stats_prepare(struct vdax *x, const char *stats_file);
/*
 * Starts the thread (after the sandbox is in place). Each time sig_fd (an
 * eventfd the SIGUSR1 handler writes) is readable it logs the JSON of
 * dax_stats_json and rewrites the stats file; with a stats file also every
 * second. The file is replaced atomically (a temporary file renamed over it).
 */
int vdax_stats_start(struct vdax *x, int sig_fd);
void vdax_stats_stop(struct vdax *x);

#endif
