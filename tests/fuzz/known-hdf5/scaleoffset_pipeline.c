/*
 * scaleoffset_pipeline.c: HDF5 alone, no xjoin: a chunked dataset written
 * through the HDF5 API with the scale-offset filter after another filter
 * that changes the bytes (deflate on float64 data; n-bit on a 12-bit
 * integer type) overflows the heap when HDF5 reads it back. HDF5 accepts the pipeline
 * when the file is written, so such a file is valid as far as HDF5 says.
 *
 *   cc -g -fsanitize=address scaleoffset_pipeline.c \
 *      $(pkg-config --cflags --libs hdf5-openmpi) -o so
 *   ASAN_OPTIONS=detect_leaks=0 ./so deflate   # heap-buffer-overflow
 *   ASAN_OPTIONS=detect_leaks=0 ./so nbit      # heap-buffer-overflow
 *   ASAN_OPTIONS=detect_leaks=0 ./so first     # scale-offset first, then
 *                                              # deflate: reads fine
 *
 * Seen with Debian 12's HDF5 1.10.8 (libhdf5-openmpi-103-1
 * 1.10.8+repack1-1); the overflow is a memcpy under H5Z_pipeline while
 * H5Dread undoes the filters.
 */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#define ROWS 7
#define COLS 33

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "deflate";
	const char *path = "scaleoffset_pipeline.h5";
	hsize_t dims[2] = { ROWS, COLS }, chunk[2] = { 3, 30 };
	int nbit = strcmp(mode, "nbit") == 0;
	int first = strcmp(mode, "first") == 0;
	H5Z_SO_scale_type_t so = nbit ? H5Z_SO_INT : H5Z_SO_FLOAT_DSCALE;
	double w[ROWS * COLS];
	float r[ROWS * COLS];
	hid_t type, file, space, dcpl, dset;
	herr_t rc;

	for (int i = 0; i < ROWS * COLS; i++)
		w[i] = (double)(i * 7 % 2000 - 1000) / 4;
	type = H5Tcopy(nbit ? H5T_STD_I16LE : H5T_IEEE_F64LE);
	if (nbit) {   /* 12 significant bits at offset 2 */
		H5Tset_precision(type, 12);
		H5Tset_offset(type, 2);
	}
	file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	space = H5Screate_simple(2, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	H5Pset_chunk(dcpl, 2, chunk);
	if (first)
		H5Pset_scaleoffset(dcpl, so, 2);
	if (nbit)
		H5Pset_nbit(dcpl);
	else
		H5Pset_deflate(dcpl, 2);
	if (!first)
		H5Pset_scaleoffset(dcpl, so, nbit ? 0 : 2);
	dset = H5Dcreate2(file, "x", type, space, H5P_DEFAULT, dcpl,
			  H5P_DEFAULT);
	rc = H5Dwrite(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, w);
	printf("%s: write %d\n", mode, (int)rc);
	H5Dclose(dset);
	H5Fclose(file);

	file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	dset = H5Dopen2(file, "x", H5P_DEFAULT);
	fflush(stdout);
	rc = H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r);
	printf("%s: read %d\n", mode, (int)rc);
	H5Dclose(dset);
	H5Fclose(file);
	return 0;
}
