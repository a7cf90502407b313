/*
 * fuzz_util.h: helpers shared by the fuzz harnesses (header only).
 *
 * defines: fuzz_die, fuzz_file, fuzz_file_open, fuzz_file_write,
 *          fuzz_check_status
 *
 * The code under test reads files by path (config_load, h5in_probe), so
 * each harness keeps one scratch file per process, in /dev/shm when it
 * exists (FUZZ_TMPDIR overrides), rewrites it for every input and removes
 * it at exit. Everything is static: the replay program links all the
 * harnesses into one executable.
 *
 * A harness reports a broken promise of the code under test (a status
 * code the API does not allow, an error without a message, a value the
 * API says cannot come back) with fuzz_die(), which aborts: to libFuzzer
 * and to the replay program that is a crash like any other.
 */
#ifndef XJ_FUZZ_UTIL_H
#define XJ_FUZZ_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "config/status.h"

#define FUZZ_FILES_MAX 4

struct fuzz_file {
	int fd;
	char path[256];
};

static struct fuzz_file *fuzz_files[FUZZ_FILES_MAX];
static int fuzz_nfiles;

__attribute__((format(printf, 1, 2), noreturn))
static inline void fuzz_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz: broken promise: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	abort();
}

static inline void fuzz_files_remove(void)
{
	for (int i = 0; i < fuzz_nfiles; i++)
		unlink(fuzz_files[i]->path);
}

/* Create the scratch file of f, named xj-fuzz-XXXXXX<suffix>. */
static inline void fuzz_file_open(struct fuzz_file *f, const char *suffix)
{
	const char *dir = getenv("FUZZ_TMPDIR");

	if (!dir)
		dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(f->path, sizeof(f->path), "%s/xj-fuzz-XXXXXX%s", dir, suffix);
	f->fd = mkstemps(f->path, (int)strlen(suffix));
	if (f->fd < 0 || fuzz_nfiles == FUZZ_FILES_MAX) {
		perror(f->path);
		exit(1);
	}
	if (fuzz_nfiles == 0)
		atexit(fuzz_files_remove);
	fuzz_files[fuzz_nfiles++] = f;
}

/* Replace the contents of f with data. */
static inline void fuzz_file_write(struct fuzz_file *f, const void *data,
				   size_t size)
{
	const char *p = data;
	size_t done = 0;

	if (ftruncate(f->fd, 0) != 0) {
		perror(f->path);
		exit(1);
	}
	while (done < size) {
		ssize_t n = pwrite(f->fd, p + done, size - done, (off_t)done);

		if (n <= 0) {
			perror(f->path);
			exit(1);
		}
		done += (size_t)n;
	}
}

/* The status contract of every xjoin call: the return value is st->code,
 * one of the codes in allowed (a bit mask of 1 << code), and an error
 * carries a terminated, non-empty message. */
static inline void fuzz_check_status(const char *what, int rc,
				     const xj_status *st, unsigned allowed)
{
	if (rc != st->code)
		fuzz_die("%s returned %d but its status says %d", what, rc,
			 st->code);
	if (rc < 0 || rc > 31 || !(allowed & (1u << rc)))
		fuzz_die("%s: code %d not allowed here: %.*s", what, rc,
			 XJ_MSG_MAX, st->msg);
	if (!memchr(st->msg, '\0', sizeof(st->msg)))
		fuzz_die("%s: message not terminated", what);
	if (rc != XJ_OK && !st->msg[0])
		fuzz_die("%s: error %d without a message", what, rc);
}

#define FUZZ_CODE(c) (1u << (c))

#endif
