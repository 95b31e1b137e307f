/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/decode.c and core/timestamp.c. Every
 * tests/data/decode/NAME.input is decoded with NAME.schema (DDL) and
 * NAME.opts, and the rows and counters must read exactly NAME.expected:
 *
 *   NAME.opts      lines `key value`: format json|csv|text, mode
 *                  PERMISSIVE|DROPMALFORMED|FAILFAST, header true|false,
 *                  sep C (one byte; `tab` for a tab), path P (the
 *                  in/-relative path, default `q/x`), uses A,B,... (the
 *                  query is a count(*) grouped by these columns, so it
 *                  reads only them: the others are projected out of the
 *                  decoder and the batch, and print NULL); all optional
 *   NAME.expected  one `row: ` line per row, cells joined by ` | `: NULL,
 *                  strings JSON-quoted, integers, doubles %.17g, booleans
 *                  true/false, TIMESTAMP as ISO with microseconds, DATE as
 *                  YYYY-MM-DD; then `stats: lines=L rows=R malformed=M
 *                  dropped=D`, `nulls: col=N ...` when a NOT NULL column
 *                  held nulls, and `error: line N: reason` on FAILFAST.
 *
 * Plus the timestamp grammar, batch restore on failure, and hostile input.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>

#include "batch.h"
#include "check.h"
#include "config.h"
#include "decode.h"
#include "timestamp.h"

#define MIN_CASES 40

#include "testdata.h"

/* A growing text buffer. */
struct out {
	char *s;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (o->len + (size_t)n + 1 > o->cap) {
		o->cap = (o->len + (size_t)n + 1) * 2;
		o->s = realloc(o->s, o->cap);
		if (!o->s)
			abort();
	}
	va_start(ap, fmt);
	vsnprintf(o->s + o->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	o->len += (size_t)n;
}

static void fmt_us(struct out *o, int64_t us)
{
	char buf[SL_TIMESTAMP_BUFSZ];
	int64_t sec = us / 1000000, frac = us % 1000000;
	if (frac < 0) {
		frac += 1000000;
		sec--;
	}
	size_t n = sl_timestamp_format(sec * 1000000, buf);
	buf[n - 5] = 0; /* drop ".000Z" */
	outf(o, "%s.%06" PRId64 "Z", buf, frac);
}

/* The canonical text of one batch row. */
static void fmt_row(struct out *o, const struct sl_batch *b, size_t r)
{
	char buf[SL_TIMESTAMP_BUFSZ];

	outf(o, "row: ");
	for (size_t c = 0; c < b->schema->n; c++) {
		const union sl_cell *v = &b->cols[c].cells[r];
		if (c)
			outf(o, " | ");
		if (sl_batch_is_null(b, r, c)) {
			outf(o, "NULL");
			continue;
		}
		switch (b->cols[c].type) {
		case SL_TYPE_STRING: {
			size_t len;
			const unsigned char *s = (const unsigned char *)sl_batch_str(b, r, c, &len);
			outf(o, "\"");
			for (size_t i = 0; i < len; i++) {
				if (s[i] == '"' || s[i] == '\\')
					outf(o, "\\%c", s[i]);
				else if (s[i] < 0x20)
					outf(o, "\\u%04x", s[i]);
				else
					outf(o, "%c", s[i]);
			}
			outf(o, "\"");
			break;
		}
		case SL_TYPE_DOUBLE:
			outf(o, "%.17g", v->d);
			break;
		case SL_TYPE_BOOLEAN:
			outf(o, "%s", v->i ? "true" : "false");
			break;
		case SL_TYPE_TIMESTAMP:
			fmt_us(o, v->i);
			break;
		case SL_TYPE_DATE:
			sl_date_format((int32_t)v->i, buf);
			outf(o, "%s", buf);
			break;
		default:
			outf(o, "%" PRId64, v->i);
			break;
		}
	}
	outf(o, "\n");
}

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		s[--n] = 0;
}

