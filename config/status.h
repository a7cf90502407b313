/*
 * status.h: the one error type every xjoin module returns.
 *
 * defines: xj_status, xj_fail, xj_ok, XJ_EXIT_* codes
 *
 * Library code (io, config, kernels, plan, comm) never exits: it fills an
 * xj_status and returns its code. Only app/ decides to exit, with the code
 * the status carries. The message names the object at fault (file, dataset,
 * option, row) so a batch log explains itself.
 */
#ifndef XJ_STATUS_H
#define XJ_STATUS_H

#include <stdarg.h>

/* Process exit codes, documented in README.md and --help. */
enum {
	XJ_OK = 0,
	XJ_EXIT_INTERNAL = 1,    /* a bug or an unexpected library failure */
	XJ_EXIT_USAGE = 2,       /* bad option, bad config, existing output */
	XJ_EXIT_INPUT = 3,       /* missing/invalid input file or values */
	XJ_EXIT_RESOURCE = 4,    /* memory, disk, output not writable */
	XJ_EXIT_INTERRUPTED = 5, /* stopped by a signal at a chunk boundary */
	XJ_EXIT_LOST = 6,        /* a rank stopped answering (node or link) */
};

#define XJ_MSG_MAX 1024

typedef struct xj_status {
	int code;               /* XJ_OK or an XJ_EXIT_* code */
	char msg[XJ_MSG_MAX];   /* human readable, no trailing newline */
} xj_status;

/* Reset to success. */
void xj_ok(xj_status *st);

/* Fill st with code and a printf-style message; returns code. Usage:
 *     return xj_fail(st, XJ_EXIT_INPUT, "%s: no dataset '%s'", file, name);
 * If st already holds an error, the new message is prefixed to it so the
 * chain reads like a stack trace ("while reading x: dataset y: ..."). */
int xj_fail(xj_status *st, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix context to an existing error; returns st->code. */
int xj_wrap(xj_status *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Name of an exit code ("usage error", ...). */
const char *xj_exit_name(int code);

#endif
