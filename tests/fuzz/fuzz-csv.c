/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: CSV decoding (core/decode.c) and formatting (core/sink.c).
 * Arbitrary bytes are decoded as one CSV file under a fixed schema in the
 * three modes, with and without a header and with another separator: no
 * crash, and the modes agree with one another. Then a write→read round
 * trip: each decoded batch is formatted as CSV by sl_sink_format(), with
 * and without partition folders, read back with header:true, and must give
 * the same rows. abort() on a mismatch.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "config.h"
#include "decode.h"
#include "err.h"
#include "sink.h"

/*
 * Every type, a NOT NULL column, a name the CSV header must quote, and
 * _corrupt_record. The queries differ only in mode, header, separator and
 * partition folders; all format CSV.
 */
#define SCHEMA                                                                                     \
	"\"s STRING, n BIGINT, i INT, x DOUBLE, b BOOLEAN, t TIMESTAMP, dt DATE, "                 \
	"`S2, \\\"q\\\"` STRING NOT NULL, _corrupt_record STRING\""
#define QUERY(name, mode, header, sep, partition)                                                  \
	"\"" name "\": {\"source\": {\"format\": \"csv\", \"path\": \"in\", \"schema\": " SCHEMA   \
	", \"mode\": \"" mode "\", \"header\": " header ", \"sep\": \"" sep "\"}, "                \
	"\"sink\": {\"format\": \"csv\"" partition "}}"

/* clang-format off */
static const char config_text[] =
	"{\"queries\": {"
	QUERY("p", "PERMISSIVE", "false", ",", "") ", "
	QUERY("d", "DROPMALFORMED", "false", ",", "") ", "
	QUERY("f", "FAILFAST", "false", ",", "") ", "
	QUERY("h", "PERMISSIVE", "true", ",", "") ", "
	QUERY("tab", "PERMISSIVE", "false", "\\t", "") ", "
	QUERY("part", "PERMISSIVE", "true", ",", ", \"partitionBy\": [\"n\", \"s\"]")
	"}}";
/* clang-format on */

/* TIMESTAMPs the CSV grammar reads back: years 0000-9999 */
#define TS_MIN INT64_C(-62167219200000000)
#define TS_END INT64_C(253402300800000000)
#define PART_ROWS_MAX 200 /* the partitioned round trip is quadratic: small batches only */

static struct sl_config *cfg;
static const struct sl_query_config *qp, *qd, *qf, *qh, *qtab, *qpart;
static size_t corrupt, col_n, col_s, col_t; /* column indexes */

static const uint8_t *input;
static size_t input_len;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz-csv: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  input (%zu bytes): '", input_len);
	fwrite(input, 1, input_len, stderr);
	fprintf(stderr, "'\n");
	abort();
}

static void setup(void)
{
	char err[256];
	long c;

	if (sl_config_parse(config_text, sizeof(config_text) - 1, "fuzz-csv", &cfg, err,
			    sizeof(err))) {
		fprintf(stderr, "fuzz-csv: bad built-in config: %s\n", err);
		abort();
	}
	qp = sl_config_find(cfg, "p");
	qd = sl_config_find(cfg, "d");
	qf = sl_config_find(cfg, "f");
	qh = sl_config_find(cfg, "h");
	qtab = sl_config_find(cfg, "tab");
	qpart = sl_config_find(cfg, "part");
	if (!qp || !qd || !qf || !qh || !qtab || !qpart)
		abort();
	if ((c = sl_config_schema_find(&qp->source.schema, "_corrupt_record")) < 0)
		abort();
	corrupt = (size_t)c;
	col_n = (size_t)sl_config_schema_find(&qp->source.schema, "n");
	col_s = (size_t)sl_config_schema_find(&qp->source.schema, "s");
	col_t = (size_t)sl_config_schema_find(&qp->source.schema, "t");
}

struct run {
	struct sl_batch b;
	struct sl_decode_stats st;
	struct sl_decode_error err;
	int rc;
};

/* Decodes data with q's decoder into r (initialised here; release with run_release). */
static void decode(const struct sl_query_config *q, const char *path, const char *data, size_t len,
		   struct run *r)
{
	struct sl_decoder *d;

