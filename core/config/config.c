/* SPDX-License-Identifier: MIT */
/*
 * Query configuration: pure parsers (durations, sizes, DDL schemas, names,
 * paths), option value coercion, and the checks that span fields or
 * queries. No JSON here: core/json.c walks the document and calls these.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "err.h"
#include "kafka_conf.h"

#define US_PER_MS 1000ll
#define US_PER_SEC 1000000ll
#define DEFAULT_MAX_FILE_AGE_US (7 * 86400 * US_PER_SEC)
#define DEFAULT_FILE_HISTORY_US (30 * 86400 * US_PER_SEC)

int sl_config_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return SL_ECONFIG;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* ASCII case-insensitive equality of s[0..n) and the NUL-terminated word. */
static bool word_eq(const char *s, size_t n, const char *word)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!word[i] || lower(s[i]) != lower(word[i]))
			return false;
	return word[i] == 0;
}

static bool str_ieq(const char *a, const char *b) { return word_eq(a, strlen(a), b); }

/*
 * Reads decimal digits at *p into *v, refusing values above INT64_MAX.
 * Returns the number of digits read (0 if none), or -1 on overflow.
 */
static int read_uint(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	int n = 0;

	for (; is_digit(*s); s++, n++) {
		if (x > ((uint64_t)INT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*v = x;
	return n;
}

/* Durations and sizes */

/* Each unit's spellings, separated by '|'. */
static const struct {
	const char *names;
	int64_t us;
} duration_units[] = {
    {"us|microsecond|microseconds", 1},	    {"ms|millisecond|milliseconds", US_PER_MS},
    {"s|sec|second|seconds", US_PER_SEC},   {"m|min|minute|minutes", 60 * US_PER_SEC},
    {"h|hour|hours", 3600 * US_PER_SEC},    {"d|day|days", 86400 * US_PER_SEC},
    {"week|weeks", 7 * 86400 * US_PER_SEC},
};

/* True when s[0..n) is one of the '|'-separated names, ignoring ASCII case. */
static bool word_in(const char *s, size_t n, const char *names)
{
	for (const char *w = names;; w++) {
		const char *e = strchrnul(w, '|');
		if ((size_t)(e - w) == n && !strncasecmp(s, w, n))
			return true;
		if (!*e)
			return false;
		w = e;
	}
}

int sl_config_duration_parse(const char *s, int64_t *us, char *err, size_t errlen)
{
	const char *p = s, *unit;
	int64_t mult = -1;
	uint64_t v;
	int nd;

	if (*p == '-')
		return sl_config_fail(err, errlen, "a duration cannot be negative, got '%s'", s);
	nd = read_uint(&p, &v);
	if (nd < 0)
		return sl_config_fail(err, errlen, "duration '%s' is out of range", s);
	if (nd == 0)
		return sl_config_fail(err, errlen, "expected a duration like '10 seconds', got '%s'", s);
	if (*p == 0) {
		mult = US_PER_MS; /* a bare integer is milliseconds */
	} else {
		if (*p == ' ')
			p++;
		unit = p;
		while (is_alpha(*p))
			p++;
		if (p == unit || *p)
			return sl_config_fail(err, errlen, "expected a duration like '10 seconds', got '%s'",
				    s);
		for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++)
			if (word_in(unit, (size_t)(p - unit), duration_units[i].names))
				mult = duration_units[i].us;
		if (mult < 0)
			return sl_config_fail(err, errlen, "unknown unit '%s' in duration '%s'", unit, s);
	}
	if (v > (uint64_t)(INT64_MAX / mult))
		return sl_config_fail(err, errlen, "duration '%s' is out of range", s);
	*us = (int64_t)v * mult;
	return 0;
}

int sl_config_size_parse(const char *s, uint64_t *bytes, char *err, size_t errlen)
{
	const char *p = s;
	unsigned shift = 0;
	uint64_t v;
	int nd;

	nd = read_uint(&p, &v);
	if (nd < 0)
		return sl_config_fail(err, errlen, "size '%s' is out of range", s);
	if (nd == 0)
		return sl_config_fail(err, errlen, "expected a size like '64m', got '%s'", s);
	switch (lower(*p)) {
	case 'k':
		shift = 10;
		p++;
		break;
	case 'm':
		shift = 20;
		p++;
		break;
	case 'g':
		shift = 30;
		p++;
		break;
	case 't':
		shift = 40;
		p++;
		break;
	default:
		break;
	}
	if (lower(*p) == 'b')
		p++;
	if (*p)
		return sl_config_fail(err, errlen, "expected a size like '64m', got '%s'", s);
	if (v > ((uint64_t)INT64_MAX >> shift))
		return sl_config_fail(err, errlen, "size '%s' is out of range", s);
	*bytes = v << shift;
	return 0;
}

/* Schemas */

static const struct {
	const char *name;
	enum sl_type type;
} type_names[] = {
    {"STRING", SL_TYPE_STRING},	  {"BIGINT", SL_TYPE_BIGINT},	    {"LONG", SL_TYPE_BIGINT},
    {"INT", SL_TYPE_INT},	  {"INTEGER", SL_TYPE_INT},	    {"DOUBLE", SL_TYPE_DOUBLE},
    {"BOOLEAN", SL_TYPE_BOOLEAN}, {"TIMESTAMP", SL_TYPE_TIMESTAMP}, {"DATE", SL_TYPE_DATE},
};

const char *sl_config_type_name(enum sl_type t)
{
	static const char *const names[] = {
	    [SL_TYPE_STRING] = "STRING",
	    [SL_TYPE_BIGINT] = "BIGINT",
	    [SL_TYPE_INT] = "INT",
	    [SL_TYPE_DOUBLE] = "DOUBLE",
	    [SL_TYPE_BOOLEAN] = "BOOLEAN",
	    [SL_TYPE_TIMESTAMP] = "TIMESTAMP",
	    [SL_TYPE_DATE] = "DATE",
	    [SL_TYPE_WINDOW] = "STRUCT<start: TIMESTAMP, end: TIMESTAMP>",
	};
	return (size_t)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

void sl_config_schema_release(struct sl_schema *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->cols[i].name);
	free(s->cols);
	s->cols = NULL;
	s->n = 0;
}

long sl_config_schema_find(const struct sl_schema *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->cols[i].name, name))
			return (long)i;
	return -1;
}

