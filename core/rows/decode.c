/* SPDX-License-Identifier: MIT */
/*
 * Decoding landed files into batches: line splitting, the json, csv and
 * text record readers, value conversions, partition columns from the path,
 * the parse modes and the counters. The JSON syntax itself is core/jscan.c.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "decode.h"
#include "err.h"
#include "jscan.h"
#include "timestamp.h"

/* How a column gets its value in the current file. */
enum part_kind {
	PART_NONE,  /* read from the records */
	PART_NULL,  /* from the path: null */
	PART_VALUE, /* from the path: pcell (STRING: pbuf[off, off+len)) */
};

struct csv_field {
	const char *s; /* unquoted bytes: in the line or in ubuf */
	size_t len;    /* bytes */
	bool quoted;   /* the field was quoted */
};

struct sl_decoder {
	const struct sl_schema *schema; /* q->source.schema, borrowed */
	enum sl_source_format format;
	enum sl_parse_mode mode;
	bool header;	   /* csv: header line */
	char sep;	   /* csv: separator */
	long corrupt;	   /* index of the _corrupt_record STRING column, or -1 */
	long text_col;	   /* text: index of the value column */
	locale_t c_locale; /* for strtod_l: numbers never follow the host's locale */

	uint8_t *used;	      /* per column: the query reads it (sl_config_used_columns) */
	struct sl_jscan *js;  /* json: wanted = the used columns but _corrupt_record, and
				 the unused ones that can fail to convert (not STRING) */
	size_t *jcol;	      /* wanted field i -> schema column */
	size_t njcol;	      /* number of wanted fields */
	struct sl_jfield *jf; /* njcol fields of the current line */
	struct sl_jscan *wjs; /* a WINDOW column's {"start","end"} (made at first use) */

	uint8_t *pkind;	      /* per column: enum part_kind for the current file */
	union sl_cell *pcell; /* per column: partition value */
	char *pbuf;	      /* unescaped partition values of STRING columns */
	size_t pbuf_cap;

	struct csv_field *fields; /* csv: fields of the current line */
	size_t nfields, fcap;
	long *src;     /* csv: per column, the field index it reads, or -1 */
	size_t expect; /* csv: expected number of fields */
	char *ubuf;    /* csv: unquoted field bytes (cap >= line length) */
	size_t ubuf_cap;

	char *scratch; /* compact JSON text, number text, sanitized lines */
	size_t scratch_cap;
	char why[160]; /* FAILFAST: why the current record is malformed */
	bool bad;      /* the current record is malformed */
};

int sl_decode_stats_init(struct sl_decode_stats *st, size_t ncols)
{
	memset(st, 0, sizeof(*st));
	st->null_counts = calloc(ncols ? ncols : 1, sizeof(*st->null_counts));
	if (!st->null_counts)
		return ENOMEM;
	st->ncols = ncols;
	return 0;
}

void sl_decode_stats_reset(struct sl_decode_stats *st)
{
	st->lines = st->rows = st->malformed = st->dropped = st->read_lines = 0;
	if (st->null_counts)
		memset(st->null_counts, 0, st->ncols * sizeof(*st->null_counts));
}

void sl_decode_stats_release(struct sl_decode_stats *st)
{
	free(st->null_counts);
	memset(st, 0, sizeof(*st));
}

void sl_decoder_free(struct sl_decoder *d)
{
	if (!d)
		return;
	sl_jscan_free(d->js);
	sl_jscan_free(d->wjs);
	if (d->c_locale)
		freelocale(d->c_locale);
	free(d->used);
	free(d->jcol);
	free(d->jf);
	free(d->pkind);
	free(d->pcell);
	free(d->pbuf);
	free(d->fields);
	free(d->src);
	free(d->ubuf);
	free(d->scratch);
	free(d);
}