/* Runs one case; returns 0 when it matches. */
static int run_case(const char *name)
{
	char path[PATH_MAX + 64], serr[256], file_path[1024] = "q/x";
	char *ddl, *opts, *input, *expected;
	size_t inlen = 0;
	struct sl_query_config q;
	struct sl_decoder *d = NULL;
	struct sl_batch b;
	struct sl_decode_stats st;
	struct sl_decode_error err = {0};
	struct out o = {0};
	char count_name[] = "n";
	struct sl_aggregate count = {
		.name = count_name, .fn = SL_AGG_COUNT_STAR, .type = SL_TYPE_BIGINT};
	size_t group[16];
	char uses[1024] = "";
	int rc, ok = -1;

	memset(&q, 0, sizeof(q));
	q.source.format = SL_SOURCE_JSON;
	q.source.sep = ',';
	snprintf(path, sizeof(path), "%s/%s.schema", data_dir, name);
	ddl = read_all(path, NULL);
	snprintf(path, sizeof(path), "%s/%s.opts", data_dir, name);
	opts = read_all(path, NULL);
	snprintf(path, sizeof(path), "%s/%s.input", data_dir, name);
	input = read_all(path, &inlen);
	snprintf(path, sizeof(path), "%s/%s.expected", data_dir, name);
	expected = read_all(path, NULL);
	if (!ddl || !input || !expected) {
		fprintf(stderr, "%s: missing .schema, .input or .expected\n", name);
		goto out;
	}
	trim(ddl);
	if (sl_config_schema_parse(ddl, &q.source.schema, serr, sizeof(serr))) {
		fprintf(stderr, "%s: schema: %s\n", name, serr);
		goto out;
	}
	for (char *line = opts ? strtok(opts, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		char key[32], val[1024];
		if (sscanf(line, "%31s %1023[^\n]", key, val) != 2)
			continue;
		if (!strcmp(key, "format"))
			q.source.format = !strcmp(val, "csv")	 ? SL_SOURCE_CSV
					  : !strcmp(val, "text") ? SL_SOURCE_TEXT
								 : SL_SOURCE_JSON;
		else if (!strcmp(key, "mode"))
			q.source.mode = !strcmp(val, "FAILFAST")	? SL_MODE_FAILFAST
					: !strcmp(val, "DROPMALFORMED") ? SL_MODE_DROPMALFORMED
									: SL_MODE_PERMISSIVE;
		else if (!strcmp(key, "header"))
			q.source.header = !strcmp(val, "true");
		else if (!strcmp(key, "sep"))
			q.source.sep = !strcmp(val, "tab") ? '\t' : val[0];
		else if (!strcmp(key, "path"))
			snprintf(file_path, sizeof(file_path), "%s", val);
		else if (!strcmp(key, "uses"))
			snprintf(uses, sizeof(uses), "%s", val);
	}
	for (char *u = uses[0] ? strtok(uses, ",") : NULL; u; u = strtok(NULL, ",")) {
		for (size_t c = 0; c < q.source.schema.n && q.ngroup < 16; c++)
			if (!strcmp(q.source.schema.cols[c].name, u))
				group[q.ngroup++] = c;
		q.has_groupby = true;
		q.group = group;
		q.aggs = &count;
		q.naggs = 1;
	}
	if (sl_decoder_new(&q, &d) || sl_batch_init(&b, &q.source.schema) ||
	    sl_decode_stats_init(&st, q.source.schema.n))
		abort();
	if (q.naggs) {
		/* as the engine does for a file source */
		uint8_t used[64];
		if (q.source.schema.n > sizeof(used))
			abort();
		sl_config_used_columns(&q, used);
		sl_batch_project(&b, used);
	}
	rc = sl_decode_file(d, file_path, input, inlen, &b, &st, &err);
	for (size_t r = 0; r < b.nrows; r++)
		fmt_row(&o, &b, r);
	outf(&o,
	     "stats: lines=%" PRIu64 " rows=%" PRIu64 " malformed=%" PRIu64 " dropped=%" PRIu64
	     "\n",
	     st.lines, st.rows, st.malformed, st.dropped);
	bool any = false;
	for (size_t c = 0; c < st.ncols; c++)
		if (st.null_counts[c]) {
			outf(&o, "%s%s=%" PRIu64,
			     any ? " " : "nulls: ", q.source.schema.cols[c].name,
			     st.null_counts[c]);
			any = true;
		}
	if (any)
		outf(&o, "\n");
	if (rc == SL_EMALFORMED)
		outf(&o, "error: line %" PRIu64 ": %s\n", err.line, err.reason);
	else if (rc)
		outf(&o, "rc: %s\n", sl_strerror(rc));
	ok = o.s && !strcmp(o.s, expected) ? 0 : -1;
	if (ok)
		fprintf(stderr, "case %s: got\n%s--- expected\n%s---\n", name, o.s, expected);
	sl_batch_release(&b);
	sl_decode_stats_release(&st);
	sl_decoder_free(d);
	sl_config_schema_release(&q.source.schema);
out:
	free(o.s);
	free(ddl);
	free(opts);
	free(input);
	free(expected);
	return ok;
}

static void test_cases(void)
{
	DIR *dir;
	struct dirent *e;
	int n = 0, failed = 0;

	CHECK(find_data_dir("decode") == 0);
	CHECK((dir = opendir(data_dir)) != NULL);
	while ((e = readdir(dir))) {
		size_t len = strlen(e->d_name);
		if (len < 7 || strcmp(e->d_name + len - 7, ".schema"))
			continue;
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(len - 7), e->d_name);
		n++;
		if (run_case(name))
			failed++;
	}
	closedir(dir);
	printf("decode cases: %d, failed %d\n", n, failed);
	CHECK(failed == 0);
	CHECK(n >= MIN_CASES);
}