static long schema_find_icase(const struct sl_schema *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (str_ieq(s->cols[i].name, name))
			return (long)i;
	return -1;
}

/* Appends a column (name is stolen on success). */
static int schema_push(struct sl_schema *s, size_t *cap, char *name, enum sl_type type,
		       bool not_null)
{
	if (s->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		struct sl_column *c = realloc(s->cols, ncap * sizeof(*c));
		if (!c)
			return ENOMEM;
		s->cols = c;
		*cap = ncap;
	}
	s->cols[s->n++] = (struct sl_column){.name = name, .type = type, .not_null = not_null};
	return 0;
}

static const char *skip_space(const char *p)
{
	while (is_space(*p))
		p++;
	return p;
}

/*
 * Reads a column name at *p: `backquoted` (a doubled backquote is one) or
 * [A-Za-z0-9_]+. On success *out is a new string and *p moves past it.
 */
static int read_name(const char **p, char **out, char *err, size_t errlen)
{
	const char *s = *p, *q;
	char *name;
	size_t n = 0;

	if (*s != '`') {
		for (q = s; is_alpha(*q) || is_digit(*q) || *q == '_'; q++)
			;
		if (q == s)
			return sl_config_fail(err, errlen, "expected a column name at '%.20s'", s);
		name = strndup(s, (size_t)(q - s));
		if (!name)
			return ENOMEM;
		*p = q;
		*out = name;
		return 0;
	}
	name = malloc(strlen(s));
	if (!name)
		return ENOMEM;
	for (q = s + 1;; q++) {
		if (*q == 0) {
			free(name);
			return sl_config_fail(err, errlen, "unterminated backquote at '%.20s'", s);
		}
		if (*q == '`') {
			if (q[1] != '`')
				break;
			q++;
		} else if ((unsigned char)*q < 0x20 || *q == 0x7f) {
			free(name);
			return sl_config_fail(err, errlen, "control character in column name at '%.20s'", s);
		}
		name[n++] = *q;
	}
	name[n] = 0;
	if (n == 0) {
		free(name);
		return sl_config_fail(err, errlen, "empty column name");
	}
	*p = q + 1;
	*out = name;
	return 0;
}

