/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Every private header of the passthrough at once, for the files not yet on the ones they use. */
#ifndef VUFSD_PT_I_H
#define VUFSD_PT_I_H

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "passthrough.h"
#include "pt_core_i.h"
#include "pt_cred_i.h"
#include "pt_dax_i.h"
#include "pt_fhandle_i.h"
#include "pt_fs_i.h"
#include "pt_handle_i.h"
#include "pt_idmap_i.h"
#include "pt_inode_i.h"
#include "pt_lock_i.h"
#include "pt_ops_i.h"
#include "pt_secctx_i.h"
#include "pt_slots_i.h"
#include "pt_xattrmap_i.h"
#include "vufs_util.h"

#endif
