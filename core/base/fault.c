/* SPDX-License-Identifier: MIT */
/* The fault-point counters behind SL_FAULT(); built only with -Dfaults=true. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "fault.h"

#if SL_FAULTS
/* The one exception to "no mutable file-scope state" (STYLE §5). */
static atomic_long passes, err_passes;

/* Whether spec ("name:N[:...]") names this point; *n gets N. */
static int matches(const char *spec, const char *name, long *n, const char **rest)
{
	const char *colon;
	size_t len;

	if (!spec || !(colon = strchr(spec, ':')))
		return 0;
	len = (size_t)(colon - spec);
	if (strlen(name) != len || memcmp(name, spec, len))
		return 0;
	*n = strtol(colon + 1, (char **)rest, 10);
	return 1;
}

void sl_fault_hit(const char *name)
{
	long n;
	const char *rest;

	if (matches(getenv("SLUICE_FAULT"), name, &n, &rest) &&
	    atomic_fetch_add(&passes, 1) + 1 == n)
		_exit(86);
}

int sl_fault_err(const char *name)
{
	long n;
	const char *rest;

	if (!matches(getenv("SLUICE_FAULT_ERR"), name, &n, &rest) || *rest != ':' ||
	    atomic_fetch_add(&err_passes, 1) + 1 != n)
		return 0;
	rest++;
	for (int e = 1; e < 256; e++) {
		const char *en = sl_errno_name(e);
		if (en && !strcmp(en, rest))
			return e;
	}
	int e = atoi(rest);
	return e > 0 ? e : EIO;
}

size_t sl_fault_size(const char *name, size_t dflt)
{
	long n;
	const char *rest;

	/* "name:N[,name:N...]" */
	for (const char *spec = getenv("SLUICE_FAULT_SIZE"); spec && *spec; spec = rest) {
		if (matches(spec, name, &n, &rest) && n > 0)
			return (size_t)n;
		rest = strchr(spec, ',');
		if (rest)
			rest++;
	}
	return dflt;
}
#endif
