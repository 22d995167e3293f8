/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The command line (prefix vopt_): the Rust virtiofsd's long option names, the
 * legacy `-o key[=value],...` forms, and vufsd's own additions, all parsed into
 * struct vufsd_config. Pure: no exit(), no logging, so unit tests can drive it
 * (except --help, which GOption prints and exits on by itself).
 */
#ifndef VUFSD_OPTIONS_H
#define VUFSD_OPTIONS_H

#include <stdint.h>

#include "config.h"

enum vopt_action {
    VOPT_RUN,
    VOPT_PRINT_CAPABILITIES,
    VOPT_VERSION,
};

/* Fills cfg with the defaults (everything a plain `--shared-dir X --socket-path Y` gets). */
void vopt_config_init(struct vufsd_config *cfg);
/* Frees the strings the parser allocated; cfg may be parsed into again after init. */
void vopt_config_clear(struct vufsd_config *cfg);

/*
 * Parses argv into cfg (which vopt_config_init() prepared) and validates the
 * combination. Returns 0 and sets *action, or -EINVAL with *errmsg (g_free it)
 * saying what is wrong. argv is not modified.
 */
int vopt_parse(int argc, char **argv, struct vufsd_config *cfg, enum vopt_action *action,
               char **errmsg);

/* One legacy option string ("source=/x,cache=none,no_xattr"); `\,` escapes a comma. */
int vopt_parse_legacy(const char *opts, struct vufsd_config *cfg, char **errmsg);

/* "512M", "2G", "4096", "64k": bytes; -EINVAL on junk, -ERANGE on overflow. */
int vopt_parse_size(const char *s, uint64_t *out);

/* The first option this build cannot honour ("--dax-window"), or NULL. */
const char *vopt_unsupported(const struct vufsd_config *cfg);

/* The JSON --print-capabilities prints (g_free it). */
char *vopt_capabilities_json(void);

#endif
