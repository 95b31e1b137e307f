/* SPDX-License-Identifier: MIT */
/* Matching path components against the temp globs. */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "temp.h"

struct sl_temp {
	char *buf;     /* the spec, its ':' replaced by NULs */
	char **globs;
	size_t n;
};

int sl_temp_new(const char *spec, struct sl_temp **out)
{
	struct sl_temp *t;
	size_t n = 1;

	if (!spec)
		spec = SL_TEMP_DEFAULT;
	for (const char *p = spec; *p; p++)
		n += *p == ':';
	t = calloc(1, sizeof(*t));
	if (!t)
		return ENOMEM;
	t->buf = strdup(spec);
	t->globs = calloc(n, sizeof(char *));
	if (!t->buf || !t->globs) {
		sl_temp_free(t);
		return ENOMEM;
	}
	for (char *p = t->buf, *g = p;; p++) {
		if (*p != ':' && *p)
			continue;
		bool end = !*p;
		*p = 0;
		if (!*g) {
			sl_temp_free(t);
			return EINVAL;
		}
		t->globs[t->n++] = g;
		if (end)
			break;
		g = p + 1;
	}
	*out = t;
	return 0;
}

void sl_temp_free(struct sl_temp *t)
{
	if (!t)
		return;
	free(t->buf);
	free(t->globs);
	free(t);
}

bool sl_temp_match(const struct sl_temp *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++) {
		/* no FNM_PERIOD: "*.tmp" is temporary even when hidden */
		if (fnmatch(t->globs[i], name, 0) == 0)
			return true;
	}
	return false;
}