/* Parses one `name TYPE [NOT NULL]` at *p and appends it to s. */
static int parse_column(const char **p, struct sl_schema *s, size_t *cap, char *err, size_t errlen)
{
	const char *q, *w;
	enum sl_type type = SL_TYPE_STRING;
	bool found = false, not_null = false;
	char *name;
	int rc;

	rc = read_name(p, &name, err, errlen);
	if (rc)
		return rc;
	q = skip_space(*p);
	for (w = q; is_alpha(*w) || is_digit(*w) || *w == '_'; w++)
		;
	if (q == *p || w == q) { /* no space after the name, or no word after it */
		rc = *q ? sl_config_fail(err, errlen, "expected a type after column '%s', got '%.20s'", name,
			       q)
			: sl_config_fail(err, errlen, "expected a type after column '%s'", name);
		goto name_free;
	}
	for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++) {
		if (word_eq(q, (size_t)(w - q), type_names[i].name)) {
			type = type_names[i].type;
			found = true;
		}
	}
	if (!found) {
		rc = sl_config_fail(err, errlen, "unknown type '%.*s'", (int)(w - q), q);
		goto name_free;
	}
	q = skip_space(w);
	for (w = q; is_alpha(*w); w++)
		;
	if (word_eq(q, (size_t)(w - q), "NOT")) {
		q = skip_space(w);
		for (w = q; is_alpha(*w); w++)
			;
		if (!word_eq(q, (size_t)(w - q), "NULL")) {
			rc = sl_config_fail(err, errlen, "expected NULL after NOT in column '%s'", name);
			goto name_free;
		}
		not_null = true;
		q = skip_space(w);
	}
	if (*q && *q != ',') {
		rc = sl_config_fail(err, errlen, "unexpected '%.20s' after column '%s'", q, name);
		goto name_free;
	}
	if (schema_find_icase(s, name) >= 0) {
		rc = sl_config_fail(err, errlen, "duplicate column '%s'", name);
		goto name_free;
	}
	if (!strcmp(name, "_corrupt_record") && (type != SL_TYPE_STRING || not_null)) {
		rc = sl_config_fail(err, errlen, "_corrupt_record must be a nullable STRING");
		goto name_free;
	}
	rc = schema_push(s, cap, name, type, not_null);
	if (rc)
		goto name_free;
	*p = q;
	return 0;
name_free:
	free(name);
	return rc;
}

int sl_config_schema_parse(const char *ddl, struct sl_schema *out, char *err, size_t errlen)
{
	struct sl_schema s = {0};
	const char *p = skip_space(ddl);
	size_t cap = 0;
	int rc;

	if (*p == 0)
		return sl_config_fail(err, errlen, "expected at least one column");
	for (;;) {
		rc = parse_column(&p, &s, &cap, err, errlen);
		if (rc)
			goto schema_release;
		if (*p == 0)
			break;
		p = skip_space(p + 1); /* past the ',' */
		if (*p == 0) {
			rc = sl_config_fail(err, errlen, "expected a column after the last ','");
			goto schema_release;
		}
	}
	*out = s;
	return 0;
schema_release:
	sl_config_schema_release(&s);
	return rc;
}

int sl_config_column_ref(const struct sl_schema *s, const char *name, int want, size_t *idx,
			 char *err, size_t errlen)
{
	long i = sl_config_schema_find(s, name);

	if (i < 0) {
		long j = schema_find_icase(s, name);
		if (j >= 0)
			return sl_config_fail(err, errlen, "unknown column '%s' (did you mean '%s'?)", name,
				    s->cols[j].name);
		return sl_config_fail(err, errlen, "unknown column '%s'", name);
	}
	if (want >= 0 && s->cols[i].type != (enum sl_type)want)
		return sl_config_fail(err, errlen, "column '%s' is %s, expected %s", name,
			    sl_config_type_name(s->cols[i].type),
			    sl_config_type_name((enum sl_type)want));
	*idx = (size_t)i;
	return 0;
}

/* Names and paths */

bool sl_config_name_valid(const char *s)
{
	size_t n = 0;

	for (const char *p = s; *p; p++, n++)
		if (!(is_alpha(*p) || is_digit(*p) || *p == '_' || *p == '-'))
			return false;
	return n >= 1 && n <= SL_CONFIG_NAME_MAX;
}

void sl_config_path_release(struct sl_path *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->comps[i]);
	free(p->comps);
	free(p->text);
	p->comps = NULL;
	p->text = NULL;
	p->n = 0;
}

int sl_config_path_parse(const char *s, struct sl_path *out, char *err, size_t errlen)
{
	struct sl_path p = {0};
	size_t len = strlen(s), ncomp = 1;
	const char *c, *e;
	int rc;

	if (len == 0)
		return sl_config_fail(err, errlen, "expected a path relative to in/");
	if (len > SL_CONFIG_PATH_MAX)
		return sl_config_fail(err, errlen, "longer than %d bytes", SL_CONFIG_PATH_MAX);
	if (s[0] == '/')
		return sl_config_fail(err, errlen, "'%s' is absolute: expected a path relative to in/", s);
	if (strstr(s, "**"))
		return sl_config_fail(err, errlen, "'**' is not supported: a glob matches one component");
	for (c = s; *c; c++)
		ncomp += *c == '/';
	p.text = strdup(s);
	p.comps = calloc(ncomp, sizeof(char *));
	if (!p.text || !p.comps) {
		rc = ENOMEM;
		goto path_release;
	}
	for (c = s;; c = e + 1) {
		e = strchrnul(c, '/');
		if (e == c) {
			rc = sl_config_fail(err, errlen, "empty component in '%s'", s);
			goto path_release;
		}
		if (e - c == 2 && c[0] == '.' && c[1] == '.') {
			rc = sl_config_fail(err, errlen, "'%s' leaves in/", s);
			goto path_release;
		}
		if (c[0] == '.') {
			rc = sl_config_fail(err, errlen,
				  "component '%.*s' starts with '.': such folders never hold "
				  "landed files",
				  (int)(e - c), c);
			goto path_release;
		}
		if (e - c > SL_CONFIG_COMPONENT_MAX) {
			rc = sl_config_fail(err, errlen, "a component of '%s' is longer than %d bytes", s,
				  SL_CONFIG_COMPONENT_MAX);
			goto path_release;
		}
		p.comps[p.n] = strndup(c, (size_t)(e - c));
		if (!p.comps[p.n]) {
			rc = ENOMEM;
			goto path_release;
		}
		p.n++;
		if (*e == 0)
			break;
	}
	*out = p;
	return 0;
path_release:
	sl_config_path_release(&p);
	return rc;
}