int sl_decoder_new(const struct sl_query_config *q, struct sl_decoder **out)
{
	const struct sl_schema *sc = &q->source.schema;
	struct sl_decoder *d = calloc(1, sizeof(*d));
	const char **names = NULL;
	int rc = ENOMEM;

	if (!d)
		return ENOMEM;
	d->schema = sc;
	/* a query source reads its upstream's json sink parts; kafka, JSON values */
	d->format = q->source.format == SL_SOURCE_QUERY || q->source.format == SL_SOURCE_KAFKA
			? SL_SOURCE_JSON
			: q->source.format;
	d->mode = q->source.mode;
	d->header = q->source.header;
	d->sep = q->source.sep ? q->source.sep : ',';
	d->corrupt = -1;
	d->text_col = 0;
	for (size_t c = 0; c < sc->n; c++) {
		if (!strcmp(sc->cols[c].name, "_corrupt_record") &&
		    sc->cols[c].type == SL_TYPE_STRING)
			d->corrupt = (long)c;
		if (!strcmp(sc->cols[c].name, "value"))
			d->text_col = (long)c;
	}
	d->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
	d->jcol = calloc(sc->n + 1, sizeof(*d->jcol));
	d->jf = calloc(sc->n + 1, sizeof(*d->jf));
	d->pkind = calloc(sc->n + 1, sizeof(*d->pkind));
	d->pcell = calloc(sc->n + 1, sizeof(*d->pcell));
	d->src = calloc(sc->n + 1, sizeof(*d->src));
	d->used = calloc(sc->n + 1, sizeof(*d->used));
	names = calloc(sc->n + 1, sizeof(*names));
	if (!d->c_locale || !d->jcol || !d->jf || !d->pkind || !d->pcell || !d->src || !d->used ||
	    !names)
		goto fail;
	sl_config_used_columns(q, d->used);
	for (size_t c = 0; c < sc->n; c++) {
		/*
		 * An unused STRING column is skipped at scanning speed: any JSON
		 * value converts to STRING, so leaving it out changes no row's
		 * malformedness. An unused column of another type is still
		 * converted (not stored), as that can make the record malformed.
		 */
		if ((long)c == d->corrupt || (!d->used[c] && sc->cols[c].type == SL_TYPE_STRING))
			continue;
		names[d->njcol] = sc->cols[c].name;
		d->jcol[d->njcol++] = c;
	}
	if (d->format == SL_SOURCE_JSON && (rc = sl_jscan_new(names, d->njcol, &d->js)))
		goto fail;
	free(names);
	*out = d;
	return 0;
fail:
	free(names);
	sl_decoder_free(d);
	return rc ? rc : ENOMEM;
}

/* Grows *buf to at least n bytes. */
static int reserve(char **buf, size_t *cap, size_t n)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap : 4096;
	while (c < n)
		c *= 2;
	char *p = realloc(*buf, c);
	if (!p)
		return ENOMEM;
	*buf = p;
	*cap = c;
	return 0;
}

/* Records why the current record is malformed (the first reason; only FAILFAST reports it). */
__attribute__((format(printf, 2, 3))) static void malformed(struct sl_decoder *d, const char *fmt,
							    ...)
{
	if (!d->bad && d->mode == SL_MODE_FAILFAST) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(d->why, sizeof(d->why), fmt, ap);
		va_end(ap);
	}
	d->bad = true;
}

/* Conversions: 0, or SL_EMALFORMED when the text is not a value of the type. */

