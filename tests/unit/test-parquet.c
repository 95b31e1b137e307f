/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of core/sinks/parquet.c: files written into memory and read
 * back with the independent reader of pq_read.h (footer, pages, both
 * codecs, dictionary and PLAIN, fallback), checked row by row and statistic
 * by statistic against the batch (pq_check.h).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "parquet.h"
#include "pq_check.h"

struct tfile {
	struct sl_column cols[16];
	size_t src[16];
	size_t ncols;
	struct sl_schema schema;
	struct sl_batch b;
	struct memfile m;
	struct pqr_file f;
};

static void tf_init(struct tfile *t, const char *spec)
{
	/* spec: "name:TYPE,name:TYPE" with TYPE one letter: s b i d o t a w */
	memset(t, 0, sizeof(*t));
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		char *colon = strchr(tok, ':');
		*colon = 0;
		static const char *letters = "sbidotaw";
		t->cols[t->ncols].name = strdup(tok);
		t->cols[t->ncols].type = (enum sl_type)(strchr(letters, colon[1]) - letters);
		t->src[t->ncols] = t->ncols;
		t->ncols++;
	}
	t->schema.cols = t->cols;
	t->schema.n = t->ncols;
	if (sl_batch_init(&t->b, &t->schema))
		abort();
}

static void tf_release(struct tfile *t)
{
	sl_batch_release(&t->b);
	for (size_t k = 0; k < t->ncols; k++)
		free(t->cols[k].name);
	free(t->m.p);
	pqr_free(&t->f);
}

static size_t tf_row(struct tfile *t)
{
	size_t r;
	if (sl_batch_add_row(&t->b, &r))
		abort();
	return r;
}

/* Writes rows (NULL: all) of t's batch with o, reads the file back and checks it. */
static int tf_roundtrip(struct tfile *t, const struct sl_pq_opts *o, const size_t *rows, size_t n)
{
	struct sl_pq_writer *w;
	int rc;

	free(t->m.p);
	memset(&t->m, 0, sizeof(t->m));
	pqr_free(&t->f);
	rc = sl_pq_open(t->cols, t->src, t->ncols, o, memfile_write, &t->m, &w);
	if (rc)
		return rc;
	if (rows) {
		/* in two calls, to cross a call boundary */
		rc = sl_pq_add_rows(w, &t->b, rows, n / 2);
		if (!rc)
			rc = sl_pq_add_rows(w, &t->b, rows + n / 2, n - n / 2);
	} else {
		n = t->b.nrows;
		rc = sl_pq_add(w, &t->b, 0, n / 3);
		if (!rc)
			rc = sl_pq_add(w, &t->b, n / 3, n);
	}
	if (rc) {
		sl_pq_abort(w);
		return rc;
	}
	rc = sl_pq_close(w);
	if (rc)
		return rc;
	if (pqr_read(t->m.p, t->m.len, &t->f) ||
	    pq_check(&t->f, &t->b, t->cols, t->src, t->ncols, rows, n)) {
		fprintf(stderr, "read back: %s\n", pqr_err);
		return SL_ECORRUPT;
	}
	return 0;
}

static const struct sl_pq_opts zstd_opts = { .codec = SL_COMPRESSION_ZSTD };
static const struct sl_pq_opts none_opts = { .codec = SL_COMPRESSION_NONE };

static void fill_types(struct tfile *t, size_t nrows)
{
	tf_init(t, "s:s,n:b,i:i,d:d,ok:o,ts:t,day:a,window:w");
	for (size_t r = 0; r < nrows; r++) {
		size_t row = tf_row(t);
		char s[32];
		int n = snprintf(s, sizeof(s), "v%zu", r % 7);
		sl_batch_set_str(&t->b, row, 0, s, (size_t)n);
		sl_batch_set_int(&t->b, row, 1, (int64_t)r * 1000003 - 5000);
		sl_batch_set_int(&t->b, row, 2, (int64_t)r - 3);
		sl_batch_set_double(&t->b, row, 3, (double)r / 3.0 - 1.0);
		sl_batch_set_int(&t->b, row, 4, r % 3 == 0);
		sl_batch_set_int(&t->b, row, 5, 1700000000000000 + (int64_t)r * 1000);
		sl_batch_set_int(&t->b, row, 6, 19000 + (int64_t)r);
		sl_batch_set_window(&t->b, row, 7, (int64_t)r * 60000000, (int64_t)(r + 1) * 60000000);
	}
}

