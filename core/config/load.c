/* SPDX-License-Identifier: MIT */
/*
 * Loading sluice.json with jansson (the config layer's only user of it): a
 * walk that reads the tree and reports the path of a bad field. Every rule
 * lives in config.c.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "err.h"
#include "kafka_conf.h"
#include "sluice-build.h"

#define AGG_NAME_MAX 255 /* longest aggregate output name, in bytes */

/* The walk's position: the dotted path of the field being read, for errors. */
struct walk {
	char path[1024];
	size_t len;
	char *err;
	size_t errlen;
	const struct sl_config *cfg; /* the queries walked so far (a query source's upstream) */
};

static size_t push(struct walk *w, const char *fmt, const char *s)
{
	size_t old = w->len;
	int n = snprintf(w->path + w->len, sizeof(w->path) - w->len, fmt, s);

	if (n > 0)
		w->len =
		    w->len + (size_t)n < sizeof(w->path) ? w->len + (size_t)n : sizeof(w->path) - 1;
	return old;
}

static size_t push_key(struct walk *w, const char *key)
{
	return push(w, w->len ? ".%s" : "%s", key);
}

static size_t push_index(struct walk *w, size_t i)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%zu", i);
	return push(w, "[%s]", buf);
}

static void pop(struct walk *w, size_t old)
{
	w->len = old;
	w->path[old] = 0;
}

/* Writes "<path>: <message>" and returns SL_ECONFIG. */
__attribute__((format(printf, 2, 3))) static int wfail(struct walk *w, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!w->err || !w->errlen)
		return SL_ECONFIG;
	n = snprintf(w->err, w->errlen, "%s: ", w->path);
	if (n >= 0 && (size_t)n < w->errlen) {
		va_start(ap, fmt);
		vsnprintf(w->err + n, w->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return SL_ECONFIG;
}

/* Prefixes a helper's message (in msg) with the path; passes other codes through. */
static int wcheck(struct walk *w, int rc, const char *msg)
{
	return rc == SL_ECONFIG ? wfail(w, "%s", msg) : rc;
}

/* Describes j as an option value; buf holds the text of numbers. */
static void to_value(const json_t *j, struct sl_config_value *v, char *buf, size_t len)
{
	int prec, exp;

	*v = (struct sl_config_value){.kind = SL_CONFIG_V_OTHER, .str = buf};
	switch (json_typeof(j)) {
	case JSON_STRING:
		v->kind = SL_CONFIG_V_STRING;
		v->str = json_string_value(j);
		break;
	case JSON_INTEGER:
		v->kind = SL_CONFIG_V_INT;
		v->i = json_integer_value(j);
		snprintf(buf, len, "%lld", (long long)v->i);
		break;
	case JSON_REAL:
		/*
		 * The shortest text that reads back, without an exponent below
		 * 1e17, and with ".0" so that 500.0 does not read as 500.
		 */
		for (prec = 1; prec < 17; prec++) {
			snprintf(buf, len, "%.*g", prec, json_real_value(j));
			if (strtod(buf, NULL) == json_real_value(j))
				break;
		}
		exp = strchr(buf, 'e') ? atoi(strchr(buf, 'e') + 1) : 0;
		if (exp >= prec && exp < 17)
			snprintf(buf, len, "%.*g", exp + 1, json_real_value(j));
		if (!strpbrk(buf, ".en")) /* n: inf, nan */
			strncat(buf, ".0", len - strlen(buf) - 1);
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		v->kind = SL_CONFIG_V_BOOL;
		v->b = json_is_true(j);
		v->str = v->b ? "true" : "false";
		break;
	case JSON_NULL:
		v->str = "null";
		break;
	case JSON_OBJECT:
	case JSON_ARRAY:
		v->kind = SL_CONFIG_V_COMPOSITE;
		v->str = json_is_object(j) ? "an object" : "an array";
		break;
	}
}

static int expect_object(struct walk *w, const json_t *j)
{
	char buf[64];
	struct sl_config_value v;

	if (json_is_object(j))
		return 0;
	to_value(j, &v, buf, sizeof(buf));
	return v.kind == SL_CONFIG_V_COMPOSITE ? wfail(w, "expected an object, got %s", v.str)
					       : wfail(w, "expected an object, got '%s'", v.str);
}

/* Refuses keys of obj not in the NULL-terminated list. */
static int check_keys(struct walk *w, json_t *obj, const char *const *known)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v) {
		const char *near = NULL;
		size_t i, old;
		for (i = 0; known[i]; i++) {
			if (!strcmp(key, known[i]))
				break;
			if (!strcasecmp(key, known[i]))
				near = known[i];
		}
		if (known[i])
			continue;
		old = push_key(w, key);
		if (near)
			wfail(w, "unknown option (did you mean '%s'?)", near);
		else
			wfail(w, "unknown option");
		pop(w, old);
		return SL_ECONFIG;
	}
	return 0;
}

/*
 * Each typed reader takes the field's key under the object obj, reads it
 * when present (*found tells), and names the field in errors.
 */
enum kind { K_BOOL, K_POSINT, K_DURATION, K_SIZE, K_STRING };

struct field {
	const char *key;
	enum kind kind;
	void *out;   /* bool, int64_t, int64_t, uint64_t, const char * */
	int64_t max; /* K_POSINT: largest value */
};

static int read_field(struct walk *w, json_t *obj, const struct field *f, bool *found)
{
	json_t *j = json_object_get(obj, f->key);
	struct sl_config_value v;
	char buf[64], msg[512];
	size_t old;
	int rc = 0;

	if (found)
		*found = j != NULL;
	if (!j)
		return 0;
	to_value(j, &v, buf, sizeof(buf));
	switch (f->kind) {
	case K_BOOL:
		rc = sl_config_value_bool(&v, f->out, msg, sizeof(msg));
		break;
	case K_POSINT:
		rc = sl_config_value_posint(&v, f->max, f->out, msg, sizeof(msg));
		break;
	case K_DURATION:
		rc = sl_config_value_duration(&v, f->out, msg, sizeof(msg));
		break;
	case K_SIZE:
		rc = sl_config_value_size(&v, f->out, msg, sizeof(msg));
		break;
	case K_STRING:
		rc = sl_config_value_string(&v, f->out, msg, sizeof(msg));
		break;
	}
	if (rc) {
		old = push_key(w, f->key);
		rc = wcheck(w, rc, msg);
		pop(w, old);
	}
	return rc;
}

/* Reads an enum field (names NULL-terminated; any case) into *out, when present. */
static int read_enum(struct walk *w, json_t *obj, const char *key, const char *const *names,
		     int *out)
{
	json_t *j = json_object_get(obj, key);
	struct sl_config_value v;
	char buf[64], msg[512];
	size_t old;
	int rc;

	if (!j)
		return 0;
	to_value(j, &v, buf, sizeof(buf));
	rc = sl_config_value_enum(&v, names, out, msg, sizeof(msg));
	if (rc) {
		old = push_key(w, key);
		rc = wcheck(w, rc, msg);
		pop(w, old);
	}
	return rc;
}

static int missing(struct walk *w, const char *key)
{
	size_t old = push_key(w, key);
	int rc = wfail(w, "required");

	pop(w, old);
	return rc;
}

/*
 * Reads the array at key into new indexes of schema's columns (*out is
 * new, freed with the query): distinct names, at least one.
 */
