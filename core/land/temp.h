/* SPDX-License-Identifier: MIT */
/*
 * Temp patterns: a path is temporary when any component matches one of the
 * globs (fnmatch(3), a leading dot matched by "*" too). The default list covers rsync, gio, vim,
 * emacs, browsers, WinSCP, Hadoop clients and sed -i. A struct sl_temp is
 * new from sl_temp_new() and freed with sl_temp_free().
 */
#ifndef SLUICE_CORE_TEMP_H
#define SLUICE_CORE_TEMP_H

#include <stdbool.h>

struct sl_temp;

/* The default list as a -o temp= string. */
/* sed -i's scratch file is "sed" and exactly six of [A-Za-z0-9] (mkostemp) */
#define SL_TEMP_SED "sed[A-Za-z0-9][A-Za-z0-9][A-Za-z0-9][A-Za-z0-9][A-Za-z0-9][A-Za-z0-9]"
#define SL_TEMP_DEFAULT \
	".*:*.tmp:*.part:*.partial:*.filepart:*.crdownload:*._COPYING_:*~:#*#:4913:" SL_TEMP_SED

/* Parses "GLOB:GLOB..." (NULL: the default). EINVAL for an empty glob. */
int sl_temp_new(const char *spec, struct sl_temp **out);
void sl_temp_free(struct sl_temp *t);

/* true when one path component (no '/') is temporary. */
bool sl_temp_match(const struct sl_temp *t, const char *name);

#endif
