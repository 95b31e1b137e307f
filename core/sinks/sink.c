/* SPDX-License-Identifier: MIT */
/*
 * File sink formatting: rows of a batch to JSON Lines or CSV parts, grouped
 * by Hive-style partition folders, compressed through the codec. The value
 * formats are documented at sl_sink_format() in sink.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "sink.h"
#include "strbuf.h"

#define NAME_MAX_BYTES 255 /* longest folder name Linux accepts */
#define DEFAULT_PARTITION "__HIVE_DEFAULT_PARTITION__"

/*
 * The length of the UTF-8 sequence at s (n > 0 bytes available). *valid
 * tells whether it is a well-formed character; when not, the length is
 * that of the maximal subpart (at least 1), which one U+FFFD replaces.
 */
static size_t utf8_seq(const unsigned char *s, size_t n, bool *valid)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xBF;
	size_t need, i;

	*valid = true;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 3;
		if (c == 0xE0)
			lo = 0xA0; /* no overlong forms */
		else if (c == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F; /* nothing above U+10FFFF */
	} else {
		*valid = false;
		return 1;
	}
	for (i = 1; i < need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi) {
			*valid = false;
			return i;
		}
		lo = 0x80;
		hi = 0xBF;
	}
	return need;
}

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
static const char hexdigits[] = "0123456789ABCDEF";

/* A JSON string, quotes included, escaped as Jackson does (see sink.h). */
static void put_json_str(struct sl_strbuf *b, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;

	sl_strbuf_addc(b, '"');
	while (i < n) {
		unsigned char c = s[i];
		const char *esc = NULL;
		char u[6];
		bool valid;
		size_t k;

		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			i++;
			run++;
			continue;
		}
		sl_strbuf_add(b, s + i - run, run);
		run = 0;
		if (c >= 0x80) {
			k = utf8_seq(s + i, n - i, &valid);
			if (valid)
				sl_strbuf_add(b, s + i, k);
			else
				sl_strbuf_add(b, replacement, 3);
			i += k;
			continue;
		}
		switch (c) {
		case '"':
			esc = "\\\"";
			break;
		case '\\':
			esc = "\\\\";
			break;
		case '\b':
			esc = "\\b";
			break;
		case '\t':
			esc = "\\t";
			break;
		case '\n':
			esc = "\\n";
			break;
		case '\f':
			esc = "\\f";
			break;
		case '\r':
			esc = "\\r";
			break;
		default:
			memcpy(u, "\\u00", 4);
			u[4] = hexdigits[c >> 4];
			u[5] = hexdigits[c & 15];
			sl_strbuf_add(b, u, 6);
			break;
		}
		if (esc)
			sl_strbuf_adds(b, esc);
		i++;
	}
	sl_strbuf_add(b, s + i - run, run);
	sl_strbuf_addc(b, '"');
}

/* Bytes with invalid UTF-8 replaced; for CSV the quotes doubled too. */
static void put_clean(struct sl_strbuf *b, const char *str, size_t n, bool double_quotes)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;

	while (i < n) {
		bool valid;
		size_t k;

		if (s[i] < 0x80 && !(double_quotes && s[i] == '"')) {
			i++;
			run++;
			continue;
		}
		sl_strbuf_add(b, s + i - run, run);
		run = 0;
		if (s[i] == '"') {
			sl_strbuf_add(b, "\"\"", 2);
			i++;
			continue;
		}
		k = utf8_seq(s + i, n - i, &valid);
		sl_strbuf_add(b, valid ? (const char *)s + i : replacement, valid ? k : 3);
		i += k;
	}
	sl_strbuf_add(b, s + i - run, run);
}

/* A CSV field: quoted when it must be (see sink.h). */
static void put_csv_str(struct sl_strbuf *b, const char *s, size_t n)
{
	bool quote = n == 0 || s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t' ||
		     memchr(s, ',', n) || memchr(s, '"', n) || memchr(s, '\n', n) ||
		     memchr(s, '\r', n);

	if (quote)
		sl_strbuf_addc(b, '"');
	put_clean(b, s, n, true);
	if (quote)
		sl_strbuf_addc(b, '"');
}