/* A backslash counts as a glob character too: fnmatch(3) reads it as an escape. */
static bool is_glob(const char *comp) { return strpbrk(comp, "*?[\\") != NULL; }

bool sl_config_path_overlap(const struct sl_path *a, const struct sl_path *b)
{
	size_t n = a->n < b->n ? a->n : b->n;

	if (a->n == 0 || b->n == 0)
		return false; /* a source that reads no files */
	for (size_t i = 0; i < n; i++) {
		const char *x = a->comps[i], *y = b->comps[i];
		if (!is_glob(x) && !is_glob(y) && strcmp(x, y))
			return false;
	}
	return true;
}

/* Option values */

/* Writes how v reads in an error message: 'text', or "an object". */
static const char *got(const struct sl_config_value *v, char *buf, size_t len)
{
	if (v->kind == SL_CONFIG_V_COMPOSITE)
		snprintf(buf, len, "%s", v->str);
	else
		snprintf(buf, len, "'%s'", v->str);
	return buf;
}

int sl_config_value_bool(const struct sl_config_value *v, bool *out, char *err, size_t errlen)
{
	char buf[128];

	if (v->kind == SL_CONFIG_V_BOOL) {
		*out = v->b;
		return 0;
	}
	if (v->kind == SL_CONFIG_V_STRING &&
	    (str_ieq(v->str, "true") || str_ieq(v->str, "false"))) {
		*out = str_ieq(v->str, "true");
		return 0;
	}
	return sl_config_fail(err, errlen, "expected true or false, got %s", got(v, buf, sizeof(buf)));
}

int sl_config_value_posint(const struct sl_config_value *v, int64_t max, int64_t *out, char *err,
			   size_t errlen)
{
	const char *p = v->str;
	char buf[128];
	uint64_t u;
	int64_t x;

	if (v->kind == SL_CONFIG_V_INT) {
		x = v->i;
	} else if (v->kind == SL_CONFIG_V_STRING && *p && !p[strspn(p, "0123456789")]) {
		/* all digits: past INT64_MAX is still a positive integer, just too big */
		x = read_uint(&p, &u) < 0 ? INT64_MAX : (int64_t)u;
	} else {
		return sl_config_fail(err, errlen, "expected a positive integer, got %s",
			    got(v, buf, sizeof(buf)));
	}
	if (x <= 0)
		return sl_config_fail(err, errlen, "expected a positive integer, got %s",
			    got(v, buf, sizeof(buf)));
	if (x > max)
		return sl_config_fail(err, errlen, "expected a positive integer up to %lld, got %s",
			    (long long)max, got(v, buf, sizeof(buf)));
	*out = x;
	return 0;
}

int sl_config_value_duration(const struct sl_config_value *v, int64_t *us, char *err, size_t errlen)
{
	char buf[128];

	if (v->kind == SL_CONFIG_V_INT) {
		if (v->i < 0)
			return sl_config_fail(err, errlen, "a duration cannot be negative, got '%s'", v->str);
		if (v->i > INT64_MAX / US_PER_MS)
			return sl_config_fail(err, errlen, "duration '%s' is out of range", v->str);
		*us = v->i * US_PER_MS;
		return 0;
	}
	if (v->kind == SL_CONFIG_V_STRING)
		return sl_config_duration_parse(v->str, us, err, errlen);
	return sl_config_fail(err, errlen, "expected a duration like '10 seconds', got %s",
		    got(v, buf, sizeof(buf)));
}