static void test_timestamp_grammar(void)
{
	static const struct {
		const char *s;
		int64_t us; /* expected; INT64_MIN = must fail */
	} cases[] = {
	    {"1970-01-01T00:00:00Z", 0},
	    {"1970-01-01 00:00", 0},
	    {"1970-01-01T00:00:01", 1000000},
	    {"2026-10-04T12:00:00Z", INT64_C(1791115200000000)},
	    {"2026-10-04T12:00:00.5Z", INT64_C(1791115200500000)},
	    {"2026-10-04T12:00:00.123456789Z", INT64_C(1791115200123456)},
	    {"2026-10-04T12:00:00.000001", INT64_C(1791115200000001)},
	    {"2026-10-04T14:00:00+02:00", INT64_C(1791115200000000)},
	    {"2026-10-04T14:00:00+0200", INT64_C(1791115200000000)},
	    {"2026-10-04T09:30-02:30", INT64_C(1791115200000000)},
	    {"2026-10-04T12:00-00:00", INT64_C(1791115200000000)},
	    {"1969-12-31T23:59:59.999999Z", -1},
	    {"2024-02-29T00:00:00Z", INT64_C(1709164800000000)},
	    {"2000-02-29T00:00:00Z", INT64_C(951782400000000)},
	    {"0000-01-01T00:00:00Z", INT64_C(-62167219200000000)},
	    {"9999-12-31T23:59:59.999999Z", INT64_C(253402300799999999)},
	    {"2026-02-30T00:00:00Z", INT64_MIN},
	    {"2025-02-29T00:00:00Z", INT64_MIN},
	    {"1900-02-29T00:00:00Z", INT64_MIN},
	    {"2026-04-31T00:00:00Z", INT64_MIN},
	    {"2026-13-01T00:00:00Z", INT64_MIN},
	    {"2026-00-01T00:00:00Z", INT64_MIN},
	    {"2026-01-00T00:00:00Z", INT64_MIN},
	    {"2026-01-01T24:00:00Z", INT64_MIN},
	    {"2026-01-01T23:60:00Z", INT64_MIN},
	    {"2026-01-01T23:59:60Z", INT64_MIN},
	    {"2026-01-01T23:59:59.Z", INT64_MIN},
	    {"2026-01-01T23:59:59.1234567890Z", INT64_MIN},
	    {"2026-01-01T23:59:59+19:00", INT64_MIN},
	    {"2026-01-01T23:59:59+01:60", INT64_MIN},
	    {"2026-01-01T23:59:59+1", INT64_MIN},
	    {"2026-01-01T23:59:59+01:", INT64_MIN},
	    {"2026-01-01T23:59:59z", INT64_MIN},
	    {"2026-01-01T23:59:59Z ", INT64_MIN},
	    {" 2026-01-01T23:59:59Z", INT64_MIN},
	    {"2026-01-01", INT64_MIN},
	    {"2026-01-01T", INT64_MIN},
	    {"2026-01-01T1:00", INT64_MIN},
	    {"2026-1-01T10:00", INT64_MIN},
	    {"26-01-01T10:00", INT64_MIN},
	    {"2026-01-01X10:00", INT64_MIN},
	    {"2026-01-01T10:00:5", INT64_MIN},
	    {"", INT64_MIN},
	    {"+2026-01-01T10:00", INT64_MIN},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t us = 42;
		int rc = sl_timestamp_parse(cases[i].s, strlen(cases[i].s), &us);
		if (cases[i].us == INT64_MIN) {
			if (rc != SL_EMALFORMED || us != 42)
				fprintf(stderr, "accepted: '%s'\n", cases[i].s);
			CHECK(rc == SL_EMALFORMED && us == 42);
		} else {
			if (rc || us != cases[i].us)
				fprintf(stderr, "'%s': rc %d, %" PRId64 "\n", cases[i].s, rc, us);
			CHECK(rc == 0 && us == cases[i].us);
		}
	}
	/* the length bounds the text: no NUL needed, nothing read past it */
	int64_t us;
	CHECK(sl_timestamp_parse("1970-01-01T00:00:01Zjunk", 20, &us) == 0 && us == 1000000);
	CHECK(sl_timestamp_parse("1970-01-01T00:00:01", 18, &us) == SL_EMALFORMED);
}