static int read_columns(struct walk *w, json_t *obj, const char *key, const struct sl_schema *s,
			size_t **out, size_t *n)
{
	json_t *arr = json_object_get(obj, key), *e;
	size_t old = push_key(w, key), i, *cols = NULL;
	char msg[512];
	int rc = 0;

	if (!json_is_array(arr)) {
		rc = wfail(w, "expected an array of column names");
		goto done;
	}
	if (json_array_size(arr) == 0) {
		rc = wfail(w, "expected at least one column");
		goto done;
	}
	cols = calloc(json_array_size(arr), sizeof(*cols));
	if (!cols) {
		rc = ENOMEM;
		goto done;
	}
	json_array_foreach(arr, i, e) {
		size_t o2 = push_index(w, i);
		if (!json_is_string(e))
			rc = wfail(w, "expected a column name");
		else
			rc = wcheck(w,
				    sl_config_column_ref(s, json_string_value(e), -1, &cols[i], msg,
							 sizeof(msg)),
				    msg);
		for (size_t k = 0; rc == 0 && k < i; k++)
			if (cols[k] == cols[i])
				rc = wfail(w, "duplicate column '%s'", json_string_value(e));
		pop(w, o2);
		if (rc)
			goto done;
	}
	*out = cols;
	*n = i;
	cols = NULL;
done:
	free(cols);
	pop(w, old);
	return rc;
}

/* Reads a column reference that must have type want (-1: any). */
static int read_colref(struct walk *w, json_t *obj, const char *key, const struct sl_schema *s,
		       int want, size_t *out)
{
	const char *name;
	struct field f = {key, K_STRING, &name, 0};
	char msg[512];
	bool found;
	size_t old;
	int rc;

	rc = read_field(w, obj, &f, &found);
	if (rc)
		return rc;
	if (!found)
		return missing(w, key);
	old = push_key(w, key);
	rc = wcheck(w, sl_config_column_ref(s, name, want, out, msg, sizeof(msg)), msg);
	pop(w, old);
	return rc;
}

static const char *const source_keys[] = {"format",
					  "path",
					  "schema",
					  "maxFilesPerTrigger",
					  "maxBytesPerTrigger",
					  "latestFirst",
					  "maxFileAge",
					  "fileHistory",
					  "fileAgeBy",
					  "fileNameOnly",
					  "mode",
					  "cleanSource",
					  "header",
					  "sep",
					  NULL};

/* csv's sep: one ASCII byte other than a quote or a line break, or the two characters \t. */
static int read_sep(struct walk *w, json_t *src, char *out)
{
	const char *s;
	struct field f = {"sep", K_STRING, &s, 0};
	bool found;
	size_t old;
	int rc;

	rc = read_field(w, src, &f, &found);
	if (rc || !found)
		return rc;
	if (!strcmp(s, "\\t"))
		s = "\t";
	if (strlen(s) == 1 && (unsigned char)s[0] < 0x80 && !strchr("\"\r\n", s[0])) {
		*out = s[0];
		return 0;
	}
	old = push_key(w, "sep");
	rc = wfail(w, "expected one ASCII character other than '\"' or a line break, got '%s'", s);
	pop(w, old);
	return rc;
}

/* A non-negative integer up to max, when present. */
static int read_nonneg(struct walk *w, json_t *obj, const char *key, int64_t max, int64_t *out)
{
	json_t *j = json_object_get(obj, key);
	struct field f = {key, K_POSINT, out, max};
	size_t old;
	int rc;

	if (j && json_is_integer(j) && json_integer_value(j) <= 0) {
		if (json_integer_value(j) == 0) {
			*out = 0;
			return 0;
		}
		old = push_key(w, key);
		rc = wfail(w, "expected a non-negative integer, got %lld",
			   (long long)json_integer_value(j));
		pop(w, old);
		return rc;
	}
	if (j && json_is_string(j) && !strcmp(json_string_value(j), "0")) {
		*out = 0;
		return 0;
	}
	return read_field(w, obj, &f, NULL);
}

/*
 * rate and rate-micro-batch (SPARK-NOTES §5): Spark's options, a fixed
 * schema, no path. Spark's "default parallelism" for numPartitions is one
 * partition here, so that the rows' order does not depend on the machine.
 */