/* Floor division and its non-negative remainder, for dates before 1970. */
static int64_t floordiv(int64_t a, int64_t d, int64_t *rem)
{
	int64_t q = a / d, r = a % d;

	if (r < 0) {
		q--;
		r += d;
	}
	if (rem)
		*rem = r;
	return q;
}

struct civil {
	int64_t year; /* proleptic Gregorian, astronomical (0 = 1 BC) */
	int month;    /* 1..12 */
	int day;      /* 1..31 */
};

/*
 * Days since 1970-01-01 to a civil date (H. Hinnant's days_from_civil,
 * inverted). The 400-year era is split off first so no step overflows.
 */
static struct civil civil_from_days(int64_t days)
{
	int64_t rem, era = floordiv(days, 146097, &rem), z, doe, yoe, doy, mp;
	struct civil c;

	z = rem + 719468; /* days since 0000-03-01, within [0, 2 eras) */
	era += floordiv(z, 146097, &doe);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	c.day = (int)(doy - (153 * mp + 2) / 5 + 1);
	c.month = (int)(mp < 10 ? mp + 3 : mp - 9);
	c.year = yoe + era * 400 + (c.month <= 2);
	return c;
}

/* "YYYY-MM-DD" into out (>= 32 bytes); years outside 0..9999 as +YYYYY / -YYYY. */
/* n as exactly w decimal digits (0 <= n < 10^w) */
static inline char *digits(char *p, unsigned n, int w)
{
	for (int i = w - 1; i >= 0; i--) {
		p[i] = (char)('0' + n % 10);
		n /= 10;
	}
	return p + w;
}

static int fmt_date(char *out, int64_t days)
{
	struct civil c = civil_from_days(days);

	if (c.year >= 0 && c.year <= 9999) { /* the common case, without printf */
		char *p = digits(out, (unsigned)c.year, 4);
		*p++ = '-';
		p = digits(p, (unsigned)c.month, 2);
		*p++ = '-';
		p = digits(p, (unsigned)c.day, 2);
		*p = 0;
		return 10;
	}
	if (c.year < 0)
		return snprintf(out, 32, "-%04" PRId64 "-%02d-%02d", -c.year, c.month, c.day);
	if (c.year > 9999)
		return snprintf(out, 32, "+%" PRId64 "-%02d-%02d", c.year, c.month, c.day);
	return snprintf(out, 32, "%04" PRId64 "-%02d-%02d", c.year, c.month, c.day);
}

/*
 * A TIMESTAMP (microseconds) into out (>= 48 bytes): with iso,
 * "YYYY-MM-DDTHH:MM:SS.mmmZ", milliseconds truncated toward the past; else
 * Spark's cast to string, "YYYY-MM-DD HH:MM:SS[.ffffff]", trailing zeros of
 * the fraction dropped.
 */
static void fmt_timestamp(char *out, int64_t us, bool iso)
{
	int64_t frac, secs = floordiv(us, 1000000, &frac), sod;
	int64_t days = floordiv(secs, 86400, &sod);
	int n = fmt_date(out, days);
	int h = (int)(sod / 3600), m = (int)(sod / 60 % 60), s = (int)(sod % 60);

	if (iso) {
		char *p = out + n;
		*p++ = 'T';
		p = digits(p, (unsigned)h, 2);
		*p++ = ':';
		p = digits(p, (unsigned)m, 2);
		*p++ = ':';
		p = digits(p, (unsigned)s, 2);
		*p++ = '.';
		p = digits(p, (unsigned)(frac / 1000), 3);
		*p++ = 'Z';
		*p = 0;
		return;
	}
	n += snprintf(out + n, 48 - (size_t)n, " %02d:%02d:%02d", h, m, s);
	if (frac) {
		int digits = 6;

		while (frac % 10 == 0) {
			frac /= 10;
			digits--;
		}
		snprintf(out + n, 48 - (size_t)n, ".%0*" PRId64, digits, frac);
	}
}

/* An int64 in decimal, without printf (the hot path of aggregate output). */
static void fmt_int(char *out, int64_t v)
{
	char tmp[24];
	int n = 0;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*out++ = '-';
	while (n)
		*out++ = tmp[--n];
	*out = 0;
}

