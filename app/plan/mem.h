/*
 * mem.h: what this node offers a rank: memory and cores.
 *
 * defines: mem_available_bytes, mem_parse_meminfo, mem_cgroup_limit_bytes,
 *          cpu_affinity_count
 */
#ifndef XJ_MEM_H
#define XJ_MEM_H

#include <stdint.h>

/* MemAvailable from /proc/meminfo, lowered to the cgroup's remaining limit
 * (v2 memory.max - memory.current, or v1 limit - usage) when one is set.
 * Returns 0 when nothing can be read. */
int64_t mem_available_bytes(void);

/* MemAvailable (bytes) from the text of /proc/meminfo, or -1. */
int64_t mem_parse_meminfo(const char *text);

/* Remaining bytes under the cgroup limit, or -1 when unlimited/unknown. */
int64_t mem_cgroup_limit_bytes(void);

/* CPUs in this process's affinity mask (>= 1). */
int cpu_affinity_count(void);

#endif
