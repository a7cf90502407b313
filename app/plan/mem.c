/* mem.c: node memory and cores, read from /proc and cgroupfs. */
#define _GNU_SOURCE
#include "mem.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t got;

	if (!f)
		return -1;
	got = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[got] = '\0';
	return 0;
}

/* A number from a one-line file; -1 for "max", missing or junk. */
static int64_t read_i64(const char *path)
{
	char buf[64], *end;
	long long v;

	if (read_text(path, buf, sizeof(buf)) || !strncmp(buf, "max", 3))
		return -1;
	v = strtoll(buf, &end, 10);
	if (end == buf || v < 0)
		return -1;
	return v;
}

int64_t mem_parse_meminfo(const char *text)
{
	const char *p = strstr(text, "MemAvailable:");
	long long kib;

	if (!p || sscanf(p, "MemAvailable: %lld kB", &kib) != 1)
		return -1;
	return (int64_t)kib * 1024;
}

int64_t mem_cgroup_limit_bytes(void)
{
	int64_t limit = read_i64("/sys/fs/cgroup/memory.max");
	int64_t used = read_i64("/sys/fs/cgroup/memory.current");

	if (limit < 0) {
		limit = read_i64("/sys/fs/cgroup/memory/memory.limit_in_bytes");
		used = read_i64("/sys/fs/cgroup/memory/memory.usage_in_bytes");
		/* v1 reports "unlimited" as a huge page-rounded number */
		if (limit >= (INT64_C(1) << 60))
			limit = -1;
	}
	if (limit < 0)
		return -1;
	return limit > used && used >= 0 ? limit - used : 0;
}

int64_t mem_available_bytes(void)
{
	char buf[8192];
	int64_t avail = -1, cg;

	if (!read_text("/proc/meminfo", buf, sizeof(buf)))
		avail = mem_parse_meminfo(buf);
	cg = mem_cgroup_limit_bytes();
	if (cg >= 0 && (avail < 0 || cg < avail))
		avail = cg;
	return avail < 0 ? 0 : avail;
}

int cpu_affinity_count(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	n = CPU_COUNT(&set);
	return n > 0 ? n : 1;
}
