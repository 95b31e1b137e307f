/* SPDX-License-Identifier: MIT */
/*
 * parquet-gen OUT.parquet CASE [zstd|none]: writes one named case with
 * core/sinks/parquet.c and prints its rows as JSON Lines on stdout, for
 * tests/integration/test_parquet_readers.py to compare with what DuckDB and
 * hyparquet read. Timestamps are integer microseconds, dates integer days,
 * doubles numbers or "NaN"/"Infinity"/"-Infinity", windows
 * {"start":..,"end":..}, nulls null. `parquet-gen --list` prints the cases.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "err.h"
#include "parquet.h"

struct gen {
	struct sl_column cols[16];
	size_t ncols;
	struct sl_schema schema;
	struct sl_batch b;
	struct sl_pq_opts o;
};

static const char *const cases[] = { "types", "nulls", "strings", "extremes", "windows",
				     "dict-fallback", "rowgroups", "empty", NULL };

static void cols_init(struct gen *g, const char *spec)
{
	char buf[512];
	static const char *letters = "sbidotaw";

	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		char *colon = strchr(tok, ':');
		*colon = 0;
		g->cols[g->ncols].name = strdup(tok);
		g->cols[g->ncols].type = (enum sl_type)(strchr(letters, colon[1]) - letters);
		g->ncols++;
	}
	g->schema.cols = g->cols;
	g->schema.n = g->ncols;
	if (sl_batch_init(&g->b, &g->schema))
		exit(1);
}

static size_t row(struct gen *g)
{
	size_t r;
	if (sl_batch_add_row(&g->b, &r))
		exit(1);
	return r;
}

static void str(struct gen *g, size_t r, size_t c, const char *s)
{
	if (sl_batch_set_str(&g->b, r, c, s, strlen(s)))
		exit(1);
}

/* every type, one row per i */
static void fill_types(struct gen *g, size_t n, unsigned nullmod)
{
	cols_init(g, "s:s,n:b,i:i,d:d,ok:o,ts:t,day:a,window:w");
	for (size_t i = 0; i < n; i++) {
		size_t r = row(g);
		char s[64];
		snprintf(s, sizeof(s), "value %zu", i % 11);
		str(g, r, 0, s);
		sl_batch_set_int(&g->b, r, 1, (int64_t)i * 1000003 - 77777);
		sl_batch_set_int(&g->b, r, 2, (int64_t)i * 17 - 100);
		sl_batch_set_double(&g->b, r, 3, (double)i / 8.0 - 2.5);
		sl_batch_set_int(&g->b, r, 4, i % 3 == 0);
		sl_batch_set_int(&g->b, r, 5, 1767225600000000 + (int64_t)i * 1234567);
		sl_batch_set_int(&g->b, r, 6, 20454 + (int64_t)i);
		sl_batch_set_window(&g->b, r, 7, 1767225600000000 + (int64_t)i * 60000000,
				    1767225600000000 + (int64_t)(i + 1) * 60000000);
		if (nullmod)
			for (size_t c = 0; c < g->ncols; c++)
				if ((i * 5 + c * 3) % nullmod == 0)
					sl_batch_set_null(&g->b, r, c);
	}
}

