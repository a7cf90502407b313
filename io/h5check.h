/*
 * h5check.h: check macros for HDF5 and MPI calls inside io/ (private).
 *
 * defines: H5_TRY, MPI_TRY, h5check_silence, h5check_class_name
 *
 *	if (H5_TRY(fid = H5Fopen(file, H5F_ACC_RDONLY, fapl), st,
 *		   XJ_EXIT_INPUT, "%s: cannot open", file))
 *		goto out;
 *
 * On a negative return H5_TRY fills st with the code, the caller's text,
 * HDF5's own messages (the API call that failed and the innermost cause,
 * taken from the error stack) and "file:line", and yields the code;
 * otherwise it yields 0. MPI_TRY does the same for an MPI return code,
 * with MPI_Error_string's text. Both must run right after the call: any
 * later HDF5 call clears the error stack.
 *
 * io/h5in.c, io/h5out.c and app/inspect/inspect*.c include this; the helpers
 * are static inline so the header needs no .c file of its own.
 */
#ifndef XJ_H5CHECK_H
#define XJ_H5CHECK_H

#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "../config/status.h"

/* A type class for messages: "integer", "string", ... */
static inline const char *h5check_class_name(H5T_class_t cls)
{
	switch (cls) {
	case H5T_INTEGER: return "integer";
	case H5T_FLOAT: return "float";
	case H5T_TIME: return "time";
	case H5T_STRING: return "string";
	case H5T_BITFIELD: return "bitfield";
	case H5T_OPAQUE: return "opaque";
	case H5T_COMPOUND: return "compound";
	case H5T_REFERENCE: return "reference";
	case H5T_ENUM: return "enum";
	case H5T_VLEN: return "variable-length";
	case H5T_ARRAY: return "array";
	default: return "unknown";
	}
}

#define H5_TRY(call, st, code, ...) \
	((call) < 0 ? h5check_fail((st), (code), __FILE__, __LINE__, \
				   __VA_ARGS__) : 0)

#define MPI_TRY(call, st, code, ...) \
	h5check_mpi((call), (st), (code), __FILE__, __LINE__, __VA_ARGS__)

/* The innermost and outermost entries of the error stack. */
struct h5check_walk {
	unsigned count;
	char outer[256];
	char inner[256];
	hid_t inner_minor;
};

static inline herr_t h5check_entry(unsigned n, const H5E_error2_t *e,
				   void *data)
{
	struct h5check_walk *w = data;
	char *dst = n == 0 ? w->outer : w->inner;

	/* H5E_WALK_DOWNWARD: entry 0 is the API call, the last the cause */
	snprintf(dst, sizeof(w->outer), "%s: %s",
		 e->func_name ? e->func_name : "?", e->desc ? e->desc : "");
	w->inner_minor = e->min_num;
	w->count = n + 1;
	return 0;
}

/* Stop HDF5 from printing its error stack to stderr: the io module
 * reports errors through xj_status instead. Idempotent. */
static inline void h5check_silence(void)
{
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static inline const char *h5check_base(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

__attribute__((format(printf, 5, 6)))
static inline int h5check_fail(xj_status *st, int code, const char *src,
			       int line, const char *fmt, ...)
{
	struct h5check_walk w = { 0 };
	char what[XJ_MSG_MAX / 2], minor[128] = "", lib[600];
	H5E_type_t type;
	va_list ap;

	H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, h5check_entry, &w);
	/* after the walk: H5Eget_msg must not disturb the stack we read */
	if (w.count > 0 && H5Eget_msg(w.inner_minor, &type, minor,
				      sizeof(minor)) < 0)
		minor[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (w.count == 0)
		snprintf(lib, sizeof(lib), "HDF5 call failed");
	else if (w.count == 1)
		snprintf(lib, sizeof(lib), "%s (%s)", w.outer, minor);
	else
		snprintf(lib, sizeof(lib), "%s; %s (%s)", w.outer, w.inner,
			 minor);
	H5Eclear2(H5E_DEFAULT);
	return xj_fail(st, code, "%s: %s [%s:%d]", what, lib,
		       h5check_base(src), line);
}

__attribute__((format(printf, 6, 7)))
static inline int h5check_mpi(int rc, xj_status *st, int code,
			      const char *src, int line, const char *fmt, ...)
{
	char what[XJ_MSG_MAX / 2], text[MPI_MAX_ERROR_STRING];
	int len = 0;
	va_list ap;

	if (rc == MPI_SUCCESS)
		return 0;
	if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
		snprintf(text, sizeof(text), "MPI error %d", rc);
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return xj_fail(st, code, "%s: %s [%s:%d]", what, text,
		       h5check_base(src), line);
}

#endif
