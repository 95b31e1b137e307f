/* SPDX-License-Identifier: MIT */
/* The fault-point counter behind SL_FAULT(); built only with -Dfaults=true. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

#if SL_FAULTS
/* The one exception to "no mutable file-scope state" (STYLE §5). */
static atomic_long passes;

void sl_fault_hit(const char *name)
{
	const char *spec = getenv("SLUICE_FAULT");
	const char *colon;
	size_t n;

	if (!spec || !(colon = strchr(spec, ':')))
		return;
	n = (size_t)(colon - spec);
	if (strlen(name) != n || memcmp(name, spec, n))
		return;
	if (atomic_fetch_add(&passes, 1) + 1 == atol(colon + 1))
		_exit(86);
}
#endif
