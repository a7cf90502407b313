/*
 * h5shards.c: several HDF5 files read as one input (see h5shards.h).
 *
 * Local to the calling rank, like h5in.c: each rank expands the pattern
 * or list itself, and h5in_open compares the hash of what it found with
 * rank 0's, so ranks that saw different files refuse to run.
 */
#define _POSIX_C_SOURCE 200809L

#include "h5shards.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "folder.h"

/* Entries of a list grow by doubling. */
struct shard_list {
	h5in_source *s;
	int64_t n, cap;
};

int h5shards_is_multi(const char *file)
{
	struct stat sb;

	if (!file[0] || stat(file, &sb) == 0)
		return 0;
	return file[0] == '@' || strpbrk(file, "*?[") != NULL;
}

static int shard_add(struct shard_list *l, const char *file,
		     const char *dset, const char *where, xj_status *st)
{
	h5in_source *e;

	if (l->n == l->cap) {
		int64_t cap = l->cap ? 2 * l->cap : 16;
		h5in_source *s = realloc(l->s, (size_t)cap * sizeof(*s));

		if (!s)
			return xj_fail(st, XJ_EXIT_RESOURCE, "%s: out of memory "
				       "for %lld shards", where,
				       (long long)cap);
		l->s = s;
		l->cap = cap;
	}
	e = &l->s[l->n++];
	memset(e, 0, sizeof(*e));
	if (strlen(file) >= sizeof(e->file) || strlen(dset) >= sizeof(e->dset))
		return xj_fail(st, XJ_EXIT_INPUT, "%s: shard name '%.64s...' "
			       "too long", where, file);
	strcpy(e->file, file);
	strcpy(e->dset, dset);
	return XJ_OK;
}

static int expand_pattern(const char *pattern, const char *dset,
			  struct shard_list *l, xj_status *st)
{
	glob_t g;
	int rc = glob(pattern, GLOB_ERR, NULL, &g);

	if (rc == GLOB_NOMATCH)
		xj_fail(st, XJ_EXIT_INPUT, "pattern %s matches no file", pattern);
	else if (rc != 0)
		xj_fail(st, rc == GLOB_NOSPACE ? XJ_EXIT_RESOURCE :
			XJ_EXIT_INPUT, "pattern %s: cannot list its folder%s",
			pattern, rc == GLOB_NOSPACE ? " (out of memory)" : "");
	for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
		if (shard_add(l, g.gl_pathv[i], dset, pattern, st))
			break;
	if (rc != GLOB_NOMATCH)
		globfree(&g);
	return st->code;
}

/* A list line: "FILE[:DATASET]", relative to the list's folder. */
static int list_line(const char *list, const char *folder, char *line,
		     int64_t lineno, struct shard_list *l, xj_status *st)
{
	char file[XJ_PATH_MAX], dset[XJ_NAME_MAX], path[XJ_PATH_MAX];
	size_t len = strlen(line);

	while (len && strchr(" \t\r\n", line[len - 1]))
		line[--len] = '\0';
	line += strspn(line, " \t");
	if (!line[0] || line[0] == '#')
		return XJ_OK;
	if (line[0] != '/' && strcmp(folder, ".")) {
		if (snprintf(path, sizeof(path), "%s/%s", folder, line) >=
		    (int)sizeof(path))
			return xj_fail(st, XJ_EXIT_INPUT, "%s:%lld: name too "
				       "long", list, (long long)lineno);
		line = path;
	}
	if (h5in_parse_spec(line, file, dset, st))
		return xj_wrap(st, "%s:%lld", list, (long long)lineno);
	if (h5shards_is_multi(file))
		return xj_fail(st, XJ_EXIT_INPUT, "%s:%lld: %s: a list names "
			       "files, not patterns or lists (or the file does "
			       "not exist)", list, (long long)lineno, file);
	return shard_add(l, file, dset, list, st);
}

static int expand_list(const char *list, struct shard_list *l,
		       xj_status *st)
{
	char folder[XJ_PATH_MAX], *line = NULL;
	size_t cap = 0;
	int64_t lineno = 0;
	FILE *f = fopen(list, "r");

	if (!f)
		return xj_fail(st, XJ_EXIT_INPUT, "list %s: cannot open: %s",
			       list, strerror(errno));
	folder_of(list, folder, sizeof(folder));
	while (getline(&line, &cap, f) >= 0)
		if (list_line(list, folder, line, ++lineno, l, st))
			break;
	if (!st->code && ferror(f))
		xj_fail(st, XJ_EXIT_INPUT, "list %s: read error", list);
	if (!st->code && l->n == 0)
		xj_fail(st, XJ_EXIT_INPUT, "list %s names no file", list);
	free(line);
	fclose(f);
	return st->code;
}