static void test_date_and_format(void)
{
	char buf[SL_TIMESTAMP_BUFSZ];
	int32_t days;

	CHECK(sl_date_parse("1970-01-01", 10, &days) == 0 && days == 0);
	CHECK(sl_date_parse("2026-10-04", 10, &days) == 0 && days == 20730);
	CHECK(sl_date_parse("1969-12-31", 10, &days) == 0 && days == -1);
	CHECK(sl_date_parse("2024-02-29", 10, &days) == 0);
	CHECK(sl_date_parse("2026-02-29", 10, &days) == SL_EMALFORMED);
	CHECK(sl_date_parse("2026-10-04T00:00", 16, &days) == SL_EMALFORMED);
	CHECK(sl_date_parse("2026-10-4", 9, &days) == SL_EMALFORMED);

	CHECK(sl_timestamp_format(INT64_C(1791115200000000), buf) == 24);
	CHECK(!strcmp(buf, "2026-10-04T12:00:00.000Z"));
	sl_timestamp_format(INT64_C(1791115200123999), buf);
	CHECK(!strcmp(buf, "2026-10-04T12:00:00.123Z"));
	sl_timestamp_format(-1, buf);
	CHECK(!strcmp(buf, "1969-12-31T23:59:59.999Z"));
	sl_timestamp_format(0, buf);
	CHECK(!strcmp(buf, "1970-01-01T00:00:00.000Z"));
	CHECK(sl_timestamp_format(INT64_MAX, buf) < SL_TIMESTAMP_BUFSZ);
	CHECK(!strncmp(buf, "+294247-01-10T04:00:54.775Z", 27));
	CHECK(sl_timestamp_format(INT64_MIN, buf) < SL_TIMESTAMP_BUFSZ);
	CHECK(buf[0] == '-');
	sl_date_format(20730, buf);
	CHECK(!strcmp(buf, "2026-10-04"));

	/* every day of 1900-2100 round-trips through format and parse */
	for (int64_t day = -25567; day < 47482; day++) {
		int64_t us = day * INT64_C(86400000000) + 45296789000; /* 12:34:56.789 */
		size_t n = sl_timestamp_format(us, buf);
		int64_t back;
		CHECK(sl_timestamp_parse(buf, n, &back) == 0 && back == us);
		CHECK(sl_date_parse(buf, 10, &days) == 0 && days == day);
	}
}

/* A decoder on a schema for the C-level tests below. */
struct fixture {
	struct sl_query_config q;
	struct sl_decoder *d;
	struct sl_batch b;
	struct sl_decode_stats st;
};

static int fixture_init(struct fixture *f, const char *ddl, enum sl_source_format fmt,
			enum sl_parse_mode mode)
{
	memset(f, 0, sizeof(*f));
	f->q.source.format = fmt;
	f->q.source.mode = mode;
	f->q.source.sep = ',';
	if (sl_config_schema_parse(ddl, &f->q.source.schema, NULL, 0))
		return -1;
	if (sl_decoder_new(&f->q, &f->d) || sl_batch_init(&f->b, &f->q.source.schema) ||
	    sl_decode_stats_init(&f->st, f->q.source.schema.n))
		return -1;
	return 0;
}

static void fixture_release(struct fixture *f)
{
	sl_batch_release(&f->b);
	sl_decode_stats_release(&f->st);
	sl_decoder_free(f->d);
	sl_config_schema_release(&f->q.source.schema);
}

