#include "status.h"

#include <stdio.h>
#include <string.h>

/* Messages longer than XJ_MSG_MAX are cut on purpose: the head of a chain
 * names the context and matters most. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

void xj_ok(xj_status *st)
{
	st->code = XJ_OK;
	st->msg[0] = '\0';
}

static void prefix_msg(xj_status *st, const char *fmt, va_list ap)
{
	char head[XJ_MSG_MAX], old[XJ_MSG_MAX];

	vsnprintf(head, sizeof(head), fmt, ap);
	if (st->msg[0]) {
		snprintf(old, sizeof(old), "%s", st->msg);
		snprintf(st->msg, sizeof(st->msg), "%s: %s", head, old);
	} else {
		snprintf(st->msg, sizeof(st->msg), "%s", head);
	}
}

int xj_fail(xj_status *st, int code, const char *fmt, ...)
{
	va_list ap;

	if (st->code == XJ_OK)
		st->msg[0] = '\0';
	va_start(ap, fmt);
	prefix_msg(st, fmt, ap);
	va_end(ap);
	st->code = code;
	return code;
}

int xj_wrap(xj_status *st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	prefix_msg(st, fmt, ap);
	va_end(ap);
	return st->code;
}

const char *xj_exit_name(int code)
{
	switch (code) {
	case XJ_OK: return "success";
	case XJ_EXIT_INTERNAL: return "internal error";
	case XJ_EXIT_USAGE: return "usage error";
	case XJ_EXIT_INPUT: return "input error";
	case XJ_EXIT_RESOURCE: return "resource error";
	case XJ_EXIT_INTERRUPTED: return "interrupted";
	case XJ_EXIT_LOST: return "lost a rank";
	}
	return "unknown error";
}