int sl_config_value_size(const struct sl_config_value *v, uint64_t *bytes, char *err, size_t errlen)
{
	char buf[128];
	uint64_t b;
	int rc;

	if (v->kind == SL_CONFIG_V_INT) {
		if (v->i <= 0)
			return sl_config_fail(err, errlen, "expected a positive size, got '%s'", v->str);
		*bytes = (uint64_t)v->i;
		return 0;
	}
	if (v->kind != SL_CONFIG_V_STRING)
		return sl_config_fail(err, errlen, "expected a size like '64m', got %s",
			    got(v, buf, sizeof(buf)));
	rc = sl_config_size_parse(v->str, &b, err, errlen);
	if (rc)
		return rc;
	if (b == 0)
		return sl_config_fail(err, errlen, "expected a positive size, got '%s'", v->str);
	*bytes = b;
	return 0;
}

int sl_config_value_enum(const struct sl_config_value *v, const char *const *names, int *out,
			 char *err, size_t errlen)
{
	char list[256] = "", buf[128];
	size_t off = 0;

	if (v->kind == SL_CONFIG_V_STRING) {
		for (int i = 0; names[i]; i++) {
			if (str_ieq(v->str, names[i])) {
				*out = i;
				return 0;
			}
		}
	}
	for (int i = 0; names[i] && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s'%s'",
					i == 0	       ? ""
					: names[i + 1] ? ", "
						       : " or ",
					names[i]);
	return sl_config_fail(err, errlen, "expected %s, got %s", list, got(v, buf, sizeof(buf)));
}

int sl_config_value_string(const struct sl_config_value *v, const char **out, char *err,
			   size_t errlen)
{
	char buf[128];

	if (v->kind != SL_CONFIG_V_STRING)
		return sl_config_fail(err, errlen, "expected a string, got %s", got(v, buf, sizeof(buf)));
	*out = v->str;
	return 0;
}

/* Aggregates */

static const struct {
	const char *name;
	enum sl_agg_fn fn;
} agg_names[] = {
    {"count", SL_AGG_COUNT}, {"sum", SL_AGG_SUM}, {"min", SL_AGG_MIN},
    {"max", SL_AGG_MAX},     {"avg", SL_AGG_AVG},
};

static bool is_numeric(enum sl_type t)
{
	return t == SL_TYPE_INT || t == SL_TYPE_BIGINT || t == SL_TYPE_DOUBLE;
}

int sl_config_aggregate_parse(const char *expr, const struct sl_schema *schema,
			      struct sl_aggregate *out, char *err, size_t errlen)
{
	const char *p = skip_space(expr), *f = p;
	struct sl_aggregate a = {0};
	bool found = false;
	char *col = NULL;
	size_t idx = 0;
	int rc;

	while (is_alpha(*p))
		p++;
	for (size_t i = 0; i < sizeof(agg_names) / sizeof(agg_names[0]); i++) {
		if (word_eq(f, (size_t)(p - f), agg_names[i].name)) {
			a.fn = agg_names[i].fn;
			found = true;
		}
	}
	p = skip_space(p);
	if (p == f || *p != '(')
		goto syntax;
	if (!found)
		return sl_config_fail(err, errlen,
			    "unknown function '%.*s': expected count, sum, min, max or avg",
			    (int)(p - f), f);
	p = skip_space(p + 1);
	if (*p == '*') {
		if (a.fn != SL_AGG_COUNT)
			return sl_config_fail(err, errlen, "'*' only works in count(*)");
		a.fn = SL_AGG_COUNT_STAR;
		a.type = SL_TYPE_BIGINT;
		p++;
	} else {
		rc = read_name(&p, &col, err, errlen);
		if (rc == SL_ECONFIG)
			goto syntax;
		if (rc)
			return rc;
	}
	p = skip_space(p);
	if (*p != ')' || *skip_space(p + 1))
		goto syntax_col;
	if (col) {
		rc = sl_config_column_ref(schema, col, -1, &idx, err, errlen);
		if (rc)
			goto col_free;
		a.col = idx;
		a.type = schema->cols[idx].type;
		if ((a.fn == SL_AGG_SUM || a.fn == SL_AGG_AVG) && !is_numeric(a.type)) {
			rc = sl_config_fail(err, errlen, "%s needs a numeric column: '%s' is %s",
				  a.fn == SL_AGG_SUM ? "sum" : "avg", col,
				  sl_config_type_name(a.type));
			goto col_free;
		}
		if (a.fn == SL_AGG_COUNT || (a.fn == SL_AGG_SUM && a.type != SL_TYPE_DOUBLE))
			a.type = SL_TYPE_BIGINT;
		else if (a.fn == SL_AGG_AVG)
			a.type = SL_TYPE_DOUBLE;
		free(col);
	}
	*out = a;
	return 0;
syntax_col:
	free(col);
syntax:
	return sl_config_fail(
	    err, errlen,
	    "expected count(*), count(col), sum(col), min(col), max(col) or avg(col), got '%s'",
	    expr);
col_free:
	free(col);
	return rc;
}