/*
 * A double as Java's Double.toString into out (>= 32 bytes): the fewest
 * significant digits (at least two) that strtod reads back to d, each
 * length tried correctly rounded, laid out as plain decimal when
 * 1e-3 <= |d| < 1e7, else as d.dddE[-]n.
 */
static void fmt_double(char *out, double d)
{
	char tmp[40], digits[20], *p = out, *e;
	int exp, nd = 0;

	if (isnan(d)) {
		strcpy(out, "NaN");
		return;
	}
	if (isinf(d)) {
		strcpy(out, d < 0 ? "-Infinity" : "Infinity");
		return;
	}
	if (d == 0) {
		strcpy(out, signbit(d) ? "-0.0" : "0.0");
		return;
	}
	/*
	 * From two significant digits: when one would do, Java (19 and later)
	 * shows the closest two-digit decimal, so MIN_VALUE is 4.9E-324.
	 */
	for (int prec = 1; prec < 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	/* tmp is [-]D[.DDD]e[+-]XX: collect the digits and the exponent */
	for (const char *t = tmp; *t && *t != 'e'; t++)
		if (*t >= '0' && *t <= '9')
			digits[nd++] = *t;
	e = strchr(tmp, 'e');
	exp = (int)strtol(e + 1, NULL, 10);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	if (d < 0)
		*p++ = '-';
	if (exp >= -3 && exp < 7) {
		if (exp < 0) {
			*p++ = '0';
			*p++ = '.';
			for (int i = -1; i > exp; i--)
				*p++ = '0';
			memcpy(p, digits, (size_t)nd);
			p += nd;
		} else {
			for (int i = 0; i <= exp; i++)
				*p++ = i < nd ? digits[i] : '0';
			*p++ = '.';
			if (nd > exp + 1) {
				memcpy(p, digits + exp + 1, (size_t)(nd - exp - 1));
				p += nd - exp - 1;
			} else {
				*p++ = '0';
			}
		}
		*p = 0;
		return;
	}
	*p++ = digits[0];
	*p++ = '.';
	if (nd > 1) {
		memcpy(p, digits + 1, (size_t)(nd - 1));
		p += nd - 1;
	} else {
		*p++ = '0';
	}
	snprintf(p, 8, "E%d", exp);
}

/*
 * A non-null, non-string scalar as text (>= 48 bytes): the same for JSON
 * and CSV; iso picks the TIMESTAMP form (see fmt_timestamp).
 */
static void fmt_scalar(char *out, enum sl_type t, const union sl_cell *v, bool iso)
{
	switch (t) {
	case SL_TYPE_BIGINT:
	case SL_TYPE_INT:
		fmt_int(out, v->i);
		break;
	case SL_TYPE_BOOLEAN:
		strcpy(out, v->i ? "true" : "false");
		break;
	case SL_TYPE_DOUBLE:
		fmt_double(out, v->d);
		break;
	case SL_TYPE_TIMESTAMP:
		fmt_timestamp(out, v->i, iso);
		break;
	case SL_TYPE_DATE:
		fmt_date(out, v->i);
		break;
	case SL_TYPE_STRING:
	case SL_TYPE_WINDOW:
		out[0] = 0; /* not scalars here: the callers handle them */
		break;
	}
}

void sl_sink_fmt_scalar(char *out, enum sl_type t, const union sl_cell *v)
{
	fmt_scalar(out, t, v, false);
}

/*
 * What formatting a row needs besides its values: the query, the columns
 * left out, each JSON field's `"name":` escaped once, and the text of the
 * last window written (a batch's rows repeat few windows).
 */
struct rowfmt {
	const struct sl_query_config *q;
	const bool *skip;       /* NULL: none */
	struct sl_strbuf names; /* the fields' `"name":`, one after the other */
	size_t *name_end;       /* where field c's ends in names */
	bool has_window;
	int64_t wstart, wend;
	char wtext[112];
	size_t wlen;
};

static int rowfmt_init(struct rowfmt *f, const struct sl_query_config *q, const bool *skip)
{
	memset(f, 0, sizeof(*f));
	f->q = q;
	f->skip = skip;
	f->name_end = calloc(q->out.n + 1, sizeof(*f->name_end));
	if (!f->name_end)
		return ENOMEM;
	for (size_t c = 0; c < q->out.n; c++) {
		put_json_str(&f->names, q->out.cols[c].name, strlen(q->out.cols[c].name));
		sl_strbuf_addc(&f->names, ':');
		f->name_end[c] = f->names.len;
	}
	return f->names.oom ? ENOMEM : 0;
}

static void rowfmt_release(struct rowfmt *f)
{
	sl_strbuf_release(&f->names);
	free(f->name_end);
}

static void put_json_value(struct sl_strbuf *b, struct rowfmt *f, const struct sl_batch *batch,
			   size_t row, size_t col)
{
	const struct sl_batch_col *c = &batch->cols[col];
	const union sl_cell *v = &c->cells[row];
	char tmp[48];
	size_t n;

	switch (c->type) {
	case SL_TYPE_STRING: {
		const char *s = sl_batch_str(batch, row, col, &n);
		put_json_str(b, s, n);
		return;
	}
	case SL_TYPE_WINDOW:
		if (!f->has_window || f->wstart != v->w.start || f->wend != v->w.end) {
			char end[48];
			fmt_timestamp(tmp, v->w.start, true);
			fmt_timestamp(end, v->w.end, true);
			f->wlen = (size_t)snprintf(f->wtext, sizeof(f->wtext),
						   "{\"start\":\"%s\",\"end\":\"%s\"}", tmp, end);
			f->wstart = v->w.start;
			f->wend = v->w.end;
			f->has_window = true;
		}
		sl_strbuf_add(b, f->wtext, f->wlen);
		return;
	case SL_TYPE_DOUBLE:
		fmt_double(tmp, v->d);
		/* Jackson writes non-finite doubles as strings */
		if (!isfinite(v->d)) {
			put_json_str(b, tmp, strlen(tmp));
			return;
		}
		break;
	case SL_TYPE_TIMESTAMP:
	case SL_TYPE_DATE:
		fmt_scalar(tmp, c->type, v, true);
		sl_strbuf_addc(b, '"');
		sl_strbuf_adds(b, tmp);
		sl_strbuf_addc(b, '"');
		return;
	default:
		fmt_scalar(tmp, c->type, v, true);
		break;
	}
	sl_strbuf_adds(b, tmp);
}

static void put_csv_value(struct sl_strbuf *b, const struct sl_batch *batch, size_t row, size_t col)
{
	const struct sl_batch_col *c = &batch->cols[col];
	char tmp[48];
	size_t n;

	if (c->type == SL_TYPE_STRING) {
		const char *s = sl_batch_str(batch, row, col, &n);
		put_csv_str(b, s, n);
		return;
	}
	fmt_scalar(tmp, c->type, &c->cells[row], true);
	sl_strbuf_adds(b, tmp);
}

/* Appends escapePathName(s) (see sink.h), invalid UTF-8 replaced. */
static void put_path_escaped(struct sl_strbuf *b, const char *str, size_t n)
{
	static const char special[] = "\"#%'*/:=?\\{[]^";
	const unsigned char *s = (const unsigned char *)str;

	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];

		if (c < 0x20 || c == 0x7F || (c && strchr(special, c))) {
			char e[3] = {'%', hexdigits[c >> 4], hexdigits[c & 15]};
			sl_strbuf_add(b, e, 3);
			i++;
		} else if (c < 0x80) {
			sl_strbuf_addc(b, (char)c);
			i++;
		} else {
			bool valid;
			size_t k = utf8_seq(s + i, n - i, &valid);
			sl_strbuf_add(b, valid ? (const char *)s + i : replacement, valid ? k : 3);
			i += k;
		}
	}
}

