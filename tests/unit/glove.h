/*
 * glove.h: real rows for the kernel tests, from GloVe files.
 *
 * defines: glove_rows
 *
 * The including program is built with XJ_SOURCE_DIR (the checkout) and
 * links xjcore (io/h5in.c).
 */
#ifndef XJ_TEST_GLOVE_H
#define XJ_TEST_GLOVE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "config/status.h"
#include "io/h5in.h"

/*
 * nq query rows (the last rows of /test) and nb base rows (the first rows
 * of /train) of the first file found: $XJ_GLOVE, the 100k GloVe file of a
 * bundle ($XJ_BUNDLE/data) or of the project's shared data, else the demo
 * slice in the tree, whose 8 queries are too few: its queries then come
 * from /train as well. Relative paths too, for a tree that moved (the GPU
 * machine runs from the repository root). 0, or -1 when no file has the
 * rows or reading fails.
 */
static inline int glove_rows(float **q, int64_t nq, float **b, int64_t nb,
			     int64_t *d)
{
	char bundled[XJ_PATH_MAX] = "";
	const char *files[] = {
		getenv("XJ_GLOVE") ? getenv("XJ_GLOVE") : "",
		bundled,
		XJ_SOURCE_DIR "/../shared/data/glove-100d-100k.h5",
		"../shared/data/glove-100d-100k.h5",
		XJ_SOURCE_DIR "/data/glove-demo.h5",
		"data/glove-demo.h5",
	};
	h5in_info tinfo, binfo;
	h5in *h = NULL;
	xj_status st;
	int rc;

	*q = *b = NULL;
	if (getenv("XJ_BUNDLE"))
		snprintf(bundled, sizeof(bundled), "%s/data/glove-100d-100k.h5",
			 getenv("XJ_BUNDLE"));
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		xj_ok(&st);
		if (!files[f][0] ||
		    h5in_probe(files[f], "/train", "train", &binfo, &st))
			continue;
		xj_ok(&st);
		if (h5in_probe(files[f], "/test", "test", &tinfo, &st) ||
		    tinfo.rows < nq)
			tinfo = binfo;
		if (binfo.rows < nq + nb)
			continue;
		printf("\n  GloVe rows from %s", files[f]);
		*d = binfo.cols;
		*q = malloc(sizeof(float) * (size_t)(nq * *d));
		*b = malloc(sizeof(float) * (size_t)(nb * *d));
		if (!*q || !*b || h5in_open(&tinfo, &h, &st))
			return -1;
		rc = h5in_read(h, tinfo.rows - nq, nq, *q, &st);
		h5in_close(h);
		if (rc || h5in_open(&binfo, &h, &st))
			return -1;
		rc = h5in_read(h, 0, nb, *b, &st);
		h5in_close(h);
		return rc ? -1 : 0;
	}
	return -1;
}

#endif