/* Configs */

int sl_config_new(struct sl_config **out)
{
	struct sl_config *c = calloc(1, sizeof(*c));

	if (!c)
		return ENOMEM;
	*out = c;
	return 0;
}

static void query_release(struct sl_query_config *q)
{
	free(q->name);
	sl_config_path_release(&q->source.path);
	sl_config_schema_release(&q->source.schema);
	free(q->source.host);
	free(q->dedup);
	free(q->group);
	for (size_t i = 0; i < q->naggs; i++)
		free(q->aggs[i].name);
	free(q->aggs);
	sl_config_schema_release(&q->out);
	free(q->partition_by);
	free(q->downstreams);
	for (size_t i = 0; i < q->exec_argc; i++)
		free(q->exec_argv[i]);
	free(q->exec_argv);
	for (size_t i = 0; i < 2 * q->nkafka_conf; i++)
		free(q->kafka_conf[i]);
	free(q->kafka_conf);
	free(q->kafka_topic);
	free(q->source.upstream);
	for (size_t i = 0; i < q->source.argc; i++)
		free(q->source.argv[i]);
	free(q->source.argv);
	free(q->source.options_json);
	sl_kafka_config_free(q->source.kafka);
}

void sl_config_free(struct sl_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		query_release(&c->queries[i]);
	free(c->queries);
	free(c->order);
	free(c);
}

int sl_config_add_query(struct sl_config *c, const char *name, struct sl_query_config **out)
{
	struct sl_query_config *qs, *q;
	char *copy = strdup(name);

	if (!copy)
		return ENOMEM;
	qs = realloc(c->queries, (c->n + 1) * sizeof(*qs));
	if (!qs) {
		free(copy);
		return ENOMEM;
	}
	c->queries = qs;
	q = &qs[c->n++];
	*q = (struct sl_query_config){
	    .name = copy,
	    .source = {.max_file_age_us = DEFAULT_MAX_FILE_AGE_US,
		       .file_history_us = DEFAULT_FILE_HISTORY_US,
		       .sep = ','},
	};
	*out = q;
	return 0;
}

size_t sl_config_nqueries(const struct sl_config *c) { return c->n; }

const struct sl_query_config *sl_config_query(const struct sl_config *c, size_t i)
{
	return i < c->n ? &c->queries[i] : NULL;
}

const char *sl_config_source_name(enum sl_source_format f)
{
	static const char *const names[] = {
	    [SL_SOURCE_JSON] = "json", [SL_SOURCE_CSV] = "csv", [SL_SOURCE_TEXT] = "text",
	    [SL_SOURCE_RATE] = "rate", [SL_SOURCE_RATE_MICRO_BATCH] = "rate-micro-batch",
	    [SL_SOURCE_QUERY] = "query", [SL_SOURCE_PROCESS] = "process",
	    [SL_SOURCE_SOCKET] = "socket", [SL_SOURCE_KAFKA] = "kafka"};
	return (size_t)f < sizeof(names) / sizeof(names[0]) && names[f] ? names[f] : "?";
}

const char *sl_config_sink_name(enum sl_sink_format f)
{
	static const char *const names[] = {
	    [SL_SINK_JSON] = "json", [SL_SINK_CSV] = "csv", [SL_SINK_PARQUET] = "parquet",
	    [SL_SINK_CONSOLE] = "console", [SL_SINK_EXEC] = "exec",
	    [SL_SINK_KAFKA] = "kafka"};
	return (size_t)f < sizeof(names) / sizeof(names[0]) && names[f] ? names[f] : "?";
}

const struct sl_query_config *sl_config_query_ordered(const struct sl_config *c, size_t i)
{
	if (i >= c->n)
		return NULL;
	return &c->queries[c->order ? c->order[i] : i];
}

const char *sl_config_query_name(const struct sl_config *c, size_t i)
{
	return i < c->n ? c->queries[i].name : NULL;
}

const struct sl_query_config *sl_config_find(const struct sl_config *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->queries[i].name, name))
			return &c->queries[i];
	return NULL;
}

bool sl_config_has_aggregation(const struct sl_query_config *q) { return q->naggs > 0; }

bool sl_config_is_stateful(const struct sl_query_config *q)
{
	return q->naggs > 0 || q->ndedup > 0;
}

void sl_config_used_columns(const struct sl_query_config *q, uint8_t *used)
{
	const struct sl_schema *s = &q->source.schema;
	bool all = !sl_config_has_aggregation(q);

	for (size_t c = 0; c < s->n; c++)
		used[c] = all || s->cols[c].not_null;
	if (all)
		return;
	if (q->has_watermark)
		used[q->wm_col] = 1;
	for (size_t i = 0; i < q->ndedup; i++)
		used[q->dedup[i]] = 1;
	if (q->has_window)
		used[q->win_col] = 1;
	for (size_t i = 0; i < q->ngroup; i++)
		used[q->group[i]] = 1;
	for (size_t i = 0; i < q->naggs; i++)
		if (q->aggs[i].fn != SL_AGG_COUNT_STAR)
			used[q->aggs[i].col] = 1;
}

