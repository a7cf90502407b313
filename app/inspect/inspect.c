/*
 * inspect.c: `xjoin inspect FILE` (see inspect.h): which kind of file a
 * path names, and the entry points; inspect_int.h lists the other parts.
 *
 * What is read, and how much of it:
 *   root attributes  all, by name (H5Aiterate): strings of fixed or
 *                    variable length, numbers as int64 or double
 *   datasets         every one in the file (H5Ovisit): type, shape,
 *                    layout and filters, bytes stored
 *   first rows       --rows N rows: the first 10 pairs (topk) or the
 *                    first 8 values (matrix) of each
 *   row check        every value of /neighbors and /distances, in tiles
 *                    of R rows x W columns holding at most slab_bytes
 *                    (12 bytes per topk pair, 4 per matrix value); a row
 *                    wider than a tile is walked in column pieces (R = 1)
 *                    with its state carried over, so memory stays bounded
 *                    whatever n, k or m
 *
 * Everything is local to the calling process: HDF5 through the sec2
 * driver, read-only. Text goes to the caller's FILE (tests pass an
 * open_memstream); problems end in the caller's xj_status.
 */
#define _GNU_SOURCE
#include "inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "../../io/h5check.h"
#include "../../io/h5out.h"
#include "inspect_int.h"
#include "../run/resume.h"
#include "version.h"

/* ---- an unfinished run: which paths name one -------------------------- */

/* "OUT.h5.partial" or "OUT.h5.progress" into "OUT.h5"; 0 when path
 * names neither. */
static int unfinished_base(const char *path, char *base, size_t size)
{
	static const char *const suffixes[] = { ".partial", ".progress" };
	size_t len = strlen(path);

	for (size_t i = 0; i < 2; i++) {
		size_t sl = strlen(suffixes[i]);

		if (len > sl && len - sl < size &&
		    strcmp(path + len - sl, suffixes[i]) == 0) {
			memcpy(base, path, len - sl);
			base[len - sl] = '\0';
			return 1;
		}
	}
	return 0;
}

/* Is there an OUT.partial or OUT.progress? */
static int unfinished_exists(const char *output)
{
	char partial[XJ_PATH_MAX + 16], progress[XJ_PATH_MAX + 16];

	h5out_partial_path(output, partial, sizeof(partial));
	resume_path(output, progress, sizeof(progress));
	return access(partial, F_OK) == 0 || access(progress, F_OK) == 0;
}

/* ---- other HDF5 files ------------------------------------------------- */

static void other_why(struct insp *in, char *buf, size_t size)
{
	const char *gen = inspect_attr_str(in, "generator");
	const char *cmd = inspect_attr_str(in, "command");
	int64_t seed;

	if (!inspect_attr_find(in, "schema_version"))
		snprintf(buf, size, "no schema_version attribute");
	else if (gen && inspect_attr_i64(in, "seed", &seed))
		snprintf(buf, size, "data written by xjoin gen (%s, seed %"
			 PRId64 ")", gen, seed);
	else if (cmd)
		snprintf(buf, size, "command '%s' is unknown to xjoin %s",
			 cmd, XJOIN_VERSION);
	else
		snprintf(buf, size, "no command attribute");
	inspect_attrs_unmark(in);
}

static int inspect_other(struct insp *in, xj_status *st)
{
	char why[INSPECT_TEXT_MAX + 64];
	struct table t;

	other_why(in, why, sizeof(why));
	if (in->o->json) {
		fputs("{\n  \"file\": ", in->out);
		inspect_json_str(in->out, in->path);
		fputs(",\n  \"kind\": \"not_result\",\n  \"why\": ", in->out);
		inspect_json_str(in->out, why);
		fputs(",\n", in->out);
		inspect_json_attrs(in);
		inspect_json_dsets(in);
		fputs("  \"ok\": true,\n  \"problem\": null\n}\n", in->out);
		return XJ_OK;
	}
	fprintf(in->out, "# %s: not an xjoin result: %s\n", in->path, why);
	if (in->nattr) {
		fprintf(in->out, "\n# root attributes\n");
		inspect_table_init(&t, 2, "attribute", "value", NULL, NULL,
				   NULL);
		inspect_table_raw_attrs(in, &t);
		if (inspect_table_done(in, &t, st))
			return st->code;
	}
	if (inspect_text_dsets(in, st))
		return st->code;
	fprintf(in->out, "# xjoin reads any 2-D numeric dataset of it as "
		"input: -q %s:DATASET\n", in->path);
	return XJ_OK;
}

/* ---- entry points ----------------------------------------------------- */

static int inspect_hdf5(struct insp *in, xj_status *st)
{
	if (inspect_file_open(in, st) || inspect_attrs_read(in, st) ||
	    inspect_dsets_read(in, st))
		return st->code;
	if (inspect_is_result(in))
		return inspect_result(in, st);
	if (inspect_attr_find(in, "schema_version") &&
	    inspect_attr_str(in, "command") &&
	    !strcmp(inspect_attr_str(in, "command"), "range"))
		return inspect_range(in, st);
	return inspect_other(in, st);
}

static void insp_release(struct insp *in)
{
	if (in->nbr_id >= 0)
		H5Dclose(in->nbr_id);
	if (in->dist_id >= 0)
		H5Dclose(in->dist_id);
	if (in->file >= 0)
		H5Fclose(in->file);
	free(in->attr);
	free(in->dset);
}

int inspect_file(const char *path, const inspect_opts *o, FILE *out,
		 xj_status *st)
{
	struct insp in = {
		.path = path, .o = o, .out = out, .file = H5I_INVALID_HID,
		.nbr_id = H5I_INVALID_HID, .dist_id = H5I_INVALID_HID,
	};
	char base[XJ_PATH_MAX];
	int rc;

	xj_ok(st);
	h5check_silence();
	if (unfinished_base(path, base, sizeof(base))) {
		if (unfinished_exists(base))
			return inspect_unfinished(&in, base, st);
		return xj_fail(st, XJ_EXIT_INPUT, "%s: no such file%s%s%s",
			       path, access(base, F_OK) == 0 ? " (" : "",
			       access(base, F_OK) == 0 ? base : "",
			       access(base, F_OK) == 0 ?
			       " is a finished result)" : "");
	}
	if (access(path, F_OK) != 0 && errno == ENOENT) {
		if (unfinished_exists(path))
			return inspect_unfinished(&in, path, st);
		return xj_fail(st, XJ_EXIT_INPUT, "%s: no such file (nor an "
			       "unfinished run's %s.partial or %s.progress)",
			       path, path, path);
	}
	rc = inspect_hdf5(&in, st);
	insp_release(&in);
	fflush(out);
	return rc;
}

int inspect_run(const xj_job *job, const xj_comm *c, xj_status *st)
{
	inspect_opts o = { .rows = job->inspect_rows, .json = job->json };

	xj_ok(st);
	if (c->rank == 0) {
		inspect_file(job->inspect_file, &o, stdout, st);
		fflush(stdout);
	}
	MPI_CHECK(MPI_Bcast(st, sizeof(*st), MPI_BYTE, 0, c->world));
	return st->code;
}