static void test_types(void)
{
	struct tfile t;
	fill_types(&t, 50);
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	CHECK(t.f.nrg == 1 && t.f.leaves[0].chunks[0].codec == 6);
	/* strings are dictionary-encoded, the rest PLAIN */
	CHECK(t.f.leaves[0].chunks[0].dict_pages == 1 && t.f.leaves[0].chunks[0].plain_pages == 0);
	CHECK(t.f.leaves[0].chunks[0].enc_dict && t.f.leaves[1].chunks[0].enc_plain &&
	      !t.f.leaves[1].chunks[0].enc_dict);
	CHECK_OK(tf_roundtrip(&t, &none_opts, NULL, 0));
	CHECK(t.f.leaves[3].chunks[0].codec == 0);
	CHECK(t.f.nleaves == 9);
	/* the magic and a footer length that points at the footer */
	CHECK(memcmp(t.m.p, "PAR1", 4) == 0);
	tf_release(&t);
}

static void test_src_order(void)
{
	struct tfile t;
	tf_init(&t, "a:s,b:b,c:d");
	for (int r = 0; r < 10; r++) {
		size_t row = tf_row(&t);
		sl_batch_set_str(&t.b, row, 0, "x", 1);
		sl_batch_set_int(&t.b, row, 1, r);
		sl_batch_set_double(&t.b, row, 2, r * 0.5);
	}
	/* the file has columns c, a: batch columns 2, 0 */
	char c_name[] = "c", a_name[] = "a";
	struct sl_column cols[2] = { { .name = c_name, .type = SL_TYPE_DOUBLE },
				     { .name = a_name, .type = SL_TYPE_STRING } };
	size_t src[2] = { 2, 0 };
	struct sl_pq_writer *w;
	CHECK_OK(sl_pq_open(cols, src, 2, &zstd_opts, memfile_write, &t.m, &w));
	CHECK_OK(sl_pq_add(w, &t.b, 0, 10));
	CHECK_OK(sl_pq_close(w));
	CHECK(pqr_read(t.m.p, t.m.len, &t.f) == 0);
	CHECK(pq_check(&t.f, &t.b, cols, src, 2, NULL, 10) == 0);
	tf_release(&t);
}

static void test_nulls(void)
{
	struct tfile t;
	fill_types(&t, 300);
	for (size_t r = 0; r < 300; r++)
		for (size_t c = 0; c < t.ncols; c++)
			if ((r * 7 + c * 3) % 5 == 0 || (c == 2 && r < 299))
				sl_batch_set_null(&t.b, r, c);
	/* column 5 (ts) all null */
	for (size_t r = 0; r < 300; r++)
		sl_batch_set_null(&t.b, r, 5);
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	CHECK(t.f.leaves[5].chunks[0].null_count == 300 && !t.f.leaves[5].chunks[0].has_minmax);
	CHECK_OK(tf_roundtrip(&t, &none_opts, NULL, 0));
	tf_release(&t);

	/* every column all null, strings too: no dictionary */
	fill_types(&t, 20);
	for (size_t r = 0; r < 20; r++)
		for (size_t c = 0; c < t.ncols; c++)
			sl_batch_set_null(&t.b, r, c);
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	CHECK(t.f.leaves[0].chunks[0].dict_pages == 0 && !t.f.leaves[0].chunks[0].has_dict_off);
	tf_release(&t);
}

