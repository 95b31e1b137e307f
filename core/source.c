/* SPDX-License-Identifier: MIT */
/* The file source: matching landed files to a query's path. */
#include <fnmatch.h>
#include <string.h>

#include "source.h"

/* A component no query reads: hidden, or a _marker that is no key=value. */
static bool ignored(const char *c, size_t n)
{
	return n == 0 || c[0] == '.' || (c[0] == '_' && !memchr(c, '=', n));
}

static bool is_partition(const char *c, size_t n)
{
	const char *eq = memchr(c, '=', n);
	return eq && eq != c; /* key=value with a non-empty key */
}

bool sl_source_match(const struct sl_path *pattern, const char *relpath)
{
	char comp[SL_CONFIG_COMPONENT_MAX + 1];
	const char *p = relpath;
	size_t i = 0;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		bool last = !slash;

		if (n > SL_CONFIG_COMPONENT_MAX || ignored(p, n))
			return false;
		memcpy(comp, p, n);
		comp[n] = 0;
		if (i < pattern->n) {
			if (fnmatch(pattern->comps[i], comp, FNM_PATHNAME | FNM_PERIOD))
				return false;
			if (last)
				return i + 1 == pattern->n; /* the pattern names the file */
			i++;
		} else if (!last && !is_partition(p, n)) {
			return false; /* below the path only key=value folders */
		} else if (last) {
			return true;
		}
		p = slash + 1;
	}
}
