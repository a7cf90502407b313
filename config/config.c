/*
 * config.c: INI job files, read with libinih.
 *
 * libinih gives its handler no line number (INI_HANDLER_LINENO is fixed
 * when the library is built, and distribution builds leave it off), so
 * lines reach it through ini_parse_stream() and a reader that counts them:
 * libinih reads one line per reader call, so when the handler runs, the
 * count is the line of its key. The reader also ends the parse at the
 * first error, and refuses lines longer than libinih's line buffer, which
 * libinih would otherwise cut into two lines without a word.
 */
#define _POSIX_C_SOURCE 200809L

#include "config.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <string.h>

struct loader {
	const char *path;
	FILE *file;
	config_setter set;
	void *ctx;
	xj_status *st;
	int line;          /* lines read so far: the one being handled */
	int error_line;    /* first error seen by the handler or reader */
	int read_errno;    /* fgets failed with this */
};

/* After fgets stops short of a newline: did it stop at the end of the
 * file (a last line without '\n') or at the end of the buffer? */
static int at_eof(FILE *f)
{
	int c = getc(f);

	if (c == EOF)
		return 1;
	ungetc(c, f);
	return 0;
}

static char *loader_read(char *buf, int size, void *stream)
{
	struct loader *l = stream;
	long start, end;

	if (l->error_line)
		return NULL;
	start = ftell(l->file);
	errno = 0;
	if (!fgets(buf, size, l->file)) {
		if (ferror(l->file))
			l->read_errno = errno ? errno : EIO;
		return NULL;
	}
	l->line++;
	/* a NUL byte ends the line for libinih and strchr, so a binary file
	 * would read as cut or overlong lines: the bytes fgets consumed
	 * (known where the file has a position) tell */
	end = start >= 0 ? ftell(l->file) : -1;
	if (end >= 0 && (size_t)(end - start) != strlen(buf)) {
		xj_fail(l->st, XJ_EXIT_USAGE, "%s:%d: holds a NUL byte: not "
			"a text job file", l->path, l->line);
		l->error_line = l->line;
		return NULL;
	}
	if (!strchr(buf, '\n') && !at_eof(l->file)) {
		xj_fail(l->st, XJ_EXIT_USAGE,
			"%s:%d: line longer than %d characters", l->path,
			l->line, size - 3);
		l->error_line = l->line;
		return NULL;
	}
	return buf;
}

/* libinih's handler: nonzero to go on. */
static int loader_key(void *user, const char *section, const char *key,
		      const char *value)
{
	struct loader *l = user;

	if (l->error_line)
		return 0;
	if (section[0] != '\0' && strcmp(section, "job") != 0)
		xj_fail(l->st, XJ_EXIT_USAGE,
			"unknown section [%s] (keys go first or under [job])",
			section);
	else if (l->set(l->ctx, key, value ? value : "", l->st) == XJ_OK)
		return 1;
	if (l->st->code == XJ_OK)   /* a setter that forgot its message */
		xj_fail(l->st, XJ_EXIT_USAGE, "bad value for %s", key);
	xj_wrap(l->st, "%s:%d", l->path, l->line);
	l->error_line = l->line;
	return 0;
}

int config_load(const char *path, config_setter set, void *ctx,
		xj_status *st)
{
	struct loader l = { .path = path, .set = set, .ctx = ctx, .st = st };
	int rc;

	xj_ok(st);
	l.file = fopen(path, "r");
	if (!l.file)
		return xj_fail(st, XJ_EXIT_USAGE, "cannot read job file %s: %s",
			       path, strerror(errno));
	rc = ini_parse_stream(loader_read, &l, loader_key, &l);
	fclose(l.file);
	if (l.read_errno) {
		xj_ok(st);
		return xj_fail(st, XJ_EXIT_USAGE, "cannot read job file %s: %s",
			       path, strerror(l.read_errno));
	}
	/* libinih returns the first bad line, a syntax error included; it
	 * goes on past syntax errors, so one may precede the handler's. */
	if (rc > 0 && (!l.error_line || rc < l.error_line)) {
		xj_ok(st);
		return xj_fail(st, XJ_EXIT_USAGE,
			       "%s:%d: expected `key = value`, `[job]` or a comment",
			       path, rc);
	}
	if (l.error_line)
		return st->code;
	if (rc < 0)
		return xj_fail(st, XJ_EXIT_RESOURCE,
			       "%s: out of memory while parsing", path);
	return XJ_OK;
}