/* Appends the row's partition folder ("k=v/k2=v2") to b. ENAMETOOLONG or 0. */
static int put_dir(struct sl_strbuf *b, const struct sl_query_config *q, const struct sl_batch *batch,
		   size_t row)
{
	for (size_t i = 0; i < q->npartition_by; i++) {
		size_t col = q->partition_by[i], start, n;
		const char *name = q->out.cols[col].name;
		char tmp[48];

		if (i)
			sl_strbuf_addc(b, '/');
		start = b->len;
		put_path_escaped(b, name, strlen(name));
		sl_strbuf_addc(b, '=');
		if (sl_batch_is_null(batch, row, col)) {
			sl_strbuf_adds(b, DEFAULT_PARTITION);
		} else if (batch->cols[col].type == SL_TYPE_STRING) {
			const char *s = sl_batch_str(batch, row, col, &n);
			if (n == 0)
				sl_strbuf_adds(b, DEFAULT_PARTITION);
			else
				put_path_escaped(b, s, n);
		} else {
			fmt_scalar(tmp, batch->cols[col].type, &batch->cols[col].cells[row], false);
			put_path_escaped(b, tmp, strlen(tmp));
		}
		if (!b->oom && b->len - start > NAME_MAX_BYTES)
			return ENAMETOOLONG;
	}
	return 0;
}