static void test_strings(void)
{
	static const char *vals[] = { "", "é", "日本語", "\xf0\x9f\x98\x80", "a\nb\"c\\", "",
				      "zzz", "\x7f", "\xc3\xbf", "A" };
	struct tfile t;
	tf_init(&t, "s:s,t:s");
	for (size_t r = 0; r < 40; r++) {
		size_t row = tf_row(&t);
		const char *v = vals[r % 10];
		sl_batch_set_str(&t.b, row, 0, v, strlen(v));
		sl_batch_set_str(&t.b, row, 1, "", 0);
	}
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	/* unsigned bytewise order: "" is the min, the emoji (0xf0) the max */
	CHECK(t.f.leaves[0].chunks[0].nmin == 0);
	CHECK(t.f.leaves[0].chunks[0].nmax == 4 && t.f.leaves[0].chunks[0].max[0] == 0xf0);
	CHECK(t.f.leaves[1].chunks[0].has_minmax && t.f.leaves[1].chunks[0].nmax == 0);
	tf_release(&t);

	/* a string longer than 4 KiB as the max: no min/max, values intact */
	tf_init(&t, "s:s");
	char big[6000];
	memset(big, 'z', sizeof(big));
	sl_batch_set_str(&t.b, tf_row(&t), 0, "a", 1);
	sl_batch_set_str(&t.b, tf_row(&t), 0, big, sizeof(big));
	CHECK_OK(tf_roundtrip(&t, &none_opts, NULL, 0));
	CHECK(!t.f.leaves[0].chunks[0].has_minmax);
	tf_release(&t);
}

static void test_extremes(void)
{
	struct tfile t;
	const int64_t i64[] = { INT64_MIN, INT64_MAX, 0, -1, 1 };
	const int64_t i32[] = { INT32_MIN, INT32_MAX, 0, -1, 1 };
	const int64_t ts[] = { INT64_MIN / 2, -62135596800000000, 253402300799999999, 0, -1 };
	const int64_t days[] = { INT32_MIN, INT32_MAX, -719162, 2932896, 0 };
	tf_init(&t, "l:b,i:i,t:t,a:a,o:o");
	for (size_t r = 0; r < 5; r++) {
		size_t row = tf_row(&t);
		sl_batch_set_int(&t.b, row, 0, i64[r]);
		sl_batch_set_int(&t.b, row, 1, i32[r]);
		sl_batch_set_int(&t.b, row, 2, ts[r]);
		sl_batch_set_int(&t.b, row, 3, days[r]);
		sl_batch_set_int(&t.b, row, 4, 1);
	}
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	/* signed order: INT64_MIN is the min */
	CHECK(t.f.leaves[0].chunks[0].min[7] == 0x80 && t.f.leaves[0].chunks[0].max[7] == 0x7f);
	CHECK(t.f.leaves[1].chunks[0].nmin == 4 && t.f.leaves[1].chunks[0].min[3] == 0x80);
	/* an all-true boolean: min = max = 1, one byte */
	CHECK(t.f.leaves[4].chunks[0].nmin == 1 && t.f.leaves[4].chunks[0].min[0] == 1);
	tf_release(&t);
}

static double stat_double(const uint8_t *p)
{
	uint64_t u = pqr_le64(p);
	double d;
	memcpy(&d, &u, 8);
	return d;
}

static void test_doubles(void)
{
	struct tfile t;
	const double v[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_MIN / 4, -DBL_MIN / 4,
			     DBL_MAX, -DBL_MAX, 1.5, -NAN };
	tf_init(&t, "d:d,z:d,n:d");
	for (size_t r = 0; r < sizeof(v) / sizeof(v[0]); r++) {
		size_t row = tf_row(&t);
		sl_batch_set_double(&t.b, row, 0, v[r]);
		sl_batch_set_double(&t.b, row, 1, r % 2 ? 0.0 : -0.0);
		sl_batch_set_double(&t.b, row, 2, NAN);
	}
	CHECK_OK(tf_roundtrip(&t, &none_opts, NULL, 0));
	const struct pqr_chunk *c = &t.f.leaves[0].chunks[0];
	CHECK(stat_double(c->min) == -INFINITY && stat_double(c->max) == INFINITY);
	CHECK(c->nan_count == 2);
	/* zeros only: -0.0 min, +0.0 max */
	c = &t.f.leaves[1].chunks[0];
	CHECK(signbit(stat_double(c->min)) && !signbit(stat_double(c->max)));
	/* NaN only: no min/max, nan_count set */
	c = &t.f.leaves[2].chunks[0];
	CHECK(!c->has_minmax && c->nan_count == 11 && c->null_count == 0);
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	tf_release(&t);
}

