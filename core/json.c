/* SPDX-License-Identifier: MIT */
/* sluice.json loading and rendered JSON; the one file that includes jansson. */
#include <errno.h>
#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"

struct sl_config {
	json_t *root;
	const char **names;
	size_t n;
};

static bool valid_query_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return false;
	return true;
}

int sl_config_load(const char *datadir, struct sl_config **out, char *err, size_t errlen)
{
	struct sl_config *c;
	json_error_t jerr;
	char path[4096];
	const char *key;
	json_t *v, *queries;
	FILE *f;

	c = calloc(1, sizeof(*c));
	if (!c)
		return ENOMEM;
	snprintf(path, sizeof(path), "%s/sluice.json", datadir);
	f = fopen(path, "r");
	if (!f) {
		if (errno != ENOENT) {
			int rc = errno;
			snprintf(err, errlen, "cannot read '%s': %s", path, strerror(rc));
			free(c);
			return SL_ECONFIG;
		}
		*out = c;
		return 0;
	}
	c->root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
	fclose(f);
	if (!c->root) {
		snprintf(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
		goto invalid;
	}
	if (!json_is_object(c->root)) {
		snprintf(err, errlen, "%s: expected a JSON object", path);
		goto invalid;
	}
	json_object_foreach(c->root, key, v) {
		if (strcmp(key, "queries")) {
			snprintf(err, errlen, "%s: unknown option", key);
			goto invalid;
		}
	}
	queries = json_object_get(c->root, "queries");
	if (!queries)
		goto done;
	if (!json_is_object(queries)) {
		snprintf(err, errlen, "queries: expected an object");
		goto invalid;
	}
	c->names = calloc(json_object_size(queries) + 1, sizeof(char *));
	if (!c->names) {
		sl_config_free(c);
		return ENOMEM;
	}
	json_object_foreach(queries, key, v) {
		if (!valid_query_name(key)) {
			snprintf(err, errlen, "queries.%s: a query name matches [A-Za-z0-9_-]{1,64}",
				 key);
			goto invalid;
		}
		if (!json_is_object(v)) {
			snprintf(err, errlen, "queries.%s: expected an object", key);
			goto invalid;
		}
		c->names[c->n++] = key;
	}
done:
	*out = c;
	return 0;
invalid:
	sl_config_free(c);
	return SL_ECONFIG;
}

void sl_config_free(struct sl_config *c)
{
	if (!c)
		return;
	json_decref(c->root);
	free(c->names);
	free(c);
}

size_t sl_config_nqueries(const struct sl_config *c)
{
	return c->n;
}

const char *sl_config_query_name(const struct sl_config *c, size_t i)
{
	return i < c->n ? c->names[i] : NULL;
}

int sl_json_landing(const struct sl_land_counters *c, char **out, size_t *len)
{
	json_t *o = json_object(), *refused = json_object();
	char *s;

	if (!o || !refused) {
		json_decref(o);
		json_decref(refused);
		return ENOMEM;
	}
	for (int e = 1; e < SL_ERRNO_MAX; e++) {
		char buf[16];
		const char *name = sl_errno_name(e);
		if (!c->refused[e])
			continue;
		if (!name) {
			snprintf(buf, sizeof(buf), "E%d", e);
			name = buf;
		}
		json_object_set_new(refused, name, json_integer((json_int_t)c->refused[e]));
	}
	json_object_set_new(o, "filesLanded", json_integer((json_int_t)c->files_landed));
	json_object_set_new(o, "bytesLanded", json_integer((json_int_t)c->bytes_landed));
	json_object_set_new(o, "filesInFlight", json_integer((json_int_t)c->in_flight));
	json_object_set_new(o, "refused", refused);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return ENOMEM;
	*len = strlen(s);
	/* a trailing newline, so that `cat` output ends cleanly */
	char *t = realloc(s, *len + 2);
	if (!t) {
		free(s);
		return ENOMEM;
	}
	t[(*len)++] = '\n';
	t[*len] = 0;
	*out = t;
	return 0;
}