struct group {
	char *dir;	/* NUL-terminated folder */
	size_t dirlen;	/* strlen(dir) */
	uint64_t hash;	/* of dir */
	struct sl_strbuf out; /* formatted rows */
	size_t rows;	/* rows in out */
	size_t *idx;	/* parquet: the rows' indexes in the batch (rows of them) */
	size_t cap;
};

/* The groups of one sl_sink_format() call, with a hash index on dir. */
struct groups {
	struct group *g;
	size_t n, cap;
	size_t *slots; /* group index + 1, 0 = empty; nslots a power of 2 */
	size_t nslots;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int groups_rehash(struct groups *gs)
{
	size_t nslots = gs->nslots ? gs->nslots * 2 : 16;
	size_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return ENOMEM;
	for (size_t i = 0; i < gs->n; i++) {
		size_t j = gs->g[i].hash & (nslots - 1);
		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = i + 1;
	}
	free(gs->slots);
	gs->slots = slots;
	gs->nslots = nslots;
	return 0;
}

static void groups_release(struct groups *gs)
{
	for (size_t i = 0; i < gs->n; i++) {
		free(gs->g[i].dir);
		free(gs->g[i].out.p);
		free(gs->g[i].idx);
	}
	free(gs->g);
	free(gs->slots);
}

/* A CSV part's first line: the names of the columns that are not partition columns. */
static void put_header(struct sl_strbuf *b, const struct sl_query_config *q)
{
	bool first = true;

	for (size_t c = 0; c < q->out.n; c++) {
		if (sl_sink_partition_col(q, c))
			continue;
		if (!first)
			sl_strbuf_addc(b, ',');
		first = false;
		put_csv_str(b, q->out.cols[c].name, strlen(q->out.cols[c].name));
	}
	sl_strbuf_addc(b, '\n');
}

/* The group of folder dir, added (its CSV header written) when new. */
static int groups_find(struct groups *gs, const struct sl_query_config *q, const char *dir,
		       size_t len, struct group **out)
{
	uint64_t h = hash_bytes(dir, len);
	struct group *g;
	size_t j;
	int rc;

	if (gs->nslots) {
		for (j = h & (gs->nslots - 1); gs->slots[j]; j = (j + 1) & (gs->nslots - 1)) {
			g = &gs->g[gs->slots[j] - 1];
			if (g->hash == h && g->dirlen == len && !memcmp(g->dir, dir, len)) {
				*out = g;
				return 0;
			}
		}
	}
	if ((gs->n + 1) * 2 > gs->nslots && (rc = groups_rehash(gs)))
		return rc;
	if (gs->n == gs->cap) {
		size_t cap = gs->cap ? gs->cap * 2 : 4;
		struct group *ng = realloc(gs->g, cap * sizeof(*ng));
		if (!ng)
			return ENOMEM;
		gs->g = ng;
		gs->cap = cap;
	}
	g = &gs->g[gs->n];
	memset(g, 0, sizeof(*g));
	g->dir = malloc(len + 1);
	if (!g->dir)
		return ENOMEM;
	memcpy(g->dir, dir, len);
	g->dir[len] = 0;
	g->dirlen = len;
	g->hash = h;
	if (q->sink_format == SL_SINK_CSV)
		put_header(&g->out, q);
	for (j = h & (gs->nslots - 1); gs->slots[j]; j = (j + 1) & (gs->nslots - 1))
		;
	gs->slots[j] = ++gs->n;
	*out = g;
	return 0;
}

/* Appends one row's line, without the columns f->skip marks. */
static void put_row(struct sl_strbuf *b, struct rowfmt *f, const struct sl_batch *batch, size_t row)
{
	bool csv = f->q->sink_format == SL_SINK_CSV, first = true;

	if (!csv)
		sl_strbuf_addc(b, '{');
	for (size_t c = 0; c < batch->schema->n; c++) {
		bool null;

		if (f->skip && f->skip[c])
			continue; /* a partition column: its value is in the folder name */
		null = sl_batch_is_null(batch, row, c);
		if (csv) {
			if (!first)
				sl_strbuf_addc(b, ',');
			if (!null)
				put_csv_value(b, batch, row, c);
		} else if (!null) {
			size_t from = c ? f->name_end[c - 1] : 0;
			if (!first)
				sl_strbuf_addc(b, ',');
			sl_strbuf_add(b, f->names.p + from, f->name_end[c] - from);
			put_json_value(b, f, batch, row, c);
		} else {
			continue; /* omitted: does not count as a first field */
		}
		first = false;
	}
	if (!csv)
		sl_strbuf_addc(b, '}');
	sl_strbuf_addc(b, '\n');
}

/* b's columns must be q->out's, and CSV has no struct column. */
static int check_shape(const struct sl_query_config *q, const struct sl_batch *b)
{
	if (!b->schema || b->schema->n != q->out.n)
		return EINVAL;
	for (size_t c = 0; c < q->out.n; c++) {
		if (b->cols[c].type != q->out.cols[c].type)
			return EINVAL;
		if (q->sink_format == SL_SINK_CSV && q->out.cols[c].type == SL_TYPE_WINDOW)
			return EINVAL;
	}
	for (size_t i = 0; i < q->npartition_by; i++)
		if (q->partition_by[i] >= q->out.n ||
		    q->out.cols[q->partition_by[i]].type == SL_TYPE_WINDOW)
			return EINVAL;
	return 0;
}

/* Moves the groups into new parts, compressing them when asked (parquet: encodes them). */
static int make_parts(const struct sl_query_config *q, const struct sl_batch *b, struct groups *gs,
		      struct sl_part **parts)
{
	struct sl_part *p = calloc(gs->n, sizeof(*p));
	int rc = 0;