static int parse_int(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *v)
{
	size_t i = 0;
	bool neg = false;
	uint64_t x = 0, lim;

	if (i < len && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	if (i == len)
		return SL_EMALFORMED;
	lim = neg ? (uint64_t)(-(lo + 1)) + 1 : (uint64_t)hi;
	for (; i < len; i++) {
		unsigned c = (unsigned char)s[i] - '0';
		if (c > 9 || x > (lim - c) / 10)
			return SL_EMALFORMED;
		x = x * 10 + c;
	}
	*v = neg ? (int64_t)(0 - x) : (int64_t)x;
	return 0;
}

/* `[+-]?(d+[.d*]|.d+)([eE][+-]?d+)?`, finite. */
static int parse_double(struct sl_decoder *d, const char *s, size_t len, double *v)
{
	size_t i = 0, nd = 0;
	char *end;

	if (i < len && (s[i] == '+' || s[i] == '-'))
		i++;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
		nd++;
	if (i < len && s[i] == '.')
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			nd++;
	if (!nd)
		return SL_EMALFORMED;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		size_t ne = 0;
		if (++i < len && (s[i] == '+' || s[i] == '-'))
			i++;
		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			ne++;
		if (!ne)
			return SL_EMALFORMED;
	}
	if (i != len || reserve(&d->scratch, &d->scratch_cap, len + 1))
		return SL_EMALFORMED; /* on ENOMEM too: a number that long is no value */
	memcpy(d->scratch, s, len);
	d->scratch[len] = 0;
	double x = strtod_l(d->scratch, &end, d->c_locale);
	if (!isfinite(x))
		return SL_EMALFORMED;
	*v = x;
	return 0;
}

/* Text (a csv field or a partition value, non-empty) to a non-STRING type. */
static int conv_text(struct sl_decoder *d, enum sl_type t, const char *s, size_t len,
		     union sl_cell *v)
{
	int32_t days;

	switch (t) {
	case SL_TYPE_BIGINT:
		return parse_int(s, len, INT64_MIN, INT64_MAX, &v->i);
	case SL_TYPE_INT:
		return parse_int(s, len, INT32_MIN, INT32_MAX, &v->i);
	case SL_TYPE_DOUBLE:
		return parse_double(d, s, len, &v->d);
	case SL_TYPE_BOOLEAN:
		if (len == 4 && !strncasecmp(s, "true", 4))
			v->i = 1;
		else if (len == 5 && !strncasecmp(s, "false", 5))
			v->i = 0;
		else
			return SL_EMALFORMED;
		return 0;
	case SL_TYPE_TIMESTAMP:
		return sl_timestamp_parse(s, len, &v->i);
	case SL_TYPE_DATE:
		if (sl_date_parse(s, len, &days))
			return SL_EMALFORMED;
		v->i = days;
		return 0;
	default:
		return SL_EMALFORMED;
	}
}

static void put_cell(struct sl_batch *b, size_t row, size_t col, enum sl_type t,
		     const union sl_cell *v)
{
	if (t == SL_TYPE_DOUBLE)
		sl_batch_set_double(b, row, col, v->d);
	else if (t == SL_TYPE_WINDOW)
		sl_batch_set_window(b, row, col, v->w.start, v->w.end);
	else
		sl_batch_set_int(b, row, col, v->i);
}

/*
 * A csv field or partition value into (row, col): empty unquoted is null,
 * quoted empty is "" for STRING. Returns 0, SL_EMALFORMED (left null) or errno.
 */
static int set_text(struct sl_decoder *d, struct sl_batch *b, size_t row, size_t col, const char *s,
		    size_t len, bool quoted)
{
	enum sl_type t = d->schema->cols[col].type;
	union sl_cell v;

	if (t == SL_TYPE_STRING)
		return (len || quoted) && d->used[col] ? sl_batch_set_str(b, row, col, s, len) : 0;
	if (!len)
		return 0;
	if (conv_text(d, t, s, len, &v))
		return SL_EMALFORMED;
	if (d->used[col])
		put_cell(b, row, col, t, &v);
	return 0;
}

static const char *kind_name(enum sl_jkind k)
{
	static const char *const names[] = {"nothing",	"null",	    "false",	 "true",
					    "a number", "a string", "an object", "an array"};
	return names[k];
}