static void test_windows(void)
{
	struct tfile t;
	tf_init(&t, "k:s,window:w");
	for (size_t r = 0; r < 30; r++) {
		size_t row = tf_row(&t);
		sl_batch_set_str(&t.b, row, 0, "k", 1);
		if (r % 4 == 1)
			continue; /* a null window */
		sl_batch_set_window(&t.b, row, 1, INT64_MIN + (int64_t)r, INT64_MAX - (int64_t)r);
	}
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	CHECK(t.f.leaves[1].max_def == 2 && t.f.leaves[1].chunks[0].null_count == 8);
	CHECK(strcmp(t.f.leaves[2].path[0], "window") == 0 && strcmp(t.f.leaves[2].path[1], "end") == 0);
	tf_release(&t);
}

static void test_row_groups(void)
{
	struct tfile t;
	fill_types(&t, 5000);
	for (size_t r = 0; r < 5000; r += 13)
		sl_batch_set_null(&t.b, r, r % 8);
	struct sl_pq_opts o = { .codec = SL_COMPRESSION_ZSTD, .row_group_bytes = 8192 };
	CHECK_OK(tf_roundtrip(&t, &o, NULL, 0));
	CHECK(t.f.nrg > 3);
	int64_t sum = 0;
	for (size_t g = 0; g < t.f.nrg; g++) {
		CHECK(t.f.rg_rows[g] > 0);
		sum += t.f.rg_rows[g];
	}
	CHECK(sum == 5000);
	/* small pages: several pages per chunk */
	struct sl_pq_opts p = { .codec = SL_COMPRESSION_NONE, .page_bytes = 512 };
	CHECK_OK(tf_roundtrip(&t, &p, NULL, 0));
	CHECK(t.f.nrg == 1 && t.f.leaves[1].chunks[0].plain_pages > 10);
	CHECK(t.f.leaves[0].chunks[0].rledict_pages > 1);
	tf_release(&t);
}

static void test_dict_fallback(void)
{
	struct tfile t;
	tf_init(&t, "s:s");
	for (size_t r = 0; r < 3000; r++) {
		char s[64];
		int n = snprintf(s, sizeof(s), "distinct-%05zu-%s", r, r % 2 ? "odd" : "even");
		sl_batch_set_str(&t.b, tf_row(&t), 0, s, (size_t)n);
	}
	sl_batch_set_null(&t.b, 100, 0);
	sl_batch_set_null(&t.b, 2999, 0);
	struct sl_pq_opts o = { .codec = SL_COMPRESSION_ZSTD, .dict_bytes = 8192, .page_bytes = 4096 };
	CHECK_OK(tf_roundtrip(&t, &o, NULL, 0));
	const struct pqr_chunk *c = &t.f.leaves[0].chunks[0];
	CHECK(c->dict_pages == 1 && c->rledict_pages >= 1 && c->plain_pages >= 1);
	CHECK(c->enc_dict && c->enc_plain);
	/* a dictionary too small for even one value: PLAIN only, no dictionary */
	struct sl_pq_opts tiny = { .codec = SL_COMPRESSION_NONE, .dict_bytes = 8 };
	CHECK_OK(tf_roundtrip(&t, &tiny, NULL, 0));
	c = &t.f.leaves[0].chunks[0];
	CHECK(c->dict_pages == 0 && !c->has_dict_off && !c->enc_dict);
	tf_release(&t);

	/* more than 64Ki distinct values with the default limits */
	tf_init(&t, "s:s");
	for (size_t r = 0; r < 70000; r++) {
		char s[16];
		int n = snprintf(s, sizeof(s), "%zu", r);
		sl_batch_set_str(&t.b, tf_row(&t), 0, s, (size_t)n);
	}
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	c = &t.f.leaves[0].chunks[0];
	CHECK(c->dict_pages == 1 && c->plain_pages >= 1);
	tf_release(&t);
}