const struct sl_column *sl_config_column(const struct sl_query_config *q, size_t i)
{
	return &q->source.schema.cols[i];
}

/* Appends a copy of name to the output schema. */
static int out_push(struct sl_query_config *q, size_t *cap, const char *name, enum sl_type type,
		    bool not_null)
{
	char *copy = strdup(name);
	int rc;

	if (!copy)
		return ENOMEM;
	rc = schema_push(&q->out, cap, copy, type, not_null);
	if (rc)
		free(copy);
	return rc;
}

/* The output mode rules of SPARK-NOTES §6.3, for a file sink that accepts all three. */
static int check_output_mode(const struct sl_query_config *q, char *err, size_t errlen)
{
	const struct sl_schema *s = &q->source.schema;

	if (q->output_mode == SL_OUTPUT_COMPLETE && !q->naggs)
		return sl_config_fail(
		    err, errlen,
		    "queries.%s.outputMode: complete needs an aggregation: use append or update",
		    q->name);
	if (q->output_mode != SL_OUTPUT_APPEND || !q->naggs)
		return 0;
	if (!q->has_groupby)
		return sl_config_fail(err, errlen,
			    "queries.%s.outputMode: an aggregation without groupBy in append mode: "
			    "use update or complete",
			    q->name);
	if (!q->has_window)
		return sl_config_fail(err, errlen,
			    "queries.%s.outputMode: a groupBy without a window in append mode: use "
			    "update or complete",
			    q->name);
	if (!q->has_watermark)
		return sl_config_fail(err, errlen,
			    "queries.%s.outputMode: a window without a watermark in append mode: "
			    "add a watermark on '%s', or use update or complete",
			    q->name, s->cols[q->win_col].name);
	if (q->win_col != q->wm_col)
		return sl_config_fail(err, errlen,
			    "queries.%s.outputMode: append needs the window on the watermark "
			    "column '%s', not '%s': use update or complete",
			    q->name, s->cols[q->wm_col].name, s->cols[q->win_col].name);
	return 0;
}

int sl_config_query_outputs(struct sl_query_config *q, char *err, size_t errlen)
{
	const struct sl_schema *s = &q->source.schema;
	size_t cap = 0;
	int rc;

	if (q->dedup_within_wm && !q->has_watermark)
		return sl_config_fail(err, errlen,
			    "queries.%s.dropDuplicatesWithinWatermark: needs a watermark", q->name);
	if (q->has_groupby && !q->naggs)
		return sl_config_fail(err, errlen, "queries.%s.groupBy: needs an aggregate", q->name);
	rc = check_output_mode(q, err, errlen);
	if (rc)
		return rc;
	sl_config_schema_release(&q->out);
	if (!q->naggs) {
		for (size_t i = 0; i < s->n; i++) {
			rc = out_push(q, &cap, s->cols[i].name, s->cols[i].type,
				      s->cols[i].not_null);
			if (rc)
				goto out_release;
		}
		return 0;
	}
	if (q->has_window) {
		rc = out_push(q, &cap, "window", SL_TYPE_WINDOW, true);
		if (rc)
			goto out_release;
	}
	for (size_t i = 0; i < q->ngroup; i++) {
		const struct sl_column *col = &s->cols[q->group[i]];
		if (q->has_window && str_ieq(col->name, "window")) {
			rc = sl_config_fail(
			    err, errlen,
			    "queries.%s.groupBy.columns[%zu]: '%s' clashes with the window column",
			    q->name, i, col->name);
			goto out_release;
		}
		rc = out_push(q, &cap, col->name, col->type, col->not_null);
		if (rc)
			goto out_release;
	}
	for (size_t i = 0; i < q->naggs; i++) {
		long j = schema_find_icase(&q->out, q->aggs[i].name);
		if (j >= 0) {
			const char *kind = "aggregate";
			if (q->out.cols[j].type == SL_TYPE_WINDOW)
				kind = "window";
			else if ((size_t)j < (q->has_window ? 1u : 0u) + q->ngroup)
				kind = "group";
			rc = sl_config_fail(err, errlen,
				  "queries.%s.aggregate.%s: clashes with the %s column '%s'",
				  q->name, q->aggs[i].name, kind, q->out.cols[j].name);
			goto out_release;
		}
		rc = out_push(q, &cap, q->aggs[i].name, q->aggs[i].type,
			      q->aggs[i].fn == SL_AGG_COUNT || q->aggs[i].fn == SL_AGG_COUNT_STAR);
		if (rc)
			goto out_release;
	}
	return 0;
out_release:
	sl_config_schema_release(&q->out);
	return rc;
}

