/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The statistics dump: one JSON object per call, from a snapshot taken under the
 * lock and written without it (the daemon may write to a slow file).
 *
 * {"window": {"size":..,"range_size":..,"nslots":..,"slots_used":..,"occupancy":..,
 *             "extents":..,"bytes_mapped":..,"maps":..,"upgrades":..,"noops":..,
 *             "unmaps":..,"remaps":..,"ghost_hits":..,"ghost_entries":..,
 *             "map_errors":..,"unmap_errors":..,"recent_maps":..,"recent_ghost_hits":..,
 *             "admitted_bytes":..,"inodes":..,"policy":"auto",
 *             "map_latency_ns": {"count":..,"sum":..,"max":..,"avg":..},
 *             "store": {"maps":..,"bytes_mapped":..,"fill_bytes":..,"writebacks":..,
 *                       "writeback_bytes":..,"writeback_runs":..,"writeback_errors":..,
 *                       "merges":..,"merged_pages":..,"merge_errors":..,
 *                       "host_changes":..},
 *             "direct": {"maps":..,"bytes_mapped":..}, "prealloc_errors":..},
 *  "inodes": [{"key":..,"extents":..,"bytes_mapped":..,"maps":..,"upgrades":..,
 *              "unmaps":..,"ghost_hits":..,"recent_maps":..,"recent_ghost_hits":..,
 *              "admitted_bytes":..,"store_extents":..,"writeback_bytes":..,
 *              "writeback_errors":..,"host_changes":..,"recent_host_changes":..,
 *              "dax":true,"revoked":false}, ...]}
 * Integers are unsigned decimal; occupancy is slots_used / nslots.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "dax_i.h"

static const char *jbool(bool b)
{
    return b ? "true" : "false";
}

int dax_stats_json(struct dax_window *w, FILE *f)
{
    struct dax_window_stats s;
    _cleanup_free_ struct dax_inode_stats *ino = NULL;
    size_t n;
    int r = dax_stats_snapshot(w, &s, &ino, &n);

    if (r < 0)
        return r;
    fprintf(f,
            "{\"window\":{\"size\":%" PRIu64 ",\"range_size\":%" PRIu64 ",\"nslots\":%" PRIu64
            ",\"slots_used\":%" PRIu64 ",\"occupancy\":%.4f,\"extents\":%" PRIu64
            ",\"bytes_mapped\":%" PRIu64 ",\"maps\":%" PRIu64 ",\"upgrades\":%" PRIu64
            ",\"noops\":%" PRIu64 ",\"unmaps\":%" PRIu64 ",\"remaps\":%" PRIu64
            ",\"ghost_hits\":%" PRIu64 ",\"ghost_entries\":%" PRIu64
            ",\"map_errors\":%" PRIu64 ",\"unmap_errors\":%" PRIu64 ",\"recent_maps\":%" PRIu64
            ",\"recent_ghost_hits\":%" PRIu64 ",\"admitted_bytes\":%" PRIu64
            ",\"inodes\":%" PRIu64 ",\"policy\":\"%s\",\"map_latency_ns\":{\"count\":%" PRIu64
            ",\"sum\":%" PRIu64 ",\"max\":%" PRIu64 ",\"avg\":%" PRIu64 "},",
            s.window_size, DAX_RANGE_SIZE, s.nslots, s.slots_used,
            s.nslots ? (double)s.slots_used / (double)s.nslots : 0.0, s.extents,
            s.bytes_mapped, s.maps, s.upgrades, s.noops, s.unmaps, s.remaps,
            s.ghost_hits, s.ghost_entries, s.map_errors, s.unmap_errors, s.recent_maps,
            s.recent_ghost_hits, s.admitted_bytes, s.inodes, dax_policy_name(s.policy),
            s.map_lat_count, s.map_lat_sum_ns, s.map_lat_max_ns,
            s.map_lat_count ? s.map_lat_sum_ns / s.map_lat_count : 0);
    fprintf(f,
            "\"store\":{\"maps\":%" PRIu64 ",\"bytes_mapped\":%" PRIu64 ",\"fill_bytes\":%" PRIu64
            ",\"writebacks\":%" PRIu64 ",\"writeback_bytes\":%" PRIu64
            ",\"writeback_runs\":%" PRIu64 ",\"writeback_errors\":%" PRIu64
            ",\"merges\":%" PRIu64 ",\"merged_pages\":%" PRIu64 ",\"merge_errors\":%" PRIu64
            ",\"host_changes\":%" PRIu64 "},\"direct\":{\"maps\":%" PRIu64
            ",\"bytes_mapped\":%" PRIu64 "},\"prealloc_errors\":%" PRIu64 "},\"inodes\":[",
            s.store_maps, s.store_bytes_mapped, s.fill_bytes, s.writebacks, s.writeback_bytes,
            s.writeback_runs, s.writeback_errors, s.merges, s.merged_pages, s.merge_errors,
            s.host_changes, s.direct_maps, s.bytes_mapped - s.store_bytes_mapped,
            s.prealloc_errors);
    for (size_t i = 0; i < n; i++) {
        const struct dax_inode_stats *x = &ino[i];

        fprintf(f,
                "%s{\"key\":%" PRIu64 ",\"extents\":%" PRIu64 ",\"bytes_mapped\":%" PRIu64
                ",\"maps\":%" PRIu64 ",\"upgrades\":%" PRIu64 ",\"unmaps\":%" PRIu64
                ",\"ghost_hits\":%" PRIu64 ",\"recent_maps\":%" PRIu64
                ",\"recent_ghost_hits\":%" PRIu64 ",\"admitted_bytes\":%" PRIu64
                ",\"store_extents\":%" PRIu64 ",\"writeback_bytes\":%" PRIu64
                ",\"writeback_errors\":%" PRIu64 ",\"host_changes\":%" PRIu64
                ",\"recent_host_changes\":%" PRIu64 ",\"dax\":%s,\"revoked\":%s}",
                i ? "," : "", x->key, x->extents, x->bytes_mapped, x->maps, x->upgrades,
                x->unmaps, x->ghost_hits, x->recent_maps, x->recent_ghost_hits,
                x->admitted_bytes, x->store_extents, x->writeback_bytes, x->writeback_errors,
                x->host_changes, x->recent_host_changes, jbool(x->dax), jbool(x->revoked));
    }
    fputs("]}\n", f);
    return ferror(f) ? -EIO : 0;
}
