/*
 * h5shards.h: several HDF5 files read as one input (private to io/).
 *
 * defines: h5shards_is_multi, h5shards_probe
 *
 * Embeddings are often written as many shard files. An input may name
 * them all at once:
 *   'shards/emb-*.h5:/vectors'   a glob(3) pattern, in glob's sorted order
 *   @list.txt                    a text file, one FILE[:DATASET] a line
 *                                (blank lines and '#' lines skipped;
 *                                relative names are relative to the list)
 * The input's rows are the shards' rows in that order. Every shard is
 * probed as a plain input (h5in_probe: present, numeric, stored) and must
 * have the width of the first; a mismatch names the shard.
 *
 * Why not a virtual dataset built in memory over the shards: HDF5 opens a
 * VDS's sources with the VDS file's access properties, so sources of an
 * in-memory (core driver) VDS are read whole into memory on first access
 * (docs/design.md, "Sharded inputs"). h5in reads the shards itself, one
 * open at a time.
 */
#ifndef XJ_H5SHARDS_H
#define XJ_H5SHARDS_H

#include <stdint.h>

#include "h5in.h"

/* Is this FILE part of a spec a pattern or a list (and not an existing
 * file whose name merely holds '*' or starts with '@')? */
int h5shards_is_multi(const char *file);

/* Expand and probe every shard; fill info (rows summed, width, types,
 * shards, shards_hash; file and dset as given). default_dset is the name
 * tried in a shard when none is given ("test", "train" or ""). When list
 * is not NULL it receives the shards (malloc'd, *count entries, dset
 * resolved, row0/rows placed). *wide_float: some shard holds floats wider
 * than 32 bits. */
int h5shards_probe(const char *file, const char *dset,
		   const char *default_dset, h5in_info *info,
		   h5in_source **list, int64_t *count, int *wide_float,
		   xj_status *st);

#endif