	memset(r, 0, sizeof(*r));
	if (sl_decoder_new(q, &d) || sl_batch_init(&r->b, &q->source.schema) ||
	    sl_decode_stats_init(&r->st, q->source.schema.n))
		abort();
	r->rc = sl_decode_file(d, path, data, len, &r->b, &r->st, &r->err);
	sl_decoder_free(d);
	if (r->rc == ENOMEM)
		abort(); /* libFuzzer's -rss_limit_mb / malloc limit reports it */
	if (r->rc != 0 && r->rc != SL_EMALFORMED)
		fail("sl_decode_file (%s) returned %d", q->name, r->rc);
	if (r->rc == SL_EMALFORMED && q->source.mode != SL_MODE_FAILFAST)
		fail("sl_decode_file (%s) returned SL_EMALFORMED outside FAILFAST", q->name);
	if (r->rc == 0 && r->st.rows != r->b.nrows)
		fail("%s: stats say %" PRIu64 " rows, the batch has %zu", q->name, r->st.rows,
		     r->b.nrows);
}

static void run_release(struct run *r)
{
	sl_batch_release(&r->b);
	sl_decode_stats_release(&r->st);
}

/* The length of a STRING cell (read directly: see str_eq). */
static size_t str_len(const struct sl_batch *a, size_t r, size_t c)
{
	return a->cols[c].cells[r].s.len;
}

/*
 * Compares two STRING cells. sl_batch_str() is only called on non-empty
 * strings: on a batch whose arena was never allocated it computes
 * NULL + 0, which UBSan reports (see tests/fuzz/run).
 */
static bool str_eq(const struct sl_batch *a, size_t ra, size_t c, const struct sl_batch *b,
		   size_t rb, size_t cb)
{
	size_t la = str_len(a, ra, c), lb = str_len(b, rb, cb);

	if (la != lb)
		return false;
	if (la == 0)
		return true;
	const char *sa = sl_batch_str(a, ra, c, &la), *sb = sl_batch_str(b, rb, cb, &lb);
	return !memcmp(sa, sb, la);
}

/* Same value (or both null); the column types are equal. */
static bool cell_eq(const struct sl_batch *a, size_t ra, const struct sl_batch *b, size_t rb,
		    size_t c)
{
	bool na = sl_batch_is_null(a, ra, c), nb = sl_batch_is_null(b, rb, c);

	if (na || nb)
		return na == nb;
	switch (a->cols[c].type) {
	case SL_TYPE_STRING:
		return str_eq(a, ra, c, b, rb, c);
	case SL_TYPE_DOUBLE:
		/* bit for bit: -0.0 must stay -0.0 */
		return !memcmp(&a->cols[c].cells[ra].d, &b->cols[c].cells[rb].d, sizeof(double));
	default:
		return a->cols[c].cells[ra].i == b->cols[c].cells[rb].i;
	}
}

static bool row_eq(const struct sl_batch *a, size_t ra, const struct sl_batch *b, size_t rb)
{
	for (size_t c = 0; c < a->schema->n; c++)
		if (!cell_eq(a, ra, b, rb, c))
			return false;
	return true;
}

/* The modes agree: DROPMALFORMED keeps PERMISSIVE's good rows; FAILFAST fails iff one is bad. */
static void check_modes(const struct run *p, const struct run *d, const struct run *f)
{
	size_t k = 0;

	if (p->st.lines != p->st.rows || p->st.dropped)
		fail("PERMISSIVE: %" PRIu64 " lines, %" PRIu64 " rows, %" PRIu64 " dropped",
		     p->st.lines, p->st.rows, p->st.dropped);
	if (d->st.malformed != p->st.malformed || d->st.dropped != p->st.malformed ||
	    d->b.nrows != p->b.nrows - p->st.malformed)
		fail("DROPMALFORMED: %zu rows, %" PRIu64 " malformed, %" PRIu64
		     " dropped; PERMISSIVE: %zu rows, %" PRIu64 " malformed",
		     d->b.nrows, d->st.malformed, d->st.dropped, p->b.nrows, p->st.malformed);
	/* a PERMISSIVE row is malformed exactly when its _corrupt_record is set */
	for (size_t r = 0; r < p->b.nrows; r++) {
		if (!sl_batch_is_null(&p->b, r, corrupt))
			continue;
		if (k >= d->b.nrows || !row_eq(&p->b, r, &d->b, k))
			fail("DROPMALFORMED row %zu differs from PERMISSIVE row %zu", k, r);
		k++;
	}
	if (k != d->b.nrows)
		fail("PERMISSIVE has %zu good rows, DROPMALFORMED %zu", k, d->b.nrows);
	for (size_t c = 0; c < p->b.schema->n; c++) {
		uint64_t nulls = 0;
		for (size_t r = 0; p->b.schema->cols[c].not_null && r < p->b.nrows; r++)
			nulls += sl_batch_is_null(&p->b, r, c);
		if (p->st.null_counts[c] != nulls)
			fail("null count of column %zu: %" PRIu64 ", counted %" PRIu64, c,
			     p->st.null_counts[c], nulls);
	}
	if ((f->rc == 0) != (p->st.malformed == 0))
		fail("FAILFAST returned %d with %" PRIu64 " malformed rows", f->rc,
		     p->st.malformed);
	if (f->rc == SL_EMALFORMED && (f->err.line == 0 || f->err.line > input_len + 1 ||
				       !memchr(f->err.reason, 0, sizeof(f->err.reason))))
		fail("FAILFAST error at line %" PRIu64, f->err.line);
	if (f->rc == 0) {
		if (f->b.nrows != p->b.nrows)
			fail("FAILFAST %zu rows, PERMISSIVE %zu", f->b.nrows, p->b.nrows);
		for (size_t r = 0; r < p->b.nrows; r++)
			if (!row_eq(&p->b, r, &f->b, r))
				fail("FAILFAST row %zu differs", r);
	} else if (f->b.nrows != 0) {
		fail("FAILFAST failed but left %zu rows in the batch", f->b.nrows);
	}
}