static int build(struct gen *g, const char *name)
{
	if (!strcmp(name, "types")) {
		fill_types(g, 20, 0);
	} else if (!strcmp(name, "nulls")) {
		fill_types(g, 40, 4);
		for (size_t r = 0; r < 40; r++)
			sl_batch_set_null(&g->b, r, 2); /* an all-null column */
	} else if (!strcmp(name, "strings")) {
		static const char *v[] = { "", "é", "日本語", "\xf0\x9f\x98\x80 emoji",
					   "quote \" backslash \\ tab \t nl \n", "zzz", "A", "ÿ" };
		cols_init(g, "s:s,empty:s,Ünïcödé name:s");
		for (size_t i = 0; i < 24; i++) {
			size_t r = row(g);
			str(g, r, 0, v[i % 8]);
			str(g, r, 1, "");
			str(g, r, 2, v[(i + 3) % 8]);
		}
	} else if (!strcmp(name, "extremes")) {
		const int64_t i64[] = { INT64_MIN, INT64_MAX, 0, -1, 1, (int64_t)1 << 53 | 1 };
		const int64_t i32[] = { INT32_MIN, INT32_MAX, 0, -1, 1, 7 };
		const double d[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_MIN / 4 };
		const double d2[] = { DBL_MAX, -DBL_MAX, DBL_MIN, 5e-324, 1e308, -1.5 };
		/* year 1, year 9999, the epoch, before it, int64 ns limits */
		const int64_t ts[] = { -62135596800000000, 253402300799999999, 0, -1,
				       -9223372036854775, 9223372036854775 };
		const int64_t days[] = { -719162, 2932896, 0, -1, 1, 100000 };
		cols_init(g, "big:b,int:i,dbl:d,dbl2:d,ts:t,day:a");
		for (size_t i = 0; i < 6; i++) {
			size_t r = row(g);
			sl_batch_set_int(&g->b, r, 0, i64[i]);
			sl_batch_set_int(&g->b, r, 1, i32[i]);
			sl_batch_set_double(&g->b, r, 2, d[i]);
			sl_batch_set_double(&g->b, r, 3, d2[i]);
			sl_batch_set_int(&g->b, r, 4, ts[i]);
			sl_batch_set_int(&g->b, r, 5, days[i]);
		}
	} else if (!strcmp(name, "windows")) {
		cols_init(g, "user:s,window:w,n:b");
		for (size_t i = 0; i < 16; i++) {
			size_t r = row(g);
			str(g, r, 0, i % 2 ? "alice" : "bob");
			if (i % 5 != 2)
				sl_batch_set_window(&g->b, r, 1, (int64_t)i * 600000000 - 1200000000,
						    (int64_t)(i + 1) * 600000000 - 1200000000);
			sl_batch_set_int(&g->b, r, 2, (int64_t)i);
		}
	} else if (!strcmp(name, "dict-fallback")) {
		cols_init(g, "id:b,s:s");
		for (size_t i = 0; i < 3000; i++) {
			size_t r = row(g);
			char s[64];
			snprintf(s, sizeof(s), "distinct string number %05zu", i);
			sl_batch_set_int(&g->b, r, 0, (int64_t)i);
			if (i % 97 == 5)
				sl_batch_set_null(&g->b, r, 1);
			else
				str(g, r, 1, s);
		}
		g->o.dict_bytes = 16384;
		g->o.page_bytes = 8192;
	} else if (!strcmp(name, "rowgroups")) {
		fill_types(g, 5000, 7);
		g->o.row_group_bytes = 16384;
	} else if (!strcmp(name, "empty")) {
		fill_types(g, 0, 0);
	} else {
		return EINVAL;
	}
	return 0;
}

static void json_str(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_double(double d)
{
	if (isnan(d))
		printf("\"NaN\"");
	else if (isinf(d))
		printf(d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
	else
		printf("%.17g", d);
}

static void print_rows(const struct gen *g)
{
	for (size_t r = 0; r < g->b.nrows; r++) {
		putchar('{');
		for (size_t c = 0; c < g->ncols; c++) {
			const union sl_cell *v = &g->b.cols[c].cells[r];
			if (c)
				putchar(',');
			json_str(g->cols[c].name, strlen(g->cols[c].name));
			putchar(':');
			if (sl_batch_is_null(&g->b, r, c)) {
				printf("null");
				continue;
			}
			switch (g->cols[c].type) {
			case SL_TYPE_STRING: {
				size_t n;
				const char *s = sl_batch_str(&g->b, r, c, &n);
				json_str(s, n);
				break;
			}
			case SL_TYPE_DOUBLE:
				json_double(v->d);
				break;
			case SL_TYPE_BOOLEAN:
				printf(v->i ? "true" : "false");
				break;
			case SL_TYPE_WINDOW:
				printf("{\"start\":%" PRId64 ",\"end\":%" PRId64 "}", v->w.start, v->w.end);
				break;
			default:
				printf("%" PRId64, v->i);
			}
		}
		printf("}\n");
	}
}

static int write_fn(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : EIO;
}

int main(int argc, char **argv)
{
	struct gen g = { 0 };
	struct sl_pq_writer *w = NULL;
	size_t src[16];
	int rc;

	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (int i = 0; cases[i]; i++)
			printf("%s\n", cases[i]);
		return 0;
	}
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: parquet-gen OUT.parquet CASE [zstd|none]\n");
		return 2;
	}
	g.o.codec = argc == 4 && !strcmp(argv[3], "none") ? SL_COMPRESSION_NONE : SL_COMPRESSION_ZSTD;
	if (build(&g, argv[2])) {
		fprintf(stderr, "parquet-gen: unknown case '%s'\n", argv[2]);
		return 2;
	}
	for (size_t k = 0; k < g.ncols; k++)
		src[k] = k;
	FILE *f = fopen(argv[1], "wb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	rc = sl_pq_open(g.cols, src, g.ncols, &g.o, write_fn, f, &w);
	if (!rc)
		rc = sl_pq_add(w, &g.b, 0, g.b.nrows / 2);
	if (!rc)
		rc = sl_pq_add(w, &g.b, g.b.nrows / 2, g.b.nrows);
	if (!rc)
		rc = sl_pq_close(w);
	else
		sl_pq_abort(w);
	if (fclose(f) && !rc)
		rc = errno;
	if (rc) {
		fprintf(stderr, "parquet-gen: %s: %s\n", argv[1], sl_strerror(rc));
		return 1;
	}
	print_rows(&g);
	sl_batch_release(&g.b);
	for (size_t k = 0; k < g.ncols; k++)
		free(g.cols[k].name);
	return 0;
}
