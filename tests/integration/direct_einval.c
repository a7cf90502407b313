/*
 * direct_einval.c: an LD_PRELOAD library for the matrix test. pwrite on a
 * descriptor opened with O_DIRECT fails with EINVAL, as on a file system
 * that opens such a file but refuses the transfer (an alignment larger
 * than 4 KiB); every other pwrite goes through. xjoin must then write the
 * chunks through HDF5 (io/h5out.c, direct_refused) and the values must
 * not change.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static int direct(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl != -1 && (fl & O_DIRECT);
}

static ssize_t refuse_or(const char *name, int fd, const void *buf,
			 size_t n, off_t at)
{
	pwrite_fn real;

	if (direct(fd)) {
		errno = EINVAL;
		return -1;
	}
	real = (pwrite_fn)dlsym(RTLD_NEXT, name);
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(fd, buf, n, at);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t at)
{
	return refuse_or("pwrite", fd, buf, n, at);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t at)
{
	return refuse_or("pwrite64", fd, buf, n, at);
}