static bool ts_readable(const struct sl_batch *a, size_t r)
{
	if (sl_batch_is_null(a, r, col_t))
		return true;
	int64_t v = a->cols[col_t].cells[r].i;
	return v >= TS_MIN && v < TS_END;
}

#define DEFAULT_PARTITION "__HIVE_DEFAULT_PARTITION__"

/*
 * True when s in row r reads back null from a partition folder: null, "",
 * or the text __HIVE_DEFAULT_PARTITION__ itself (as in Spark).
 */
static bool s_nullish(const struct sl_batch *a, size_t r)
{
	size_t len = 0;

	if (sl_batch_is_null(a, r, col_s) || str_len(a, r, col_s) == 0)
		return true;
	const char *v = sl_batch_str(a, r, col_s, &len);
	return len == strlen(DEFAULT_PARTITION) && !memcmp(v, DEFAULT_PARTITION, len);
}

/*
 * Row rb of the read-back batch b holds row ra of a: the same values, with
 * TIMESTAMPs truncated to milliseconds (the sink's precision) and
 * _corrupt_record null. A TIMESTAMP the sink writes with a signed year
 * (ISO 8601, beyond the CSV grammar) reads back null, the row malformed.
 * With partition folders (parted), s reads back null when s_nullish().
 */
static void expect_row(const struct sl_batch *a, size_t ra, const struct sl_batch *b, size_t rb,
		       bool parted, const char *what)
{
	for (size_t c = 0; c < a->schema->n; c++) {
		bool na = sl_batch_is_null(a, ra, c), nb = sl_batch_is_null(b, rb, c);
		bool ok;

		if (c == corrupt) {
			ok = nb == ts_readable(a, ra);
		} else if (c == col_t && !na) {
			int64_t v = a->cols[c].cells[ra].i, ms = v % 1000;
			v -= ms < 0 ? ms + 1000 : ms;
			ok = ts_readable(a, ra) ? !nb && b->cols[c].cells[rb].i == v : nb;
		} else if (c == col_s && parted && s_nullish(a, ra)) {
			ok = nb;
		} else {
			ok = cell_eq(a, ra, b, rb, c);
		}
		if (!ok)
			fail("%s: column %zu ('%s') of row %zu differs after the round trip", what,
			     c, a->schema->cols[c].name, ra);
	}
}

/* Formats a with q (no partitions), reads it back with header:true, compares. */
static void round_trip(const struct sl_query_config *q, const struct sl_batch *a, const char *what)
{
	struct sl_part *parts;
	size_t nparts, unreadable = 0;
	struct run r;
	int rc;

	rc = sl_sink_format(q, a, &parts, &nparts);
	if (rc == ENOMEM)
		abort();
	if (rc)
		fail("%s: sl_sink_format returned %d", what, rc);
	if (a->nrows == 0) {
		if (nparts != 0 || parts != NULL)
			fail("%s: an empty batch gave %zu parts", what, nparts);
		return;
	}
	if (nparts != 1 || strcmp(parts[0].dir, "") || parts[0].rows != a->nrows)
		fail("%s: %zu parts for an unpartitioned batch", what, nparts);
	decode(qh, "out/x/part-00000-00000.csv", parts[0].data, parts[0].len, &r);
	if (r.rc)
		fail("%s: reading back failed", what);
	if (r.b.nrows != a->nrows)
		fail("%s: %zu rows read back out of %zu; part:\n%.*s", what, r.b.nrows, a->nrows,
		     (int)parts[0].len, (const char *)parts[0].data);
	for (size_t i = 0; i < a->nrows; i++) {
		expect_row(a, i, &r.b, i, false, what);
		unreadable += !ts_readable(a, i);
	}
	if (r.st.malformed != unreadable)
		fail("%s: %" PRIu64 " malformed rows reading back, expected %zu", what,
		     r.st.malformed, unreadable);
	run_release(&r);
	sl_sink_parts_free(parts, nparts);
}