	if (!p)
		return ENOMEM;
	for (size_t i = 0; i < gs->n; i++) {
		struct group *g = &gs->g[i];

		p[i].rows = g->rows;
		if (q->sink_format == SL_SINK_PARQUET) {
			rc = sl_sink_pq_part(q, b, g->idx, g->rows, &p[i].data, &p[i].len);
			if (rc) {
				sl_sink_parts_free(p, i);
				return rc;
			}
		} else if (q->compression == SL_COMPRESSION_ZSTD) {
			rc = sl_codec_compress(g->out.p, g->out.len, SL_SINK_ZSTD_LEVEL, &p[i].data,
					       &p[i].len);
			if (rc) {
				sl_sink_parts_free(p, i);
				return rc;
			}
		}
	}
	/* nothing can fail from here: hand the buffers over */
	for (size_t i = 0; i < gs->n; i++) {
		struct group *g = &gs->g[i];

		p[i].dir = g->dir;
		g->dir = NULL;
		if (q->sink_format != SL_SINK_PARQUET && q->compression != SL_COMPRESSION_ZSTD) {
			p[i].data = g->out.p;
			p[i].len = g->out.len;
			g->out.p = NULL;
		}
	}
	*parts = p;
	return rc;
}

int sl_sink_format(const struct sl_query_config *q, const struct sl_batch *b,
		   struct sl_part **parts, size_t *nparts)
{
	struct groups gs = {0};
	struct sl_strbuf dir = {0};
	struct sl_part *p = NULL;
	struct rowfmt f;
	bool *skip;
	int rc;