static int walk_rate(struct walk *w, json_t *src, struct sl_query_config *q)
{
	static const char *const rate_keys[] = {"format", "rowsPerSecond", "rampUpTime",
						"numPartitions", "pollInterval", NULL};
	static const char *const batch_keys[] = {"format", "rowsPerBatch", "numPartitions",
						 "startTimestamp", "advanceMillisPerBatch",
						 "pollInterval", NULL};
	struct sl_source_config *s = &q->source;
	bool micro = s->format == SL_SOURCE_RATE_MICRO_BATCH;
	const char *fmt = micro ? "rate-micro-batch" : "rate";
	bool found;
	size_t old;
	int rc;

	if (json_object_get(src, "schema")) {
		old = push_key(w, "schema");
		rc = wfail(w, "the %s format has the fixed schema 'timestamp TIMESTAMP, value BIGINT'",
			   fmt);
		pop(w, old);
		return rc;
	}
	if (json_object_get(src, "path")) {
		old = push_key(w, "path");
		rc = wfail(w, "the %s format reads no files", fmt);
		pop(w, old);
		return rc;
	}
	if ((rc = check_keys(w, src, micro ? batch_keys : rate_keys)))
		return rc;
	if ((rc = sl_config_schema_parse("timestamp TIMESTAMP, value BIGINT", &s->schema, NULL, 0)))
		return rc;
	if (!(s->path.text = strdup("")))
		return ENOMEM;
	s->rows_per_second = 1;
	s->advance_ms = 1000;
	s->poll_interval_us = 100000;
	int64_t ramp_us = 0;
	const struct field fields[] = {
	    {"rowsPerSecond", K_POSINT, &s->rows_per_second, INT64_MAX},
	    {"rampUpTime", K_DURATION, &ramp_us, 0},
	    {"numPartitions", K_POSINT, &s->num_partitions, 1 << 16},
	    {"rowsPerBatch", K_POSINT, &s->rows_per_batch, INT64_MAX},
	    {"pollInterval", K_DURATION, &s->poll_interval_us, 0},
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if ((rc = read_field(w, src, &fields[i], i == 3 ? &found : NULL)))
			return rc;
	if ((rc = read_nonneg(w, src, "startTimestamp", INT64_MAX, &s->start_ts_ms)) ||
	    (rc = read_nonneg(w, src, "advanceMillisPerBatch", INT32_MAX, &s->advance_ms)))
		return rc;
	if (micro && !found)
		return missing(w, "rowsPerBatch");
	if (s->poll_interval_us < 1000) {
		old = push_key(w, "pollInterval");
		rc = wfail(w, "expected at least 1ms");
		pop(w, old);
		return rc;
	}
	s->ramp_up_s = ramp_us / 1000000; /* Spark's timeStringAsSec: whole seconds */
	if (!micro && s->ramp_up_s > INT64_MAX / s->rows_per_second) {
		/* Spark's INCORRECT_RAMP_UP_RATE */
		old = push_key(w, "rampUpTime");
		rc = wfail(w, "max offset with %lld rowsPerSecond is %lld, but rampUpTime is %lld s",
			   (long long)s->rows_per_second,
			   (long long)(INT64_MAX / s->rows_per_second), (long long)s->ramp_up_s);
		pop(w, old);
	}
	return rc;
}

/* A copy of schema from into to (empty). 0 or ENOMEM. */
static int schema_copy(struct sl_schema *to, const struct sl_schema *from)
{
	if (!(to->cols = calloc(from->n ? from->n : 1, sizeof(*to->cols))))
		return ENOMEM;
	for (size_t i = 0; i < from->n; i++) {
		to->cols[i] = from->cols[i];
		if (!(to->cols[i].name = strdup(from->cols[i].name))) {
			to->n = i;
			return ENOMEM;
		}
	}
	to->n = from->n;
	return 0;
}

/*
 * query (CONNECTORS §6): another query's committed output rows. The
 * upstream was walked first (walk_root's order): its output columns are
 * this query's schema; it must write them with the json sink (its types
 * survive the round trip) in append or update mode.
 */
static int walk_query_source(struct walk *w, json_t *src, struct sl_query_config *q)
{
	static const char *const keys[] = {"format", "query", NULL};
	struct sl_source_config *s = &q->source;
	const struct sl_query_config *up;
	const char *name;
	struct field f = {"query", K_STRING, &name, 0};
	bool found;
	size_t old;
	int rc;

	if ((rc = check_keys(w, src, keys)))
		return rc;
	if ((rc = read_field(w, src, &f, &found)))
		return rc;
	if (!found)
		return missing(w, "query");
	old = push_key(w, "query");
	up = sl_config_find(w->cfg, name);
	if (!strcmp(name, q->name))
		rc = wfail(w, "a query cannot read its own output");
	else if (!up)
		rc = wfail(w, "no query named '%s' in this file", name);
	else if (up->sink_format != SL_SINK_JSON)
		rc = wfail(w, "query '%s' writes with the %s sink: a query source reads the json "
			   "sink's output (its types survive)",
			   name, sl_config_sink_name(up->sink_format));
	else if (up->output_mode == SL_OUTPUT_COMPLETE)
		rc = wfail(w, "query '%s' has outputMode complete, whose batches replace their rows: "
			   "a query source reads append or update output",
			   name);
	pop(w, old);
	if (rc)
		return rc;
	if (!(s->upstream = strdup(name)) || !(s->path.text = strdup("")))
		return ENOMEM;
	return schema_copy(&s->schema, &up->out);
}

static int read_command(struct walk *w, json_t *obj, char ***argv, size_t *argc);

/*
 * process (CONNECTORS §5): a command, a required schema, the program's
 * options (any JSON object, handed over in init), maxRowsPerTrigger,
 * timeout, pollInterval and mode; no path.
 */
static int walk_process(struct walk *w, json_t *src, struct sl_query_config *q)
{
	static const char *const keys[] = {"format",  "command",     "schema",
					   "options", "maxRowsPerTrigger", "timeout",
					   "pollInterval", "mode", NULL};
	static const char *const modes[] = {"PERMISSIVE", "DROPMALFORMED", "FAILFAST", NULL};
	struct sl_source_config *s = &q->source;
	const char *ddl;
	char msg[512];
	bool found;
	size_t old;
	int v, rc;

	if (json_object_get(src, "path")) {
		old = push_key(w, "path");
		rc = wfail(w, "the process format reads no files");
		pop(w, old);
		return rc;
	}
	if ((rc = check_keys(w, src, keys)))
		return rc;
	if ((rc = read_command(w, src, &s->argv, &s->argc)))
		return rc;
	struct field fschema = {"schema", K_STRING, &ddl, 0};
	if ((rc = read_field(w, src, &fschema, &found)))
		return rc;
	old = push_key(w, "schema");
	if (!found)
		rc = wfail(w, "required for the process format");
	else
		rc = wcheck(w, sl_config_schema_parse(ddl, &s->schema, msg, sizeof(msg)), msg);
	pop(w, old);
	if (rc)
		return rc;
	if (!(s->path.text = strdup("")))
		return ENOMEM;
	json_t *opts = json_object_get(src, "options");
	if (opts) {
		old = push_key(w, "options");
		rc = expect_object(w, opts);
		pop(w, old);
		if (rc)
			return rc;
	}
	s->options_json = opts ? json_dumps(opts, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
	if (!s->options_json)
		return ENOMEM;
	s->timeout_us = 60000000; /* 60 s */
	s->poll_interval_us = 100000;
	const struct field fields[] = {
	    {"maxRowsPerTrigger", K_POSINT, &s->max_rows, INT64_MAX},
	    {"timeout", K_DURATION, &s->timeout_us, 0},
	    {"pollInterval", K_DURATION, &s->poll_interval_us, 0},
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if ((rc = read_field(w, src, &fields[i], NULL)))
			return rc;
	const char *bad = s->timeout_us <= 0		? "timeout"
			  : s->poll_interval_us < 1000 ? "pollInterval"
						       : NULL;
	if (bad) {
		old = push_key(w, bad);
		rc = wfail(w, s->timeout_us <= 0 ? "expected a positive duration"
						 : "expected at least 1ms");
		pop(w, old);
		return rc;
	}
	v = (int)s->mode;
	rc = read_enum(w, src, "mode", modes, &v);
	s->mode = (enum sl_parse_mode)v;
	return rc;
}

/*
 * socket (CONNECTORS §4, Spark's TextSocketSourceProvider): host and port
 * required, includeTimestamp, and sluice's maxSpoolBytes; a fixed schema,
 * no path.
 */
static int walk_socket(struct walk *w, json_t *src, struct sl_query_config *q)
{
	static const char *const keys[] = {"format", "host", "port", "includeTimestamp",
					   "maxSpoolBytes", NULL};
	struct sl_source_config *s = &q->source;
	const char *host;
	bool found;
	size_t old;
	int rc;

	if (json_object_get(src, "schema")) {
		old = push_key(w, "schema");
		rc = wfail(w, "the socket format has the fixed schema 'value STRING' "
			      "('value STRING, timestamp TIMESTAMP' with includeTimestamp)");
		pop(w, old);
		return rc;
	}
	if (json_object_get(src, "path")) {
		old = push_key(w, "path");
		rc = wfail(w, "the socket format reads no files");
		pop(w, old);
		return rc;
	}
	if ((rc = check_keys(w, src, keys)))
		return rc;
	struct field fhost = {"host", K_STRING, &host, 0};
	if ((rc = read_field(w, src, &fhost, &found)))
		return rc;
	if (!found)
		return missing(w, "host");
	if (!host[0] || strlen(host) > 255) {
		old = push_key(w, "host");
		rc = wfail(w, "expected a host name or address, got '%s'", host);
		pop(w, old);
		return rc;
	}
	if (!(s->host = strdup(host)))
		return ENOMEM;
	struct field fport = {"port", K_POSINT, &s->port, 65535};
	if ((rc = read_field(w, src, &fport, &found)))
		return rc;
	if (!found)
		return missing(w, "port");
	s->max_spool_bytes = 1ull << 30;
	const struct field fields[] = {
	    {"includeTimestamp", K_BOOL, &s->include_timestamp, 0},
	    {"maxSpoolBytes", K_SIZE, &s->max_spool_bytes, 0},
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if ((rc = read_field(w, src, &fields[i], NULL)))
			return rc;
	if (!(s->path.text = strdup("")))
		return ENOMEM;
	return sl_config_schema_parse(s->include_timestamp ? "value STRING, timestamp TIMESTAMP"
							   : "value STRING",
				      &s->schema, NULL, 0);
}

/*
 * kafka (CONNECTORS §7): Spark's options, checked by kafka_conf.c; here only
 * the walk: every key but format handed over, and the schema: Spark's fixed
 * one, or with valueFormat json the query's, required.
 */
static int walk_kafka(struct walk *w, json_t *src, struct sl_query_config *q)
{
	static const char *const modes[] = {"PERMISSIVE", "DROPMALFORMED", "FAILFAST", NULL};
	struct sl_source_config *s = &q->source;
	size_t n = 0, old;
	const char *key, *bad = NULL;
	json_t *v;
	char msg[512], (*bufs)[64];
	int rc, mode;

	if (!SL_HAVE_KAFKA) {
		old = push_key(w, "format");
		rc = wfail(w, "sluice was built without librdkafka: the kafka source is not available");
		pop(w, old);
		return rc;
	}
	if (json_object_get(src, "path")) {
		old = push_key(w, "path");
		rc = wfail(w, "the kafka format reads no files");
		pop(w, old);
		return rc;
	}
	struct sl_kafka_opt *opts = calloc(json_object_size(src) + 1, sizeof(*opts));
	char **texts = calloc(json_object_size(src) + 1, sizeof(*texts));
	bufs = calloc(json_object_size(src) + 1, sizeof(*bufs));
	if (!opts || !texts || !bufs) {
		rc = ENOMEM;
		goto done;
	}
	json_object_foreach(src, key, v) {
		if (!strcmp(key, "format") || !strcmp(key, "schema") || !strcmp(key, "mode") ||
		    !strcmp(key, "pollInterval"))
			continue;
		opts[n].key = key;
		to_value(v, &opts[n].v, bufs[n], sizeof(bufs[n]));
		if (opts[n].v.kind == SL_CONFIG_V_COMPOSITE) {
			/* assign and startingOffsets may be written as JSON rather than text */
			if (!(texts[n] = json_dumps(v, JSON_COMPACT))) {
				rc = ENOMEM;
				goto done;
			}
			opts[n].v.str = texts[n];
		}
		n++;
	}
	rc = sl_kafka_config_parse(opts, n, &s->kafka, &bad, msg, sizeof(msg));
	if (rc == SL_ECONFIG) {
		old = bad ? push_key(w, bad) : w->len;
		rc = wfail(w, "%s", msg);
		pop(w, old);
	}
	if (rc)
		goto done;
	const char *ddl = NULL;
	struct field fschema = {"schema", K_STRING, &ddl, 0};
	bool found;
	if ((rc = read_field(w, src, &fschema, &found)))
		goto done;
	old = push_key(w, "schema");
	if (s->kafka->vformat == SL_KAFKA_V_JSON && !found)
		rc = wfail(w, "required with valueFormat json: the columns of the values' JSON");
	else if (s->kafka->vformat != SL_KAFKA_V_JSON && found)
		rc = wfail(w, "the kafka format has a fixed schema (key, value, topic, partition, "
			      "offset, timestamp, timestampType[, headers]): give one only with "
			      "valueFormat json");
	else if (found)
		rc = wcheck(w, sl_config_schema_parse(ddl, &s->schema, msg, sizeof(msg)), msg);
	else
		rc = sl_config_schema_parse(
		    s->kafka->include_headers
			? "key STRING, value STRING, topic STRING, partition INT, offset BIGINT, "
			  "timestamp TIMESTAMP, timestampType INT, headers STRING"
			: "key STRING, value STRING, topic STRING, partition INT, offset BIGINT, "
			  "timestamp TIMESTAMP, timestampType INT",
		    &s->schema, NULL, 0);
	pop(w, old);
	if (rc)
		goto done;
	if (json_object_get(src, "mode") && s->kafka->vformat != SL_KAFKA_V_JSON) {
		old = push_key(w, "mode");
		rc = wfail(w, "only with valueFormat json");
		pop(w, old);
		goto done;
	}
	mode = (int)s->mode;
	if ((rc = read_enum(w, src, "mode", modes, &mode)))
		goto done;
	s->mode = (enum sl_parse_mode)mode;
	s->poll_interval_us = 100000;
	struct field fpoll = {"pollInterval", K_DURATION, &s->poll_interval_us, 0};
	if ((rc = read_field(w, src, &fpoll, NULL)))
		goto done;
	if (s->poll_interval_us < 1000) {
		old = push_key(w, "pollInterval");
		rc = wfail(w, "expected at least 1ms");
		pop(w, old);
		goto done;
	}
	if (!(s->path.text = strdup(""))) {
		rc = ENOMEM;
		goto done;
	}
done:
	for (size_t i = 0; texts && i < n; i++)
		free(texts[i]);
	free(texts);
	free(opts);
	free(bufs);
	return rc;
}

static int walk_source(struct walk *w, json_t *src, struct sl_query_config *q)
{
	static const char *const formats[] = {"json", "csv", "text", "rate", "rate-micro-batch",
					      "query", "process", "socket", "kafka", NULL};
	static const char *const modes[] = {"PERMISSIVE", "DROPMALFORMED", "FAILFAST", NULL};
	static const char *const cleans[] = {"off", "archive", "delete", NULL};
	static const char *const ages[] = {"landed", "mtime", NULL};
	struct sl_source_config *s = &q->source;
	const char *path, *ddl;
	bool has_files, has_bytes, found;
	int fmt = -1, v, rc;
	uint64_t bytes = 0;
	char msg[512];
	size_t old;

	rc = expect_object(w, src);
	if (!rc)
		rc = read_enum(w, src, "format", formats, &fmt);
	if (rc)
		return rc;
	if (fmt < 0)
		return missing(w, "format");
	s->format = (enum sl_source_format)fmt;
	if (s->format == SL_SOURCE_QUERY) {
		if (json_object_get(src, "schema")) {
			old = push_key(w, "schema");
			rc = wfail(w, "a query source takes its upstream's output columns");
			pop(w, old);
			return rc;
		}
		return walk_query_source(w, src, q);
	}
	if (s->format == SL_SOURCE_PROCESS)
		return walk_process(w, src, q);
	if (s->format == SL_SOURCE_SOCKET)
		return walk_socket(w, src, q);
	if (s->format == SL_SOURCE_KAFKA)
		return walk_kafka(w, src, q);
	if (!SL_SOURCE_IS_FILE(s->format))
		return walk_rate(w, src, q);
	if ((rc = check_keys(w, src, source_keys)))
		return rc;

	struct field fpath = {"path", K_STRING, &path, 0};
	rc = read_field(w, src, &fpath, &found);
	if (rc)
		return rc;
	if (!found)
		return missing(w, "path");
	old = push_key(w, "path");
	rc = wcheck(w, sl_config_path_parse(path, &s->path, msg, sizeof(msg)), msg);
	pop(w, old);
	if (rc)
		return rc;

	struct field fschema = {"schema", K_STRING, &ddl, 0};
	rc = read_field(w, src, &fschema, &found);
	if (rc)
		return rc;
	old = push_key(w, "schema");
	if (s->format == SL_SOURCE_TEXT && found)
		rc = wfail(w, "the text format has the fixed schema 'value STRING'");
	else if (s->format == SL_SOURCE_TEXT)
		rc = sl_config_schema_parse("value STRING", &s->schema, NULL, 0);
	else if (!found)
		rc = wfail(w, "required for the %s format", formats[s->format]);
	else
		rc = wcheck(w, sl_config_schema_parse(ddl, &s->schema, msg, sizeof(msg)), msg);
	pop(w, old);
	if (rc)
		return rc;

	if (s->format != SL_SOURCE_CSV) {
		const char *csv_only = json_object_get(src, "header") ? "header"
				       : json_object_get(src, "sep")  ? "sep"
								      : NULL;
		if (csv_only) {
			old = push_key(w, csv_only);
			rc = wfail(w, "only for the csv format");
			pop(w, old);
			return rc;
		}
	}
	has_files = json_object_get(src, "maxFilesPerTrigger") != NULL;
	has_bytes = json_object_get(src, "maxBytesPerTrigger") != NULL;
	if (has_files && has_bytes) {
		old = push_key(w, "maxBytesPerTrigger");
		rc = wfail(w, "cannot be combined with maxFilesPerTrigger: set only one");
		pop(w, old);
		return rc;
	}
	const struct field fields[] = {
	    {"maxFilesPerTrigger", K_POSINT, &s->max_files, INT32_MAX},
	    {"maxBytesPerTrigger", K_SIZE, &bytes, 0},
	    {"latestFirst", K_BOOL, &s->latest_first, 0},
	    {"maxFileAge", K_DURATION, &s->max_file_age_us, 0},
	    {"fileHistory", K_DURATION, &s->file_history_us, 0},
	    {"fileNameOnly", K_BOOL, &s->file_name_only, 0},
	    {"header", K_BOOL, &s->header, 0},
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		rc = read_field(w, src, &fields[i], NULL);
		if (rc)
			return rc;
	}
	s->max_bytes = (int64_t)bytes; /* sizes stop at INT64_MAX */
	v = (int)s->file_age_by;
	rc = read_enum(w, src, "fileAgeBy", ages, &v);
	s->file_age_by = (enum sl_file_age_by)v;
	v = (int)s->mode;
	if (!rc)
		rc = read_enum(w, src, "mode", modes, &v);
	s->mode = (enum sl_parse_mode)v;
	v = (int)s->clean;
	if (!rc)
		rc = read_enum(w, src, "cleanSource", cleans, &v);
	s->clean = (enum sl_clean_source)v;
	if (!rc)
		rc = read_sep(w, src, &s->sep);
	return rc;
}

static int walk_watermark(struct walk *w, json_t *wm, struct sl_query_config *q)
{
	static const char *const keys[] = {"column", "delay", NULL};
	struct field f = {"delay", K_DURATION, &q->wm_delay_us, 0};
	bool found;
	int rc;

	rc = expect_object(w, wm);
	if (!rc)
		rc = check_keys(w, wm, keys);
	if (!rc)
		rc = read_colref(w, wm, "column", &q->source.schema, SL_TYPE_TIMESTAMP, &q->wm_col);
	if (!rc)
		rc = read_field(w, wm, &f, &found);
	if (!rc && !found)
		rc = missing(w, "delay");
	q->has_watermark = rc == 0;
	return rc;
}

static int walk_window(struct walk *w, json_t *win, struct sl_query_config *q)
{
	static const char *const keys[] = {"column", "duration", "slide", NULL};
	struct field fd = {"duration", K_DURATION, &q->win_duration_us, 0};
	struct field fs = {"slide", K_DURATION, &q->win_slide_us, 0};
	bool has_dur, has_slide;
	size_t old;
	int rc;

	rc = expect_object(w, win);
	if (!rc)
		rc = check_keys(w, win, keys);
	if (!rc)
		rc = read_colref(w, win, "column", &q->source.schema, SL_TYPE_TIMESTAMP,
				 &q->win_col);
	if (!rc)
		rc = read_field(w, win, &fd, &has_dur);
	if (!rc && !has_dur)
		rc = missing(w, "duration");
	if (!rc)
		rc = read_field(w, win, &fs, &has_slide);
	if (rc)
		return rc;
	if (q->win_duration_us == 0) {
		old = push_key(w, "duration");
		rc = wfail(w, "must be positive");
		pop(w, old);
		return rc;
	}
	if (!has_slide)
		q->win_slide_us = q->win_duration_us;
	if (q->win_slide_us == 0 || q->win_slide_us > q->win_duration_us) {
		old = push_key(w, "slide");
		rc = wfail(w, q->win_slide_us ? "must not exceed the window duration"
					      : "must be positive");
		pop(w, old);
		return rc;
	}
	q->has_window = true;
	return 0;
}

static int walk_groupby(struct walk *w, json_t *g, struct sl_query_config *q)
{
	static const char *const keys[] = {"window", "columns", NULL};
	json_t *win, *cols;
	size_t old;
	int rc;

	rc = expect_object(w, g);
	if (!rc)
		rc = check_keys(w, g, keys);
	if (rc)
		return rc;
	win = json_object_get(g, "window");
	if (!win && !json_object_get(g, "columns"))
		return wfail(w, "expected a window, columns or both");
	if (win) {
		old = push_key(w, "window");
		rc = walk_window(w, win, q);
		pop(w, old);
		if (rc)
			return rc;
	}
	cols = json_object_get(g, "columns");
	/* with a window, "columns": [] is the same as no columns */
	if (cols && !(win && json_is_array(cols) && json_array_size(cols) == 0)) {
		rc = read_columns(w, g, "columns", &q->source.schema, &q->group, &q->ngroup);
		if (rc)
			return rc;
	}
	q->has_groupby = true;
	return 0;
}

static bool agg_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > AGG_NAME_MAX)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int walk_aggregate(struct walk *w, json_t *a, struct sl_query_config *q)
{
	const char *key;
	char msg[512];
	json_t *e;
	int rc;

	rc = expect_object(w, a);
	if (rc)
		return rc;
	if (json_object_size(a) == 0)
		return wfail(w, "expected at least one aggregate, e.g. {\"n\": \"count(*)\"}");
	q->aggs = calloc(json_object_size(a), sizeof(*q->aggs));
	if (!q->aggs)
		return ENOMEM;
	json_object_foreach(a, key, e) {
		struct sl_aggregate *agg = &q->aggs[q->naggs];
		size_t old = push_key(w, key);
		if (!agg_name_ok(key))
			rc = wfail(w, "an output name is 1 to %d bytes without control characters",
				   AGG_NAME_MAX);
		else if (!json_is_string(e))
			rc = wfail(w, "expected a string such as \"count(*)\" or \"sum(col)\"");
		else
			rc = wcheck(w,
				    sl_config_aggregate_parse(json_string_value(e),
							      &q->source.schema, agg, msg,
							      sizeof(msg)),
				    msg);
		pop(w, old);
		if (rc)
			return rc;
		agg->name = strdup(key);
		if (!agg->name)
			return ENOMEM;
		q->naggs++;
	}
	return 0;
}

/* Refuses the keys of sink that are not options of its format. */
static int refuse_keys(struct walk *w, json_t *sink, const char *const *keys, const char *why)
{
	size_t old;
	int rc;

	for (size_t i = 0; keys[i]; i++) {
		if (!json_object_get(sink, keys[i]))
			continue;
		old = push_key(w, keys[i]);
		rc = wfail(w, "%s", why);
		pop(w, old);
		return rc;
	}
	return 0;
}

/* A command at key of obj (required): an array of non-empty words, the program first. */
static int read_command(struct walk *w, json_t *obj, char ***argv, size_t *argc)
{
	json_t *cmd = json_object_get(obj, "command"), *e;
	size_t i, old;
	int rc;

	if (!cmd)
		return missing(w, "command");
	old = push_key(w, "command");
	if (!json_is_array(cmd) || json_array_size(cmd) == 0) {
		rc = wfail(w, "expected an array of words, the program first");
		pop(w, old);
		return rc;
	}
	*argv = calloc(json_array_size(cmd) + 1, sizeof(**argv));
	if (!*argv) {
		pop(w, old);
		return ENOMEM;
	}
	json_array_foreach(cmd, i, e) {
		if (!json_is_string(e) || !json_string_value(e)[0]) {
			size_t o2 = push_index(w, i);
			rc = wfail(w, "expected a non-empty string");
			pop(w, o2);
			pop(w, old);
			return rc;
		}
		if (!((*argv)[i] = strdup(json_string_value(e)))) {
			pop(w, old);
			return ENOMEM;
		}
		*argc = i + 1;
	}
	pop(w, old);
	return 0;
}

/* exec's command (required, words), input and timeout. */
static int walk_exec(struct walk *w, json_t *sink, struct sl_query_config *q)
{
	static const char *const inputs[] = {"json", "csv", NULL};
	struct field f = {"timeout", K_DURATION, &q->exec_timeout_us, 0};
	size_t old;
	int v = 0, rc;

	if ((rc = read_command(w, sink, &q->exec_argv, &q->exec_argc)))
		return rc;
	if ((rc = read_enum(w, sink, "input", inputs, &v)))
		return rc;
	q->exec_csv = v == 1;
	q->exec_timeout_us = 300000000; /* 5 minutes */
	if ((rc = read_field(w, sink, &f, NULL)))
		return rc;
	if (q->exec_timeout_us <= 0) {
		old = push_key(w, "timeout");
		rc = wfail(w, "expected a positive duration");
		pop(w, old);
	}
	return rc;
}

/*
 * The options that belong to one sink format: console's numRows and
 * truncate, exec's command, input and timeout; the file sinks' options are
 * refused for those two, and theirs for the others.
 */
static int walk_sink_options(struct walk *w, json_t *sink, struct sl_query_config *q)
{
	static const char *const file_only[] = {"compression", "partitionBy", "rowGroupSize",
						NULL};
	static const char *const console_only[] = {"numRows", "truncate", NULL};
	static const char *const exec_only[] = {"command", "input", "timeout", NULL};
	bool console = q->sink_format == SL_SINK_CONSOLE, exec = q->sink_format == SL_SINK_EXEC;
	int rc;

	q->console_rows = 20;
	q->console_truncate = true;
	if ((console || exec) &&
	    (rc = refuse_keys(w, sink, file_only,
			      console ? "not an option of the console sink"
				      : "not an option of the exec sink")))
		return rc;
	if (!console && (rc = refuse_keys(w, sink, console_only, "only for the console format")))
		return rc;
	if (!exec && (rc = refuse_keys(w, sink, exec_only, "only for the exec format")))
		return rc;
	if (exec)
		return walk_exec(w, sink, q);
	if (!console)
		return 0;
	struct field f = {"truncate", K_BOOL, &q->console_truncate, 0};
	if ((rc = read_field(w, sink, &f, NULL)))
		return rc;
	return read_nonneg(w, sink, "numRows", INT32_MAX - 1, &q->console_rows);
}

/* Whether a kafka.* option holds a secret: the name says so, or its value is a reference. */
static bool kafka_secret(const char *name, const char *value)
{
	return strcasestr(name, "password") || strcasestr(name, "secret") ||
	       !strncmp(value, "@env:", 5) || !strncmp(value, "@file:", 6);
}

/*
 * The kafka sink (CONNECTORS §7): Spark's topic and kafka.* pass-through
 * (kafka.bootstrap.servers required; the serializers refused, as Spark),
 * keyColumn and transactional beyond Spark. The columns are checked with
 * the output rows (config.c).
 */
static int walk_kafka_sink(struct walk *w, json_t *sink, struct sl_query_config *q)
{
	static const char *const keys[] = {"format", "topic", "keyColumn", "transactional", NULL};
	static const char *const refused[] = {"kafka.key.serializer", "kafka.value.serializer",
					      "kafka.transactional.id", NULL};
	struct field ft = {"transactional", K_BOOL, &q->kafka_transactional, 0};
	const char *key, *topic = NULL, *kc = NULL;
	char buf[64];
	bool bootstrap = false;
	json_t *v;
	size_t old, n = 0;
	int rc = 0;

	q->kafka_key_col = -1;
#if !SL_HAVE_KAFKA
	old = push_key(w, "format");
	rc = wfail(w, "kafka: this sluice was built without librdkafka (meson -Dkafka=enabled)");
	pop(w, old);
	return rc;
#endif
	q->kafka_conf = calloc(2 * json_object_size(sink) + 1, sizeof(char *));
	if (!q->kafka_conf)
		return ENOMEM;
	json_object_foreach(sink, key, v) {
		struct sl_config_value cv;
		const char *text;
		if (strncmp(key, "kafka.", 6)) {
			for (n = 0; keys[n] && strcmp(keys[n], key); n++)
				;
			if (keys[n])
				continue;
			old = push_key(w, key);
			rc = wfail(w, "not an option of the kafka sink");
			pop(w, old);
			return rc;
		}
		old = push_key(w, key);
		for (n = 0; refused[n] && strcasecmp(refused[n], key); n++)
			;
		to_value(v, &cv, buf, sizeof(buf));
		if (refused[n])
			rc = wfail(w, n < 2 ? "not supported: keys and values are always bytes"
					    : "set by sluice: sluice-<query id>, with transactional");
		else if (!key[6])
			rc = wfail(w, "expected a librdkafka property after 'kafka.'");
		else if (cv.kind == SL_CONFIG_V_COMPOSITE || json_is_null(v))
			rc = wfail(w, "expected a string, number or boolean");
		else if (cv.kind == SL_CONFIG_V_STRING && !cv.str[0])
			rc = wfail(w, "expected a non-empty value");
		pop(w, old);
		if (rc)
			return rc;
		text = cv.str;
		if (!strcmp(key, "kafka.bootstrap.servers"))
			bootstrap = true;
		if (!(q->kafka_conf[2 * q->nkafka_conf] = strdup(key + 6)) ||
		    !(q->kafka_conf[2 * q->nkafka_conf + 1] = strdup(text)))
			return ENOMEM;
		q->nkafka_conf++;
	}
	if (!bootstrap)
		return missing(w, "kafka.bootstrap.servers");
	struct field fs = {"topic", K_STRING, &topic, 0}, fk = {"keyColumn", K_STRING, &kc, 0};
	if ((rc = read_field(w, sink, &ft, NULL)) || (rc = read_field(w, sink, &fs, NULL)) ||
	    (rc = read_field(w, sink, &fk, NULL)))
		return rc;
	if (topic) {
		while (*topic == ' ' || *topic == '\t')
			topic++;
		size_t len = strlen(topic);
		while (len && (topic[len - 1] == ' ' || topic[len - 1] == '\t'))
			len--;
		old = push_key(w, "topic");
		if (!len)
			rc = wfail(w, "expected a topic name");
		else if (!(q->kafka_topic = strndup(topic, len)))
			rc = ENOMEM;
		pop(w, old);
		if (rc)
			return rc;
	}
	if (kc) {
		old = push_key(w, "keyColumn");
		q->kafka_key_col = sl_config_schema_find(&q->out, kc);
		if (q->kafka_key_col < 0)
			rc = wfail(w, "no output column '%s'", kc);
		else if (q->out.cols[q->kafka_key_col].type == SL_TYPE_WINDOW)
			rc = wfail(w, "'%s' is a window: name a column of text, numbers or times", kc);
		pop(w, old);
	}
	return rc;
}

/*
 * sink.retention: {"batches": N} and/or {"age": "<duration>"}, for the file
 * sinks in append or update mode (a complete-mode snapshot is replaced
 * whole anyway).
 */
static int walk_retention(struct walk *w, json_t *r, struct sl_query_config *q)
{
	static const char *const keys[] = {"batches", "age", NULL};
	struct field fb = {"batches", K_POSINT, &q->retention_batches, INT64_MAX};
	struct field fa = {"age", K_DURATION, &q->retention_age_us, 0};
	bool found = false;
	size_t old;
	int rc;

	if (q->sink_format == SL_SINK_CONSOLE || q->sink_format == SL_SINK_EXEC)
		return wfail(w, "only for the file sinks (json, csv, parquet): the %s sink "
				"keeps no parts",
			     q->sink_format == SL_SINK_CONSOLE ? "console" : "exec");
	if (q->output_mode == SL_OUTPUT_COMPLETE)
		return wfail(w, "not with outputMode complete: each batch replaces the parts "
				"already");
	if ((rc = expect_object(w, r)) || (rc = check_keys(w, r, keys)))
		return rc;
	if (!json_object_get(r, "batches") && !json_object_get(r, "age"))
		return wfail(w, "expected \"batches\" or \"age\" (or both)");
	if ((rc = read_field(w, r, &fb, NULL)) || (rc = read_field(w, r, &fa, &found)))
		return rc;
	if (found && q->retention_age_us <= 0) {
		old = push_key(w, "age");
		rc = wfail(w, "expected a positive duration");
		pop(w, old);
	}
	return rc;
}

static int walk_sink(struct walk *w, json_t *sink, struct sl_query_config *q)
{
	static const char *const keys[] = {"format",  "compression", "partitionBy", "rowGroupSize",
					   "numRows", "truncate",    "command",	    "input",
					   "timeout", "retention", NULL};
	static const char *const formats[] = {"json",	 "csv",	  "parquet", "console",
					      "exec",	 "kafka", NULL};
	static const char *const codecs[] = {"none", "zstd", NULL};
	json_t *pb, *e;
	char msg[512];
	size_t i, old;
	int v, rc;

	rc = expect_object(w, sink);
	v = (int)q->sink_format;
	if (!rc)
		rc = read_enum(w, sink, "format", formats, &v);
	q->sink_format = (enum sl_sink_format)v;
	if (!rc && q->sink_format == SL_SINK_KAFKA)
		return walk_kafka_sink(w, sink, q);
	if (!rc)
		rc = check_keys(w, sink, keys);
	/* Parquet compresses its pages: zstd unless told otherwise */
	v = q->sink_format == SL_SINK_PARQUET ? SL_COMPRESSION_ZSTD : (int)q->compression;
	if (!rc)
		rc = read_enum(w, sink, "compression", codecs, &v);
	q->compression = (enum sl_compression)v;
	if (!rc)
		rc = walk_sink_options(w, sink, q);
	if (!rc && json_object_get(sink, "rowGroupSize")) {
		struct field f = {"rowGroupSize", K_SIZE, &q->row_group_bytes, 0};
		if (q->sink_format != SL_SINK_PARQUET) {
			old = push_key(w, "rowGroupSize");
			rc = wfail(w, "only for the parquet format");
			pop(w, old);
		} else if (!(rc = read_field(w, sink, &f, NULL)) && q->row_group_bytes < 4096) {
			old = push_key(w, "rowGroupSize");
			rc = wfail(w, "expected at least 4k");
			pop(w, old);
		}
	}
	if (!rc && json_object_get(sink, "retention")) {
		old = push_key(w, "retention");
		rc = walk_retention(w, json_object_get(sink, "retention"), q);
		pop(w, old);
	}
	pb = json_object_get(sink, "partitionBy");
	if (rc || !pb)
		return rc;
	old = push_key(w, "partitionBy");
	if (!json_is_array(pb))
		rc = wfail(w, "expected an array of column names");
	json_array_foreach(pb, i, e) {
		size_t o2 = push_index(w, i);
		if (!json_is_string(e))
			rc = wfail(w, "expected a column name");
		else
			rc = wcheck(
			    w, sl_config_partition_add(q, json_string_value(e), msg, sizeof(msg)),
			    msg);
		pop(w, o2);
		if (rc)
			break;
	}
	pop(w, old);
	return rc;
}

static int walk_trigger(struct walk *w, json_t *t, struct sl_query_config *q)
{
	static const char *const keys[] = {"processingTime", "availableNow", "once", NULL};
	struct field f = {"processingTime", K_DURATION, &q->trigger_interval_us, 0};
	const char *key;
	json_t *v;
	size_t old;
	bool b;
	int rc;

	rc = expect_object(w, t);
	if (!rc)
		rc = check_keys(w, t, keys);
	if (rc)
		return rc;
	if (json_object_size(t) != 1)
		return wfail(w, "expected exactly one of processingTime, availableNow, once");
	json_object_foreach(t, key, v) {
		if (!strcmp(key, "processingTime")) {
			q->trigger = SL_TRIGGER_PROCESSING_TIME;
			return read_field(w, t, &f, NULL);
		}
		struct field fb = {key, K_BOOL, &b, 0};
		rc = read_field(w, t, &fb, NULL);
		if (rc)
			return rc;
		if (!b) {
			old = push_key(w, key);
			rc = wfail(w, "expected true (leave the trigger out for the default)");
			pop(w, old);
			return rc;
		}
		q->trigger = !strcmp(key, "once") ? SL_TRIGGER_ONCE : SL_TRIGGER_AVAILABLE_NOW;
	}
	return 0;
}

/* Reads one section of a query, when present, with its key on the path. */
static int walk_section(struct walk *w, json_t *j, const char *key, struct sl_query_config *q,
			int (*fn)(struct walk *, json_t *, struct sl_query_config *))
{
	json_t *s = json_object_get(j, key);
	size_t old;
	int rc;

	if (!s)
		return 0;
	old = push_key(w, key);
	rc = fn(w, s, q);
	pop(w, old);
	return rc;
}

static int walk_dedup(struct walk *w, json_t *j, struct sl_query_config *q)
{
	json_t *dd = json_object_get(j, "dropDuplicates");
	json_t *ddw = json_object_get(j, "dropDuplicatesWithinWatermark");
	size_t old;
	int rc;

	if (dd && ddw) {
		old = push_key(w, "dropDuplicatesWithinWatermark");
		rc = wfail(w, "cannot be combined with dropDuplicates");
		pop(w, old);
		return rc;
	}
	if (!dd && !ddw)
		return 0;
	q->dedup_within_wm = ddw != NULL;
	return read_columns(w, j, ddw ? "dropDuplicatesWithinWatermark" : "dropDuplicates",
			    &q->source.schema, &q->dedup, &q->ndedup);
}

/* A query, read section by section in dependency order (source first). */
static int walk_query(struct walk *w, json_t *j, struct sl_query_config *q)
{
	static const char *const keys[] = {
	    "source",  "watermark", "dropDuplicates", "dropDuplicatesWithinWatermark",
	    "groupBy", "aggregate", "outputMode",     "sink",
	    "trigger", NULL,
	};
	static const char *const modes[] = {"append", "update", "complete", NULL};
	int v, rc;

	rc = expect_object(w, j);
	if (!rc)
		rc = check_keys(w, j, keys);
	if (!rc && !json_object_get(j, "source"))
		rc = missing(w, "source");
	if (!rc)
		rc = walk_section(w, j, "source", q, walk_source);
	if (!rc)
		rc = walk_section(w, j, "watermark", q, walk_watermark);
	if (!rc)
		rc = walk_dedup(w, j, q);
	if (!rc)
		rc = walk_section(w, j, "groupBy", q, walk_groupby);
	if (!rc)
		rc = walk_section(w, j, "aggregate", q, walk_aggregate);
	v = (int)q->output_mode;
	if (!rc)
		rc = read_enum(w, j, "outputMode", modes, &v);
	q->output_mode = (enum sl_output_mode)v;
	if (!rc)
		rc = sl_config_query_outputs(q, w->err, w->errlen);
	if (!rc)
		rc = walk_section(w, j, "sink", q, walk_sink);
	if (!rc)
		rc = sl_config_query_finish(q, w->err, w->errlen);
	if (!rc)
		rc = walk_section(w, j, "trigger", q, walk_trigger);
	return rc;
}

/* Each query's downstreams: the queries whose query source names it. */
static int find_downstreams(struct sl_config *c)
{
	for (size_t i = 0; i < c->n; i++) {
		const char *up = c->queries[i].source.upstream;
		if (!up)
			continue;
		for (size_t k = 0; k < c->n; k++) {
			struct sl_query_config *u = &c->queries[k];
			if (strcmp(u->name, up))
				continue;
			char **v = realloc(u->downstreams, (u->ndownstreams + 1) * sizeof(*v));
			if (!v)
				return ENOMEM;
			v[u->ndownstreams++] = c->queries[i].name;
			u->downstreams = v;
		}
	}
	return 0;
}

/* The upstream a query's source names, when it is a query source; else NULL. */
static const char *upstream_of(json_t *j)
{
	json_t *src = json_is_object(j) ? json_object_get(j, "source") : NULL;
	json_t *fmt = json_is_object(src) ? json_object_get(src, "format") : NULL;
	json_t *up = json_is_object(src) ? json_object_get(src, "query") : NULL;

	if (!json_is_string(fmt) || strcasecmp(json_string_value(fmt), "query") ||
	    !json_is_string(up))
		return NULL;
	return json_string_value(up);
}

/*
 * Dependency order (c->order): each query after the upstream its query
 * source reads, file order otherwise, by depth-first search from each query
 * in file order. A cycle is refused, naming its queries.
 */
static int order_queries(struct walk *w, struct sl_config *c, json_t *queries)
{
	size_t n = c->n, done = 0;
	unsigned char *mark = calloc(n ? n : 1, 1); /* 0 new, 1 on the path, 2 placed */
	size_t *path = calloc(n ? n : 1, sizeof(*path));
	int rc = 0;

	if (!mark || !path || !(c->order = calloc(n ? n : 1, sizeof(*c->order)))) {
		rc = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		size_t depth = 0, k = i;
		/* follow the chain of upstreams from i; each query has at most one */
		while (mark[k] == 0) {
			mark[k] = 1;
			path[depth++] = k;
			const char *up = upstream_of(json_object_get(queries, c->queries[k].name));
			long u = -1;
			for (size_t j = 0; up && j < n; j++)
				if (!strcmp(c->queries[j].name, up))
					u = (long)j;
			if (u < 0 || (size_t)u == k)
				break; /* no upstream, or an error walk_source reports */
			if (mark[u] == 1) {
				char chain[512] = "";
				size_t from = 0, len = 0;
				while (path[from] != (size_t)u)
					from++;
				for (size_t d = from; d < depth && len < sizeof(chain); d++)
					len += (size_t)snprintf(chain + len, sizeof(chain) - len,
								"'%s' reads ", c->queries[path[d]].name);
				if (len < sizeof(chain))
					snprintf(chain + len, sizeof(chain) - len, "'%s'",
						 c->queries[u].name);
				size_t old = push_key(w, c->queries[k].name);
				size_t old2 = push_key(w, "source");
				size_t old3 = push_key(w, "query");
				rc = wfail(w, "a cycle: %s", chain);
				pop(w, old3);
				pop(w, old2);
				pop(w, old);
				goto out;
			}
			k = (size_t)u;
		}
		/* place the chain, upstream first */
		while (depth > 0) {
			size_t q = path[--depth];
			if (mark[q] != 2) {
				mark[q] = 2;
				c->order[done++] = q;
			}
		}
	}
out:
	free(mark);
	free(path);
	return rc;
}

/* Builds a config from the parsed document. */
static int walk_root(struct walk *w, json_t *root, struct sl_config *c)
{
	static const char *const keys[] = {"queries", NULL};
	json_t *queries, *j;
	const char *name;
	int rc;

	if (!json_is_object(root))
		return wfail(w, "expected a JSON object"); /* the path still names the file */
	w->len = 0;
	w->path[0] = 0;
	w->cfg = c;
	rc = check_keys(w, root, keys);
	if (rc)
		return rc;
	queries = json_object_get(root, "queries");
	if (!queries)
		return 0;
	push_key(w, "queries");
	rc = expect_object(w, queries);
	if (rc)
		return rc;
	/* every query by name first (file order), then walked upstreams first */
	json_object_foreach(queries, name, j) {
		struct sl_query_config *q;
		size_t old = push_key(w, name);
		if (!sl_config_name_valid(name))
			return wfail(w, "a query name matches [A-Za-z0-9_-]{1,64}");
		if ((rc = sl_config_add_query(c, name, &q)))
			return rc;
		pop(w, old);
	}
	if ((rc = order_queries(w, c, queries)))
		return rc;
	for (size_t i = 0; i < c->n; i++) {
		struct sl_query_config *q = &c->queries[c->order[i]];
		size_t old = push_key(w, q->name);
		if ((rc = walk_query(w, json_object_get(queries, q->name), q)))
			return rc;
		pop(w, old);
	}
	if ((rc = find_downstreams(c)))
		return rc;
	return sl_config_finish(c, w->err, w->errlen);
}

/* Replaces control characters, so that the error stays one line. */
static void one_line(char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

int sl_config_parse(const char *text, size_t len, const char *origin, struct sl_config **out,
		    char *err, size_t errlen)
{
	struct walk w = {.err = err, .errlen = errlen};
	struct sl_config *c;
	json_error_t jerr;
	json_t *root;
	int rc;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, errlen, "%s:%d:%d: %s", origin, jerr.line, jerr.column, jerr.text);
		one_line(err);
		return SL_ECONFIG;
	}
	rc = sl_config_new(&c);
	if (rc)
		goto root_decref;
	snprintf(w.path, sizeof(w.path), "%s", origin);
	w.len = strlen(w.path);
	rc = walk_root(&w, root, c);
	if (rc) {
		sl_config_free(c);
		if (rc == SL_ECONFIG)
			one_line(err);
		goto root_decref;
	}
	*out = c;
root_decref:
	json_decref(root);
	return rc;
}

/*
 * A sluice.json that names a command (a process source, an exec sink) or a
 * secret (a kafka password or key, even as an @env:/@file: reference) must be the daemon
 * user's and writable by no one else, as sshd's StrictModes: whoever can
 * write it can run commands as that user (CONNECTORS "Commands and secrets").
 */
static int check_owner(const struct sl_config *c, int fd, const char *path, char *err,
		       size_t errlen)
{
	const struct sl_query_config *q = NULL;
	const char *field = "sink.command", *what = "a command";
	char secret_field[300];
	struct stat st;

	for (size_t k = 0; k < sl_config_nqueries(c) && !q; k++) {
		if (sl_config_query(c, k)->source.format == SL_SOURCE_PROCESS) {
			q = sl_config_query(c, k);
			field = "source.command";
		} else if (sl_config_query(c, k)->sink_format == SL_SINK_EXEC) {
			q = sl_config_query(c, k);
		} else if (sl_config_query(c, k)->source.kafka &&
			   sl_config_query(c, k)->source.kafka->secret) {
			q = sl_config_query(c, k);
			snprintf(secret_field, sizeof(secret_field), "source.%s",
				 q->source.kafka->secret_key);
			field = secret_field;
			what = "a secret";
		}
		const struct sl_query_config *kq = sl_config_query(c, k);
		for (size_t i = 0; !q && kq->sink_format == SL_SINK_KAFKA && i < kq->nkafka_conf; i++) {
			if (kafka_secret(kq->kafka_conf[2 * i], kq->kafka_conf[2 * i + 1])) {
				q = kq;
				snprintf(secret_field, sizeof(secret_field), "sink.kafka.%s",
					 kq->kafka_conf[2 * i]);
				field = secret_field;
				what = "a secret";
			}
		}
	}
	if (!q)
		return 0;
	if (fstat(fd, &st)) {
		snprintf(err, errlen, "cannot stat '%s': %s", path, strerror(errno));
		return SL_ECONFIG;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "queries.%s.%s: '%s' names %s but is owned by uid %u, "
			 "not by uid %u that runs it",
			 q->name, field, path, what, (unsigned)st.st_uid, (unsigned)geteuid());
		return SL_ECONFIG;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen,
			 "queries.%s.%s: '%s' names %s but is writable by %s "
			 "(chmod go-w '%s')",
			 q->name, field, path, what, st.st_mode & S_IWOTH ? "others" : "its group", path);
		return SL_ECONFIG;
	}
	return 0;
}

int sl_config_load(const char *datadir, struct sl_config **out, char *err, size_t errlen)
{
	char path[4096], *text = NULL;
	size_t len = 0, cap = 0, n;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/sluice.json", datadir);
	f = fopen(path, "r");
	if (!f) {
		rc = errno;
		if (rc == ENOENT)
			return sl_config_new(out);
		snprintf(err, errlen, "cannot read '%s': %s", path, strerror(rc));
		return SL_ECONFIG;
	}
	do {
		if (len == cap) {
			char *t = realloc(text, cap ? cap * 2 : 16384);
			if (!t) {
				rc = ENOMEM;
				goto text_free;
			}
			text = t;
			cap = cap ? cap * 2 : 16384;
		}
		errno = 0;
		n = fread(text + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno ? errno : EIO));
		rc = SL_ECONFIG;
		goto text_free;
	}
	rc = sl_config_parse(text, len, path, out, err, errlen);
	if (rc == 0 && (rc = check_owner(*out, fileno(f), path, err, errlen))) {
		sl_config_free(*out);
		*out = NULL;
	}
text_free:
	free(text);
	fclose(f);
	return rc;
}