/* The partition key of row r of a: n, and s (see s_nullish). */
static bool same_key(const struct sl_batch *a, size_t r, const struct sl_batch *b, size_t rb)
{
	bool sa, sb;

	if (!cell_eq(a, r, b, rb, col_n))
		return false;
	sa = s_nullish(a, r);
	sb = s_nullish(b, rb);
	if (sa || sb)
		return sa == sb;
	return str_eq(a, r, col_s, b, rb, col_s);
}

/*
 * Formats a with partitionBy [n, s]: each part is read back with its folder
 * in the path, and must hold, in order, the rows of a with that key.
 */
static void round_trip_partitioned(const struct sl_batch *a)
{
	struct sl_part *parts;
	size_t nparts, total = 0;
	int rc;

	if (a->nrows > PART_ROWS_MAX)
		return;
	rc = sl_sink_format(qpart, a, &parts, &nparts);
	if (rc == ENAMETOOLONG)
		return; /* a long s: documented */
	if (rc == ENOMEM)
		abort();
	if (rc)
		fail("partitioned: sl_sink_format returned %d", rc);
	for (size_t k = 0; k < nparts; k++) {
		char *path = malloc(strlen(parts[k].dir) + 32);
		struct run r;
		size_t i = 0, unreadable = 0;

		if (!path)
			abort();
		sprintf(path, "out/part/%s/part-00000-%05zu.csv", parts[k].dir, k);
		decode(qpart, path, parts[k].data, parts[k].len, &r);
		if (r.rc || r.b.nrows != parts[k].rows || r.b.nrows == 0)
			fail("partitioned: part %zu ('%s', %zu rows) read back %zu rows (rc %d)", k,
			     parts[k].dir, parts[k].rows, r.b.nrows, r.rc);
		/* the rows of a whose key is the part's, in batch order */
		for (size_t ra = 0; ra < a->nrows; ra++) {
			if (!same_key(a, ra, &r.b, 0))
				continue;
			if (i >= r.b.nrows)
				fail("partitioned: part '%s' lacks row %zu", parts[k].dir, ra);
			if (!same_key(a, ra, &r.b, i))
				fail("partitioned: part '%s' row %zu has another key", parts[k].dir,
				     i);
			expect_row(a, ra, &r.b, i, true, "partitioned");
			unreadable += !ts_readable(a, ra);
			i++;
		}
		if (i != r.b.nrows)
			fail("partitioned: part '%s' has %zu rows, expected %zu", parts[k].dir,
			     r.b.nrows, i);
		if (r.st.malformed != unreadable)
			fail("partitioned: part '%s': %" PRIu64 " malformed, expected %zu",
			     parts[k].dir, r.st.malformed, unreadable);
		total += i;
		run_release(&r);
		free(path);
	}
	if (total != a->nrows)
		fail("partitioned: %zu rows in the parts, %zu in the batch", total, a->nrows);
	sl_sink_parts_free(parts, nparts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run p, d, f, h, t;
	char *copy;

	if (!cfg)
		setup();
	input = data;
	input_len = size;
	/* an exact-size copy: ASan sees any read past the end (files need no NUL) */
	copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);

	decode(qp, "in/x.csv", copy, size, &p);
	decode(qd, "in/x.csv", copy, size, &d);
	decode(qf, "in/x.csv", copy, size, &f);
	check_modes(&p, &d, &f);
	decode(qh, "in/x.csv", copy, size, &h);
	decode(qtab, "in/x.csv", copy, size, &t);

	round_trip(qp, &p.b, "permissive");
	round_trip(qh, &h.b, "header");
	round_trip(qtab, &t.b, "tab");
	round_trip_partitioned(&p.b);

	run_release(&t);
	run_release(&h);
	run_release(&f);
	run_release(&d);
	run_release(&p);
	free(copy);
	return 0;
}