static void test_empty(void)
{
	struct tfile t;
	fill_types(&t, 0);
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, NULL, 0));
	CHECK(t.f.nrg == 0 && t.f.num_rows == 0 && t.f.nleaves == 9);
	tf_release(&t);
	/* adding zero rows changes nothing */
	fill_types(&t, 10);
	struct sl_pq_writer *w;
	CHECK_OK(sl_pq_open(t.cols, t.src, t.ncols, NULL, memfile_write, &t.m, &w));
	CHECK_OK(sl_pq_add(w, &t.b, 3, 3));
	CHECK_OK(sl_pq_add_rows(w, &t.b, NULL, 0));
	CHECK_OK(sl_pq_close(w));
	CHECK(pqr_read(t.m.p, t.m.len, &t.f) == 0 && t.f.num_rows == 0 && t.f.nrg == 0);
	tf_release(&t);
}

static void test_add_rows(void)
{
	struct tfile t;
	fill_types(&t, 100);
	size_t idx[40];
	for (size_t i = 0; i < 40; i++)
		idx[i] = (i * 37) % 100; /* a subset, out of order */
	CHECK_OK(tf_roundtrip(&t, &zstd_opts, idx, 40));
	CHECK(t.f.num_rows == 40);
	tf_release(&t);
}

static void test_errors(void)
{
	struct tfile t;
	struct sl_pq_writer *w = NULL;
	fill_types(&t, 500);
	CHECK(sl_pq_open(t.cols, t.src, 0, NULL, memfile_write, &t.m, &w) == EINVAL && !w);
	struct sl_pq_opts bad = { .codec = (enum sl_compression)7 };
	CHECK(sl_pq_open(t.cols, t.src, t.ncols, &bad, memfile_write, &t.m, &w) == EINVAL && !w);
	/* a batch column of another type */
	size_t src[1] = { 1 };
	char x_name[] = "x";
	struct sl_column c1 = { .name = x_name, .type = SL_TYPE_STRING };
	CHECK_OK(sl_pq_open(&c1, src, 1, NULL, memfile_write, &t.m, &w));
	CHECK(sl_pq_add(w, &t.b, 0, 1) == EINVAL);
	sl_pq_abort(w);
	sl_pq_abort(NULL);
	/* every write failing in turn: the error comes back, and sticks */
	struct sl_pq_opts o = { .codec = SL_COMPRESSION_ZSTD, .row_group_bytes = 4096 };
	for (int n = 1; n < 200; n++) {
		free(t.m.p);
		memset(&t.m, 0, sizeof(t.m));
		t.m.fail_at = n;
		CHECK_OK(sl_pq_open(t.cols, t.src, t.ncols, &o, memfile_write, &t.m, &w));
		int rc = sl_pq_add(w, &t.b, 0, 500);
		if (rc) {
			CHECK(rc == EIO);
			CHECK(sl_pq_add(w, &t.b, 0, 1) == EIO);
			CHECK(sl_pq_close(w) == EIO);
			continue;
		}
		rc = sl_pq_close(w);
		if (t.m.writes < n) {
			CHECK(rc == 0); /* fewer writes than n: done */
			break;
		}
		CHECK(rc == EIO);
	}
	tf_release(&t);
}

int main(void)
{
	test(test_types);
	test(test_src_order);
	test(test_nulls);
	test(test_strings);
	test(test_extremes);
	test(test_doubles);
	test(test_windows);
	test(test_row_groups);
	test(test_dict_fallback);
	test(test_empty);
	test(test_add_rows);
	test(test_errors);
	return test_exit();
}
