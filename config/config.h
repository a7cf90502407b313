/*
 * config.h: INI job files (parsed with libinih).
 *
 * defines: config_setter, config_load
 *
 * A job file holds `key = value` lines, optionally under a [job] section;
 * keys are the long option names of the command line (see `xjoin --help`),
 * so one table describes both. ';' and '#' start comments. Unknown
 * sections, unknown keys and bad values are errors reported as
 * "FILE:LINE: message".
 */
#ifndef XJ_CONFIG_H
#define XJ_CONFIG_H

#include "status.h"

/* Called for every key; returns XJ_OK or an error in st (the loader adds
 * the file and line). */
typedef int (*config_setter)(void *ctx, const char *key, const char *value,
			     xj_status *st);

/* Parse path, calling set for every key. Returns XJ_OK, XJ_EXIT_USAGE for
 * a bad file, unknown key or bad value, with the message in st. */
int config_load(const char *path, config_setter set, void *ctx,
		xj_status *st);

#endif