/* Spark's JSON reader takes these strings as non-finite DOUBLEs (allowNonNumericNumbers). */
static bool non_finite(const char *s, size_t n, double *v)
{
	static const struct {
		const char *text;
		double v;
	} names[] = {{"NaN", NAN},	 {"Infinity", INFINITY},   {"+Infinity", INFINITY},
		     {"+INF", INFINITY}, {"-Infinity", -INFINITY}, {"-INF", -INFINITY}};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].text) == n && !memcmp(names[i].text, s, n)) {
			*v = names[i].v;
			return true;
		}
	return false;
}

/*
 * A window struct as the json sink writes it, {"start":TS,"end":TS}, into
 * v. 0, SL_EMALFORMED or ENOMEM.
 */
static int window_value(struct sl_decoder *d, const struct sl_jfield *f, union sl_cell *v)
{
	static const char *const names[] = {"start", "end"};
	struct sl_jfield w[2];
	int rc;

	if (f->kind != SL_JOBJECT)
		return SL_EMALFORMED;
	if (!d->wjs && (rc = sl_jscan_new(names, 2, &d->wjs)))
		return rc;
	if ((rc = sl_jscan_line(d->wjs, f->raw, f->raw_len, w)))
		return rc;
	if (w[0].kind != SL_JSTRING || w[1].kind != SL_JSTRING ||
	    sl_timestamp_parse(w[0].str, w[0].str_len, &v->w.start) ||
	    sl_timestamp_parse(w[1].str, w[1].str_len, &v->w.end))
		return SL_EMALFORMED;
	return 0;
}

/*
 * A JSON field into (row, col), or only converted when the column is not
 * used. Returns 0, SL_EMALFORMED (left null) or errno.
 */
static int set_json(struct sl_decoder *d, struct sl_batch *b, size_t row, size_t col,
		    const struct sl_jfield *f)
{
	enum sl_type t = d->schema->cols[col].type;
	union sl_cell v;
	int32_t days;
	int rc;

	if (f->kind == SL_JABSENT || f->kind == SL_JNULL)
		return 0;
	switch (t) {
	case SL_TYPE_STRING:
		if (f->kind == SL_JSTRING)
			return sl_batch_set_str(b, row, col, f->str, f->str_len);
		if (f->kind != SL_JOBJECT && f->kind != SL_JARRAY)
			return sl_batch_set_str(b, row, col, f->raw, f->raw_len);
		if ((rc = reserve(&d->scratch, &d->scratch_cap, f->raw_len)))
			return rc;
		return sl_batch_set_str(b, row, col, d->scratch,
					sl_jscan_compact(f->raw, f->raw_len, d->scratch));
	case SL_TYPE_BIGINT:
	case SL_TYPE_INT:
		if (f->kind != SL_JNUMBER || !f->is_int ||
		    parse_int(f->raw, f->raw_len, t == SL_TYPE_INT ? INT32_MIN : INT64_MIN,
			      t == SL_TYPE_INT ? INT32_MAX : INT64_MAX, &v.i))
			return SL_EMALFORMED;
		break;
	case SL_TYPE_DOUBLE:
		if (f->kind == SL_JSTRING && non_finite(f->str, f->str_len, &v.d))
			break;
		if (f->kind != SL_JNUMBER)
			return SL_EMALFORMED;
		/*
		 * An unused column only needs to know the value is finite: a
		 * number without an exponent and under 300 digits is (DBL_MAX
		 * has 309), so strtod is spared for it.
		 */
		if (!d->used[col] && f->raw_len < 300 && !memchr(f->raw, 'e', f->raw_len) &&
		    !memchr(f->raw, 'E', f->raw_len))
			return 0;
		if (parse_double(d, f->raw, f->raw_len, &v.d))
			return SL_EMALFORMED;
		break;
	case SL_TYPE_WINDOW:
		if ((rc = window_value(d, f, &v)))
			return rc;
		break;
	case SL_TYPE_BOOLEAN:
		if (f->kind != SL_JTRUE && f->kind != SL_JFALSE)
			return SL_EMALFORMED;
		v.i = f->kind == SL_JTRUE;
		break;
	case SL_TYPE_TIMESTAMP:
		if (f->kind == SL_JSTRING) {
			if (sl_timestamp_parse(f->str, f->str_len, &v.i))
				return SL_EMALFORMED;
		} else if (f->kind == SL_JNUMBER && f->is_int) {
			/* epoch seconds, as Spark reads a JSON integer */
			if (parse_int(f->raw, f->raw_len, INT64_MIN / 1000000, INT64_MAX / 1000000,
				      &v.i))
				return SL_EMALFORMED;
			v.i *= 1000000;
		} else {
			return SL_EMALFORMED;
		}
		break;
	case SL_TYPE_DATE:
		if (f->kind != SL_JSTRING || sl_date_parse(f->str, f->str_len, &days))
			return SL_EMALFORMED;
		v.i = days;
		break;
	default:
		return SL_EMALFORMED;
	}
	if (d->used[col])
		put_cell(b, row, col, t, &v);
	return 0;
}

