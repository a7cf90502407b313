/*
 * fuzz_h5in.c: libFuzzer harness for xjoin's HDF5 input validation, fed
 * with whole files: the input bytes are written to a scratch file and
 * validated as xjoin validates an input (fuzz_h5path.h), three times:
 * as queries (FILE, default dataset "test"), as base (FILE, "train") and
 * as a file with no default (the search for its only 2-D dataset). A
 * dataset that two of these resolve to is read once.
 *
 * Seeds: tests/fuzz/seeds/h5in, small files cut from real data by
 * tests/fuzz/make_seeds.py. libFuzzer mutates their bytes, so this mostly
 * stresses HDF5's own parser on malformed files plus our handling of what
 * it lets through; fuzz_h5gen.c builds valid files of every shape instead.
 *
 * libhdf5 is not instrumented, so coverage counts only xjoin's code and
 * grows slowly here: most mutants fail in H5Fopen, the same way.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hdf5.h>

#include "fuzz_h5path.h"
#include "fuzz_util.h"

static struct fuzz_file fuzz_h5;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const defaults[] = { "test", "train", "" };
	char seen[3][XJ_NAME_MAX];
	int nseen = 0;

	if (fuzz_h5.path[0] == '\0') {
		H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
		fuzz_file_open(&fuzz_h5, ".h5");
	}
	fuzz_file_write(&fuzz_h5, data, size);
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		struct fuzz_h5_result r;
		int again = 0;

		fuzz_h5_probe(fuzz_h5.path, defaults[i], &r);
		if (r.probe)
			continue;
		for (int j = 0; j < nseen; j++)
			again |= strcmp(seen[j], r.info.dset) == 0;
		if (again)
			continue;
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", r.info.dset);
		/* three slabs: their edges fall inside chunks */
		fuzz_h5_read(&r, (r.info.rows + 2) / 3, NULL, NULL);
	}
	return 0;
}
