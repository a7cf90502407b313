/* cuda_module.c: dlopen of the CUDA backend (see cuda_module.h). */
#define _GNU_SOURCE
#include "cuda_module.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODULE_NAME "libxjoin_cuda.so"
#define DRIVER_NAME "libcuda.so.1"
#define WHY_MAX 512

static const struct xjc_module *loaded;
static int tried;
static char load_why[WHY_MAX];

#ifdef XJOIN_HAVE_CUDA
/* The binary's folder to the installed libraries' (CMakeLists.txt sets
 * it from the install layout, "../lib" by default): relative, so an
 * installed tree still finds its module after it moved. */
#ifndef XJOIN_BIN_TO_LIB
#define XJOIN_BIN_TO_LIB "../lib"
#endif

/* The module's path: $XJOIN_CUDA_MODULE; else next to libxjoin.so when
 * that holds this code (the Python package, an installed library); else
 * next to the binary (the build tree), or in the installed tree's
 * library folder. */
static int module_path(char *path, size_t size)
{
	const char *env = getenv("XJOIN_CUDA_MODULE");
	char exe[PATH_MAX];
	Dl_info self;
	ssize_t n;
	char *slash;
	int lib = 0;

	if (env && env[0])
		return snprintf(path, size, "%s", env) < (int)size ? 0 : -1;
	if (dladdr((void *)module_path, &self) && self.dli_fname &&
	    strstr(self.dli_fname, "libxjoin.so")) {
		snprintf(exe, sizeof(exe), "%s", self.dli_fname);
		n = (ssize_t)strlen(exe);
		lib = 1;
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	}
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	if (snprintf(path, size, "%s/" MODULE_NAME, exe) >= (int)size)
		return -1;
	if (lib || access(path, F_OK) == 0)
		return 0;
	return snprintf(path, size, "%s/" XJOIN_BIN_TO_LIB "/" MODULE_NAME,
			exe) < (int)size ? 0 : -1;
}

/*
 * The CUDA runtime dlopens the driver library itself and reports its
 * absence only as cudaErrorInsufficientDriver; asking first spares a
 * machine without a driver the module's CUDA runtime and cuBLAS (about
 * 240 MB of mapped pages). The handle stays: the runtime uses it.
 */
static int driver_present(void)
{
	const char *err;

	if (dlopen(DRIVER_NAME, RTLD_LAZY | RTLD_LOCAL))
		return 1;
	err = dlerror();
	snprintf(load_why, sizeof(load_why), "no NVIDIA driver (%s)",
		 err ? err : DRIVER_NAME " not found");
	return 0;
}

/* RTLD_NOW: a missing library or symbol fails here, with its name, not
 * at the first call. The module is never closed once in use. */
static const struct xjc_module *module_open(void)
{
	char path[PATH_MAX + 32];
	const struct xjc_module *m;
	xjc_module_get_fn get;
	void *h;

	if (module_path(path, sizeof(path))) {
		snprintf(load_why, sizeof(load_why), "cannot load the CUDA "
			 "backend (no path for " MODULE_NAME ")");
		return NULL;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(load_why, sizeof(load_why), "cannot load the CUDA "
			 "backend (%s)", dlerror());
		return NULL;
	}
	*(void **)&get = dlsym(h, XJC_MODULE_SYMBOL);
	if (!get) {
		snprintf(load_why, sizeof(load_why), "cannot load the CUDA "
			 "backend (%s)", dlerror());
		dlclose(h);
		return NULL;
	}
	m = get();
	if (m->abi != XJC_MODULE_ABI) {
		snprintf(load_why, sizeof(load_why), "cannot load the CUDA "
			 "backend (%.400s: module ABI %d, this xjoin needs %d)",
			 path, m->abi, XJC_MODULE_ABI);
		dlclose(h);
		return NULL;
	}
	return m;
}
#endif

const struct xjc_module *cuda_module_load(char *why, size_t size)
{
	if (!tried) {
		tried = 1;
#ifdef XJOIN_HAVE_CUDA
		if (driver_present())
			loaded = module_open();
#else
		snprintf(load_why, sizeof(load_why), "built without CUDA");
#endif
	}
	if (!loaded && why && size)
		snprintf(why, size, "%s", load_why);
	return loaded;
}

const struct xjc_module *cuda_module(void)
{
	return loaded;
}