/* Finds the column called name[0..len): exact first, then ignoring ASCII case; or -1. */
static long find_col(const struct sl_schema *sc, const char *name, size_t len)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t c = 0; c < sc->n; c++) {
			const char *cn = sc->cols[c].name;
			if (strlen(cn) == len &&
			    (pass ? !strncasecmp(cn, name, len) : !memcmp(cn, name, len)))
				return (long)c;
		}
	return -1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Fills pkind/pcell from the folder components of path. */
static int partitions(struct sl_decoder *d, const char *path)
{
	const struct sl_schema *sc = d->schema;
	size_t used = 0, plen;
	const char *p, *slash;
	int rc;

	memset(d->pkind, PART_NONE, sc->n);
	if (!path)
		return 0;
	plen = strlen(path);
	if ((rc = reserve(&d->pbuf, &d->pbuf_cap, plen + 1)))
		return rc;
	for (p = path; (slash = strchr(p, '/')); p = slash + 1) {
		const char *eq = memchr(p, '=', (size_t)(slash - p));
		if (!eq || eq == p)
			continue;
		long col = find_col(sc, p, (size_t)(eq - p));
		if (col < 0 || col == d->corrupt)
			continue;
		/* Hive unescaping: %XX is one byte; anything else is literal */
		char *v = d->pbuf + used;
		size_t n = 0;
		for (const char *s = eq + 1; s < slash; s++) {
			int hi, lo;
			if (*s == '%' && slash - s > 2 && (hi = hexval(s[1])) >= 0 &&
			    (lo = hexval(s[2])) >= 0) {
				v[n++] = (char)(hi << 4 | lo);
				s += 2;
			} else {
				v[n++] = *s;
			}
		}
		enum sl_type t = sc->cols[col].type;
		d->pkind[col] = PART_NULL;
		if (!n || (n == 26 && !memcmp(v, "__HIVE_DEFAULT_PARTITION__", 26)))
			continue;
		if (t == SL_TYPE_STRING) {
			if (sl_jscan_utf8_prefix(v, n) != n)
				continue;
			d->pcell[col].s.off = (uint32_t)used;
			d->pcell[col].s.len = (uint32_t)n;
			used += n;
		} else if (conv_text(d, t, v, n, &d->pcell[col])) {
			continue;
		}
		d->pkind[col] = PART_VALUE;
	}
	return 0;
}