int sl_config_partition_add(struct sl_query_config *q, const char *name, char *err, size_t errlen)
{
	size_t *pb, idx;
	int rc;

	rc = sl_config_column_ref(&q->out, name, -1, &idx, err, errlen);
	if (rc == SL_ECONFIG)
		return sl_config_fail(err, errlen, "'%s' is not a column of the output rows", name);
	if (rc)
		return rc;
	if (q->out.cols[idx].type == SL_TYPE_WINDOW)
		return sl_config_fail(err, errlen, "cannot partition by the struct column '%s'", name);
	for (size_t i = 0; i < q->npartition_by; i++)
		if (q->partition_by[i] == idx)
			return sl_config_fail(err, errlen, "duplicate column '%s'", name);
	pb = realloc(q->partition_by, (q->npartition_by + 1) * sizeof(*pb));
	if (!pb)
		return ENOMEM;
	pb[q->npartition_by++] = idx;
	q->partition_by = pb;
	return 0;
}

/*
 * The kafka sink's input columns (Spark's, matched by exact name): value
 * STRING (else each row whole as JSON), key and topic STRING, partition INT
 * or BIGINT, headers STRING (a JSON object of string values); a topic
 * option or column; transactional wants the option (one fixed topic).
 */
static int kafka_finish(const struct sl_query_config *q, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		enum sl_type type, alt;
	} cols[] = {{"value", SL_TYPE_STRING, SL_TYPE_STRING},
		    {"key", SL_TYPE_STRING, SL_TYPE_STRING},
		    {"topic", SL_TYPE_STRING, SL_TYPE_STRING},
		    {"partition", SL_TYPE_INT, SL_TYPE_BIGINT},
		    {"headers", SL_TYPE_STRING, SL_TYPE_STRING}};

	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		long c = sl_config_schema_find(&q->out, cols[i].name);
		if (c < 0)
			continue;
		enum sl_type t = q->out.cols[c].type;
		if (t != cols[i].type && t != cols[i].alt)
			return sl_config_fail(err, errlen,
				    "queries.%s.sink.format: kafka: the %s column is %s, but %s "
				    "must be %s%s",
				    q->name, cols[i].name, sl_config_type_name(t), cols[i].name,
				    sl_config_type_name(cols[i].type),
				    cols[i].alt != cols[i].type ? " or BIGINT" : "");
	}
	if (q->kafka_transactional && !q->kafka_topic)
		return sl_config_fail(err, errlen,
			    "queries.%s.sink.topic: required with transactional (one fixed topic, "
			    "whose partitions recovery reads)",
			    q->name);
	if (!q->kafka_topic && sl_config_schema_find(&q->out, "topic") < 0)
		return sl_config_fail(err, errlen,
			    "queries.%s.sink.topic: required when the rows have no topic column",
			    q->name);
	return 0;
}

int sl_config_query_finish(struct sl_query_config *q, char *err, size_t errlen)
{
	int rc;

	if (q->sink_format == SL_SINK_KAFKA && (rc = kafka_finish(q, err, errlen)))
		return rc;
	if (q->npartition_by && q->npartition_by >= q->out.n)
		return sl_config_fail(err, errlen,
			    "queries.%s.sink.partitionBy: cannot partition by every column: rows "
			    "would be empty",
			    q->name);
	if (q->sink_format == SL_SINK_CSV) {
		for (size_t i = 0; i < q->out.n; i++)
			if (q->out.cols[i].type == SL_TYPE_WINDOW)
				return sl_config_fail(err, errlen,
					    "queries.%s.sink.format: csv cannot write the struct "
					    "column '%s': use json",
					    q->name, q->out.cols[i].name);
	}
	return 0;
}

int sl_config_finish(const struct sl_config *c, char *err, size_t errlen)
{
	static const char *const clean_names[] = {"off", "archive", "delete"};

	for (size_t i = 0; i < c->n; i++) {
		const struct sl_query_config *q = &c->queries[i];
		if (q->source.clean == SL_CLEAN_OFF)
			continue;
		for (size_t j = 0; j < c->n; j++) {
			const struct sl_query_config *o = &c->queries[j];
			if (j == i || !sl_config_path_overlap(&q->source.path, &o->source.path))
				continue;
			return sl_config_fail(err, errlen,
				    "queries.%s.source.cleanSource: %s needs a path no other query "
				    "reads, but '%s' overlaps query '%s' ('%s')",
				    q->name, clean_names[q->source.clean], q->source.path.text,
				    o->name, o->source.path.text);
		}
	}
	return 0;
}