/* FNV-1a over the shards' names and shapes. */
static uint64_t shards_hash(const h5in_source *s, int64_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (int64_t i = 0; i < n; i++) {
		int64_t shape[2] = { s[i].rows, s[i].cols };
		const unsigned char *parts[3] = {
			(const unsigned char *)s[i].file,
			(const unsigned char *)s[i].dset,
			(const unsigned char *)shape };
		size_t lens[3] = { strlen(s[i].file) + 1,
				   strlen(s[i].dset) + 1, sizeof(shape) };

		for (int p = 0; p < 3; p++)
			for (size_t j = 0; j < lens[p]; j++)
				h = (h ^ parts[p][j]) * 0x100000001b3ULL;
	}
	return h;
}

/* "float16+float32" for mixed shards; "mixed" when that does not fit. */
static void add_type(char *desc, size_t size, const char *type)
{
	size_t len = strlen(desc), tl = strlen(type);
	const char *p = desc;

	while ((p = strstr(p, type))) {
		if ((p == desc || p[-1] == '+') && (p[tl] == '\0' ||
						    p[tl] == '+'))
			return;
		p += tl;
	}
	if (len + tl + 2 > size || !strcmp(desc, "mixed"))
		snprintf(desc, size, "mixed");
	else
		snprintf(desc + len, size - len, "%s%s", len ? "+" : "", type);
}

/* Probe shard i and place it after the ones before. */
static int probe_one(h5in_source *s, int64_t i, const char *default_dset,
		     const char *spec, h5in_info *info, int *wide_float,
		     xj_status *st)
{
	h5in_info one;
	int bits = 0;

	if (h5in_probe(s->file, s->dset, default_dset, &one, st))
		return xj_wrap(st, "%s: shard %lld", spec, (long long)i);
	snprintf(s->dset, sizeof(s->dset), "%s", one.dset);
	s->row0 = info->rows;
	s->rows = one.rows;
	s->col0 = 0;
	s->cols = one.cols;
	if (i > 0 && one.cols != info->cols)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: shard %s:%s has %lld "
			       "columns, shard %s:%s has %lld", spec, one.file,
			       one.dset, (long long)one.cols, s[-i].file,
			       s[-i].dset, (long long)info->cols);
	if (one.rows > INT64_MAX - info->rows)
		return xj_fail(st, XJ_EXIT_INPUT, "%s: more rows than %lld",
			       spec, (long long)INT64_MAX);
	info->rows += one.rows;
	info->cols = one.cols;
	add_type(info->type_desc, sizeof(info->type_desc), one.type_desc);
	sscanf(one.type_desc, "float%d", &bits);
	*wide_float |= bits > 32;
	return XJ_OK;
}

int h5shards_probe(const char *file, const char *dset,
		   const char *default_dset, h5in_info *info,
		   h5in_source **list, int64_t *count, int *wide_float,
		   xj_status *st)
{
	struct shard_list l = { 0 };

	xj_ok(st);
	memset(info, 0, sizeof(*info));
	*wide_float = 0;
	if (strlen(file) >= sizeof(info->file) ||
	    strlen(dset) + 1 >= sizeof(info->dset))
		return xj_fail(st, XJ_EXIT_INPUT, "%.64s...: name too long",
			       file);
	snprintf(info->file, sizeof(info->file), "%s", file);
	snprintf(info->dset, sizeof(info->dset), "%s%s",
		 dset[0] && dset[0] != '/' ? "/" : "", dset);
	snprintf(info->shard_default, sizeof(info->shard_default), "%s",
		 default_dset ? default_dset : "");
	if (file[0] == '@' ? expand_list(file + 1, &l, st) :
	    expand_pattern(file, dset, &l, st))
		goto out;
	for (int64_t i = 0; i < l.n; i++)
		if (probe_one(&l.s[i], i, info->shard_default, file, info,
			      wide_float, st))
			goto out;
	info->shards = l.n;
	info->shards_hash = shards_hash(l.s, l.n);
	if (list) {
		*list = l.s;
		*count = l.n;
		l.s = NULL;
	}
out:
	free(l.s);
	return st->code;
}