/* Splits a csv line into d->fields. Returns 0, SL_EMALFORMED (reason noted) or ENOMEM. */
static int csv_split(struct sl_decoder *d, const char *line, size_t len)
{
	const char *p = line, *end = line + len;
	size_t ulen = 0;
	int rc;

	if ((rc = reserve(&d->ubuf, &d->ubuf_cap, len + 1)))
		return rc;
	d->nfields = 0;
	for (;;) {
		struct csv_field f = {.s = p, .len = 0, .quoted = false};
		if (p < end && *p == '"') {
			size_t start = ulen;
			p++;
			for (;;) {
				const char *q = memchr(p, '"', (size_t)(end - p));
				if (!q) {
					malformed(d, "unterminated quoted field %zu",
						  d->nfields + 1);
					return SL_EMALFORMED;
				}
				memcpy(d->ubuf + ulen, p, (size_t)(q - p));
				ulen += (size_t)(q - p);
				p = q + 1;
				if (p < end && *p == '"') {
					d->ubuf[ulen++] = '"';
					p++;
					continue;
				}
				break;
			}
			if (p < end && *p != d->sep) {
				malformed(d, "text after the closing quote of field %zu",
					  d->nfields + 1);
				return SL_EMALFORMED;
			}
			f.s = d->ubuf + start;
			f.len = ulen - start;
			f.quoted = true;
		} else {
			const char *q = memchr(p, d->sep, (size_t)(end - p));
			if (!q)
				q = end;
			f.len = (size_t)(q - p);
			p = q;
		}
		if (d->nfields == d->fcap) {
			size_t cap = d->fcap ? d->fcap * 2 : 16;
			struct csv_field *nf = realloc(d->fields, cap * sizeof(*nf));
			if (!nf)
				return ENOMEM;
			d->fields = nf;
			d->fcap = cap;
		}
		d->fields[d->nfields++] = f;
		if (p == end)
			return 0;
		p++; /* the separator */
	}
}

/* Maps columns to csv fields for the current file: by position, or by the header's names. */
static int csv_map(struct sl_decoder *d, const char *header, size_t hlen)
{
	const struct sl_schema *sc = d->schema;
	size_t k = 0, named = 0;
	int rc;

	for (size_t c = 0; c < sc->n; c++) {
		d->src[c] = -1;
		if ((long)c != d->corrupt && d->pkind[c] == PART_NONE)
			d->src[c] = (long)k++;
	}
	d->expect = k;
	if (!header)
		return 0;
	rc = csv_split(d, header, hlen);
	d->bad = false; /* an unreadable header just means columns by position */
	if (rc == ENOMEM)
		return rc;
	if (rc || sl_jscan_utf8_prefix(header, hlen) != hlen)
		return 0;
	for (int pass = 0; pass < 2; pass++)
		for (size_t c = 0; c < sc->n && !named; c++)
			for (size_t i = 0; d->src[c] >= 0 && i < d->nfields; i++) {
				const struct csv_field *f = &d->fields[i];
				if (strlen(sc->cols[c].name) == f->len &&
				    (pass ? !strncasecmp(sc->cols[c].name, f->s, f->len)
					  : !memcmp(sc->cols[c].name, f->s, f->len)))
					named++;
			}
	if (!named)
		return 0;
	for (size_t c = 0; c < sc->n; c++) {
		if (d->src[c] < 0)
			continue;
		d->src[c] = -1;
		for (int pass = 0; pass < 2 && d->src[c] < 0; pass++)
			for (size_t i = 0; i < d->nfields; i++) {
				const struct csv_field *f = &d->fields[i];
				if (strlen(sc->cols[c].name) == f->len &&
				    (pass ? !strncasecmp(sc->cols[c].name, f->s, f->len)
					  : !memcmp(sc->cols[c].name, f->s, f->len))) {
					d->src[c] = (long)i;
					break;
				}
			}
	}
	d->expect = d->nfields;
	return 0;
}