	if ((rc = check_shape(q, b)))
		return rc;
	if (b->nrows == 0 && q->sink_format == SL_SINK_PARQUET &&
	    q->output_mode == SL_OUTPUT_COMPLETE) {
		/* an empty snapshot: one part of no rows, which carries the schema */
		if (!(p = calloc(1, sizeof(*p))) || !(p->dir = strdup(""))) {
			free(p);
			return ENOMEM;
		}
		if ((rc = sl_sink_pq_part(q, b, NULL, 0, &p->data, &p->len))) {
			sl_sink_parts_free(p, 1);
			return rc;
		}
		*parts = p;
		*nparts = 1;
		return 0;
	}
	if (b->nrows == 0) {
		*parts = NULL;
		*nparts = 0;
		return 0;
	}
	skip = calloc(q->out.n, sizeof(*skip));
	if (!skip)
		return ENOMEM;
	for (size_t i = 0; i < q->npartition_by; i++)
		skip[q->partition_by[i]] = true;
	if ((rc = rowfmt_init(&f, q, skip)))
		goto groups_release;
	for (size_t row = 0; row < b->nrows; row++) {
		struct group *g;

		dir.len = 0;
		if ((rc = put_dir(&dir, q, b, row)))
			goto groups_release;
		sl_strbuf_addc(&dir, 0); /* room for a NUL, and never a NULL pointer */
		if (dir.oom) {
			rc = ENOMEM;
			goto groups_release;
		}
		rc = groups_find(&gs, q, dir.p, dir.len - 1, &g);
		if (rc)
			goto groups_release;
		if (q->sink_format == SL_SINK_PARQUET) {
			if (g->rows == g->cap) {
				size_t cap = g->cap ? g->cap * 2 : 64;
				size_t *v = realloc(g->idx, cap * sizeof(*v));
				if (!v) {
					rc = ENOMEM;
					goto groups_release;
				}
				g->idx = v;
				g->cap = cap;
			}
			g->idx[g->rows] = row;
		} else {
			put_row(&g->out, &f, b, row);
		}
		if (g->out.oom) {
			rc = ENOMEM;
			goto groups_release;
		}
		g->rows++;
	}
	rc = make_parts(q, b, &gs, &p);
	if (rc)
		goto groups_release;
	*parts = p;
	*nparts = gs.n;
groups_release:
	groups_release(&gs);
	rowfmt_release(&f);
	free(dir.p);
	free(skip);
	return rc;
}

int sl_sink_format_rows(const struct sl_query_config *q, const struct sl_batch *b, size_t from,
			size_t to, bool header, struct sl_strbuf *out)
{
	int rc;

	if ((rc = check_shape(q, b)))
		return rc;
	if (q->npartition_by || q->sink_format == SL_SINK_PARQUET || from > to || to > b->nrows)
		return EINVAL;
	struct rowfmt f;
	if ((rc = rowfmt_init(&f, q, NULL))) {
		rowfmt_release(&f);
		return rc;
	}
	if (header && q->sink_format == SL_SINK_CSV)
		put_header(out, q);
	for (size_t row = from; row < to && !out->oom; row++)
		put_row(out, &f, b, row);
	rowfmt_release(&f);
	return out->oom ? ENOMEM : 0;
}

bool sl_sink_partition_col(const struct sl_query_config *q, size_t c)
{
	for (size_t i = 0; i < q->npartition_by; i++)
		if (q->partition_by[i] == c)
			return true;
	return false;
}

void sl_sink_parts_free(struct sl_part *parts, size_t n)
{
	if (!parts)
		return;
	for (size_t i = 0; i < n; i++) {
		free(parts[i].dir);
		free(parts[i].data);
	}
	free(parts);
}

int sl_sink_part_name(char *buf, size_t len, const struct sl_query_config *q, uint64_t batch,
		      uint32_t part)
{
	char tmp[64];
	bool pq = q->sink_format == SL_SINK_PARQUET;
	int n = snprintf(tmp, sizeof(tmp), "part-%05" PRIu64 "-%05" PRIu32 "%s%s", batch, part,
			 pq ? ".parquet" : q->sink_format == SL_SINK_CSV ? ".csv" : ".jsonl",
			 !pq && q->compression == SL_COMPRESSION_ZSTD ? ".zst" : "");

	if (n < 0 || (size_t)n >= len)
		return ERANGE;
	memcpy(buf, tmp, (size_t)n + 1);
	return 0;
}
