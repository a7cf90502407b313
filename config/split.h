/*
 * split.h: rows split into balanced parts, the one partition every layer
 * agrees on (the plan's query blocks and base shards, the merge's parts
 * of a query chunk, the generator's slabs).
 *
 * defines: split_block
 */
#ifndef XJ_SPLIT_H
#define XJ_SPLIT_H

#include <stdint.h>

/* Rows [*start, *start + *count) of part i when total rows are split into
 * parts blocks whose sizes differ by at most one (the first ones larger).
 * 0 <= i < parts. */
static inline void split_block(int64_t total, int64_t parts, int64_t i,
			       int64_t *start, int64_t *count)
{
	int64_t base = total / parts, extra = total % parts;

	*start = i * base + (i < extra ? i : extra);
	*count = base + (i < extra ? 1 : 0);
}

#endif