static int csv_record(struct sl_decoder *d, struct sl_batch *b, size_t row, const char *line,
		      size_t len)
{
	const struct sl_schema *sc = d->schema;
	int rc;

	if (sl_jscan_utf8_prefix(line, len) != len) {
		malformed(d, "invalid UTF-8");
		return 0;
	}
	rc = csv_split(d, line, len);
	if (rc == SL_EMALFORMED)
		return 0;
	if (rc)
		return rc;
	if (d->nfields != d->expect)
		malformed(d, "%zu fields, expected %zu", d->nfields, d->expect);
	for (size_t c = 0; c < sc->n; c++) {
		long i = d->src[c];
		if (i < 0 || (size_t)i >= d->nfields)
			continue;
		const struct csv_field *f = &d->fields[i];
		rc = set_text(d, b, row, c, f->s, f->len, f->quoted);
		if (rc == SL_EMALFORMED)
			malformed(d, "column '%s': cannot convert '%.*s' to %s", sc->cols[c].name,
				  f->len > 40 ? 40 : (int)f->len, f->s,
				  sl_config_type_name(sc->cols[c].type));
		else if (rc)
			return rc;
	}
	return 0;
}

/* scanned: jf holds the line's fields already (sl_jscan_next) */
static int json_record(struct sl_decoder *d, struct sl_batch *b, size_t row, const char *line,
		       size_t len, bool scanned)
{
	const struct sl_schema *sc = d->schema;
	size_t off;
	int rc;

	rc = scanned ? 0 : sl_jscan_line(d->js, line, len, d->jf);
	if (rc == SL_EMALFORMED) {
		const char *why = sl_jscan_error(d->js, &off);
		malformed(d, "not a JSON object: %s at byte %zu", why, off + 1);
		return 0;
	}
	if (rc)
		return rc;
	for (size_t i = 0; i < d->njcol; i++) {
		size_t c = d->jcol[i];
		if (d->pkind[c] != PART_NONE)
			continue;
		rc = set_json(d, b, row, c, &d->jf[i]);
		if (rc == SL_EMALFORMED)
			malformed(d, "field '%s': cannot convert %s to %s", sc->cols[c].name,
				  kind_name(d->jf[i].kind), sl_config_type_name(sc->cols[c].type));
		else if (rc)
			return rc;
	}
	return 0;
}

/* The raw line into _corrupt_record, invalid UTF-8 replaced by U+FFFD. */
static int set_corrupt(struct sl_decoder *d, struct sl_batch *b, size_t row, const char *line,
		       size_t len)
{
	size_t ok = sl_jscan_utf8_prefix(line, len), n = 0;
	int rc;

	if (ok == len)
		return sl_batch_set_str(b, row, (size_t)d->corrupt, line, len);
	if ((rc = reserve(&d->scratch, &d->scratch_cap, 3 * len)))
		return rc;
	while (len) {
		memcpy(d->scratch + n, line, ok);
		n += ok;
		line += ok;
		len -= ok;
		if (!len)
			break;
		memcpy(d->scratch + n, "\xEF\xBF\xBD", 3);
		n += 3;
		line++;
		len--;
		ok = sl_jscan_utf8_prefix(line, len);
	}
	return sl_batch_set_str(b, row, (size_t)d->corrupt, d->scratch, n);
}