static void test_failfast_restores_batch(void)
{
	struct fixture f;
	struct sl_decode_error err;
	const char *good = "{\"a\":\"one\",\"n\":1}\n{\"a\":\"two\",\"n\":2}\n";
	const char *bad = "{\"a\":\"three\",\"n\":3}\n\n{\"a\":\"four\",\"n\":\"x\"}\n";

	CHECK(fixture_init(&f, "a STRING, n BIGINT", SL_SOURCE_JSON, SL_MODE_FAILFAST) == 0);
	CHECK_OK(sl_decode_file(f.d, "q/1.json", good, strlen(good), &f.b, &f.st, &err));
	size_t arena = f.b.arena_len;
	CHECK(f.b.nrows == 2);
	CHECK(sl_decode_file(f.d, "q/2.json", bad, strlen(bad), &f.b, &f.st, &err) ==
	      SL_EMALFORMED);
	CHECK(err.line == 3);
	CHECK(!strcmp(err.reason, "field 'n': cannot convert a string to BIGINT"));
	CHECK(f.b.nrows == 2 && f.b.arena_len == arena);
	/* counters add up over files */
	CHECK(f.st.lines == 4 && f.st.rows == 3 && f.st.malformed == 1);
	fixture_release(&f);
}

static void test_long_line_and_hostile_input(void)
{
	struct fixture f;
	struct sl_decode_error err;
	size_t n = 2u << 20, len;
	char *buf = malloc(n + 64);

	CHECK(buf != NULL);
	CHECK(fixture_init(&f, "s STRING, _corrupt_record STRING", SL_SOURCE_JSON,
			   SL_MODE_PERMISSIVE) == 0);
	/* a 2 MiB line */
	len = (size_t)sprintf(buf, "{\"s\":\"");
	memset(buf + len, 'x', n);
	len += n;
	len += (size_t)sprintf(buf + len, "\"}");
	CHECK_OK(sl_decode_file(f.d, "q/x", buf, len, &f.b, &f.st, &err));
	CHECK(f.b.nrows == 1 && !sl_batch_is_null(&f.b, 0, 0));
	CHECK(f.b.cols[0].cells[0].s.len == n);

	/* 100,000 nested brackets, inside a field and at the top */
	len = (size_t)sprintf(buf, "{\"t\":");
	memset(buf + len, '[', 100000);
	len += 100000;
	CHECK_OK(sl_decode_file(f.d, "q/x", buf, len, &f.b, &f.st, &err));
	memset(buf, '{', 100000);
	CHECK_OK(sl_decode_file(f.d, "q/x", buf, 100000, &f.b, &f.st, &err));
	CHECK(f.st.malformed == 2 && f.b.nrows == 3);
	CHECK(sl_batch_is_null(&f.b, 2, 0) && !sl_batch_is_null(&f.b, 2, 1));

	/* binary garbage, in every format, never crashes */
	srand(7);
	for (int i = 0; i < 300; i++) {
		size_t m = (size_t)(rand() % 4096);
		for (size_t k = 0; k < m; k++)
			buf[k] = (char)(rand() % 7 == 0 ? "\n\"{}[],\\"[rand() % 8] : rand());
		CHECK_OK(sl_decode_file(f.d, "q/k=v/x", buf, m, &f.b, &f.st, &err));
	}
	fixture_release(&f);

	const enum sl_source_format fmts[] = {SL_SOURCE_CSV, SL_SOURCE_TEXT};
	for (int k = 0; k < 2; k++) {
		CHECK(fixture_init(&f, k ? "value STRING" : "a STRING, b BIGINT, c DATE", fmts[k],
				   SL_MODE_DROPMALFORMED) == 0);
		for (int i = 0; i < 300; i++) {
			size_t m = (size_t)(rand() % 4096);
			for (size_t j = 0; j < m; j++)
				buf[j] = (char)(rand() % 5 == 0 ? "\n\",\r"[rand() % 4] : rand());
			CHECK_OK(sl_decode_file(f.d, "q/b=1/x", buf, m, &f.b, &f.st, &err));
		}
		CHECK(f.st.rows + f.st.dropped == f.st.lines);
		fixture_release(&f);
	}
	free(buf);
}

int main(void)
{
	test(test_timestamp_grammar);
	test(test_date_and_format);
	test(test_cases);
	test(test_failfast_restores_batch);
	test(test_long_line_and_hostile_input);
	return test_exit();
}