static bool blank(const struct sl_decoder *d, const char *line, size_t len)
{
	if (d->format != SL_SOURCE_JSON)
		return len == 0;
	for (size_t i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
			return false;
	return true;
}

/* Decodes one non-blank record into a new row, applying the mode. */
static int record(struct sl_decoder *d, struct sl_batch *b, const char *line, size_t len,
		  bool scanned, struct sl_decode_stats *st)
{
	const struct sl_schema *sc = d->schema;
	size_t row, arena = b->arena_len;
	int rc;

	if ((rc = sl_batch_add_row(b, &row)))
		return rc;
	for (size_t c = 0; c < sc->n; c++) {
		if (d->pkind[c] != PART_VALUE || !d->used[c])
			continue;
		if (sc->cols[c].type == SL_TYPE_STRING)
			rc = sl_batch_set_str(b, row, c, d->pbuf + d->pcell[c].s.off,
					      d->pcell[c].s.len);
		else
			put_cell(b, row, c, sc->cols[c].type, &d->pcell[c]);
		if (rc)
			return rc;
	}
	d->bad = false;
	if (d->format == SL_SOURCE_JSON) {
		rc = json_record(d, b, row, line, len, scanned);
	} else if (d->format == SL_SOURCE_CSV) {
		rc = csv_record(d, b, row, line, len);
	} else if (d->pkind[d->text_col] == PART_NONE) {
		if (sl_jscan_utf8_prefix(line, len) != len)
			malformed(d, "invalid UTF-8");
		else if (d->used[d->text_col])
			rc = sl_batch_set_str(b, row, (size_t)d->text_col, line, len);
	}
	if (rc)
		return rc;
	if (d->bad) {
		if (st)
			st->malformed++;
		if (d->mode == SL_MODE_FAILFAST)
			return SL_EMALFORMED;
		if (d->mode == SL_MODE_DROPMALFORMED) {
			sl_batch_drop_last(b);
			b->arena_len = arena;
			if (st)
				st->dropped++;
			return 0;
		}
		if (d->corrupt >= 0 && d->used[d->corrupt] &&
		    (rc = set_corrupt(d, b, row, line, len)))
			return rc;
	}
	if (st) {
		st->rows++;
		for (size_t c = 0; c < sc->n && c < st->ncols; c++)
			if (sc->cols[c].not_null && sl_batch_is_null(b, row, c))
				st->null_counts[c]++;
	}
	return 0;
}

#define READ_AHEAD 4096 /* bytes ahead of the line start the decoder asks for */

int sl_decode_file(struct sl_decoder *d, const char *path, const char *data, size_t len,
		   struct sl_batch *b, struct sl_decode_stats *st, struct sl_decode_error *err)
{
	const char *p = data, *end = data + len;
	size_t nrows = b->nrows, arena = b->arena_len;
	bool need_header = d->format == SL_SOURCE_CSV && d->header;
	uint64_t lineno = 0;
	int rc;

	if ((rc = partitions(d, path)))
		return rc;
	if (d->format == SL_SOURCE_CSV && !need_header && (rc = csv_map(d, NULL, 0)))
		return rc;
	if (len >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3))
		p += 3;
	while (p < end) {
		const char *line = p;
		size_t n;

		/*
		 * The bytes a page on: the CPU's own prefetcher follows the
		 * scan within a 4 KiB page but stops at its end, where the
		 * next page's first loads (and its TLB entry) would stall the
		 * scanner. Asked a page ahead, they come while this one is read.
		 */
		__builtin_prefetch((const void *)((uintptr_t)p + READ_AHEAD)); /* may lie past end: a hint */

		/*
		 * A JSON line is scanned as it is found: the usual line, one
		 * valid object, is read once. Any other is found first, then
		 * scanned (or found blank) as before.
		 */
		bool scanned = d->format == SL_SOURCE_JSON &&
			       sl_jscan_next(d->js, p, end, d->jf, &n) == 0;
		if (!scanned) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			n = (size_t)((nl ? nl : end) - p);
		}
		p = line + n < end ? line + n + 1 : end;
		lineno++;
		if (n && line[n - 1] == '\r')
			n--;
		if (!scanned && blank(d, line, n))
			continue;
		if (need_header) {
			need_header = false;
			if ((rc = csv_map(d, line, n)))
				goto restore;
			continue;
		}
		if (st)
			st->lines++;
		rc = record(d, b, line, n, scanned, st);
		if (rc == SL_EMALFORMED && err) {
			err->line = lineno;
			snprintf(err->reason, sizeof(err->reason), "%s", d->why);
		}
		if (rc)
			goto restore;
	}
	if (need_header && d->format == SL_SOURCE_CSV)
		rc = csv_map(d, NULL, 0); /* a file of blank lines: nothing to map */
	if (!rc) {
		if (st)
			st->read_lines += lineno;
		return 0;
	}
restore:
	b->nrows = nrows;
	b->arena_len = arena;
	return rc;
}
